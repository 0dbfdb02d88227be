#include "libs/workload/image_workload.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "libs/common/status_macros.h"

namespace syncopate::workload {
namespace {

// The dense MLP on an image dataset: no embedding tables, so keys() stays empty.
class ImageWorkload final : public Workload {
 public:
  ImageWorkload(model::Mlp mlp, data::Dataset data)
      : mlp_(std::move(mlp)), data_(std::move(data)), eval_end_(data_.size) {}

  const std::vector<int32_t>& table_dims() const override { return no_tables_; }
  int64_t num_parameters() const override { return mlp_.num_parameters(); }
  const TableKeys& keys() const override { return no_keys_; }

  int64_t train_size() const override { return data_.size; }
  absl::Status PrepareTrain(std::span<const int64_t> examples) override {
    Gather(examples);
    return absl::OkStatus();
  }
  absl::StatusOr<float> TrainStep(std::span<const float> params, const TableRows&,
                                  std::span<float> dense_grad, TableRows& row_grads) override {
    row_grads.clear();
    return mlp_.LossAndGradient(
        params, {features_.data(), labels_.data(), static_cast<int64_t>(labels_.size())},
        dense_grad);
  }

  int64_t eval_size() const override { return data_.size; }
  // Mlp::Evaluate bounds its own memory, so the whole set is one chunk.
  int64_t eval_chunk() const override { return std::max<int64_t>(data_.size, 1); }
  // The examples [begin, end) in place: the whole set, or an evaluation point's first ones.
  absl::Status PrepareEval(int64_t begin, int64_t end) override {
    if (begin < 0 || end < begin || end > data_.size) {
      return absl::OutOfRangeError(
          absl::StrCat("examples [", begin, ", ", end, ") are outside [0, ", data_.size, ")"));
    }
    eval_begin_ = begin;
    eval_end_ = end;
    return absl::OkStatus();
  }
  absl::Status ScoreEval(std::span<const float> params, const TableRows&) override {
    SYNCOPATE_ASSIGN_OR_RETURN(
        evaluation_,
        mlp_.Evaluate(params, {data_.example(eval_begin_), data_.labels.data() + eval_begin_,
                               eval_end_ - eval_begin_}));
    return absl::OkStatus();
  }
  absl::StatusOr<model::Evaluation> FinishEval() override {
    if (!evaluation_.has_value()) return absl::FailedPreconditionError("nothing was scored");
    model::Evaluation result = *evaluation_;
    evaluation_.reset();
    return result;
  }

 private:
  void Gather(std::span<const int64_t> examples) {
    features_.resize(examples.size() * data_.dim);
    labels_.resize(examples.size());
    for (size_t i = 0; i < examples.size(); ++i) {
      std::copy_n(data_.example(examples[i]), data_.dim, features_.data() + i * data_.dim);
      labels_[i] = data_.labels[examples[i]];
    }
  }

  model::Mlp mlp_;
  data::Dataset data_;
  std::vector<float> features_;
  std::vector<int32_t> labels_;
  int64_t eval_begin_ = 0;
  int64_t eval_end_;  // the examples ScoreEval scores: [eval_begin_, eval_end_)
  std::optional<model::Evaluation> evaluation_;
  const std::vector<int32_t> no_tables_;
  const TableKeys no_keys_;
};

}  // namespace

std::unique_ptr<Workload> NewImageWorkload(model::Mlp mlp, data::Dataset data) {
  return std::make_unique<ImageWorkload>(std::move(mlp), std::move(data));
}

}  // namespace syncopate::workload
