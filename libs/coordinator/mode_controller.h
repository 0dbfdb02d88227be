// ModeController: the coordinator's per-shard aggregation-mode control loop, on its own.
//
// It owns what the decision needs and nothing else: the straggler detector (fed with the
// members' step reports), the job's LossGuard (fed with their training losses), one ModePolicy
// and SwitchConfirmation per shard of an AUTO job, the
// mode each shard was last told, and the decision status shown by `syncopate status`. Decide()
// runs one round (at most every kDecisionInterval) and returns the SetMode commands to send;
// the caller sends them. No I/O, no gRPC, no lock: time comes from the injected clock, so the
// coordinator runs it under its own lock and the simulator (libs/sim) runs exactly this loop in
// virtual time. See docs/design.md ("Mode control") and ADR 0004.
//
// Typical use (coordinator, under its lock):
//   ModeController modes(job, clock, metrics);
//   assignment.set_mode(modes.ConnectShard(shard_id));
//   modes.AddStep(worker_id, step_report);          // members' steps only
//   for (const SetModeCommand& c : modes.Decide(loads, elapsed).commands) Send(c);
//
// Thread-safety: NOT thread-safe (thread-compatible). The clock must outlive the controller.
#ifndef SYNCOPATE_LIBS_COORDINATOR_MODE_CONTROLLER_H_
#define SYNCOPATE_LIBS_COORDINATOR_MODE_CONTROLLER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "libs/common/clock.h"
#include "libs/straggler/loss_guard.h"
#include "libs/straggler/mode_policy.h"
#include "libs/straggler/staleness.h"
#include "libs/straggler/straggler_detector.h"
#include "libs/straggler/switch_confirmation.h"
#include "syncopate/v1/cluster.pb.h"
#include "syncopate/v1/coordinator.pb.h"
#include "syncopate/v1/job.pb.h"

namespace syncopate::coordinator {

// What the controller counts. The coordinator's Prometheus metrics implement it; NoOp() is the
// default for tests and the simulator.
// Thread-safety: implementations must be thread-safe (the coordinator's are).
class ModeControlMetrics {
 public:
  virtual ~ModeControlMetrics() = default;
  // A shard came under the policy: its decision and switch counters start at 0 for every reason.
  virtual void InitModePolicy(int shard) = 0;
  virtual void CountDecision(int shard, const std::string& reason) = 0;
  virtual void CountSwitch(int shard, const std::string& reason) = 0;
  // The policy's last predictions for the shard: throughputs in samples/s and gba's efficiency.
  virtual void SetPrediction(int shard, double sync_samples_per_second,
                             double gba_samples_per_second, double gba_efficiency) = 0;

  // Counts nothing; never destroyed.
  static ModeControlMetrics* NoOp();
};

// Tell `shard` to run `mode` from now on (CoordinatorToShard.set_mode).
struct SetModeCommand {
  int32_t shard = 0;
  v1::Mode mode = v1::MODE_UNSPECIFIED;
  std::string reason;  // a kReason* label of mode_policy.h
  // The LossGuard's rollback point: kept when the policy enters gba, returned to when the guard
  // trips (SetMode's fields of the same names).
  bool keep_rollback_point = false;
  bool roll_back = false;

  // The message the shard gets (CoordinatorToShard.set_mode).
  v1::SetMode ToProto() const;
};

// One call of Decide.
struct ModeRound {
  // False when nothing was decided: not an AUTO job, or within kDecisionInterval of the last
  // round. The fields below are then empty.
  bool decided = false;
  // The detector's verdicts the round judged (for the slowdown and straggler gauges).
  Assessment assessment;
  std::vector<SetModeCommand> commands;
};

class ModeController {
 public:
  // Decide at most twice a second: a decision needs a fresh window of steps anyway (a window is
  // W ≥ 8 steps per worker, StragglerDetector::WindowForWorkers).
  static constexpr absl::Duration kDecisionInterval = absl::Milliseconds(500);
  // Switches kept per shard for the status and the run report. The policy's hysteresis and
  // confirmation make switches rare (a handful per run); the bound only keeps a flapping policy
  // from growing the status without limit.
  static constexpr size_t kSwitchHistory = 64;

  // `job` gives the mode (AUTO runs the policy, any other mode is passed through), G and the
  // pinned shards. `clock` is not owned. `metrics` may be null (counts nothing).
  ModeController(const v1::JobSpec& job, Clock* clock, ModeControlMetrics* metrics = nullptr);

  // A member's step report: its compute-only time feeds the straggler detector (waits would even
  // out under sync and hide the culprit; docs/design.md §6), pull + push its communication
  // estimate, its training loss the LossGuard (AUTO jobs). Reports without a positive compute
  // time are ignored.
  void AddStep(int32_t worker, const v1::StepReport& step);
  // The worker left (or is no longer a member): its samples are forgotten.
  void RemoveWorker(int32_t worker);
  // The detector's current verdicts on every worker it has samples of.
  Assessment Assess() const;

  // Modes a previous life of the coordinator told the shards (progress file): a shard connecting
  // for the first time in this life resumes its mode instead of the job's initial one.
  void RestoreModes(const std::map<int32_t, v1::Mode>& modes);
  // The shard connected (first time or again); returns the mode to put in its assignment. The
  // first connection fixes the mode: a restored one, else the job's (AUTO: the shard's pin, else
  // sync); a reconnecting shard keeps the mode it was told last.
  v1::Mode ConnectShard(int32_t shard);
  // The shard's session ended; it is left out of decisions until it connects again.
  void DisconnectShard(int32_t shard);
  // What the shard measured staleness to cost on its slice (its latest report). gba's goodput is
  // priced with the whole model's cost, StalenessCost::Combine over the slices of the shards the
  // policy decides for (not pinned), the same for each of them.
  void SetStalenessCost(int32_t shard, const StalenessCost& cost);

  // One round over the connected shards of an AUTO job, for the members `loads` (worker id and
  // local batch). `elapsed_seconds` (the job's clock) stamps the decision status and times the
  // LossGuard's back-off. A shard whose policy says switch, confirmed by a second independent
  // window, gets a command; its mode is taken as switched when the command is returned. When the
  // LossGuard trips, every policy shard in gba is sent back to sync at once (no dwell, no
  // confirmation: the rise is significant, and it compounds while it lasts), and no policy
  // shard enters gba again before the guard allows it.
  ModeRound Decide(const std::vector<WorkerLoad>& loads, double elapsed_seconds);

  // The mode each known shard was last told, by shard id (for the progress file).
  std::map<int32_t, v1::Mode> Modes() const;
  // The shard's last verdict, last switch, switch count and switch history (zeros for an
  // unknown shard).
  void FillShardStatus(int32_t shard, v1::ShardStatus& status) const;

 private:
  struct Shard {
    bool connected = false;
    v1::Mode mode = v1::MODE_UNSPECIFIED;  // what the shard was last told
    std::unique_ptr<ModePolicy> policy;    // AUTO jobs only
    SwitchConfirmation confirmation;
    StalenessCost staleness_cost;
    v1::ModeDecisionStatus last_decision;
    v1::ModeDecisionStatus last_switch;
    int32_t switches = 0;
    std::deque<v1::ModeDecisionStatus> switch_history;  // the last kSwitchHistory switches
  };

  // Runs the shard's policy and confirmation for one round; true when it switches.
  bool DecideShard(int32_t id, Shard& shard, const Assessment& assessment,
                   const std::vector<WorkerLoad>& loads, const StalenessCost& cost,
                   double elapsed_seconds);
  // A switch the controller makes on its own (the LossGuard's), recorded as a decision.
  void ForceSwitch(int32_t id, Shard& shard, v1::Mode mode, absl::string_view reason,
                   const std::string& explanation, double elapsed_seconds);
  // Applies the switch shard.last_decision recommends: mode, policy dwell, count, history.
  void CommitSwitch(int32_t id, Shard& shard);
  // Whether the shard is the policy's to move (AUTO, connected, not pinned).
  static bool Managed(const Shard& shard);

  const v1::JobSpec job_;
  Clock* const clock_;
  ModeControlMetrics* const metrics_;
  StragglerDetector detector_;
  LossGuard loss_guard_;
  std::map<int32_t, Shard> shards_;
  std::map<int32_t, v1::Mode> restored_modes_;
  absl::Time last_round_ = absl::InfinitePast();
};

}  // namespace syncopate::coordinator

#endif  // SYNCOPATE_LIBS_COORDINATOR_MODE_CONTROLLER_H_
