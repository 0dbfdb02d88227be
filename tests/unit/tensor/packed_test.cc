#include "libs/tensor/packed.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "libs/tensor/reduction_kernels.h"

namespace syncopate::tensor {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(PackFloats, RoundTripsExactBits) {
  const std::vector<float> values = {0.0f,
                                     -0.0f,
                                     1.5f,
                                     -3.25e-20f,
                                     std::numeric_limits<float>::denorm_min(),
                                     std::numeric_limits<float>::max(),
                                     std::numeric_limits<float>::infinity()};
  const std::string bytes = PackFloats(values);
  ASSERT_EQ(bytes.size(), values.size() * 4);

  std::vector<float> out(values.size(), 42.0f);
  ASSERT_TRUE(UnpackFloatsInto(bytes, out).ok());
  EXPECT_EQ(std::memcmp(out.data(), values.data(), bytes.size()), 0);
}

TEST(PackFloats, IsLittleEndianFloat32) {
  const std::vector<float> one = {1.0f};  // 0x3f800000
  EXPECT_EQ(PackFloats(one), std::string("\x00\x00\x80\x3f", 4));
}

TEST(PackFloats, EmptyRoundTrips) {
  EXPECT_TRUE(PackFloats({}).empty());
  EXPECT_TRUE(UnpackFloatsInto("", {}).ok());
}

TEST(UnpackFloatsInto, RejectsSizeMismatchNamingBothSizes) {
  const std::vector<float> values = {1.0f, 2.0f, 3.0f};
  std::vector<float> out(4, 7.0f);
  const absl::Status status = UnpackFloatsInto(PackFloats(values), out);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), AllOf(HasSubstr("12"), HasSubstr("16")));
  EXPECT_EQ(out, std::vector<float>(4, 7.0f)) << "output must be untouched on error";
}

TEST(UnpackFloatsInto, RejectsPayloadNotAMultipleOfFour) {
  std::vector<float> out(1);
  EXPECT_EQ(UnpackFloatsInto(std::string(5, '\0'), out).code(), absl::StatusCode::kInvalidArgument);
}

TEST(UnpackFloatsInto, JoinsPiecesThatSplitFloats) {
  const std::vector<float> values = {1.0f, -2.5f, 3.25f, 1e-30f};
  const std::string bytes = PackFloats(values);
  // Pieces of 3, 0, 6 and 7 bytes: floats straddle every boundary, and an empty piece is fine.
  const ByteChunks chunks = {
      {bytes.data(), 3}, {bytes.data() + 3, 0}, {bytes.data() + 3, 6}, {bytes.data() + 9, 7}};
  EXPECT_EQ(TotalSize(chunks), bytes.size());
  std::vector<float> out(values.size());
  ASSERT_TRUE(UnpackFloatsInto(chunks, out).ok());
  EXPECT_EQ(out, values);
  std::vector<float> untouched(values.size() + 1, 9.0f);
  EXPECT_EQ(UnpackFloatsInto(chunks, untouched).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(untouched, std::vector<float>(values.size() + 1, 9.0f));
}

TEST(UnpackFloatsAndSquaredNorm, IsUnpackThenSquaredNormBitForBitHoweverTheBytesAreCut) {
  // Several reduction blocks and a tail, with values whose squares round differently.
  std::vector<float> values(3 * kReductionBlock + 123);
  for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(static_cast<float>(i)) * 1.7f;
  const std::string bytes = PackFloats(values);
  const double expected = SquaredNorm(values);
  for (const size_t cut : {size_t{1}, size_t{7}, size_t{4096}, size_t{16387}, bytes.size()}) {
    ByteChunks chunks;
    for (size_t at = 0; at < bytes.size(); at += cut) {
      chunks.emplace_back(bytes.data() + at, std::min(cut, bytes.size() - at));
    }
    std::vector<float> out(values.size());
    const absl::StatusOr<double> norm = UnpackFloatsAndSquaredNorm(chunks, out);
    ASSERT_TRUE(norm.ok()) << norm.status();
    EXPECT_EQ(*norm, expected) << "pieces of " << cut << " bytes";
    EXPECT_EQ(out, values);
  }
  std::vector<float> bad = values;
  bad[kReductionBlock + 2] = std::numeric_limits<float>::infinity();
  const std::string bad_bytes = PackFloats(bad);
  std::vector<float> out(bad.size());
  EXPECT_FALSE(
      std::isfinite(*UnpackFloatsAndSquaredNorm({{bad_bytes.data(), bad_bytes.size()}}, out)));
  std::vector<float> untouched(values.size() + 1, 9.0f);
  EXPECT_EQ(UnpackFloatsAndSquaredNorm({{bytes.data(), bytes.size()}}, untouched).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(untouched, std::vector<float>(values.size() + 1, 9.0f));
}

TEST(PackedView, IsPackFloatsWithoutTheCopy) {
  const std::vector<float> values = {1.0f, -2.5f};
  EXPECT_EQ(PackedView(values), PackFloats(values));
  EXPECT_EQ(PackedView(values).data(), reinterpret_cast<const char*>(values.data()));
}

TEST(AllFinite, AcceptsFiniteValuesIncludingExtremes) {
  std::vector<float> values(5000, 1.0f);
  values[10] = std::numeric_limits<float>::max();
  values[11] = -std::numeric_limits<float>::max();
  values[12] = std::numeric_limits<float>::denorm_min();
  values[13] = -0.0f;
  EXPECT_TRUE(AllFinite(values));
  EXPECT_EQ(FirstNonFinite(values), -1);
  EXPECT_TRUE(AllFinite({}));
  EXPECT_EQ(FirstNonFinite({}), -1);
}

TEST(AllFinite, FindsNanAndInfAnywhere) {
  const float bad_values[] = {
      std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
      std::numeric_limits<float>::signaling_NaN(), std::numeric_limits<float>::infinity(),
      -std::numeric_limits<float>::infinity()};
  // First, last, block boundaries of the scan and odd positions in between.
  const size_t kSize = 3001;
  const size_t positions[] = {0, 1, 1023, 1024, 1025, 2047, 2048, 2999, kSize - 1};
  for (const float bad : bad_values) {
    for (const size_t position : positions) {
      std::vector<float> values(kSize, 0.5f);
      values[position] = bad;
      EXPECT_FALSE(AllFinite(values)) << "value " << bad << " at " << position;
      EXPECT_EQ(FirstNonFinite(values), static_cast<int64_t>(position));
    }
  }
}

TEST(SquaredNorm, SumsSquaresAndIsFiniteExactlyWhenEveryValueIs) {
  // 19 values: two whole groups of the eight partial sums and a tail of three.
  std::vector<float> values(19);
  double expected = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = 0.25f * static_cast<float>(i) - 2.0f;
    expected += static_cast<double>(values[i]) * values[i];
  }
  EXPECT_DOUBLE_EQ(SquaredNorm(values), expected);
  EXPECT_EQ(SquaredNorm({}), 0.0);
  // The largest finite floats, many of them, never overflow the double sum.
  const std::vector<float> huge(4096, -std::numeric_limits<float>::max());
  EXPECT_TRUE(std::isfinite(SquaredNorm(huge)));
  const float bad_values[] = {std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity()};
  for (const float bad : bad_values) {
    for (const size_t position : {size_t{0}, size_t{7}, size_t{8}, size_t{18}}) {
      std::vector<float> with_bad = values;
      with_bad[position] = bad;
      EXPECT_FALSE(std::isfinite(SquaredNorm(with_bad))) << bad << " at " << position;
    }
  }
}

TEST(FirstNonFinite, ReportsTheEarliestOfSeveral) {
  std::vector<float> values(100, 0.0f);
  values[70] = std::numeric_limits<float>::infinity();
  values[30] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(FirstNonFinite(values), 30);
}

}  // namespace
}  // namespace syncopate::tensor

namespace syncopate::tensor {
namespace {

TEST(PackKeys, RoundTripsAndIsLittleEndian) {
  const std::vector<uint64_t> keys = {0, 1, 0x0102030405060708ull, ~uint64_t{0}};
  const std::string bytes = PackKeys(keys);
  ASSERT_EQ(bytes.size(), 32u);
  EXPECT_EQ(static_cast<uint8_t>(bytes[16]), 0x08);  // least significant byte first
  std::vector<uint64_t> back;
  ASSERT_TRUE(UnpackKeys(bytes, back).ok());
  EXPECT_EQ(back, keys);
}

TEST(PackKeys, RejectsAPartialKeyAndLeavesTheOutputAlone) {
  std::vector<uint64_t> out = {42};
  EXPECT_EQ(UnpackKeys(std::string(12, '\0'), out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out, std::vector<uint64_t>{42});
}

}  // namespace
}  // namespace syncopate::tensor
