#include "libs/straggler/robust_statistics.h"

#include <cmath>
#include <numbers>
#include <vector>

#include "gtest/gtest.h"

namespace syncopate {
namespace {

TEST(Median, IsTheMiddleValueOfAnOddCount) {
  EXPECT_EQ(Median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(Median({5.0}), 5.0);
}

// Even counts: the mean of the two middle values, whatever the input order. {0.5, 0.25} → 0.375
// (the coordinator's per-worker median compute time uses this definition too).
TEST(Median, IsTheMeanOfTheTwoMiddleValuesOfAnEvenCount) {
  EXPECT_EQ(Median({0.5, 0.25}), 0.375);
  EXPECT_EQ(Median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_EQ(Median({1.0, 1.0, 9.0, 9.0}), 5.0);
}

TEST(Median, IsZeroForNoValues) { EXPECT_EQ(Median({}), 0.0); }

// Values {1, 2, 3, 4, 100}: median 3, absolute deviations {2, 1, 0, 1, 97}, MAD 1, so σ̂ = 1.4826:
// the outlier moves it no more than any other value above the median would.
TEST(RobustSigma, ScalesTheMedianAbsoluteDeviation) {
  EXPECT_DOUBLE_EQ(RobustSigma({1.0, 2.0, 3.0, 4.0, 100.0}), 1.4826);
  EXPECT_EQ(RobustSigma({}), 0.0);
}

// √(π/2)·σ/√n: σ = 2, n = 8 → √(π/2)·2/√8 = √(π/2)/√2 = √π/2.
TEST(MedianStandardError, FollowsTheNormalAsymptote) {
  EXPECT_NEAR(MedianStandardError(2.0, 8), std::sqrt(std::numbers::pi) / 2, 1e-12);
  EXPECT_EQ(MedianStandardError(2.0, 0), 0.0);
}

}  // namespace
}  // namespace syncopate
