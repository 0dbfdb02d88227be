// Compiled once per ISA level (syncopate_isa_kernels in cmake/syncopate.cmake): everything here
// must stay inside SYNCOPATE_ISA_NS or an anonymous namespace (libs/isa/dispatch.h).
#include "libs/model/mlp_kernels.h"

#include <algorithm>
#include <cmath>

#include "Eigen/Core"

#ifndef SYNCOPATE_ISA_NS
#error "mlp_kernels.cc is compiled per ISA level with -DSYNCOPATE_ISA_NS=isa_<level>"
#endif

namespace syncopate::model::SYNCOPATE_ISA_NS {
namespace {

using MatrixMap = Eigen::Map<Eigen::MatrixXf>;
using ConstMatrixMap = Eigen::Map<const Eigen::MatrixXf>;
using VectorMap = Eigen::Map<Eigen::VectorXf>;
using ConstVectorMap = Eigen::Map<const Eigen::VectorXf>;

void DenseForward(const float* weights, const float* bias, const float* in, int outputs, int inputs,
                  int64_t batch, bool relu, float* out) {
  const ConstMatrixMap w(weights, outputs, inputs);
  const ConstVectorMap b(bias, outputs);
  const ConstMatrixMap x(in, inputs, batch);
  MatrixMap y(out, outputs, batch);
  y.noalias() = w * x;
  y.colwise() += b;
  if (relu) y = y.cwiseMax(0.0f);
}

// Plain loops, not Eigen reductions: Eigen peels a reduction's unaligned head and sums it in a
// different order than its vector body, so with 32- and 64-byte vectors (v3, v4) the result would
// depend on where malloc put the buffer and two identical runs would differ in the last bits.
// Ten classes per example make the vector speed irrelevant here.
double SoftmaxCrossEntropy(float* logits, const int32_t* labels, int classes, int64_t batch) {
  const float inverse_batch = 1.0f / static_cast<float>(batch);
  double loss_sum = 0.0;
  for (int64_t j = 0; j < batch; ++j) {
    float* z = logits + j * classes;
    const int label = labels[j];
    float max_logit = z[0];
    for (int c = 1; c < classes; ++c) max_logit = std::max(max_logit, z[c]);
    const float shifted_label_logit = z[label] - max_logit;
    float sum = 0.0f;
    for (int c = 0; c < classes; ++c) {
      z[c] = std::exp(z[c] - max_logit);
      sum += z[c];
    }
    loss_sum += std::log(static_cast<double>(sum)) - shifted_label_logit;
    const float scale = inverse_batch / sum;
    for (int c = 0; c < classes; ++c) z[c] *= scale;
    z[label] -= inverse_batch;
  }
  return loss_sum;
}

void DenseBackward(const float* weights, const float* d_out, const float* in, int outputs,
                   int inputs, int64_t batch, float* d_weights, float* d_bias, float* d_in,
                   bool relu_in) {
  const ConstMatrixMap delta(d_out, outputs, batch);
  const ConstMatrixMap x(in, inputs, batch);
  MatrixMap dw(d_weights, outputs, inputs);
  dw.noalias() = delta * x.transpose();
  // Column by column, element-wise: the same summation order for every row wherever the buffers
  // sit (an Eigen rowwise().sum() is a reduction, alignment-dependent as above).
  VectorMap db(d_bias, outputs);
  db.setZero();
  for (int64_t j = 0; j < batch; ++j) db += delta.col(j);
  if (d_in == nullptr) return;
  const ConstMatrixMap w(weights, outputs, inputs);
  MatrixMap dx(d_in, inputs, batch);
  dx.noalias() = w.transpose() * delta;
  if (relu_in) dx = (x.array() > 0.0f).select(dx, 0.0f);
}

}  // namespace

extern const MlpKernels kMlpKernels;
const MlpKernels kMlpKernels = {
    .dense_forward = DenseForward,
    .softmax_cross_entropy = SoftmaxCrossEntropy,
    .dense_backward = DenseBackward,
};

}  // namespace syncopate::model::SYNCOPATE_ISA_NS
