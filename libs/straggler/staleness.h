// The GBA staleness rules (docs/design.md §5), in exactly one place: the shard's GBA aggregator
// decays pushed gradients with these, and the coordinator's ModePolicy predicts that decay with
// the same functions, so the prediction can never drift from what the shard does.
//
// Thread-safety: pure functions of their arguments; safe to call from any thread.
#ifndef SYNCOPATE_LIBS_STRAGGLER_STALENESS_H_
#define SYNCOPATE_LIBS_STRAGGLER_STALENESS_H_

#include <cstdint>
#include <span>

namespace syncopate {

// ι = ⌈N·B/G⌉ + 1: the largest staleness τ = version_now − token that a healthy worker's gradient
// reaches, for N workers pushing local batches of B samples into updates of G samples.
// Valid inputs always give ι ≥ 2. Degenerate inputs (N, B or G not positive) return 1: there is
// no healthy band to derive, so only gradients at most one version old keep full weight.
// Saturates at INT64_MAX instead of overflowing.
int64_t StalenessThreshold(int num_workers, int64_t local_batch, int64_t global_batch);

// w(τ) = 1 for τ ≤ ι and 1/(τ − ι + 1) beyond: full weight inside the healthy band, then
// harmonic decay, so a gradient one version past the band counts half, two versions a third.
// Always in (0, 1]. A negative staleness (impossible on a correct shard) counts as fresh.
double StalenessWeight(int64_t staleness, int64_t threshold);

// What staleness costs per sample, as measured by a shard from its synchronous updates
// (aggregation::GradientStatistics; the model and its derivation are in docs/design.md §6,
// "Statistical efficiency"). With v the optimizer's velocity over the mean gradients
// (v_k = μ·v_{k−1} + ḡ_k, μ the rule's velocity decay, 0 without momentum):
//   velocity_squared       E|v|²: the velocity's signal plus its noise;
//   velocity_drift_squared |V_k − V_{k−1}|², the true velocity's change in one update with the
//                          batches' noise removed: exactly the velocity error a gradient one
//                          version stale causes.
// A plain value: the shard fills it, the coordinator's ModePolicy prices gba with it.
struct StalenessCost {
  int64_t versions = 0;  // sync updates behind the estimate; 0 = never measured
  double velocity_squared = 0;
  double velocity_drift_squared = 0;  // may be < 0 by chance; counts as 0
  double velocity_drift_squared_standard_error = 0;

  bool measured() const { return versions > 0 && velocity_squared > 0; }
  // Progress per sample of updates whose gradients are `staleness` versions old on average,
  // relative to fresh ones: E|v|² / (E|v|² + τ²·D²), in (0, 1]; 1 when not measured.
  double Efficiency(double staleness) const;
  // Its standard error from the drift's (first-order; the velocity's own error is far smaller).
  double EfficiencyStandardError(double staleness) const;

  // The whole model's cost from the costs its shards measured on their slices. The squared norms
  // are sums over parameters, so the model's are the slices' sums; the drift's standard errors
  // add linearly, because every shard measures on the same global batches and their errors are
  // correlated (the sum is the bound for fully correlated ones); `versions` is the fewest any
  // measured slice has. Unmeasured slices are left out; if none is measured, neither is the
  // result.
  static StalenessCost Combine(std::span<const StalenessCost> slices);
};

}  // namespace syncopate

#endif  // SYNCOPATE_LIBS_STRAGGLER_STALENESS_H_
