#include "libs/report/run_timeline.h"

#include <algorithm>
#include <utility>

namespace syncopate::report {

RunTimeline::RunTimeline(double interval_seconds, size_t max_samples)
    : interval_(interval_seconds), max_samples_(std::max<size_t>(max_samples, 2)) {}

void RunTimeline::Observe(const v1::ClusterStatus& status) {
  if (status.state() == v1::JOB_WAITING || status.state() == v1::JOB_STATE_UNSPECIFIED) return;
  const double seconds = status.elapsed_seconds();
  // The finished job's status is always kept once: the curves then end where the run ended.
  const bool done = status.state() == v1::JOB_DONE;
  if (done_recorded_) return;
  if (!done && !samples_.empty() && seconds < samples_.back().seconds() + interval_) return;
  done_recorded_ = done;
  v1::RunReport::Sample& sample = samples_.emplace_back();
  sample.set_seconds(seconds);
  sample.set_examples(status.examples());
  for (const v1::WorkerStatus& w : status.workers()) {
    if (w.role() != v1::ROLE_WORKER) continue;
    v1::RunReport::Sample::Worker* worker = sample.add_workers();
    worker->set_name(w.name());
    worker->set_examples(w.examples());
    worker->set_loss(w.last_loss());
    worker->set_alive(w.alive());
  }
  if (samples_.size() <= max_samples_) return;
  // Keep samples 0, 2, 4, ...: the first stays, and the spacing becomes twice the interval.
  size_t kept = 0;
  for (size_t i = 0; i < samples_.size(); i += 2) samples_[kept++] = std::move(samples_[i]);
  samples_.resize(kept);
  interval_ *= 2;
}

}  // namespace syncopate::report
