#include "libs/tensor/bfloat16.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace syncopate::tensor {
namespace {

TEST(Bfloat16, RoundsToTheNearestAndTiesToEven) {
  EXPECT_EQ(ToBfloat16(1.0f), 0x3f80);
  EXPECT_EQ(ToBfloat16(-2.0f), 0xc000);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  EXPECT_EQ(FromBfloat16(ToBfloat16(1.0f + 0x1p-8f)), 1.0f);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: to the even one, 1 + 2^-6.
  EXPECT_EQ(FromBfloat16(ToBfloat16(1.0f + 3 * 0x1p-8f)), 1.0f + 0x1p-6f);
  // Just above the halfway point rounds up.
  EXPECT_EQ(FromBfloat16(ToBfloat16(1.0f + 0x1p-8f + 0x1p-20f)), 1.0f + 0x1p-7f);
}

TEST(Bfloat16, KeepsTheRangeAndTheSpecialValues) {
  EXPECT_TRUE(std::isnan(FromBfloat16(ToBfloat16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload sits only in the low bits must not round into an infinity.
  EXPECT_TRUE(std::isnan(FromBfloat16(ToBfloat16(std::bit_cast<float>(0x7f800001u)))));
  EXPECT_EQ(FromBfloat16(ToBfloat16(std::numeric_limits<float>::infinity())),
            std::numeric_limits<float>::infinity());
  EXPECT_EQ(FromBfloat16(ToBfloat16(-0.0f)), 0.0f);
  EXPECT_NEAR(FromBfloat16(ToBfloat16(3e38f)), 3e38f, 3e38f * 0x1p-8);
}

TEST(Bfloat16, TheRelativeErrorIsAtMostHalfAUnitInTheLastPlace) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int i = 0; i < 10000; ++i) {
    const float x = normal(rng) * std::exp(normal(rng) * 10);
    EXPECT_LE(std::abs(FromBfloat16(ToBfloat16(x)) - x), std::abs(x) * 0x1p-8f) << x;
  }
}

TEST(Bfloat16, PacksTwoBytesAValueAndUnpacksFromAnyCut) {
  std::vector<float> values(1001);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.37f * static_cast<float>(i) - 100.0f;
  const std::string bytes = PackBfloat16(values);
  ASSERT_EQ(bytes.size(), 2 * values.size());
  std::vector<float> whole(values.size());
  ASSERT_TRUE(UnpackBfloat16Into(ByteChunks{{bytes.data(), bytes.size()}}, whole).ok());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(whole[i], FromBfloat16(ToBfloat16(values[i])));
  }
  for (const size_t cut : {1u, 3u, 7u, 1000u}) {
    ByteChunks chunks;
    for (size_t offset = 0; offset < bytes.size(); offset += cut) {
      chunks.emplace_back(bytes.data() + offset, std::min(cut, bytes.size() - offset));
    }
    chunks.emplace_back();  // an empty piece changes nothing
    std::vector<float> pieces(values.size());
    ASSERT_TRUE(UnpackBfloat16Into(chunks, pieces).ok()) << cut;
    EXPECT_EQ(pieces, whole) << cut;
  }
}

TEST(Bfloat16, AWrongSizedPayloadIsRefusedAndLeavesTheValues) {
  const std::string bytes(9, '\0');
  std::vector<float> out(5, 1.5f);
  const absl::Status status = UnpackBfloat16Into(ByteChunks{{bytes.data(), bytes.size()}}, out);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out, std::vector<float>(5, 1.5f));
}

// Error feedback: a gradient bfloat16 cannot represent (1 + 2^-9: it rounds to 1 every time) sent
// 1,000 times sums to 1,000 * (1 + 2^-9) within one rounding, where plain rounding loses it all.
TEST(Bfloat16, ErrorFeedbackKeepsTheSumOfWhatWasSent) {
  const std::vector<float> gradient(3, 1.0f + 0x1p-9f);
  std::vector<float> residual(3, 0.0f);
  double with_feedback = 0;
  double without = 0;
  std::vector<float> received(3);
  for (int step = 0; step < 1000; ++step) {
    const std::string fed = PackBfloat16(gradient, residual);
    ASSERT_TRUE(UnpackBfloat16Into(ByteChunks{{fed.data(), fed.size()}}, received).ok());
    with_feedback += received[0];
    const std::string plain = PackBfloat16(gradient);
    ASSERT_TRUE(UnpackBfloat16Into(ByteChunks{{plain.data(), plain.size()}}, received).ok());
    without += received[0];
  }
  const double exact = 1000 * (1.0 + 0x1p-9);
  EXPECT_NEAR(with_feedback, exact, 0x1p-7);
  EXPECT_NEAR(without, 1000.0, 1e-9);  // every step's 2^-9 lost
  EXPECT_LE(std::abs(residual[0]), 0x1p-8f);
}

TEST(Bfloat16, ANonFiniteValueLeavesNoResidual) {
  const std::vector<float> gradient = {std::numeric_limits<float>::quiet_NaN(), 1.0f};
  std::vector<float> residual = {0.25f, 0.0f};
  PackBfloat16(gradient, residual);
  EXPECT_EQ(residual[0], 0.0f);
}

}  // namespace
}  // namespace syncopate::tensor
