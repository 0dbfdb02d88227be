#include "libs/coordinator/status_builder.h"

#include <algorithm>
#include <cmath>

namespace syncopate::coordinator {

void ApplyAssessment(const Assessment& assessment, v1::ClusterStatus& status) {
  for (v1::WorkerStatus& w : *status.mutable_workers()) {
    const WorkerAssessment* a = assessment.Find(w.worker_id());
    if (a == nullptr) continue;
    w.set_median_communication_seconds(a->median_communication_seconds);
    if (!a->enough_data) continue;
    w.set_slowdown(a->slowdown);
    // +inf (no dispersion at all) does not survive JSON.
    w.set_robust_z(std::isfinite(a->robust_z) ? a->robust_z : 1e9);
    w.set_straggler(a->straggler);
  }
}

v1::ShardStatus ShardRow(const v1::ShardPartition& partition, const std::string& address,
                         bool connected, const v1::ShardReport* report) {
  v1::ShardStatus s;
  s.set_shard_id(partition.shard_id());
  s.set_flat_begin(partition.flat_begin());
  s.set_flat_end(partition.flat_end());
  if (report == nullptr) return s;
  s.set_address(address);
  s.set_connected(connected);
  s.set_version(report->version());
  s.set_mode(report->mode());
  s.set_updates(report->updates());
  *s.mutable_barrier_waiting_for() = report->barrier_waiting_for();
  *s.mutable_gradients() = report->gradients();
  *s.mutable_staleness() = report->staleness();
  return s;
}

v1::EvalStatus EvalStatusOf(const v1::EvalReport& report, int64_t examples,
                            double elapsed_seconds) {
  v1::EvalStatus eval;
  eval.set_accuracy(report.accuracy());
  eval.set_auc(report.auc());
  eval.set_loss(report.loss());
  eval.set_final(report.final());
  eval.set_examples_at_eval(report.final() ? report.requested_at_examples() : examples);
  eval.set_seconds_at_eval(report.final() ? report.requested_at_seconds() : elapsed_seconds);
  if (report.point() > 0) {
    // An evaluation point's: when and at how many examples those parameters existed.
    eval.set_point(report.point());
    eval.set_examples_at_eval(report.point_examples());
    eval.set_seconds_at_eval(std::max(0.0, elapsed_seconds - report.point_age_seconds()));
  }
  *eval.mutable_shard_versions() = report.shard_versions();
  if (report.has_validation()) *eval.mutable_validation() = report.validation();
  return eval;
}

void ThroughputWindow::Add(absl::Time now, int64_t total_examples) {
  samples_.emplace_back(now, total_examples);
  while (!samples_.empty() && now - samples_.front().first > kWindow) samples_.pop_front();
}

double ThroughputWindow::Rate() const {
  if (samples_.size() < 2) return 0;
  const auto& [t0, e0] = samples_.front();
  const auto& [t1, e1] = samples_.back();
  const double seconds = absl::ToDoubleSeconds(t1 - t0);
  return seconds > 0 ? static_cast<double>(e1 - e0) / seconds : 0;
}

}  // namespace syncopate::coordinator
