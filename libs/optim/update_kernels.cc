// Compiled once per ISA level (syncopate_isa_kernels in cmake/syncopate.cmake): everything here
// must stay inside SYNCOPATE_ISA_NS or an anonymous namespace (libs/isa/dispatch.h). The
// parameters, gradients and slots of one update are distinct arrays, hence __restrict: without
// it GCC vectorizes behind run-time overlap checks.
#include "libs/optim/update_kernels.h"

#include <cmath>

#ifndef SYNCOPATE_ISA_NS
#error "update_kernels.cc is compiled per ISA level with -DSYNCOPATE_ISA_NS=isa_<level>"
#endif

namespace syncopate::optim::SYNCOPATE_ISA_NS {
namespace {

// a * b + c rounded once where this level has FMA, as torch's vectorised kernels compute
// `add(x, alpha)` and `addcmul` (measured against torch 1.13 here); the baseline level has no FMA
// and rounds twice (a libm fma there would be a slow software emulation).
inline float Fma(float a, float b, float c) {
#ifdef __FMA__
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

void Sgd(float* __restrict p, const float* __restrict g, size_t n, float lr) {
  for (size_t i = 0; i < n; ++i) p[i] = Fma(g[i], -lr, p[i]);
}

void Momentum(float* __restrict p, float* __restrict v, const float* __restrict g, size_t n,
              float lr, float mu) {
  for (size_t i = 0; i < n; ++i) {
    v[i] = mu * v[i] + g[i];
    p[i] = Fma(v[i], -lr, p[i]);
  }
}

void Nesterov(float* __restrict p, float* __restrict v, const float* __restrict g, size_t n,
              float lr, float mu) {
  for (size_t i = 0; i < n; ++i) {
    v[i] = mu * v[i] + g[i];
    p[i] = Fma(Fma(v[i], mu, g[i]), -lr, p[i]);
  }
}

void Adagrad(float* __restrict p, float* __restrict acc, const float* __restrict g, size_t n,
             float lr, float eps) {
  for (size_t i = 0; i < n; ++i) {
    acc[i] = Fma(g[i], g[i], acc[i]);
    p[i] += (-lr * g[i]) / (std::sqrt(acc[i]) + eps);
  }
}

void Adam(float* __restrict p, float* __restrict m, float* __restrict v, const float* __restrict g,
          size_t n, float step_size, float bias2_sqrt, float b1, float b2, float eps) {
  const float one_minus_b1 = 1.0f - b1;
  const float one_minus_b2 = 1.0f - b2;
  for (size_t i = 0; i < n; ++i) {
    m[i] = Fma(g[i], one_minus_b1, m[i] * b1);
    v[i] = Fma(one_minus_b2 * g[i], g[i], v[i] * b2);
    p[i] += (-step_size * m[i]) / (std::sqrt(v[i]) / bias2_sqrt + eps);
  }
}

}  // namespace

extern const UpdateKernels kUpdateKernels;
const UpdateKernels kUpdateKernels = {
    .sgd = Sgd,
    .momentum = Momentum,
    .nesterov = Nesterov,
    .adagrad = Adagrad,
    .adam = Adam,
};

}  // namespace syncopate::optim::SYNCOPATE_ISA_NS
