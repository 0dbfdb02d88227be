// syncopate: the user's command line.
//   syncopate local  [flags]              train a job on a local cluster of child processes
//   syncopate status --coordinator=H:P     live view of a running cluster
//   syncopate health --address=H:P         exit 0 iff the server's gRPC health check says SERVING
//   syncopate datagen ctr --rows=N --out=F  a synthetic Criteo-format click file
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "libs/data/ctr_generator.h"
#include "libs/job/job_spec.h"
#include "libs/launch/local_cluster.h"
#include "libs/launch/prometheus_config.h"
#include "libs/rpc/grpc_util.h"
#include "libs/runtime/process_runtime.h"
#include "libs/shard/shard_metrics.h"
#include "libs/worker/slowdown_schedule.h"

ABSL_FLAG(std::string, job, "", "Job spec file (text proto); empty = the built-in default job");
ABSL_FLAG(int, workers, 0, "Override the job's number of workers");
ABSL_FLAG(int, shards, 0, "Override the job's number of shards");
ABSL_FLAG(int, epochs, 0, "Override the job's epochs");
ABSL_FLAG(std::string, mode, "", "Override the aggregation mode: sync | gba | async");
ABSL_FLAG(int, global_batch, 0, "Override the global batch G");
ABSL_FLAG(std::string, slowdowns, "",
          "Per-worker slowdown factors, e.g. 1,1,1,4 (worker 3 four times slower)");
ABSL_FLAG(std::string, slowdown_schedule, "",
          "Time-varying slowdown of one worker, INDEX@SCHEDULE, e.g. 3@0s:1,20s:4,60s:1 "
          "(worker 3 is 4x slower from 20 s to 60 s); repeat with ';' for more workers");
ABSL_FLAG(int64_t, train_limit, -1, "Use only the first N training examples (0 = all)");
ABSL_FLAG(int64_t, test_limit, -1, "Evaluate on the first N test examples (0 = all)");
ABSL_FLAG(bool, evaluator, true, "Run an evaluator");
ABSL_FLAG(std::string, run_dir, "", "Where logs and reports go (default runs/<timestamp>)");
ABSL_FLAG(std::string, resume, "",
          "Start from the checkpoints of an earlier run directory (any number of shards)");
ABSL_FLAG(std::string, bin_dir, "", "Directory of the service binaries (default: next to this)");
ABSL_FLAG(int, timeout_seconds, 3600, "Give up (exit 1) if the job has not finished by then");
ABSL_FLAG(bool, prometheus, false,
          "Also run Debian's Prometheus (/usr/bin/prometheus) on a free loopback port, scraping "
          "every process of the run, until the run ends");
ABSL_FLAG(bool, insecure_no_join_token, false,
          "local: do not generate a join token for the run (anyone who can reach the loopback "
          "ports, e.g. another user of this machine, could then join the job)");
ABSL_FLAG(std::string, coordinator, "127.0.0.1:7070", "status: the coordinator's address");
ABSL_FLAG(std::string, address, "127.0.0.1:7070", "health: the server to check (host:port)");
ABSL_FLAG(int, health_timeout_seconds, 3, "health: give up (exit 1) after this long");
ABSL_FLAG(int64_t, rows, 0, "datagen: number of examples to write (>= 1)");
ABSL_FLAG(std::string, out, "", "datagen: output file (gzip when it ends in .gz)");
ABSL_FLAG(uint64_t, seed, 1, "datagen: sample seed (the rows and labels drawn)");
ABSL_FLAG(uint64_t, teacher_seed, 1,
          "datagen: teacher seed (the model behind the clicks; train and test files share it)");

namespace syncopate::cli {
namespace {

using launch::LocalCluster;

constexpr char kPrometheusBinary[] = "/usr/bin/prometheus";

// A loopback port that was free a moment ago (Prometheus takes its port as a flag; a race with
// another process taking it in between is possible and reported by Prometheus' log).
absl::StatusOr<int> FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::UnavailableError("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  close(fd);
  if (!ok) return absl::UnavailableError("no free loopback port");
  return ntohs(addr.sin_port);
}

// Writes <run_dir>/prometheus.yml for the cluster's metrics ports and, if asked, starts
// Prometheus on it in `group`. Returns Prometheus' URL, or "" when only the config was written.
absl::StatusOr<std::string> SetUpPrometheus(const LocalCluster& cluster, const std::string& run_dir,
                                            bool start, launch::ProcessGroup& group) {
  const std::string config = run_dir + "/prometheus.yml";
  {
    // The alert rules of deploy/prometheus/rules.yml, next to the configuration that loads them.
    std::ofstream rules(run_dir + "/rules.yml");
    rules << launch::AlertRules();
    if (!rules) return absl::UnavailableError("cannot write " + run_dir + "/rules.yml");
    std::ofstream out(config);
    out << launch::LocalPrometheusConfig(cluster.metrics_ports(), absl::Seconds(1), "rules.yml");
    if (!out) return absl::UnavailableError("cannot write " + config);
  }
  if (!start) return "";
  absl::StatusOr<int> port = FreeLoopbackPort();
  if (!port.ok()) return port.status();
  const std::string listen = absl::StrCat("127.0.0.1:", *port);
  absl::StatusOr<pid_t> pid = group.Spawn(
      {"prometheus",
       {kPrometheusBinary, "--config.file=" + config,
        "--storage.tsdb.path=" + run_dir + "/prometheus-data", "--web.listen-address=" + listen},
       run_dir + "/logs/prometheus.log"});
  if (!pid.ok()) return pid.status();
  return "http://" + listen;
}

std::string ModeList(const v1::ClusterStatus& status) {
  std::vector<std::string> parts;
  for (const v1::ShardStatus& s : status.shards()) {
    parts.push_back(absl::StrCat("v", s.version(), " ", shard::ModeName(s.mode())));
  }
  return absl::StrJoin(parts, ", ");
}

std::string ProgressLine(const v1::ClusterStatus& status) {
  std::string accuracy = "-";
  if (status.has_last_eval()) {
    accuracy = absl::StrFormat("%.2f%% auc %.4f", 100 * status.last_eval().accuracy(),
                               status.last_eval().auc());
  }
  return absl::StrFormat("[%6.1fs] epoch %.2f  examples %d  %.0f ex/s  shards: %s  test acc %s",
                         status.elapsed_seconds(), status.epoch(), status.examples(),
                         status.examples_per_second(), ModeList(status), accuracy);
}

absl::StatusOr<v1::JobSpec> JobFromFlags() {
  const std::string path = absl::GetFlag(FLAGS_job);
  absl::StatusOr<v1::JobSpec> job =
      path.empty() ? job::ParseJobSpec(job::DefaultJobText()) : job::LoadJobSpecFile(path);
  if (!job.ok()) return job.status();
  if (absl::GetFlag(FLAGS_workers) > 0) job->set_num_workers(absl::GetFlag(FLAGS_workers));
  if (absl::GetFlag(FLAGS_shards) > 0) job->set_num_shards(absl::GetFlag(FLAGS_shards));
  if (absl::GetFlag(FLAGS_epochs) > 0) job->mutable_stop()->set_epochs(absl::GetFlag(FLAGS_epochs));
  if (absl::GetFlag(FLAGS_global_batch) > 0)
    job->set_global_batch(absl::GetFlag(FLAGS_global_batch));
  if (absl::GetFlag(FLAGS_train_limit) >= 0) {
    job->mutable_dataset()->set_train_limit(absl::GetFlag(FLAGS_train_limit));
  }
  if (absl::GetFlag(FLAGS_test_limit) >= 0) {
    job->mutable_dataset()->set_test_limit(absl::GetFlag(FLAGS_test_limit));
  }
  if (!absl::GetFlag(FLAGS_mode).empty()) {
    absl::StatusOr<v1::Mode> mode = job::ParseMode(absl::GetFlag(FLAGS_mode));
    if (!mode.ok()) return mode.status();
    job->set_mode(*mode);
  }
  absl::Status valid = job::ValidateJobSpec(*job);
  if (!valid.ok()) return valid;
  return job;
}

absl::StatusOr<std::vector<double>> SlowdownsFromFlag(int workers) {
  std::vector<double> slowdowns;
  const std::string text = absl::GetFlag(FLAGS_slowdowns);
  if (text.empty()) return slowdowns;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    double f = 0;
    if (!absl::SimpleAtod(part, &f) || !(f >= 1.0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--slowdowns: '", part, "' is not a factor >= 1"));
    }
    slowdowns.push_back(f);
  }
  if (static_cast<int>(slowdowns.size()) > workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("--slowdowns lists ", slowdowns.size(), " factors for ", workers, " workers"));
  }
  return slowdowns;
}

// "3@0s:1,20s:4,60s:1;1@0s:2" -> {3: "0s:1,20s:4,60s:1", 1: "0s:2"}; each schedule is checked
// here so a typo fails at start rather than in a child's log.
absl::StatusOr<std::map<int, std::string>> SchedulesFromFlag(int workers) {
  std::map<int, std::string> schedules;
  const std::string text = absl::GetFlag(FLAGS_slowdown_schedule);
  if (text.empty()) return schedules;
  for (absl::string_view entry : absl::StrSplit(text, ';')) {
    std::pair<absl::string_view, absl::string_view> parts = absl::StrSplit(entry, '@');
    int index = -1;
    if (!absl::SimpleAtoi(parts.first, &index) || index < 0 || index >= workers) {
      return absl::InvalidArgumentError(absl::StrCat("--slowdown_schedule: '", entry,
                                                     "' must be INDEX@SCHEDULE with INDEX in [0, ",
                                                     workers, ")"));
    }
    absl::StatusOr<worker::SlowdownSchedule> parsed = worker::SlowdownSchedule::Parse(parts.second);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--slowdown_schedule: ", parsed.status().message()));
    }
    schedules[index] = std::string(parts.second);
  }
  return schedules;
}

void WriteReports(const std::string& run_dir, const v1::ClusterStatus& status, double wall_seconds,
                  const std::vector<double>& slowdowns) {
  const double training = status.elapsed_seconds();
  const double rate = training > 0 ? static_cast<double>(status.examples()) / training : 0;
  const bool has_eval = status.has_last_eval();
  std::ofstream json(run_dir + "/report.json");
  json << "{\n";
  json << absl::StrFormat("  \"job_id\": \"%s\",\n", status.job_id());
  json << absl::StrFormat("  \"mode\": \"%s\",\n", shard::ModeName(status.job_mode()));
  json << absl::StrFormat("  \"state\": \"%s\",\n", v1::JobState_Name(status.state()));
  if (has_eval) {
    json << absl::StrFormat("  \"final_accuracy\": %.6f,\n", status.last_eval().accuracy());
    json << absl::StrFormat("  \"final_loss\": %.6f,\n", status.last_eval().loss());
    json << absl::StrFormat("  \"final_auc\": %.6f,\n", status.last_eval().auc());
  } else {
    json << "  \"final_accuracy\": null,\n";
  }
  json << absl::StrFormat("  \"wall_seconds\": %.3f,\n", wall_seconds);
  json << absl::StrFormat("  \"training_seconds\": %.3f,\n", training);
  json << absl::StrFormat("  \"examples\": %d,\n", status.examples());
  json << absl::StrFormat("  \"examples_per_second\": %.1f,\n", rate);
  json << absl::StrFormat("  \"global_batch\": %d,\n", status.global_batch());
  json << "  \"workers\": [\n";
  std::vector<std::string> rows;
  int index = 0;
  for (const v1::WorkerStatus& w : status.workers()) {
    if (w.role() != v1::ROLE_WORKER) continue;
    const double slowdown = index < static_cast<int>(slowdowns.size()) ? slowdowns[index] : 1.0;
    ++index;
    rows.push_back(absl::StrFormat(
        "    {\"name\": \"%s\", \"examples\": %d, \"steps\": %d, \"median_compute_seconds\": "
        "%.5f, \"slowdown\": %.2f, \"alive_at_end\": %s}",
        w.name(), w.examples(), w.steps(), w.median_compute_seconds(), slowdown,
        w.alive() ? "true" : "false"));
  }
  json << absl::StrJoin(rows, ",\n") << "\n  ],\n  \"shards\": [\n";
  rows.clear();
  for (const v1::ShardStatus& s : status.shards()) {
    rows.push_back(absl::StrFormat(
        "    {\"shard\": %d, \"version\": %d, \"mode\": \"%s\", \"applied\": %d, \"dropped\": %d, "
        "\"rejected\": %d}",
        s.shard_id(), s.version(), shard::ModeName(s.mode()), s.gradients_applied(),
        s.gradients_dropped(), s.gradients_rejected()));
  }
  json << absl::StrJoin(rows, ",\n") << "\n  ],\n  \"eval_history\": [\n";
  rows.clear();
  for (const v1::EvalStatus& e : status.eval_history()) {
    rows.push_back(
        absl::StrFormat("    {\"accuracy\": %.6f, \"loss\": %.6f, \"auc\": %.6f, \"final\": %s, "
                        "\"shard_versions\": [%s]}",
                        e.accuracy(), e.loss(), e.auc(), e.final() ? "true" : "false",
                        absl::StrJoin(e.shard_versions(), ", ")));
  }
  json << absl::StrJoin(rows, ",\n") << "\n  ]\n}\n";

  std::ofstream md(run_dir + "/report.md");
  md << "# Syncopate run: " << status.job_id() << "\n\n";
  md << "| | |\n|---|---|\n";
  md << "| mode | " << shard::ModeName(status.job_mode()) << " |\n";
  md << "| final test accuracy | "
     << (has_eval ? absl::StrFormat("%.2f%%", 100 * status.last_eval().accuracy()) : "n/a")
     << " |\n";
  md << "| final test AUC / loss | "
     << (has_eval
             ? absl::StrFormat("%.4f / %.4f", status.last_eval().auc(), status.last_eval().loss())
             : "n/a")
     << " |\n";
  md << absl::StrFormat("| wall time | %.1f s (training %.1f s) |\n", wall_seconds, training);
  md << absl::StrFormat("| examples | %d (%.2f epochs) |\n", status.examples(), status.epoch());
  md << absl::StrFormat("| throughput | %.0f examples/s |\n\n", rate);
  md << "| worker | examples | steps | median compute (s) |\n|---|---|---|---|\n";
  for (const v1::WorkerStatus& w : status.workers()) {
    if (w.role() != v1::ROLE_WORKER) continue;
    md << absl::StrFormat("| %s | %d | %d | %.4f |\n", w.name(), w.examples(), w.steps(),
                          w.median_compute_seconds());
  }
  md << "\n| shard | version | mode |\n|---|---|---|\n";
  for (const v1::ShardStatus& s : status.shards()) {
    md << absl::StrFormat("| %d | %d | %s |\n", s.shard_id(), s.version(),
                          shard::ModeName(s.mode()));
  }
}

int Local() {
  absl::StatusOr<v1::JobSpec> job = JobFromFlags();
  if (!job.ok()) runtime::Die(std::string(job.status().message()));
  absl::StatusOr<std::vector<double>> slowdowns = SlowdownsFromFlag(job->num_workers());
  if (!slowdowns.ok()) runtime::Die(std::string(slowdowns.status().message()));
  absl::StatusOr<std::map<int, std::string>> schedules = SchedulesFromFlag(job->num_workers());
  if (!schedules.ok()) runtime::Die(std::string(schedules.status().message()));
  std::string run_dir = absl::GetFlag(FLAGS_run_dir);
  if (run_dir.empty()) {
    run_dir = "runs/" + absl::FormatTime("%Y%m%d-%H%M%S", absl::Now(), absl::LocalTimeZone());
  }
  std::string bin_dir = absl::GetFlag(FLAGS_bin_dir);
  if (bin_dir.empty()) bin_dir = runtime::ExecutableDir();
  if (absl::GetFlag(FLAGS_prometheus) && access(kPrometheusBinary, X_OK) != 0) {
    runtime::Die(absl::StrCat("--prometheus: ", kPrometheusBinary,
                              " not found; install it with: apt-get install prometheus"));
  }

  absl::StatusOr<rpc::SecurityConfig> security = rpc::SecurityFromFlags();
  if (!security.ok()) runtime::Die(std::string(security.status().message()));

  const absl::Time start = absl::Now();
  printf("syncopate local: job %s, %d workers, %d shards, mode %s, G=%d; run dir %s\n",
         job->job_id().c_str(), job->num_workers(), job->num_shards(),
         shard::ModeName(job->mode()).c_str(), job->global_batch(), run_dir.c_str());
  fflush(stdout);
  launch::LocalClusterOptions options;
  options.job = *job;
  options.bin_dir = bin_dir;
  options.run_dir = run_dir;
  options.slowdowns = *slowdowns;
  options.slowdown_schedules = *schedules;
  options.evaluator = absl::GetFlag(FLAGS_evaluator);
  options.tls = security->tls;
  options.join_token = security->join_token;
  // Secure by default: loopback ports are reachable by every user of the machine, so a run
  // without a token of its own gets a fresh one, handed to the children in a file (never argv).
  if (options.join_token.empty() && !absl::GetFlag(FLAGS_insecure_no_join_token)) {
    absl::StatusOr<std::string> token = rpc::GenerateJoinToken();
    if (!token.ok()) runtime::Die(std::string(token.status().message()), 1);
    options.join_token = *std::move(token);
  }
  if (!absl::GetFlag(FLAGS_resume).empty()) {
    options.restore_dir = absl::GetFlag(FLAGS_resume) + "/checkpoints";
  }
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(options);
  if (!cluster.ok()) {
    fprintf(stderr, "syncopate local: %s (logs in %s/logs)\n",
            std::string(cluster.status().message()).c_str(), run_dir.c_str());
    return 1;
  }
  printf("coordinator at %s; metrics:", (*cluster)->coordinator_address().c_str());
  for (const auto& [name, port] : (*cluster)->metrics_ports()) {
    printf(" %s=http://127.0.0.1:%d/metrics", name.c_str(), port);
  }
  printf("\n");
  if (!options.join_token.empty()) {
    printf(
        "join token in %s/join_token (mode 0600; a process joining by hand needs "
        "--join_token_file=%s/join_token)\n",
        run_dir.c_str(), run_dir.c_str());
  } else {
    printf("no join token: anyone who can reach these ports can join the job\n");
  }
  launch::ProcessGroup prometheus;  // stopped when this function returns
  absl::StatusOr<std::string> prometheus_url =
      SetUpPrometheus(**cluster, run_dir, absl::GetFlag(FLAGS_prometheus), prometheus);
  if (!prometheus_url.ok()) {
    fprintf(stderr, "syncopate local: prometheus: %s\n",
            std::string(prometheus_url.status().message()).c_str());
  } else if (!prometheus_url->empty()) {
    printf("prometheus at %s (config %s/prometheus.yml, log %s/logs/prometheus.log)\n",
           prometheus_url->c_str(), run_dir.c_str(), run_dir.c_str());
  }
  fflush(stdout);

  const absl::Time deadline = start + absl::Seconds(absl::GetFlag(FLAGS_timeout_seconds));
  // A child that keeps dying is a bug or a broken machine, not something to retry forever.
  constexpr int kMaxRestarts = 5;
  std::map<std::string, int> restarts;
  absl::Time next_print = absl::Now();
  v1::ClusterStatus last;
  int exit_code = 0;
  while (true) {
    if (runtime::WaitForShutdown(absl::Milliseconds(250))) {
      printf("interrupted; stopping the cluster\n");
      exit_code = 130;
      break;
    }
    for (const launch::Exit& exit : (*cluster)->processes().Reap()) {
      const bool clean = WIFEXITED(exit.status) && WEXITSTATUS(exit.status) == 0;
      if (!clean) printf("%s\n", exit.Describe().c_str());
      if (exit.name != "coordinator" && !exit.name.starts_with("shard-")) continue;
      // The supervisor: a shard or the coordinator dying before the job is done is started
      // again on its port (like compose's `restart:` or Kubernetes); a shard restores its latest
      // checkpoint, the coordinator its progress file, and everyone else reconnects.
      if (last.state() != v1::JOB_DONE && ++restarts[exit.name] <= kMaxRestarts) {
        absl::Status restarted = (*cluster)->Restart(exit.name);
        printf("restarting %s (restart %d of at most %d): %s\n", exit.name.c_str(),
               restarts[exit.name], kMaxRestarts,
               restarted.ok() ? "ok" : std::string(restarted.message()).c_str());
        if (restarted.ok()) continue;
      }
      if (clean && last.state() == v1::JOB_DONE) continue;
      fprintf(stderr, "syncopate local: %s died; see %s/logs/%s.log\n", exit.name.c_str(),
              run_dir.c_str(), exit.name.c_str());
      exit_code = 1;
    }
    if (exit_code != 0) break;
    for (const launch::Exit& exit : prometheus.Reap()) {
      fprintf(stderr, "syncopate local: prometheus stopped (%s); see %s/logs/prometheus.log\n",
              exit.Describe().c_str(), run_dir.c_str());
    }
    absl::StatusOr<v1::ClusterStatus> status = (*cluster)->Status();
    if (status.ok()) last = *status;
    if (absl::Now() >= next_print && status.ok()) {
      printf("%s\n", ProgressLine(last).c_str());
      fflush(stdout);
      next_print = absl::Now() + absl::Seconds(2);
    }
    if (status.ok() && last.state() == v1::JOB_DONE) break;
    if (absl::Now() > deadline) {
      fprintf(stderr, "syncopate local: timed out after %d s\n",
              absl::GetFlag(FLAGS_timeout_seconds));
      exit_code = 1;
      break;
    }
  }
  (*cluster)->Stop();
  prometheus.TerminateAll(absl::Seconds(5));
  const double wall = absl::ToDoubleSeconds(absl::Now() - start);
  WriteReports(run_dir, last, wall, *slowdowns);
  printf("%s\n", ProgressLine(last).c_str());
  if (last.has_last_eval()) {
    printf(
        "done: final test accuracy %.2f%%, AUC %.4f, loss %.4f, %ld examples in %.1f s wall "
        "(%.0f examples/s training); report: %s/report.json\n",
        100 * last.last_eval().accuracy(), last.last_eval().auc(), last.last_eval().loss(),
        static_cast<long>(last.examples()), wall,
        last.elapsed_seconds() > 0 ? last.examples() / last.elapsed_seconds() : 0.0,
        run_dir.c_str());
  }
  return exit_code;
}

int Status() {
  absl::StatusOr<rpc::SecurityConfig> security = rpc::SecurityFromFlags();
  if (!security.ok()) runtime::Die(std::string(security.status().message()));
  rpc::InstallTransportSecurity(security->transport);
  auto stub = v1::Coordinator::NewStub(rpc::CreateChannel(absl::GetFlag(FLAGS_coordinator)));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::ClusterStatus s;
  grpc::Status rpc = stub->GetStatus(&context, v1::GetStatusRequest(), &s);
  if (!rpc.ok()) {
    runtime::Die(
        absl::StrCat("cannot reach ", absl::GetFlag(FLAGS_coordinator), ": ", rpc.error_message()),
        1);
  }
  printf("job %s: %s, %.1f s, epoch %.2f, %ld examples, %.0f ex/s, G=%d\n", s.job_id().c_str(),
         v1::JobState_Name(s.state()).c_str(), s.elapsed_seconds(), s.epoch(),
         static_cast<long>(s.examples()), s.examples_per_second(), s.global_batch());
  printf("\n%-12s %-4s %-9s %-6s %10s %7s %12s %8s %9s %s\n", "worker", "id", "role", "alive",
         "examples", "batch", "compute(s)", "loss", "slowdown", "straggler");
  for (const v1::WorkerStatus& w : s.workers()) {
    const bool trainer = w.role() == v1::ROLE_WORKER;
    const std::string slowdown =
        trainer && w.slowdown() > 0 ? absl::StrFormat("%.2fx", w.slowdown()) : "-";
    const std::string straggler =
        w.straggler() ? absl::StrFormat("YES (z %.1f)", w.robust_z()) : "";
    printf("%-12s %-4d %-9s %-6s %10ld %7d %12.4f %8.4f %9s %s\n", w.name().c_str(), w.worker_id(),
           trainer ? "worker" : "evaluator", w.alive() ? "yes" : "no",
           static_cast<long>(w.examples()), w.local_batch(), w.median_compute_seconds(),
           w.last_loss(), slowdown.c_str(), straggler.c_str());
  }
  printf("\n%-6s %-22s %-9s %8s %-6s %9s %8s %9s  %s\n", "shard", "address", "connected", "version",
         "mode", "applied", "dropped", "rejected", "barrier waits for");
  for (const v1::ShardStatus& sh : s.shards()) {
    printf("%-6d %-22s %-9s %8ld %-6s %9ld %8ld %9ld  %s\n", sh.shard_id(), sh.address().c_str(),
           sh.connected() ? "yes" : "no", static_cast<long>(sh.version()),
           shard::ModeName(sh.mode()).c_str(), static_cast<long>(sh.gradients_applied()),
           static_cast<long>(sh.gradients_dropped()), static_cast<long>(sh.gradients_rejected()),
           absl::StrJoin(sh.barrier_waiting_for(), ",").c_str());
  }
  for (const v1::ShardStatus& sh : s.shards()) {
    if (!sh.has_last_decision()) continue;
    const v1::ModeDecisionStatus& d = sh.last_decision();
    printf("\nshard %d mode policy (%d switches so far), at %.1fs: %s\n", sh.shard_id(),
           sh.switches(), d.seconds(), d.explanation().c_str());
    if (sh.has_last_switch()) {
      printf("  last switch at %.1fs: %s\n", sh.last_switch().seconds(),
             sh.last_switch().explanation().c_str());
    }
  }
  if (s.has_last_eval()) {
    printf("\nlast evaluation: accuracy %.2f%%, AUC %.4f, loss %.4f%s\n",
           100 * s.last_eval().accuracy(), s.last_eval().auc(), s.last_eval().loss(),
           s.last_eval().final() ? " (final)" : "");
  }
  return 0;
}

// A container HEALTHCHECK needs a client for grpc.health.v1 and Debian has no grpc_health_probe.
// Exit codes follow the HEALTHCHECK contract: 0 healthy, 1 unhealthy (unreachable or not SERVING).
int Health() {
  absl::StatusOr<rpc::SecurityConfig> security = rpc::SecurityFromFlags();
  if (!security.ok()) runtime::Die(std::string(security.status().message()));
  rpc::InstallTransportSecurity(security->transport);
  const std::string address = absl::GetFlag(FLAGS_address);
  auto stub = grpc::health::v1::Health::NewStub(rpc::CreateChannel(address));
  grpc::ClientContext context;
  context.set_deadline(
      absl::ToChronoTime(absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_health_timeout_seconds))));
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status rpc = stub->Check(&context, grpc::health::v1::HealthCheckRequest(), &response);
  if (!rpc.ok()) runtime::Die(absl::StrCat(address, ": ", rpc.error_message()), 1);
  const std::string status =
      grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
  printf("%s: %s\n", address.c_str(), status.c_str());
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
}

// `syncopate datagen ctr`: Criteo-format rows from the planted teacher of
// libs/data/ctr_generator.h, with the Bayes AUC and logloss of the file written.
int Datagen(const std::vector<char*>& args) {
  const std::string kind = args.size() > 2 ? args[2] : "";
  if (kind != "ctr") {
    runtime::Die(kind.empty() ? "datagen: missing kind (expected: datagen ctr)"
                              : "datagen: unknown kind '" + kind + "' (expected ctr)");
  }
  if (args.size() > 3)
    runtime::Die(absl::StrCat("datagen ctr: unexpected argument '", args[3], "'"));
  const int64_t rows = absl::GetFlag(FLAGS_rows);
  if (rows < 1) runtime::Die(absl::StrCat("datagen ctr: --rows must be >= 1, got ", rows));
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) runtime::Die("datagen ctr: --out is required (gzip when it ends in .gz)");
  data::CtrTeacherConfig teacher;
  teacher.teacher_seed = absl::GetFlag(FLAGS_teacher_seed);
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  const absl::Time start = absl::Now();
  absl::StatusOr<data::CtrGenerationReport> report = data::GenerateCtr(teacher, seed, rows, out);
  if (!report.ok()) runtime::Die(absl::StrCat("datagen ctr: ", report.status().message()), 1);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  printf(
      "syncopate datagen ctr: wrote %ld rows to %s in %.1f s (teacher_seed %lu, seed %lu): "
      "%.1f%% clicks, Bayes AUC %.4f, Bayes logloss %.4f\n",
      static_cast<long>(report->rows), out.c_str(), seconds,
      static_cast<unsigned long>(teacher.teacher_seed), static_cast<unsigned long>(seed),
      100 * report->positive_rate, report->bayes_auc, report->bayes_logloss);
  printf(
      "rows=%ld positive_rate=%.4f bayes_auc=%.4f bayes_logloss=%.4f teacher_seed=%lu seed=%lu "
      "seconds=%.2f out=%s\n",
      static_cast<long>(report->rows), report->positive_rate, report->bayes_auc,
      report->bayes_logloss, static_cast<unsigned long>(teacher.teacher_seed),
      static_cast<unsigned long>(seed), seconds, out.c_str());
  return 0;
}

}  // namespace
}  // namespace syncopate::cli

int main(int argc, char** argv) {
  std::vector<char*> args = syncopate::runtime::InitProcess(
      argc, argv,
      "syncopate <command> [flags]\n"
      "  local   train a job on a local cluster of child processes (see flags below)\n"
      "  status  show a running cluster: --coordinator=HOST:PORT\n"
      "  health  exit 0 if a server's gRPC health check is SERVING: --address=HOST:PORT\n"
      "  datagen ctr  write a synthetic Criteo-format click file: --rows=N --out=FILE[.gz]\n"
      "               [--seed=S] [--teacher_seed=T]\n"
      "Security (every binary): --tls_cert/--tls_key/--tls_ca turn on mTLS; --join_token_file\n"
      "(or --join_token) sets the shared join token; `local` generates one per run unless\n"
      "--insecure_no_join_token (see docs/operations.md).");
  const std::string command = args.size() > 1 ? args[1] : "";
  if (command == "local") return syncopate::cli::Local();
  if (command == "status") return syncopate::cli::Status();
  if (command == "health") return syncopate::cli::Health();
  if (command == "datagen") return syncopate::cli::Datagen(args);
  syncopate::runtime::Die(command.empty()
                              ? "missing command: local, status, health or datagen (see --help)"
                              : "unknown command '" + command +
                                    "' (expected local, status, health or datagen)");
}
