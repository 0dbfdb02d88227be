#include "libs/straggler/switch_confirmation.h"

#include "absl/strings/str_cat.h"

namespace syncopate {

bool SwitchConfirmation::Confirm(ModeDecision& decision, const Assessment& assessment,
                                 const std::vector<WorkerLoad>& loads) {
  if (!decision.switch_now) {
    candidate_.reset();
    return false;
  }
  // A pinned mode is an order, not a measurement: nothing to confirm.
  if (decision.reason == kReasonPinned) {
    candidate_.reset();
    return true;
  }
  bool independent = candidate_.has_value() && candidate_->mode == decision.recommended;
  for (const WorkerLoad& load : loads) {
    if (!independent) break;
    const WorkerAssessment* worker = assessment.Find(load.worker);
    independent = worker != nullptr && worker->oldest_compute_at > candidate_->decided_at;
  }
  if (independent) {
    candidate_.reset();
    return true;
  }
  if (!candidate_.has_value() || candidate_->mode != decision.recommended) {
    candidate_ = Candidate{decision.recommended, decision.at};
  }
  decision.switch_now = false;
  decision.explanation =
      absl::StrCat(decision.explanation, " [held: awaiting a second, independent window]");
  decision.reason = std::string(kReasonAwaitingConfirmation);
  return false;
}

}  // namespace syncopate
