#include "libs/aggregation/global_batch_aggregator.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncopate::aggregation {
namespace {

using ::testing::ElementsAre;

v1::Membership Members(const std::vector<int32_t>& ids, int32_t local_batch) {
  v1::Membership m;
  for (int32_t id : ids) m.add_worker_ids(id);
  m.set_local_batch(local_batch);
  return m;
}

GradientPush PushOf(int32_t worker, int64_t token, int64_t samples, const std::vector<float>& g) {
  return GradientPush{worker, token, samples, g, {}};
}

std::vector<float> Take(GlobalBatchAggregator& agg) {
  std::vector<float> mean(2);
  agg.TakeUpdate(mean);
  return mean;
}

TEST(SyncAggregation, AppliesOnlyWhenEveryMemberPushed) {
  GlobalBatchAggregator agg(2, 4, v1::MODE_SYNC);
  agg.SetMembership(Members({1, 2}, 2));
  const std::vector<float> g1 = {1, 2}, g2 = {3, 6};
  EXPECT_EQ(agg.Push(PushOf(1, 0, 2, g1)).outcome, v1::PUSH_APPLIED);
  EXPECT_FALSE(agg.UpdateReady());
  EXPECT_THAT(agg.BarrierWaitingFor(), ElementsAre(2));
  EXPECT_EQ(agg.Push(PushOf(2, 0, 2, g2)).outcome, v1::PUSH_APPLIED);
  ASSERT_TRUE(agg.UpdateReady());
  EXPECT_THAT(Take(agg), ElementsAre(2.0f, 4.0f));
  EXPECT_EQ(agg.version(), 1);
  EXPECT_FALSE(agg.UpdateReady());
}

TEST(SyncAggregation, NormalisesBySampleCountAcrossUnequalBatches) {
  GlobalBatchAggregator agg(2, 4, v1::MODE_SYNC);
  agg.SetMembership(Members({1, 2}, 2));
  agg.Push(PushOf(1, 0, 3, {1, 1}));
  agg.Push(PushOf(2, 0, 1, {5, 5}));
  EXPECT_THAT(Take(agg), ElementsAre(2.0f, 2.0f));  // (3*1 + 1*5) / 4
}

// A gradient from before the barrier (a transition's) is dropped but fills its member's place;
// a second push for the version is a duplicate; future tokens and strangers are refused.
TEST(SyncAggregation, DropsStaleButCountsItsPlaceRejectsDuplicatesFutureTokensAndStrangers) {
  GlobalBatchAggregator agg(2, 2, v1::MODE_SYNC, /*version=*/5);
  agg.SetMembership(Members({1, 2}, 1));
  const std::vector<float> g = {1, 1};
  PushVerdict stale = agg.Push(PushOf(1, 4, 1, g));
  EXPECT_EQ(stale.outcome, v1::PUSH_DROPPED);
  EXPECT_EQ(stale.staleness, 1);
  EXPECT_EQ(agg.buffered_samples(), 0);
  EXPECT_THAT(agg.BarrierWaitingFor(), ElementsAre(2));

  PushVerdict dup = agg.Push(PushOf(1, 5, 1, g));
  EXPECT_EQ(dup.outcome, v1::PUSH_REJECTED);
  EXPECT_EQ(dup.status.code(), absl::StatusCode::kAlreadyExists);

  PushVerdict future = agg.Push(PushOf(2, 6, 1, g));
  EXPECT_EQ(future.outcome, v1::PUSH_REJECTED);
  EXPECT_EQ(future.status.code(), absl::StatusCode::kOutOfRange);

  PushVerdict stranger = agg.Push(PushOf(9, 5, 1, g));
  EXPECT_EQ(stranger.outcome, v1::PUSH_REJECTED);
  EXPECT_EQ(stranger.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(agg.buffered_samples(), 0);

  // Worker 2's gradient completes the barrier: the mean is over its samples alone.
  EXPECT_EQ(agg.Push(PushOf(2, 5, 1, {3, 3})).outcome, v1::PUSH_APPLIED);
  EXPECT_THAT(Take(agg), ElementsAre(3.0f, 3.0f));
  EXPECT_EQ(agg.version(), 6);
}

// Every place filled by a dropped gradient: the version moves on without an update, so no pull
// waits forever on a barrier nobody can fill again.
TEST(SyncAggregation, ABarrierOfDroppedGradientsReleasesWithoutAnUpdate) {
  GlobalBatchAggregator agg(2, 2, v1::MODE_SYNC, /*version=*/5);
  agg.SetMembership(Members({1, 2}, 1));
  agg.Push(PushOf(1, 4, 1, {1, 1}));
  EXPECT_FALSE(agg.UpdateReady());
  agg.Push(PushOf(2, 3, 1, {1, 1}));
  ASSERT_TRUE(agg.UpdateReady());
  std::vector<float> mean(2, 9.0f);
  EXPECT_EQ(agg.TakeUpdate(mean), 0);
  EXPECT_THAT(mean, ElementsAre(0.0f, 0.0f));
  EXPECT_EQ(agg.version(), 6);
}

TEST(SyncAggregation, BarrierNeverWaitsOnADepartedWorker) {
  GlobalBatchAggregator agg(2, 3, v1::MODE_SYNC);
  agg.SetMembership(Members({1, 2, 3}, 1));
  agg.Push(PushOf(1, 0, 1, {3, 3}));
  agg.Push(PushOf(2, 0, 1, {1, 1}));
  EXPECT_FALSE(agg.UpdateReady());
  agg.SetMembership(Members({1, 2}, 2));  // worker 3 died
  ASSERT_TRUE(agg.UpdateReady());
  EXPECT_THAT(Take(agg), ElementsAre(2.0f, 2.0f));
  // A departed worker's late gradient is refused, never applied.
  EXPECT_EQ(agg.Push(PushOf(3, 1, 1, {100, 100})).outcome, v1::PUSH_REJECTED);
}

TEST(AsyncAggregation, EveryGradientIsAnUpdate) {
  GlobalBatchAggregator agg(2, 8, v1::MODE_ASYNC);
  agg.SetMembership(Members({1, 2}, 4));
  agg.Push(PushOf(1, 0, 4, {1, 2}));
  ASSERT_TRUE(agg.UpdateReady());
  EXPECT_THAT(Take(agg), ElementsAre(1.0f, 2.0f));
  PushVerdict late = agg.Push(PushOf(2, 0, 4, {3, 4}));  // computed on version 0, now 1
  EXPECT_EQ(late.outcome, v1::PUSH_APPLIED);
  EXPECT_EQ(late.staleness, 1);
  EXPECT_THAT(Take(agg), ElementsAre(3.0f, 4.0f));
  EXPECT_EQ(agg.version(), 2);
}

TEST(GbaAggregation, AppliesOnceTheBufferHoldsAGlobalBatch) {
  GlobalBatchAggregator agg(2, 4, v1::MODE_GBA);
  agg.SetMembership(Members({1, 2}, 2));
  agg.Push(PushOf(1, 0, 2, {1, 1}));
  EXPECT_FALSE(agg.UpdateReady());
  agg.Push(PushOf(1, 0, 2, {3, 3}));  // same worker twice: no barrier in gba
  ASSERT_TRUE(agg.UpdateReady());
  std::vector<float> mean(2);
  EXPECT_EQ(agg.TakeUpdate(mean), 4);
  EXPECT_THAT(mean, ElementsAre(2.0f, 2.0f));
}

TEST(GbaAggregation, DecaysGradientsBeyondThresholdAndDividesBySamples) {
  // N=2, B=2, G=4: threshold = ceil(2*2/4) + 1 = 2.
  GlobalBatchAggregator agg(2, 4, v1::MODE_GBA, /*version=*/10);
  agg.SetMembership(Members({1, 2}, 2));
  EXPECT_EQ(agg.staleness_threshold(), 2);
  PushVerdict fresh = agg.Push(PushOf(1, 8, 2, {4, 4}));  // tau = 2: full weight
  EXPECT_EQ(fresh.outcome, v1::PUSH_APPLIED);
  EXPECT_DOUBLE_EQ(fresh.weight, 1.0);
  PushVerdict stale = agg.Push(PushOf(2, 6, 2, {4, 4}));  // tau = 4: weight 1/(4-2+1)
  EXPECT_EQ(stale.outcome, v1::PUSH_DECAYED);
  EXPECT_DOUBLE_EQ(stale.weight, 1.0 / 3.0);
  // (2*4 + 2*4/3) / 4 samples: the decayed gradient shortens the step.
  std::vector<float> mean = Take(agg);
  EXPECT_FLOAT_EQ(mean[0], (8.0f + 8.0f / 3.0f) / 4.0f);
}

TEST(ModeSwitch, SyncToGbaKeepsTheBarrierBufferWithoutApplyingIt) {
  GlobalBatchAggregator agg(2, 4, v1::MODE_SYNC, 3);
  agg.SetMembership(Members({1, 2}, 2));
  agg.Push(PushOf(1, 3, 2, {2, 2}));
  agg.SetMode(v1::MODE_GBA);
  EXPECT_FALSE(agg.UpdateReady());
  EXPECT_EQ(agg.version(), 3);  // no update, same version
  EXPECT_EQ(agg.buffered_samples(), 2);
  agg.Push(PushOf(1, 3, 2, {4, 4}));
  ASSERT_TRUE(agg.UpdateReady());
  EXPECT_THAT(Take(agg), ElementsAre(3.0f, 3.0f));  // both gradients, each exactly once
  EXPECT_EQ(agg.version(), 4);
}

TEST(ModeSwitch, GbaToSyncFlushesTheBufferThenBarriersOnTheNextVersion) {
  GlobalBatchAggregator agg(2, 8, v1::MODE_GBA, 7);
  agg.SetMembership(Members({1, 2}, 4));
  agg.Push(PushOf(2, 7, 2, {6, 6}));
  agg.SetMode(v1::MODE_SYNC);
  ASSERT_TRUE(agg.UpdateReady());  // the old buffer, normalised by its own sample count
  std::vector<float> mean(2);
  EXPECT_EQ(agg.TakeUpdate(mean), 2);
  EXPECT_THAT(mean, ElementsAre(6.0f, 6.0f));
  EXPECT_EQ(agg.version(), 8);
  // The barrier for version 8 waits for both members: the gradient the flush consumed does not
  // count. One worker 2 computed on version 7 while the switch happened is dropped, not applied
  // twice, but fills worker 2's place in barrier 8.
  EXPECT_THAT(agg.BarrierWaitingFor(), ElementsAre(1, 2));
  EXPECT_EQ(agg.Push(PushOf(2, 7, 2, {6, 6})).outcome, v1::PUSH_DROPPED);
  EXPECT_THAT(agg.BarrierWaitingFor(), ElementsAre(1));
  agg.Push(PushOf(1, 8, 4, {2, 2}));
  EXPECT_THAT(Take(agg), ElementsAre(2.0f, 2.0f));
  EXPECT_EQ(agg.version(), 9);
}

// Two shards switched gba -> sync a moment apart (the CTR DeepFM example in auto, 2026-11-28):
// worker 1's gba push reached shard A before A's switch and its next push reached B after B's;
// worker 2 the other way round. Holding each at the shard where its stale push landed left A
// waiting for worker 1 (held at B) and B for worker 2 (held at A) forever. A placeholder from
// before the stretch of sync fills the place without holding, and the member's own gradient for
// the version replaces it: both barriers release.
TEST(ModeSwitch, TwoShardsSwitchingAMomentApartCannotDeadlock) {
  GlobalBatchAggregator a(2, 8, v1::MODE_GBA, 10);
  GlobalBatchAggregator b(2, 8, v1::MODE_GBA, 10);
  a.SetMembership(Members({1, 2}, 4));
  b.SetMembership(Members({1, 2}, 4));
  std::vector<float> mean(2);
  EXPECT_EQ(a.Push(PushOf(1, 10, 4, {1, 1})).outcome, v1::PUSH_APPLIED);  // before A's switch
  EXPECT_EQ(b.Push(PushOf(2, 10, 4, {1, 1})).outcome, v1::PUSH_APPLIED);  // before B's switch
  for (GlobalBatchAggregator* shard : {&a, &b}) {
    shard->SetMode(v1::MODE_SYNC);
    ASSERT_TRUE(shard->UpdateReady());
    shard->TakeUpdate(mean);  // the flush
    EXPECT_EQ(shard->version(), 11);
    EXPECT_EQ(shard->sync_since(), 11);
  }
  EXPECT_EQ(b.Push(PushOf(1, 10, 4, {1, 1})).outcome, v1::PUSH_DROPPED);  // after B's switch
  EXPECT_EQ(a.Push(PushOf(2, 10, 4, {1, 1})).outcome, v1::PUSH_DROPPED);  // after A's switch
  EXPECT_THAT(a.BarrierWaitingFor(), ElementsAre(1));
  EXPECT_THAT(b.BarrierWaitingFor(), ElementsAre(2));
  // Neither is held: both pull version 11 everywhere and push on it.
  EXPECT_FALSE(b.HasPushedForVersion(1));
  EXPECT_FALSE(a.HasPushedForVersion(2));
  EXPECT_EQ(a.Push(PushOf(1, 11, 4, {2, 2})).outcome, v1::PUSH_APPLIED);
  EXPECT_EQ(b.Push(PushOf(1, 11, 4, {2, 2})).outcome,
            v1::PUSH_APPLIED);  // replaces its placeholder
  ASSERT_TRUE(a.UpdateReady());
  EXPECT_THAT(Take(a), ElementsAre(2.0f, 2.0f));  // worker 2's placeholder added nothing
  EXPECT_THAT(b.BarrierWaitingFor(), ElementsAre(2));
  EXPECT_EQ(b.Push(PushOf(2, 11, 4, {4, 4})).outcome, v1::PUSH_APPLIED);
  EXPECT_THAT(Take(b), ElementsAre(3.0f, 3.0f));
  // Worker 2's gradient on 11 reaches A after A released 11: stale within this stretch of sync,
  // so it holds worker 2 until A's next release, as in steady sync.
  EXPECT_EQ(a.Push(PushOf(2, 11, 4, {4, 4})).outcome, v1::PUSH_DROPPED);
  EXPECT_TRUE(a.HasPushedForVersion(2));
  EXPECT_EQ(a.Push(PushOf(2, 12, 4, {4, 4})).status.code(), absl::StatusCode::kAlreadyExists);
}

// A roll-back (or a restore) starts a new stretch of sync: gradients from before it are
// placeholders that do not hold.
TEST(ModeSwitch, ARestoredVersionStartsANewStretchOfSync) {
  GlobalBatchAggregator agg(2, 8, v1::MODE_SYNC, 20);
  agg.SetMembership(Members({1, 2}, 4));
  agg.RestoreVersion(21);
  EXPECT_EQ(agg.sync_since(), 21);
  EXPECT_EQ(agg.Push(PushOf(1, 20, 4, {1, 1})).outcome, v1::PUSH_DROPPED);
  EXPECT_FALSE(agg.HasPushedForVersion(1));
  EXPECT_THAT(agg.BarrierWaitingFor(), ElementsAre(2));
}

TEST(ModeSwitch, EmptyBufferSwitchesWithoutAnUpdate) {
  GlobalBatchAggregator agg(2, 4, v1::MODE_GBA, 2);
  agg.SetMembership(Members({1}, 4));
  agg.SetMode(v1::MODE_SYNC);
  EXPECT_FALSE(agg.UpdateReady());
  EXPECT_EQ(agg.version(), 2);
}

// Sparse rows: table 0 has rows of width 2. A row a push does not carry is a zero gradient from
// that push, so every row divides by the update's whole sample count, like dense elements.
TEST(SparseAggregation, RowsNormaliseByTheGlobalBatchLikeDenseElements) {
  GlobalBatchAggregator agg(1, 4, v1::MODE_SYNC, 0, /*table_dims=*/{2});
  agg.SetMembership(Members({1, 2}, 2));
  const std::vector<uint64_t> keys1 = {7, 9}, keys2 = {7};
  const std::vector<float> rows1 = {1, 1, 4, 8}, rows2 = {3, 3};
  const std::vector<float> dense = {0};
  const std::vector<SparseGradient> sparse1 = {{0, keys1, rows1}};
  const std::vector<SparseGradient> sparse2 = {{0, keys2, rows2}};
  agg.Push(GradientPush{1, 0, 2, dense, sparse1});
  EXPECT_EQ(agg.buffered_rows(), 2);
  agg.Push(GradientPush{2, 0, 2, dense, sparse2});
  EXPECT_EQ(agg.buffered_rows(), 2);  // key 7 once, summed
  ASSERT_TRUE(agg.UpdateReady());
  std::vector<float> mean(1);
  SparseUpdate update;
  EXPECT_EQ(agg.TakeUpdate(mean, &update), 4);
  ASSERT_EQ(update.tables.size(), 1u);
  EXPECT_THAT(update.tables[0].keys, ElementsAre(7u, 9u));
  // key 7: (2*1 + 2*3) / 4 = 2; key 9: 2*(4, 8) / 4 = (2, 4).
  EXPECT_THAT(update.tables[0].rows, ElementsAre(2.0f, 2.0f, 2.0f, 4.0f));
  EXPECT_EQ(agg.buffered_rows(), 0);
  // The next update starts empty.
  agg.Push(GradientPush{1, 1, 2, dense, sparse2});
  agg.Push(GradientPush{2, 1, 2, dense, {}});
  agg.TakeUpdate(mean, &update);
  EXPECT_THAT(update.tables[0].keys, ElementsAre(7u));
  EXPECT_THAT(update.tables[0].rows, ElementsAre(1.5f, 1.5f));
}

TEST(SparseAggregation, StaleRowsAreDecayedWithTheirPush) {
  // N=2, B=2, G=4: threshold 2; tau = 4 gives weight 1/3, for dense and rows alike.
  GlobalBatchAggregator agg(1, 4, v1::MODE_GBA, 10, /*table_dims=*/{1});
  agg.SetMembership(Members({1, 2}, 2));
  const std::vector<uint64_t> keys = {5};
  const std::vector<float> row = {3}, dense = {3};
  const std::vector<SparseGradient> sparse = {{0, keys, row}};
  agg.Push(GradientPush{1, 10, 2, dense, sparse});
  agg.Push(GradientPush{2, 6, 2, dense, sparse});
  ASSERT_TRUE(agg.UpdateReady());
  std::vector<float> mean(1);
  SparseUpdate update;
  agg.TakeUpdate(mean, &update);
  EXPECT_FLOAT_EQ(mean[0], (6.0f + 2.0f) / 4.0f);
  EXPECT_FLOAT_EQ(update.tables[0].rows[0], mean[0]);
}

TEST(SparseAggregation, SyncToGbaKeepsBufferedRowsAndRestoreClearsThem) {
  GlobalBatchAggregator agg(1, 4, v1::MODE_SYNC, 3, /*table_dims=*/{1});
  agg.SetMembership(Members({1, 2}, 2));
  const std::vector<uint64_t> keys = {1};
  const std::vector<float> row = {2}, dense = {0};
  const std::vector<SparseGradient> sparse = {{0, keys, row}};
  agg.Push(GradientPush{1, 3, 2, dense, sparse});
  agg.SetMode(v1::MODE_GBA);
  EXPECT_EQ(agg.buffered_rows(), 1);
  agg.RestoreVersion(9);
  EXPECT_EQ(agg.buffered_rows(), 0);
  EXPECT_EQ(agg.buffered_samples(), 0);
}

// The look-ahead's d: the mean staleness of a worker's last W admitted gba pushes (W = the
// straggler detector's window, 8 for two workers), forgotten on a mode switch; 0 in sync.
TEST(GbaAggregation, PredictsEachWorkersStalenessFromItsRecentPushes) {
  GlobalBatchAggregator agg(1, 4, v1::MODE_GBA);
  agg.SetMembership(Members({1, 2}, 1));
  EXPECT_EQ(agg.PredictedStaleness(1), 0);  // nothing pushed yet
  const std::vector<float> g(1, 1.0f);
  float mean[1];
  // Four pushes of one sample each make an update; every round is one version staler.
  for (int round = 0; round < 3; ++round) {
    for (int k = 0; k < 4; ++k) agg.Push(PushOf(1, 0, 1, g));
    ASSERT_TRUE(agg.UpdateReady());
    agg.TakeUpdate(mean);
    if (round == 1) {
      EXPECT_DOUBLE_EQ(agg.PredictedStaleness(1), 0.5);  // 0,0,0,0,1,1,1,1
    }
  }
  EXPECT_DOUBLE_EQ(agg.PredictedStaleness(1), 1.5);  // the window forgot the zeros
  EXPECT_EQ(agg.PredictedStaleness(2), 0);           // per worker
  agg.SetMode(v1::MODE_SYNC);
  EXPECT_EQ(agg.PredictedStaleness(1), 0);
  agg.SetMode(v1::MODE_GBA);
  EXPECT_EQ(agg.PredictedStaleness(1), 0);  // the old mode's staleness is forgotten
}

}  // namespace
}  // namespace syncopate::aggregation
