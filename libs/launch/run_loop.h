// SuperviseRun: the loop of `syncopate local` between starting the cluster and stopping it.
// Four times a second it handles children that exited (Supervisor: restart or fail), reports a
// Prometheus that stopped, reads the coordinator's status, samples it for report.html
// (report::RunTimeline) and, every 2 s, prints its progress line (report::ProgressLine), until
// the job is done, the run fails, the deadline passes or an interrupt arrives.
// Everything it waits on or reads is in RunLoopOptions, so a test drives it with a fake clock
// and a scripted status.
// Thread-safety: thread-compatible (call it from one thread; the callbacks run on it).
#ifndef SYNCOPATE_LIBS_LAUNCH_RUN_LOOP_H_
#define SYNCOPATE_LIBS_LAUNCH_RUN_LOOP_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "libs/launch/local_prometheus.h"
#include "libs/launch/supervisor.h"
#include "syncopate/v1/cluster.pb.h"
#include "syncopate/v1/report.pb.h"

namespace syncopate::launch {

struct RunLoopOptions {
  // The coordinator's status (LocalCluster::Status).
  std::function<absl::StatusOr<v1::ClusterStatus>()> status;
  // Blocks up to the duration; true once the run was interrupted (runtime::WaitForShutdown).
  std::function<bool(absl::Duration)> wait_for_interrupt;
  std::function<absl::Time()> now = [] { return absl::Now(); };
  absl::Time deadline = absl::InfiniteFuture();
  // Where lines go: progress (stdout) and failures (stderr), one line per call, no newline.
  std::function<void(const std::string&)> print;
  std::function<void(const std::string&)> print_error;
  absl::Duration poll_interval = absl::Milliseconds(250);
  absl::Duration progress_interval = absl::Seconds(2);
};

enum class RunEnd {
  kDone,         // the coordinator reported JOB_DONE
  kInterrupted,  // wait_for_interrupt returned true
  kFailed,       // an essential child died and could not be restarted (the Supervisor said why)
  kTimedOut,     // the deadline passed first
};

struct RunLoopResult {
  RunEnd end = RunEnd::kDone;
  v1::ClusterStatus last;                       // the last status read (empty if none could be)
  std::vector<v1::RunReport::Sample> timeline;  // report::RunTimeline's samples
};

// Runs until the run ends; prints no line about how it ended (the caller does, then stops the
// cluster).
RunLoopResult SuperviseRun(const RunLoopOptions& options, Supervisor& supervisor,
                           LocalPrometheus& prometheus);

}  // namespace syncopate::launch

#endif  // SYNCOPATE_LIBS_LAUNCH_RUN_LOOP_H_
