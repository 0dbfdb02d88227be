#include "libs/common/splitmix64.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace syncopate {
namespace {

// SplitMix64(x) is one step of Vigna's splitmix64 generator from state x: the generator seeded
// with 0 outputs SplitMix64(0), SplitMix64(γ), SplitMix64(2γ), ... with γ = 0x9e3779b97f4a7c15.
// These are the first four outputs of the reference implementation (prng.di.unimi.it, seed 0).
// Persisted results depend on them (initial weights, embedding row owners, lease orders, CTR
// keys and generated data), so any change to the mixer must fail here first.
TEST(SplitMix64, MatchesTheReferenceGeneratorSeededWithZero) {
  constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ull;
  EXPECT_EQ(SplitMix64(0), 0xe220a8397b1dcdafull);
  EXPECT_EQ(SplitMix64(kGamma), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(SplitMix64(2 * kGamma), 0x06c45d188009454full);
  EXPECT_EQ(SplitMix64(3 * kGamma), 0xf88bb8a8724c81ecull);
}

TEST(SplitMix64, IsAConstantExpressionAndWrapsAtTheTop) {
  static_assert(SplitMix64(0) == 0xe220a8397b1dcdafull);
  // x + γ wraps past 2^64 without undefined behaviour (unsigned arithmetic).
  EXPECT_EQ(SplitMix64(~uint64_t{0}), 0xe4d971771b652c20ull);
}

// DeriveSeed(p, v) = SplitMix64(p ^ SplitMix64(v)), computed independently (Python, 64-bit
// wrap). Order matters: the value is mixed before it meets the parent.
TEST(DeriveSeed, MixesTheValueThenThePair) {
  static_assert(DeriveSeed(0, 0) == 0xa706dd2f4d197e6full);
  EXPECT_EQ(DeriveSeed(42, 7), 0x6eab8625df268fbcull);
  EXPECT_EQ(DeriveSeed(7, 42), 0x16062d6c1339e500ull);
  EXPECT_EQ(DeriveSeed(42, 7), SplitMix64(42 ^ SplitMix64(7)));
}

}  // namespace
}  // namespace syncopate
