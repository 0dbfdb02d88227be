#include "libs/embedding/owner_shard.h"

#include <vector>

#include "gtest/gtest.h"

namespace syncopate::embedding {
namespace {

TEST(OwnerShard, MatchesPinnedValues) {
  // SplitMix64(key) mod S, computed independently. Ownership is persisted in checkpoints and
  // agreed between processes of different builds: a change here must be deliberate.
  EXPECT_EQ(OwnerShard(0, 8), 7);
  EXPECT_EQ(OwnerShard(1, 8), 1);
  EXPECT_EQ(OwnerShard(42, 3), 1);
  EXPECT_EQ(OwnerShard(123456789, 16), 9);
  EXPECT_EQ(OwnerShard(~uint64_t{0}, 1000), 936);
}

TEST(OwnerShard, OneShardOwnsEverything) {
  for (uint64_t key : {uint64_t{0}, uint64_t{7}, ~uint64_t{0}}) EXPECT_EQ(OwnerShard(key, 1), 0);
}

TEST(OwnerShard, SpreadsConsecutiveKeysEvenly) {
  constexpr int kShards = 8;
  constexpr int kKeys = 100000;
  std::vector<int> counts(kShards, 0);
  for (uint64_t key = 0; key < kKeys; ++key) {
    const int32_t shard = OwnerShard(key, kShards);
    ASSERT_GE(shard, 0);
    ASSERT_LT(shard, kShards);
    ++counts[shard];
  }
  // Binomial(100000, 1/8): 12500 +- 105 (one standard deviation); 5% is about 6 of them.
  constexpr double kExpected = static_cast<double>(kKeys) / kShards;
  for (int count : counts) EXPECT_NEAR(count, kExpected, kExpected * 0.05);
}

TEST(OwnerShard, NonPositiveShardCountIsNotADivisionByZero) {
  EXPECT_EQ(OwnerShard(5, 0), 0);
  EXPECT_EQ(OwnerShard(5, -3), 0);
}

}  // namespace
}  // namespace syncopate::embedding
