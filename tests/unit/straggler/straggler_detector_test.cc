#include "libs/straggler/straggler_detector.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "simulated_cluster.h"

namespace syncopate {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// σ_noise for the kNoise pattern: √(π/2)·1.4826·MAD(log(1 + δ))/√8, the median's standard
// error of one worker's log step time (worked out independently of the implementation).
constexpr double kNoiseFloor = 0.009806101631520747;

TEST(StragglerDetector, WindowIsEightUpToFourWorkersThenGrowsWithTheirLogarithm) {
  EXPECT_EQ(StragglerDetector::WindowForWorkers(0), 8);
  EXPECT_EQ(StragglerDetector::WindowForWorkers(1), 8);
  EXPECT_EQ(StragglerDetector::WindowForWorkers(4), 8);
  EXPECT_EQ(StragglerDetector::WindowForWorkers(5), 10);      // ⌈4·2.32⌉
  EXPECT_EQ(StragglerDetector::WindowForWorkers(16), 16);     // 4·4
  EXPECT_EQ(StragglerDetector::WindowForWorkers(64), 24);     // 4·6
  EXPECT_EQ(StragglerDetector::WindowForWorkers(1000), 40);   // ⌈4·9.97⌉
  EXPECT_EQ(StragglerDetector::WindowForWorkers(10000), 54);  // ⌈4·13.29⌉
}

TEST(StragglerDetector, FindsNoStragglerAmongEqualNoisyWorkers) {
  SimulatedCluster cluster;
  cluster.Steps(8, {1.00, 1.01, 0.99, 1.00});
  const Assessment a = cluster.detector.Assess();

  EXPECT_EQ(a.window, 8);
  EXPECT_THAT(a.Stragglers(), IsEmpty());
  EXPECT_DOUBLE_EQ(a.cluster_median_seconds, 1.0);
  // The between-worker MAD (σ ≈ 0.0074) is below what sampling noise alone would produce, so the
  // noise floor decides and the 1% differences score about one σ, not dozens.
  EXPECT_NEAR(a.log_sigma_between_workers, 0.007376180261453506, 1e-12);
  EXPECT_NEAR(a.log_sigma_noise_floor, kNoiseFloor, 1e-12);
  EXPECT_DOUBLE_EQ(a.log_sigma, a.log_sigma_noise_floor);
  ASSERT_EQ(a.workers.size(), 4u);
  const std::vector<double> slowdown = {1.0, 1.01, 0.99, 1.0};
  const std::vector<double> z = {0.0, 1.0147081100183313, -1.024906352305756, 0.0};
  for (size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    EXPECT_TRUE(a.workers[i].enough_data);
    EXPECT_EQ(a.workers[i].compute_samples, 8);
    EXPECT_DOUBLE_EQ(a.workers[i].slowdown, slowdown[i]);
    EXPECT_NEAR(a.workers[i].robust_z, z[i], 1e-9);
    EXPECT_FALSE(a.workers[i].straggler);
  }
  EXPECT_NEAR(a.workers[1].compute_sigma_seconds, 1.4826 * 0.015 * 1.01, 1e-12);
}

TEST(StragglerDetector, FlagsAFourTimesSlowerWorker) {
  SimulatedCluster cluster;
  cluster.Steps(8, {1.0, 1.0, 1.0, 4.0});
  const Assessment a = cluster.detector.Assess();

  EXPECT_THAT(a.Stragglers(), ElementsAre(3));
  EXPECT_DOUBLE_EQ(a.cluster_median_seconds, 1.0);
  EXPECT_DOUBLE_EQ(a.log_sigma_between_workers, 0.0);  // three identical medians out of four
  EXPECT_NEAR(a.log_sigma, kNoiseFloor, 1e-12);
  const WorkerAssessment* slow = a.Find(3);
  ASSERT_NE(slow, nullptr);
  EXPECT_DOUBLE_EQ(slow->slowdown, 4.0);
  EXPECT_DOUBLE_EQ(slow->median_compute_seconds, 4.0);
  EXPECT_NEAR(slow->robust_z, std::log(4.0) / kNoiseFloor, 1e-9);  // ≈ 141
  EXPECT_DOUBLE_EQ(a.Find(0)->robust_z, 0.0);
}

TEST(StragglerDetector, NeverFlagsTheFastSide) {
  SimulatedCluster cluster;
  cluster.Steps(8, {1.0, 1.0, 1.0, 0.25});
  const Assessment a = cluster.detector.Assess();
  EXPECT_THAT(a.Stragglers(), IsEmpty());
  EXPECT_DOUBLE_EQ(a.Find(3)->slowdown, 0.25);
  EXPECT_LT(a.Find(3)->robust_z, -StragglerDetector::kStragglerZ);
}

TEST(StragglerDetector, StragglerRecoversOnceItsWindowRefills) {
  SimulatedCluster cluster;
  cluster.Steps(8, {1.0, 1.0, 1.0, 4.0});
  ASSERT_THAT(cluster.detector.Assess().Stragglers(), ElementsAre(3));

  // Half a window of normal steps: the median still sits between the two regimes.
  cluster.Steps(4, {1.0, 1.0, 1.0, 1.0});
  EXPECT_THAT(cluster.detector.Assess().Stragglers(), ElementsAre(3));

  cluster.Steps(4, {1.0, 1.0, 1.0, 1.0});
  const Assessment a = cluster.detector.Assess();
  EXPECT_THAT(a.Stragglers(), IsEmpty());
  EXPECT_DOUBLE_EQ(a.Find(3)->slowdown, 1.0);
  EXPECT_DOUBLE_EQ(a.Find(3)->robust_z, 0.0);
  EXPECT_EQ(a.Find(3)->steps_recorded, 16);
}

TEST(StragglerDetector, RemovedWorkerDisappears) {
  SimulatedCluster cluster;
  cluster.Steps(8, {1.0, 1.0, 1.0, 4.0});
  cluster.detector.RemoveWorker(3);
  cluster.detector.RemoveWorker(42);  // unknown: ignored
  const Assessment a = cluster.detector.Assess();
  EXPECT_EQ(a.workers.size(), 3u);
  EXPECT_EQ(a.Find(3), nullptr);
  EXPECT_THAT(a.Stragglers(), IsEmpty());
}

TEST(StragglerDetector, ReportsNotEnoughDataBelowMinimumSamples) {
  SimulatedCluster cluster;
  cluster.Steps(8, {1.0, 1.0, 1.0});
  for (int k = 0; k < StragglerDetector::kMinSamples - 1; ++k) {
    ASSERT_TRUE(cluster.detector.AddStep(7, 10.0).ok());
  }
  Assessment a = cluster.detector.Assess();
  const WorkerAssessment* newcomer = a.Find(7);
  ASSERT_NE(newcomer, nullptr);
  EXPECT_FALSE(newcomer->enough_data);
  EXPECT_EQ(newcomer->compute_samples, 4);
  EXPECT_FALSE(newcomer->straggler);
  EXPECT_DOUBLE_EQ(newcomer->slowdown, 0.0);
  EXPECT_DOUBLE_EQ(a.cluster_median_seconds, 1.0);  // the newcomer is not in the statistics

  ASSERT_TRUE(cluster.detector.AddStep(7, 10.0).ok());
  a = cluster.detector.Assess();
  EXPECT_TRUE(a.Find(7)->enough_data);
  EXPECT_THAT(a.Stragglers(), ElementsAre(7));
}

TEST(StragglerDetector, NoiselessIdenticalWorkersScoreZero) {
  FakeClock clock;
  StragglerDetector detector(&clock);
  for (int k = 0; k < 8; ++k) {
    for (int32_t w = 0; w < 3; ++w) ASSERT_TRUE(detector.AddStep(w, 0.5).ok());
  }
  const Assessment a = detector.Assess();
  EXPECT_DOUBLE_EQ(a.log_sigma, 0.0);
  for (const WorkerAssessment& w : a.workers) EXPECT_DOUBLE_EQ(w.robust_z, 0.0);
  EXPECT_THAT(a.Stragglers(), IsEmpty());
}

TEST(StragglerDetector, TwoWorkersCannotOutvoteEachOther) {
  SimulatedCluster cluster;
  cluster.Steps(8, {1.0, 4.0});
  const Assessment a = cluster.detector.Assess();
  EXPECT_THAT(a.Stragglers(), IsEmpty());
  EXPECT_NEAR(a.Find(1)->robust_z, 1 / 1.4826, 1e-12);
}

TEST(StragglerDetector, KeepsMedianCommunicationTime) {
  SimulatedCluster cluster;
  cluster.Steps(8, {1.0, 1.0, 1.0}, {0.1, 0.2, 0.3});
  ASSERT_TRUE(cluster.detector.AddCommunication(0, 5.0).ok());  // one outlier does not move it
  const Assessment a = cluster.detector.Assess();
  EXPECT_DOUBLE_EQ(a.Find(0)->median_communication_seconds, 0.1);
  EXPECT_EQ(a.Find(0)->communication_samples, 8);
  EXPECT_DOUBLE_EQ(a.Find(2)->median_communication_seconds, 0.3);
  EXPECT_DOUBLE_EQ(a.Find(2)->communication_sigma_seconds, 0.0);
}

TEST(StragglerDetector, WindowKeepsOnlyTheLastWSamplesWithTheirTimes) {
  SimulatedCluster cluster;
  cluster.Steps(12, {1.0, 1.0, 1.0});
  const Assessment a = cluster.detector.Assess();
  EXPECT_EQ(a.Find(0)->compute_samples, 8);
  EXPECT_EQ(a.Find(0)->steps_recorded, 12);
  // Steps are one second apart from start + 1s: the oldest kept is step 5 (1-based).
  EXPECT_EQ(a.Find(0)->oldest_compute_at, absl::UnixEpoch() + absl::Hours(1) + absl::Seconds(5));
  EXPECT_EQ(a.Find(0)->oldest_communication_at, absl::InfinitePast());
}

// 5 workers: W = 10; worker 0's steps take 1, 2, ..., 10 s. Once one worker leaves, W = 8 and
// worker 0 is judged on its last 8 steps (3..10 s: median 6.5, not 5.5), before it reports again.
TEST(StragglerDetector, ShrinkingClusterJudgesTheLastWSamples) {
  FakeClock clock;
  StragglerDetector detector(&clock);
  for (int k = 1; k <= 10; ++k) {
    for (int32_t w = 0; w < 5; ++w) {
      ASSERT_TRUE(detector.AddStep(w, w == 0 ? k : 1.0).ok());
    }
  }
  EXPECT_DOUBLE_EQ(detector.Assess().Find(0)->median_compute_seconds, 5.5);
  detector.RemoveWorker(4);
  const Assessment a = detector.Assess();
  EXPECT_EQ(a.window, 8);
  EXPECT_EQ(a.Find(0)->compute_samples, 8);
  EXPECT_DOUBLE_EQ(a.Find(0)->median_compute_seconds, 6.5);
  // MAD of 3..10 around 6.5: deviations 0.5, 0.5, 1.5, 1.5, 2.5, 2.5, 3.5, 3.5 -> 2.
  EXPECT_DOUBLE_EQ(a.Find(0)->compute_sigma_seconds, 1.4826 * 2);
}

TEST(StragglerDetector, RejectsInvalidTimes) {
  FakeClock clock;
  StragglerDetector detector(&clock);
  EXPECT_EQ(detector.AddStep(0, 0.0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(detector.AddStep(0, -1.0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(detector.AddStep(0, std::numeric_limits<double>::quiet_NaN()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(detector.AddStep(0, std::numeric_limits<double>::infinity()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(detector.AddCommunication(0, -0.1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(detector.AddCommunication(0, 0.0).ok());
  EXPECT_TRUE(detector.Assess().workers.size() == 1);  // the valid sample registered worker 0
}

}  // namespace
}  // namespace syncopate
