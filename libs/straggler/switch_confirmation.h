// A mode switch must be confirmed by a second, independent window of measurements.
//
// ModePolicy judges one window of W steps per worker at a significance of ~2 standard errors.
// Its error model assumes independent step times; on shared machines they are not (a worker
// descheduled for a while is slow for several consecutive steps), so one window can look
// significant by accident. Asking the same verdict of the next window, which shares no sample
// with the first, squares the false-switch probability (sequential testing) at the cost of one
// window of delay, and makes the minimum time in a mode two windows. No constant to tune: the
// rule is in units of the policy's own window.
// Thread-safety: thread-compatible (the coordinator locks around it).
#ifndef SYNCOPATE_LIBS_STRAGGLER_SWITCH_CONFIRMATION_H_
#define SYNCOPATE_LIBS_STRAGGLER_SWITCH_CONFIRMATION_H_

#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "libs/straggler/mode_policy.h"

namespace syncopate {

class SwitchConfirmation {
 public:
  // True when `decision` says switch and an earlier decision recommended the same mode on a
  // window that ended before this one began, for every worker in `loads`. A decision that does
  // not say switch withdraws any pending candidate. Rewrites `decision` (switch_now, reason,
  // explanation) when the switch is held for confirmation.
  bool Confirm(ModeDecision& decision, const Assessment& assessment,
               const std::vector<WorkerLoad>& loads);

 private:
  struct Candidate {
    syncopate::v1::Mode mode;
    absl::Time decided_at;
  };
  std::optional<Candidate> candidate_;
};

inline constexpr absl::string_view kReasonAwaitingConfirmation = "awaiting_confirmation";

}  // namespace syncopate

#endif  // SYNCOPATE_LIBS_STRAGGLER_SWITCH_CONFIRMATION_H_
