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

// Each updates n elements in place; the formulas are the rules' (update_rule.cc).
struct UpdateKernels {
  // p -= lr * g
  void (*sgd)(float* p, const float* g, size_t n, float lr);
  // v = mu * v + g; p -= lr * v
  void (*momentum)(float* p, float* v, const float* g, size_t n, float lr, float mu);
  // v = mu * v + g; p -= lr * (g + mu * v)
  void (*nesterov)(float* p, float* v, const float* g, size_t n, float lr, float mu);
  // acc += g^2; p -= lr * g / (sqrt(acc) + eps)
  void (*adagrad)(float* p, float* acc, const float* g, size_t n, float lr, float eps);
  // m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p -= lr_t * m / (sqrt(v) + eps)
  void (*adam)(float* p, float* m, float* v, const float* g, size_t n, float lr_t, float b1,
               float b2, float eps);
};

// The kernels compiled for `level` (the baseline ones when this build has none for it); the CPU
// must support the level.
const UpdateKernels& UpdateKernelsFor(isa::IsaLevel level);

}  // namespace syncopate::optim

#endif  // SYNCOPATE_LIBS_OPTIM_UPDATE_KERNELS_H_
