// The GBA staleness rules (docs/design.md §5), in exactly one place: the shard's GBA aggregator
// decays pushed gradients with these, and the coordinator's ModePolicy predicts that decay with
// the same functions, so the prediction can never drift from what the shard does.
//
// Thread-safety: pure functions of their arguments; safe to call from any thread.
#ifndef SYNCOPATE_LIBS_STRAGGLER_STALENESS_H_
#define SYNCOPATE_LIBS_STRAGGLER_STALENESS_H_

#include <cstdint>

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

}  // namespace syncopate

#endif  // SYNCOPATE_LIBS_STRAGGLER_STALENESS_H_
