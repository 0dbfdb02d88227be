#include "libs/workload/ctr_workload.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "libs/common/status_macros.h"
#include "libs/data/criteo_reader.h"
#include "libs/model/auc.h"

namespace syncopate::workload {
namespace {

// A CTR model (wide & deep, DeepFM or DCN) on Criteo-format data, read from disk as it is
// needed: the deep table holds the fields' values, the wide table those and the crosses' value
// pairs.
class CtrWorkload final : public Workload {
 public:
  // Examples per evaluation chunk: bounds one pull's keys (~26 per example before dedup) and
  // the model's scratch while keeping the matrix products large.
  static constexpr int64_t kEvalChunk = 8192;

  CtrWorkload(model::CtrModel model, data::CriteoBlockCache examples)
      : model_(std::move(model)), examples_(std::move(examples)) {
    for (const v1::EmbeddingTableSpec& table : model_.tables()) dims_.push_back(table.dim());
    keys_.resize(dims_.size());
  }

  const std::vector<int32_t>& table_dims() const override { return dims_; }
  int64_t num_parameters() const override { return model_.num_parameters(); }
  const TableKeys& keys() const override { return keys_; }

  int64_t train_size() const override { return examples_.rows(); }
  absl::Status PrepareTrain(std::span<const int64_t> examples) override {
    SYNCOPATE_RETURN_IF_ERROR(examples_.Gather(examples, batch_));
    CollectKeys();
    return absl::OkStatus();
  }
  absl::StatusOr<float> TrainStep(std::span<const float> params, const TableRows& rows,
                                  std::span<float> dense_grad, TableRows& row_grads) override {
    SYNCOPATE_RETURN_IF_ERROR(CheckRows(rows));
    row_grads.resize(rows.size());
    for (size_t t = 0; t < rows.size(); ++t) row_grads[t].resize(rows[t].size());
    return model_.LossAndGradient(params, View(), batch_keys_, rows[model::CtrModel::kDeepTable],
                                  rows[model::CtrModel::kWideTable], dense_grad,
                                  row_grads[model::CtrModel::kDeepTable],
                                  row_grads[model::CtrModel::kWideTable]);
  }

  int64_t eval_size() const override { return examples_.rows(); }
  int64_t eval_chunk() const override { return kEvalChunk; }
  // Chunks are read in order, so each continues the open file (CriteoFiles' cursor).
  absl::Status PrepareEval(int64_t begin, int64_t end) override {
    SYNCOPATE_ASSIGN_OR_RETURN(batch_, examples_.files().Read(begin, end));
    CollectKeys();
    return absl::OkStatus();
  }
  absl::Status ScoreEval(std::span<const float> params, const TableRows& rows) override {
    SYNCOPATE_RETURN_IF_ERROR(CheckRows(rows));
    scores_.resize(batch_.labels.size());
    SYNCOPATE_RETURN_IF_ERROR(model_.Predict(params, View(), batch_keys_,
                                             rows[model::CtrModel::kDeepTable],
                                             rows[model::CtrModel::kWideTable], scores_));
    // Streamed: the evaluator's memory does not grow with the test set (ADR 0011).
    auc_.Add(scores_, batch_.labels);
    loss_sum_ += model::LogLoss(scores_, batch_.labels) * static_cast<double>(scores_.size());
    for (size_t i = 0; i < scores_.size(); ++i) {
      correct_ += ((scores_[i] > 0.5f) == (batch_.labels[i] > 0.5f)) ? 1 : 0;
    }
    return absl::OkStatus();
  }
  absl::StatusOr<model::Evaluation> FinishEval() override {
    if (auc_.examples() == 0) return absl::FailedPreconditionError("nothing was scored");
    const double examples = static_cast<double>(auc_.examples());
    const double auc = auc_.Auc();
    model::Evaluation result{.accuracy = static_cast<double>(correct_) / examples,
                             .mean_loss = loss_sum_ / examples,
                             .auc = auc,
                             .examples = auc_.examples(),
                             .auc_standard_error = model::AucStandardError(
                                 auc, auc_.positives(), auc_.examples() - auc_.positives())};
    auc_ = model::StreamingAuc();
    loss_sum_ = 0;
    correct_ = 0;
    return result;
  }

 private:
  void CollectKeys() {
    model_.CollectKeys(View(), batch_keys_);
    keys_[model::CtrModel::kDeepTable] = batch_keys_.keys;
    keys_[model::CtrModel::kWideTable] = batch_keys_.wide_keys;
  }
  model::CtrBatchView View() const {
    return {batch_.numeric.data(), batch_.categorical.data(), batch_.labels.data(),
            static_cast<int64_t>(batch_.labels.size())};
  }
  absl::Status CheckRows(const TableRows& rows) const {
    if (rows.size() != dims_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rows for ", rows.size(), " tables; the model has ", dims_.size()));
    }
    return absl::OkStatus();
  }

  model::CtrModel model_;
  data::CriteoBlockCache examples_;
  std::vector<int32_t> dims_;
  TableKeys keys_;
  model::BatchKeys batch_keys_;
  data::CtrDataset batch_;     // the prepared batch or evaluation chunk
  std::vector<float> scores_;  // the chunk's
  model::StreamingAuc auc_;    // over the chunks scored since the last FinishEval
  double loss_sum_ = 0;
  int64_t correct_ = 0;
};

}  // namespace

std::unique_ptr<Workload> NewCtrWorkload(model::CtrModel model, data::CriteoBlockCache examples) {
  return std::make_unique<CtrWorkload>(std::move(model), std::move(examples));
}

}  // namespace syncopate::workload
