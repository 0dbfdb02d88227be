#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "libs/common/status_macros.h"
#include "libs/job/builtin_model_kinds.h"
#include "libs/pytorch/torch_export.h"
#include "libs/pytorch/torch_model.h"

namespace syncopate::job {
namespace {

// What the coordinator's describe of a job depends on: the module, the data, the seed.
std::string DescribeKey(const v1::JobSpec& job) {
  return absl::StrCat(job.model().torch().SerializeAsString(), "|",
                      job.dataset().SerializeAsString(), "|", job.seed());
}

// The coordinator asks for the layout and the training set's size at start: one describe (a
// module built, a dataset opened, a step run) answers both.
absl::StatusOr<pytorch::TorchModelDescription> Describe(const v1::JobSpec& job) {
  static absl::Mutex mu(absl::kConstInit);
  // Guarded by mu.
  static auto* described =
      new std::optional<std::pair<std::string, pytorch::TorchModelDescription>>();
  const std::string key = DescribeKey(job);
  {
    absl::MutexLock lock(&mu);
    if (described->has_value() && (*described)->first == key) return (*described)->second;
  }
  SYNCOPATE_ASSIGN_OR_RETURN(pytorch::TorchModelDescription description,
                             pytorch::DescribeTorchModel(job));
  absl::MutexLock lock(&mu);
  described->emplace(key, description);
  return description;
}

}  // namespace

absl::string_view TorchModelKind::quality_metric(const v1::JobSpec& job) const {
  return job.model().torch().metric() == v1::TorchModel::AUC ? "auc" : "accuracy";
}

absl::Status TorchModelKind::Validate(const v1::JobSpec& job) const {
  const v1::ModelSpec& m = job.model();
  if (m.torch().module().empty()) {
    return absl::InvalidArgumentError(
        "job spec: model.torch.module is required for model TORCH (the Python file that "
        "defines model(), train_dataset(data), test_dataset(data) and loss(output, target))");
  }
  if (m.hidden_size() > 0 || m.embedding_dim() != 0 || m.wide_crosses_size() > 0 ||
      m.cross_layers() != 0 || m.numeric_missing() != v1::ModelSpec::NUMERIC_MISSING_UNSPECIFIED ||
      m.fm_fields() != v1::ModelSpec::INTERACTION_FIELDS_UNSPECIFIED ||
      m.cross_fields() != v1::ModelSpec::INTERACTION_FIELDS_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        "job spec: model.hidden, embedding_dim, wide_crosses, cross_layers, numeric_missing, "
        "fm_fields and cross_fields are the built-in models'; a TORCH model's shapes come from "
        "its module");
  }
  return ValidateEmbeddingMemory(m);
}

absl::StatusOr<ModelLayout> TorchModelKind::Layout(const v1::JobSpec& job) const {
  SYNCOPATE_ASSIGN_OR_RETURN(const pytorch::TorchModelDescription description, Describe(job));
  ModelLayout layout;
  v1::Initializer provided;
  provided.set_kind(v1::Initializer::PROVIDED);
  for (const pytorch::TorchTensor& tensor : description.dense) {
    layout.dense.push_back({.name = tensor.name,
                            .rows = tensor.size,
                            .cols = 1,
                            .init = provided,
                            .buffer = tensor.buffer,
                            .dtype = tensor.dtype});
    layout.dense_shapes.push_back(tensor.shape);
  }
  for (const pytorch::TorchTable& table : description.tables) {
    v1::EmbeddingTableSpec& spec = layout.tables.emplace_back();
    spec.set_name(table.name);
    spec.set_dim(table.dim);
    spec.mutable_init()->set_kind(table.init_scale > 0 ? v1::Initializer::UNIFORM
                                                       : v1::Initializer::ZEROS);
    spec.mutable_init()->set_scale(table.init_scale);
  }
  ApplyEmbeddingMemory(job.model(), layout);
  layout.initial_values = description.initial_values;
  // A job that exports as it runs: a module that cannot export fails it now, not hours later.
  if (job.export_().on_size() > 0) SYNCOPATE_RETURN_IF_ERROR(pytorch::CheckExportable(job));
  return layout;
}

absl::StatusOr<int64_t> TorchModelKind::CountTrainExamples(const v1::JobSpec& job) const {
  SYNCOPATE_ASSIGN_OR_RETURN(const pytorch::TorchModelDescription description, Describe(job));
  return description.train_examples;
}

absl::StatusOr<std::unique_ptr<workload::Workload>> TorchModelKind::CreateWorkload(
    const v1::JobSpec& job, workload::Purpose purpose, const workload::WorkloadOptions&) const {
  return pytorch::NewTorchWorkload(job, purpose);
}

}  // namespace syncopate::job
