#include "libs/coordinator/mode_controller.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"
#include "libs/common/mode_rules.h"

namespace syncopate::coordinator {
namespace {

class NoOpModeControlMetrics final : public ModeControlMetrics {
 public:
  void InitModePolicy(int) override {}
  void CountDecision(int, const std::string&) override {}
  void CountSwitch(int, const std::string&) override {}
  void SetPrediction(int, double, double, double) override {}
};

// ±inf (a difference with no measured noise) does not survive JSON; keep its sign.
double FiniteZ(double z) { return std::isfinite(z) ? z : (z > 0 ? 1e9 : -1e9); }

}  // namespace

v1::SetMode SetModeCommand::ToProto() const {
  v1::SetMode message;
  message.set_mode(mode);
  message.set_reason(reason);
  message.set_keep_rollback_point(keep_rollback_point);
  message.set_roll_back(roll_back);
  return message;
}

ModeControlMetrics* ModeControlMetrics::NoOp() {
  static auto* const kNoOp = new NoOpModeControlMetrics();
  return kNoOp;
}

ModeController::ModeController(const v1::JobSpec& job, Clock* clock, ModeControlMetrics* metrics)
    : job_(job),
      clock_(clock),
      metrics_(metrics != nullptr ? metrics : ModeControlMetrics::NoOp()),
      detector_(clock),
      loss_guard_(static_cast<int64_t>(StragglerDetector::WindowForWorkers(job.num_workers())) *
                  std::max(1, job.num_workers())) {}

void ModeController::AddStep(int32_t worker, const v1::StepReport& step) {
  if (step.compute_seconds() <= 0) return;
  detector_.AddStep(worker, step.compute_seconds()).IgnoreError();
  detector_.AddCommunication(worker, std::max(0.0, step.pull_seconds() + step.push_seconds()))
      .IgnoreError();
  if (job_.mode() == v1::MODE_AUTO) loss_guard_.Add(step.loss());
}

bool ModeController::Managed(const Shard& shard) {
  return shard.policy != nullptr && shard.connected && !shard.policy->pinned().has_value();
}

void ModeController::RemoveWorker(int32_t worker) { detector_.RemoveWorker(worker); }

Assessment ModeController::Assess() const { return detector_.Assess(); }

void ModeController::RestoreModes(const std::map<int32_t, v1::Mode>& modes) {
  restored_modes_ = modes;
}

v1::Mode ModeController::ConnectShard(int32_t id) {
  Shard& shard = shards_[id];
  shard.connected = true;
  if (shard.mode != v1::MODE_UNSPECIFIED) return shard.mode;  // a reconnection keeps its mode
  auto restored = restored_modes_.find(id);
  auto pin = job_.pinned_shard_modes().find(id);
  const bool pinned = pin != job_.pinned_shard_modes().end();
  if (restored != restored_modes_.end()) {
    shard.mode = restored->second;  // a restarted coordinator keeps the shard's mode
  } else if (job_.mode() == v1::MODE_AUTO) {
    // AUTO starts in sync (or the shard's pinned mode); the policy moves shards to gba when
    // stragglers make it pay.
    shard.mode = pinned ? pin->second : v1::MODE_SYNC;
  } else {
    shard.mode = job_.mode();
  }
  if (job_.mode() == v1::MODE_AUTO) {
    shard.policy = std::make_unique<ModePolicy>(clock_, job_.global_batch());
    // A pin holds in every life of the coordinator, restored or not.
    if (pinned) shard.policy->SetPinned(pin->second).IgnoreError();
    shard.policy->NotifySwitched(shard.mode);
    metrics_->InitModePolicy(id);
  }
  return shard.mode;
}

void ModeController::SetStalenessCost(int32_t id, const StalenessCost& cost) {
  auto it = shards_.find(id);
  if (it != shards_.end()) it->second.staleness_cost = cost;
}

void ModeController::DisconnectShard(int32_t id) {
  auto it = shards_.find(id);
  if (it != shards_.end()) it->second.connected = false;
}

ModeRound ModeController::Decide(const std::vector<WorkerLoad>& loads, double elapsed_seconds) {
  ModeRound round;
  const absl::Time now = clock_->Now();
  if (job_.mode() != v1::MODE_AUTO || now - last_round_ < kDecisionInterval) return round;
  last_round_ = now;
  round.decided = true;
  round.assessment = detector_.Assess();
  if (loads.empty()) return round;
  // Every worker pulls from and pushes to every shard, so a shard left in sync keeps the barrier
  // for all of them, and gba pays off only where all the policy's shards leave sync together.
  // They are all priced by the staleness cost of the whole model, not of their own slice:
  // per-slice costs are noisier estimates of one quantity, and on 8 shards they split the
  // decision (simulated, 64 workers, no straggler: 7 shards went to gba, one stayed in sync on
  // its slice's veto, and the job ran at sync's speed with gba's staleness). The throughput
  // prediction is the same for every shard already (the same workers and detector).
  std::vector<StalenessCost> slices;
  for (const auto& [id, shard] : shards_) {
    if (Managed(shard)) {
      slices.push_back(shard.staleness_cost);
    }
  }
  const StalenessCost whole_model = StalenessCost::Combine(slices);

  // The LossGuard first: a significant rise of the training loss in gba sends every policy
  // shard back to sync now, and this round decides nothing else.
  loss_guard_.SetWindow(
      static_cast<int64_t>(StragglerDetector::WindowForWorkers(static_cast<int>(loads.size()))) *
      static_cast<int64_t>(loads.size()));
  const std::optional<LossGuard::Verdict> verdict = loss_guard_.Check();
  if (verdict.has_value()) VLOG(1) << "loss guard: " << verdict->explanation;
  if (verdict.has_value() && verdict->tripped) {
    loss_guard_.BackOff(elapsed_seconds);
    const std::string explanation =
        absl::StrFormat("%s; gba held back until the job has run %.1f s (trip %d)",
                        verdict->explanation, loss_guard_.retry_at_seconds(), loss_guard_.trips());
    for (auto& [id, shard] : shards_) {
      if (!Managed(shard) || shard.mode != v1::MODE_GBA) continue;
      ForceSwitch(id, shard, v1::MODE_SYNC, kReasonTrainingLossRose, explanation, elapsed_seconds);
      round.commands.push_back({.shard = id,
                                .mode = shard.mode,
                                .reason = std::string(kReasonTrainingLossRose),
                                .roll_back = true});
    }
    loss_guard_.LeaveGba();
    return round;
  }

  for (auto& [id, shard] : shards_) {
    if (shard.policy == nullptr || !shard.connected) continue;
    if (!DecideShard(id, shard, round.assessment, loads, whole_model, elapsed_seconds)) continue;
    // Entering gba under the policy: the shard keeps the point the LossGuard may send it back
    // to (a pinned shard is never rolled back, so it keeps none).
    round.commands.push_back({.shard = id,
                              .mode = shard.mode,
                              .reason = shard.last_switch.reason(),
                              .keep_rollback_point = shard.mode == v1::MODE_GBA && Managed(shard)});
  }

  // The guard follows the job: in gba while any policy shard is.
  const bool in_gba = std::any_of(shards_.begin(), shards_.end(), [](const auto& entry) {
    return Managed(entry.second) && entry.second.mode == v1::MODE_GBA;
  });
  if (in_gba && !loss_guard_.in_gba()) loss_guard_.EnterGba();
  if (!in_gba && loss_guard_.in_gba()) loss_guard_.LeaveGba();
  return round;
}

void ModeController::ForceSwitch(int32_t id, Shard& shard, v1::Mode mode, absl::string_view reason,
                                 const std::string& explanation, double elapsed_seconds) {
  v1::ModeDecisionStatus& d = shard.last_decision;
  d.set_current(shard.mode);
  d.set_recommended(mode);
  d.set_switched(true);
  d.set_close_call(false);
  d.set_reason(std::string(reason));
  d.set_explanation(explanation);
  d.set_seconds(elapsed_seconds);
  metrics_->CountDecision(id, d.reason());
  // A candidate the policy was confirming was measured before the switch.
  shard.confirmation = SwitchConfirmation();
  CommitSwitch(id, shard);
}

void ModeController::CommitSwitch(int32_t id, Shard& shard) {
  const v1::ModeDecisionStatus& d = shard.last_decision;
  LOG(INFO) << "shard " << id << " switches " << ModeName(shard.mode) << " -> "
            << ModeName(d.recommended()) << " (" << d.reason() << "): " << d.explanation();
  shard.mode = d.recommended();
  shard.policy->NotifySwitched(shard.mode);
  ++shard.switches;
  shard.last_switch = d;
  shard.switch_history.push_back(d);
  if (shard.switch_history.size() > kSwitchHistory) shard.switch_history.pop_front();
  metrics_->CountSwitch(id, d.reason());
}

bool ModeController::DecideShard(int32_t id, Shard& shard, const Assessment& assessment,
                                 const std::vector<WorkerLoad>& loads, const StalenessCost& cost,
                                 double elapsed_seconds) {
  absl::StatusOr<ModeDecision> decision = shard.policy->Decide(assessment, shard.mode, loads, cost);
  if (!decision.ok()) {
    LOG(WARNING) << "mode policy for shard " << id << ": " << decision.status();
    return false;
  }
  if (decision->recommended == v1::MODE_GBA && shard.mode != v1::MODE_GBA &&
      !decision->reason.empty() && decision->reason != kReasonPinned &&
      !loss_guard_.GbaAllowed(elapsed_seconds)) {
    decision->recommended = shard.mode;
    decision->switch_now = false;
    decision->reason = std::string(kReasonTrainingLossBackoff);
    absl::StrAppendFormat(&decision->explanation,
                          " [held: the training loss rose in gba at the last try; gba waits until "
                          "the job has run %.1f s]",
                          loss_guard_.retry_at_seconds());
  }
  shard.confirmation.Confirm(*decision, assessment, loads);
  v1::ModeDecisionStatus& d = shard.last_decision;
  const std::string previous_reason = d.reason();
  d.set_current(decision->current);
  d.set_recommended(decision->recommended);
  d.set_switched(decision->switch_now);
  d.set_close_call(decision->close_call);
  d.set_reason(decision->reason);
  d.set_explanation(decision->explanation);
  d.set_sync_samples_per_second(decision->sync_samples_per_second);
  d.set_gba_samples_per_second(decision->gba_samples_per_second);
  d.set_gba_staleness(decision->gba_staleness);
  d.set_gba_efficiency(decision->gba_efficiency);
  d.set_z(FiniteZ(decision->z));
  d.set_goodput_z(FiniteZ(decision->goodput_z));
  d.set_seconds(elapsed_seconds);
  d.clear_stragglers();
  for (int32_t w : decision->stragglers) d.add_stragglers(w);
  metrics_->CountDecision(id, decision->reason);
  if (decision->sync_samples_per_second > 0) {
    metrics_->SetPrediction(id, decision->sync_samples_per_second, decision->gba_samples_per_second,
                            decision->gba_efficiency);
  }
  if (!decision->switch_now) {
    // Log changes of verdict and close calls, not every identical non-decision.
    if (decision->reason != previous_reason || decision->close_call) {
      LOG(INFO) << "shard " << id << " stays " << ModeName(shard.mode) << " (" << decision->reason
                << "): " << decision->explanation;
    }
    return false;
  }
  CommitSwitch(id, shard);
  return true;
}

std::map<int32_t, v1::Mode> ModeController::Modes() const {
  std::map<int32_t, v1::Mode> modes;
  for (const auto& [id, shard] : shards_) modes[id] = shard.mode;
  return modes;
}

void ModeController::FillShardStatus(int32_t id, v1::ShardStatus& status) const {
  auto it = shards_.find(id);
  if (it == shards_.end()) return;
  *status.mutable_last_decision() = it->second.last_decision;
  *status.mutable_last_switch() = it->second.last_switch;
  status.set_switches(it->second.switches);
  for (const v1::ModeDecisionStatus& d : it->second.switch_history) {
    *status.add_switch_history() = d;
  }
}

}  // namespace syncopate::coordinator
