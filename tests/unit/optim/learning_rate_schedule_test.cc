#include "libs/optim/learning_rate_schedule.h"

#include <cmath>
#include <numbers>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "libs/optim/optimizer.h"

namespace syncopate::optim {
namespace {

using Spec = ::syncopate::v1::LearningRateSchedule;

LearningRateSchedule Make(const Spec& spec, float peak = 0.1f) {
  absl::StatusOr<LearningRateSchedule> schedule = LearningRateSchedule::Create(spec, peak);
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  return *schedule;
}

TEST(LearningRateSchedule, UnsetIsConstant) {
  const LearningRateSchedule schedule = Make(Spec());
  for (double t : {0.0, 1.0, 1e6}) EXPECT_FLOAT_EQ(schedule.At(t), 0.1f);
}

TEST(LearningRateSchedule, LinearWarmupReachesThePeak) {
  Spec spec;
  spec.set_decay(Spec::CONSTANT);
  spec.set_warmup_updates(9);
  const LearningRateSchedule schedule = Make(spec);
  EXPECT_FLOAT_EQ(schedule.At(0), 0.01f);  // peak / (warmup + 1): the first update moves
  EXPECT_FLOAT_EQ(schedule.At(4), 0.05f);
  EXPECT_FLOAT_EQ(schedule.At(9), 0.1f);
  EXPECT_FLOAT_EQ(schedule.At(100), 0.1f);
}

TEST(LearningRateSchedule, CosineDecaysToTheFinalFractionAndStays) {
  Spec spec;
  spec.set_decay(Spec::COSINE);
  spec.set_warmup_updates(10);
  spec.set_total_updates(110);
  spec.set_final_fraction(0.1f);
  const LearningRateSchedule schedule = Make(spec, 1.0f);
  EXPECT_FLOAT_EQ(schedule.At(10), 1.0f);
  EXPECT_NEAR(schedule.At(60), 0.1 + 0.9 * 0.5, 1e-6);  // half way: cos(pi/2) = 0
  EXPECT_NEAR(schedule.At(35), 0.1 + 0.9 * (1 + std::cos(std::numbers::pi / 4)) / 2, 1e-6);
  EXPECT_NEAR(schedule.At(110), 0.1, 1e-6);
  EXPECT_NEAR(schedule.At(1e9), 0.1, 1e-6);
}

TEST(LearningRateSchedule, LinearAndStepDecay) {
  Spec linear;
  linear.set_decay(Spec::LINEAR);
  linear.set_total_updates(100);
  EXPECT_NEAR(Make(linear, 1.0f).At(25), 0.75, 1e-6);
  EXPECT_NEAR(Make(linear, 1.0f).At(100), 0.0, 1e-6);
  Spec step;
  step.set_decay(Spec::STEP);
  step.set_warmup_updates(5);
  step.set_step_updates(10);
  const LearningRateSchedule steps = Make(step, 1.0f);  // gamma defaults to 0.1
  EXPECT_FLOAT_EQ(steps.At(14.9), 1.0f);
  EXPECT_FLOAT_EQ(steps.At(15), 0.1f);
  EXPECT_NEAR(steps.At(35), 0.001, 1e-7);
}

TEST(LearningRateSchedule, UnresolvedLengthDoesNotDecay) {
  Spec spec;
  spec.set_decay(Spec::COSINE);
  EXPECT_FLOAT_EQ(Make(spec).At(1e6), 0.1f);
}

TEST(LearningRateSchedule, BadSpecsGetOneLineNamingTheField) {
  struct Case {
    Spec spec;
    std::string field;
  };
  std::vector<Case> cases;
  Spec s;
  s.set_warmup_updates(-1);
  cases.push_back({s, "optimizer.schedule.warmup_updates"});
  s = Spec();
  s.set_decay(Spec::COSINE);
  s.set_warmup_updates(10);
  s.set_total_updates(10);
  cases.push_back({s, "optimizer.schedule.total_updates"});
  s = Spec();
  s.set_final_fraction(1.5f);
  cases.push_back({s, "optimizer.schedule.final_fraction"});
  s = Spec();
  s.set_final_fraction(NAN);
  cases.push_back({s, "optimizer.schedule.final_fraction"});
  s = Spec();
  s.set_decay(Spec::STEP);
  cases.push_back({s, "optimizer.schedule.step_updates"});
  s.set_step_updates(10);
  s.set_step_gamma(2);
  cases.push_back({s, "optimizer.schedule.step_gamma"});
  s = Spec();
  s.set_warmup_fraction(1.0f);
  cases.push_back({s, "optimizer.schedule.warmup_fraction"});
  s.set_warmup_fraction(0.1f);
  s.set_warmup_updates(10);
  cases.push_back({s, "optimizer.schedule.warmup_fraction"});
  s = Spec();
  s.set_decay(static_cast<Spec::Decay>(42));
  cases.push_back({s, "optimizer.schedule.decay"});
  for (const Case& c : cases) {
    absl::StatusOr<LearningRateSchedule> schedule = LearningRateSchedule::Create(c.spec, 0.1f);
    ASSERT_FALSE(schedule.ok()) << c.spec.ShortDebugString();
    EXPECT_TRUE(absl::IsInvalidArgument(schedule.status()));
    EXPECT_TRUE(absl::StartsWith(schedule.status().message(), c.field)) << schedule.status();
    EXPECT_FALSE(absl::StrContains(schedule.status().message(), "\n"));
  }
}

// The optimizer applies the scheduled rate and advances by the global batches each update
// consumed: an async-sized update (a quarter of G) moves the schedule a quarter as far.
TEST(Optimizer, AppliesTheScheduleByGlobalBatchesConsumed) {
  v1::OptimizerSpec spec;
  spec.set_kind(v1::OptimizerSpec::SGD);
  spec.set_learning_rate(1.0f);
  spec.mutable_schedule()->set_decay(Spec::LINEAR);
  spec.mutable_schedule()->set_total_updates(4);
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = CreateOptimizer(spec, 1);
  ASSERT_TRUE(optimizer.ok()) << optimizer.status();
  std::vector<float> p = {0.0f};
  const std::vector<float> g = {1.0f};
  EXPECT_FLOAT_EQ((*optimizer)->Apply(p, g).learning_rate, 1.0f);  // progress 0 -> 1
  EXPECT_FLOAT_EQ(p[0], -1.0f);
  const Step second = (*optimizer)->Apply(p, g, 0.25);  // at progress 1: rate 0.75
  EXPECT_EQ(second.index, 2);
  EXPECT_FLOAT_EQ(second.learning_rate, 0.75f);
  EXPECT_FLOAT_EQ(p[0], -1.75f);
  EXPECT_DOUBLE_EQ((*optimizer)->progress(), 1.25);
  EXPECT_FLOAT_EQ((*optimizer)->NextStep().learning_rate, 0.6875f);
  (*optimizer)->set_progress(4);  // a restored checkpoint resumes the schedule where it was
  EXPECT_FLOAT_EQ((*optimizer)->NextStep().learning_rate, 0.0f);
}

TEST(Optimizer, RefusesABadScheduleWithTheFieldName) {
  v1::OptimizerSpec spec;
  spec.set_kind(v1::OptimizerSpec::SGD);
  spec.set_learning_rate(0.1f);
  spec.mutable_schedule()->set_decay(Spec::STEP);
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = CreateOptimizer(spec, 1);
  ASSERT_FALSE(optimizer.ok());
  EXPECT_TRUE(absl::StrContains(optimizer.status().message(), "optimizer.schedule.step_updates"));
}

}  // namespace
}  // namespace syncopate::optim
