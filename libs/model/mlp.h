// A dense ReLU multilayer perceptron with softmax cross-entropy: the worker's compute step and
// the evaluator's metric. Parameters live outside the model, in one flat float vector (what the
// shards store and partition); the model only knows the layout and the math.
// Thread-safety: thread-compatible. Const methods are safe concurrently; LossAndGradient and
// Evaluate reuse scratch buffers owned by the instance, so use one instance per thread.
#ifndef SYNCOPATE_LIBS_MODEL_MLP_H_
#define SYNCOPATE_LIBS_MODEL_MLP_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "libs/isa/isa.h"
#include "libs/model/dense_layout.h"
#include "syncopate/v1/cluster.pb.h"

namespace syncopate::model {

// One dense tensor of the flat parameter vector. Weights are [rows = outputs x cols = inputs]
// stored column-major (element (r, c) at r + c * rows), i.e. inputs' weights are contiguous per
// input; biases are [outputs x 1].
struct MlpKernels;

struct DenseTensorSpec {
  std::string name;
  int64_t rows;
  int64_t cols;
  syncopate::v1::Initializer init;
  // Not a parameter but a PyTorch module's buffer (v1::TensorShape.buffer; ADR 0018), of the
  // module's `dtype`; the built-in models have none.
  bool buffer = false;
  std::string dtype = {};
  int64_t size() const { return rows * cols; }
};

// One example per row, contiguous: features is [size x input_dim] row-major; labels in
// [0, num_classes). Not owned.
struct BatchView {
  const float* features;
  const int32_t* labels;
  int64_t size;
};

struct Evaluation {
  double accuracy;   // fraction of examples whose largest logit is the label (first max on ties)
  double mean_loss;  // mean softmax cross-entropy
  double auc;        // macro one-vs-rest ROC AUC of the softmax scores (MacroOneVsRestAuc)
  int64_t examples;
  // Binary models: the AUC's standard error (model::AucStandardError); 0 when not computed.
  double auc_standard_error = 0;
};

class Mlp {
 public:
  // input_dim -> hidden[0] -> ... -> num_classes, ReLU between layers, linear output. Empty
  // `hidden` is softmax regression. INVALID_ARGUMENT on a non-positive width. The math runs on
  // the kernels compiled for `isa_level` (which this CPU must support; the default is the
  // process's choice, isa::ActiveIsaLevel()).
  static absl::StatusOr<Mlp> Create(int input_dim, std::vector<int> hidden, int num_classes,
                                    isa::IsaLevel isa_level = isa::ActiveIsaLevel());

  // "dense0/w", "dense0/b", "dense1/w", ... in declaration order, which is the flat layout: the
  // flat parameter vector is their concatenation. Weights HE_UNIFORM (fan_in = inputs, fan_out =
  // outputs), biases ZEROS.
  const std::vector<DenseTensorSpec>& tensors() const { return tensors_; }
  int64_t num_parameters() const { return num_parameters_; }
  int input_dim() const { return input_dim_; }
  int num_classes() const { return num_classes_; }
  isa::IsaLevel isa_level() const { return isa_level_; }

  // Mean softmax cross-entropy over the batch; writes the gradient of that mean (same flat
  // layout) into `grad`. INVALID_ARGUMENT, before any work, if params.size() or grad.size() is
  // not num_parameters(), the batch is empty or a label is out of range: bad labels would
  // otherwise index outside the logits. No allocation once the scratch fits the batch size.
  absl::StatusOr<float> LossAndGradient(std::span<const float> params, const BatchView& batch,
                                        std::span<float> grad);

  // Accuracy and mean loss over `data`, processed in chunks so memory stays bounded for any
  // data size. Same INVALID_ARGUMENT conditions as LossAndGradient.
  absl::StatusOr<Evaluation> Evaluate(std::span<const float> params, const BatchView& data);

 private:
  Mlp(int input_dim, int num_classes, std::vector<DenseLayer> layers, isa::IsaLevel isa_level);

  absl::Status ValidateBatch(const BatchView& batch) const;
  // Sizes the scratch for `batch_size` examples; allocates only when it grows past capacity.
  void ResizeScratch(int64_t batch_size);
  // Fills activations_ for the first `batch_size` rows of `features`; the last holds the logits.
  void Forward(const float* params, const float* features, int64_t batch_size);

  int input_dim_;
  int num_classes_;
  std::vector<DenseLayer> layers_;
  std::vector<DenseTensorSpec> tensors_;
  int64_t num_parameters_;
  isa::IsaLevel isa_level_;
  const MlpKernels* kernels_;  // MlpKernelsFor(isa_level_), static storage

  // Scratch, [outputs x batch] column-major per layer (one example per column). Plain vectors
  // keep Eigen out of this header, so callers need not share Eigen's alignment/ISA settings.
  std::vector<std::vector<float>> activations_;
  std::vector<float> delta_;       // dLoss/d(pre-activation) of the layer being back-propagated
  std::vector<float> next_delta_;  // the same for the layer below
};

// Convenience for tests and single-process training: the full flat parameter vector, every
// tensor initialised with tensor::InitializeSlice, as shards initialise their slices.
std::vector<float> InitialParameters(const Mlp& mlp, uint64_t seed);

}  // namespace syncopate::model

#endif  // SYNCOPATE_LIBS_MODEL_MLP_H_
