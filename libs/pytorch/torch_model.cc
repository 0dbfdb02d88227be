#include "libs/pytorch/torch_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "libs/common/status_macros.h"
#include "libs/model/auc.h"
#include "libs/pytorch/python_call.h"
#include "libs/pytorch/python_runtime.h"
#include "pybind11/numpy.h"
#include "pybind11/pybind11.h"
#include "pybind11/stl.h"

namespace syncopate::pytorch {
namespace py = pybind11;
namespace {

// Examples per evaluation chunk: bounds a chunk's keys and scores while keeping torch's matrix
// products large (as the CTR workload's, libs/workload/ctr_workload.cc).
constexpr int64_t kEvalChunk = 8192;

py::dict DataSpecOf(const v1::JobSpec& job) {
  const v1::DatasetSpec& d = job.dataset();
  py::dict data;
  data["kind"] = v1::DatasetSpec::Kind_Name(d.kind());
  data["dir"] = d.dir();
  data["train_path"] = d.train_path();
  data["test_path"] = d.test_path();
  data["train_limit"] = d.train_limit();
  data["test_limit"] = d.test_limit();
  data["block_size"] = job.block_size();
  return data;
}

// A Host (python/syncopate/torch/_host.py) for the job; the caller holds the GIL.
py::object NewHost(const v1::JobSpec& job, const char* purpose) {
  py::object host_class = py::module_::import("syncopate.torch._host").attr("Host");
  return host_class(job.model().torch().module(), job.seed(), DataSpecOf(job), purpose);
}

// A writable view of `bytes` bytes at `data` that torch.frombuffer shares (no copy). The buffer
// must outlive every tensor made from it: the workload's callers own it for the call.
py::memoryview View(const void* data, size_t bytes) {
  return py::memoryview::from_memory(const_cast<void*>(data), static_cast<py::ssize_t>(bytes),
                                     /*readonly=*/false);
}

py::list RowViews(const workload::TableRows& rows) {
  py::list views;
  for (const std::vector<float>& table : rows) {
    views.append(View(table.data(), table.size() * sizeof(float)));
  }
  return views;
}

void CopyKeys(const py::list& keys, workload::TableKeys& out) {
  out.resize(keys.size());
  for (size_t t = 0; t < keys.size(); ++t) {
    auto array = keys[t].cast<py::array_t<uint64_t, py::array::c_style | py::array::forcecast>>();
    out[t].assign(array.data(), array.data() + array.size());
  }
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// The module's layout against the one the coordinator recorded in the job: OK, or the first
// difference in one line. `layout` is the Host's Layout (python/syncopate/torch/_host.py).
absl::Status MatchRecordedLayout(const py::object& layout, const v1::ModelLayoutRecord& recorded,
                                 const std::string& module) {
  const py::list dense = layout.attr("dense");
  const py::list tables = layout.attr("tables");
  auto refuse = [&](const std::string& what) {
    return absl::FailedPreconditionError(
        absl::StrCat(module, " does not match the job's model: ", what,
                     " (every worker must run the model file the coordinator started with)"));
  };
  auto kind = [](bool buffer) { return buffer ? "buffer" : "parameter"; };
  for (size_t i = 0; i < std::max<size_t>(dense.size(), recorded.dense_size()); ++i) {
    if (i >= dense.size()) {
      return refuse(absl::StrCat("it has no ", kind(recorded.dense(i).buffer()), " ",
                                 recorded.dense(i).name()));
    }
    const py::handle entry = dense[i];
    const std::string name = entry.attr("name").cast<std::string>();
    const std::vector<int64_t> shape = entry.attr("shape").cast<std::vector<int64_t>>();
    const bool buffer = entry.attr("buffer").cast<bool>();
    if (i >= static_cast<size_t>(recorded.dense_size())) {
      return refuse(absl::StrCat("it has a ", kind(buffer), " ", name, " the job does not"));
    }
    const v1::TensorShape& want = recorded.dense(i);
    const std::vector<int64_t> want_shape(want.shape().begin(), want.shape().end());
    if (name != want.name() || shape != want_shape || buffer != want.buffer()) {
      return refuse(
          absl::StrCat(kind(buffer), " ", i, " is ", name, " ", ShapeText(shape), " here and ",
                       buffer == want.buffer() ? "" : absl::StrCat(kind(want.buffer()), " "),
                       want.name(), " ", ShapeText(want_shape), " in the job"));
    }
  }
  if (tables.size() != static_cast<size_t>(recorded.tables_size())) {
    return refuse(absl::StrCat("it has ", tables.size(), " embedding tables, the job ",
                               recorded.tables_size()));
  }
  for (size_t t = 0; t < tables.size(); ++t) {
    const py::handle entry = tables[t];
    const std::string name = entry.attr("name").cast<std::string>();
    const int dim = entry.attr("dim").cast<int>();
    if (name != recorded.tables(t).name() || dim != recorded.tables(t).dim()) {
      return refuse(absl::StrCat("table ", t, " is '", name, "' of dim ", dim, " here and '",
                                 recorded.tables(t).name(), "' of dim ", recorded.tables(t).dim(),
                                 " in the job"));
    }
  }
  return absl::OkStatus();
}

class TorchWorkload final : public workload::Workload {
 public:
  TorchWorkload(py::object host, int64_t num_parameters, std::vector<int32_t> dims, int64_t size)
      : host_(std::move(host)),
        num_parameters_(num_parameters),
        dims_(std::move(dims)),
        size_(size) {
    keys_.resize(dims_.size());
  }
  ~TorchWorkload() override {
    py::gil_scoped_acquire gil;
    host_ = py::object();
  }

  const std::vector<int32_t>& table_dims() const override { return dims_; }
  int64_t num_parameters() const override { return num_parameters_; }
  const workload::TableKeys& keys() const override { return keys_; }

  int64_t train_size() const override { return size_; }
  absl::Status PrepareTrain(std::span<const int64_t> examples) override {
    return CallPython("reading a training batch", [&] {
      py::array_t<int64_t> batch(static_cast<py::ssize_t>(examples.size()), examples.data());
      CopyKeys(host_.attr("prepare")(batch), keys_);
    });
  }
  absl::StatusOr<float> TrainStep(std::span<const float> params, const workload::TableRows& rows,
                                  std::span<float> dense_grad,
                                  workload::TableRows& row_grads) override {
    SYNCOPATE_RETURN_IF_ERROR(CheckBuffers(params, rows));
    row_grads.resize(dims_.size());
    for (size_t t = 0; t < dims_.size(); ++t) row_grads[t].resize(rows[t].size());
    return CallPython("a training step of the model", [&] {
      return host_
          .attr("train_step")(View(params.data(), params.size_bytes()), RowViews(rows),
                              View(dense_grad.data(), dense_grad.size_bytes()), RowViews(row_grads))
          .cast<float>();
    });
  }

  int64_t eval_size() const override { return size_; }
  int64_t eval_chunk() const override { return kEvalChunk; }
  absl::Status PrepareEval(int64_t begin, int64_t end) override {
    return CallPython("reading test examples",
                      [&] { CopyKeys(host_.attr("prepare_eval")(begin, end), keys_); });
  }
  absl::Status ScoreEval(std::span<const float> params, const workload::TableRows& rows) override {
    SYNCOPATE_RETURN_IF_ERROR(CheckBuffers(params, rows));
    return CallPython("scoring test examples", "the model's scores", [&] {
      // A Scores record (python/syncopate/torch/_host.py).
      const py::object scored =
          host_.attr("score")(View(params.data(), params.size_bytes()), RowViews(rows));
      loss_sum_ += scored.attr("loss_sum").cast<double>();
      correct_ += scored.attr("correct").cast<int64_t>();
      examples_ += scored.attr("examples").cast<int64_t>();
      const int classes = scored.attr("classes").cast<int>();
      const auto scores =
          scored.attr("probabilities")
              .cast<py::array_t<float, py::array::c_style | py::array::forcecast>>();
      if (classes == 0) {
        const auto labels =
            scored.attr("labels")
                .cast<py::array_t<float, py::array::c_style | py::array::forcecast>>();
        auc_.Add({scores.data(), static_cast<size_t>(scores.size())},
                 {labels.data(), static_cast<size_t>(labels.size())});
      } else {
        const auto labels =
            scored.attr("labels")
                .cast<py::array_t<int32_t, py::array::c_style | py::array::forcecast>>();
        classes_ = classes;
        class_scores_.insert(class_scores_.end(), scores.data(), scores.data() + scores.size());
        class_labels_.insert(class_labels_.end(), labels.data(), labels.data() + labels.size());
      }
    });
  }
  absl::StatusOr<model::Evaluation> FinishEval() override {
    if (examples_ == 0) return absl::FailedPreconditionError("nothing was scored");
    const double n = static_cast<double>(examples_);
    double auc = auc_.examples() > 0 ? auc_.Auc() : 0;
    const double auc_standard_error =
        model::AucStandardError(auc, auc_.positives(), auc_.examples() - auc_.positives());
    if (classes_ > 0) {
      auc = model::MacroOneVsRestAuc(class_scores_, class_labels_, classes_);
      if (std::isnan(auc)) auc = 0;
    }
    model::Evaluation result{.accuracy = static_cast<double>(correct_) / n,
                             .mean_loss = loss_sum_ / n,
                             .auc = auc,
                             .examples = examples_,
                             .auc_standard_error = classes_ > 0 ? 0 : auc_standard_error};
    auc_ = model::StreamingAuc();
    class_scores_.clear();
    class_labels_.clear();
    loss_sum_ = 0;
    correct_ = 0;
    examples_ = 0;
    return result;
  }

 private:
  absl::Status CheckBuffers(std::span<const float> params, const workload::TableRows& rows) const {
    if (static_cast<int64_t>(params.size()) != num_parameters_ || rows.size() != dims_.size()) {
      return absl::InvalidArgumentError(absl::StrCat(params.size(), " parameters and ", rows.size(),
                                                     " tables of rows; the model has ",
                                                     num_parameters_, " and ", dims_.size()));
    }
    for (size_t t = 0; t < dims_.size(); ++t) {
      if (rows[t].size() != keys_[t].size() * static_cast<size_t>(dims_[t])) {
        return absl::InvalidArgumentError(absl::StrCat("table ", t, ": ", rows[t].size(),
                                                       " values for ", keys_[t].size(), " keys"));
      }
    }
    return absl::OkStatus();
  }

  py::object host_;
  const int64_t num_parameters_;
  const std::vector<int32_t> dims_;
  const int64_t size_;  // training or evaluation set, by purpose
  workload::TableKeys keys_;
  // Evaluation since the last FinishEval.
  model::StreamingAuc auc_;  // binary models
  int classes_ = 0;          // classifiers: softmax scores and labels, for the OvR AUC
  std::vector<float> class_scores_;
  std::vector<int32_t> class_labels_;
  double loss_sum_ = 0;
  int64_t correct_ = 0;
  int64_t examples_ = 0;
};

}  // namespace

absl::StatusOr<TorchModelDescription> DescribeTorchModel(const v1::JobSpec& job) {
  SYNCOPATE_RETURN_IF_ERROR(EnsurePython());
  return CallPython(job.model().torch().module(), [&] {
    TorchModelDescription description;
    py::object host = NewHost(job, "describe");
    const py::object layout = host.attr("layout")();
    for (py::handle entry : py::list(layout.attr("dense"))) {
      TorchTensor tensor{.name = entry.attr("name").cast<std::string>(),
                         .shape = entry.attr("shape").cast<std::vector<int64_t>>(),
                         .buffer = entry.attr("buffer").cast<bool>(),
                         .dtype = entry.attr("dtype").cast<std::string>()};
      tensor.size = 1;
      for (int64_t d : tensor.shape) tensor.size *= d;
      description.dense.push_back(std::move(tensor));
    }
    for (py::handle entry : py::list(layout.attr("tables"))) {
      description.tables.push_back({.name = entry.attr("name").cast<std::string>(),
                                    .dim = entry.attr("dim").cast<int32_t>(),
                                    .init_scale = entry.attr("init_scale").cast<double>()});
    }
    const auto initial = host.attr("initial_values")()
                             .cast<py::array_t<float, py::array::c_style | py::array::forcecast>>();
    description.initial_values.assign(initial.data(), initial.data() + initial.size());
    description.train_examples = host.attr("train_size")().cast<int64_t>();
    description.task = host.attr("check")().cast<std::string>();
    return description;
  });
}

absl::StatusOr<std::unique_ptr<workload::Workload>> NewTorchWorkload(const v1::JobSpec& job,
                                                                     workload::Purpose purpose) {
  SYNCOPATE_RETURN_IF_ERROR(EnsurePython());
  return CallPython(
      job.model().torch().module(), [&]() -> absl::StatusOr<std::unique_ptr<workload::Workload>> {
        const bool train = purpose == workload::Purpose::kTrain;
        py::object host = NewHost(job, train ? "train" : "evaluate");
        SYNCOPATE_RETURN_IF_ERROR(MatchRecordedLayout(host.attr("layout")(), job.model().layout(),
                                                      job.model().torch().module()));
        std::vector<int32_t> dims;
        for (const v1::TableShape& table : job.model().layout().tables()) {
          dims.push_back(table.dim());
        }
        const int64_t parameters = host.attr("num_parameters").cast<int64_t>();
        const int64_t size = host.attr(train ? "train_size" : "eval_size")().cast<int64_t>();
        return std::make_unique<TorchWorkload>(std::move(host), parameters, std::move(dims), size);
      });
}

}  // namespace syncopate::pytorch
