// The table of model kinds (model_kind.h): one row per ModelSpec.kind. Adding a model is a row
// here and the model's own files.
#include <algorithm>
#include <array>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "libs/common/status_macros.h"
#include "libs/job/builtin_model_kinds.h"

namespace syncopate::job {
namespace {

struct Table {
  MlpModelKind mlp;
  CtrModelKind wdl{v1::ModelSpec::WDL, model::CtrArchitecture::kWideDeep};
  CtrModelKind deepfm{v1::ModelSpec::DEEPFM, model::CtrArchitecture::kDeepFm};
  CtrModelKind dcn{v1::ModelSpec::DCN, model::CtrArchitecture::kDcn};
  TorchModelKind torch;

  std::array<const ModelKind*, 5> rows() const { return {&mlp, &wdl, &deepfm, &dcn, &torch}; }
};

const Table& TheTable() {
  static const Table* const table = new Table();
  return *table;
}

}  // namespace

absl::StatusOr<const ModelKind*> FindModelKind(v1::ModelSpec::Kind kind) {
  std::vector<std::string> names;
  for (const ModelKind* row : TheTable().rows()) {
    if (row->kind() == kind) return row;
    names.emplace_back(row->name());
  }
  return absl::InvalidArgumentError(
      absl::StrCat("job spec: model.kind must be one of ", absl::StrJoin(names, ", ")));
}

const CtrModelKind* FindCtrModelKind(v1::ModelSpec::Kind kind) {
  for (const CtrModelKind* row : {&TheTable().wdl, &TheTable().deepfm, &TheTable().dcn}) {
    if (row->kind() == kind) return row;
  }
  return nullptr;
}

absl::Status ValidateEmbeddingMemory(const v1::ModelSpec& model) {
  if (model.admit_after_count() < 0 || model.admit_after_count() > 255) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job spec: model.admit_after_count must be in [0, 255] (0 = every key at first sight), "
        "got ",
        model.admit_after_count()));
  }
  if (model.evict_after_updates() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("job spec: model.evict_after_updates must be >= 0 (0 = never evict), got ",
                     model.evict_after_updates()));
  }
  return absl::OkStatus();
}

void ApplyEmbeddingMemory(const v1::ModelSpec& model, ModelLayout& layout) {
  for (v1::EmbeddingTableSpec& table : layout.tables) {
    table.set_admit_after_count(model.admit_after_count());
    table.set_evict_after_updates(model.evict_after_updates());
  }
}

absl::StatusOr<ModelDescription> DescribeModel(const v1::JobSpec& job) {
  SYNCOPATE_ASSIGN_OR_RETURN(const ModelKind* kind, FindModelKind(job.model().kind()));
  SYNCOPATE_ASSIGN_OR_RETURN(ModelDescription description, kind->Describe(job));
  int64_t& count = description.train_examples;
  if (job.dataset().train_limit() > 0) count = std::min(count, job.dataset().train_limit());
  if (count <= 0) return absl::FailedPreconditionError("the training set holds no examples");
  return description;
}

absl::StatusOr<ModelLayout> BuiltinLayoutForJob(const v1::JobSpec& job) {
  SYNCOPATE_ASSIGN_OR_RETURN(const ModelKind* kind, FindModelKind(job.model().kind()));
  if (kind == &TheTable().mlp) return TheTable().mlp.Layout(job);
  if (const CtrModelKind* ctr = FindCtrModelKind(kind->kind())) return ctr->Layout(job);
  return absl::InvalidArgumentError(
      absl::StrCat("model ", kind->name(),
                   " is not built in: its layout is read off its module (DescribeModel)"));
}

absl::StatusOr<std::unique_ptr<workload::Workload>> CreateWorkload(
    const v1::JobSpec& job, workload::Purpose purpose, const workload::WorkloadOptions& options) {
  SYNCOPATE_ASSIGN_OR_RETURN(const ModelKind* kind, FindModelKind(job.model().kind()));
  if (purpose == workload::Purpose::kValidate && job.dataset().validation_path().empty()) {
    return absl::FailedPreconditionError("the job has no dataset.validation_path");
  }
  return kind->CreateWorkload(job, purpose, options);
}

absl::string_view QualityMetric(const v1::JobSpec& job) {
  absl::StatusOr<const ModelKind*> kind = FindModelKind(job.model().kind());
  return kind.ok() ? (*kind)->quality_metric(job) : "accuracy";
}

}  // namespace syncopate::job
