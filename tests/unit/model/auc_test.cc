#include "libs/model/auc.h"

#include <cmath>
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

}  // namespace
}  // namespace syncopate::model
