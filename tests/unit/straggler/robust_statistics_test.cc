#include "libs/straggler/robust_statistics.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
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

// SummarizeSorted reads the same statistics from a sorted sample as Median and RobustSigma do
// from a copy, bit for bit: odd and even counts, ties, heavy tails, and through log (the
// detector's log windows).
TEST(SummarizeSorted, EqualsMedianAndRobustSigmaExactly) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> step(-3.0, 0.3);
  std::uniform_int_distribution<int> coarse(1, 6);
  for (int n = 1; n <= 300; ++n) {
    for (int kind = 0; kind < 2; ++kind) {
      std::vector<double> values(n);
      for (double& v : values) {
        // kind 1: few distinct values (ties on both sides of the median), plus a far outlier.
        v = kind == 0 ? step(rng) : 0.01 * coarse(rng);
      }
      if (kind == 1 && n > 3) values[0] = 5.0;
      std::vector<double> ascending = values;
      std::sort(ascending.begin(), ascending.end());
      const SortedSummary plain = SummarizeSorted(ascending);
      EXPECT_EQ(plain.median, Median(values)) << n << " " << kind;
      EXPECT_EQ(plain.robust_sigma, RobustSigma(values)) << n << " " << kind;
      std::vector<double> logs;
      logs.reserve(values.size());
      for (double v : values) logs.push_back(std::log(v));
      const SortedSummary logged = SummarizeSorted(ascending, [](double x) { return std::log(x); });
      EXPECT_EQ(logged.median, Median(logs)) << n << " " << kind;
      EXPECT_EQ(logged.robust_sigma, RobustSigma(logs)) << n << " " << kind;
    }
  }
  EXPECT_EQ(SummarizeSorted({}).median, 0.0);
  EXPECT_EQ(SummarizeSorted({}).robust_sigma, 0.0);
}

// √(π/2)·σ/√n: σ = 2, n = 8 → √(π/2)·2/√8 = √(π/2)/√2 = √π/2.
TEST(MedianStandardError, FollowsTheNormalAsymptote) {
  EXPECT_NEAR(MedianStandardError(2.0, 8), std::sqrt(std::numbers::pi) / 2, 1e-12);
  EXPECT_EQ(MedianStandardError(2.0, 0), 0.0);
}

}  // namespace
}  // namespace syncopate
