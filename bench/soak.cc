// The soak (issue 16 item 5): a long gba run of many light workers with transient stragglers
// and one worker SIGKILLed and restarted every minute, watched from outside:
//
//   syncopate-soak [--duration=10m] [--workers=64] [--shards=4] [--out=bench-results/soak]
//
// Passes when, after warm-up, the coordinator's and every shard's RSS grew < 5%, no process
// logged an ERROR, no shard rejected anything the kills do not explain, no shard's version stood
// still for two heartbeat timeouts, no child exited on its own and the job was still running.
// Prints a summary table and exits 0 (passed), 1 (a criterion failed), 2 (could not run) or 3
// (SIGTERM/SIGINT: children stopped, summary of what was seen). The evidence stays in --out:
// summary.md, timeline.csv (one line per sample) and run/logs/.
//
// "Light" workers: the default MLP narrowed to one hidden layer of 32 (25k parameters, 100 KB),
// a 10k-example subset in blocks of 100, and G = 16 x workers (16 examples per worker step), so
// 64 worker processes plus the shards fit two shared cores and each one's resident set is tens
// of MiB, not the full data set's hundreds.
#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/soak_report.h"
#include "libs/coordinator/coordinator_core.h"
#include "libs/job/job_spec.h"
#include "libs/launch/local_cluster.h"
#include "libs/launch/observe.h"
#include "libs/runtime/process_runtime.h"

ABSL_FLAG(absl::Duration, duration, absl::Minutes(10), "How long the soak runs after start-up");
ABSL_FLAG(absl::Duration, warmup, absl::Minutes(2), "RSS growth is measured from here on");
ABSL_FLAG(absl::Duration, kill_every, absl::Minutes(1),
          "One worker SIGKILLed and restarted this often");
ABSL_FLAG(int, workers, 64, "Worker processes");
ABSL_FLAG(int, shards, 4, "Parameter shards");
ABSL_FLAG(int, stragglers, 8, "Workers that are transiently slow (15 s in every minute)");
ABSL_FLAG(double, straggler_factor, 4, "How much slower a straggler is while slow");
ABSL_FLAG(absl::Duration, sample_every, absl::Seconds(1), "RSS, metrics and status period");
ABSL_FLAG(std::string, out, "bench-results/soak", "Results directory");
ABSL_FLAG(std::string, bin_dir, "", "Directory of the service binaries (default: next to this)");
ABSL_FLAG(uint64_t, seed, 1, "Seed for the kill victims and the stragglers");
ABSL_FLAG(std::string, wire_precision, "float32",
          "Dense wire between workers and shards: float32 | bfloat16 (JobSpec.wire_precision)");

namespace syncopate::bench {
namespace {

// A scrape or a status call that takes longer than this counts as failed for that sample (the
// gap then shows up as a stall if it lasts); it keeps every wait of the loop bounded.
constexpr absl::Duration kProbeTimeout = absl::Seconds(2);

v1::JobSpec LightJob(int workers, int shards) {
  v1::JobSpec job = *job::ParseJobSpec(job::DefaultJobText());
  job.set_job_id("soak");
  job.mutable_model()->clear_hidden();
  job.mutable_model()->add_hidden(32);
  job.mutable_dataset()->set_train_limit(10000);
  job.mutable_dataset()->set_test_limit(1000);
  job.set_block_size(100);
  job.set_num_workers(workers);
  job.set_num_shards(shards);
  job.set_global_batch(16 * workers);
  job.set_mode(v1::MODE_GBA);
  // Never reached: the soak ends the run itself. A constant rate, because a schedule derived
  // from this stop condition would still be warming up at the end.
  job.mutable_stop()->set_epochs(1000000);
  job.mutable_optimizer()->clear_schedule();
  job.mutable_eval()->set_interval_seconds(10);
  return job;
}

// Slow (x factor) for 15 s of every minute, phase-shifted per straggler so that some are slow
// at any moment; times count from the worker's start of training, so a restarted straggler
// begins its pattern again.
std::string StragglerSchedule(int index, int stragglers, double factor, absl::Duration until) {
  const double period = 60, slow = 15;
  const double offset = period * index / std::max(1, stragglers);
  std::vector<std::string> steps;
  if (offset > 0) steps.emplace_back("0s:1");
  for (double t = offset; t < absl::ToDoubleSeconds(until) + period; t += period) {
    steps.push_back(absl::StrFormat("%.0fs:%g", t, factor));
    steps.push_back(absl::StrFormat("%.0fs:1", t + slow));
  }
  return absl::StrJoin(steps, ",");
}

// ERROR and FATAL lines (glog's "E20261126 ..." / "F..." prefix) and crash reports ("*** ").
bool IsErrorLine(const std::string& line) {
  if (absl::StartsWith(line, "*** ")) return true;
  return line.size() > 5 && (line[0] == 'E' || line[0] == 'F') &&
         std::all_of(line.begin() + 1, line.begin() + 5, absl::ascii_isdigit);
}

void CountLogErrors(const std::string& logs, SoakRun& run) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(logs, error)) {
    if (entry.path().extension() != ".log") continue;
    std::ifstream in(entry.path());
    std::string line;
    int& count = run.log_errors[entry.path().stem().string()];
    while (std::getline(in, line)) {
      if (!IsErrorLine(line)) continue;
      ++count;
      if (run.first_errors.size() < 5) {
        run.first_errors.push_back(absl::StrCat(entry.path().stem().string(), ": ", line));
      }
    }
  }
}

// The value of label `label` in a sample line (`name{a="x",b="y"} 3`), or "".
std::string LabelValue(absl::string_view line, absl::string_view label) {
  const std::string key = absl::StrCat(label, "=\"");
  const size_t start = line.find(key);
  if (start == absl::string_view::npos) return "";
  const size_t from = start + key.size();
  const size_t end = line.find('"', from);
  return end == absl::string_view::npos ? "" : std::string(line.substr(from, end - from));
}

// One shard's version and rejection counters into `sample`; nothing if the scrape fails.
void ScrapeShard(const std::string& shard, int port, SoakSample& sample) {
  absl::StatusOr<std::string> text = launch::HttpRequest(port, "GET /metrics", kProbeTimeout);
  if (!text.ok()) return;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    const bool version = absl::StartsWith(line, "syncopate_shard_version{");
    const bool rejection = absl::StartsWith(line, "syncopate_shard_rejections_total{");
    if (!version && !rejection) continue;
    const size_t space = line.rfind(' ');
    double value = 0;
    if (space == absl::string_view::npos || !absl::SimpleAtod(line.substr(space + 1), &value)) {
      continue;
    }
    if (version) sample.versions[shard] = value;
    if (rejection) sample.rejections[{shard, LabelValue(line, "reason")}] = value;
  }
}

int Main() {
  const absl::Duration duration = absl::GetFlag(FLAGS_duration);
  const int workers = absl::GetFlag(FLAGS_workers);
  const int shards = absl::GetFlag(FLAGS_shards);
  const int stragglers = std::min(absl::GetFlag(FLAGS_stragglers), workers);
  if (workers < 1 || shards < 1 || stragglers < 0 || duration <= absl::ZeroDuration() ||
      !(absl::GetFlag(FLAGS_straggler_factor) >= 1) ||
      absl::GetFlag(FLAGS_sample_every) <= absl::ZeroDuration()) {
    fprintf(stderr,
            "syncopate-soak: need --workers, --shards >= 1, --stragglers >= 0, "
            "--straggler_factor >= 1, positive --duration and --sample_every\n");
    return 2;
  }
  const std::string wire = absl::GetFlag(FLAGS_wire_precision);
  if (wire != "float32" && wire != "bfloat16") {
    fprintf(stderr, "syncopate-soak: --wire_precision must be float32 or bfloat16, got '%s'\n",
            wire.c_str());
    return 2;
  }
  SoakCriteria criteria;
  criteria.warmup = absl::GetFlag(FLAGS_warmup);
  // A short run still gets both RSS windows: a quarter of what follows warm-up, at most 1 min.
  criteria.rss_window =
      std::min(absl::Minutes(1), std::max(absl::ZeroDuration(), duration - criteria.warmup) / 4);
  // Two heartbeat timeouts: the coordinator declares a silent worker gone after
  // max(min_silence_timeout, 10 median steps); light workers step in milliseconds.
  criteria.max_stall = 2 * coordinator::CoordinatorOptions().min_silence_timeout;
  criteria.kill_window = criteria.max_stall;

  const std::string out = absl::GetFlag(FLAGS_out);
  launch::LocalClusterOptions options;
  options.job = LightJob(workers, shards);
  options.job.set_wire_precision(wire == "bfloat16" ? v1::WIRE_BFLOAT16 : v1::WIRE_FLOAT32);
  options.bin_dir = absl::GetFlag(FLAGS_bin_dir).empty() ? runtime::ExecutableDir()
                                                         : absl::GetFlag(FLAGS_bin_dir);
  options.run_dir = out + "/run";
  options.ready_timeout = absl::Seconds(60);
  std::mt19937_64 rng(absl::GetFlag(FLAGS_seed));
  std::vector<int> order(workers);
  for (int w = 0; w < workers; ++w) order[w] = w;
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int> straggling(order.begin(), order.begin() + stragglers);
  std::sort(straggling.begin(), straggling.end());
  for (int i = 0; i < stragglers; ++i) {
    options.slowdown_schedules[straggling[i]] = StragglerSchedule(
        i, stragglers, absl::GetFlag(FLAGS_straggler_factor), duration + absl::Minutes(2));
  }
  std::error_code error;
  std::filesystem::remove_all(options.run_dir, error);
  std::filesystem::create_directories(out, error);
  std::ofstream timeline(out + "/timeline.csv");
  if (!timeline) {
    fprintf(stderr, "syncopate-soak: cannot write %s/timeline.csv\n", out.c_str());
    return 2;
  }
  printf(
      "soak: %d workers (stragglers %s, x%g for 15 s a minute), %d shards, gba, %s; a worker "
      "killed every %s; warm-up %s; stall limit %s; run dir %s\n",
      workers, absl::StrJoin(straggling, ",").c_str(), absl::GetFlag(FLAGS_straggler_factor),
      shards, absl::FormatDuration(duration).c_str(),
      absl::FormatDuration(absl::GetFlag(FLAGS_kill_every)).c_str(),
      absl::FormatDuration(criteria.warmup).c_str(),
      absl::FormatDuration(criteria.max_stall).c_str(), options.run_dir.c_str());
  fflush(stdout);

  // Start-up is bounded by the ready timeout per child; a SIGTERM during it is acted on as
  // soon as it returns (the cluster's destructor stops whatever did start).
  absl::StatusOr<std::unique_ptr<launch::LocalCluster>> started =
      launch::LocalCluster::Start(options);
  if (!started.ok()) {
    fprintf(stderr, "syncopate-soak: cluster did not start: %s\n",
            started.status().ToString().c_str());
    return 2;
  }
  launch::LocalCluster& cluster = **started;
  std::vector<std::string> watched = {"coordinator"};
  for (int s = 0; s < shards; ++s) watched.push_back(launch::LocalCluster::ShardName(s));
  timeline << "seconds,examples";
  for (const std::string& name : watched) timeline << "," << name << "_rss_mib";
  for (int s = 0; s < shards; ++s) timeline << ",shard-" << s << "_version";
  timeline << ",rejections\n";

  SoakRun run;
  run.duration = duration;
  run.workers = workers;
  run.shards = shards;
  std::vector<SoakSample> samples;
  bool interrupted = false;
  const absl::Time start = absl::Now();
  absl::Time next_kill = start + absl::GetFlag(FLAGS_kill_every);
  absl::Time next_report = start + absl::Seconds(30);
  auto note_exits = [&] {
    for (const launch::Exit& exit : cluster.Reap()) run.unexpected_exits.push_back(exit.Describe());
  };
  while (absl::Now() - start < duration) {
    if (runtime::WaitForShutdown(absl::GetFlag(FLAGS_sample_every))) {
      interrupted = true;
      break;
    }
    note_exits();
    if (absl::Now() >= next_kill) {
      next_kill += absl::GetFlag(FLAGS_kill_every);
      const std::string victim =
          launch::LocalCluster::WorkerName(static_cast<int>(rng() % workers));
      run.kills.push_back(absl::Now() - start);
      const absl::Status restarted = cluster.KillAndRestart(victim);
      if (!restarted.ok()) run.kill_failures.push_back(std::string(restarted.message()));
      printf("  %5.0f s: killed and restarted %s%s\n", absl::ToDoubleSeconds(run.kills.back()),
             victim.c_str(), restarted.ok() ? "" : (": " + restarted.ToString()).c_str());
      fflush(stdout);
    }
    SoakSample sample;
    sample.at = absl::Now() - start;
    for (const std::string& name : watched) {
      absl::StatusOr<int64_t> rss = launch::ResidentBytes(cluster.processes().Pid(name));
      if (rss.ok()) sample.rss[name] = *rss;
    }
    for (int s = 0; s < shards; ++s) {
      const std::string name = launch::LocalCluster::ShardName(s);
      auto port = cluster.metrics_ports().find(name);
      if (port != cluster.metrics_ports().end()) ScrapeShard(name, port->second, sample);
    }
    absl::StatusOr<v1::ClusterStatus> status = cluster.Status(kProbeTimeout);
    if (status.ok()) {
      run.examples = status->examples();
      run.accuracy = status->last_eval().accuracy();
      run.job_running_at_end = status->state() == v1::JOB_RUNNING;
    }
    double rejected = 0;
    for (const auto& [key, value] : sample.rejections) rejected += value;
    timeline << absl::StrFormat("%.1f,%d", absl::ToDoubleSeconds(sample.at), run.examples);
    for (const std::string& name : watched) {
      auto it = sample.rss.find(name);
      timeline << "," << (it == sample.rss.end() ? -1.0 : it->second / (1024.0 * 1024.0));
    }
    for (int s = 0; s < shards; ++s) {
      auto it = sample.versions.find(launch::LocalCluster::ShardName(s));
      timeline << "," << (it == sample.versions.end() ? -1.0 : it->second);
    }
    timeline << "," << rejected << "\n";
    timeline.flush();
    if (absl::Now() >= next_report) {
      next_report += absl::Seconds(30);
      auto rss = sample.rss.find("coordinator");
      printf("  %5.0f s: %d examples, accuracy %.2f%%, coordinator RSS %.1f MiB, %.0f rejections\n",
             absl::ToDoubleSeconds(sample.at), static_cast<int>(run.examples), 100 * run.accuracy,
             rss == sample.rss.end() ? -1.0 : rss->second / (1024.0 * 1024.0), rejected);
      fflush(stdout);
    }
    samples.push_back(std::move(sample));
  }
  note_exits();
  // KillAndRestart reaps while it waits for its victim, so another child's exit in that moment
  // would go unnoticed above: every child must still be running now.
  std::vector<std::string> children = watched;
  children.emplace_back("evaluator");
  double worker_rss = 0;
  int worker_rss_n = 0;
  for (int w = 0; w < workers; ++w) {
    children.push_back(launch::LocalCluster::WorkerName(w));
    absl::StatusOr<int64_t> rss = launch::ResidentBytes(cluster.processes().Pid(children.back()));
    if (rss.ok()) {
      worker_rss += static_cast<double>(*rss) / (1024.0 * 1024.0);
      ++worker_rss_n;
    }
  }
  run.worker_rss_mib = worker_rss_n > 0 ? worker_rss / worker_rss_n : 0;
  for (const std::string& name : children) {
    if (!cluster.processes().Running(name)) {
      const std::string gone = name + " is not running at the end";
      if (std::find_if(run.unexpected_exits.begin(), run.unexpected_exits.end(),
                       [&name](const std::string& e) { return absl::StartsWith(e, name + " "); }) ==
          run.unexpected_exits.end()) {
        run.unexpected_exits.push_back(gone);
      }
    }
  }
  // Errors are counted before the shutdown below: what children log while being stopped is
  // not the soak's business.
  CountLogErrors(options.run_dir + "/logs", run);
  for (const launch::Exit& exit : cluster.Stop()) {
    if (!(WIFEXITED(exit.status) && WEXITSTATUS(exit.status) == 0) &&
        !(WIFSIGNALED(exit.status) && WTERMSIG(exit.status) == SIGTERM)) {
      printf("  at stop: %s\n", exit.Describe().c_str());
    }
  }
  if (interrupted) {
    run.interrupted = true;
    run.duration = absl::Now() - start;
  }
  const SoakVerdict verdict = Judge(samples, run, criteria);
  const std::string summary = SoakSummary(verdict, run, criteria);
  printf("\n%s", summary.c_str());
  std::ofstream(out + "/summary.md") << summary;
  printf("timeline: %s/timeline.csv, logs: %s/logs/\n", out.c_str(), options.run_dir.c_str());
  if (interrupted) {
    printf("soak: interrupted after %s; every child stopped\n",
           absl::FormatDuration(absl::Trunc(run.duration, absl::Seconds(1))).c_str());
    return 3;
  }
  return verdict.failures.empty() ? 0 : 1;
}

}  // namespace
}  // namespace syncopate::bench

int main(int argc, char** argv) {
  syncopate::runtime::InitProcess(argc, argv, "syncopate-soak [--duration=10m] [flags]");
  return syncopate::bench::Main();
}
