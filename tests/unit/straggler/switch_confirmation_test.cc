#include "libs/straggler/switch_confirmation.h"

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

}  // namespace
}  // namespace syncopate
