// The optimizers' per-element update loops as a table of plain functions, compiled once per ISA
// level (update_kernels.cc, libs/isa) so the loops vectorize to the widest registers the CPU has.
// update_rule.cc owns the rules' parameters and validation; these do the arithmetic.
// Thread-safety: the functions only write their output arrays; disjoint arrays are safe
// concurrently.
#ifndef SYNCOPATE_LIBS_OPTIM_UPDATE_KERNELS_H_
#define SYNCOPATE_LIBS_OPTIM_UPDATE_KERNELS_H_

#include <cstddef>

// Declared, not included: kernel sources include as little as possible (libs/isa/dispatch.h).
namespace syncopate::isa {
enum class IsaLevel;
}  // namespace syncopate::isa

namespace syncopate::optim {

// Each updates n elements in place; the formulas are the rules' (update_rule.cc), written in
// torch.optim's order of operations (PyTorch 1.13, foreach=False): fma(a, b, c) is a * b + c
// rounded once where the level has FMA (x86-64-v3 and v4, like torch's vectorised kernels), twice
// on the baseline level. tests/unit/pytorch/optimizer_parity_test.cc holds them to torch.optim.
struct UpdateKernels {
  // p = fma(g, -lr, p)
  void (*sgd)(float* p, const float* g, size_t n, float lr);
  // v = mu * v + g; p = fma(v, -lr, p)
  void (*momentum)(float* p, float* v, const float* g, size_t n, float lr, float mu);
  // v = mu * v + g; p = fma(fma(v, mu, g), -lr, p)
  void (*nesterov)(float* p, float* v, const float* g, size_t n, float lr, float mu);
  // acc = fma(g, g, acc); p += (-lr * g) / (sqrt(acc) + eps)
  void (*adagrad)(float* p, float* acc, const float* g, size_t n, float lr, float eps);
  // m = fma(g, 1 - b1, b1 * m); v = fma((1 - b2) * g, g, b2 * v);
  // p += (-step_size * m) / (sqrt(v) / bias2_sqrt + eps), step_size = lr / (1 - b1^t),
  // bias2_sqrt = sqrt(1 - b2^t) (Kingma & Ba's algorithm 1 with eps outside the correction)
  void (*adam)(float* p, float* m, float* v, const float* g, size_t n, float step_size,
               float bias2_sqrt, float b1, float b2, float eps);
};

// The kernels compiled for `level` (the baseline ones when this build has none for it); the CPU
// must support the level.
const UpdateKernels& UpdateKernelsFor(isa::IsaLevel level);

}  // namespace syncopate::optim

#endif  // SYNCOPATE_LIBS_OPTIM_UPDATE_KERNELS_H_
