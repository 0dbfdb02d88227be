#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "libs/common/status_macros.h"
#include "libs/data/criteo_files.h"
#include "libs/job/builtin_model_kinds.h"
#include "libs/workload/ctr_workload.h"

namespace syncopate::job {
namespace {

absl::Status Bad(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("job spec: ", field, " ", why));
}

}  // namespace

absl::StatusOr<model::CtrModel> CtrModelForJob(const v1::JobSpec& job) {
  const CtrModelKind* ctr = FindCtrModelKind(job.model().kind());
  if (ctr == nullptr) return absl::InvalidArgumentError("not a CTR (WDL, DEEPFM or DCN) job");
  model::CtrModelOptions options;
  options.architecture = ctr->architecture();
  for (const v1::FieldCross& cross : job.model().wide_crosses()) {
    // Criteo column numbers C1..C26 in the job; 0-based fields in the model.
    options.crosses.push_back({cross.first() - 1, cross.second() - 1});
  }
  options.embedding_dim = job.model().embedding_dim();
  options.hidden.assign(job.model().hidden().begin(), job.model().hidden().end());
  options.cross_layers = job.model().cross_layers();
  options.missing_indicators = job.model().numeric_missing() != v1::ModelSpec::MISSING_AS_ZERO;
  options.fm_numeric = job.model().fm_fields() == v1::ModelSpec::CATEGORICAL_AND_NUMERIC;
  options.cross_numeric = job.model().cross_fields() == v1::ModelSpec::CATEGORICAL_AND_NUMERIC;
  return model::CtrModel::Create(std::move(options));
}

void CtrModelKind::ApplyDefaults(v1::JobSpec& job) const {
  if (job.model().embedding_dim() == 0) job.mutable_model()->set_embedding_dim(16);
  if (job.model().numeric_missing() == v1::ModelSpec::NUMERIC_MISSING_UNSPECIFIED) {
    job.mutable_model()->set_numeric_missing(v1::ModelSpec::MISSING_INDICATOR);
  }
  if (architecture_ == model::CtrArchitecture::kDcn && job.model().cross_layers() == 0) {
    job.mutable_model()->set_cross_layers(2);
  }
  if (architecture_ == model::CtrArchitecture::kDeepFm &&
      job.model().fm_fields() == v1::ModelSpec::INTERACTION_FIELDS_UNSPECIFIED) {
    job.mutable_model()->set_fm_fields(v1::ModelSpec::CATEGORICAL_ONLY);
  }
  if (architecture_ == model::CtrArchitecture::kDcn &&
      job.model().cross_fields() == v1::ModelSpec::INTERACTION_FIELDS_UNSPECIFIED) {
    job.mutable_model()->set_cross_fields(v1::ModelSpec::CATEGORICAL_ONLY);
  }
}

absl::Status CtrModelKind::Validate(const v1::JobSpec& job) const {
  const v1::ModelSpec& m = job.model();
  if (job.dataset().kind() != v1::DatasetSpec::CRITEO) {
    return Bad("dataset.kind", absl::StrCat("must be CRITEO for model ", name()));
  }
  if (architecture_ == model::CtrArchitecture::kDcn &&
      (m.cross_layers() < 1 || m.cross_layers() > 16)) {
    return Bad("model.cross_layers",
               absl::StrCat("must be in [1, 16] for DCN, got ", m.cross_layers()));
  }
  if (architecture_ != model::CtrArchitecture::kDcn && m.cross_layers() != 0) {
    return Bad("model.cross_layers", "is only for model DCN");
  }
  if (!v1::ModelSpec::NumericMissing_IsValid(m.numeric_missing())) {
    return Bad("model.numeric_missing", absl::StrCat("has no value ", m.numeric_missing()));
  }
  if (!v1::ModelSpec::InteractionFields_IsValid(m.fm_fields())) {
    return Bad("model.fm_fields", absl::StrCat("has no value ", m.fm_fields()));
  }
  if (architecture_ != model::CtrArchitecture::kDeepFm &&
      m.fm_fields() != v1::ModelSpec::INTERACTION_FIELDS_UNSPECIFIED) {
    return Bad("model.fm_fields", "is only for model DEEPFM");
  }
  if (!v1::ModelSpec::InteractionFields_IsValid(m.cross_fields())) {
    return Bad("model.cross_fields", absl::StrCat("has no value ", m.cross_fields()));
  }
  if (architecture_ != model::CtrArchitecture::kDcn &&
      m.cross_fields() != v1::ModelSpec::INTERACTION_FIELDS_UNSPECIFIED) {
    return Bad("model.cross_fields", "is only for model DCN");
  }
  if (m.embedding_dim() <= 0 || m.embedding_dim() > 1024) {
    return Bad("model.embedding_dim",
               absl::StrCat("must be in [1, 1024], got ", m.embedding_dim()));
  }
  for (const v1::FieldCross& cross : m.wide_crosses()) {
    if (cross.first() < 1 || cross.first() > 26 || cross.second() < 1 || cross.second() > 26 ||
        cross.first() == cross.second()) {
      return Bad("model.wide_crosses",
                 absl::StrCat("needs two different columns in 1..26 (C1..C26), got ", cross.first(),
                              " and ", cross.second()));
    }
  }
  SYNCOPATE_RETURN_IF_ERROR(ValidateEmbeddingMemory(m));
  if (job.dataset().train_path().empty()) return Bad("dataset.train_path", "is required");
  if (job.dataset().test_path().empty()) return Bad("dataset.test_path", "is required");
  return absl::OkStatus();
}

absl::StatusOr<ModelLayout> CtrModelKind::Layout(const v1::JobSpec& job) const {
  SYNCOPATE_ASSIGN_OR_RETURN(const model::CtrModel ctr, CtrModelForJob(job));
  ModelLayout layout;
  layout.dense = ctr.tensors();
  layout.tables = ctr.tables();
  ApplyEmbeddingMemory(job.model(), layout);
  return layout;
}

absl::StatusOr<ModelDescription> CtrModelKind::Describe(const v1::JobSpec& job) const {
  // Parsing every line (and keeping none) validates the data before any worker starts; the
  // validation set too, so a bad path fails the job at once rather than its evaluator later.
  if (!job.dataset().validation_path().empty()) {
    SYNCOPATE_ASSIGN_OR_RETURN(
        std::unique_ptr<data::CriteoFiles> validation,
        data::CriteoFiles::Open(job.dataset().validation_path(), {.validate = true}));
    if (validation->rows() == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(job.dataset().validation_path(), " holds no examples"));
    }
  }
  SYNCOPATE_ASSIGN_OR_RETURN(
      std::unique_ptr<data::CriteoFiles> files,
      data::CriteoFiles::Open(job.dataset().train_path(),
                              {.limit = job.dataset().train_limit(), .validate = true}));
  ModelDescription description;
  description.train_examples = files->rows();
  SYNCOPATE_ASSIGN_OR_RETURN(description.layout, Layout(job));
  return description;
}

absl::StatusOr<std::unique_ptr<workload::Workload>> CtrModelKind::CreateWorkload(
    const v1::JobSpec& job, workload::Purpose purpose,
    const workload::WorkloadOptions& options) const {
  const bool train = purpose == workload::Purpose::kTrain;
  SYNCOPATE_ASSIGN_OR_RETURN(model::CtrModel model, CtrModelForJob(job));
  const std::string& path = train ? job.dataset().train_path()
                            : purpose == workload::Purpose::kValidate
                                ? job.dataset().validation_path()
                                : job.dataset().test_path();
  // test_limit bounds the test set only: the validation set is read whole.
  const int64_t limit = train                                     ? job.dataset().train_limit()
                        : purpose == workload::Purpose::kEvaluate ? job.dataset().test_limit()
                                                                  : 0;
  SYNCOPATE_ASSIGN_OR_RETURN(std::unique_ptr<data::CriteoFiles> files,
                             data::CriteoFiles::Open(path, {.limit = limit}));
  if (files->rows() == 0) {
    return absl::FailedPreconditionError(absl::StrCat(path, " holds no examples"));
  }
  SYNCOPATE_ASSIGN_OR_RETURN(
      data::CriteoBlockCache examples,
      data::CriteoBlockCache::Create(std::move(files), job.block_size(), options.cached_blocks));
  return workload::NewCtrWorkload(std::move(model), std::move(examples));
}

}  // namespace syncopate::job
