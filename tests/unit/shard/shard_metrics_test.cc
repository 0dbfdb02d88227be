#include "libs/shard/shard_metrics.h"

#include <vector>

#include "gtest/gtest.h"
#include "prometheus/registry.h"

namespace syncopate::shard {
namespace {

// The staleness histogram the shard reports is its Prometheus histogram, bucket by bucket:
// le 0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, +Inf become whole-version ranges 0, 1, 2, 3, 4,
// 5-6, 7-8, ..., 33-64 and 65 and above; rejected pushes have no staleness and are not counted.
TEST(ShardMetrics, StalenessHistogramCountsEachBucketOnce) {
  prometheus::Registry registry;
  ShardMetrics metrics(registry, 3);
  for (int64_t staleness : {0, 0, 1, 5, 6, 100}) {
    metrics.CountOutcome(v1::PUSH_APPLIED, staleness);
  }
  metrics.CountOutcome(v1::PUSH_REJECTED, 0);
  const std::vector<v1::StalenessBucket> buckets = metrics.StalenessHistogram();
  ASSERT_EQ(buckets.size(), 13u);
  EXPECT_EQ(buckets[0].min_staleness(), 0);
  EXPECT_EQ(buckets[0].max_staleness(), 0);
  EXPECT_EQ(buckets[0].count(), 2);
  EXPECT_EQ(buckets[1].count(), 1);
  EXPECT_EQ(buckets[5].min_staleness(), 5);
  EXPECT_EQ(buckets[5].max_staleness(), 6);
  EXPECT_EQ(buckets[5].count(), 2);
  EXPECT_EQ(buckets[11].min_staleness(), 33);
  EXPECT_EQ(buckets[11].max_staleness(), 64);
  EXPECT_EQ(buckets[12].min_staleness(), 65);
  EXPECT_EQ(buckets[12].max_staleness(), -1) << "no upper bound";
  EXPECT_EQ(buckets[12].count(), 1);
  int64_t total = 0;
  for (const v1::StalenessBucket& b : buckets) total += b.count();
  EXPECT_EQ(total, 6);
}

}  // namespace
}  // namespace syncopate::shard
