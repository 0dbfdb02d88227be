// Update rules: the math of every optimizer, written once and shared by dense parameter slices
// (optim::Optimizer) and sparse embedding rows (embedding::EmbeddingTable). A rule is stateless;
// the caller owns the per-element state ("slots": velocity, accumulators, moments) and the step
// count, so a dense slice keeps one slot vector per slot while an embedding row keeps its slots
// next to its value.
// Thread-safety: rules are immutable after creation; Apply is safe to call concurrently on
// disjoint parameters.
#ifndef SYNCOPATE_LIBS_OPTIM_UPDATE_RULE_H_
#define SYNCOPATE_LIBS_OPTIM_UPDATE_RULE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "absl/status/statusor.h"
#include "syncopate/v1/job.pb.h"

namespace syncopate::optim {

// How one block of parameters moves given its mean gradient and its per-element state slots.
class UpdateRule {
 public:
  virtual ~UpdateRule() = default;
  // "sgd", "momentum", "nesterov", "adagrad" or "adam"; checkpoints record it.
  virtual std::string_view name() const = 0;
  // Per-element state vectors the rule needs: sgd 0, momentum/nesterov 1, adagrad 1, adam 2.
  virtual int num_slots() const = 0;
  // The value every element of slot `slot` starts at: adagrad's initial_accumulator, else 0.
  virtual float slot_initial_value(int slot) const;
  // params -= step. `slots` has num_slots() spans, each params.size() long. `step` is the 1-based
  // index of this update among the updates of this parameter set (Adam bias correction; for sparse
  // rows this is the shard's global update count, as TensorFlow's LazyAdam does). A step < 1 is
  // treated as 1.
  virtual void Apply(std::span<float> params, std::span<const float> grad,
                     std::span<const std::span<float>> slots, int64_t step) const = 0;
};

// Validates `spec` and builds its rule. INVALID_ARGUMENT names the offending field:
// learning_rate <= 0 or non-finite; for MOMENTUM, momentum outside [0, 1); for ADAM, beta1 or
// beta2 outside [0, 1) or epsilon < 0 / non-finite; for ADAGRAD, epsilon or initial_accumulator
// < 0 / non-finite; an unspecified or unknown kind. Fields left 0 take job.proto's defaults:
// beta1 0.9, beta2 0.999, epsilon 1e-8 (Adam) / 1e-7 (Adagrad), initial_accumulator 0.1.
absl::StatusOr<std::unique_ptr<UpdateRule>> CreateUpdateRule(const v1::OptimizerSpec& spec);

}  // namespace syncopate::optim

#endif  // SYNCOPATE_LIBS_OPTIM_UPDATE_RULE_H_
