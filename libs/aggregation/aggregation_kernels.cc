// Compiled once per ISA level (syncopate_isa_kernels in cmake/syncopate.cmake): everything here
// must stay inside SYNCOPATE_ISA_NS or an anonymous namespace (libs/isa/dispatch.h). The arrays
// of one call are distinct, hence __restrict: without it GCC vectorises behind run-time overlap
// checks.
#include "libs/aggregation/aggregation_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "libs/tensor/reduction_kernels.h"

#ifndef SYNCOPATE_ISA_NS
#error "aggregation_kernels.cc is compiled per ISA level with -DSYNCOPATE_ISA_NS=isa_<level>"
#endif

namespace syncopate::aggregation::SYNCOPATE_ISA_NS {
namespace {

// Three sums of kLanes float lanes each: 6 AVX2 registers, 12 SSE (perf: the earlier scalar
// pass, with double lanes GCC would not vectorise, cost 2.4x the optimizer's Nesterov update on
// the same slice in `syncopate-perf-bench --only=wire`).
constexpr size_t kLanes = 16;
constexpr size_t kBlock = tensor::kReductionBlock;

void ScaleInto(float* __restrict sum, const float* __restrict g, size_t n, float scale) {
  for (size_t i = 0; i < n; ++i) sum[i] = scale * g[i];
}

void Accumulate(float* __restrict sum, const float* __restrict g, size_t n, float scale) {
  for (size_t i = 0; i < n; ++i) sum[i] += scale * g[i];
}

void DivideInto(float* __restrict mean, const float* __restrict sum, size_t n, float divisor) {
  // A division, not a multiplication by the reciprocal: the same values as the sparse rows'
  // NormalisedByGlobalBatch.
  for (size_t i = 0; i < n; ++i) mean[i] = sum[i] / divisor;
}

// One element: the next velocity and its three squared terms, exactly in double.
void ExactStep(float& velocity, float mean, float decay, VelocitySums& sums) {
  const float next = decay * velocity + mean;
  const double change = static_cast<double>(next) - velocity;
  sums.mean_squared += static_cast<double>(mean) * mean;
  sums.velocity_change_squared += change * change;
  sums.velocity_squared += static_cast<double>(next) * next;
  velocity = next;
}

VelocitySums VelocityStep(float* __restrict velocity, const float* __restrict mean, size_t n,
                          float decay) {
  VelocitySums sums;
  float before[kBlock];  // the block's old velocity, should its float sums overflow
  for (size_t begin = 0; begin < n; begin += kBlock) {
    const size_t end = std::min(n, begin + kBlock);
    std::memcpy(before, velocity + begin, (end - begin) * sizeof(float));
    float mean_lanes[kLanes] = {};
    float change_lanes[kLanes] = {};
    float velocity_lanes[kLanes] = {};
    size_t i = begin;
    for (; i + kLanes <= end; i += kLanes) {
      for (size_t l = 0; l < kLanes; ++l) {
        const float g = mean[i + l];
        const float old = velocity[i + l];
        const float next = decay * old + g;
        // Exact whenever next and old are within a factor 2 of each other (Sterbenz), the
        // usual case at μ near 1.
        const float change = next - old;
        mean_lanes[l] += g * g;
        change_lanes[l] += change * change;
        velocity_lanes[l] += next * next;
        velocity[i + l] = next;
      }
    }
    VelocitySums block;
    for (size_t l = 0; l < kLanes; ++l) {
      block.mean_squared += mean_lanes[l];
      block.velocity_change_squared += change_lanes[l];
      block.velocity_squared += velocity_lanes[l];
    }
    for (; i < end; ++i) ExactStep(velocity[i], mean[i], decay, block);
    if (!std::isfinite(block.mean_squared + block.velocity_change_squared +
                       block.velocity_squared)) {
      block = VelocitySums();
      for (size_t j = begin; j < end; ++j) {
        velocity[j] = before[j - begin];
        ExactStep(velocity[j], mean[j], decay, block);
      }
    }
    sums.mean_squared += block.mean_squared;
    sums.velocity_change_squared += block.velocity_change_squared;
    sums.velocity_squared += block.velocity_squared;
  }
  return sums;
}

}  // namespace

extern const AggregationKernels kAggregationKernels;
const AggregationKernels kAggregationKernels = {
    .scale_into = ScaleInto,
    .accumulate = Accumulate,
    .divide_into = DivideInto,
    .velocity_step = VelocityStep,
};

}  // namespace syncopate::aggregation::SYNCOPATE_ISA_NS
