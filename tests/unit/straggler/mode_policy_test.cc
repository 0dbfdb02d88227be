#include "libs/straggler/mode_policy.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "simulated_cluster.h"

namespace syncopate {
namespace {

using ::syncopate::v1::MODE_ASYNC;
using ::syncopate::v1::MODE_AUTO;
using ::syncopate::v1::MODE_GBA;
using ::syncopate::v1::MODE_SYNC;
using ::syncopate::v1::MODE_UNSPECIFIED;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Every scenario: G = 400 samples per update, 4 workers with local batch G/N = 100, 0.1 s of
// communication per step. Expected throughputs were worked out by hand from the formulas in
// mode_policy.cc (and cross-checked with an independent script).
constexpr int64_t kGlobalBatch = 400;
const std::vector<WorkerLoad> kLoads = {{0, 100}, {1, 100}, {2, 100}, {3, 100}};
const std::vector<double> kComm = {0.1, 0.1, 0.1, 0.1};
const std::vector<double> kHealthy = {1.0, 1.0, 1.0, 1.0};
const std::vector<double> kOneFourTimesSlower = {1.0, 1.0, 1.0, 4.0};

class ModePolicyTest : public ::testing::Test {
 protected:
  ModeDecision Decide(v1::Mode current, const StalenessCost& cost = {}) {
    absl::StatusOr<ModeDecision> d =
        policy_.Decide(cluster_.detector.Assess(), current, kLoads, cost);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *d : ModeDecision{};
  }

  // A staleness cost measured over a full window, with E|v|² = 1: the efficiency at staleness τ
  // is 1 / (1 + τ²·drift).
  static StalenessCost MeasuredCost(double drift, double drift_standard_error) {
    return {.versions = 29,
            .velocity_squared = 1.0,
            .velocity_drift_squared = drift,
            .velocity_drift_squared_standard_error = drift_standard_error};
  }

  SimulatedCluster cluster_;
  ModePolicy policy_{&cluster_.clock, kGlobalBatch};
};

// (a) Equal workers: sync = 400/1.1, gba = 4·100/1.1 with every τ = 1 ≤ ι = 2: a tie.
TEST_F(ModePolicyTest, NoStragglerStaysSync) {
  policy_.NotifySwitched(MODE_SYNC);
  cluster_.Steps(8, kHealthy, kComm);
  const ModeDecision d = Decide(MODE_SYNC);
  EXPECT_EQ(d.recommended, MODE_SYNC);
  EXPECT_FALSE(d.switch_now);
  EXPECT_EQ(d.reason, "no_significant_difference");
  EXPECT_NEAR(d.sync_samples_per_second, 400 / 1.1, 1e-9);
  EXPECT_NEAR(d.gba_samples_per_second, 400 / 1.1, 1e-9);
  EXPECT_DOUBLE_EQ(d.z, 0.0);
  EXPECT_FALSE(d.close_call);
  EXPECT_EQ(d.staleness_threshold, 2);
  EXPECT_THAT(d.stragglers, IsEmpty());
  EXPECT_EQ(d.at, cluster_.clock.Now());
}

TEST_F(ModePolicyTest, InsufficientDataUntilEveryWindowIsFull) {
  policy_.NotifySwitched(MODE_SYNC);
  cluster_.Steps(7, kOneFourTimesSlower, kComm);
  ModeDecision d = Decide(MODE_SYNC);
  EXPECT_EQ(d.reason, "insufficient_data");
  EXPECT_EQ(d.recommended, MODE_SYNC);
  EXPECT_FALSE(d.switch_now);
  EXPECT_THAT(d.explanation, HasSubstr("worker 3 has 7/8 steps"));

  cluster_.Step(kOneFourTimesSlower, kComm);
  d = Decide(MODE_SYNC);
  EXPECT_EQ(d.reason, "straggler_detected");
  EXPECT_TRUE(d.switch_now);

  // A pushing worker the detector has never heard of also means insufficient data.
  absl::StatusOr<ModeDecision> unknown = policy_.Decide(
      cluster_.detector.Assess(), MODE_SYNC, {{0, 100}, {1, 100}, {2, 100}, {3, 100}, {9, 100}});
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(unknown->reason, "insufficient_data");
  EXPECT_FALSE(unknown->switch_now);
}

// (b) One 4× straggler. sync = 400/4.1 (the barrier waits for worker 3). gba: the healthy three
// produce 3·100/1.1 samples/s, worker 3 100/4.1; the shard bumps (300/1.1 + 100/4.1)/400
// versions/s, so worker 3's cycle of 4.1 s spans y = 3.045 versions: τ = 3 (w = 1/2) 95.5% of the
// time and τ = 4 (w = 1/3) otherwise, mean weight 0.4925; the healthy ones span 0.82 versions (w =
// 1).
TEST_F(ModePolicyTest, OneStragglerRecommendsGbaOnlyAfterAFullFreshWindow) {
  cluster_.Steps(8, kHealthy, kComm);
  ASSERT_EQ(Decide(MODE_SYNC).reason, "no_significant_difference");
  policy_.NotifySwitched(MODE_SYNC);  // e.g. just came back to sync: the dwell restarts

  // Worker 3 turns 4× slower. After 7 fresh steps its window still holds one pre-switch step.
  cluster_.Steps(7, kOneFourTimesSlower, kComm);
  ModeDecision d = Decide(MODE_SYNC);
  EXPECT_EQ(d.recommended, MODE_GBA);
  EXPECT_FALSE(d.switch_now);
  EXPECT_EQ(d.reason, "hold_min_dwell");
  EXPECT_THAT(d.explanation, HasSubstr("waiting for a fresh window from 4 worker(s)"));

  cluster_.Step(kOneFourTimesSlower, kComm);
  d = Decide(MODE_SYNC);
  EXPECT_EQ(d.current, MODE_SYNC);
  EXPECT_EQ(d.recommended, MODE_GBA);
  EXPECT_TRUE(d.switch_now);
  EXPECT_FALSE(d.close_call);
  EXPECT_EQ(d.reason, "straggler_detected");
  EXPECT_THAT(d.stragglers, ElementsAre(3));
  EXPECT_NEAR(d.sync_samples_per_second, 400 / 4.1, 1e-9);
  EXPECT_NEAR(d.gba_samples_per_second, 284.7376201034738, 1e-9);
  EXPECT_NEAR(d.standard_error, 1.697910822190021, 1e-9);
  EXPECT_NEAR(d.z, 110.23938480602362, 1e-6);
  EXPECT_THAT(d.explanation, HasSubstr("barrier waits for worker 3"));
  EXPECT_THAT(d.explanation, HasSubstr("switch sync -> gba"));

  // Switched: the next decision in GBA must again wait for a fresh window, and then stays.
  policy_.NotifySwitched(MODE_GBA);
  cluster_.Steps(8, kOneFourTimesSlower, kComm);
  d = Decide(MODE_GBA);
  EXPECT_EQ(d.recommended, MODE_GBA);
  EXPECT_FALSE(d.switch_now);
  EXPECT_EQ(d.reason, "straggler_detected");
}

// (c) The straggler recovers: once every window is fresh and normal, GBA's lead is gone (a tie)
// and no straggler is flagged, so the shard goes back to sync.
TEST_F(ModePolicyTest, StragglerRecoveryReturnsToSync) {
  cluster_.Steps(8, kOneFourTimesSlower, kComm);
  ASSERT_TRUE(Decide(MODE_SYNC).switch_now);
  policy_.NotifySwitched(MODE_GBA);

  cluster_.Steps(4, kHealthy, kComm);
  ModeDecision d = Decide(MODE_GBA);
  EXPECT_EQ(d.recommended, MODE_GBA);  // half a window: worker 3 still looks slow
  EXPECT_FALSE(d.switch_now);
  EXPECT_THAT(d.stragglers, ElementsAre(3));

  cluster_.Steps(4, kHealthy, kComm);
  d = Decide(MODE_GBA);
  EXPECT_EQ(d.recommended, MODE_SYNC);
  EXPECT_TRUE(d.switch_now);
  EXPECT_EQ(d.reason, "stragglers_recovered");
  EXPECT_THAT(d.stragglers, IsEmpty());
  EXPECT_DOUBLE_EQ(d.z, 0.0);
  EXPECT_NEAR(d.sync_samples_per_second, 400 / 1.1, 1e-9);
}

// (c') The same recovery with the staleness cost measured: a tie in throughput no longer sends
// the shard back by default. It stays in gba when staleness is free (efficiency 1), and returns
// when goodput says staleness costs more than gba gains.
TEST_F(ModePolicyTest, WithTheCostMeasuredRecoveryReturnsOnlyWhenGoodputSaysSo) {
  cluster_.Steps(8, kOneFourTimesSlower, kComm);
  ASSERT_TRUE(Decide(MODE_SYNC).switch_now);
  policy_.NotifySwitched(MODE_GBA);
  cluster_.Steps(8, kHealthy, kComm);

  ModeDecision d = Decide(MODE_GBA, MeasuredCost(0.0, 0.0));
  EXPECT_THAT(d.stragglers, IsEmpty());
  EXPECT_DOUBLE_EQ(d.z, 0.0);
  EXPECT_DOUBLE_EQ(d.gba_efficiency, 1.0);
  EXPECT_EQ(d.recommended, MODE_GBA);
  EXPECT_EQ(d.reason, "no_significant_difference");

  d = Decide(MODE_GBA, MeasuredCost(0.1, 0.01));
  EXPECT_LT(d.goodput_z, -2);
  EXPECT_EQ(d.recommended, MODE_SYNC);
  EXPECT_TRUE(d.switch_now);
  EXPECT_EQ(d.reason, "staleness_cost_exceeds_gain");
}

// (d) Half the workers 2× slower. The detector flags nobody: with two groups of two, every
// worker sits 0.6745 robust σ from the centre. The cost model still sees it: sync waits for a
// slow worker, 400/2.1 = 190.5 samples/s; under GBA the slow pair's cycle spans
// 2.1·(200/1.1 + 200/2.1)/400 = 1.45 versions, inside ι = 2, so nothing is decayed and
// gba = 200/1.1 + 200/2.1 = 277.1 samples/s (+45%). Prediction: switch to GBA.
TEST_F(ModePolicyTest, HalfTheWorkersTwiceAsSlowSwitchesToGba) {
  cluster_.Steps(8, {1.0, 1.0, 2.0, 2.0}, kComm);
  const ModeDecision d = Decide(MODE_SYNC);
  EXPECT_THAT(d.stragglers, IsEmpty());
  EXPECT_EQ(d.recommended, MODE_GBA);
  EXPECT_TRUE(d.switch_now);
  EXPECT_EQ(d.reason, "gba_predicted_faster");
  EXPECT_NEAR(d.sync_samples_per_second, 400 / 2.1, 1e-9);
  EXPECT_NEAR(d.gba_samples_per_second, 200 / 1.1 + 200 / 2.1, 1e-9);
  EXPECT_NEAR(d.z, 39.026666370202264, 1e-6);
}

// Goodput as a veto: the same cluster (gba 1.45x sync's throughput at mean staleness N·b/G = 1)
// stays in sync when the shard measured that a one-version-old gradient is worth half a fresh
// one (goodput 0.73x sync's, significantly below), and switches when it is worth 0.91 of one, or
// when the goodputs cannot be told apart (the benefit of the doubt goes to measured throughput).
TEST_F(ModePolicyTest, MeasuredStalenessCostPricesGbaByGoodput) {
  cluster_.Steps(8, {1.0, 1.0, 2.0, 2.0}, kComm);
  const StalenessCost costly = MeasuredCost(1.0, 0.01);
  ModeDecision d = Decide(MODE_SYNC, costly);
  EXPECT_NEAR(d.gba_staleness, 1.0, 1e-9);
  EXPECT_NEAR(d.gba_efficiency, 0.5, 1e-9);
  EXPECT_NEAR(d.gba_samples_per_second, 200 / 1.1 + 200 / 2.1, 1e-9);
  EXPECT_EQ(d.recommended, MODE_SYNC);
  EXPECT_FALSE(d.switch_now);
  EXPECT_EQ(d.reason, "staleness_cost_exceeds_gain");
  EXPECT_GT(d.z, 2);
  EXPECT_LT(d.goodput_z, -2);
  EXPECT_THAT(d.explanation, HasSubstr("(efficiency 0.500 at staleness 1.00)"));

  // The same cost read while in gba takes the shard back to sync.
  d = Decide(MODE_GBA, costly);
  EXPECT_EQ(d.recommended, MODE_SYNC);
  EXPECT_EQ(d.reason, "staleness_cost_exceeds_gain");

  d = Decide(MODE_SYNC, MeasuredCost(0.1, 0.01));
  EXPECT_NEAR(d.gba_efficiency, 1 / 1.1, 1e-9);
  EXPECT_GT(d.goodput_z, 2);
  EXPECT_EQ(d.recommended, MODE_GBA);
  EXPECT_TRUE(d.switch_now);

  // Efficiency 1/1.45: gba's goodput equals sync's throughput within noise. Not a veto.
  const double gain = d.gba_samples_per_second / d.sync_samples_per_second;
  d = Decide(MODE_SYNC, MeasuredCost(gain - 1, 0.05));
  EXPECT_NEAR(d.goodput_z, 0, 1e-6);
  EXPECT_EQ(d.recommended, MODE_GBA);
  EXPECT_EQ(d.reason, "gba_predicted_faster");

  // Not measured yet: priced by throughput alone, and the line says so.
  d = Decide(MODE_SYNC, StalenessCost{});
  EXPECT_DOUBLE_EQ(d.gba_efficiency, 1.0);
  EXPECT_THAT(d.explanation, HasSubstr(", not measured yet)"));
}

// (e) A slow shard (every worker's communication 20× longer) and then a cluster-wide compute
// slowdown (3×) cost throughput but hit every worker alike: sync and GBA stay equal, so the
// policy never leaves sync, at any step of the transitions.
TEST_F(ModePolicyTest, UniformlySlowClusterNeverSwitches) {
  policy_.NotifySwitched(MODE_SYNC);
  cluster_.Steps(8, kHealthy, kComm);
  const double healthy = Decide(MODE_SYNC).sync_samples_per_second;

  const std::vector<double> slow_shard = {2.0, 2.0, 2.0, 2.0};
  for (int k = 0; k < 8; ++k) {
    cluster_.Step(kHealthy, slow_shard);
    const ModeDecision d = Decide(MODE_SYNC);
    EXPECT_FALSE(d.switch_now) << d.explanation;
    EXPECT_EQ(d.recommended, MODE_SYNC) << d.explanation;
  }
  ModeDecision d = Decide(MODE_SYNC);
  EXPECT_NEAR(d.sync_samples_per_second, 400 / 3.0, 1e-9);
  EXPECT_LT(d.sync_samples_per_second, healthy);
  EXPECT_EQ(d.reason, "no_significant_difference");

  const std::vector<double> everyone_slow = {3.0, 3.0, 3.0, 3.0};
  for (int k = 0; k < 8; ++k) {
    cluster_.Step(everyone_slow, slow_shard);
    d = Decide(MODE_SYNC);
    EXPECT_FALSE(d.switch_now) << d.explanation;
    EXPECT_EQ(d.recommended, MODE_SYNC) << d.explanation;
  }
  EXPECT_NEAR(d.sync_samples_per_second, 400 / 5.0, 1e-9);
  EXPECT_NEAR(d.gba_samples_per_second, 400 / 5.0, 1e-9);
}

// (f) A pin beats the model, missing data and the dwell.
TEST_F(ModePolicyTest, PinnedModeAlwaysWins) {
  ASSERT_TRUE(policy_.SetPinned(MODE_GBA).ok());
  ModeDecision d = Decide(MODE_SYNC);  // no data at all
  EXPECT_EQ(d.recommended, MODE_GBA);
  EXPECT_TRUE(d.switch_now);
  EXPECT_EQ(d.reason, "pinned");

  policy_.NotifySwitched(MODE_GBA);
  cluster_.Steps(8, kHealthy, kComm);  // the model would prefer sync
  d = Decide(MODE_GBA);
  EXPECT_EQ(d.recommended, MODE_GBA);
  EXPECT_FALSE(d.switch_now);
  EXPECT_EQ(d.reason, "pinned");

  ASSERT_TRUE(policy_.SetPinned(MODE_SYNC).ok());
  policy_.NotifySwitched(MODE_SYNC);
  d = Decide(MODE_GBA);  // pinned to sync right after a switch: no dwell
  EXPECT_TRUE(d.switch_now);
  EXPECT_EQ(d.recommended, MODE_SYNC);

  ASSERT_TRUE(policy_.SetPinned(MODE_AUTO).ok());  // AUTO = let the model decide
  EXPECT_EQ(policy_.pinned(), std::nullopt);
  EXPECT_EQ(policy_.SetPinned(MODE_UNSPECIFIED).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(policy_.SetPinned(std::nullopt).ok());
  EXPECT_EQ(Decide(MODE_SYNC).reason, "no_significant_difference");
}

// (g) 1% differences between workers: sync is bound by the 1.01 s worker (400/1.11 = 360.4)
// while GBA sums the rates (363.7), a gap of 3.3 samples/s against a standard error of 3.6:
// reported as a close call, no switch.
TEST_F(ModePolicyTest, ReportsCloseCall) {
  cluster_.Steps(8, {1.00, 1.01, 0.99, 1.00}, kComm);
  const ModeDecision d = Decide(MODE_SYNC);
  EXPECT_TRUE(d.close_call);
  EXPECT_FALSE(d.switch_now);
  EXPECT_EQ(d.recommended, MODE_SYNC);
  EXPECT_EQ(d.reason, "no_significant_difference");
  EXPECT_NEAR(d.sync_samples_per_second, 400 / 1.11, 1e-9);
  EXPECT_NEAR(d.gba_samples_per_second, 363.65139117432693, 1e-9);
  EXPECT_NEAR(d.standard_error, 3.618574084148997, 1e-9);
  EXPECT_NEAR(d.z, 0.9094827789716398, 1e-9);
  EXPECT_THAT(d.explanation, HasSubstr("barrier waits for worker 1"));
}

// In GBA with no straggler, a predicted lead between kReturnZ and kSignificanceZ standard errors
// is inside the hysteresis band: not enough to enter GBA, not little enough to leave it.
TEST_F(ModePolicyTest, StaysInGbaInsideTheHysteresisBand) {
  policy_.NotifySwitched(MODE_GBA);
  cluster_.Steps(8, {1.00, 1.02, 0.98, 1.00}, kComm);
  const ModeDecision d = Decide(MODE_GBA);
  EXPECT_GT(d.z, ModePolicy::kReturnZ);
  EXPECT_LE(d.z, ModePolicy::kSignificanceZ);
  EXPECT_THAT(d.stragglers, IsEmpty());
  EXPECT_EQ(d.recommended, MODE_GBA);
  EXPECT_FALSE(d.switch_now);
  EXPECT_EQ(d.reason, "no_significant_difference");
  // The same measurements seen from sync do not justify entering GBA.
  const ModeDecision from_sync = Decide(MODE_SYNC);
  EXPECT_EQ(from_sync.recommended, MODE_SYNC);
}

TEST_F(ModePolicyTest, RejectsInvalidInput) {
  cluster_.Steps(8, kHealthy, kComm);
  const Assessment a = cluster_.detector.Assess();
  EXPECT_EQ(policy_.Decide(a, MODE_ASYNC, kLoads).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(policy_.Decide(a, MODE_SYNC, {{0, 100}, {0, 100}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(policy_.Decide(a, MODE_SYNC, {{0, 0}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  ModePolicy no_batch(&cluster_.clock, 0);
  EXPECT_EQ(no_batch.Decide(a, MODE_SYNC, kLoads).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<ModeDecision> empty = policy_.Decide(a, MODE_SYNC, {});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->reason, "insufficient_data");
}

}  // namespace
}  // namespace syncopate
