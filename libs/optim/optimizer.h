// The optimizer of a dense parameter slice on a parameter shard: an UpdateRule (the math, shared
// with embedding rows) plus the slice's slot vectors, update count, learning-rate schedule and
// training progress. It updates the slice with one aggregated (mean) gradient per update. Its state
// belongs to the shard: a change of aggregation mode never touches it (docs/design.md §4).
// Thread-safety: thread-compatible; the shard serialises updates under its own lock.
#ifndef SYNCOPATE_LIBS_OPTIM_OPTIMIZER_H_
#define SYNCOPATE_LIBS_OPTIM_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "libs/isa/isa.h"
#include "libs/optim/learning_rate_schedule.h"
#include "libs/optim/update_rule.h"
#include "syncopate/v1/job.pb.h"

namespace syncopate::optim {

class Optimizer {
 public:
  // A slice of `size` parameters updated by `rule` at the rates of `schedule`; every slot starts
  // at the rule's initial value.
  Optimizer(std::unique_ptr<UpdateRule> rule, LearningRateSchedule schedule, int64_t size);
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // params -= step(grad), as update number steps() + 1 at the schedule's rate for the current
  // progress; then progress advances by `global_batches` (the update's samples / G: 1 in sync
  // and gba, less for an async push or a flush on a mode switch). Both spans have the size the
  // optimizer was created for. Returns the step it applied, for the slice's embedding rows.
  Step Apply(std::span<float> params, std::span<const float> grad, double global_batches = 1.0);
  // The step the next Apply will take.
  Step NextStep() const;
  // The parameters after `delay` more updates without a new gradient (UpdateRule::LookAhead at
  // the next step's rate), written into `out` (params.size() elements).
  void LookAhead(std::span<const float> params, double delay, std::span<float> out) const;
  // The buffer-aware look-ahead (ADR 0007, "The pending update"): the parameters the pending
  // update will produce if its gradient is `pending` (the mean of the gradients buffered for it
  // so far), i.e. the rule's own step applied to copies of the parameters and slots, then
  // `landing - 1` more updates of the velocity's drift (LookAhead). With `pending` empty, the
  // drift alone for `landing` updates. landing < 1: out = params. Uses scratch of its own.
  void LookAheadPending(std::span<const float> params, std::span<const float> pending,
                        int64_t landing, std::span<float> out);
  bool looks_ahead() const { return rule_->looks_ahead(); }
  double velocity_decay() const { return rule_->velocity_decay(); }
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
  // Global batches applied so far: the schedule's position (ShardCheckpoint.schedule_progress).
  double progress() const { return progress_; }
  void set_progress(double progress) { progress_ = progress; }

 private:
  const std::unique_ptr<UpdateRule> rule_;
  const LearningRateSchedule schedule_;
  std::vector<std::vector<float>> slots_;
  std::vector<std::span<float>> slot_spans_;       // views of slots_, built once
  std::vector<std::vector<float>> scratch_slots_;  // LookAheadPending's copies of the slots
  std::vector<std::span<float>> scratch_spans_;
  int64_t steps_ = 0;
  double progress_ = 0;
};

// Validates the spec (CreateUpdateRule, LearningRateSchedule::Create) and builds the optimizer for
// a parameter slice of `size` elements, its update loops compiled for `isa_level` (a level
// this CPU runs). INVALID_ARGUMENT names the offending field.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(
    const v1::OptimizerSpec& spec, int64_t size, isa::IsaLevel isa_level = isa::ActiveIsaLevel());

}  // namespace syncopate::optim

#endif  // SYNCOPATE_LIBS_OPTIM_OPTIMIZER_H_
