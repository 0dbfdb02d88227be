#include "libs/coordinator/mode_controller.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "libs/common/clock.h"
#include "tests/unit/straggler/simulated_cluster.h"

namespace syncopate::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

// 4 workers with local batch 100, G = 400, 0.1 s of communication per step: the scenarios of
// tests/unit/straggler/mode_policy_test.cc, driven through the controller instead.
constexpr int kWorkers = 4;
const std::vector<WorkerLoad> kLoads = {{0, 100}, {1, 100}, {2, 100}, {3, 100}};

v1::JobSpec Job(v1::Mode mode) {
  v1::JobSpec job;
  job.set_mode(mode);
  job.set_global_batch(400);
  job.set_num_shards(2);
  job.set_num_workers(kWorkers);
  return job;
}

class RecordingMetrics : public ModeControlMetrics {
 public:
  void InitModePolicy(int shard) override { initialised.push_back(shard); }
  void CountDecision(int shard, const std::string& reason) override {
    ++decisions[{shard, reason}];
  }
  void CountSwitch(int shard, const std::string& reason) override { ++switches[{shard, reason}]; }
  void SetPrediction(int shard, double, double, double gba_efficiency) override {
    efficiency[shard] = gba_efficiency;
  }

  std::vector<int> initialised;
  std::map<std::pair<int, std::string>, int> decisions;
  std::map<std::pair<int, std::string>, int> switches;
  std::map<int, double> efficiency;
};

class ModeControllerTest : public ::testing::Test {
 protected:
  void Create(const v1::JobSpec& job) {
    controller_ = std::make_unique<ModeController>(job, &clock_, &metrics_);
  }

  // One step per worker at `base[i]` seconds of compute, with simulated_cluster.h's cycled noise
  // (a full window's median is the base time and its MAD is nonzero); the clock moves one second
  // first, so samples are strictly after anything decided before the call.
  void Step(const std::vector<double>& base, double loss = 0) {
    clock_.Advance(absl::Seconds(1));
    for (size_t i = 0; i < base.size(); ++i) {
      v1::StepReport step;
      step.set_examples(100);
      step.set_loss(static_cast<float>(loss * (1 + kNoise[(step_ + i) % kNoise.size()])));
      step.set_compute_seconds(base[i] * (1 + kNoise[(step_ + i) % kNoise.size()]));
      step.set_pull_seconds(0.05);
      step.set_push_seconds(0.05);
      controller_->AddStep(static_cast<int32_t>(i), step);
    }
    ++step_;
  }
  void Steps(int n, const std::vector<double>& base, double loss = 0) {
    for (int k = 0; k < n; ++k) Step(base, loss);
  }

  FakeClock clock_;
  RecordingMetrics metrics_;
  std::unique_ptr<ModeController> controller_;
  size_t step_ = 0;
};

const std::vector<double> kHealthy = {1.0, 1.0, 1.0, 1.0};
const std::vector<double> kOneFourTimesSlower = {1.0, 1.0, 1.0, 4.0};

TEST_F(ModeControllerTest, FixedModesPassThroughAndAreNeverDecided) {
  Create(Job(v1::MODE_GBA));
  EXPECT_EQ(controller_->ConnectShard(0), v1::MODE_GBA);
  EXPECT_EQ(controller_->ConnectShard(1), v1::MODE_GBA);
  Steps(8, kOneFourTimesSlower);
  const ModeRound round = controller_->Decide(kLoads, 10);
  EXPECT_FALSE(round.decided);
  EXPECT_THAT(round.commands, IsEmpty());
  EXPECT_THAT(metrics_.initialised, IsEmpty());
  EXPECT_THAT(controller_->Modes(), ElementsAre(Pair(0, v1::MODE_GBA), Pair(1, v1::MODE_GBA)));
}

TEST_F(ModeControllerTest, AutoStartsInSyncOrThePinAndInitialisesCounters) {
  v1::JobSpec job = Job(v1::MODE_AUTO);
  (*job.mutable_pinned_shard_modes())[1] = v1::MODE_GBA;
  Create(job);
  EXPECT_EQ(controller_->ConnectShard(0), v1::MODE_SYNC);
  EXPECT_EQ(controller_->ConnectShard(1), v1::MODE_GBA);
  EXPECT_THAT(metrics_.initialised, ElementsAre(0, 1));
}

// The shards' measured staleness costs reach the policy as the whole model's: the decision
// status and the efficiency gauge of every shard carry it, and a cost high enough keeps a 4x
// straggler's shards in sync, all of them, although only shard 0 measured one (shard 1's
// slice is unmeasured and left out of the sum). Shard 7 is not connected: its cost is ignored.
TEST_F(ModeControllerTest, TheWholeModelsStalenessCostPricesEveryShardsDecision) {
  Create(Job(v1::MODE_AUTO));
  controller_->ConnectShard(0);
  controller_->ConnectShard(1);
  controller_->SetStalenessCost(0, StalenessCost{.versions = 29,
                                                 .velocity_squared = 1.0,
                                                 .velocity_drift_squared = 9.0,
                                                 .velocity_drift_squared_standard_error = 0.1});
  controller_->SetStalenessCost(7, StalenessCost{.versions = 1, .velocity_squared = 1.0});
  for (double t : {8.0, 16.0}) {
    Steps(8, kOneFourTimesSlower);
    controller_->Decide(kLoads, t);
  }
  for (int shard : {0, 1}) {
    v1::ShardStatus status;
    controller_->FillShardStatus(shard, status);
    // E = E|v|² / (E|v|² + τ²·D²) at the policy's predicted staleness τ.
    const double tau = status.last_decision().gba_staleness();
    EXPECT_GT(tau, 0.5);
    const double efficiency = 1.0 / (1.0 + tau * tau * 9.0);
    EXPECT_NEAR(status.last_decision().gba_efficiency(), efficiency, 1e-9) << shard;
    EXPECT_EQ(status.last_decision().recommended(), v1::MODE_SYNC) << shard;
    EXPECT_EQ(status.last_decision().reason(), "staleness_cost_exceeds_gain") << shard;
    EXPECT_LT(status.last_decision().goodput_z(), -2) << shard;
    EXPECT_NEAR(metrics_.efficiency[shard], efficiency, 1e-9) << shard;
  }
  EXPECT_THAT(controller_->Modes(), ElementsAre(Pair(0, v1::MODE_SYNC), Pair(1, v1::MODE_SYNC)));
}

// Two measured slices price gba together: their squared norms add (E = ΣE|v|² / (ΣE|v|² +
// τ²·ΣD²)), so a slice whose own cost would veto gba (shard 1: D² = 9) is outweighed by a
// larger slice that measured little drift (shard 0: E|v|² = 20, D² = 0.1), and both shards
// leave sync together.
TEST_F(ModeControllerTest, MeasuredSlicesAddUpToTheWholeModelsCost) {
  Create(Job(v1::MODE_AUTO));
  controller_->ConnectShard(0);
  controller_->ConnectShard(1);
  controller_->SetStalenessCost(0, StalenessCost{.versions = 29,
                                                 .velocity_squared = 20.0,
                                                 .velocity_drift_squared = 0.1,
                                                 .velocity_drift_squared_standard_error = 0.01});
  controller_->SetStalenessCost(1, StalenessCost{.versions = 12,
                                                 .velocity_squared = 1.0,
                                                 .velocity_drift_squared = 9.0,
                                                 .velocity_drift_squared_standard_error = 0.1});
  for (double t : {8.0, 16.0}) {
    Steps(8, kOneFourTimesSlower);
    controller_->Decide(kLoads, t);
  }
  v1::ShardStatus status;
  controller_->FillShardStatus(1, status);
  const double tau = status.last_decision().gba_staleness();
  EXPECT_NEAR(status.last_decision().gba_efficiency(), 21.0 / (21.0 + tau * tau * 9.1), 1e-9);
  EXPECT_THAT(controller_->Modes(), ElementsAre(Pair(0, v1::MODE_GBA), Pair(1, v1::MODE_GBA)));
}

// The straggler scenario end to end: a 4x straggler under 3% step noise is a decisive verdict
// (z far above SwitchConfirmation::kDecisiveZ x sqrt(W)), so its first window switches (one
// command per shard); a recovered straggler, which is not a throughput verdict, brings the shard
// back to sync only after a second, independent window.
TEST_F(ModeControllerTest, ADecisiveStragglerSwitchesToGbaAtOnceAndRecoveryReturnsToSyncConfirmed) {
  Create(Job(v1::MODE_AUTO));
  controller_->ConnectShard(0);
  Steps(8, kOneFourTimesSlower);
  ModeRound round = controller_->Decide(kLoads, 8);
  ASSERT_TRUE(round.decided);
  EXPECT_THAT(round.assessment.Stragglers(), ElementsAre(3));
  ASSERT_EQ(round.commands.size(), 1u);
  EXPECT_EQ(round.commands[0].shard, 0);
  EXPECT_EQ(round.commands[0].mode, v1::MODE_GBA);
  EXPECT_EQ(round.commands[0].reason, kReasonStragglerDetected);
  EXPECT_THAT(controller_->Modes(), ElementsAre(Pair(0, v1::MODE_GBA)));
  v1::ShardStatus status;
  controller_->FillShardStatus(0, status);
  EXPECT_EQ(status.switches(), 1);
  EXPECT_TRUE(status.last_switch().switched());
  EXPECT_EQ(status.last_switch().current(), v1::MODE_SYNC);
  EXPECT_EQ(status.last_switch().recommended(), v1::MODE_GBA);
  EXPECT_THAT(status.last_switch().stragglers(), ElementsAre(3));
  EXPECT_THAT(status.last_switch().explanation(), ::testing::HasSubstr("decisive"));
  EXPECT_EQ((metrics_.switches[{0, std::string(kReasonStragglerDetected)}]), 1);
  EXPECT_EQ((metrics_.decisions[{0, std::string(kReasonAwaitingConfirmation)}]), 0);

  // Recovery: two fresh healthy windows (the policy ignores windows straddling the switch).
  Steps(8, kHealthy);
  EXPECT_THAT(controller_->Decide(kLoads, 16).commands, IsEmpty());
  Steps(8, kHealthy);
  round = controller_->Decide(kLoads, 24);
  ASSERT_EQ(round.commands.size(), 1u);
  EXPECT_EQ(round.commands[0].mode, v1::MODE_SYNC);
  EXPECT_EQ(round.commands[0].reason, kReasonStragglersRecovered);
  status.Clear();
  controller_->FillShardStatus(0, status);
  EXPECT_EQ(status.switches(), 2);
  // Both switches are in the history, oldest first, with their time and reason.
  ASSERT_EQ(status.switch_history_size(), 2);
  EXPECT_EQ(status.switch_history(0).seconds(), 8);
  EXPECT_EQ(status.switch_history(0).recommended(), v1::MODE_GBA);
  EXPECT_EQ(status.switch_history(1).reason(), kReasonStragglersRecovered);
}

// The LossGuard: the switch into gba asks the shards to keep a rollback point; a training loss
// significantly above the level the last sync window reached sends every policy shard back to
// sync, rolled back, with no dwell and (a rise this clear: z above SwitchConfirmation::kDecisiveZ)
// at once, without waiting for a second window; the policy may not enter gba again before the job
// has run twice as long as at the trip, and then does (keeping a new point). The 4x straggler is
// decisive, so each entry into gba takes one window.
TEST_F(ModeControllerTest, ALossRiseInGbaRollsBackToSyncAndHoldsGbaBackUntilTheRunDoubles) {
  Create(Job(v1::MODE_AUTO));
  controller_->ConnectShard(0);
  controller_->ConnectShard(1);
  Steps(8, kOneFourTimesSlower, 1.0);
  ModeRound round = controller_->Decide(kLoads, 8);
  ASSERT_EQ(round.commands.size(), 2u);
  for (const SetModeCommand& command : round.commands) {
    EXPECT_EQ(command.mode, v1::MODE_GBA);
    EXPECT_TRUE(command.keep_rollback_point);
    EXPECT_FALSE(command.roll_back);
    EXPECT_TRUE(command.ToProto().keep_rollback_point());
  }

  // One window of W = 8 steps x 4 workers at twice the loss: a trip.
  Steps(8, kOneFourTimesSlower, 2.0);
  round = controller_->Decide(kLoads, 20);
  ASSERT_EQ(round.commands.size(), 2u);
  for (const SetModeCommand& command : round.commands) {
    EXPECT_EQ(command.mode, v1::MODE_SYNC);
    EXPECT_EQ(command.reason, kReasonTrainingLossRose);
    EXPECT_TRUE(command.roll_back);
    EXPECT_TRUE(command.ToProto().roll_back());
  }
  EXPECT_THAT(controller_->Modes(), ElementsAre(Pair(0, v1::MODE_SYNC), Pair(1, v1::MODE_SYNC)));
  v1::ShardStatus status;
  controller_->FillShardStatus(1, status);
  EXPECT_EQ(status.last_switch().reason(), kReasonTrainingLossRose);
  EXPECT_THAT(status.last_switch().explanation(), ::testing::HasSubstr("until the job has run 40"));
  EXPECT_EQ((metrics_.switches[{1, std::string(kReasonTrainingLossRose)}]), 1);

  // The straggler is still there, but gba waits until elapsed 40 = 2 x 20.
  for (double t : {24.0, 28.0, 32.0, 36.0}) {
    Steps(4, kOneFourTimesSlower, 1.0);
    EXPECT_THAT(controller_->Decide(kLoads, t).commands, IsEmpty()) << t;
  }
  status.Clear();
  controller_->FillShardStatus(0, status);
  EXPECT_EQ(status.last_decision().reason(), kReasonTrainingLossBackoff);
  EXPECT_GT((metrics_.decisions[{0, std::string(kReasonTrainingLossBackoff)}]), 0);
  Steps(8, kOneFourTimesSlower, 1.0);
  round = controller_->Decide(kLoads, 40);
  ASSERT_EQ(round.commands.size(), 2u);
  EXPECT_EQ(round.commands[0].mode, v1::MODE_GBA);
  EXPECT_TRUE(round.commands[0].keep_rollback_point);
}

// A pinned shard is never rolled back, so a switch into its pinned gba keeps no rollback point
// (it would hold a copy of the shard's state for the rest of the job).
TEST_F(ModeControllerTest, APinnedShardEnteringGbaKeepsNoRollbackPoint) {
  v1::JobSpec job = Job(v1::MODE_AUTO);
  (*job.mutable_pinned_shard_modes())[1] = v1::MODE_GBA;
  Create(job);
  controller_->RestoreModes({{1, v1::MODE_SYNC}});
  EXPECT_EQ(controller_->ConnectShard(1), v1::MODE_SYNC);
  const ModeRound round = controller_->Decide(kLoads, 1);
  ASSERT_EQ(round.commands.size(), 1u);
  EXPECT_EQ(round.commands[0].mode, v1::MODE_GBA);
  EXPECT_EQ(round.commands[0].reason, kReasonPinned);
  EXPECT_FALSE(round.commands[0].keep_rollback_point);
}

// The controller gives exactly the verdicts of ModePolicy + SwitchConfirmation wired by hand
// (what the coordinator did before the controller existed), round by round.
TEST_F(ModeControllerTest, VerdictsMatchThePolicyAndConfirmationWiredByHand) {
  Create(Job(v1::MODE_AUTO));
  controller_->ConnectShard(0);
  ModePolicy policy(&clock_, 400);
  SwitchConfirmation confirmation;
  v1::Mode mode = v1::MODE_SYNC;
  policy.NotifySwitched(mode);
  const std::vector<std::vector<double>> phases = {kHealthy, kOneFourTimesSlower,
                                                   kOneFourTimesSlower, kHealthy, kHealthy};
  int rounds = 0;
  for (const std::vector<double>& phase : phases) {
    for (int k = 0; k < 8; k += 2) {
      Steps(2, phase);
      ModeDecision expected = *policy.Decide(controller_->Assess(), mode, kLoads);
      confirmation.Confirm(expected, controller_->Assess(), kLoads);
      const ModeRound round = controller_->Decide(kLoads, rounds++);
      ASSERT_TRUE(round.decided);
      v1::ShardStatus status;
      controller_->FillShardStatus(0, status);
      EXPECT_EQ(status.last_decision().reason(), expected.reason) << "round " << rounds;
      EXPECT_EQ(status.last_decision().recommended(), expected.recommended);
      EXPECT_EQ(status.last_decision().switched(), expected.switch_now);
      EXPECT_EQ(round.commands.size(), expected.switch_now ? 1u : 0u);
      if (expected.switch_now) {
        mode = expected.recommended;
        policy.NotifySwitched(mode);
      }
    }
  }
  EXPECT_THAT(controller_->Modes(), ElementsAre(Pair(0, mode)));
  v1::ShardStatus status;
  controller_->FillShardStatus(0, status);
  EXPECT_EQ(status.switches(), 2);  // to gba and back
}

TEST_F(ModeControllerTest, DecidesAtMostOncePerInterval) {
  Create(Job(v1::MODE_AUTO));
  controller_->ConnectShard(0);
  Steps(8, kHealthy);
  EXPECT_TRUE(controller_->Decide(kLoads, 0).decided);
  clock_.Advance(ModeController::kDecisionInterval - absl::Milliseconds(1));
  EXPECT_FALSE(controller_->Decide(kLoads, 0).decided);
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_TRUE(controller_->Decide(kLoads, 0).decided);
}

TEST_F(ModeControllerTest, WithoutMembersOrConnectedShardsNothingIsJudged) {
  Create(Job(v1::MODE_AUTO));
  controller_->ConnectShard(0);
  Steps(16, kOneFourTimesSlower);
  ModeRound round = controller_->Decide({}, 0);
  EXPECT_TRUE(round.decided);
  EXPECT_THAT(round.assessment.Stragglers(), ElementsAre(3));
  EXPECT_TRUE(metrics_.decisions.empty());

  controller_->DisconnectShard(0);
  clock_.Advance(absl::Seconds(1));
  round = controller_->Decide(kLoads, 0);
  EXPECT_THAT(round.commands, IsEmpty());
  EXPECT_TRUE(metrics_.decisions.empty());
}

TEST_F(ModeControllerTest, ADepartedWorkerIsForgottenAndUnknownLoadsMeanInsufficientData) {
  Create(Job(v1::MODE_AUTO));
  controller_->ConnectShard(0);
  Steps(8, kOneFourTimesSlower);
  controller_->RemoveWorker(3);
  EXPECT_EQ(controller_->Assess().Find(3), nullptr);
  controller_->Decide(kLoads, 0);
  v1::ShardStatus status;
  controller_->FillShardStatus(0, status);
  EXPECT_EQ(status.last_decision().reason(), kReasonInsufficientData);
}

TEST_F(ModeControllerTest, StepsWithoutComputeTimeAreIgnored) {
  Create(Job(v1::MODE_AUTO));
  v1::StepReport step;
  step.set_examples(10);
  controller_->AddStep(7, step);
  EXPECT_EQ(controller_->Assess().Find(7), nullptr);
}

TEST_F(ModeControllerTest, RestoredModesResumeAndReconnectionsKeepTheLastMode) {
  v1::JobSpec job = Job(v1::MODE_AUTO);
  (*job.mutable_pinned_shard_modes())[1] = v1::MODE_SYNC;
  Create(job);
  controller_->RestoreModes({{0, v1::MODE_GBA}, {1, v1::MODE_SYNC}});
  EXPECT_EQ(controller_->ConnectShard(0), v1::MODE_GBA);
  EXPECT_EQ(controller_->ConnectShard(1), v1::MODE_SYNC);
  controller_->DisconnectShard(0);
  EXPECT_EQ(controller_->ConnectShard(0), v1::MODE_GBA);

  // The restored shard 1 is still pinned: a straggler does not move it; shard 0 (restored in
  // gba) is judged by the model.
  Steps(16, kOneFourTimesSlower);
  controller_->Decide(kLoads, 0);
  v1::ShardStatus status;
  controller_->FillShardStatus(1, status);
  EXPECT_EQ(status.last_decision().reason(), kReasonPinned);
  EXPECT_EQ(status.last_decision().recommended(), v1::MODE_SYNC);
  status.Clear();
  controller_->FillShardStatus(0, status);
  EXPECT_EQ(status.last_decision().recommended(), v1::MODE_GBA);
  EXPECT_FALSE(status.last_decision().switched());
}

TEST_F(ModeControllerTest, UnknownShardsHaveAnEmptyStatus) {
  Create(Job(v1::MODE_AUTO));
  v1::ShardStatus status;
  controller_->FillShardStatus(5, status);
  EXPECT_EQ(status.switches(), 0);
  EXPECT_FALSE(status.has_last_decision());
  EXPECT_THAT(controller_->Modes(), IsEmpty());
}

TEST(ModeControlMetrics, NoOpCountsNothingAndIsShared) {
  EXPECT_EQ(ModeControlMetrics::NoOp(), ModeControlMetrics::NoOp());
  ModeControlMetrics::NoOp()->CountDecision(0, "pinned");  // must not crash
}

}  // namespace
}  // namespace syncopate::coordinator
