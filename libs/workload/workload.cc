#include "libs/workload/workload.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "libs/common/status_macros.h"
#include "libs/data/criteo_files.h"
#include "libs/data/criteo_reader.h"
#include "libs/data/idx_reader.h"
#include "libs/job/partitioner.h"
#include "libs/model/auc.h"
#include "libs/model/ctr_model.h"

namespace syncopate::workload {
namespace {

// The dense MLP on an image dataset: no embedding tables, so keys() stays empty.
class ImageWorkload final : public Workload {
 public:
  ImageWorkload(model::Mlp mlp, data::Dataset data)
      : mlp_(std::move(mlp)), data_(std::move(data)) {}

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
  absl::Status PrepareEval(int64_t, int64_t) override { return absl::OkStatus(); }
  absl::Status ScoreEval(std::span<const float> params, const TableRows&) override {
    SYNCOPATE_ASSIGN_OR_RETURN(
        evaluation_,
        mlp_.Evaluate(params, {data_.features.data(), data_.labels.data(), data_.size}));
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
  std::optional<model::Evaluation> evaluation_;
  const std::vector<int32_t> no_tables_;
  const TableKeys no_keys_;
};

// A CTR model (wide & deep, DeepFM or DCN) on Criteo-format data, read from disk as it is
// needed: the deep table holds the fields' values, the wide table those and the crosses' value
// pairs.
class CtrWorkload final : public Workload {
 public:
  // Examples per evaluation chunk: bounds one pull's keys (~26 per example before dedup) and
  // the model's scratch while keeping the matrix products large.
  static constexpr int64_t kEvalChunk = 8192;

  CtrWorkload(model::CtrModel model, std::unique_ptr<data::CriteoFiles> files, int64_t block_size,
              int64_t cached_blocks)
      : model_(std::move(model)),
        files_(std::move(files)),
        block_size_(block_size),
        cached_blocks_(cached_blocks) {
    for (const v1::EmbeddingTableSpec& table : model_.tables()) dims_.push_back(table.dim());
    keys_.resize(dims_.size());
  }

  const std::vector<int32_t>& table_dims() const override { return dims_; }
  int64_t num_parameters() const override { return model_.num_parameters(); }
  const TableKeys& keys() const override { return keys_; }

  int64_t train_size() const override { return files_->rows(); }
  absl::Status PrepareTrain(std::span<const int64_t> examples) override {
    const size_t n = examples.size();
    numeric_.resize(n * data::kCriteoNumeric);
    categorical_.resize(n * data::kCriteoCategorical);
    labels_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const int64_t e = examples[i];
      if (e < 0 || e >= files_->rows()) {
        return absl::OutOfRangeError(
            absl::StrCat("example ", e, " is outside the training set's ", files_->rows()));
      }
      SYNCOPATE_ASSIGN_OR_RETURN(const Block* block, BlockOf(e));
      const int64_t row = e % block_size_;
      std::copy_n(block->rows.numeric_row(row), data::kCriteoNumeric,
                  numeric_.data() + i * data::kCriteoNumeric);
      std::copy_n(block->rows.categorical_row(row), data::kCriteoCategorical,
                  categorical_.data() + i * data::kCriteoCategorical);
      labels_[i] = block->rows.labels[row];
    }
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

  int64_t eval_size() const override { return files_->rows(); }
  int64_t eval_chunk() const override { return kEvalChunk; }
  // Chunks are read in order, so each continues the open file (CriteoFiles' cursor).
  absl::Status PrepareEval(int64_t begin, int64_t end) override {
    SYNCOPATE_ASSIGN_OR_RETURN(data::CtrDataset chunk, files_->Read(begin, end));
    numeric_ = std::move(chunk.numeric);
    categorical_ = std::move(chunk.categorical);
    labels_ = std::move(chunk.labels);
    CollectKeys();
    return absl::OkStatus();
  }
  absl::Status ScoreEval(std::span<const float> params, const TableRows& rows) override {
    SYNCOPATE_RETURN_IF_ERROR(CheckRows(rows));
    scores_.resize(labels_.size());
    SYNCOPATE_RETURN_IF_ERROR(model_.Predict(params, View(), batch_keys_,
                                             rows[model::CtrModel::kDeepTable],
                                             rows[model::CtrModel::kWideTable], scores_));
    // Streamed: the evaluator's memory does not grow with the test set (ADR 0011).
    auc_.Add(scores_, labels_);
    loss_sum_ += model::LogLoss(scores_, labels_) * static_cast<double>(scores_.size());
    for (size_t i = 0; i < scores_.size(); ++i) {
      correct_ += ((scores_[i] > 0.5f) == (labels_[i] > 0.5f)) ? 1 : 0;
    }
    return absl::OkStatus();
  }
  absl::StatusOr<model::Evaluation> FinishEval() override {
    if (auc_.examples() == 0) return absl::FailedPreconditionError("nothing was scored");
    const double examples = static_cast<double>(auc_.examples());
    model::Evaluation result{.accuracy = static_cast<double>(correct_) / examples,
                             .mean_loss = loss_sum_ / examples,
                             .auc = auc_.Auc(),
                             .examples = auc_.examples()};
    auc_ = model::StreamingAuc();
    loss_sum_ = 0;
    correct_ = 0;
    return result;
  }

 private:
  // Parsed rows of one lease block, keyed by its first example.
  struct Block {
    data::CtrDataset rows;
    int64_t last_used = 0;
  };

  // The cached block holding example `e`, read (and the least recently used dropped) if absent.
  absl::StatusOr<const Block*> BlockOf(int64_t e) {
    const int64_t begin = e / block_size_ * block_size_;
    ++clock_;
    if (auto it = blocks_.find(begin); it != blocks_.end()) {
      it->second.last_used = clock_;
      return &it->second;
    }
    SYNCOPATE_ASSIGN_OR_RETURN(data::CtrDataset rows,
                               files_->Read(begin, std::min(begin + block_size_, files_->rows())));
    if (static_cast<int64_t>(blocks_.size()) >= cached_blocks_) {
      blocks_.erase(std::min_element(
          blocks_.begin(), blocks_.end(),
          [](const auto& a, const auto& b) { return a.second.last_used < b.second.last_used; }));
    }
    Block& block = blocks_[begin];
    block = Block{.rows = std::move(rows), .last_used = clock_};
    return &block;
  }
  void CollectKeys() {
    model_.CollectKeys(View(), batch_keys_);
    keys_[model::CtrModel::kDeepTable] = batch_keys_.keys;
    keys_[model::CtrModel::kWideTable] = batch_keys_.wide_keys;
  }
  model::CtrBatchView View() const {
    return {numeric_.data(), categorical_.data(), labels_.data(),
            static_cast<int64_t>(labels_.size())};
  }
  absl::Status CheckRows(const TableRows& rows) const {
    if (rows.size() != dims_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rows for ", rows.size(), " tables; the model has ", dims_.size()));
    }
    return absl::OkStatus();
  }

  model::CtrModel model_;
  const std::unique_ptr<data::CriteoFiles> files_;
  const int64_t block_size_;
  const int64_t cached_blocks_;
  absl::flat_hash_map<int64_t, Block> blocks_;  // at most cached_blocks_
  int64_t clock_ = 0;                           // PrepareTrain lookups, for least-recently-used
  std::vector<int32_t> dims_;
  TableKeys keys_;
  model::BatchKeys batch_keys_;
  std::vector<float> numeric_;
  std::vector<uint64_t> categorical_;
  std::vector<float> labels_;
  std::vector<float> scores_;  // the chunk's
  model::StreamingAuc auc_;    // over the chunks scored since the last FinishEval
  double loss_sum_ = 0;
  int64_t correct_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Workload>> CreateWorkload(const v1::JobSpec& job, Purpose purpose,
                                                         const WorkloadOptions& options) {
  const v1::DatasetSpec& dataset = job.dataset();
  const bool train = purpose == Purpose::kTrain;
  switch (job.model().kind()) {
    case v1::ModelSpec::MLP: {
      SYNCOPATE_ASSIGN_OR_RETURN(model::Mlp mlp, job::ModelForJob(job));
      SYNCOPATE_ASSIGN_OR_RETURN(
          data::Dataset data,
          data::LoadFashionMnist(dataset.dir(), train ? data::Split::kTrain : data::Split::kTest,
                                 train ? dataset.train_limit() : dataset.test_limit()));
      return std::make_unique<ImageWorkload>(std::move(mlp), std::move(data));
    }
    case v1::ModelSpec::WDL:
    case v1::ModelSpec::DEEPFM:
    case v1::ModelSpec::DCN: {
      if (options.cached_blocks < 1 || job.block_size() < 1) {
        return absl::InvalidArgumentError("cached_blocks and block_size must be >= 1");
      }
      SYNCOPATE_ASSIGN_OR_RETURN(model::CtrModel model, job::CtrModelForJob(job));
      const std::string& path = train ? dataset.train_path() : dataset.test_path();
      SYNCOPATE_ASSIGN_OR_RETURN(
          std::unique_ptr<data::CriteoFiles> files,
          data::CriteoFiles::Open(path,
                                  {.limit = train ? dataset.train_limit() : dataset.test_limit()}));
      if (files->rows() == 0) {
        return absl::FailedPreconditionError(absl::StrCat(path, " holds no examples"));
      }
      return std::make_unique<CtrWorkload>(std::move(model), std::move(files), job.block_size(),
                                           options.cached_blocks);
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat("no workload for model kind ",
                                                     v1::ModelSpec::Kind_Name(job.model().kind())));
  }
}

absl::StatusOr<int64_t> CountTrainExamples(const v1::JobSpec& job) {
  const v1::DatasetSpec& dataset = job.dataset();
  int64_t count = 0;
  switch (dataset.kind()) {
    case v1::DatasetSpec::FASHION_MNIST: {
      SYNCOPATE_ASSIGN_OR_RETURN(count,
                                 data::CountFashionMnist(dataset.dir(), data::Split::kTrain));
      break;
    }
    case v1::DatasetSpec::CRITEO: {
      // Parsing every line (and keeping none) validates the data before any worker starts.
      SYNCOPATE_ASSIGN_OR_RETURN(
          std::unique_ptr<data::CriteoFiles> files,
          data::CriteoFiles::Open(dataset.train_path(),
                                  {.limit = dataset.train_limit(), .validate = true}));
      count = files->rows();
      break;
    }
    default:
      return absl::InvalidArgumentError("job has no dataset kind");
  }
  if (dataset.train_limit() > 0) count = std::min(count, dataset.train_limit());
  if (count <= 0) return absl::FailedPreconditionError("the training set holds no examples");
  return count;
}

}  // namespace syncopate::workload
