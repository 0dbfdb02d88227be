// Reductions over float arrays as a table of plain functions, compiled once per ISA level
// (reduction_kernels.cc, libs/isa) so they vectorise to the widest registers the CPU has.
// packed.h's SquaredNorm calls the active level's table; tests compare the levels.
// Thread-safety: the functions only read their inputs.
#ifndef SYNCOPATE_LIBS_TENSOR_REDUCTION_KERNELS_H_
#define SYNCOPATE_LIBS_TENSOR_REDUCTION_KERNELS_H_

#include <cstddef>

// Declared, not included: kernel sources include as little as possible (libs/isa/dispatch.h).
namespace syncopate::isa {
enum class IsaLevel;
}  // namespace syncopate::isa

namespace syncopate::tensor {

// Float partial sums over blocks of this many elements, each block's total added in double:
// the products and the adds within a block stay in float lanes, which every level vectorises
// (GCC does not vectorise float products into double accumulators at SSE2 or AVX2, and a
// double per element halves the lanes where it does). A lane sums kReductionBlock / 32 = 32
// squares, so a block's relative error is at most ~2e-6, far below the sampling noise of
// anything it measures (GradientStatistics). A block whose float sum is not finite (a value
// beyond ~1e18, or a NaN or Inf) is summed again in double, so the result is finite exactly
// when every value is (SquaredNorm's contract, which the shard's validation relies on).
inline constexpr size_t kReductionBlock = 1024;

struct ReductionKernels {
  // Σ x² over n values (tensor::SquaredNorm).
  double (*squared_norm)(const float* x, size_t n);
};

// The kernels compiled for `level` (the baseline ones when this build has none for it); the CPU
// must support the level.
const ReductionKernels& ReductionKernelsFor(isa::IsaLevel level);

}  // namespace syncopate::tensor

#endif  // SYNCOPATE_LIBS_TENSOR_REDUCTION_KERNELS_H_
