// Helpers for integration tests that run a real cluster of processes on loopback.
#ifndef SYNCOPATE_TESTS_INTEGRATION_CLUSTER_TEST_UTIL_H_
#define SYNCOPATE_TESTS_INTEGRATION_CLUSTER_TEST_UTIL_H_

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
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
