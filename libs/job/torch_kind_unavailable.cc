// TORCH in a build without Python (SYNCOPATE_TORCH off, e.g. the lean container image): a job
// naming a PyTorch module fails at start with one line saying which build runs it.
#include <memory>

#include "libs/job/builtin_model_kinds.h"

namespace syncopate::job {
namespace {

absl::Status Unavailable() {
  return absl::UnimplementedError(
      "model TORCH needs a build with PyTorch support (python3-dev, pybind11-dev and "
      "python3-torch at build time: ./dev build, or the syncopate-torch image)");
}

}  // namespace

absl::string_view TorchModelKind::quality_metric(const v1::JobSpec& job) const {
  return job.model().torch().metric() == v1::TorchModel::AUC ? "auc" : "accuracy";
}

absl::Status TorchModelKind::Validate(const v1::JobSpec&) const { return Unavailable(); }

absl::StatusOr<ModelDescription> TorchModelKind::Describe(const v1::JobSpec&) const {
  return Unavailable();
}

absl::StatusOr<std::unique_ptr<workload::Workload>> TorchModelKind::CreateWorkload(
    const v1::JobSpec&, workload::Purpose, const workload::WorkloadOptions&) const {
  return Unavailable();
}

}  // namespace syncopate::job
