#include "libs/model/mlp.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "libs/common/status_macros.h"
#include "libs/model/auc.h"
#include "libs/model/mlp_kernels.h"
#include "libs/tensor/initializer.h"

namespace syncopate::model {
namespace {

using ::syncopate::v1::Initializer;

// Examples per forward pass in Evaluate: bounds scratch to ~1000 x (sum of widths) floats while
// keeping each matrix product large enough to run at full speed.
constexpr int64_t kEvaluateChunk = 1000;

}  // namespace

absl::StatusOr<Mlp> Mlp::Create(int input_dim, std::vector<int> hidden, int num_classes,
                                isa::IsaLevel isa_level) {
  if (isa_level > isa::HighestSupportedIsaLevel()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "MLP kernels for ISA level ", isa::IsaLevelName(isa_level), " cannot run on this CPU"));
  }
  if (input_dim <= 0 || num_classes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MLP needs input_dim > 0 and num_classes > 0, got ", input_dim, " and ", num_classes));
  }
  std::vector<int> widths = std::move(hidden);
  for (size_t i = 0; i < widths.size(); ++i) {
    if (widths[i] <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("MLP hidden layer ", i, " needs a positive width, got ", widths[i]));
    }
  }
  widths.push_back(num_classes);

  int64_t offset = 0;
  return Mlp(input_dim, num_classes, LayOutDenseLayers(input_dim, widths, offset), isa_level);
}

Mlp::Mlp(int input_dim, int num_classes, std::vector<DenseLayer> layers, isa::IsaLevel isa_level)
    : input_dim_(input_dim),
      num_classes_(num_classes),
      layers_(std::move(layers)),
      isa_level_(isa_level),
      kernels_(&MlpKernelsFor(isa_level)) {
  num_parameters_ = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const DenseLayer& layer = layers_[i];
    Initializer weight_init;
    weight_init.set_kind(Initializer::HE_UNIFORM);
    weight_init.set_fan_in(layer.inputs);
    weight_init.set_fan_out(layer.outputs);
    Initializer bias_init;
    bias_init.set_kind(Initializer::ZEROS);
    tensors_.push_back({.name = absl::StrCat("dense", i, "/w"),
                        .rows = layer.outputs,
                        .cols = layer.inputs,
                        .init = weight_init});
    tensors_.push_back({.name = absl::StrCat("dense", i, "/b"),
                        .rows = layer.outputs,
                        .cols = 1,
                        .init = bias_init});
    num_parameters_ += tensors_[tensors_.size() - 2].size() + tensors_.back().size();
  }
  activations_.resize(layers_.size());
}

absl::Status Mlp::ValidateBatch(const BatchView& batch) const {
  if (batch.size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("batch has ", batch.size, " examples"));
  }
  if (batch.features == nullptr || batch.labels == nullptr) {
    return absl::InvalidArgumentError("batch has null features or labels");
  }
  for (int64_t i = 0; i < batch.size; ++i) {
    if (batch.labels[i] < 0 || batch.labels[i] >= num_classes_) {
      return absl::InvalidArgumentError(absl::StrCat("label ", batch.labels[i], " of example ", i,
                                                     " is outside [0, ", num_classes_, ")"));
    }
  }
  return absl::OkStatus();
}

void Mlp::ResizeScratch(int64_t batch_size) {
  int64_t widest_hidden = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    activations_[i].resize(layers_[i].outputs * batch_size);
    if (i + 1 < layers_.size()) {
      widest_hidden = std::max<int64_t>(widest_hidden, layers_[i].outputs);
    }
  }
  delta_.resize(widest_hidden * batch_size);
  next_delta_.resize(widest_hidden * batch_size);
}

void Mlp::Forward(const float* params, const float* features, int64_t batch_size) {
  // The row-major [batch x input_dim] feature block is, read column-major, [input_dim x batch]
  // with one example per column: mapped as is, never copied.
  const float* inputs = features;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const DenseLayer& layer = layers_[i];
    // ReLU between layers; the output layer stays linear.
    kernels_->dense_forward(params + layer.weight_offset, params + layer.bias_offset, inputs,
                            layer.outputs, layer.inputs, batch_size,
                            /*relu=*/i + 1 < layers_.size(), activations_[i].data());
    inputs = activations_[i].data();
  }
}

absl::StatusOr<float> Mlp::LossAndGradient(std::span<const float> params, const BatchView& batch,
                                           std::span<float> grad) {
  if (std::cmp_not_equal(params.size(), num_parameters_) ||
      std::cmp_not_equal(grad.size(), num_parameters_)) {
    return absl::InvalidArgumentError(absl::StrCat("params has ", params.size(), " and grad ",
                                                   grad.size(), " floats; the model has ",
                                                   num_parameters_, " parameters"));
  }
  SYNCOPATE_RETURN_IF_ERROR(ValidateBatch(batch));
  const int64_t batch_size = batch.size;
  ResizeScratch(batch_size);
  Forward(params.data(), batch.features, batch_size);

  // The logits become dLoss/dlogits, the delta of the output layer.
  const double loss_sum = kernels_->softmax_cross_entropy(activations_.back().data(), batch.labels,
                                                          num_classes_, batch_size);

  const float* delta = activations_.back().data();
  std::vector<float>* free_buffer = &delta_;
  for (size_t i = layers_.size(); i-- > 0;) {
    const DenseLayer& layer = layers_[i];
    // No gradient with respect to the features (i == 0).
    float* d_in = i == 0 ? nullptr : free_buffer->data();
    kernels_->dense_backward(params.data() + layer.weight_offset, delta,
                             i == 0 ? batch.features : activations_[i - 1].data(), layer.outputs,
                             layer.inputs, batch_size, grad.data() + layer.weight_offset,
                             grad.data() + layer.bias_offset, d_in, /*relu_in=*/true);
    if (i == 0) break;
    delta = d_in;
    free_buffer = (free_buffer == &delta_) ? &next_delta_ : &delta_;
  }
  return static_cast<float>(loss_sum / static_cast<double>(batch_size));
}

absl::StatusOr<Evaluation> Mlp::Evaluate(std::span<const float> params, const BatchView& data) {
  if (std::cmp_not_equal(params.size(), num_parameters_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "params has ", params.size(), " floats; the model has ", num_parameters_, " parameters"));
  }
  SYNCOPATE_RETURN_IF_ERROR(ValidateBatch(data));
  int64_t correct = 0;
  double loss_sum = 0.0;
  std::vector<float> probabilities(static_cast<size_t>(data.size) * num_classes_);
  for (int64_t begin = 0; begin < data.size; begin += kEvaluateChunk) {
    const int64_t chunk = std::min(kEvaluateChunk, data.size - begin);
    ResizeScratch(chunk);
    Forward(params.data(), data.features + begin * input_dim_, chunk);
    // Logits [num_classes x chunk], one example per column.
    const float* logits = activations_.back().data();
    for (int64_t j = 0; j < chunk; ++j) {
      const float* z = logits + j * num_classes_;
      const int label = data.labels[begin + j];
      const int predicted = static_cast<int>(std::max_element(z, z + num_classes_) - z);
      const float max_logit = z[predicted];  // max_element keeps the first max on ties
      correct += (predicted == label) ? 1 : 0;
      double sum_exp = 0.0;
      for (int c = 0; c < num_classes_; ++c) sum_exp += std::exp(z[c] - max_logit);
      loss_sum += std::log(sum_exp) - (z[label] - max_logit);
      for (int c = 0; c < num_classes_; ++c) {
        probabilities[(begin + j) * num_classes_ + c] =
            static_cast<float>(std::exp(z[c] - max_logit) / sum_exp);
      }
    }
  }
  const double examples = static_cast<double>(data.size);
  return Evaluation{
      .accuracy = static_cast<double>(correct) / examples,
      .mean_loss = loss_sum / examples,
      .auc = MacroOneVsRestAuc(probabilities, std::span<const int32_t>(data.labels, data.size),
                               num_classes_),
      .examples = data.size};
}

std::vector<float> InitialParameters(const Mlp& mlp, uint64_t seed) {
  std::vector<float> params(mlp.num_parameters());
  int64_t offset = 0;
  for (const DenseTensorSpec& spec : mlp.tensors()) {
    // Cannot fail: Mlp::Create admits only positive widths, so every fan is positive.
    [[maybe_unused]] const absl::Status status =
        tensor::InitializeSlice(spec.init, seed, spec.name, /*tensor_offset=*/0,
                                std::span<float>(params.data() + offset, spec.size()));
    assert(status.ok());
    offset += spec.size();
  }
  return params;
}

}  // namespace syncopate::model
