#include "libs/optim/optimizer.h"

#include <algorithm>
#include <utility>

#include "libs/common/status_macros.h"

namespace syncopate::optim {

Optimizer::Optimizer(std::unique_ptr<UpdateRule> rule, LearningRateSchedule schedule, int64_t size)
    : rule_(std::move(rule)), schedule_(std::move(schedule)) {
  for (int slot = 0; slot < rule_->num_slots(); ++slot) {
    slots_.emplace_back(static_cast<size_t>(size), rule_->slot_initial_value(slot));
  }
  // slots_ never resizes after this, so the views stay valid.
  for (std::vector<float>& slot : slots_) slot_spans_.emplace_back(slot);
}

Step Optimizer::Apply(std::span<float> params, std::span<const float> grad, double global_batches) {
  const Step step = NextStep();
  rule_->Apply(params, grad, slot_spans_, step);
  steps_ = step.index;
  progress_ += global_batches;
  return step;
}

Step Optimizer::NextStep() const { return Step{steps_ + 1, schedule_.At(progress_)}; }

void Optimizer::LookAhead(std::span<const float> params, double delay, std::span<float> out) const {
  rule_->LookAhead(params, slot_spans_, NextStep(), delay, out);
}

void Optimizer::LookAheadPending(std::span<const float> params, std::span<const float> pending,
                                 int64_t landing, std::span<float> out) {
  if (landing < 1) {
    std::copy(params.begin(), params.end(), out.begin());
    return;
  }
  const Step step = NextStep();
  if (pending.empty()) {
    rule_->LookAhead(params, slot_spans_, step, static_cast<double>(landing), out);
    return;
  }
  scratch_slots_.resize(slots_.size());
  scratch_spans_.clear();
  for (size_t k = 0; k < slots_.size(); ++k) {
    scratch_slots_[k] = slots_[k];
    scratch_spans_.emplace_back(scratch_slots_[k]);
  }
  std::copy(params.begin(), params.end(), out.begin());
  rule_->Apply(out, pending, scratch_spans_, step);
  // Beyond the pending update, the velocity's drift (rules that look ahead; Nesterov does not,
  // ADR 0007). In place: each element reads only its own value.
  if (landing > 1 && rule_->looks_ahead()) {
    rule_->LookAhead(out, scratch_spans_, step, static_cast<double>(landing - 1), out);
  }
}

int64_t Optimizer::state_bytes() const {
  int64_t bytes = 0;
  for (const std::vector<float>& slot : slots_) {
    bytes += static_cast<int64_t>(slot.size() * sizeof(float));
  }
  return bytes;
}

absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const v1::OptimizerSpec& spec,
                                                           int64_t size, isa::IsaLevel isa_level) {
  if (size < 0) return absl::InvalidArgumentError("optimizer: negative parameter count");
  SYNCOPATE_ASSIGN_OR_RETURN(std::unique_ptr<UpdateRule> rule, CreateUpdateRule(spec, isa_level));
  SYNCOPATE_ASSIGN_OR_RETURN(LearningRateSchedule schedule,
                             LearningRateSchedule::Create(spec.schedule(), spec.learning_rate()));
  return std::make_unique<Optimizer>(std::move(rule), std::move(schedule), size);
}

}  // namespace syncopate::optim
