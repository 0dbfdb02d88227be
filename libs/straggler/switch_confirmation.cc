#include "libs/straggler/switch_confirmation.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "libs/stats/confidence.h"

namespace syncopate {
namespace {

double DecisiveZ() {
  const double tail = 1 - stats::NormalCdf(ModePolicy::kSignificanceZ);
  return stats::NormalQuantile(1 - tail * tail);
}

// A throughput verdict (ModePolicy's z compares the two modes' predicted samples/s) that points
// the way it recommends, by kDecisiveZ standard errors widened by sqrt(W).
bool IsDecisive(const ModeDecision& decision, const Assessment& assessment) {
  const bool to_gba = decision.recommended == v1::MODE_GBA;
  const bool throughput_verdict = (to_gba && (decision.reason == kReasonStragglerDetected ||
                                              decision.reason == kReasonGbaPredictedFaster)) ||
                                  (!to_gba && decision.reason == kReasonSyncPredictedFaster);
  if (!throughput_verdict || assessment.window <= 0) return false;
  const double signed_z = to_gba ? decision.z : -decision.z;
  return signed_z >= SwitchConfirmation::kDecisiveZ * std::sqrt(assessment.window);
}

}  // namespace

const double SwitchConfirmation::kDecisiveZ = DecisiveZ();

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
  if (IsDecisive(decision, assessment)) {
    candidate_.reset();
    decision.explanation = absl::StrCat(decision.explanation,
                                        " [decisive: |z| clears the two-window bar even with each "
                                        "worker's window counted as one step]");
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
