#include "libs/job/kept_evaluation.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace syncopate::job {
namespace {

// An evaluation whose validation AUC is `auc` with standard error `se` (test AUC = 1 - auc, so a
// test never chooses unnoticed).
v1::EvalStatus Validated(double auc, double se = 0.002, int64_t point = 0) {
  v1::EvalStatus eval;
  eval.set_point(point);
  eval.set_auc(1 - auc);
  eval.mutable_validation()->set_auc(auc);
  eval.mutable_validation()->set_auc_standard_error(se);
  eval.mutable_validation()->set_accuracy(auc);
  eval.mutable_validation()->set_examples(10000);
  return eval;
}

TEST(KeptEvaluationTest, KeepsTheBestValidationScoreNeverTheTestScore) {
  const std::vector<v1::EvalStatus> evals = {Validated(0.70), Validated(0.75), Validated(0.74)};
  EXPECT_EQ(KeptEvaluation(evals, "auc"), 1u);
  EXPECT_EQ(KeptEvaluation(evals, "accuracy"), 1u);
}

TEST(KeptEvaluationTest, TheEarliestWinsATie) {
  const std::vector<v1::EvalStatus> evals = {Validated(0.75), Validated(0.75)};
  EXPECT_EQ(KeptEvaluation(evals, "auc"), 0u);
}

TEST(KeptEvaluationTest, NothingIsKeptWithoutValidationScores) {
  std::vector<v1::EvalStatus> evals(3);
  evals[1].set_auc(0.9);
  EXPECT_FALSE(KeptEvaluation(evals, "auc").has_value());
  EXPECT_FALSE(ValidationScoreOf(evals[1], "auc").has_value());
  EXPECT_EQ(EarlyStopReason(evals, "auc"), "");
}

TEST(KeptEvaluationTest, AccuracyCarriesItsBinomialStandardError) {
  v1::EvalStatus eval;
  eval.mutable_validation()->set_accuracy(0.8);
  eval.mutable_validation()->set_examples(10000);
  const std::optional<ValidationScore> score = ValidationScoreOf(eval, "accuracy");
  ASSERT_TRUE(score.has_value());
  EXPECT_DOUBLE_EQ(score->value, 0.8);
  EXPECT_NEAR(score->standard_error, std::sqrt(0.8 * 0.2 / 10000), 1e-12);
}

TEST(KeptEvaluationTest, StopsAfterThreeEvaluationsClearlyWorseThanTheBest) {
  // SE 0.002: worse means more than 0.004 below the best (0.76).
  std::vector<v1::EvalStatus> evals = {Validated(0.74), Validated(0.76), Validated(0.75),
                                       Validated(0.75)};
  EXPECT_EQ(EarlyStopReason(evals, "auc"), "") << "two worse evaluations are not a trend";
  evals.push_back(Validated(0.757));  // within noise of the best: not worse
  EXPECT_EQ(EarlyStopReason(evals, "auc"), "");
  evals.push_back(Validated(0.75));
  evals.push_back(Validated(0.75));
  EXPECT_EQ(EarlyStopReason(evals, "auc"), "") << "the one within noise breaks the run";
  evals.push_back(Validated(0.74));
  const std::string reason = EarlyStopReason(evals, "auc");
  EXPECT_NE(reason, "");
  EXPECT_NE(reason.find("0.7600"), std::string::npos) << reason;
  EXPECT_NE(reason.find("0.7400"), std::string::npos) << reason;
}

TEST(KeptEvaluationTest, APlateauWithinNoiseNeverStops) {
  std::vector<v1::EvalStatus> evals = {Validated(0.760)};
  for (int i = 0; i < 20; ++i) evals.push_back(Validated(i % 2 == 0 ? 0.757 : 0.759));
  EXPECT_EQ(KeptEvaluation(evals, "auc"), 0u);
  EXPECT_EQ(EarlyStopReason(evals, "auc"), "");
}

TEST(KeptEvaluationTest, AnUnknownStandardErrorNeverStops) {
  const std::vector<v1::EvalStatus> evals = {Validated(0.8, 0), Validated(0.5, 0),
                                             Validated(0.5, 0), Validated(0.5, 0)};
  EXPECT_EQ(EarlyStopReason(evals, "auc"), "");
}

// Scenario: a long job's history, thinned to at most 20 here, decides exactly as the whole
// history would after every evaluation: the same kept evaluation and the same early stop. Half
// the runs have no examples to space the evaluations by.
TEST(KeptEvaluationTest, ThinningTheHistoryChangesNoDecision) {
  std::mt19937 rng(7);
  std::normal_distribution<double> step(0, 0.004);
  for (int run = 0; run < 20; ++run) {
    std::vector<v1::EvalStatus> all;
    std::vector<v1::EvalStatus> remembered;
    double auc = 0.70;
    for (int point = 1; point <= 300; ++point) {
      // A climb, then a random walk that sometimes falls away from its best.
      auc += point < 40 ? 0.002 : step(rng);
      all.push_back(Validated(auc, 0.002, point));
      if (run % 2 == 0) all.back().set_examples_at_eval(int64_t{1000} * point);
      remembered.push_back(all.back());
      ThinEvaluations(remembered, "auc", 20);
      ASSERT_LE(remembered.size(), 20u);
      const std::optional<size_t> kept_all = KeptEvaluation(all, "auc");
      const std::optional<size_t> kept_remembered = KeptEvaluation(remembered, "auc");
      ASSERT_TRUE(kept_all.has_value() && kept_remembered.has_value());
      ASSERT_EQ(all[*kept_all].point(), remembered[*kept_remembered].point()) << point;
      ASSERT_EQ(EarlyStopReason(all, "auc"), EarlyStopReason(remembered, "auc")) << point;
      EXPECT_EQ(remembered.back().point(), point);
    }
  }
}

// Scenario: 1000 evaluations without validation scores, 100 examples apart, thinned as they
// come: at most the limit remain, in order, and they still span the run evenly, from its first
// evaluation to its last.
TEST(KeptEvaluationTest, AThinnedHistorySpansTheWholeRun) {
  std::vector<v1::EvalStatus> evals;
  for (int point = 1; point <= 1000; ++point) {
    v1::EvalStatus& eval = evals.emplace_back();
    eval.set_point(point);
    eval.set_examples_at_eval(int64_t{100} * point);
    ThinEvaluations(evals, "auc", 64);
    ASSERT_LE(evals.size(), 64u);
  }
  EXPECT_GE(evals.size(), 32u);
  EXPECT_EQ(evals.front().point(), 1);
  EXPECT_EQ(evals.back().point(), 1000);
  int64_t widest_gap = 0;
  for (size_t i = 1; i < evals.size(); ++i) {
    ASSERT_GT(evals[i].point(), evals[i - 1].point());
    widest_gap = std::max(widest_gap, evals[i].point() - evals[i - 1].point());
  }
  // No stretch of the run is left bare: no gap wider than a tenth of it (three times the last
  // spacing, 1000 points / 32, bounds it: each thinning widens a gap by at most its spacing, and
  // the spacings double).
  EXPECT_LE(widest_gap, 100);
}

}  // namespace
}  // namespace syncopate::job
