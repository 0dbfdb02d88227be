#include "libs/optim/optimizer.h"

#include <vector>

#include "gtest/gtest.h"

namespace syncopate::optim {
namespace {

v1::OptimizerSpec Spec(v1::OptimizerSpec::Kind kind, float lr, float momentum = 0,
                       bool nesterov = false) {
  v1::OptimizerSpec spec;
  spec.set_kind(kind);
  spec.set_learning_rate(lr);
  spec.set_momentum(momentum);
  spec.set_nesterov(nesterov);
  return spec;
}

TEST(Sgd, StepsAgainstTheGradient) {
  auto opt = CreateOptimizer(Spec(v1::OptimizerSpec::SGD, 0.5f), 2);
  ASSERT_TRUE(opt.ok());
  std::vector<float> p = {1.0f, -1.0f};
  const std::vector<float> g = {2.0f, -4.0f};
  (*opt)->Apply(p, g);
  EXPECT_FLOAT_EQ(p[0], 0.0f);
  EXPECT_FLOAT_EQ(p[1], 1.0f);
  EXPECT_EQ((*opt)->state_bytes(), 0);
}

TEST(Momentum, AccumulatesVelocityLikePyTorch) {
  auto opt = CreateOptimizer(Spec(v1::OptimizerSpec::MOMENTUM, 0.1f, 0.9f), 1);
  ASSERT_TRUE(opt.ok());
  std::vector<float> p = {0.0f};
  const std::vector<float> g = {1.0f};
  (*opt)->Apply(p, g);  // v = 1, p = -0.1
  EXPECT_FLOAT_EQ(p[0], -0.1f);
  (*opt)->Apply(p, g);  // v = 1.9, p = -0.29
  EXPECT_FLOAT_EQ(p[0], -0.29f);
  EXPECT_EQ((*opt)->state_bytes(), 4);
}

TEST(Momentum, NesterovLooksAhead) {
  auto opt = CreateOptimizer(Spec(v1::OptimizerSpec::MOMENTUM, 0.1f, 0.9f, true), 1);
  ASSERT_TRUE(opt.ok());
  std::vector<float> p = {0.0f};
  const std::vector<float> g = {1.0f};
  (*opt)->Apply(p, g);  // v = 1, p -= 0.1 * (1 + 0.9)
  EXPECT_FLOAT_EQ(p[0], -0.19f);
  EXPECT_EQ((*opt)->name(), "nesterov");
}

// The buffer-aware look-ahead's formulas (ADR 0007), heavy ball lr 0.1, mu 0.9, after one update
// with g = 1 (v = 1, p = -0.1):
TEST(LookAheadPending, ServesThePendingUpdatesParametersThenTheDrift) {
  auto opt = CreateOptimizer(Spec(v1::OptimizerSpec::MOMENTUM, 0.1f, 0.9f), 1);
  ASSERT_TRUE(opt.ok());
  std::vector<float> p = {0.0f};
  const std::vector<float> g = {1.0f};
  (*opt)->Apply(p, g);
  std::vector<float> out(1);
  // landing 0 (a fresh gradient): the parameters as they are.
  (*opt)->LookAheadPending(p, g, 0, out);
  EXPECT_EQ(out[0], p[0]);
  // landing 1 with the pending mean 0.5: the update the shard would apply, v' = 0.9 + 0.5,
  // p - 0.1 * 1.4 = -0.24.
  const std::vector<float> pending = {0.5f};
  (*opt)->LookAheadPending(p, pending, 1, out);
  EXPECT_FLOAT_EQ(out[0], -0.24f);
  // landing 2: one more update of drift, -0.1 * 0.9 * 1.4.
  (*opt)->LookAheadPending(p, pending, 2, out);
  EXPECT_FLOAT_EQ(out[0], -0.24f - 0.126f);
  // Nothing buffered: the velocity's drift alone, -0.1 * 0.9 * v for one update.
  (*opt)->LookAheadPending(p, {}, 1, out);
  EXPECT_FLOAT_EQ(out[0], -0.1f - 0.09f);
  // The optimizer's own state is untouched: the next real update is as if none of this happened.
  (*opt)->Apply(p, g);
  EXPECT_FLOAT_EQ(p[0], -0.29f);
}

TEST(CreateOptimizer, RejectsBadSpecsWithTheFieldName) {
  auto bad_lr = CreateOptimizer(Spec(v1::OptimizerSpec::SGD, 0.0f), 1);
  EXPECT_EQ(bad_lr.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_lr.status().message().find("learning_rate"), std::string::npos);
  auto bad_mu = CreateOptimizer(Spec(v1::OptimizerSpec::MOMENTUM, 0.1f, 1.5f), 1);
  EXPECT_NE(bad_mu.status().message().find("momentum"), std::string::npos);
  auto no_kind = CreateOptimizer(Spec(v1::OptimizerSpec::KIND_UNSPECIFIED, 0.1f), 1);
  EXPECT_EQ(no_kind.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace syncopate::optim
