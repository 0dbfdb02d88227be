#include "libs/job/eval_points.h"

#include "gtest/gtest.h"
#include "libs/job/job_spec.h"

namespace syncopate::job {
namespace {

// A resolved spec: k global batches of G between points.
v1::JobSpec Spec(int64_t k, int32_t global_batch) {
  v1::JobSpec spec;
  spec.set_global_batch(global_batch);
  spec.mutable_eval()->set_every_global_batches(k);
  return spec;
}

// The default job (G = 256, 60,000 training examples): 2 epochs are 469 global batches, k = 18,
// 4,608 examples trained between points, so a point scores ceil(0.3 x 4,608) = 1,383 of the test
// set's 10,000 (unbounded: 10,000 forwards against 3 x 4,608 = 13,824, i.e. 72% of training);
// 8 epochs: k = 75, 19,200 examples, 5,760.
TEST(EvalPointTestExamples, BoundsEvaluationToItsShareOfTraining) {
  v1::JobSpec two_epochs = Spec(0, 256);
  two_epochs.mutable_stop()->set_epochs(2);
  ResolveRunLength(two_epochs, 60000);
  ASSERT_EQ(two_epochs.eval().every_global_batches(), 18);
  EXPECT_EQ(EvalPointTestExamples(two_epochs), 1383);
  v1::JobSpec eight_epochs = Spec(0, 256);
  eight_epochs.mutable_stop()->set_epochs(8);
  ResolveRunLength(eight_epochs, 60000);
  ASSERT_EQ(eight_epochs.eval().every_global_batches(), 75);
  EXPECT_EQ(EvalPointTestExamples(eight_epochs), 5760);
  // Whatever k and G: a point's forwards are 10% of the training's 3 forwards per example,
  // rounded up to a whole example.
  for (const auto& [k, g] : {std::pair<int64_t, int32_t>{1, 1}, {7, 256}, {93, 512}, {1, 3}}) {
    const int64_t examples = EvalPointTestExamples(Spec(k, g));
    const int64_t budget = kEvalComputePercent * kForwardsPerTrainingExample * k * g;  // x 100
    EXPECT_GE(examples * 100, budget) << k << " x " << g;
    EXPECT_LT((examples - 1) * 100, budget) << k << " x " << g;
  }
}

// An explicit every_global_batches still places the points; the budget follows it. A job that
// evaluates by time, or an unresolved spec, scores the whole set.
TEST(EvalPointTestExamples, FollowsAnExplicitSpacingAndLeavesTimeToTheWholeSet) {
  v1::JobSpec chosen = Spec(7, 256);
  chosen.mutable_stop()->set_epochs(2);
  ResolveRunLength(chosen, 60000);
  EXPECT_EQ(chosen.eval().every_global_batches(), 7);
  EXPECT_EQ(EvalPointTestExamples(chosen), 538);  // ceil(0.3 x 1,792 = 537.6)
  v1::JobSpec by_time = Spec(18, 256);
  by_time.mutable_eval()->set_by_time(true);
  EXPECT_EQ(EvalPointTestExamples(by_time), 0);
  EXPECT_EQ(EvalPointTestExamples(Spec(0, 256)), 0);
  EXPECT_EQ(EvalPointTestExamples(Spec(18, 0)), 0);
}

// k: kEvalPointsPerRun points, at least one global batch apart, and at least one per epoch.
TEST(EvalPointSpacing, SpacesTwentyFivePointsButAtLeastOnePerEpoch) {
  EXPECT_EQ(EvalPointSpacing(1875, 235), 75);
  EXPECT_EQ(EvalPointSpacing(8, 8), 1);
  EXPECT_EQ(EvalPointSpacing(234375, 235), 235);
}

}  // namespace
}  // namespace syncopate::job
