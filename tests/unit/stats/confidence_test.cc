#include "libs/stats/confidence.h"

#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "gtest/gtest.h"

namespace syncopate::stats {
namespace {

// Reference values below come from SciPy 1.10 (scipy.stats.t.ppf / t.cdf, Debian bookworm's
// python3-scipy) unless the comment gives a closed form. SciPy's ppf itself is off by up to
// ~4e-11 in probability (its t.cdf of its own 0.95 quantile for df 5 is 0.94999999996; of ours,
// 0.9500000000000023), hence tolerances of 1e-9 relative on quantiles.

TEST(Summarize, GivesMeanAndSampleStandardDeviation) {
  const SampleSummary s = Summarize({1, 2, 3, 4, 5});
  EXPECT_EQ(s.n, 5u);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_DOUBLE_EQ(s.std_dev, std::sqrt(2.5));  // Σ(x − 3)² = 10, divided by n − 1 = 4
  EXPECT_EQ(Summarize({}).n, 0u);
  EXPECT_EQ(Summarize({7}).std_dev, 0);  // one value: no spread to estimate
  EXPECT_DOUBLE_EQ(Summarize({7}).mean, 7);
}

TEST(NormalQuantile, MatchesTablesAndInvertsTheCdf) {
  EXPECT_NEAR(NormalQuantile(0.975), 1.959963984540054, 1e-9);
  EXPECT_NEAR(NormalQuantile(0.5), 0, 1e-12);
  EXPECT_NEAR(NormalQuantile(0.025), -1.959963984540054, 1e-9);
  EXPECT_NEAR(NormalCdf(NormalQuantile(1 - 5e-4)), 1 - 5e-4, 1e-12);
  EXPECT_NEAR(NormalCdf(2), 0.9772498680518208, 1e-12);
}

TEST(StudentTQuantile, MatchesTablesForIntegerDegreesOfFreedom) {
  EXPECT_NEAR(StudentTQuantile(0.975, 1), 12.706204736432095, 1e-9);
  EXPECT_NEAR(StudentTQuantile(0.975, 2), 4.302652729911275, 1e-9);
  EXPECT_NEAR(StudentTQuantile(0.975, 3), 3.182446305284263, 1e-9);
  EXPECT_NEAR(StudentTQuantile(0.975, 4), 2.7764451051977987, 1e-9);
  EXPECT_NEAR(StudentTQuantile(0.975, 10), 2.2281388519649385, 1e-9);
  EXPECT_NEAR(StudentTQuantile(0.975, 30), 2.0422724563012373, 1e-9);
  EXPECT_NEAR(StudentTQuantile(0.95, 5), 2.015048372669157, 1e-9);
  EXPECT_NEAR(StudentTQuantile(0.975, 1e6), 1.9599663568141066, 1e-8);  // → the normal's 1.96
}

TEST(StudentTQuantile, HandlesRealDegreesOfFreedomAsWelchNeeds) {
  EXPECT_NEAR(StudentTQuantile(0.975, 2.5), 3.5746548420118773, 1e-9);
  EXPECT_NEAR(StudentTQuantile(0.995, 7.3), 3.451031655622189, 1e-9);
  EXPECT_NEAR(StudentTQuantile(0.999, 0.7), 3637.014638028235, 1e-5);
}

TEST(StudentTQuantile, MatchesClosedFormsForOneAndTwoDegreesOfFreedom) {
  for (double p : {0.6, 0.75, 0.9, 0.99, 0.999}) {
    // df = 1 is the Cauchy distribution: tan(π(p − 1/2)).
    EXPECT_NEAR(StudentTQuantile(p, 1), std::tan(std::numbers::pi * (p - 0.5)), 1e-9) << p;
    // df = 2: (2p − 1)/√(2p(1 − p)).
    EXPECT_NEAR(StudentTQuantile(p, 2), (2 * p - 1) / std::sqrt(2 * p * (1 - p)), 1e-9) << p;
  }
}

TEST(StudentTQuantile, IsAntisymmetricAndZeroAtTheMedian) {
  EXPECT_EQ(StudentTQuantile(0.5, 3), 0);
  EXPECT_DOUBLE_EQ(StudentTQuantile(0.025, 4), -StudentTQuantile(0.975, 4));
}

TEST(StudentTCdf, MatchesReferenceAndInvertsTheQuantile) {
  EXPECT_NEAR(StudentTCdf(1.5, 3.2), 0.887477734079134, 1e-12);
  EXPECT_NEAR(StudentTCdf(-0.3, 1.7), 0.398401459198725, 1e-12);
  EXPECT_EQ(StudentTCdf(0, 5), 0.5);
  EXPECT_NEAR(StudentTCdf(StudentTQuantile(0.9, 6), 6), 0.9, 1e-12);
}

TEST(MeanInterval, IsMeanPlusMinusTTimesStandardError) {
  // {1..5}: mean 3, s = √2.5, s/√5 = √0.5; t(0.975, 4) = 2.7764451051977987.
  const absl::StatusOr<Interval> i = MeanInterval({1, 2, 3, 4, 5}, 0.95);
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_DOUBLE_EQ(i->estimate, 3);
  EXPECT_NEAR(i->low, 3 - 2.7764451051977987 * std::sqrt(0.5), 1e-9);
  EXPECT_NEAR(i->high, 3 + 2.7764451051977987 * std::sqrt(0.5), 1e-9);
  EXPECT_EQ(i->df, 4);
}

TEST(MeanInterval, ConstantSampleGivesThePoint) {
  const absl::StatusOr<Interval> i = MeanInterval({0.86, 0.86, 0.86}, 0.95);
  ASSERT_TRUE(i.ok());
  EXPECT_DOUBLE_EQ(i->low, 0.86);
  EXPECT_DOUBLE_EQ(i->high, 0.86);
}

TEST(MeanInterval, RefusesFewerThanTwoValuesAndBadConfidence) {
  EXPECT_EQ(MeanInterval({1}, 0.95).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(MeanInterval({}, 0.95).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(MeanInterval({1, 2}, 1.0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MeanInterval({1, 2}, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(WelchDegreesOfFreedom, FollowsSatterthwaite) {
  // u = 2.5/5 = 0.5, v = 4/3: (0.5 + 4/3)² / (0.25/4 + (16/9)/2) = 3.532846715328467.
  EXPECT_NEAR(WelchDegreesOfFreedom(0.5, 5, 4.0 / 3, 3), 3.532846715328467, 1e-12);
  EXPECT_DOUBLE_EQ(WelchDegreesOfFreedom(0.5, 5, 0, 3), 4);  // only a is noisy: n_a − 1
  EXPECT_EQ(WelchDegreesOfFreedom(0, 5, 0, 3), 0);
}

TEST(WelchDifferenceInterval, MatchesReference) {
  // a = {1..5} (mean 3, s² 2.5), b = {2, 4, 6} (mean 4, s² 4): −1 ± t(0.975, 3.53)·√(0.5 + 4/3).
  const absl::StatusOr<Interval> i = WelchDifferenceInterval({1, 2, 3, 4, 5}, {2, 4, 6}, 0.95);
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_DOUBLE_EQ(i->estimate, -1);
  EXPECT_NEAR(i->low, -4.96372552218633, 1e-9);
  EXPECT_NEAR(i->high, 2.96372552218633, 1e-9);
  EXPECT_NEAR(i->df, 3.532846715328467, 1e-12);
}

TEST(WelchDifferenceInterval, TwoConstantSamplesGiveThePoint) {
  const absl::StatusOr<Interval> i = WelchDifferenceInterval({2, 2}, {0.5, 0.5, 0.5}, 0.95);
  ASSERT_TRUE(i.ok());
  EXPECT_DOUBLE_EQ(i->low, 1.5);
  EXPECT_DOUBLE_EQ(i->high, 1.5);
}

TEST(WelchDifferenceInterval, RefusesASingleRun) {
  EXPECT_FALSE(WelchDifferenceInterval({1}, {1, 2}, 0.95).ok());
  EXPECT_FALSE(WelchDifferenceInterval({1, 2}, {1}, 0.95).ok());
}

TEST(FiellerRatioInterval, MatchesABruteForceSolutionOfTheInequality) {
  // a = {10, 12, 11, 13}, b = {20, 21, 19, 22, 18}: R = 11.5/20 = 0.575, ν = 5.2347; the set
  // {R : (ā − R b̄)² ≤ t²(u + R²v)} scanned on a 1e-6 grid in SciPy is [0.482415, 0.676908].
  const absl::StatusOr<Interval> i =
      FiellerRatioInterval({10, 12, 11, 13}, {20, 21, 19, 22, 18}, 0.95);
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_DOUBLE_EQ(i->estimate, 0.575);
  EXPECT_NEAR(i->df, 5.234730305997815, 1e-9);
  EXPECT_NEAR(i->low, 0.482415, 2e-6);
  EXPECT_NEAR(i->high, 0.676908, 2e-6);
}

TEST(FiellerRatioInterval, ExactDenominatorReducesToTheNumeratorsInterval) {
  // b constant: the ratio's interval is a's mean interval divided by b̄.
  const std::vector<double> a = {1, 2, 3, 4, 5};
  const absl::StatusOr<Interval> ratio = FiellerRatioInterval(a, {2, 2, 2}, 0.95);
  const absl::StatusOr<Interval> mean = MeanInterval(a, 0.95);
  ASSERT_TRUE(ratio.ok() && mean.ok());
  EXPECT_NEAR(ratio->low, mean->low / 2, 1e-9);
  EXPECT_NEAR(ratio->high, mean->high / 2, 1e-9);
}

TEST(FiellerRatioInterval, IsUnboundedWhenTheDenominatorCouldBeZero) {
  // b̄ = 0.5 with standard error ~1.4: zero is well inside b's interval.
  const absl::StatusOr<Interval> i = FiellerRatioInterval({1, 2, 3}, {-1, 2, -1, 2}, 0.95);
  ASSERT_TRUE(i.ok());
  EXPECT_EQ(i->low, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(i->high, std::numeric_limits<double>::infinity());
  EXPECT_EQ(ReadVerdict(*i, Direction::kAtMost, 1.05), Verdict::kUndecided);
}

TEST(FiellerRatioInterval, RefusesAZeroDenominatorMean) {
  EXPECT_FALSE(FiellerRatioInterval({1, 2}, {-1, 1}, 0.95).ok());
}

TEST(ReadVerdict, MetOnlyWhenTheWholeIntervalSatisfiesTheGoal) {
  const Interval inside{0.9, 0.8, 1.0, 4};
  const Interval straddles{1.0, 0.9, 1.1, 4};
  const Interval outside{1.2, 1.1, 1.3, 4};
  EXPECT_EQ(ReadVerdict(inside, Direction::kAtMost, 1.05), Verdict::kMet);
  EXPECT_EQ(ReadVerdict(straddles, Direction::kAtMost, 1.05), Verdict::kUndecided);
  EXPECT_EQ(ReadVerdict(outside, Direction::kAtMost, 1.05), Verdict::kNotMet);
  EXPECT_EQ(ReadVerdict(outside, Direction::kAtLeast, 1.05), Verdict::kMet);
  EXPECT_EQ(ReadVerdict(straddles, Direction::kAtLeast, 1.05), Verdict::kUndecided);
  EXPECT_EQ(ReadVerdict(inside, Direction::kAtLeast, 1.05), Verdict::kNotMet);
  EXPECT_EQ(ReadVerdict(Interval{1.05, 1.05, 1.05, 0}, Direction::kAtMost, 1.05), Verdict::kMet);
  EXPECT_EQ(VerdictName(Verdict::kNotMet), "not met");
}

}  // namespace
}  // namespace syncopate::stats
