// The dense layers' arithmetic as a table of plain functions over raw column-major float arrays,
// compiled once per ISA level (mlp_kernels.cc, libs/isa): the MLP's layers and the CTR models'
// deep part. Mlp and CtrModel hold the layout and validation; these do the math. No Eigen type
// crosses this interface (libs/isa/dispatch.h says why). Thread-safety: the functions are pure
// apart from writing their output arrays.
#ifndef SYNCOPATE_LIBS_MODEL_MLP_KERNELS_H_
#define SYNCOPATE_LIBS_MODEL_MLP_KERNELS_H_

#include <cstdint>

// Declared, not included: kernel sources include as little as possible (libs/isa/dispatch.h).
namespace syncopate::isa {
enum class IsaLevel;
}  // namespace syncopate::isa

namespace syncopate::model {

// Shapes: a layer maps `inputs` to `outputs` for `batch` examples, one example per column.
// weights are [outputs x inputs], activations [width x batch], all column-major.
struct MlpKernels {
  // out = weights * in + bias (per column), then max(out, 0) when `relu`.
  void (*dense_forward)(const float* weights, const float* bias, const float* in, int outputs,
                        int inputs, int64_t batch, bool relu, float* out);
  // Softmax cross-entropy of each column of `logits` [classes x batch] against its label, in the
  // stable form (logits shifted by their max). Overwrites `logits` with the gradient of the
  // batch's mean loss with respect to them, (softmax - onehot) / batch, and returns the sum of
  // the per-example losses. Labels must be in [0, classes).
  double (*softmax_cross_entropy)(float* logits, const int32_t* labels, int classes, int64_t batch);
  // Given d_out = dLoss/d(pre-activation) [outputs x batch] and the layer's input `in`:
  // d_weights = d_out * in^T, d_bias = row sums of d_out, and, when d_in is not null,
  // d_in = weights^T * d_out, where `relu_in` (a ReLU produced `in`) only where in > 0, else 0.
  void (*dense_backward)(const float* weights, const float* d_out, const float* in, int outputs,
                         int inputs, int64_t batch, float* d_weights, float* d_bias, float* d_in,
                         bool relu_in);
};

// The kernels compiled for `level` (the baseline ones when this build has none for it). The
// caller must only ask for a level the CPU supports (isa::SupportedIsaLevels()).
const MlpKernels& MlpKernelsFor(isa::IsaLevel level);

}  // namespace syncopate::model

#endif  // SYNCOPATE_LIBS_MODEL_MLP_KERNELS_H_
