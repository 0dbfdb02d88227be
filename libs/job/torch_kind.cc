#include <memory>
#include <utility>

#include "libs/common/status_macros.h"
#include "libs/job/builtin_model_kinds.h"
#include "libs/pytorch/torch_export.h"
#include "libs/pytorch/torch_model.h"

namespace syncopate::job {

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

// One describe of the module (built, its dataset opened, a step run) answers everything the
// coordinator asks at start.
absl::StatusOr<ModelDescription> TorchModelKind::Describe(const v1::JobSpec& job) const {
  SYNCOPATE_ASSIGN_OR_RETURN(pytorch::TorchModelDescription module,
                             pytorch::DescribeTorchModel(job));
  ModelDescription description;
  description.train_examples = module.train_examples;
  ModelLayout& layout = description.layout;
  v1::Initializer provided;
  provided.set_kind(v1::Initializer::PROVIDED);
  for (const pytorch::TorchTensor& tensor : module.dense) {
    layout.dense.push_back({.name = tensor.name,
                            .rows = tensor.size,
                            .cols = 1,
                            .init = provided,
                            .buffer = tensor.buffer,
                            .dtype = tensor.dtype});
    layout.dense_shapes.push_back(tensor.shape);
  }
  for (const pytorch::TorchTable& table : module.tables) {
    v1::EmbeddingTableSpec& spec = layout.tables.emplace_back();
    spec.set_name(table.name);
    spec.set_dim(table.dim);
    spec.mutable_init()->set_kind(table.init_scale > 0 ? v1::Initializer::UNIFORM
                                                       : v1::Initializer::ZEROS);
    spec.mutable_init()->set_scale(table.init_scale);
  }
  ApplyEmbeddingMemory(job.model(), layout);
  layout.initial_values = std::move(module.initial_values);
  // A job that exports as it runs: a module that cannot export fails it now, not hours later.
  if (job.export_().on_size() > 0) SYNCOPATE_RETURN_IF_ERROR(pytorch::CheckExportable(job));
  return description;
}

absl::StatusOr<std::unique_ptr<workload::Workload>> TorchModelKind::CreateWorkload(
    const v1::JobSpec& job, workload::Purpose purpose, const workload::WorkloadOptions&) const {
  return pytorch::NewTorchWorkload(job, purpose);
}

}  // namespace syncopate::job
