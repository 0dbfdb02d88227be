#include "libs/straggler/staleness.h"

#include <algorithm>
#include <limits>

#include "absl/numeric/int128.h"

namespace syncopate {

// Why ι = ⌈N·B/G⌉ + 1 (docs/design.md §5). GBA (Su et al., "GBA: A Tuning-free Approach to Switch
// between Synchronous and Asynchronous Training for Recommendation Models", NeurIPS 2022,
// arXiv:2205.11048) keeps the global batch and decays gradients "with severe staleness"; this is
// our derivation of where severe begins, from the cluster's own shape rather than a knob:
//
// Under GBA the shard bumps its version each time G samples have arrived. Let a healthy worker's
// step (compute + pull/push) take T. All N workers together push N·B samples per T, so the shard
// completes x = N·B/G global batches — versions — during one healthy step. A worker pulls version
// t when its step starts and pushes one step later, by when the shard has bumped ⌊x⌋ or ⌈x⌉
// times depending on phase: a healthy gradient's τ ≤ ⌈x⌉. The "+1" is one version of slack for
// message ordering: a concurrent push can complete a global batch while this worker's pull
// response or push is in flight. So healthy workers never exceed ι.
//
// A worker k times slower spans k·T per step; the other N−1 push k·(N−1)·B samples meanwhile and
// it pushes its own B, so τ ≈ (k·(N−1) + 1)·B/G. At a switch B = G/N (x = 1, ι = 2), and τ > ι
// exactly when k > 2 + 1/(N−1): for any sizeable cluster a worker twice as slow as the rest sits
// on the edge of the band and anything slower is decayed (N = 4: beyond 2.33×).
int64_t StalenessThreshold(int num_workers, int64_t local_batch, int64_t global_batch) {
  if (num_workers <= 0 || local_batch <= 0 || global_batch <= 0) return 1;
  const absl::int128 samples_per_round = absl::int128(num_workers) * local_batch;
  const absl::int128 rounds = (samples_per_round + global_batch - 1) / global_batch;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (rounds >= kMax) return kMax;
  return static_cast<int64_t>(rounds) + 1;
}

double StalenessWeight(int64_t staleness, int64_t threshold) {
  if (staleness <= threshold) return 1.0;
  // τ − ι + 1 ≥ 2 here; computed in double so extreme values cannot overflow.
  return 1.0 / (static_cast<double>(staleness) - static_cast<double>(threshold) + 1.0);
}

// Why E|v|² / (E|v|² + τ²·D²) (docs/design.md §6). Pollux (Qiao et al., OSDI'21) prices a
// configuration by its statistical efficiency: progress per sample falls as the error of the
// update direction grows against its signal, which it measures with the gradient noise scale
// (McCandlish et al. 2018). A gradient τ versions stale adds a bias to the direction. The
// optimizer moves along its velocity, not the raw gradient, so the bias that matters is the
// velocity's: a gradient one version late leaves v_{k−1} where v_k should be (sum the geometric
// series), an error of exactly the velocity's one-update change; τ versions late, about τ such
// changes in the same direction (the velocity turns slowly over 1/(1−μ) updates). Treating that
// bias like noise in Pollux's model, the efficiency is signal-plus-noise over
// signal-plus-noise-plus-bias. It is a model: measured on the default MLP, its τ = 1 value
// (0.69 early to 0.98 late in a cosine run, about 0.85 on average) matches the per-sample cost
// gba showed in the straggler bench (time to 85% 0.63x sync's at 2x the throughput: ~0.8),
// where the same formula on raw gradients, without the velocity, predicted 0.37 and is wrong.
double StalenessCost::Efficiency(double staleness) const {
  if (!measured()) return 1.0;
  const double bias = staleness * staleness * std::max(velocity_drift_squared, 0.0);
  return velocity_squared / (velocity_squared + bias);
}

double StalenessCost::EfficiencyStandardError(double staleness) const {
  if (!measured()) return 0.0;
  const double t2 = staleness * staleness;
  const double denominator = velocity_squared + t2 * std::max(velocity_drift_squared, 0.0);
  return velocity_squared * t2 * velocity_drift_squared_standard_error /
         (denominator * denominator);
}

StalenessCost StalenessCost::Combine(std::span<const StalenessCost> slices) {
  StalenessCost whole;
  for (const StalenessCost& slice : slices) {
    if (!slice.measured()) continue;
    whole.versions =
        whole.versions == 0 ? slice.versions : std::min(whole.versions, slice.versions);
    whole.velocity_squared += slice.velocity_squared;
    whole.velocity_drift_squared += slice.velocity_drift_squared;
    whole.velocity_drift_squared_standard_error += slice.velocity_drift_squared_standard_error;
  }
  return whole;
}

}  // namespace syncopate
