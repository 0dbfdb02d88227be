#include "libs/aggregation/gradient_statistics.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace syncopate::aggregation {
namespace {

constexpr int kDim = 200;
constexpr int kWorkers = 4;
constexpr int64_t kLocalBatch = 16;

// One sync version: kWorkers pushes of true gradient `truth` plus per-sample noise of variance
// sigma² per element (so a push over b samples has variance sigma²/b, and S = kDim·sigma²).
void SyncVersion(GradientStatistics& stats, const std::vector<float>& truth, double sigma,
                 std::mt19937& rng) {
  std::normal_distribution<double> normal(0, sigma / std::sqrt(double{kLocalBatch}));
  std::vector<float> mean(kDim, 0.0f);
  for (int w = 0; w < kWorkers; ++w) {
    std::vector<float> push(kDim);
    for (int i = 0; i < kDim; ++i) push[i] = static_cast<float>(truth[i] + normal(rng));
    stats.AddPush(push, kLocalBatch);
    for (int i = 0; i < kDim; ++i) mean[i] += push[i] / kWorkers;
  }
  stats.AddUpdate(mean, kWorkers * kLocalBatch);
}

TEST(GradientStatisticsTest, WarmupAndWindowFollowTheVelocityDecay) {
  EXPECT_EQ(GradientStatistics(0.9).warmup_updates(), 29);  // 0.9^29 = 4.7% <= 5% < 0.9^28
  EXPECT_EQ(GradientStatistics(0.9).window(), 29);
  EXPECT_EQ(GradientStatistics(0.0).warmup_updates(), 1);
  EXPECT_EQ(GradientStatistics(0.0).window(), 8);
}

// A constant true gradient under heavy noise: the noise trace is recovered, and the velocity's
// measured change is all noise (E|Δv|² = (S/B)·2/(1+μ) = 3.3 against E|v|² = 66), so once it is
// removed the drift is about 0 and staleness costs nothing; uncorrected, E(1) would read 0.95.
TEST(GradientStatisticsTest, NoiseIsRecoveredAndRemovedFromTheDrift) {
  GradientStatistics stats(0.9);
  std::mt19937 rng(7);
  const std::vector<float> truth(kDim, 0.05f);  // |G|² = 0.5
  const double sigma = 1.0;                     // S = 200 per sample; S/B = 3.1 per update
  for (int k = 0; k < 29 + 29; ++k) SyncVersion(stats, truth, sigma, rng);
  EXPECT_NEAR(stats.noise_trace(), kDim * sigma * sigma, 0.1 * kDim);
  const StalenessCost cost = stats.Current();
  EXPECT_EQ(cost.versions, 29);
  EXPECT_NEAR(cost.velocity_squared, 100 * 0.5 + 3.125 / (1 - 0.81), 0.15 * 66);
  EXPECT_LT(std::abs(cost.velocity_drift_squared), 0.5);
  EXPECT_GT(cost.Efficiency(1), 0.99);
}

// Without noise, a gradient ±a that flips sign every update: the velocity settles at
// ±a/(1+μ) and changes by 2a/(1+μ) per update, so a gradient one version old points the wrong
// way, E(1) = 1/(1 + 4) = 0.2 whatever μ (0.1 here: 2 warmup updates).
TEST(GradientStatisticsTest, AFlippingGradientMakesStalenessExpensive) {
  GradientStatistics stats(0.1);
  for (int k = 0; k < 20; ++k) {
    const std::vector<float> g(kDim, k % 2 == 0 ? 0.1f : -0.1f);
    stats.AddUpdate(g, 64);
  }
  const StalenessCost cost = stats.Current();
  EXPECT_EQ(cost.versions, 8);
  EXPECT_NEAR(cost.Efficiency(1), 0.2, 1e-6);
  EXPECT_NEAR(cost.Efficiency(2), 1.0 / 17.0, 1e-6);
  EXPECT_NEAR(cost.velocity_drift_squared_standard_error, 0.0, 1e-9);
}

// A rule without a velocity is not measured: the same formula on raw gradients is falsified
// (see the header), so even a flipping gradient leaves the cost unmeasured (efficiency 1).
TEST(GradientStatisticsTest, ARuleWithoutVelocityIsNotMeasured) {
  GradientStatistics stats(0.0);
  EXPECT_FALSE(stats.measures());
  for (int k = 0; k < 20; ++k) {
    const std::vector<float> g(kDim, k % 2 == 0 ? 0.1f : -0.1f);
    stats.AddPush(g, 32);
    stats.AddPush(g, 32);
    stats.AddUpdate(g, 64);
  }
  EXPECT_FALSE(stats.Current().measured());
  EXPECT_EQ(stats.Current().Efficiency(1), 1.0);
  EXPECT_EQ(stats.noise_trace(), 0.0);
}

// A reset (mode switch, restore) restarts the velocity: no new versions count until it warmed up
// again, and the last estimate survives meanwhile.
TEST(GradientStatisticsTest, ResetRestartsTheVelocityAndKeepsTheEstimate) {
  GradientStatistics stats(0.5);  // warmup: 0.5^5 = 3.1% <= 5%
  ASSERT_EQ(stats.warmup_updates(), 5);
  const std::vector<float> g(kDim, 0.1f);
  for (int k = 0; k < 6; ++k) stats.AddUpdate(g, 64);
  EXPECT_EQ(stats.Current().versions, 1);
  stats.Reset();
  for (int k = 0; k < 5; ++k) stats.AddUpdate(g, 64);
  EXPECT_EQ(stats.Current().versions, 1);
  stats.AddUpdate(g, 64);
  EXPECT_EQ(stats.Current().versions, 2);
}

}  // namespace
}  // namespace syncopate::aggregation
