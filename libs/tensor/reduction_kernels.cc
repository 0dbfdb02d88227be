// Compiled once per ISA level (syncopate_isa_kernels in cmake/syncopate.cmake): everything here
// must stay inside SYNCOPATE_ISA_NS or an anonymous namespace (libs/isa/dispatch.h).
#include "libs/tensor/reduction_kernels.h"

#include <algorithm>
#include <cmath>

#ifndef SYNCOPATE_ISA_NS
#error "reduction_kernels.cc is compiled per ISA level with -DSYNCOPATE_ISA_NS=isa_<level>"
#endif

namespace syncopate::tensor::SYNCOPATE_ISA_NS {
namespace {

// Independent partial sums, so the compiler vectorises and pipelines them without reassociating
// anything: two AVX-512 registers, four AVX2, eight SSE. (SquaredNorm runs on every sync push of
// a job with momentum; with one accumulator, chaining every add on the previous one, it cost 3.7x
// the aggregation of the same version: `syncopate-perf-bench --only=statistics`.)
constexpr size_t kLanes = 32;

double ExactSquaredNorm(const float* x, size_t n) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

double SquaredNorm(const float* __restrict x, size_t n) {
  double total = 0;
  for (size_t begin = 0; begin < n; begin += kReductionBlock) {
    const size_t end = std::min(n, begin + kReductionBlock);
    float lanes[kLanes] = {};
    size_t i = begin;
    for (; i + kLanes <= end; i += kLanes) {
      for (size_t l = 0; l < kLanes; ++l) lanes[l] += x[i + l] * x[i + l];
    }
    double block = 0;
    for (const float lane : lanes) block += lane;
    for (; i < end; ++i) block += static_cast<double>(x[i]) * x[i];
    if (!std::isfinite(block)) block = ExactSquaredNorm(x + begin, end - begin);
    total += block;
  }
  return total;
}

}  // namespace

extern const ReductionKernels kReductionKernels;
const ReductionKernels kReductionKernels = {&SquaredNorm};

}  // namespace syncopate::tensor::SYNCOPATE_ISA_NS
