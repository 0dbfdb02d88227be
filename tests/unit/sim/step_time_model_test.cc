#include "libs/sim/step_time_model.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/sim/sim_test_util.h"

namespace syncopate::sim {
namespace {

v1::SimSpec Base() {
  v1::SimSpec spec;
  spec.mutable_step_time()->set_seconds_per_step(0.01);
  spec.mutable_step_time()->set_seconds_per_example(0.001);
  return spec;
}

TEST(StepTimeModel, WithoutNoiseAStepIsFixedPlusPerExampleTimesTheSlowdowns) {
  v1::SimSpec spec = Base();
  v1::WorkerSpeed* speed = spec.add_speeds();
  speed->set_worker(3);
  speed->set_factor(4);
  v1::TransientSlowdown* slow = spec.add_slowdowns();
  slow->add_workers(1);
  slow->add_workers(3);
  slow->set_factor(2);
  slow->set_start_seconds(10);
  slow->set_end_seconds(20);
  absl::StatusOr<StepTimeModel> model = StepTimeModel::Create(spec, 4, 1);
  ASSERT_TRUE(model.ok()) << model.status();
  // (0.01 + 64 * 0.001) = 0.074 s.
  EXPECT_DOUBLE_EQ(model->ComputeSeconds(0, 64, 0), 0.074);
  EXPECT_DOUBLE_EQ(model->ComputeSeconds(3, 64, 0), 4 * 0.074);
  // Inside [10, 20): workers 1 and 3 are twice slower; the factors multiply.
  EXPECT_DOUBLE_EQ(model->ComputeSeconds(1, 64, 10), 2 * 0.074);
  EXPECT_DOUBLE_EQ(model->ComputeSeconds(3, 64, 19.9), 8 * 0.074);
  EXPECT_DOUBLE_EQ(model->ComputeSeconds(3, 64, 20), 4 * 0.074);
  EXPECT_DOUBLE_EQ(model->ComputeSeconds(2, 64, 15), 0.074);
}

TEST(StepTimeModel, SameSeedSameDrawsAndWorkersDrawFromTheirOwnStreams) {
  v1::SimSpec spec = Base();
  spec.mutable_step_time()->set_lognormal_sigma(0.3);
  spec.mutable_step_time()->set_hiccup_probability(0.1);
  spec.mutable_step_time()->set_hiccup_scale_seconds(0.05);
  spec.mutable_step_time()->set_hiccup_alpha(1.5);
  StepTimeModel a = *StepTimeModel::Create(spec, 2, 7);
  StepTimeModel b = *StepTimeModel::Create(spec, 2, 7);
  StepTimeModel c = *StepTimeModel::Create(spec, 2, 8);
  std::vector<double> from_a, from_b;
  bool differs_from_c = false;
  for (int i = 0; i < 100; ++i) {
    from_a.push_back(a.ComputeSeconds(0, 32, i));
    // b draws worker 1 in between: worker 0's sequence must not move.
    b.ComputeSeconds(1, 32, i);
    from_b.push_back(b.ComputeSeconds(0, 32, i));
    differs_from_c = differs_from_c || c.ComputeSeconds(0, 32, i) != from_a.back();
  }
  EXPECT_EQ(from_a, from_b);
  EXPECT_TRUE(differs_from_c);
}

TEST(StepTimeModel, LogNormalNoiseKeepsTheMeanAndHiccupsAddAHeavyTail) {
  v1::SimSpec spec = Base();
  spec.mutable_step_time()->set_seconds_per_example(0);
  spec.mutable_step_time()->set_seconds_per_step(1);
  spec.mutable_step_time()->set_lognormal_sigma(0.5);
  StepTimeModel noisy = *StepTimeModel::Create(spec, 1, 3);
  double sum = 0;
  constexpr int kDraws = 20000;
  for (int i = 0; i < kDraws; ++i) sum += noisy.ComputeSeconds(0, 1, 0);
  // exp(sigma Z - sigma^2/2) has mean 1 and sd sqrt(e^0.25 - 1) = 0.53: the mean of 20,000
  // draws lies within 0.02 of 1 (5 standard errors).
  EXPECT_NEAR(sum / kDraws, 1.0, 0.02);

  spec.mutable_step_time()->set_lognormal_sigma(0);
  spec.mutable_step_time()->set_hiccup_probability(0.5);
  spec.mutable_step_time()->set_hiccup_scale_seconds(1);
  spec.mutable_step_time()->set_hiccup_alpha(2);
  StepTimeModel hiccups = *StepTimeModel::Create(spec, 1, 3);
  int with_hiccup = 0;
  for (int i = 0; i < kDraws; ++i) {
    const double t = hiccups.ComputeSeconds(0, 1, 0);
    // A Pareto(x_m = 1) hiccup is at least 1 s on top of the 1 s step.
    if (t > 1) {
      ++with_hiccup;
      EXPECT_GE(t, 2.0);
    }
  }
  EXPECT_NEAR(static_cast<double>(with_hiccup) / kDraws, 0.5, 0.02);
}

TEST(StepTimeModel, MessagesTakeLatencyPlusBytesOverBandwidth) {
  v1::SimSpec spec = Base();
  spec.mutable_network()->set_latency_seconds(0.001);
  spec.mutable_network()->set_bandwidth_bytes_per_second(1e9);
  spec.mutable_shard()->set_seconds_per_message(0.0001);
  spec.mutable_shard()->set_bytes_per_second(2e9);
  StepTimeModel model = *StepTimeModel::Create(spec, 1, 1);
  EXPECT_DOUBLE_EQ(model.MessageSeconds(1000000), 0.001 + 0.001);
  EXPECT_DOUBLE_EQ(model.ShardServiceSeconds(1000000), 0.0001 + 0.0005);
}

TEST(StepTimeModel, RejectsWorkersOutsideTheJobAndNonsense) {
  v1::SimSpec spec = Base();
  spec.add_speeds()->set_worker(4);
  spec.mutable_speeds(0)->set_factor(2);
  absl::StatusOr<StepTimeModel> model = StepTimeModel::Create(spec, 4, 1);
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("speeds.worker"), std::string::npos);

  spec = Base();
  spec.mutable_step_time()->set_hiccup_probability(0.1);  // no alpha or scale
  EXPECT_FALSE(StepTimeModel::Create(spec, 4, 1).ok());

  spec = Base();
  v1::WorkerDeath* death = spec.add_deaths();
  death->set_worker(0);
  death->set_at_seconds(-1);
  EXPECT_FALSE(StepTimeModel::Create(spec, 4, 1).ok());

  EXPECT_FALSE(StepTimeModel::Create(v1::SimSpec(), 4, 1).ok());  // no step time at all
}

// Joins and deaths become lives: absent until a first join, a death ends a life, a join starts
// the next. Anything that does not alternate is refused, and so is a job nobody starts.
TEST(StepTimeModel, JoinsAndDeathsAlternateIntoLives) {
  v1::SimSpec spec = Base();
  auto join = [&spec](int worker, double at) { AddJoin(spec, worker, at); };
  auto die = [&spec](int worker, double at) { AddDeath(spec, worker, at); };
  join(1, 5);  // absent, joins at 5, dies at 7, rejoins at 9
  die(1, 7);
  join(1, 9);
  die(2, 3);  // there, dies at 3, rejoins at 4
  join(2, 4);
  absl::StatusOr<StepTimeModel> model = StepTimeModel::Create(spec, 4, 1);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ(model->Lives(0).size(), 1u);
  EXPECT_TRUE(model->Lives(0)[0].at_start);
  EXPECT_FALSE(model->Lives(0)[0].death.has_value());
  const std::vector<WorkerLife>& one = model->Lives(1);
  ASSERT_EQ(one.size(), 2u);
  EXPECT_FALSE(one[0].at_start);
  EXPECT_EQ(one[0].join_seconds, 5);
  ASSERT_TRUE(one[0].death.has_value());
  EXPECT_EQ(one[0].death->at_seconds(), 7);
  EXPECT_EQ(one[1].join_seconds, 9);
  EXPECT_FALSE(one[1].death.has_value());
  const std::vector<WorkerLife>& two = model->Lives(2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_TRUE(two[0].at_start);
  EXPECT_EQ(two[0].death->at_seconds(), 3);
  EXPECT_EQ(two[1].join_seconds, 4);

  spec = Base();
  join(0, 2);  // worker 0 is there from the start: a join needs a death before it
  absl::StatusOr<StepTimeModel> bad = StepTimeModel::Create(spec, 1, 1);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  spec = Base();
  die(0, 1);
  die(0, 2);  // dead already
  EXPECT_FALSE(StepTimeModel::Create(spec, 2, 1).ok());
  spec = Base();
  die(0, 1);
  join(0, 1);  // the same instant: no order
  EXPECT_FALSE(StepTimeModel::Create(spec, 2, 1).ok());
  spec = Base();
  join(0, 1);
  join(1, 1);  // nobody at the start
  bad = StepTimeModel::Create(spec, 2, 1);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("at the start"), std::string::npos);
  spec = Base();
  join(4, 1);  // no worker 4
  EXPECT_FALSE(StepTimeModel::Create(spec, 4, 1).ok());
}

}  // namespace
}  // namespace syncopate::sim
