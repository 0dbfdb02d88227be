// RunTimeline: the coordinator's status sampled over a run, for the curves of report.html
// (per-worker throughput and training loss over time). `syncopate local` feeds it every status
// it polls; it keeps one sample per `interval` of job time. A long run stays bounded: past
// `max_samples` every other sample is dropped and the interval doubles, so the timeline always
// spans the whole run at an even resolution.
// Thread-safety: thread-compatible (the launcher's loop owns it).
#ifndef SYNCOPATE_LIBS_REPORT_RUN_TIMELINE_H_
#define SYNCOPATE_LIBS_REPORT_RUN_TIMELINE_H_

#include <cstddef>
#include <vector>

#include "syncopate/v1/cluster.pb.h"
#include "syncopate/v1/report.pb.h"

namespace syncopate::report {

class RunTimeline {
 public:
  // One sample a second of job time resolves a straggler's effect and a mode switch; 3600
  // samples of a few workers are a few hundred kB of report.json at most.
  static constexpr double kDefaultIntervalSeconds = 1.0;
  static constexpr size_t kDefaultMaxSamples = 3600;

  explicit RunTimeline(double interval_seconds = kDefaultIntervalSeconds,
                       size_t max_samples = kDefaultMaxSamples);

  // Records `status` if at least the interval of job time passed since the last sample (the
  // first status with a running job always counts, and so does the first one of the finished
  // job; nothing after it). Statuses before the job runs are skipped.
  void Observe(const v1::ClusterStatus& status);

  const std::vector<v1::RunReport::Sample>& samples() const { return samples_; }
  double interval_seconds() const { return interval_; }

 private:
  double interval_;
  const size_t max_samples_;
  std::vector<v1::RunReport::Sample> samples_;
  bool done_recorded_ = false;
};

}  // namespace syncopate::report

#endif  // SYNCOPATE_LIBS_REPORT_RUN_TIMELINE_H_
