// The shard's gradient aggregation: one invariant, three policies (docs/design.md §5).
//
// Invariant (GBA, NeurIPS'22): every update consumes one global batch of G samples whatever the
// mode, so learning rate, schedule and optimizer need no retuning when the mode changes.
//   sync  - a barrier per version k: the update is applied once every current member has pushed
//           a gradient for it. A gradient with an older token (only in a transition: a switch
//           from gba flushed a version, a roll-back moved it on) is dropped but fills its
//           member's place in barrier k; the member's next pull then waits for the barrier's
//           release (HasPushedForVersion), unless the gradient was computed before this stretch
//           of sync began (a token below sync_since), which fills the place without holding and
//           is replaced by the member's own gradient for the version if it arrives first. A
//           barrier filled only with dropped gradients releases its version without an update
//           (TakeUpdate returns 0 samples). Why both rules, and why no cross-shard deadlock is
//           left: ADR 0002, "Sync across a switch".
//   gba   - no barrier: gradients accumulate with a staleness weight w(tau) until they cover G
//           samples; the mean is normalised by the sample count (not by sum of weights), so
//           decayed gradients shorten the step.
//   async - baseline: every gradient is an update of its own.
// Sparse (embedding) rows follow the same rule as dense elements: a row absent from a push is a
// zero gradient from that push, so rows accumulate weight * samples * gradient like dense elements
// and the update divides by the same sample count (NormalisedByGlobalBatch says it once).
// Switching keeps the version monotone and never moves optimizer state (the optimizer is not
// even visible here): sync->gba keeps the barrier buffer as the GBA buffer; any other switch
// with a non-empty buffer first flushes it as one update normalised by its own sample count.
//
// Thread-safety: thread-compatible. The shard serialises every call under its own lock.
#ifndef SYNCOPATE_LIBS_AGGREGATION_GLOBAL_BATCH_AGGREGATOR_H_
#define SYNCOPATE_LIBS_AGGREGATION_GLOBAL_BATCH_AGGREGATOR_H_

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "libs/aggregation/aggregation_kernels.h"
#include "libs/common/mode_rules.h"
#include "syncopate/v1/cluster.pb.h"
#include "syncopate/v1/job.pb.h"

namespace syncopate::aggregation {

// One embedding table's rows of a pushed gradient: keys unique, rows keys.size() * dim floats.
struct SparseGradient {
  int32_t table = 0;
  std::span<const uint64_t> keys;
  std::span<const float> rows;
};

struct GradientPush {
  int32_t worker = 0;
  int64_t token = 0;    // version the gradient was computed on
  int64_t samples = 0;  // b: the gradient is the mean over b samples
  std::span<const float> gradient;
  std::span<const SparseGradient> sparse;
};

// The sparse part of one update: per table, the rows any aggregated push touched and their mean
// gradient (normalised exactly like the dense part).
struct SparseUpdate {
  struct Table {
    std::vector<uint64_t> keys;
    std::vector<float> rows;  // keys.size() * dim
  };
  std::vector<Table> tables;  // indexed like the aggregator's table dims
};

struct PushVerdict {
  v1::PushOutcome outcome = v1::PUSH_OUTCOME_UNSPECIFIED;
  int64_t staleness = 0;  // version at arrival - token
  double weight = 0;      // weight the gradient was aggregated with (0 unless applied/decayed)
  absl::Status status;    // why, when outcome == PUSH_REJECTED
};

class GlobalBatchAggregator {
 public:
  // `mode` is MODE_SYNC, MODE_GBA or MODE_ASYNC (AUTO is a coordinator notion). `table_dims`
  // holds the row width of each embedding table whose rows pushes may carry.
  GlobalBatchAggregator(int64_t dim, int64_t global_batch, v1::Mode mode, int64_t version = 0,
                        std::vector<int32_t> table_dims = {});

  // Validates the token and the sender and aggregates. Shape, finiteness and key ownership are
  // the caller's checks (they need no aggregation state). Never changes the version: see
  // TakeUpdate.
  PushVerdict Push(const GradientPush& push);

  // True when the buffer holds a complete update for the current mode.
  bool UpdateReady() const;

  // Writes the aggregated mean gradient into `mean` (size dim) and, when `sparse` is not null,
  // the mean rows into it; clears the buffer and advances the version by one. Returns the number
  // of samples the update consumed. Requires UpdateReady().
  int64_t TakeUpdate(std::span<float> mean, SparseUpdate* sparse = nullptr);

  // The GBA normalisation, in one place for dense elements and embedding rows alike: an update
  // is the buffered sum of weight * samples * gradient divided by the samples consumed — not by
  // the sum of weights, so decayed gradients shorten the step instead of being re-inflated.
  static float NormalisedByGlobalBatch(float weighted_sum, int64_t samples) {
    return samples > 0 ? weighted_sum / static_cast<float>(samples) : 0.0f;
  }

  // The workers whose gradients count. A sync barrier never waits on a worker that left.
  // `local_batch` is B, the per-worker batch the coordinator set (used for the GBA threshold).
  void SetMembership(const v1::Membership& membership);

  // Switches mode; afterwards UpdateReady() may be true (a flush of the old buffer).
  void SetMode(v1::Mode mode);

  // A restored shard resumes at its checkpoint's version with an empty buffer.
  void RestoreVersion(int64_t version);

  v1::Mode mode() const { return mode_; }
  int64_t version() const { return version_; }
  // Sync: `worker` has filled its place in the current barrier (its next pull waits for the
  // barrier's release, whatever version it asks for).
  bool HasPushedForVersion(int32_t worker) const {
    return HasBarrier(mode_) && pushed_this_version_.contains(worker) &&
           !unheld_placeholders_.contains(worker);
  }
  // Sync: the first version of the current stretch of sync (after a switch's flush, or a
  // roll-back or restore); gradients computed before it are from another regime.
  int64_t sync_since() const { return sync_since_; }
  int64_t global_batch() const { return global_batch_; }
  int64_t buffered_samples() const { return buffered_samples_; }
  // Embedding rows buffered for the next update, over all tables.
  int64_t buffered_rows() const;
  int64_t staleness_threshold() const;
  const absl::flat_hash_set<int32_t>& members() const { return members_; }
  // Sync only: current members whose gradient for the current version has not arrived.
  std::vector<int32_t> BarrierWaitingFor() const;

  // The staleness a gradient `worker` computes on the parameters it pulls now will most likely
  // carry when it arrives: the mean staleness of its last W admitted pushes in the current mode,
  // W = StragglerDetector::WindowForWorkers(members) (the detector's window, for the same reason:
  // enough steps for a stable mean, few enough to follow a change). 0 in sync, where a barrier
  // admits no staleness, and before the worker's first push since the last mode switch.
  // The shard extrapolates gba pulls by it (UpdateRule::LookAhead).
  double PredictedStaleness(int32_t worker) const;

  // The mean of the gradients buffered for the pending update so far, sum w * b * g / n over the
  // n samples buffered (the update will divide by G instead), written into `out` (size dim):
  // false, `out` untouched, when nothing is buffered. The buffer-aware look-ahead's estimate of
  // the pending update's gradient (ADR 0007).
  bool BufferedMean(std::span<float> out) const;

 private:
  // The rows of one table buffered since the last update: row i of `sums` (dim floats) belongs
  // to the key whose index entry is i.
  struct SparseBuffer {
    int32_t dim = 0;
    absl::flat_hash_map<uint64_t, uint32_t> index;
    std::vector<uint64_t> keys;
    std::vector<float> sums;
  };

  void Accumulate(const GradientPush& push, double weight);
  void RecordStaleness(int32_t worker, int64_t staleness);
  // Empties the buffer (the dense sum by marking it empty, see dense_sum_holds_pushes_).
  void ClearBuffer();

  const AggregationKernels& kernels_;  // the active ISA level's
  const int64_t dim_;
  const int64_t global_batch_;
  v1::Mode mode_;
  int64_t version_;
  int64_t local_batch_ = 0;
  absl::flat_hash_set<int32_t> members_;
  // Sum of weight * samples * gradient over the pushes since the last update.
  std::vector<float> weighted_sum_;
  // False once the sum has been taken or cleared: its contents are then stale and count as zero,
  // and the next push writes it instead of adding to it. Zeroing it instead cost a write pass per
  // version, and the first push's add a read pass, over the whole slice (perf on the wire bench).
  bool dense_sum_holds_pushes_ = false;
  std::vector<SparseBuffer> sparse_;  // one per table
  int64_t buffered_samples_ = 0;
  // Sync: who has pushed for the current version.
  absl::flat_hash_set<int32_t> pushed_this_version_;
  // Sync: those of them whose place holds only a gradient from before sync_since_ (not held,
  // replaceable by their gradient for the version).
  absl::flat_hash_set<int32_t> unheld_placeholders_;
  int64_t sync_since_ = 0;
  // Set by a switch that must apply the old buffer before the new mode starts.
  bool flush_pending_ = false;
  // Per worker, the staleness of its last pushes admitted in the current mode (newest last).
  absl::flat_hash_map<int32_t, std::deque<int64_t>> recent_staleness_;
};

}  // namespace syncopate::aggregation

#endif  // SYNCOPATE_LIBS_AGGREGATION_GLOBAL_BATCH_AGGREGATOR_H_
