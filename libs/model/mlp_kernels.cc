// Compiled once per ISA level (syncopate_isa_kernels in cmake/syncopate.cmake): everything here
// must stay inside SYNCOPATE_ISA_NS or an anonymous namespace (libs/isa/dispatch.h).
#include "libs/model/mlp_kernels.h"

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

double SoftmaxCrossEntropy(float* logits, const int32_t* labels, int classes, int64_t batch) {
  MatrixMap z(logits, classes, batch);
  const float inverse_batch = 1.0f / static_cast<float>(batch);
  double loss_sum = 0.0;
  for (int64_t j = 0; j < batch; ++j) {
    auto column = z.col(j);
    const int label = labels[j];
    const float max_logit = column.maxCoeff();
    const float shifted_label_logit = column(label) - max_logit;
    column = (column.array() - max_logit).exp();
    const float sum = column.sum();
    loss_sum += std::log(static_cast<double>(sum)) - shifted_label_logit;
    column *= inverse_batch / sum;
    column(label) -= inverse_batch;
  }
  return loss_sum;
}

void DenseBackward(const float* weights, const float* d_out, const float* in, int outputs,
                   int inputs, int64_t batch, float* d_weights, float* d_bias, float* d_in) {
  const ConstMatrixMap delta(d_out, outputs, batch);
  const ConstMatrixMap x(in, inputs, batch);
  MatrixMap dw(d_weights, outputs, inputs);
  VectorMap db(d_bias, outputs);
  dw.noalias() = delta * x.transpose();
  db = delta.rowwise().sum();
  if (d_in == nullptr) return;
  const ConstMatrixMap w(weights, outputs, inputs);
  MatrixMap dx(d_in, inputs, batch);
  dx.noalias() = w.transpose() * delta;
  dx = (x.array() > 0.0f).select(dx, 0.0f);
}

}  // namespace

extern const MlpKernels kMlpKernels;
const MlpKernels kMlpKernels = {
    .dense_forward = DenseForward,
    .softmax_cross_entropy = SoftmaxCrossEntropy,
    .dense_backward = DenseBackward,
};

}  // namespace syncopate::model::SYNCOPATE_ISA_NS
