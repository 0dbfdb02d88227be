// ModePolicy: decides, per parameter shard, between MODE_SYNC and MODE_GBA from a cost model
// over the workers that push to that shard (docs/design.md §6). No per-job settings: every constant
// is statistical and justified where it is defined; only a job-spec pin overrides the model.
//
// Typical use (coordinator, under its own lock, once per shard per assessment):
//   ModePolicy policy(clock, job.global_batch());
//   SYNCOPATE_ASSIGN_OR_RETURN(ModeDecision d, policy.Decide(detector.Assess(), mode, loads));
//   if (d.switch_now) { SendSetMode(shard, d.recommended); policy.NotifySwitched(d.recommended); }
//
// Thread-safety: NOT thread-safe. A pure class; the coordinator holds its own lock around every
// call. The injected Clock must outlive the policy.
#ifndef SYNCOPATE_LIBS_STRAGGLER_MODE_POLICY_H_
#define SYNCOPATE_LIBS_STRAGGLER_MODE_POLICY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "libs/common/clock.h"
#include "libs/straggler/staleness.h"
#include "libs/straggler/straggler_detector.h"
#include "syncopate/v1/job.pb.h"

namespace syncopate {

// A worker that pushes to the shard being decided, with its current local batch b_i (the batch
// its measured step times were taken at).
struct WorkerLoad {
  int32_t worker = 0;
  int64_t local_batch = 0;
};

// Short, stable labels for ModeDecision::reason (metric label values).
inline constexpr absl::string_view kReasonPinned = "pinned";
inline constexpr absl::string_view kReasonInsufficientData = "insufficient_data";
inline constexpr absl::string_view kReasonHoldMinDwell = "hold_min_dwell";
inline constexpr absl::string_view kReasonNoSignificantDifference = "no_significant_difference";
inline constexpr absl::string_view kReasonStragglerDetected = "straggler_detected";
inline constexpr absl::string_view kReasonGbaPredictedFaster = "gba_predicted_faster";
inline constexpr absl::string_view kReasonSyncPredictedFaster = "sync_predicted_faster";
inline constexpr absl::string_view kReasonStragglersRecovered = "stragglers_recovered";
inline constexpr absl::string_view kReasonStalenessCostExceedsGain = "staleness_cost_exceeds_gain";
// Set by the coordinator's LossGuard (libs/straggler/loss_guard.h), not by ModePolicy: the
// workers' training loss rose significantly in gba (a switch back to sync), and gba held back
// after such a rise.
inline constexpr absl::string_view kReasonTrainingLossRose = "training_loss_rose";
inline constexpr absl::string_view kReasonTrainingLossBackoff = "training_loss_backoff";

struct ModeDecision {
  syncopate::v1::Mode current = syncopate::v1::MODE_UNSPECIFIED;
  // The mode the evidence favours. Differs from `current` without `switch_now` only while the
  // dwell holds (reason hold_min_dwell).
  syncopate::v1::Mode recommended = syncopate::v1::MODE_UNSPECIFIED;
  // Act now: recommended != current and nothing holds the switch back.
  bool switch_now = false;
  // The two predictions differ, but by no more than kSignificanceZ standard errors.
  bool close_call = false;
  // Predicted throughputs in samples/s that count toward updates (GBA's decayed gradients count
  // by their weight), and the standard error of their difference. Zero when not computed
  // (pinned, insufficient data).
  double sync_samples_per_second = 0;
  double gba_samples_per_second = 0;
  // Standard error of their difference, and (gba − sync) / standard_error; ±inf for a nonzero
  // difference with no measured noise.
  double standard_error = 0;
  double z = 0;
  // gba's predicted mean staleness (versions) and the per-sample efficiency the shard's measured
  // StalenessCost gives it (1 when not measured). Goodput (Pollux, OSDI'21) is gba's throughput
  // times that efficiency; goodput_z compares it with sync's like z compares throughputs. The
  // policy enters gba only when z says it is significantly faster and goodput_z does not say
  // staleness costs significantly more than that (reason staleness_cost_exceeds_gain).
  double gba_staleness = 0;
  double gba_efficiency = 1;
  double goodput_standard_error = 0;
  double goodput_z = 0;
  // ι for this shard's workers, and the pushing workers the detector flags.
  int64_t staleness_threshold = 0;
  std::vector<int32_t> stragglers;
  // One of the kReason* labels, and one human-readable line with the numbers behind it.
  std::string reason;
  std::string explanation;
  absl::Time at;
};

class ModePolicy {
 public:
  // A mode must beat the other by more than 2 standard errors of the difference: one-sided, a
  // pure-noise difference crosses that with probability ≈ 2.3%, and decisions come at most once
  // per window (the dwell), so spurious switches are rare; a real straggler's advantage is many
  // standard errors wide and is not delayed by demanding more. (2 ≈ 1.96, the usual 95% band.)
  static constexpr double kSignificanceZ = 2.0;
  // Leaving GBA (with no straggler flagged) needs its predicted lead to fall within one standard
  // error: a one-SE hysteresis band below the entry threshold. A difference measured with noise
  // of one SE then leaves the band by chance with probability ~16% per window rather than ~50%,
  // and SwitchConfirmation asks it of two independent windows.
  static constexpr double kReturnZ = 1.0;

  // `clock` is not owned and must outlive the policy. `global_batch` is the job's G.
  ModePolicy(Clock* clock, int64_t global_batch);

  // Pins the shard's mode (job spec): a pin beats the model, the dwell and missing data.
  // nullopt or MODE_AUTO clears the pin. InvalidArgument for MODE_UNSPECIFIED.
  absl::Status SetPinned(std::optional<syncopate::v1::Mode> mode);
  std::optional<syncopate::v1::Mode> pinned() const { return pinned_; }

  // Decides for one shard. `loads` lists the workers that push to it (distinct ids); `cost` is
  // what the shard measured staleness to cost (unmeasured: gba is priced at full efficiency,
  // by throughput alone, as before any sync update was measured).
  // Unless pinned, `current` must be MODE_SYNC or MODE_GBA.
  // InvalidArgument for a non-positive global batch or local batch, duplicate workers, or an
  // unmanaged current mode.
  absl::StatusOr<ModeDecision> Decide(const Assessment& assessment, syncopate::v1::Mode current,
                                      const std::vector<WorkerLoad>& loads,
                                      const StalenessCost& cost = {}) const;

  // The shard now runs `new_mode` (call when the switch is sent; also once at start for the
  // initial mode). Measurements recorded up to now no longer count toward the dwell.
  void NotifySwitched(syncopate::v1::Mode new_mode);

 private:
  Clock* clock_;
  int64_t global_batch_;
  std::optional<syncopate::v1::Mode> pinned_;
  absl::Time last_switch_at_ = absl::InfinitePast();
  syncopate::v1::Mode last_switched_to_ = syncopate::v1::MODE_UNSPECIFIED;
};

}  // namespace syncopate

#endif  // SYNCOPATE_LIBS_STRAGGLER_MODE_POLICY_H_
