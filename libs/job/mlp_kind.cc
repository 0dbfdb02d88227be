#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "libs/common/status_macros.h"
#include "libs/data/idx_reader.h"
#include "libs/job/builtin_model_kinds.h"
#include "libs/workload/image_workload.h"

namespace syncopate::job {
namespace {

constexpr int kPixels = 28 * 28;
constexpr int kClasses = 10;

}  // namespace

absl::StatusOr<model::Mlp> ModelForJob(const v1::JobSpec& job) {
  if (job.dataset().kind() != v1::DatasetSpec::FASHION_MNIST ||
      job.model().kind() != v1::ModelSpec::MLP) {
    return absl::InvalidArgumentError("only FASHION_MNIST jobs have an MLP");
  }
  return model::Mlp::Create(
      kPixels, std::vector<int>(job.model().hidden().begin(), job.model().hidden().end()),
      kClasses);
}

void MlpModelKind::ApplyDefaults(v1::JobSpec& job) const {
  if (job.dataset().kind() == v1::DatasetSpec::FASHION_MNIST && job.dataset().dir().empty()) {
    job.mutable_dataset()->set_dir("/usr/share/datasets/fashion-mnist");
  }
}

absl::Status MlpModelKind::Validate(const v1::JobSpec& job) const {
  if (job.dataset().kind() != v1::DatasetSpec::FASHION_MNIST) {
    return absl::InvalidArgumentError("job spec: dataset.kind must be FASHION_MNIST for model MLP");
  }
  if (job.model().admit_after_count() != 0 || job.model().evict_after_updates() != 0) {
    return absl::InvalidArgumentError(
        "job spec: model.admit_after_count and evict_after_updates are for models with "
        "embedding tables, not MLP");
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelLayout> MlpModelKind::Layout(const v1::JobSpec& job) const {
  SYNCOPATE_ASSIGN_OR_RETURN(const model::Mlp mlp, ModelForJob(job));
  ModelLayout layout;
  layout.dense = mlp.tensors();
  return layout;
}

absl::StatusOr<ModelDescription> MlpModelKind::Describe(const v1::JobSpec& job) const {
  ModelDescription description;
  SYNCOPATE_ASSIGN_OR_RETURN(description.train_examples,
                             data::CountFashionMnist(job.dataset().dir(), data::Split::kTrain));
  SYNCOPATE_ASSIGN_OR_RETURN(description.layout, Layout(job));
  return description;
}

absl::StatusOr<std::unique_ptr<workload::Workload>> MlpModelKind::CreateWorkload(
    const v1::JobSpec& job, workload::Purpose purpose, const workload::WorkloadOptions&) const {
  const bool train = purpose == workload::Purpose::kTrain;
  SYNCOPATE_ASSIGN_OR_RETURN(model::Mlp mlp, ModelForJob(job));
  SYNCOPATE_ASSIGN_OR_RETURN(
      data::Dataset data,
      data::LoadFashionMnist(job.dataset().dir(), train ? data::Split::kTrain : data::Split::kTest,
                             train ? job.dataset().train_limit() : job.dataset().test_limit()));
  return workload::NewImageWorkload(std::move(mlp), std::move(data));
}

}  // namespace syncopate::job
