// The kernels of every ISA level this CPU runs give the baseline's results within float
// tolerance: the levels differ only in vector width, FMA contraction and summation order.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "gtest/gtest.h"
#include "libs/isa/isa.h"
#include "libs/model/mlp.h"
#include "libs/optim/update_rule.h"

namespace syncopate {
namespace {

using isa::IsaLevel;

std::vector<float> Random(size_t n, uint64_t seed, float low, float high) {
  std::mt19937_64 rng(seed);
  std::vector<float> out(n);
  for (float& x : out) {
    x = low + (high - low) * static_cast<float>(static_cast<double>(rng() >> 11) * 0x1p-53);
  }
  return out;
}

// |a - b| <= atol + rtol * |b| elementwise; reports the first mismatch.
void ExpectClose(std::span<const float> actual, std::span<const float> expected, float rtol,
                 float atol, const char* what, IsaLevel level) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_LE(std::fabs(actual[i] - expected[i]), atol + rtol * std::fabs(expected[i]))
        << what << " differs at " << i << " on level " << isa::IsaLevelName(level) << ": "
        << actual[i] << " vs baseline " << expected[i];
  }
}

TEST(IsaKernels, MlpLossAndGradientAgreeAcrossLevels) {
  // The default job's shape (784-256-128-10) with a ragged batch, so vector tails are exercised.
  constexpr int kInput = 784;
  constexpr int64_t kBatch = 67;
  const std::vector<float> features = Random(kInput * kBatch, 1, 0.0f, 1.0f);
  std::vector<int32_t> labels(kBatch);
  for (int64_t i = 0; i < kBatch; ++i) labels[i] = static_cast<int32_t>((i * 7) % 10);
  const model::BatchView batch{features.data(), labels.data(), kBatch};

  model::Mlp baseline = model::Mlp::Create(kInput, {256, 128}, 10, IsaLevel::kBaseline).value();
  const std::vector<float> params = model::InitialParameters(baseline, 42);
  std::vector<float> expected_grad(baseline.num_parameters());
  const float expected_loss = baseline.LossAndGradient(params, batch, expected_grad).value();
  const model::Evaluation expected_eval = baseline.Evaluate(params, batch).value();

  for (const IsaLevel level : isa::SupportedIsaLevels()) {
    model::Mlp mlp = model::Mlp::Create(kInput, {256, 128}, 10, level).value();
    EXPECT_EQ(mlp.isa_level(), level);
    std::vector<float> grad(mlp.num_parameters());
    const float loss = mlp.LossAndGradient(params, batch, grad).value();
    EXPECT_NEAR(loss, expected_loss, 1e-5 * std::fabs(expected_loss)) << isa::IsaLevelName(level);
    // Gradients are sums of 67 products: 1e-4 relative plus an absolute floor far below the
    // typical |g| ~ 1e-3 covers reordering and FMA rounding.
    ExpectClose(grad, expected_grad, 1e-4f, 1e-6f, "gradient", level);
    const model::Evaluation eval = mlp.Evaluate(params, batch).value();
    EXPECT_EQ(eval.accuracy, expected_eval.accuracy) << isa::IsaLevelName(level);
    EXPECT_NEAR(eval.mean_loss, expected_eval.mean_loss, 1e-5) << isa::IsaLevelName(level);
  }
}

// Bit for bit the same wherever the buffers sit: with 32- and 64-byte vectors an alignment-
// dependent reduction order would make two identical runs differ (the simulator's
// SameSeedSameResultBitForBit caught one).
TEST(IsaKernels, MlpGradientDoesNotDependOnBufferAlignment) {
  constexpr int kInput = 784;
  constexpr int64_t kBatch = 64;
  const std::vector<float> features = Random(kInput * kBatch, 3, 0.0f, 1.0f);
  std::vector<int32_t> labels(kBatch);
  for (int64_t i = 0; i < kBatch; ++i) labels[i] = static_cast<int32_t>((i * 3) % 10);
  for (const IsaLevel level : isa::SupportedIsaLevels()) {
    model::Mlp mlp = model::Mlp::Create(kInput, {256, 128}, 10, level).value();
    const std::vector<float> params = model::InitialParameters(mlp, 5);
    const size_t n = params.size();
    std::vector<float> reference(n);
    ASSERT_TRUE(
        mlp.LossAndGradient(params, {features.data(), labels.data(), kBatch}, reference).ok());
    // Shift every buffer by 1..15 floats: every offset within a 64-byte vector.
    for (size_t shift = 1; shift < 16; ++shift) {
      std::vector<float> p(n + shift), g(n + shift), x(features.size() + shift);
      std::copy(params.begin(), params.end(), p.begin() + shift);
      std::copy(features.begin(), features.end(), x.begin() + shift);
      std::span<float> grad(g.data() + shift, n);
      ASSERT_TRUE(mlp.LossAndGradient(std::span<const float>(p.data() + shift, n),
                                      {x.data() + shift, labels.data(), kBatch}, grad)
                      .ok());
      ASSERT_EQ(0, std::memcmp(grad.data(), reference.data(), n * sizeof(float)))
          << "level " << isa::IsaLevelName(level) << ", buffers shifted by " << shift << " floats";
    }
  }
}

TEST(IsaKernels, UpdateRulesAgreeAcrossLevels) {
  // 1003 elements: not a multiple of any vector width. Ten steps, so slots carry state.
  constexpr size_t kSize = 1003;
  for (const v1::OptimizerSpec::Kind kind : {v1::OptimizerSpec::SGD, v1::OptimizerSpec::MOMENTUM,
                                             v1::OptimizerSpec::ADAGRAD, v1::OptimizerSpec::ADAM}) {
    for (const bool nesterov : {false, true}) {
      if (nesterov && kind != v1::OptimizerSpec::MOMENTUM) continue;
      v1::OptimizerSpec spec;
      spec.set_kind(kind);
      spec.set_learning_rate(0.05f);
      if (kind == v1::OptimizerSpec::MOMENTUM) spec.set_momentum(0.9f);
      spec.set_nesterov(nesterov);
      // Run() returns the parameters after ten updates at `level`.
      const auto run = [&](IsaLevel level) {
        std::unique_ptr<optim::UpdateRule> rule = optim::CreateUpdateRule(spec, level).value();
        std::vector<float> params = Random(kSize, 7, -1.0f, 1.0f);
        std::vector<std::vector<float>> slots(rule->num_slots());
        std::vector<std::span<float>> slot_spans;
        for (int s = 0; s < rule->num_slots(); ++s) {
          slots[s].assign(kSize, rule->slot_initial_value(s));
          slot_spans.emplace_back(slots[s]);
        }
        for (int64_t step = 1; step <= 10; ++step) {
          const std::vector<float> grad = Random(kSize, 100 + step, -0.5f, 0.5f);
          rule->Apply(params, grad, slot_spans, step);
        }
        return params;
      };
      const std::vector<float> expected = run(IsaLevel::kBaseline);
      for (const IsaLevel level : isa::SupportedIsaLevels()) {
        SCOPED_TRACE(spec.ShortDebugString());
        ExpectClose(run(level), expected, 1e-5f, 1e-6f, "parameters", level);
      }
    }
  }
}

TEST(IsaKernels, RefusesALevelTheCpuCannotRun) {
  if (isa::HighestSupportedIsaLevel() == IsaLevel::kV4) GTEST_SKIP() << "this CPU runs every level";
  EXPECT_TRUE(absl::IsFailedPrecondition(model::Mlp::Create(4, {}, 2, IsaLevel::kV4).status()));
  v1::OptimizerSpec spec;
  spec.set_kind(v1::OptimizerSpec::SGD);
  spec.set_learning_rate(0.1f);
  EXPECT_TRUE(absl::IsFailedPrecondition(optim::CreateUpdateRule(spec, IsaLevel::kV4).status()));
}

}  // namespace
}  // namespace syncopate
