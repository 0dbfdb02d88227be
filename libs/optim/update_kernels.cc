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

void Sgd(float* __restrict p, const float* __restrict g, size_t n, float lr) {
  for (size_t i = 0; i < n; ++i) p[i] -= lr * g[i];
}

void Momentum(float* __restrict p, float* __restrict v, const float* __restrict g, size_t n,
              float lr, float mu) {
  for (size_t i = 0; i < n; ++i) {
    v[i] = mu * v[i] + g[i];
    p[i] -= lr * v[i];
  }
}

void Nesterov(float* __restrict p, float* __restrict v, const float* __restrict g, size_t n,
              float lr, float mu) {
  for (size_t i = 0; i < n; ++i) {
    v[i] = mu * v[i] + g[i];
    p[i] -= lr * (g[i] + mu * v[i]);
  }
}

void Adagrad(float* __restrict p, float* __restrict acc, const float* __restrict g, size_t n,
             float lr, float eps) {
  for (size_t i = 0; i < n; ++i) {
    acc[i] += g[i] * g[i];
    p[i] -= lr * g[i] / (std::sqrt(acc[i]) + eps);
  }
}

void Adam(float* __restrict p, float* __restrict m, float* __restrict v, const float* __restrict g,
          size_t n, float lr_t, float b1, float b2, float eps) {
  for (size_t i = 0; i < n; ++i) {
    m[i] = b1 * m[i] + (1.0f - b1) * g[i];
    v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    p[i] -= lr_t * m[i] / (std::sqrt(v[i]) + eps);
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
