#include "libs/data/lease_table.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "syncopate/v1/coordinator.pb.h"

namespace syncopate::data {
namespace {

using ::syncopate::v1::DataLease;
using ::testing::ElementsAreArray;
using ::testing::Not;

LeaseTable MakeTable(int64_t num_examples, int64_t block_size, uint64_t seed) {
  absl::StatusOr<LeaseTable> table = LeaseTable::Create(num_examples, block_size, seed);
  EXPECT_TRUE(table.ok()) << table.status();
  return *std::move(table);
}

// How often each example of [0, num_examples) is visited by `leases`, through the order a worker
// would actually use.
std::vector<int> VisitCounts(const std::vector<DataLease>& leases, int64_t num_examples) {
  std::vector<int> counts(num_examples);
  for (const DataLease& lease : leases) {
    for (int64_t example : LeaseExampleOrder(lease)) ++counts.at(example);
  }
  return counts;
}

std::vector<int64_t> Begins(const std::vector<DataLease>& leases) {
  std::vector<int64_t> begins;
  begins.reserve(leases.size());
  for (const DataLease& lease : leases) begins.push_back(lease.begin());
  return begins;
}

// Same block of the same epoch: what a re-issue must preserve.
void ExpectSameBlock(const DataLease& actual, const DataLease& expected) {
  EXPECT_EQ(actual.epoch(), expected.epoch());
  EXPECT_EQ(actual.begin(), expected.begin());
  EXPECT_EQ(actual.end(), expected.end());
  EXPECT_EQ(actual.shuffle_seed(), expected.shuffle_seed());
}

TEST(LeaseTable, CreateRejectsNonPositiveSizes) {
  EXPECT_EQ(LeaseTable::Create(0, 10, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LeaseTable::Create(-5, 10, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LeaseTable::Create(100, 0, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LeaseTable::Create(100, -1, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(LeaseTable::Create(5, 100, 1).ok());  // one block, shorter than block_size
}

TEST(LeaseTable, CoversEachExampleExactlyOncePerEpoch) {
  constexpr int64_t kExamples = 1003;  // 11 blocks of 100; the last holds 3
  LeaseTable table = MakeTable(kExamples, 100, 17);
  for (int32_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<DataLease> leases;
    for (int i = 0; i < 11; ++i) {
      DataLease lease = table.Acquire(/*worker=*/i % 3);
      EXPECT_EQ(lease.epoch(), epoch);
      EXPECT_TRUE(table.Complete(lease.lease_id(), i % 3).ok());
      leases.push_back(lease);
    }
    EXPECT_THAT(VisitCounts(leases, kExamples), ::testing::Each(1)) << "epoch " << epoch;
    EXPECT_EQ(table.completed_examples(), kExamples * (epoch + 1));
    EXPECT_EQ(table.outstanding(), 0);
  }
}

TEST(LeaseTable, LastBlockIsShorter) {
  LeaseTable table = MakeTable(1003, 100, 17);
  std::vector<int64_t> sizes;
  for (int i = 0; i < 11; ++i) {
    DataLease lease = table.Acquire(0);
    sizes.push_back(lease.end() - lease.begin());
    if (lease.begin() == 1000) {
      EXPECT_EQ(lease.end(), 1003);
    }
  }
  std::sort(sizes.begin(), sizes.end());
  EXPECT_EQ(sizes.front(), 3);
  EXPECT_EQ(std::count(sizes.begin(), sizes.end(), 100), 10);
}

TEST(LeaseTable, ShufflesBlockOrderDifferentlyPerEpoch) {
  LeaseTable table = MakeTable(10000, 100, 5);  // 100 blocks
  std::vector<std::vector<DataLease>> epochs(2);
  for (auto& epoch : epochs) {
    for (int i = 0; i < 100; ++i) epoch.push_back(table.Acquire(0));
  }
  std::vector<int64_t> sorted_begins(100);
  for (int i = 0; i < 100; ++i) sorted_begins[i] = int64_t{100} * i;
  EXPECT_THAT(Begins(epochs[0]), Not(ElementsAreArray(sorted_begins)));
  EXPECT_THAT(Begins(epochs[0]), Not(ElementsAreArray(Begins(epochs[1]))));
  EXPECT_THAT(Begins(epochs[0]), ::testing::UnorderedElementsAreArray(sorted_begins));
  EXPECT_THAT(Begins(epochs[1]), ::testing::UnorderedElementsAreArray(sorted_begins));
}

TEST(LeaseTable, SameSeedGivesSameLeases) {
  LeaseTable first = MakeTable(5000, 64, 42);
  LeaseTable second = MakeTable(5000, 64, 42);
  LeaseTable other_seed = MakeTable(5000, 64, 43);
  std::vector<int64_t> first_begins, other_begins;
  for (int i = 0; i < 250; ++i) {  // a bit more than 3 epochs of 79 blocks
    DataLease a = first.Acquire(1);
    DataLease b = second.Acquire(1);
    EXPECT_EQ(a.lease_id(), b.lease_id());
    ExpectSameBlock(a, b);
    first_begins.push_back(a.begin());
    other_begins.push_back(other_seed.Acquire(1).begin());
  }
  EXPECT_NE(first_begins, other_begins);
}

// Pins the seed derivation and the shuffle, so a change to either (or a platform that would
// disagree) fails here rather than silently changing every training run.
TEST(LeaseTable, BlockOrderIsPinnedForSeed) {
  LeaseTable table = MakeTable(1000, 100, 2024);
  std::vector<DataLease> leases;
  leases.reserve(10);
  for (int i = 0; i < 10; ++i) leases.push_back(table.Acquire(0));
  // Cross-checked against an independent Python SplitMix64 + mt19937_64 + Fisher-Yates.
  EXPECT_THAT(Begins(leases),
              ElementsAreArray<int64_t>({400, 700, 600, 100, 0, 200, 300, 500, 800, 900}));
}

TEST(LeaseTable, RollsOverToNextEpochAfterLastBlock) {
  LeaseTable table = MakeTable(10, 5, 3);  // 2 blocks per epoch
  EXPECT_EQ(table.current_epoch(), 0);
  EXPECT_EQ(table.Acquire(0).epoch(), 0);
  EXPECT_EQ(table.Acquire(0).epoch(), 0);
  EXPECT_EQ(table.current_epoch(), 0);  // epoch 0 is fully issued, epoch 1 not yet started
  EXPECT_EQ(table.Acquire(0).epoch(), 1);
  EXPECT_EQ(table.current_epoch(), 1);
  // Leases never run out, even when none is completed.
  for (int i = 0; i < 7; ++i) table.Acquire(0);
  EXPECT_EQ(table.outstanding(), 10);
  EXPECT_EQ(table.current_epoch(), 4);
  EXPECT_EQ(table.completed_examples(), 0);
}

TEST(LeaseTable, LeaseIdsAreUniqueAndPositive) {
  LeaseTable table = MakeTable(100, 7, 9);
  std::set<int64_t> ids;
  for (int i = 0; i < 200; ++i) {
    DataLease lease = table.Acquire(i % 4);
    EXPECT_GT(lease.lease_id(), 0);
    EXPECT_TRUE(ids.insert(lease.lease_id()).second) << "duplicate id " << lease.lease_id();
    if (i % 10 == 9) table.ReleaseWorker(i % 4);  // re-issues must get fresh ids too
  }
}

TEST(LeaseTable, ShuffleSeedDiffersPerBlockAndEpoch) {
  LeaseTable table = MakeTable(1000, 100, 11);
  std::set<uint64_t> seeds;
  for (int i = 0; i < 30; ++i) seeds.insert(table.Acquire(0).shuffle_seed());
  EXPECT_EQ(seeds.size(), 30u);  // 3 epochs x 10 blocks
}

TEST(LeaseTable, ReissuesDepartedWorkersLeasesAndRefusesTheirCompletion) {
  LeaseTable table = MakeTable(1000, 100, 7);
  const DataLease kept = table.Acquire(/*worker=*/1);
  const DataLease first = table.Acquire(/*worker=*/2);
  const DataLease second = table.Acquire(/*worker=*/2);
  ASSERT_TRUE(table.Complete(kept.lease_id(), 1).ok());
  const DataLease still_held = table.Acquire(/*worker=*/1);

  EXPECT_EQ(table.ReleaseWorker(2), 2);
  EXPECT_EQ(table.outstanding(), 1);
  EXPECT_EQ(table.ReleaseWorker(2), 0);  // nothing left to release

  // Re-queued blocks come first, oldest first, with the same block and order but new ids.
  const DataLease reissued_first = table.Acquire(/*worker=*/3);
  const DataLease reissued_second = table.Acquire(/*worker=*/1);
  ExpectSameBlock(reissued_first, first);
  ExpectSameBlock(reissued_second, second);
  EXPECT_GT(reissued_first.lease_id(), still_held.lease_id());
  EXPECT_NE(reissued_second.lease_id(), second.lease_id());
  EXPECT_EQ(LeaseExampleOrder(reissued_first), LeaseExampleOrder(first));

  // The departed worker's late report is refused and not counted.
  EXPECT_EQ(table.Complete(first.lease_id(), 2).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(table.completed_examples(), 100);
  EXPECT_TRUE(table.Complete(reissued_first.lease_id(), 3).ok());
  EXPECT_TRUE(table.Complete(reissued_second.lease_id(), 1).ok());
  EXPECT_TRUE(table.Complete(still_held.lease_id(), 1).ok());
  EXPECT_EQ(table.outstanding(), 0);
}

// Scenario: three workers share an epoch and one departs holding two leases; the completed leases
// still cover every example exactly once, and the next epoch starts only after the re-issues.
TEST(LeaseTable, EpochCoveredExactlyOnceDespiteDeparture) {
  constexpr int64_t kExamples = 950;  // 10 blocks of 100; the last holds 50
  LeaseTable table = MakeTable(kExamples, 100, 99);
  std::vector<DataLease> completed;
  auto complete = [&](const DataLease& lease, int32_t worker) {
    ASSERT_TRUE(table.Complete(lease.lease_id(), worker).ok());
    completed.push_back(lease);
  };
  complete(table.Acquire(0), 0);
  table.Acquire(2);  // worker 2 takes two leases and departs before finishing either
  table.Acquire(2);
  complete(table.Acquire(1), 1);
  EXPECT_EQ(table.ReleaseWorker(2), 2);
  for (int i = 0; i < 8; ++i) {
    const DataLease lease = table.Acquire(i % 2);
    EXPECT_EQ(lease.epoch(), 0);
    complete(lease, i % 2);
  }
  EXPECT_THAT(VisitCounts(completed, kExamples), ::testing::Each(1));
  EXPECT_EQ(table.completed_examples(), kExamples);
  EXPECT_EQ(table.Acquire(0).epoch(), 1);
}

TEST(LeaseTable, CompleteRejectsUnknownForeignAndRepeatedLeases) {
  LeaseTable table = MakeTable(100, 10, 1);
  const DataLease lease = table.Acquire(/*worker=*/4);
  EXPECT_EQ(table.Complete(0, 4).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(table.Complete(-3, 4).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(table.Complete(lease.lease_id() + 1, 4).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(table.Complete(lease.lease_id(), 5).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(table.completed_examples(), 0);
  EXPECT_TRUE(table.Complete(lease.lease_id(), 4).ok());
  EXPECT_EQ(table.Complete(lease.lease_id(), 4).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(table.completed_examples(), 10);
}

// Scenario: the coordinator dies mid-epoch (one lease re-queued from a departed worker, two
// outstanding, three completed); a fresh table restored from its progress hands out the three
// unfinished blocks first and then the rest of the epoch: the epoch is covered exactly once.
TEST(LeaseTable, RestoredProgressCoversTheEpochExactlyOnce) {
  constexpr int64_t kExamples = 950;  // 10 blocks
  LeaseTable before = MakeTable(kExamples, 100, 42);
  std::vector<DataLease> completed;
  for (int i = 0; i < 3; ++i) {
    const DataLease lease = before.Acquire(1);
    ASSERT_TRUE(before.Complete(lease.lease_id(), 1).ok());
    completed.push_back(lease);
  }
  const DataLease requeued = before.Acquire(2);
  const DataLease held_a = before.Acquire(1);
  const DataLease held_b = before.Acquire(3);
  ASSERT_EQ(before.ReleaseWorker(2), 1);
  const v1::LeaseTableProgress progress = before.Progress();
  EXPECT_EQ(progress.unfinished_size(), 3);
  EXPECT_EQ(progress.next_in_order(), 6);
  EXPECT_EQ(progress.completed_examples(), 300);

  LeaseTable after = MakeTable(kExamples, 100, 42);
  ASSERT_TRUE(after.Restore(progress).ok());
  EXPECT_EQ(after.completed_examples(), 300);
  EXPECT_EQ(after.outstanding(), 0) << "the old holders are gone with the old coordinator";
  // The unfinished blocks first (re-queued, then outstanding in issue order), with fresh ids.
  const DataLease r1 = after.Acquire(7);
  const DataLease r2 = after.Acquire(7);
  const DataLease r3 = after.Acquire(7);
  ExpectSameBlock(r1, requeued);
  ExpectSameBlock(r2, held_a);
  ExpectSameBlock(r3, held_b);
  EXPECT_GT(r1.lease_id(), held_b.lease_id()) << "lease ids are never reused";
  // A report for a lease of the old coordinator is refused, not counted twice.
  EXPECT_EQ(after.Complete(held_a.lease_id(), 1).code(), absl::StatusCode::kFailedPrecondition);
  for (const DataLease& lease : {r1, r2, r3}) {
    ASSERT_TRUE(after.Complete(lease.lease_id(), 7).ok());
    completed.push_back(lease);
  }
  for (int i = 0; i < 4; ++i) {
    const DataLease lease = after.Acquire(7);
    EXPECT_EQ(lease.epoch(), 0);
    ASSERT_TRUE(after.Complete(lease.lease_id(), 7).ok());
    completed.push_back(lease);
  }
  EXPECT_THAT(VisitCounts(completed, kExamples), ::testing::Each(1));
  EXPECT_EQ(after.completed_examples(), kExamples);
  EXPECT_EQ(after.Acquire(7).epoch(), 1);
}

TEST(LeaseTable, RestoreRefusesAnotherShapeOrAnInconsistentRecord) {
  LeaseTable table = MakeTable(1000, 100, 1);
  table.Acquire(1);
  const v1::LeaseTableProgress good = table.Progress();
  LeaseTable other_shape = MakeTable(1000, 50, 1);
  EXPECT_EQ(other_shape.Restore(good).code(), absl::StatusCode::kFailedPrecondition);

  v1::LeaseTableProgress past_the_end = good;
  past_the_end.set_next_in_order(11);
  v1::LeaseTableProgress bad_block = good;
  bad_block.mutable_unfinished(0)->set_index(10);
  v1::LeaseTableProgress future_epoch = good;
  future_epoch.mutable_unfinished(0)->set_epoch(1);
  LeaseTable fresh = MakeTable(1000, 100, 1);
  for (const v1::LeaseTableProgress& bad : {past_the_end, bad_block, future_epoch}) {
    EXPECT_EQ(fresh.Restore(bad).code(), absl::StatusCode::kInvalidArgument)
        << bad.ShortDebugString();
  }
  // Unchanged by the refusals: the first lease is still block order position 0 of epoch 0.
  LeaseTable reference = MakeTable(1000, 100, 1);
  ExpectSameBlock(fresh.Acquire(1), reference.Acquire(1));
}

DataLease MakeLease(int64_t begin, int64_t end, uint64_t shuffle_seed) {
  DataLease lease;
  lease.set_begin(begin);
  lease.set_end(end);
  lease.set_shuffle_seed(shuffle_seed);
  return lease;
}

TEST(LeaseExampleOrder, IsAPermutationOfTheRange) {
  std::vector<int64_t> order = LeaseExampleOrder(MakeLease(500, 600, 12345));
  std::vector<int64_t> range(100);
  std::iota(range.begin(), range.end(), 500);
  EXPECT_THAT(order, Not(ElementsAreArray(range)));  // actually shuffled
  std::sort(order.begin(), order.end());
  EXPECT_THAT(order, ElementsAreArray(range));
}

TEST(LeaseExampleOrder, IsDeterministicPerSeed) {
  EXPECT_EQ(LeaseExampleOrder(MakeLease(0, 1000, 1)), LeaseExampleOrder(MakeLease(0, 1000, 1)));
  EXPECT_NE(LeaseExampleOrder(MakeLease(0, 1000, 1)), LeaseExampleOrder(MakeLease(0, 1000, 2)));
}

// Pins mt19937_64 + our Fisher-Yates: the same lease must be visited identically everywhere.
TEST(LeaseExampleOrder, IsPinnedForSeed) {
  EXPECT_THAT(LeaseExampleOrder(MakeLease(10, 20, 1)),
              ElementsAreArray<int64_t>({11, 17, 13, 19, 14, 10, 15, 12, 16, 18}));
}

TEST(LeaseExampleOrder, EmptyOrInvertedRangeIsEmpty) {
  EXPECT_TRUE(LeaseExampleOrder(MakeLease(7, 7, 1)).empty());
  EXPECT_TRUE(LeaseExampleOrder(MakeLease(9, 3, 1)).empty());
  EXPECT_THAT(LeaseExampleOrder(MakeLease(7, 8, 1)), ElementsAreArray<int64_t>({7}));
}

}  // namespace
}  // namespace syncopate::data
