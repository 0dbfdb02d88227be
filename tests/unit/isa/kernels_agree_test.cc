// The kernels of every ISA level this CPU runs give the baseline's results within float
// tolerance: the levels differ only in vector width, FMA contraction and summation order.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "gtest/gtest.h"
#include "libs/aggregation/aggregation_kernels.h"
#include "libs/isa/isa.h"
#include "libs/model/mlp.h"
#include "libs/optim/update_rule.h"
#include "libs/tensor/reduction_kernels.h"

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

double ExactSquaredNorm(std::span<const float> x) {
  double sum = 0;
  for (const float v : x) sum += static_cast<double>(v) * v;
  return sum;
}

// The block-wise float sums stay within their documented ~2e-6 of the exact double sum, on
// every level, and keep SquaredNorm's contract: finite exactly when every value is, also for
// finite values whose squares overflow a float.
TEST(IsaKernels, SquaredNormIsCloseToTheDoubleSumAndFiniteExactlyWhenTheValuesAre) {
  // 3 blocks and a ragged tail.
  std::vector<float> x = Random(3 * tensor::kReductionBlock + 77, 11, -2.0f, 2.0f);
  const double exact = ExactSquaredNorm(x);
  for (const IsaLevel level : isa::SupportedIsaLevels()) {
    SCOPED_TRACE(isa::IsaLevelName(level));
    const tensor::ReductionKernels& k = tensor::ReductionKernelsFor(level);
    EXPECT_NEAR(k.squared_norm(x.data(), x.size()), exact, 2e-6 * exact);
    EXPECT_EQ(k.squared_norm(x.data(), 0), 0.0);
    EXPECT_EQ(k.squared_norm(x.data(), 5), ExactSquaredNorm(std::span(x).first(5)));
    std::vector<float> huge = x;
    huge[tensor::kReductionBlock + 3] = 3e30f;  // its square overflows a float, not a double
    EXPECT_NEAR(k.squared_norm(huge.data(), huge.size()), ExactSquaredNorm(huge), 1e55);
    std::vector<float> bad = x;
    bad[2 * tensor::kReductionBlock + 5] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_TRUE(std::isnan(k.squared_norm(bad.data(), bad.size())));
    bad[2 * tensor::kReductionBlock + 5] = -std::numeric_limits<float>::infinity();
    EXPECT_FALSE(std::isfinite(k.squared_norm(bad.data(), bad.size())));
  }
}

TEST(IsaKernels, AggregationKernelsFollowTheirFormulasOnEveryLevel) {
  constexpr size_t kSize = 2 * tensor::kReductionBlock + 13;
  const std::vector<float> g = Random(kSize, 21, -1.0f, 1.0f);
  const std::vector<float> start = Random(kSize, 22, -3.0f, 3.0f);
  constexpr float kDecay = 0.9f;
  for (const IsaLevel level : isa::SupportedIsaLevels()) {
    SCOPED_TRACE(isa::IsaLevelName(level));
    const aggregation::AggregationKernels& k = aggregation::AggregationKernelsFor(level);
    std::vector<float> sum = start;
    k.scale_into(sum.data(), g.data(), kSize, 2.0f);
    for (size_t i = 0; i < kSize; ++i) ASSERT_EQ(sum[i], 2.0f * g[i]) << i;
    sum = start;
    k.accumulate(sum.data(), g.data(), kSize, 32.0f);
    std::vector<float> expected(kSize);
    for (size_t i = 0; i < kSize; ++i) expected[i] = start[i] + 32.0f * g[i];
    ExpectClose(sum, expected, 1e-6f, 1e-6f, "accumulate", level);

    std::vector<float> mean(kSize);
    // 96, not a power of two: a multiplication by the reciprocal would round differently.
    k.divide_into(mean.data(), sum.data(), kSize, 96.0f);
    for (size_t i = 0; i < kSize; ++i) {
      ASSERT_EQ(mean[i], sum[i] / 96.0f) << i;  // a division is exact on every level
    }

    std::vector<float> velocity = start;
    const aggregation::VelocitySums sums =
        k.velocity_step(velocity.data(), g.data(), kSize, kDecay);
    double mean_squared = 0, change_squared = 0, velocity_squared = 0;
    for (size_t i = 0; i < kSize; ++i) {
      const double next = static_cast<double>(kDecay) * start[i] + g[i];
      ASSERT_NEAR(velocity[i], next, 1e-6 * (1 + std::fabs(next))) << i;
      mean_squared += static_cast<double>(g[i]) * g[i];
      change_squared += (next - start[i]) * (next - start[i]);
      velocity_squared += next * next;
    }
    EXPECT_NEAR(sums.mean_squared, mean_squared, 2e-6 * mean_squared);
    EXPECT_NEAR(sums.velocity_change_squared, change_squared, 2e-6 * change_squared);
    EXPECT_NEAR(sums.velocity_squared, velocity_squared, 2e-6 * velocity_squared);

    // A block whose float sums overflow is summed again in double from the old velocity.
    std::vector<float> huge = g;
    huge[tensor::kReductionBlock + 1] = 1e30f;
    velocity = start;
    const aggregation::VelocitySums big =
        k.velocity_step(velocity.data(), huge.data(), kSize, kDecay);
    EXPECT_TRUE(std::isfinite(big.mean_squared));
    EXPECT_NEAR(big.mean_squared, 1e60, 1e54);
    EXPECT_NEAR(big.velocity_squared, 1e60, 1e54);
    EXPECT_NEAR(velocity[tensor::kReductionBlock + 1], 1e30f, 1e24f);
    EXPECT_NEAR(velocity[tensor::kReductionBlock + 2],
                kDecay * start[tensor::kReductionBlock + 2] + g[tensor::kReductionBlock + 2], 1e-5);
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
