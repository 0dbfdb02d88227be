// The fault matrix (issue 7): kill a random worker, a random shard or the coordinator at a
// random moment, in sync and in gba mode, and see whether the run completes.
//
//   syncopate-fault-matrix --out=bench-results/faults [--trials=20] [--seed=1]
//
// Each trial is a small real cluster (3 workers, 2 shards, a 6k-example subset, checkpoints
// every second) that loses one process at a random moment and gets it back the way a supervisor
// would (same flags, same port). Reported per kind and mode: completed runs, final accuracy
// against a fault-free run of the same job, and the longest stall (the longest time the
// cluster's example count did not move), to compare with two heartbeat timeouts (2 x 10 s).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "libs/common/mode_rules.h"
#include "libs/job/job_spec.h"
#include "libs/launch/local_cluster.h"
#include "libs/runtime/process_runtime.h"

ABSL_FLAG(std::string, out, "bench-results/faults", "Results directory");
ABSL_FLAG(std::string, bin_dir, "", "Directory of the service binaries (default: next to this)");
ABSL_FLAG(int, trials, 20, "Trials per fault kind and mode");
ABSL_FLAG(uint64_t, seed, 1, "Seed for the victims and moments");
ABSL_FLAG(std::string, modes, "sync,gba", "Modes to run (sync, gba)");
ABSL_FLAG(std::string, faults, "worker,shard,coordinator", "Fault kinds to run");
ABSL_FLAG(std::string, job, "",
          "Job file whose model, data and optimizer the trials train (default: the default "
          "job), e.g. examples/torch/mlp.textproto for workers hosting a PyTorch module");

namespace syncopate::bench {
namespace {

// The trials' job: --job's (or the default job's) model, data and optimizer in the matrix's shape.
v1::JobSpec Job(v1::Mode mode) {
  const std::string file = absl::GetFlag(FLAGS_job);
  absl::StatusOr<v1::JobSpec> loaded =
      file.empty() ? job::ParseJobSpec(job::DefaultJobText()) : job::LoadJobSpecFile(file);
  if (!loaded.ok()) {
    fprintf(stderr, "--job: %s\n", std::string(loaded.status().message()).c_str());
    std::exit(2);
  }
  v1::JobSpec job = *std::move(loaded);
  job.set_job_id(absl::StrCat("faults-", v1::Mode_Name(mode)));
  job.mutable_dataset()->set_train_limit(6000);
  job.mutable_dataset()->set_test_limit(2000);
  job.set_num_workers(3);
  job.set_num_shards(2);
  job.set_global_batch(96);
  job.set_mode(mode);
  job.mutable_stop()->set_epochs(5);
  job.mutable_eval()->set_interval_seconds(2);
  job.set_checkpoint_interval_seconds(1);
  return job;
}

struct Trial {
  bool completed = false;
  double accuracy = 0;
  double longest_stall = 0;
  double seconds = 0;
  std::string victim;
};

// Two heartbeat timeouts (the coordinator's 10 s silence timeout): the goal for any stall.
constexpr double kStallGoalSeconds = 20;

// Runs one job; if `kind` is not empty, kills one process of that kind after `kill_at`.
Trial RunTrial(v1::Mode mode, const std::string& kind, double kill_at, std::mt19937_64& rng,
               const std::string& run_dir) {
  Trial trial;
  launch::LocalClusterOptions options;
  options.job = Job(mode);
  options.bin_dir = absl::GetFlag(FLAGS_bin_dir).empty() ? runtime::ExecutableDir()
                                                         : absl::GetFlag(FLAGS_bin_dir);
  options.run_dir = run_dir;
  std::filesystem::remove_all(run_dir);
  auto cluster = launch::LocalCluster::Start(options);
  if (!cluster.ok()) return trial;
  if (kind == "worker") {
    trial.victim = launch::LocalCluster::WorkerName(static_cast<int>(rng() % 3));
  } else if (kind == "shard") {
    trial.victim = launch::LocalCluster::ShardName(static_cast<int>(rng() % 2));
  } else if (kind == "coordinator") {
    trial.victim = "coordinator";
  }
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + absl::Minutes(3);
  absl::Time last_progress = start;
  int64_t last_examples = -1;
  bool killed = trial.victim.empty();
  v1::ClusterStatus last;
  while (absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
    const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
    if (!killed && elapsed >= kill_at) {
      killed = true;
      absl::Status restarted = (*cluster)->KillAndRestart(trial.victim);
      if (!restarted.ok()) fprintf(stderr, "%s\n", std::string(restarted.message()).c_str());
    }
    (*cluster)->processes().Reap();
    auto status = (*cluster)->Status(absl::Seconds(1));
    if (status.ok()) {
      last = *status;
      if (last.state() == v1::JOB_DONE) break;
      if (last.state() == v1::JOB_RUNNING && last.examples() != last_examples) {
        last_examples = last.examples();
        last_progress = absl::Now();
      }
    }
    if (last_examples >= 0) {
      trial.longest_stall =
          std::max(trial.longest_stall, absl::ToDoubleSeconds(absl::Now() - last_progress));
    }
  }
  (*cluster)->Stop();
  trial.completed = last.state() == v1::JOB_DONE;
  trial.accuracy = last.last_eval().accuracy();
  trial.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return trial;
}

int Main() {
  const std::string out = absl::GetFlag(FLAGS_out);
  std::filesystem::create_directories(out);
  std::mt19937_64 rng(absl::GetFlag(FLAGS_seed));
  std::ofstream md(out + "/results.md");
  md << "# Fault matrix\n\nEach trial: 3 workers, 2 shards, a 6k-example subset for 5 epochs, "
        "checkpoints every second; one process SIGKILLed at a random moment and restarted on "
        "its port. Stall = longest time the example count did not move (goal: < 2 heartbeat "
        "timeouts = 20 s).\n\n"
     << "| mode | fault | completed | mean accuracy | fault-free accuracy | min accuracy | "
        "longest stall (s) |\n|---|---|---|---|---|---|---|\n";
  const std::vector<std::string> modes = absl::StrSplit(absl::GetFlag(FLAGS_modes), ',');
  const std::vector<std::string> faults = absl::StrSplit(absl::GetFlag(FLAGS_faults), ',');
  for (const std::string& mode_name : modes) {
    absl::StatusOr<v1::Mode> parsed = ParseMode(mode_name);
    if (!parsed.ok() || (*parsed != v1::MODE_SYNC && *parsed != v1::MODE_GBA)) {
      fprintf(stderr, "--modes: '%s' is not sync or gba\n", mode_name.c_str());
      return 2;
    }
    const v1::Mode mode = *parsed;
    const Trial baseline = RunTrial(mode, "", 0, rng, out + "/run");
    printf("%s fault-free: %s, accuracy %.4f, %.1f s\n", v1::Mode_Name(mode).c_str(),
           baseline.completed ? "completed" : "DID NOT COMPLETE", baseline.accuracy,
           baseline.seconds);
    for (const std::string& kind : faults) {
      if (kind != "worker" && kind != "shard" && kind != "coordinator") {
        fprintf(stderr, "--faults: '%s' is not worker, shard or coordinator\n", kind.c_str());
        return 2;
      }
      int completed = 0;
      double sum = 0, worst = 1, stall = 0;
      for (int t = 0; t < absl::GetFlag(FLAGS_trials); ++t) {
        // A moment within the run's first 80% (measured fault-free).
        std::uniform_real_distribution<double> moment(1.0, std::max(1.5, 0.8 * baseline.seconds));
        const Trial trial = RunTrial(mode, kind, moment(rng), rng, out + "/run");
        completed += trial.completed ? 1 : 0;
        sum += trial.accuracy;
        worst = std::min(worst, trial.accuracy);
        stall = std::max(stall, trial.longest_stall);
        if (!trial.completed || trial.longest_stall > kStallGoalSeconds) {
          // Keep the evidence: the next trial reuses the run directory.
          const std::string kept =
              absl::StrCat(out, "/kept/", v1::Mode_Name(mode), "-", kind, "-", t + 1);
          std::filesystem::remove_all(kept);
          std::filesystem::create_directories(out + "/kept");
          std::filesystem::rename(out + "/run", kept);
          printf("  kept the run directory: %s\n", kept.c_str());
        }
        printf("%s %-11s trial %2d: %s %-11s accuracy %.4f stall %.1f s\n",
               v1::Mode_Name(mode).c_str(), kind.c_str(), t + 1,
               trial.completed ? "completed" : "FAILED   ", trial.victim.c_str(), trial.accuracy,
               trial.longest_stall);
        fflush(stdout);
      }
      const int n = absl::GetFlag(FLAGS_trials);
      md << absl::StrFormat("| %s | %s | %d/%d | %.2f%% | %.2f%% | %.2f%% | %.1f |\n",
                            v1::Mode_Name(mode), kind, completed, n, 100 * sum / n,
                            100 * baseline.accuracy, 100 * worst, stall);
      md.flush();
    }
  }
  printf("results: %s/results.md\n", out.c_str());
  return 0;
}

}  // namespace
}  // namespace syncopate::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return syncopate::bench::Main();
}
