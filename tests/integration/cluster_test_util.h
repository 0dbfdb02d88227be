// Helpers for integration tests that run a real cluster of processes on loopback.
#ifndef SYNCOPATE_TESTS_INTEGRATION_CLUSTER_TEST_UTIL_H_
#define SYNCOPATE_TESTS_INTEGRATION_CLUSTER_TEST_UTIL_H_

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "libs/coordinator/progress_journal.h"
#include "libs/job/job_spec.h"
#include "libs/launch/local_cluster.h"
#include "libs/launch/observe.h"

namespace syncopate::testing {

// A small, fast job: a 6k-example subset, a narrow MLP, evaluation on 2k test images.
inline v1::JobSpec SmallJob(v1::Mode mode, int workers, int shards, int epochs) {
  v1::JobSpec job = *job::ParseJobSpec(job::DefaultJobText());
  job.set_job_id("integration");
  job.mutable_model()->clear_hidden();
  job.mutable_model()->add_hidden(64);
  job.mutable_dataset()->set_train_limit(6000);
  job.mutable_dataset()->set_test_limit(2000);
  job.set_num_workers(workers);
  job.set_num_shards(shards);
  job.set_global_batch(64);
  job.set_mode(mode);
  job.mutable_stop()->set_epochs(epochs);
  job.mutable_eval()->set_interval_seconds(1);
  return job;
}

inline std::string TestRunDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/syncopate-", name, "-", getpid());
}

inline launch::LocalClusterOptions Options(v1::JobSpec job, const std::string& name) {
  launch::LocalClusterOptions options;
  options.job = std::move(job);
  options.bin_dir = SYNCOPATE_BIN_DIR;
  options.run_dir = TestRunDir(name);
  return options;
}

// A floor on every worker's step for scenarios that act while the job runs (a kill, a probe):
// the job then lasts at least its steps times this on any machine, so what the test does lands
// mid-run however fast the machine is, and a slower machine only makes the job longer. 10 ms is
// about SmallJob's natural sync pace on a quiet 2-core machine (~100 versions/s).
inline constexpr absl::Duration kPacedStep = absl::Milliseconds(10);

inline launch::LocalClusterOptions PacedOptions(v1::JobSpec job, const std::string& name) {
  launch::LocalClusterOptions options = Options(std::move(job), name);
  options.min_step_time = kPacedStep;
  return options;
}

// Polls `done` every 100 ms until it holds or `timeout` passes.
inline bool Eventually(const std::function<bool()>& done, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return done();
}

// The newest version shard `shard` has a checkpoint of in the cluster's checkpoint directory
// (names: shard-<id>-of-<S>-v<version>.ckpt), or -1.
inline int64_t NewestCheckpointVersion(const launch::LocalCluster& cluster, int shard) {
  int64_t newest = -1;
  std::error_code error;
  for (const auto& entry :
       std::filesystem::directory_iterator(cluster.run_dir() + "/checkpoints", error)) {
    int id = -1, shards = 0;
    long long version = -1;  // NOLINT(google-runtime-int): sscanf's %lld
    const std::string name = entry.path().filename().string();
    if (std::sscanf(name.c_str(), "shard-%d-of-%d-v%lld.ckpt", &id, &shards, &version) == 3 &&
        id == shard) {
      newest = std::max<int64_t>(newest, version);
    }
  }
  return newest;
}

// The examples the coordinator's progress file (what a restarted coordinator resumes from)
// records, or -1 while there is none.
inline int64_t SavedProgressExamples(const launch::LocalCluster& cluster) {
  coordinator::FileProgressJournal journal(cluster.run_dir() + "/coordinator");
  absl::StatusOr<v1::CoordinatorProgress> progress = journal.Load();
  return progress.ok() ? progress->examples() : -1;
}

// Polls the coordinator until `done` holds or `timeout` passes; returns the last status.
inline absl::StatusOr<v1::ClusterStatus> WaitFor(
    launch::LocalCluster& cluster, const std::function<bool(const v1::ClusterStatus&)>& done,
    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<v1::ClusterStatus> status;
  while (absl::Now() < deadline) {
    status = cluster.Status();
    if (status.ok() && done(*status)) return status;
    absl::SleepFor(absl::Milliseconds(200));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("condition not reached; last status: ",
                   status.ok() ? status->ShortDebugString() : status.status().ToString()));
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Sends one HTTP/1.0 request ("GET /metrics", "DELETE /metrics", ...) to 127.0.0.1:port and
// returns the whole reply (status line, headers, body); empty if nothing answers within 10 s.
inline std::string HttpRequest(int port, const std::string& request) {
  return launch::HttpRequest(port, request, absl::Seconds(10)).value_or("");
}

// GET http://127.0.0.1:port/metrics (a real scrape of a process's Prometheus endpoint).
inline std::string ScrapeMetrics(int port) { return HttpRequest(port, "GET /metrics"); }

// The value of the first sample line starting with `series` (name plus labels), or -1.
inline double MetricValue(const std::string& text, const std::string& series) {
  return launch::MetricValue(text, series).value_or(-1);
}

}  // namespace syncopate::testing

#endif  // SYNCOPATE_TESTS_INTEGRATION_CLUSTER_TEST_UTIL_H_
