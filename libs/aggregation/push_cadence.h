// When a worker's next push will land, in updates: the landing predictor of the buffer-aware
// look-ahead (ADR 0007, "The pending update"; ../shared/research/gba-gap.md §4). A shard sees
// every push arrive; from each worker's recent push interval T_j and batch b_j it predicts, at a
// pull by worker i, how many global batches the others fill while i computes its next gradient:
//
//   d = floor((n + sum_{j != i} b_j * T_i / T_j) / G)
//
// with n the samples already buffered for the pending update. d = 0: i's push lands in the
// pending update (its gradient is fresh); d >= 1: it lands d updates later. For N equal workers
// with b = G/N this is 1 exactly when the buffer holds at least one push, as a GBA cycle has it
// (ADR 0004's cycle model). No constant: the intervals are the shard's own measurements, over
// the last kWindow pushes of each worker.
// Thread-safety: thread-compatible (the shard calls it under its lock).
#ifndef SYNCOPATE_LIBS_AGGREGATION_PUSH_CADENCE_H_
#define SYNCOPATE_LIBS_AGGREGATION_PUSH_CADENCE_H_

#include <cstdint>
#include <deque>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"

namespace syncopate::aggregation {

class PushCadence {
 public:
  // Intervals averaged per worker: enough to smooth a step's jitter (log-normal, σ ~0.45 here),
  // few enough to follow a slowdown within a few steps.
  static constexpr int kWindow = 8;

  void Record(int32_t worker, int64_t samples, absl::Time at);
  // Forgets everything (a mode switch or a restore: the cadence of another regime).
  void Reset() { workers_.clear(); }

  // The predicted landing (above) of `worker`'s next push among `members`. A worker without a
  // measured interval yet is taken to run at the puller's pace; a puller without one predicts
  // from the buffer alone (0 or 1).
  int64_t LandingUpdates(int32_t worker, int64_t buffered_samples, int64_t global_batch,
                         const absl::flat_hash_set<int32_t>& members) const;

 private:
  struct Worker {
    int64_t samples = 0;  // its last push's
    absl::Time last = absl::InfinitePast();
    std::deque<double> intervals;  // seconds, newest last
    double Mean() const;
  };
  absl::flat_hash_map<int32_t, Worker> workers_;
};

}  // namespace syncopate::aggregation

#endif  // SYNCOPATE_LIBS_AGGREGATION_PUSH_CADENCE_H_
