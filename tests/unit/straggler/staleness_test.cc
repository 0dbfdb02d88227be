#include "libs/straggler/staleness.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace syncopate {
namespace {

TEST(StalenessThreshold, IsCeilOfRoundsPerStepPlusOne) {
  EXPECT_EQ(StalenessThreshold(4, 100, 400), 2);  // B = G/N: one version per healthy step
  EXPECT_EQ(StalenessThreshold(4, 128, 400), 3);  // ⌈1.28⌉ + 1
  EXPECT_EQ(StalenessThreshold(8, 100, 400), 3);  // two versions per healthy step
  EXPECT_EQ(StalenessThreshold(3, 100, 400), 2);  // ⌈0.75⌉ + 1
  EXPECT_EQ(StalenessThreshold(1, 1, 1000), 2);   // a lone worker still gets one version slack
  EXPECT_EQ(StalenessThreshold(16, 64, 256), 5);  // ⌈4⌉ + 1
}

TEST(StalenessThreshold, DegenerateInputsReturnOne) {
  EXPECT_EQ(StalenessThreshold(0, 100, 400), 1);
  EXPECT_EQ(StalenessThreshold(-2, 100, 400), 1);
  EXPECT_EQ(StalenessThreshold(4, 0, 400), 1);
  EXPECT_EQ(StalenessThreshold(4, -5, 400), 1);
  EXPECT_EQ(StalenessThreshold(4, 100, 0), 1);
  EXPECT_EQ(StalenessThreshold(4, 100, -400), 1);
}

TEST(StalenessThreshold, SaturatesInsteadOfOverflowing) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(StalenessThreshold(std::numeric_limits<int>::max(), kMax, 1), kMax);
  EXPECT_EQ(StalenessThreshold(2, kMax / 2, kMax), 2);  // ⌈(kMax − 1)/kMax⌉ + 1, no overflow
}

TEST(StalenessWeight, IsOneInsideTheBandThenHarmonic) {
  EXPECT_EQ(StalenessWeight(0, 2), 1.0);
  EXPECT_EQ(StalenessWeight(1, 2), 1.0);
  EXPECT_EQ(StalenessWeight(2, 2), 1.0);
  EXPECT_EQ(StalenessWeight(3, 2), 1.0 / 2);
  EXPECT_EQ(StalenessWeight(4, 2), 1.0 / 3);
  EXPECT_EQ(StalenessWeight(12, 2), 1.0 / 11);
  EXPECT_EQ(StalenessWeight(6, 5), 1.0 / 2);
  EXPECT_EQ(StalenessWeight(-1, 2), 1.0);  // impossible on a correct shard; treated as fresh
}

TEST(StalenessWeight, StaysPositiveForExtremeStaleness) {
  const double w = StalenessWeight(std::numeric_limits<int64_t>::max(), 1);
  EXPECT_GT(w, 0.0);
  EXPECT_LT(w, 1e-18);
}

// StalenessCost: E|v|² / (E|v|² + τ²·D²), 1 until measured, and a negative drift (noise) is 0.
TEST(StalenessCostTest, EfficiencyFollowsTheFormula) {
  EXPECT_DOUBLE_EQ(StalenessCost{}.Efficiency(3), 1.0);
  EXPECT_DOUBLE_EQ(StalenessCost{}.EfficiencyStandardError(3), 0.0);
  const StalenessCost cost{.versions = 10,
                           .velocity_squared = 2.0,
                           .velocity_drift_squared = 0.5,
                           .velocity_drift_squared_standard_error = 0.1};
  EXPECT_DOUBLE_EQ(cost.Efficiency(0), 1.0);
  EXPECT_DOUBLE_EQ(cost.Efficiency(1), 2.0 / 2.5);
  EXPECT_DOUBLE_EQ(cost.Efficiency(2), 2.0 / 4.0);
  // dE/dD = −V·τ²/(V + τ²D)²: at τ = 2, 2·4/16 = 0.5 per unit of D, times se 0.1.
  EXPECT_DOUBLE_EQ(cost.EfficiencyStandardError(2), 0.05);
  const StalenessCost noise{
      .versions = 10, .velocity_squared = 2.0, .velocity_drift_squared = -0.3};
  EXPECT_DOUBLE_EQ(noise.Efficiency(4), 1.0);
}

TEST(StalenessCostTest, CombineAddsTheMeasuredSlicesNorms) {
  EXPECT_FALSE(StalenessCost::Combine({}).measured());
  const StalenessCost a{.versions = 10,
                        .velocity_squared = 2.0,
                        .velocity_drift_squared = 0.5,
                        .velocity_drift_squared_standard_error = 0.1};
  const StalenessCost b{.versions = 4,
                        .velocity_squared = 6.0,
                        .velocity_drift_squared = 1.5,
                        .velocity_drift_squared_standard_error = 0.2};
  const StalenessCost unmeasured{.versions = 0, .velocity_squared = 100.0};
  const std::vector<StalenessCost> slices = {a, unmeasured, b};
  const StalenessCost whole = StalenessCost::Combine(slices);
  EXPECT_EQ(whole.versions, 4);  // the least-measured slice
  EXPECT_DOUBLE_EQ(whole.velocity_squared, 8.0);
  EXPECT_DOUBLE_EQ(whole.velocity_drift_squared, 2.0);
  EXPECT_DOUBLE_EQ(whole.velocity_drift_squared_standard_error, 0.3);  // correlated: linear
  // 8 / (8 + 1·2): the whole model's efficiency, not the mean of the slices' (0.8 and 0.8 here,
  // by construction equal, so the sum changes nothing but the standard error).
  EXPECT_DOUBLE_EQ(whole.Efficiency(1), 0.8);
  const std::vector<StalenessCost> none = {unmeasured};
  EXPECT_FALSE(StalenessCost::Combine(none).measured());
}

}  // namespace
}  // namespace syncopate
