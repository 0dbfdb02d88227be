#include "libs/model/wdl.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "libs/tensor/initializer.h"

namespace syncopate::model {
namespace {

// A small model and batch with repeated categorical values (shared rows) and missing numerics.
class WdlTest : public ::testing::Test {
 protected:
  static constexpr int kDim = 3;
  static constexpr int64_t kBatch = 6;

  void SetUp() override {
    absl::StatusOr<Wdl> created = Wdl::Create(kDim, {5, 4}, {{0, 3}, {7, 2}});
    ASSERT_TRUE(created.ok()) << created.status();
    model_.emplace(*std::move(created));
    std::mt19937_64 rng(11);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    params_.resize(model_->num_parameters());
    int64_t offset = 0;
    for (const DenseTensorSpec& t : model_->tensors()) {
      ASSERT_TRUE(tensor::InitializeSlice(t.init, 3, t.name, 0,
                                          std::span<float>(params_).subspan(offset, t.size()))
                      .ok());
      offset += t.size();
    }
    // Biases start at zero: an example whose first layer is all off would then sit exactly on
    // the next ReLU's kink, where finite differences see half a slope. Jitter every parameter.
    for (float& p : params_) p += 0.05f * unit(rng);
    // Non-zero wide weights so their gradient path is exercised too.
    for (int64_t i = params_.size() - kWdlNumeric; i < static_cast<int64_t>(params_.size()); ++i)
      params_[i] = 0.1f * unit(rng);
    numeric_.resize(kBatch * kWdlNumeric);
    categorical_.resize(kBatch * kWdlCategorical);
    labels_.resize(kBatch);
    for (int64_t j = 0; j < kBatch; ++j) {
      for (int i = 0; i < kWdlNumeric; ++i) {
        numeric_[j * kWdlNumeric + i] = (i + j) % 5 == 0 ? NAN : static_cast<float>((i * j) % 7);
      }
      for (int f = 0; f < kWdlCategorical; ++f) categorical_[j * kWdlCategorical + f] = (f + j) % 3;
      labels_[j] = static_cast<float>(j % 2);
    }
    batch_ = {numeric_.data(), categorical_.data(), labels_.data(), kBatch};
    model_->CollectKeys(batch_, keys_);
    deep_.resize(keys_.keys.size() * kDim);
    wide_.resize(keys_.wide_keys.size());
    for (float& x : deep_) x = 0.5f * unit(rng);
    for (float& x : wide_) x = 0.2f * unit(rng);
  }

  float Loss() {
    std::vector<float> g(params_.size()), gd(deep_.size()), gw(wide_.size());
    absl::StatusOr<float> loss =
        model_->LossAndGradient(params_, batch_, keys_, deep_, wide_, g, gd, gw);
    EXPECT_TRUE(loss.ok()) << loss.status();
    return loss.ok() ? *loss : NAN;
  }

  // Central difference of the loss along one coordinate.
  float Numeric(float& x) {
    constexpr float kEps = 5e-4f;  // small enough not to cross a ReLU kink in this batch
    const float saved = x;
    x = saved + kEps;
    const double up = Loss();
    x = saved - kEps;
    const double down = Loss();
    x = saved;
    return static_cast<float>((up - down) / (2.0 * kEps));
  }

  std::optional<Wdl> model_;
  std::vector<float> params_, numeric_, labels_, deep_, wide_;
  std::vector<uint64_t> categorical_;
  CtrBatchView batch_{};
  BatchKeys keys_;
};

TEST_F(WdlTest, CollectsDistinctKeysPerFieldAndValue) {
  // Each field sees values {0, 1, 2}: 26 * 3 distinct (field, value) keys.
  EXPECT_EQ(keys_.keys.size(), 26u * 3u);
  EXPECT_EQ(keys_.position.size(), static_cast<size_t>(kBatch * kWdlCategorical));
  // Cross (0, 3) sees the value pairs (j%3, (3+j)%3) = (v, v): 3 distinct; cross (7, 2) sees
  // ((7+j)%3, (2+j)%3): 3 distinct. The wide table gets the field keys first, then these.
  EXPECT_EQ(keys_.wide_keys.size(), keys_.keys.size() + 6);
  EXPECT_TRUE(std::equal(keys_.keys.begin(), keys_.keys.end(), keys_.wide_keys.begin()));
  EXPECT_NE(CrossKey(0, 1, 2), CrossKey(0, 2, 1));
  EXPECT_NE(CategoricalKey(0, 1), CategoricalKey(1, 0));
  EXPECT_EQ(CategoricalKey(4, 99), CategoricalKey(4, 99));
}

// Keys are persisted (embedding rows in checkpoints, by key) and decide row ownership, so they
// are pinned: CategoricalKey(f, v) = SplitMix64(v ^ SplitMix64(f + 1)) and CrossKey(c, a, b) =
// CategoricalKey(26 + c, SplitMix64(a) ^ b), computed independently (Python, 64-bit wrap).
TEST(WdlKeys, AreFixedByDefinition) {
  EXPECT_EQ(CategoricalKey(0, 0), 0x5e41ab087439611eull);
  EXPECT_EQ(CategoricalKey(4, 99), 0xe4dc3516701a269bull);
  EXPECT_EQ(CrossKey(0, 1, 2), 0x0384cf4093b4548full);
}

TEST_F(WdlTest, GradientsMatchFiniteDifferences) {
  std::vector<float> g(params_.size()), gd(deep_.size()), gw(wide_.size());
  const absl::StatusOr<float> loss =
      model_->LossAndGradient(params_, batch_, keys_, deep_, wide_, g, gd, gw);
  ASSERT_TRUE(loss.ok()) << loss.status();
  auto near = [](float analytic, float numeric) {
    return std::abs(analytic - numeric) <= 2e-3f + 0.03f * std::abs(numeric);
  };
  int checked = 0;
  for (size_t i = 0; i < params_.size(); i += 7) {  // every 7th dense parameter, all tensors
    const float numeric = Numeric(params_[i]);
    EXPECT_PRED2(near, g[i], numeric) << "dense parameter " << i;
    ++checked;
  }
  for (size_t i = params_.size() - kWdlNumeric; i < params_.size(); ++i) {
    EXPECT_PRED2(near, g[i], Numeric(params_[i])) << "wide numeric weight " << i;
  }
  for (size_t i = 0; i < deep_.size(); i += 5) {
    EXPECT_PRED2(near, gd[i], Numeric(deep_[i])) << "deep row element " << i;
    ++checked;
  }
  for (size_t i = 0; i < wide_.size(); ++i) {
    EXPECT_PRED2(near, gw[i], Numeric(wide_[i])) << "wide row " << i;
  }
  EXPECT_GT(checked, 40);
}

TEST_F(WdlTest, PredictAgreesWithTheLoss) {
  std::vector<float> p(kBatch);
  const absl::Status predicted = model_->Predict(params_, batch_, keys_, deep_, wide_, p);
  ASSERT_TRUE(predicted.ok()) << predicted;
  double loss = 0;
  for (int64_t j = 0; j < kBatch; ++j) {
    ASSERT_GT(p[j], 0.0f);
    ASSERT_LT(p[j], 1.0f);
    loss -= labels_[j] ? std::log(p[j]) : std::log(1.0 - p[j]);
  }
  EXPECT_NEAR(loss / kBatch, Loss(), 1e-5);
}

TEST_F(WdlTest, RejectsBadLabelsAndMismatchedRows) {
  std::vector<float> g(params_.size()), gd(deep_.size()), gw(wide_.size());
  labels_[2] = 0.5f;
  EXPECT_EQ(
      model_->LossAndGradient(params_, batch_, keys_, deep_, wide_, g, gd, gw).status().code(),
      absl::StatusCode::kInvalidArgument);
  labels_[2] = 0.0f;
  std::vector<float> short_rows(deep_.size() - 1);
  EXPECT_EQ(
      model_->LossAndGradient(params_, batch_, keys_, short_rows, wide_, g, gd, gw).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(Wdl::Create(0, {}).ok());
  EXPECT_FALSE(Wdl::Create(4, {3, -1}).ok());
  EXPECT_FALSE(Wdl::Create(4, {}, {{2, 2}}).ok());
  EXPECT_FALSE(Wdl::Create(4, {}, {{0, 26}}).ok());
}

TEST_F(WdlTest, TablesAndTensorsDescribeTheLayout) {
  const std::vector<v1::EmbeddingTableSpec> tables = model_->tables();
  ASSERT_EQ(tables.size(), 2u);
  EXPECT_EQ(tables[Wdl::kDeepTable].dim(), kDim);
  EXPECT_EQ(tables[Wdl::kWideTable].dim(), 1);
  int64_t total = 0;
  for (const DenseTensorSpec& t : model_->tensors()) total += t.size();
  EXPECT_EQ(total, model_->num_parameters());
  // (26*3+13)*5+5 + 5*4+4 + 4*1+1 + 13
  EXPECT_EQ(model_->num_parameters(), (26 * 3 + 13) * 5 + 5 + 5 * 4 + 4 + 4 + 1 + 13);
}

}  // namespace
}  // namespace syncopate::model
