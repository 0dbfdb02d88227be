// The shard's per-version passes over the dense gradient (the aggregator's sum and mean, the
// gradient statistics' velocity) as a table of plain functions, compiled once per ISA level
// (aggregation_kernels.cc, libs/isa) so they vectorise to the widest registers the CPU has.
// Thread-safety: the functions only write their output arrays; disjoint arrays are safe
// concurrently.
#ifndef SYNCOPATE_LIBS_AGGREGATION_AGGREGATION_KERNELS_H_
#define SYNCOPATE_LIBS_AGGREGATION_AGGREGATION_KERNELS_H_

#include <cstddef>

// Declared, not included: kernel sources include as little as possible (libs/isa/dispatch.h).
namespace syncopate::isa {
enum class IsaLevel;
}  // namespace syncopate::isa

namespace syncopate::aggregation {

// What one velocity step measures (GradientStatistics).
struct VelocitySums {
  double mean_squared = 0;             // |ḡ|²
  double velocity_change_squared = 0;  // |v_k − v_{k−1}|²
  double velocity_squared = 0;         // |v_k|²
};

struct AggregationKernels {
  // sum = scale * g over n values (the first push of a version).
  void (*scale_into)(float* sum, const float* g, size_t n, float scale);
  // sum += scale * g over n values.
  void (*accumulate)(float* sum, const float* g, size_t n, float scale);
  // mean = sum / divisor over n values (divisor > 0).
  void (*divide_into)(float* mean, const float* sum, size_t n, float divisor);
  // velocity = decay * velocity + mean, measuring the three sums of VelocitySums on the way; the
  // sums are accumulated as tensor::SquaredNorm's (libs/tensor/reduction_kernels.h), in 16
  // lanes, so a lane sums 64 terms of a block: relative error at most ~4e-6.
  VelocitySums (*velocity_step)(float* velocity, const float* mean, size_t n, float decay);
};

// The kernels compiled for `level` (the baseline ones when this build has none for it); the CPU
// must support the level.
const AggregationKernels& AggregationKernelsFor(isa::IsaLevel level);

}  // namespace syncopate::aggregation

#endif  // SYNCOPATE_LIBS_AGGREGATION_AGGREGATION_KERNELS_H_
