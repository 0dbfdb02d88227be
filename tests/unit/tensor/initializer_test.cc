#include "libs/tensor/initializer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace syncopate::tensor {
namespace {

using ::syncopate::v1::Initializer;

Initializer MakeInit(Initializer::Kind kind, int64_t fan_in, int64_t fan_out) {
  Initializer init;
  init.set_kind(kind);
  init.set_fan_in(fan_in);
  init.set_fan_out(fan_out);
  return init;
}

Initializer Uniform(double scale) {
  Initializer init;
  init.set_kind(Initializer::UNIFORM);
  init.set_scale(scale);
  return init;
}

std::vector<float> Whole(const Initializer& init, uint64_t seed, std::string_view name,
                         int64_t size) {
  std::vector<float> values(size);
  EXPECT_TRUE(InitializeSlice(init, seed, name, 0, values).ok());
  return values;
}

TEST(InitializeSlice, ZerosFillsZeros) {
  std::vector<float> values(17, 3.0f);
  ASSERT_TRUE(InitializeSlice(MakeInit(Initializer::ZEROS, 0, 0), 1, "b", 5, values).ok());
  EXPECT_EQ(values, std::vector<float>(17, 0.0f));
}

TEST(InitializeSlice, AnyPartitionEqualsTheWholeTensor) {
  const Initializer init = MakeInit(Initializer::HE_UNIFORM, 784, 256);
  constexpr int64_t kSize = 10007;
  const std::vector<float> whole = Whole(init, 42, "dense0/w", kSize);

  // Uneven shards, filled out of order, as the partitioner may cut them.
  const std::vector<int64_t> cuts = {0, 1, 333, 4096, 4097, 9000, kSize};
  std::vector<float> assembled(kSize, -100.0f);
  for (size_t k = cuts.size() - 1; k-- > 0;) {
    std::span<float> slice(assembled.data() + cuts[k], cuts[k + 1] - cuts[k]);
    ASSERT_TRUE(InitializeSlice(init, 42, "dense0/w", cuts[k], slice).ok());
  }
  EXPECT_EQ(assembled, whole);
}

TEST(InitializeSlice, MatchesPinnedValues) {
  // Computed independently (splitmix64 over FNV-1a, as documented in initializer.cc). A change
  // here re-initialises every model and breaks comparisons with old runs: make it deliberately.
  std::vector<float> values(3);
  ASSERT_TRUE(
      InitializeSlice(MakeInit(Initializer::HE_UNIFORM, 6, 1), 7, "dense0/w", 100, values).ok());
  EXPECT_FLOAT_EQ(values[0], 0.511322975f);
  EXPECT_FLOAT_EQ(values[1], 0.272893429f);
  EXPECT_FLOAT_EQ(values[2], -0.67734015f);
}

TEST(InitializeSlice, DifferentSeedsAndNamesGiveDifferentValues) {
  const Initializer init = MakeInit(Initializer::GLOROT_UNIFORM, 100, 100);
  const std::vector<float> base = Whole(init, 1, "dense0/w", 1000);
  const std::vector<float> other_seed = Whole(init, 2, "dense0/w", 1000);
  const std::vector<float> other_name = Whole(init, 1, "dense1/w", 1000);
  int same_seed_matches = 0;
  int same_name_matches = 0;
  for (size_t i = 0; i < base.size(); ++i) {
    same_seed_matches += base[i] == other_name[i];
    same_name_matches += base[i] == other_seed[i];
  }
  // Independent 24-bit draws coincide with probability ~2^-24 each.
  EXPECT_LE(same_seed_matches, 1);
  EXPECT_LE(same_name_matches, 1);
}

TEST(InitializeSlice, UniformKindsStayWithinTheirBoundsAndMatchTheirMoments) {
  struct Case {
    Initializer init;
    double limit;
  };
  const Case cases[] = {
      {Uniform(0.05), 0.05},
      {MakeInit(Initializer::HE_UNIFORM, 784, 256), std::sqrt(6.0 / 784)},
      {MakeInit(Initializer::HE_UNIFORM, 1, 1), std::sqrt(6.0)},
      {MakeInit(Initializer::GLOROT_UNIFORM, 256, 128), std::sqrt(6.0 / 384)},
  };
  constexpr int64_t kSize = 200000;
  for (const Case& c : cases) {
    const std::vector<float> values = Whole(c.init, 9, "w", kSize);
    double sum = 0;
    double sum_squares = 0;
    for (const float v : values) {
      ASSERT_GE(v, -c.limit);
      ASSERT_LE(v, c.limit);
      sum += v;
      sum_squares += static_cast<double>(v) * v;
    }
    // U(-a, a): mean 0, variance a^2/3. Standard error of the mean is a/sqrt(3n) ~ 0.0013a for
    // n = 200000, so 0.01a is over 7 standard errors; the variance bound is as loose.
    const double mean = sum / kSize;
    const double variance = sum_squares / kSize - mean * mean;
    EXPECT_NEAR(mean, 0.0, 0.01 * c.limit);
    EXPECT_NEAR(variance, c.limit * c.limit / 3, 0.02 * c.limit * c.limit / 3);
    // Both tails are used: the extremes approach the bounds.
    const auto [lowest, highest] = std::minmax_element(values.begin(), values.end());
    EXPECT_LT(*lowest, -0.99 * c.limit);
    EXPECT_GT(*highest, 0.99 * c.limit);
  }
}

TEST(InitializeSlice, RejectsUnusableInitializers) {
  std::vector<float> values(4, 5.0f);
  const auto code = [&](const Initializer& init, int64_t offset = 0) {
    return InitializeSlice(init, 1, "t", offset, values).code();
  };
  EXPECT_EQ(code(Initializer()), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(MakeInit(static_cast<Initializer::Kind>(99), 1, 1)),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(MakeInit(Initializer::HE_UNIFORM, 0, 10)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(MakeInit(Initializer::HE_UNIFORM, -3, 10)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(MakeInit(Initializer::GLOROT_UNIFORM, 10, 0)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(MakeInit(Initializer::GLOROT_UNIFORM, 0, 10)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(MakeInit(Initializer::ZEROS, 0, 0), -1), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Uniform(0)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Uniform(-1)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Uniform(INFINITY)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(values, std::vector<float>(4, 5.0f)) << "output must be untouched on error";
  // HE_UNIFORM's formula does not use fan_out.
  EXPECT_TRUE(InitializeSlice(MakeInit(Initializer::HE_UNIFORM, 3, 0), 1, "t", 0, values).ok());
}

TEST(InitializeSlice, UniformMatchesPinnedValues) {
  // Computed independently, like MatchesPinnedValues: UNIFORM(scale) is the same stream as the
  // fan-based kinds, scaled by `scale`.
  std::vector<float> values(3);
  ASSERT_TRUE(InitializeSlice(Uniform(0.5), 7, "emb", 100, values).ok());
  EXPECT_FLOAT_EQ(values[0], 0.462107122f);
  EXPECT_FLOAT_EQ(values[1], 0.489980638f);
  EXPECT_FLOAT_EQ(values[2], -0.246582627f);
}

std::vector<float> Row(const Initializer& init, uint64_t seed, std::string_view table, uint64_t key,
                       int dim) {
  std::vector<float> row(dim, 100.0f);
  EXPECT_TRUE(InitializeRow(init, seed, table, key, row).ok());
  return row;
}

TEST(InitializeRow, MatchesPinnedValues) {
  // Computed independently (a row's stream is SplitMix64(table stream ^ SplitMix64(key)), see
  // initializer.cc). A change re-initialises every embedding: make it deliberately.
  const std::vector<float> row = Row(Uniform(0.05), 7, "C1", 12345, 3);
  EXPECT_FLOAT_EQ(row[0], -0.0192568954f);
  EXPECT_FLOAT_EQ(row[1], -0.0438899919f);
  EXPECT_FLOAT_EQ(row[2], -0.0411998257f);
}

TEST(InitializeRow, IsAPureFunctionOfSeedTableAndKey) {
  const Initializer init = Uniform(0.1);
  EXPECT_EQ(Row(init, 3, "C7", 42, 16), Row(init, 3, "C7", 42, 16));
  // A shorter row is a prefix of the longer one: element j depends on j, not on dim.
  const std::vector<float> longer = Row(init, 3, "C7", 42, 16);
  EXPECT_EQ(Row(init, 3, "C7", 42, 4), std::vector<float>(longer.begin(), longer.begin() + 4));
  for (const auto& other :
       {Row(init, 3, "C7", 43, 16), Row(init, 4, "C7", 42, 16), Row(init, 3, "C8", 42, 16)}) {
    int same = 0;
    for (size_t j = 0; j < other.size(); ++j) same += other[j] == longer[j];
    EXPECT_LE(same, 1);
  }
}

TEST(InitializeRow, DifferentKeysGiveDifferentRowsWithinTheScale) {
  const Initializer init = Uniform(0.01);
  double sum = 0;
  int64_t count = 0;
  std::vector<float> previous;
  for (uint64_t key = 0; key < 2000; ++key) {
    const std::vector<float> row = Row(init, 1, "t", key, 8);
    EXPECT_NE(row, previous);
    for (const float v : row) {
      ASSERT_GE(v, -0.01f);
      ASSERT_LE(v, 0.01f);
      sum += v;
      ++count;
    }
    previous = row;
  }
  // U(-a, a) has standard deviation a/sqrt(3); the mean of 16000 draws is within 0.03a of 0 by
  // over 6 standard errors.
  EXPECT_NEAR(sum / count, 0.0, 0.0003);
}

TEST(InitializeRow, ZerosAndErrors) {
  EXPECT_EQ(Row(MakeInit(Initializer::ZEROS, 0, 0), 1, "t", 5, 4), std::vector<float>(4, 0.0f));
  std::vector<float> row(4, 5.0f);
  EXPECT_EQ(InitializeRow(Initializer(), 1, "t", 5, row).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InitializeRow(Uniform(0), 1, "t", 5, row).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(row, std::vector<float>(4, 5.0f)) << "output must be untouched on error";
}

}  // namespace
}  // namespace syncopate::tensor
