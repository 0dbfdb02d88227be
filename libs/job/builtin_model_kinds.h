// The built-in model kinds' rows of the table in model_kinds.cc (private to libs/job).
// Thread-safety: immutable; thread-safe.
#ifndef SYNCOPATE_LIBS_JOB_BUILTIN_MODEL_KINDS_H_
#define SYNCOPATE_LIBS_JOB_BUILTIN_MODEL_KINDS_H_

#include "libs/job/model_kind.h"
#include "libs/model/ctr_model.h"

namespace syncopate::job {

// MLP: the dense ReLU MLP (softmax cross-entropy) on Fashion-MNIST, held in memory.
class MlpModelKind final : public ModelKind {
 public:
  v1::ModelSpec::Kind kind() const override { return v1::ModelSpec::MLP; }
  absl::string_view quality_metric(const v1::JobSpec&) const override { return "accuracy"; }
  void ApplyDefaults(v1::JobSpec& job) const override;
  absl::Status Validate(const v1::JobSpec& job) const override;
  absl::StatusOr<ModelDescription> Describe(const v1::JobSpec& job) const override;
  // Describe's layout, from the spec alone (BuiltinLayoutForJob).
  absl::StatusOr<ModelLayout> Layout(const v1::JobSpec& job) const;
  absl::StatusOr<std::unique_ptr<workload::Workload>> CreateWorkload(
      const v1::JobSpec& job, workload::Purpose purpose,
      const workload::WorkloadOptions& options) const override;
};

// WDL, DEEPFM, DCN: one CTR architecture (model::CtrModel) on Criteo-format data read from disk.
class CtrModelKind final : public ModelKind {
 public:
  CtrModelKind(v1::ModelSpec::Kind kind, model::CtrArchitecture architecture)
      : kind_(kind), architecture_(architecture) {}

  v1::ModelSpec::Kind kind() const override { return kind_; }
  model::CtrArchitecture architecture() const { return architecture_; }
  absl::string_view quality_metric(const v1::JobSpec&) const override { return "auc"; }
  void ApplyDefaults(v1::JobSpec& job) const override;
  absl::Status Validate(const v1::JobSpec& job) const override;
  absl::StatusOr<ModelDescription> Describe(const v1::JobSpec& job) const override;
  // Describe's layout, from the spec alone (BuiltinLayoutForJob).
  absl::StatusOr<ModelLayout> Layout(const v1::JobSpec& job) const;
  absl::StatusOr<std::unique_ptr<workload::Workload>> CreateWorkload(
      const v1::JobSpec& job, workload::Purpose purpose,
      const workload::WorkloadOptions& options) const override;

 private:
  const v1::ModelSpec::Kind kind_;
  const model::CtrArchitecture architecture_;
};

// TORCH: a PyTorch module the user brings (ModelSpec.torch; libs/pytorch, ADR 0013). Describe
// builds the module, opens its training set and runs a check step, each call. In a build without
// Python (SYNCOPATE_TORCH off) every function but quality_metric says so.
class TorchModelKind final : public ModelKind {
 public:
  v1::ModelSpec::Kind kind() const override { return v1::ModelSpec::TORCH; }
  absl::string_view quality_metric(const v1::JobSpec& job) const override;
  absl::Status Validate(const v1::JobSpec& job) const override;
  absl::StatusOr<ModelDescription> Describe(const v1::JobSpec& job) const override;
  absl::StatusOr<std::unique_ptr<workload::Workload>> CreateWorkload(
      const v1::JobSpec& job, workload::Purpose purpose,
      const workload::WorkloadOptions& options) const override;
};

// The row of a CTR kind, or null (the table's own instances; model_kinds.cc).
const CtrModelKind* FindCtrModelKind(v1::ModelSpec::Kind kind);

// model.admit_after_count and model.evict_after_updates (ADR 0010), for every kind with
// embedding tables: validated once, and applied to each of the layout's tables.
absl::Status ValidateEmbeddingMemory(const v1::ModelSpec& model);
void ApplyEmbeddingMemory(const v1::ModelSpec& model, ModelLayout& layout);

}  // namespace syncopate::job

#endif  // SYNCOPATE_LIBS_JOB_BUILTIN_MODEL_KINDS_H_
