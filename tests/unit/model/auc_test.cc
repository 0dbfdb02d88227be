#include "libs/model/auc.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "gtest/gtest.h"

namespace syncopate::model {
namespace {

TEST(MacroOneVsRestAuc, PerfectRankingIsOne) {
  // Two classes; class-1 scores separate the labels perfectly, and so do class-0 scores.
  const std::vector<float> scores = {0.9f, 0.1f, 0.8f, 0.2f, 0.3f, 0.7f, 0.4f, 0.6f};
  const std::vector<int32_t> labels = {0, 0, 1, 1};
  EXPECT_DOUBLE_EQ(MacroOneVsRestAuc(scores, labels, 2), 1.0);
}

TEST(MacroOneVsRestAuc, CountsTiesAsHalfAndAveragesClasses) {
  // Class 0: positives {a, b} scored 0.5, 0.2; negatives {c} scored 0.5 -> pairs (a,c) tie = 1/2,
  // (b,c) lost = 0 -> AUC 0.25. Class 1: positive {c} 0.9 beats negatives 0.1, 0.1 -> AUC 1.
  // Class 2 has no positives and is skipped. Mean = 0.625.
  const std::vector<float> scores = {0.5f, 0.1f, 0.0f,  //
                                     0.2f, 0.1f, 0.0f,  //
                                     0.5f, 0.9f, 0.0f};
  const std::vector<int32_t> labels = {0, 0, 1};
  EXPECT_DOUBLE_EQ(MacroOneVsRestAuc(scores, labels, 3), 0.625);
}

TEST(MacroOneVsRestAuc, ReversedRankingIsZeroAndOneClassIsUndefined) {
  const std::vector<float> scores = {0.1f, 0.9f, 0.9f, 0.1f};
  EXPECT_DOUBLE_EQ(MacroOneVsRestAuc(scores, std::vector<int32_t>{0, 1}, 2), 0.0);
  EXPECT_TRUE(std::isnan(MacroOneVsRestAuc(scores, std::vector<int32_t>{1, 1}, 2)));
}

// The definition itself: over all (positive, negative) pairs, 1 if the positive scores higher,
// 1/2 on a tie. O(n^2), for checking the O(n log n) rank computation.
double BruteForceAuc(const std::vector<float>& scores, const std::vector<float>& labels) {
  double wins = 0;
  int64_t pairs = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (labels[i] != 1.0f) continue;
    for (size_t j = 0; j < scores.size(); ++j) {
      if (labels[j] != 0.0f) continue;
      ++pairs;
      if (scores[i] > scores[j]) wins += 1;
      if (scores[i] == scores[j]) wins += 0.5;
    }
  }
  return wins / static_cast<double>(pairs);
}

TEST(BinaryAuc, MatchesPairCountOnRandomDataWithManyTies) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  for (int trial = 0; trial < 5; ++trial) {
    std::vector<float> scores(2000);
    std::vector<float> labels(2000);
    for (size_t i = 0; i < scores.size(); ++i) {
      labels[i] = uniform(rng) < 0.3f ? 1.0f : 0.0f;
      // Informative but noisy, rounded to 0.1: eleven distinct scores, so nearly every pair of
      // examples shares its score with hundreds of others.
      const float raw = 0.4f * labels[i] + 0.8f * uniform(rng);
      scores[i] = std::round(raw * 10.0f) / 10.0f;
    }
    const double expected = BruteForceAuc(scores, labels);
    EXPECT_GT(expected, 0.6);
    EXPECT_NEAR(BinaryAuc(scores, labels), expected, 1e-12) << "trial " << trial;
  }
}

TEST(BinaryAuc, PerfectReversedAndAllTied) {
  const std::vector<float> labels = {0, 0, 1, 1};
  EXPECT_DOUBLE_EQ(BinaryAuc(std::vector<float>{0.1f, 0.2f, 0.3f, 0.4f}, labels), 1.0);
  EXPECT_DOUBLE_EQ(BinaryAuc(std::vector<float>{0.4f, 0.3f, 0.2f, 0.1f}, labels), 0.0);
  EXPECT_DOUBLE_EQ(BinaryAuc(std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f}, labels), 0.5);
}

TEST(BinaryAuc, UndefinedWithoutBothClassesOrWithMismatchedSizes) {
  EXPECT_TRUE(std::isnan(BinaryAuc(std::vector<float>{}, std::vector<float>{})));
  EXPECT_TRUE(std::isnan(BinaryAuc(std::vector<float>{0.1f, 0.9f}, std::vector<float>{1, 1})));
  EXPECT_TRUE(std::isnan(BinaryAuc(std::vector<float>{0.1f, 0.9f}, std::vector<float>{0, 0})));
  EXPECT_TRUE(std::isnan(BinaryAuc(std::vector<float>{0.1f}, std::vector<float>{0, 1})));
}

TEST(BinaryAuc, NanScoresRankLowestAndTieWithEachOther) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Positive NaN vs negatives {0.2, NaN}: loses to 0.2, ties NaN. Positive 0.9 beats both.
  // (0 + 0.5 + 1 + 1) / 4.
  EXPECT_DOUBLE_EQ(
      BinaryAuc(std::vector<float>{nan, 0.9f, 0.2f, nan}, std::vector<float>{1, 1, 0, 0}), 0.625);
}

TEST(LogLoss, MatchesDefinitionAndClampsCertainMisses) {
  const std::vector<float> p = {0.8f, 0.25f};
  const std::vector<float> y = {1, 0};
  EXPECT_NEAR(LogLoss(p, y), -(std::log(0.8) + std::log(0.75)) / 2, 1e-6);
  // p = 0 for a positive costs -log(1e-7), not infinity.
  EXPECT_NEAR(LogLoss(std::vector<float>{0.0f}, std::vector<float>{1}), -std::log(1e-7), 1e-9);
  EXPECT_NEAR(LogLoss(std::vector<float>{1.0f}, std::vector<float>{0}), -std::log(1e-7), 1e-6);
  EXPECT_TRUE(std::isnan(LogLoss(std::vector<float>{}, std::vector<float>{})));
  EXPECT_TRUE(std::isnan(LogLoss(std::vector<float>{0.5f}, std::vector<float>{0, 1})));
}

}  // namespace
}  // namespace syncopate::model

namespace syncopate::model {
namespace {

// Scores spread like a CTR model's (a logistic of a normal logit) with labels drawn from them.
void CtrLikeScores(int n, uint64_t seed, std::vector<float>& scores, std::vector<float>& labels) {
  std::mt19937_64 random(seed);
  std::normal_distribution<double> logit(-1.2, 1.0);
  std::uniform_real_distribution<double> uniform(0, 1);
  scores.resize(static_cast<size_t>(n));
  labels.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    scores[i] = static_cast<float>(1 / (1 + std::exp(-logit(random))));
    labels[i] = uniform(random) < scores[i] ? 1.0f : 0.0f;
  }
}

TEST(StreamingAuc, ExactUpToItsLimitThenWithinOneInTenThousand) {
  std::vector<float> scores, labels;
  CtrLikeScores(300000, 3, scores, labels);
  const double exact = BinaryAuc(scores, labels);
  // Up to the limit, chunk by chunk: the same value as BinaryAuc, bit for bit.
  StreamingAuc whole(300000);
  for (size_t begin = 0; begin < scores.size(); begin += 8192) {
    const size_t n = std::min<size_t>(8192, scores.size() - begin);
    whole.Add(std::span(scores).subspan(begin, n), std::span(labels).subspan(begin, n));
  }
  EXPECT_TRUE(whole.exact());
  EXPECT_EQ(whole.Auc(), exact);
  EXPECT_EQ(whole.examples(), 300000);
  // Past it, the histogram: within 1e-4 of the exact value.
  StreamingAuc bounded(50000);
  for (size_t begin = 0; begin < scores.size(); begin += 8192) {
    const size_t n = std::min<size_t>(8192, scores.size() - begin);
    bounded.Add(std::span(scores).subspan(begin, n), std::span(labels).subspan(begin, n));
  }
  EXPECT_FALSE(bounded.exact());
  EXPECT_NEAR(bounded.Auc(), exact, 1e-4);
  EXPECT_NE(bounded.Auc(), exact);  // it is the histogram that answered
}

TEST(StreamingAuc, HistogramKeepsTiesNanAndTheUndefinedCase) {
  StreamingAuc auc(0);  // histogram from the first example
  EXPECT_TRUE(std::isnan(auc.Auc()));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // NaN ranks lowest, 0 and negatives next, 1 and above highest; equal scores tie.
  const std::vector<float> scores = {nan, -1.0f, 0.25f, 0.25f, 2.0f, 0.5f};
  const std::vector<float> labels = {0, 0, 1, 0, 1, 1};
  auc.Add(scores, labels);
  EXPECT_FALSE(auc.exact());
  EXPECT_DOUBLE_EQ(auc.Auc(), BinaryAuc(scores, labels));
  StreamingAuc one_class(0);
  one_class.Add(std::vector<float>{0.1f, 0.9f}, std::vector<float>{1, 1});
  EXPECT_TRUE(std::isnan(one_class.Auc()));
}

// The Hanley-McNeil standard error against the spread it predicts: the AUCs of one CTR-like
// model measured on 300 independent validation samples of 2,000 examples.
TEST(StreamingAuc, StandardErrorMatchesTheSpreadOverSamples) {
  std::vector<float> scores, labels;
  std::vector<double> aucs;
  double predicted = 0;
  for (uint64_t sample = 0; sample < 300; ++sample) {
    CtrLikeScores(2000, 100 + sample, scores, labels);
    StreamingAuc auc;
    auc.Add(scores, labels);
    aucs.push_back(auc.Auc());
    predicted +=
        AucStandardError(aucs.back(), auc.positives(), auc.examples() - auc.positives()) / 300;
    EXPECT_EQ(auc.positives(), std::count(labels.begin(), labels.end(), 1.0f));
  }
  double mean = 0;
  for (double a : aucs) mean += a / static_cast<double>(aucs.size());
  double variance = 0;
  for (double a : aucs) variance += (a - mean) * (a - mean) / static_cast<double>(aucs.size() - 1);
  // 300 samples estimate a standard deviation within ~4% (1 sigma); the formula's exponential
  // approximation adds a little: agree within 15%.
  EXPECT_NEAR(predicted / std::sqrt(variance), 1.0, 0.15)
      << "predicted " << predicted << ", measured " << std::sqrt(variance);
}

TEST(AucStandardError, ZeroWithoutBothClassesAndShrinksWithTheSample) {
  EXPECT_EQ(AucStandardError(0.75, 0, 100), 0);
  EXPECT_EQ(AucStandardError(0.75, 100, 0), 0);
  EXPECT_EQ(AucStandardError(std::nan(""), 100, 100), 0);
  const double small = AucStandardError(0.75, 100, 300);
  const double large = AucStandardError(0.75, 10000, 30000);
  EXPECT_GT(small, 0);
  EXPECT_NEAR(small / large, 10.0, 0.5);  // ~ 1 / sqrt(n)
}

}  // namespace
}  // namespace syncopate::model
