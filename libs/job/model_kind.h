// The model kinds a job can name (ModelSpec.kind), one row each in one table (model_kinds.cc):
// everything the cluster needs to know about a kind of model. Job-spec validation and defaults,
// the model's description (the shards' layout and the training set's size), the evaluator's
// quality metric and the workload a worker or evaluator trains all read the row, so adding a
// model is a row in the table plus the model's own files (docs/architecture.md, "How to add a
// model").
// Thread-safety: the table is immutable and keeps no state between calls; every function here is
// thread-safe. Describe does the work each time it is called (a TORCH kind builds the user's
// module and opens its data; a CTR kind reads its files), so a caller describes a job once and
// keeps the record.
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

// What the cluster reads off a job's model at the coordinator's start, in one call: a PyTorch
// module is built once to answer all of it.
struct ModelDescription {
  ModelLayout layout;          // what the model stores on the shards (and its initial values)
  int64_t train_examples = 0;  // the training set's size: what the data leases cover
};

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
  // The job's model: its layout (cheap for the built-in models; a PyTorch module is built to read
  // it and its initial values off the module) and how many training examples its data holds
  // (train_examples before train_limit), checking the data where that is cheap enough to do once
  // at start. Errors name the file or field.
  virtual absl::StatusOr<ModelDescription> Describe(const v1::JobSpec& job) const = 0;
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
// DescribeModel's train_examples is what the job trains on per epoch (after train_limit): what the
// coordinator's data leases cover. FAILED_PRECONDITION for an empty training set.
absl::StatusOr<ModelDescription> DescribeModel(const v1::JobSpec& job);
absl::StatusOr<std::unique_ptr<workload::Workload>> CreateWorkload(
    const v1::JobSpec& job, workload::Purpose purpose,
    const workload::WorkloadOptions& options = {});
// The layout of a built-in model (MLP, WDL, DEEPFM, DCN), which its spec alone decides: for what
// needs the layout without the data (the exporter completing an old checkpoint's job, tests).
// INVALID_ARGUMENT for a TORCH job, whose layout only its module says (DescribeModel).
absl::StatusOr<ModelLayout> BuiltinLayoutForJob(const v1::JobSpec& job);
// "accuracy" or "auc" (ModelKind::quality_metric); "accuracy" for an unknown kind.
absl::string_view QualityMetric(const v1::JobSpec& job);

// The built-in models a job names, with the shapes its spec gives (dimensions from the dataset).
absl::StatusOr<model::Mlp> ModelForJob(const v1::JobSpec& job);          // MLP
absl::StatusOr<model::CtrModel> CtrModelForJob(const v1::JobSpec& job);  // WDL, DEEPFM, DCN

}  // namespace syncopate::job

#endif  // SYNCOPATE_LIBS_JOB_MODEL_KIND_H_
