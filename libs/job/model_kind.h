// The model kinds a job can name (ModelSpec.kind), one row each in one table (model_kinds.cc):
// everything the cluster needs to know about a kind of model. Job-spec validation and defaults,
// the shards' layout, the training set's size, the evaluator's quality metric and the workload a
// worker or evaluator trains all read the row, so adding a model is a row in the table plus the
// model's own files (docs/architecture.md, "How to add a model").
// Thread-safety: the table is immutable; every function here is thread-safe.
#ifndef SYNCOPATE_LIBS_JOB_MODEL_KIND_H_
#define SYNCOPATE_LIBS_JOB_MODEL_KIND_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "libs/job/partitioner.h"
#include "libs/model/ctr_model.h"
#include "libs/model/mlp.h"
#include "libs/workload/workload.h"
#include "syncopate/v1/job.pb.h"

namespace syncopate::job {

class ModelKind {
 public:
  virtual ~ModelKind() = default;

  virtual v1::ModelSpec::Kind kind() const = 0;
  absl::string_view name() const { return v1::ModelSpec::Kind_Name(kind()); }
  // "accuracy" (classification) or "auc" (click-through rate): what the run report, the bench
  // and the straggler bench's targets judge a job of this kind by.
  virtual absl::string_view quality_metric(const v1::JobSpec& job) const = 0;

  // Fills the model's (and its dataset's) unset fields; runs before Validate.
  virtual void ApplyDefaults(v1::JobSpec& job) const {}
  // The model and dataset sections: INVALID_ARGUMENT "job spec: <field> <why>" for the first
  // offending field.
  virtual absl::Status Validate(const v1::JobSpec& job) const = 0;
  // What the job's model stores on the shards. Cheap for the built-in models; a PyTorch model is
  // built to read it (and its initial values) off the module.
  virtual absl::StatusOr<ModelLayout> Layout(const v1::JobSpec& job) const = 0;
  // How many training examples the job's data holds (before train_limit), checking the data
  // where that is cheap enough to do once at start.
  virtual absl::StatusOr<int64_t> CountTrainExamples(const v1::JobSpec& job) const = 0;
  // The model and the data the purpose needs (the training set for workers, the evaluation set
  // for the evaluator). Errors name the file or field.
  virtual absl::StatusOr<std::unique_ptr<workload::Workload>> CreateWorkload(
      const v1::JobSpec& job, workload::Purpose purpose,
      const workload::WorkloadOptions& options) const = 0;
};

// The row of `kind`: INVALID_ARGUMENT "job spec: model.kind must be one of ..." for a kind
// without one.
absl::StatusOr<const ModelKind*> FindModelKind(v1::ModelSpec::Kind kind);

// The row of the job's model kind, applied. Each fails like FindModelKind for an unknown kind.
absl::StatusOr<ModelLayout> LayoutForJob(const v1::JobSpec& job);
absl::StatusOr<std::unique_ptr<workload::Workload>> CreateWorkload(
    const v1::JobSpec& job, workload::Purpose purpose,
    const workload::WorkloadOptions& options = {});
// How many training examples the job trains on per epoch (after train_limit): what the
// coordinator's data leases cover. FAILED_PRECONDITION for an empty training set.
absl::StatusOr<int64_t> CountTrainExamples(const v1::JobSpec& job);
// "accuracy" or "auc" (ModelKind::quality_metric); "accuracy" for an unknown kind.
absl::string_view QualityMetric(const v1::JobSpec& job);

// The built-in models a job names, with the shapes its spec gives (dimensions from the dataset).
absl::StatusOr<model::Mlp> ModelForJob(const v1::JobSpec& job);          // MLP
absl::StatusOr<model::CtrModel> CtrModelForJob(const v1::JobSpec& job);  // WDL, DEEPFM, DCN

}  // namespace syncopate::job

#endif  // SYNCOPATE_LIBS_JOB_MODEL_KIND_H_
