#include "libs/straggler/switch_confirmation.h"

#include <cmath>

#include "gtest/gtest.h"
#include "tests/unit/straggler/simulated_cluster.h"

namespace syncopate {
namespace {

const std::vector<WorkerLoad> kLoads = {{0, 64}, {1, 64}, {2, 64}, {3, 64}};

ModeDecision SwitchTo(v1::Mode mode, absl::Time at) {
  ModeDecision d;
  d.current = mode == v1::MODE_GBA ? v1::MODE_SYNC : v1::MODE_GBA;
  d.recommended = mode;
  d.switch_now = true;
  d.reason = std::string(kReasonStragglerDetected);
  d.at = at;
  return d;
}

TEST(SwitchConfirmation, HoldsTheFirstVerdictAndActsOnAnIndependentSecondOne) {
  SimulatedCluster cluster;
  SwitchConfirmation confirmation;
  cluster.Steps(8, {1, 1, 1, 4});
  ModeDecision first = SwitchTo(v1::MODE_GBA, cluster.clock.Now());
  EXPECT_FALSE(confirmation.Confirm(first, cluster.detector.Assess(), kLoads));
  EXPECT_FALSE(first.switch_now);
  EXPECT_EQ(first.reason, kReasonAwaitingConfirmation);

  // Overlapping window (only 4 new steps): still held.
  cluster.Steps(4, {1, 1, 1, 4});
  ModeDecision overlapping = SwitchTo(v1::MODE_GBA, cluster.clock.Now());
  EXPECT_FALSE(confirmation.Confirm(overlapping, cluster.detector.Assess(), kLoads));

  // A window entirely after the first verdict confirms it.
  cluster.Steps(4, {1, 1, 1, 4});
  ModeDecision second = SwitchTo(v1::MODE_GBA, cluster.clock.Now());
  EXPECT_TRUE(confirmation.Confirm(second, cluster.detector.Assess(), kLoads));
  EXPECT_TRUE(second.switch_now);
  EXPECT_EQ(second.reason, kReasonStragglerDetected);
}

TEST(SwitchConfirmation, AVerdictThatLapsesMustStartOver) {
  SimulatedCluster cluster;
  SwitchConfirmation confirmation;
  cluster.Steps(8, {1, 1, 1, 4});
  ModeDecision first = SwitchTo(v1::MODE_GBA, cluster.clock.Now());
  EXPECT_FALSE(confirmation.Confirm(first, cluster.detector.Assess(), kLoads));
  cluster.Steps(8, {1, 1, 1, 1});
  ModeDecision stay;  // the next window says: no switch
  stay.current = v1::MODE_SYNC;
  stay.recommended = v1::MODE_SYNC;
  EXPECT_FALSE(confirmation.Confirm(stay, cluster.detector.Assess(), kLoads));
  cluster.Steps(8, {1, 1, 1, 4});
  ModeDecision again = SwitchTo(v1::MODE_GBA, cluster.clock.Now());
  EXPECT_FALSE(confirmation.Confirm(again, cluster.detector.Assess(), kLoads))
      << "the earlier candidate was withdrawn";
}

TEST(SwitchConfirmation, PinnedModesNeedNoConfirmation) {
  SimulatedCluster cluster;
  SwitchConfirmation confirmation;
  ModeDecision pinned = SwitchTo(v1::MODE_GBA, cluster.clock.Now());
  pinned.reason = std::string(kReasonPinned);
  EXPECT_TRUE(confirmation.Confirm(pinned, cluster.detector.Assess(), kLoads));
}

// 2.3% of windows exceed z = 2 by chance; two independent ones in a row 0.05%, as does one
// window above kDecisiveZ = 3.28.
TEST(SwitchConfirmation, TheDecisiveCutOffHasTheTwoWindowFalseRate) {
  EXPECT_NEAR(SwitchConfirmation::kDecisiveZ, 3.28, 0.005);
  const auto tail = [](double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); };
  EXPECT_NEAR(tail(SwitchConfirmation::kDecisiveZ), std::pow(tail(ModePolicy::kSignificanceZ), 2),
              1e-9);
}

// A throughput verdict that clears kDecisiveZ even with each worker's W steps counted as one
// (z / sqrt(W)) switches at once; just below, or pointing the other way, or another kind of
// verdict, waits for the second window.
TEST(SwitchConfirmation, ADecisiveThroughputVerdictNeedsNoSecondWindow) {
  SimulatedCluster cluster;
  cluster.Steps(8, {1, 1, 1, 4});
  const Assessment assessment = cluster.detector.Assess();
  ASSERT_EQ(assessment.window, 8);
  const double bar = SwitchConfirmation::kDecisiveZ * std::sqrt(8.0);

  SwitchConfirmation decisive;
  ModeDecision strong = SwitchTo(v1::MODE_GBA, cluster.clock.Now());
  strong.z = bar + 0.01;
  EXPECT_TRUE(decisive.Confirm(strong, assessment, kLoads));
  EXPECT_TRUE(strong.switch_now);
  EXPECT_EQ(strong.reason, kReasonStragglerDetected);

  SwitchConfirmation below;
  ModeDecision weaker = SwitchTo(v1::MODE_GBA, cluster.clock.Now());
  weaker.z = bar - 0.01;
  EXPECT_FALSE(below.Confirm(weaker, assessment, kLoads));
  EXPECT_EQ(weaker.reason, kReasonAwaitingConfirmation);

  SwitchConfirmation to_sync;
  ModeDecision back = SwitchTo(v1::MODE_SYNC, cluster.clock.Now());
  back.reason = std::string(kReasonSyncPredictedFaster);
  back.z = -(bar + 0.01);
  EXPECT_TRUE(to_sync.Confirm(back, assessment, kLoads));
  SwitchConfirmation wrong_way;
  ModeDecision contrary = SwitchTo(v1::MODE_SYNC, cluster.clock.Now());
  contrary.reason = std::string(kReasonSyncPredictedFaster);
  contrary.z = bar + 0.01;
  EXPECT_FALSE(wrong_way.Confirm(contrary, assessment, kLoads));

  SwitchConfirmation other_kind;
  ModeDecision staleness = SwitchTo(v1::MODE_SYNC, cluster.clock.Now());
  staleness.reason = std::string(kReasonStalenessCostExceedsGain);
  staleness.z = -(bar + 0.01);
  EXPECT_FALSE(other_kind.Confirm(staleness, assessment, kLoads));
}

}  // namespace
}  // namespace syncopate
