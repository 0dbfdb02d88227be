#include "libs/launch/run_loop.h"

#include "libs/report/run_timeline.h"
#include "libs/report/status_view.h"

namespace syncopate::launch {

RunLoopResult SuperviseRun(const RunLoopOptions& options, Supervisor& supervisor,
                           LocalPrometheus& prometheus) {
  RunLoopResult result;
  v1::ClusterStatus& last = result.last;
  report::RunTimeline timeline;  // the status about once a second, for report.html's curves
  absl::Time next_print = options.now();
  while (true) {
    if (options.wait_for_interrupt(options.poll_interval)) {
      result.end = RunEnd::kInterrupted;
      break;
    }
    const Supervisor::Round round = supervisor.Check(last.state() == v1::JOB_DONE);
    for (const std::string& line : round.lines) options.print(line);
    for (const std::string& line : round.errors) options.print_error(line);
    if (round.failed) {
      result.end = RunEnd::kFailed;
      break;
    }
    for (const std::string& line : prometheus.ReapExits()) options.print_error(line);
    absl::StatusOr<v1::ClusterStatus> status = options.status();
    if (status.ok()) {
      last = *std::move(status);
      timeline.Observe(last);
      if (options.now() >= next_print) {
        options.print(report::ProgressLine(last));
        next_print = options.now() + options.progress_interval;
      }
      if (last.state() == v1::JOB_DONE) {
        result.end = RunEnd::kDone;
        break;
      }
    }
    if (options.now() > options.deadline) {
      result.end = RunEnd::kTimedOut;
      break;
    }
  }
  result.timeline = timeline.samples();
  return result;
}

}  // namespace syncopate::launch
