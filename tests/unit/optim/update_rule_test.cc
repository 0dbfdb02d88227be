#include "libs/optim/update_rule.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "libs/optim/optimizer.h"

namespace syncopate::optim {
namespace {

using ::syncopate::v1::OptimizerSpec;

OptimizerSpec Spec(OptimizerSpec::Kind kind, float lr) {
  OptimizerSpec spec;
  spec.set_kind(kind);
  spec.set_learning_rate(lr);
  return spec;
}

std::unique_ptr<UpdateRule> Rule(const OptimizerSpec& spec) {
  absl::StatusOr<std::unique_ptr<UpdateRule>> rule = CreateUpdateRule(spec);
  EXPECT_TRUE(rule.ok()) << rule.status();
  return rule.ok() ? std::move(*rule) : nullptr;
}

// One parameter vector with its slots, as a shard or an embedding row holds them.
struct Block {
  Block(const UpdateRule& rule, std::vector<float> values) : params(std::move(values)) {
    for (int s = 0; s < rule.num_slots(); ++s) {
      slots.emplace_back(params.size(), rule.slot_initial_value(s));
    }
  }
  void Apply(const UpdateRule& rule, const std::vector<float>& grad, int64_t step) {
    std::vector<std::span<float>> views(slots.begin(), slots.end());
    rule.Apply(params, grad, views, step);
  }
  std::vector<float> params;
  std::vector<std::vector<float>> slots;
};

TEST(UpdateRule, NamesSlotsAndInitialValues) {
  struct Case {
    OptimizerSpec spec;
    std::string name;
    int slots;
    float initial;
  };
  OptimizerSpec nesterov = Spec(OptimizerSpec::MOMENTUM, 0.1f);
  nesterov.set_nesterov(true);
  OptimizerSpec adagrad = Spec(OptimizerSpec::ADAGRAD, 0.1f);
  adagrad.set_initial_accumulator(0.25f);
  for (const Case& c : {Case{Spec(OptimizerSpec::SGD, 0.1f), "sgd", 0, 0.0f},
                        Case{Spec(OptimizerSpec::MOMENTUM, 0.1f), "momentum", 1, 0.0f},
                        Case{nesterov, "nesterov", 1, 0.0f},
                        Case{Spec(OptimizerSpec::ADAGRAD, 0.1f), "adagrad", 1, 0.1f},
                        Case{adagrad, "adagrad", 1, 0.25f},
                        Case{Spec(OptimizerSpec::ADAM, 0.1f), "adam", 2, 0.0f}}) {
    std::unique_ptr<UpdateRule> rule = Rule(c.spec);
    ASSERT_NE(rule, nullptr);
    EXPECT_EQ(rule->name(), c.name);
    EXPECT_EQ(rule->num_slots(), c.slots) << c.name;
    for (int s = 0; s < rule->num_slots(); ++s) {
      EXPECT_FLOAT_EQ(rule->slot_initial_value(s), c.initial) << c.name << " slot " << s;
    }
  }
}

TEST(UpdateRule, SgdStepsAgainstTheGradient) {
  std::unique_ptr<UpdateRule> rule = Rule(Spec(OptimizerSpec::SGD, 0.5f));
  Block block(*rule, {1.0f});
  block.Apply(*rule, {2.0f}, 1);  // 1 - 0.5*2
  EXPECT_FLOAT_EQ(block.params[0], 0.0f);
  block.Apply(*rule, {-1.0f}, 2);  // 0 + 0.5
  EXPECT_FLOAT_EQ(block.params[0], 0.5f);
}

TEST(UpdateRule, MomentumAndNesterovMatchHandComputedSteps) {
  OptimizerSpec spec = Spec(OptimizerSpec::MOMENTUM, 0.1f);
  spec.set_momentum(0.9f);
  std::unique_ptr<UpdateRule> momentum = Rule(spec);
  Block heavy_ball(*momentum, {0.0f});
  // v = 1, 1.9, 2.71; p = -0.1, -0.29, -0.561.
  for (int64_t t = 1; t <= 3; ++t) heavy_ball.Apply(*momentum, {1.0f}, t);
  EXPECT_NEAR(heavy_ball.params[0], -0.561f, 1e-6);
  EXPECT_NEAR(heavy_ball.slots[0][0], 2.71f, 1e-6);

  spec.set_nesterov(true);
  std::unique_ptr<UpdateRule> nesterov = Rule(spec);
  Block look_ahead(*nesterov, {0.0f});
  // v = 1, p = -0.1*(1 + 0.9) = -0.19; v = 1.9, p = -0.19 - 0.1*(1 + 1.71) = -0.461.
  look_ahead.Apply(*nesterov, {1.0f}, 1);
  look_ahead.Apply(*nesterov, {1.0f}, 2);
  EXPECT_NEAR(look_ahead.params[0], -0.461f, 1e-6);
}

TEST(UpdateRule, AdagradStartsFromTheInitialAccumulator) {
  std::unique_ptr<UpdateRule> rule = Rule(Spec(OptimizerSpec::ADAGRAD, 0.1f));
  Block block(*rule, {1.0f});
  // acc = 0.1 + g^2; p -= 0.1 * g / (sqrt(acc) + 1e-7), by hand (double precision).
  block.Apply(*rule, {1.0f}, 1);
  EXPECT_NEAR(block.slots[0][0], 1.1f, 1e-6);
  EXPECT_NEAR(block.params[0], 0.90465375, 1e-6);
  block.Apply(*rule, {2.0f}, 2);
  EXPECT_NEAR(block.slots[0][0], 5.1f, 1e-6);
  EXPECT_NEAR(block.params[0], 0.816092266, 1e-6);
  block.Apply(*rule, {-0.5f}, 3);
  EXPECT_NEAR(block.slots[0][0], 5.35f, 1e-6);
  EXPECT_NEAR(block.params[0], 0.83770915, 1e-6);
}

TEST(UpdateRule, AdagradHonoursExplicitAccumulatorAndEpsilon) {
  OptimizerSpec spec = Spec(OptimizerSpec::ADAGRAD, 1.0f);
  spec.set_initial_accumulator(3.0f);
  spec.set_epsilon(1.0f);
  std::unique_ptr<UpdateRule> rule = Rule(spec);
  Block block(*rule, {0.0f});
  block.Apply(*rule, {1.0f}, 1);  // acc = 4, p = -1 / (2 + 1)
  EXPECT_FLOAT_EQ(block.params[0], -1.0f / 3.0f);
}

TEST(UpdateRule, AdamMatchesHandComputedSteps) {
  std::unique_ptr<UpdateRule> rule = Rule(Spec(OptimizerSpec::ADAM, 0.01f));
  Block block(*rule, {0.0f});
  // TensorFlow's formulation with b1 0.9, b2 0.999, eps 1e-8, computed by hand in double.
  const std::vector<float> grads = {0.5f, -2.0f, 1.0f};
  const std::vector<double> params = {-0.00999999368, -0.00440495959, -0.00330322311};
  const std::vector<double> m = {0.05, -0.155, -0.0395};
  const std::vector<double> v = {0.00025, 0.00424975, 0.00524550025};
  for (size_t t = 0; t < grads.size(); ++t) {
    block.Apply(*rule, {grads[t]}, static_cast<int64_t>(t + 1));
    EXPECT_NEAR(block.params[0], params[t], 1e-7) << "step " << t + 1;
    EXPECT_NEAR(block.slots[0][0], m[t], 1e-7) << "step " << t + 1;
    EXPECT_NEAR(block.slots[1][0], v[t], 1e-7) << "step " << t + 1;
  }
}

TEST(UpdateRule, AdamFirstStepMovesByTheLearningRateAgainstTheGradientSign) {
  // At t = 1 the bias corrections make m/sqrt(v) = g/|g|: the step is lr whatever |g| is, up
  // to epsilon's share (1e-8 against sqrt(1 - b2) * |g|, under 1e-5 relative here).
  std::unique_ptr<UpdateRule> rule = Rule(Spec(OptimizerSpec::ADAM, 0.001f));
  Block block(*rule, {0.0f, 0.0f, 0.0f, 0.0f});
  block.Apply(*rule, {0.05f, -5.0f, 300.0f, -0.02f}, 1);
  EXPECT_NEAR(block.params[0], -0.001f, 1e-7);
  EXPECT_NEAR(block.params[1], 0.001f, 1e-7);
  EXPECT_NEAR(block.params[2], -0.001f, 1e-7);
  EXPECT_NEAR(block.params[3], 0.001f, 1e-7);
}

TEST(UpdateRule, AdamBiasCorrectionUsesTheGivenStep) {
  // A sparse row first touched at global step 1000 (LazyAdam): fresh moments, but the bias
  // correction of step 1000, lr*sqrt(1-b2^1000)/(1-b1^1000) * 0.1/sqrt(0.001), by hand.
  std::unique_ptr<UpdateRule> rule = Rule(Spec(OptimizerSpec::ADAM, 0.01f));
  Block block(*rule, {0.0f});
  block.Apply(*rule, {1.0f}, 1000);
  EXPECT_NEAR(block.params[0], -0.0251456592, 1e-7);
}

TEST(UpdateRule, ZeroFieldsTakeTheDocumentedDefaults) {
  OptimizerSpec explicit_adam = Spec(OptimizerSpec::ADAM, 0.01f);
  explicit_adam.set_beta1(0.9f);
  explicit_adam.set_beta2(0.999f);
  explicit_adam.set_epsilon(1e-8f);
  OptimizerSpec explicit_adagrad = Spec(OptimizerSpec::ADAGRAD, 0.01f);
  explicit_adagrad.set_epsilon(1e-7f);
  explicit_adagrad.set_initial_accumulator(0.1f);
  const std::vector<std::pair<OptimizerSpec, OptimizerSpec>> pairs = {
      {Spec(OptimizerSpec::ADAM, 0.01f), explicit_adam},
      {Spec(OptimizerSpec::ADAGRAD, 0.01f), explicit_adagrad}};
  for (const auto& [defaulted, spelled_out] : pairs) {
    std::unique_ptr<UpdateRule> a = Rule(defaulted);
    std::unique_ptr<UpdateRule> b = Rule(spelled_out);
    Block x(*a, {0.5f, -0.5f});
    Block y(*b, {0.5f, -0.5f});
    for (int64_t t = 1; t <= 3; ++t) {
      x.Apply(*a, {0.3f, -1e-4f}, t);
      y.Apply(*b, {0.3f, -1e-4f}, t);
    }
    EXPECT_EQ(x.params, y.params) << a->name();
    EXPECT_EQ(x.slots, y.slots) << a->name();
  }
}

TEST(CreateUpdateRule, RejectsBadSpecsNamingTheField) {
  struct Case {
    OptimizerSpec spec;
    std::string field;
  };
  std::vector<Case> cases;
  cases.push_back({Spec(OptimizerSpec::SGD, 0.0f), "learning_rate"});
  cases.push_back({Spec(OptimizerSpec::ADAM, -1.0f), "learning_rate"});
  cases.push_back({Spec(OptimizerSpec::ADAGRAD, INFINITY), "learning_rate"});
  cases.push_back({Spec(OptimizerSpec::SGD, NAN), "learning_rate"});
  OptimizerSpec spec = Spec(OptimizerSpec::MOMENTUM, 0.1f);
  spec.set_momentum(1.0f);
  cases.push_back({spec, "momentum"});
  spec = Spec(OptimizerSpec::ADAM, 0.1f);
  spec.set_beta1(1.0f);
  cases.push_back({spec, "beta1"});
  spec = Spec(OptimizerSpec::ADAM, 0.1f);
  spec.set_beta1(-0.1f);
  cases.push_back({spec, "beta1"});
  spec = Spec(OptimizerSpec::ADAM, 0.1f);
  spec.set_beta2(1.5f);
  cases.push_back({spec, "beta2"});
  spec = Spec(OptimizerSpec::ADAM, 0.1f);
  spec.set_epsilon(-1e-8f);
  cases.push_back({spec, "epsilon"});
  spec = Spec(OptimizerSpec::ADAGRAD, 0.1f);
  spec.set_epsilon(NAN);
  cases.push_back({spec, "epsilon"});
  spec = Spec(OptimizerSpec::ADAGRAD, 0.1f);
  spec.set_initial_accumulator(-0.1f);
  cases.push_back({spec, "initial_accumulator"});
  cases.push_back({Spec(OptimizerSpec::KIND_UNSPECIFIED, 0.1f), "kind"});
  cases.push_back({Spec(static_cast<OptimizerSpec::Kind>(99), 0.1f), "kind"});
  for (const Case& c : cases) {
    absl::StatusOr<std::unique_ptr<UpdateRule>> rule = CreateUpdateRule(c.spec);
    ASSERT_FALSE(rule.ok()) << c.spec.ShortDebugString();
    EXPECT_EQ(rule.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(rule.status().message().find("optimizer." + c.field), std::string::npos)
        << rule.status();
  }
}

TEST(Optimizer, CountsStepsForAdamsBiasCorrection) {
  absl::StatusOr<std::unique_ptr<Optimizer>> opt =
      CreateOptimizer(Spec(OptimizerSpec::ADAM, 0.01f), 1);
  ASSERT_TRUE(opt.ok());
  EXPECT_EQ((*opt)->steps(), 0);
  EXPECT_EQ((*opt)->name(), "adam");
  EXPECT_EQ((*opt)->rule().num_slots(), 2);
  std::vector<float> p = {0.0f};
  (*opt)->Apply(p, std::vector<float>{0.5f});
  (*opt)->Apply(p, std::vector<float>{-2.0f});
  EXPECT_EQ((*opt)->steps(), 2);
  EXPECT_NEAR(p[0], -0.00440495959, 1e-7);  // AdamMatchesHandComputedSteps' second step

  // A restored count feeds the next bias correction: fresh state at step 1000.
  absl::StatusOr<std::unique_ptr<Optimizer>> restored =
      CreateOptimizer(Spec(OptimizerSpec::ADAM, 0.01f), 1);
  ASSERT_TRUE(restored.ok());
  (*restored)->set_steps(999);
  std::vector<float> q = {0.0f};
  (*restored)->Apply(q, std::vector<float>{1.0f});
  EXPECT_EQ((*restored)->steps(), 1000);
  EXPECT_NEAR(q[0], -0.0251456592, 1e-7);
}

TEST(Optimizer, SlotVectorsStartAtTheRulesInitialValue) {
  OptimizerSpec spec = Spec(OptimizerSpec::ADAGRAD, 0.1f);
  spec.set_initial_accumulator(0.5f);
  absl::StatusOr<std::unique_ptr<Optimizer>> adagrad = CreateOptimizer(spec, 3);
  ASSERT_TRUE(adagrad.ok());
  std::vector<std::span<float>> state = (*adagrad)->state_vectors();
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(std::vector<float>(state[0].begin(), state[0].end()), std::vector<float>(3, 0.5f));
  EXPECT_EQ((*adagrad)->state_bytes(), 12);

  absl::StatusOr<std::unique_ptr<Optimizer>> adam =
      CreateOptimizer(Spec(OptimizerSpec::ADAM, 0.1f), 4);
  ASSERT_TRUE(adam.ok());
  ASSERT_EQ((*adam)->state_vectors().size(), 2u);
  for (std::span<float> slot : (*adam)->state_vectors()) {
    EXPECT_EQ(std::vector<float>(slot.begin(), slot.end()), std::vector<float>(4, 0.0f));
  }
  EXPECT_EQ((*adam)->state_bytes(), 32);
}

TEST(LookAhead, GeometricReach) {
  EXPECT_DOUBLE_EQ(GeometricReach(0.9, 0), 0);
  EXPECT_DOUBLE_EQ(GeometricReach(0.9, -1), 0);
  EXPECT_NEAR(GeometricReach(0.9, 1), 0.9, 1e-12);
  EXPECT_NEAR(GeometricReach(0.9, 3), 0.9 + 0.81 + 0.729, 1e-12);
  EXPECT_DOUBLE_EQ(GeometricReach(0.0, 5), 0);
  // Real-valued delays (a mean staleness) interpolate monotonically between integers.
  EXPECT_GT(GeometricReach(0.9, 1.5), GeometricReach(0.9, 1));
  EXPECT_LT(GeometricReach(0.9, 1.5), GeometricReach(0.9, 2));
}

// LookAhead(d) is where the parameters would be after d more updates that bring no new
// gradient: the same rule applied d times with a zero gradient. d = 0 leaves them unchanged.
TEST(LookAhead, MatchesUpdatesWithoutNewGradients) {
  OptimizerSpec heavy_ball = Spec(OptimizerSpec::MOMENTUM, 0.1f);
  heavy_ball.set_momentum(0.9f);
  OptimizerSpec adam = Spec(OptimizerSpec::ADAM, 0.01f);
  for (const OptimizerSpec& spec : {heavy_ball, adam}) {
    std::unique_ptr<UpdateRule> rule = Rule(spec);
    ASSERT_TRUE(rule->looks_ahead());
    Block block(*rule, {1.0f, -2.0f});
    for (int64_t t = 1; t <= 5; ++t) block.Apply(*rule, {0.5f, -1.0f}, t);
    const std::vector<std::span<float>> views(block.slots.begin(), block.slots.end());
    const Step next{6, rule->learning_rate()};
    std::vector<float> out(2);
    rule->LookAhead(block.params, views, next, 0, out);
    EXPECT_EQ(out, block.params) << rule->name();
    for (int d : {1, 3}) {
      rule->LookAhead(block.params, views, next, d, out);
      Block drift = block;
      for (int64_t k = 0; k < d; ++k) drift.Apply(*rule, {0.0f, 0.0f}, 6 + k);
      // Adam's second moment and bias correction keep moving a little during the drift; the
      // look-ahead holds them: equal to within a fraction of one step.
      const double tolerance = rule->name() == "adam" ? 2e-3 : 1e-6;
      for (size_t i = 0; i < 2; ++i) {
        EXPECT_NEAR(out[i], drift.params[i], tolerance) << rule->name() << " d=" << d;
        EXPECT_NE(out[i], block.params[i]) << rule->name();
      }
    }
  }
}

// SGD and Adagrad have no velocity; Nesterov's (PyTorch form) gradients are already taken at a
// look-ahead point, and extrapolating further shrinks its stability region (update_rule.h).
TEST(LookAhead, OtherRulesStayPut) {
  OptimizerSpec nesterov = Spec(OptimizerSpec::MOMENTUM, 0.1f);
  nesterov.set_momentum(0.9f);
  nesterov.set_nesterov(true);
  for (const OptimizerSpec& spec :
       {Spec(OptimizerSpec::SGD, 0.1f), Spec(OptimizerSpec::ADAGRAD, 0.1f), nesterov}) {
    std::unique_ptr<UpdateRule> rule = Rule(spec);
    EXPECT_FALSE(rule->looks_ahead());
    Block block(*rule, {1.0f});
    block.Apply(*rule, {1.0f}, 1);
    const std::vector<std::span<float>> views(block.slots.begin(), block.slots.end());
    std::vector<float> out(1);
    rule->LookAhead(block.params, views, Step{2, 0.1f}, 4, out);
    EXPECT_EQ(out, block.params);
  }
}

}  // namespace
}  // namespace syncopate::optim
