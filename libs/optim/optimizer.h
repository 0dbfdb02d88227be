// The optimizer of a dense parameter slice on a parameter shard: an UpdateRule (the math, shared
// with embedding rows) plus the slice's slot vectors and update count. It updates the slice with
// one aggregated (mean) gradient per update. Its state belongs to the shard: a change of
// aggregation mode never touches it (DESIGN §4).
// Thread-safety: thread-compatible; the shard serialises updates under its own lock.
#ifndef SYNCOPATE_LIBS_OPTIM_OPTIMIZER_H_
#define SYNCOPATE_LIBS_OPTIM_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "libs/optim/update_rule.h"
#include "syncopate/v1/job.pb.h"

namespace syncopate::optim {

class Optimizer {
 public:
  // A slice of `size` parameters updated by `rule`; every slot starts at the rule's initial value.
  Optimizer(std::unique_ptr<UpdateRule> rule, int64_t size);
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // params -= step(grad), as update number steps() + 1. Both spans have the size the optimizer
  // was created for.
  void Apply(std::span<float> params, std::span<const float> grad);
  std::string_view name() const { return rule_->name(); }
  const UpdateRule& rule() const { return *rule_; }
  // Bytes of optimizer state (the slot vectors), for metrics and memory budgets.
  int64_t state_bytes() const;
  // The optimizer's per-parameter state vectors (the rule's slots, in slot order), each aligned
  // with the parameters (element i belongs to parameter i), for checkpoints. Empty for stateless
  // rules. The spans stay valid for the optimizer's lifetime.
  std::vector<std::span<float>> state_vectors() { return slot_spans_; }
  // Updates applied so far (Adam's bias correction uses steps() + 1 for the next one).
  int64_t steps() const { return steps_; }
  // Restores the count from a checkpoint (ShardCheckpoint.optimizer_steps).
  void set_steps(int64_t steps) { steps_ = steps; }

 private:
  const std::unique_ptr<UpdateRule> rule_;
  std::vector<std::vector<float>> slots_;
  std::vector<std::span<float>> slot_spans_;  // views of slots_, built once
  int64_t steps_ = 0;
};

// Validates the spec (CreateUpdateRule) and builds the optimizer for a parameter slice of `size`
// elements. INVALID_ARGUMENT names the offending field.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const v1::OptimizerSpec& spec,
                                                           int64_t size);

}  // namespace syncopate::optim

#endif  // SYNCOPATE_LIBS_OPTIM_OPTIMIZER_H_
