#include "libs/aggregation/push_cadence.h"

#include <cmath>

namespace syncopate::aggregation {

double PushCadence::Worker::Mean() const {
  if (intervals.empty()) return 0;
  double sum = 0;
  for (const double interval : intervals) sum += interval;
  return sum / static_cast<double>(intervals.size());
}

void PushCadence::Record(int32_t worker, int64_t samples, absl::Time at) {
  Worker& w = workers_[worker];
  if (w.last != absl::InfinitePast() && at > w.last) {
    w.intervals.push_back(absl::ToDoubleSeconds(at - w.last));
    if (static_cast<int>(w.intervals.size()) > kWindow) w.intervals.pop_front();
  }
  w.last = at;
  w.samples = samples;
}

int64_t PushCadence::LandingUpdates(int32_t worker, int64_t buffered_samples, int64_t global_batch,
                                    const absl::flat_hash_set<int32_t>& members) const {
  if (global_batch <= 0) return 0;
  const auto self = workers_.find(worker);
  const double own = self == workers_.end() ? 0 : self->second.Mean();
  double arriving = static_cast<double>(buffered_samples);
  for (const int32_t other : members) {
    if (other == worker) continue;
    const auto it = workers_.find(other);
    if (it == workers_.end()) continue;  // never pushed: nothing known of its batch
    const double theirs = it->second.Mean();
    // Pushes the other makes while this worker computes one gradient: T_i / T_j, or one each
    // while either pace is unknown.
    const double pushes = own > 0 && theirs > 0 ? own / theirs : 1.0;
    arriving += static_cast<double>(it->second.samples) * pushes;
  }
  return static_cast<int64_t>(std::floor(arriving / static_cast<double>(global_batch)));
}

}  // namespace syncopate::aggregation
