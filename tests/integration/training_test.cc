// Real processes on loopback: coordinator, shards, workers and an evaluator train a small MLP.
#include <signal.h>

#include "gtest/gtest.h"
#include "tests/integration/cluster_test_util.h"

namespace syncopate {
namespace {

using testing::Options;
using testing::SmallJob;
using testing::WaitFor;

bool Done(const v1::ClusterStatus& s) { return s.state() == v1::JOB_DONE; }

// Scenario: sync training of a 6k subset for 2 epochs learns (accuracy well above chance 0.1,
// test loss below the untrained ~2.3) and every update consumed one global batch.
TEST(Training, SyncLowersTheLoss) {
  auto cluster = launch::LocalCluster::Start(Options(SmallJob(v1::MODE_SYNC, 2, 2, 2), "sync"));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto status = WaitFor(**cluster, Done, absl::Seconds(120));
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_TRUE(status->last_eval().final());
  EXPECT_GT(status->last_eval().accuracy(), 0.70);
  EXPECT_LT(status->last_eval().loss(), 0.9);
  EXPECT_GE(status->examples(), 12000);
  for (const v1::ShardStatus& shard : status->shards()) {
    EXPECT_EQ(shard.mode(), v1::MODE_SYNC);
    // Sync: one update per global batch of G = 64 (both workers pushed G/2 each time).
    EXPECT_NEAR(static_cast<double>(shard.version()), 12000.0 / 64, 3);
    EXPECT_EQ(shard.gradients_rejected(), 0);
  }
  for (const launch::Exit& exit : (*cluster)->Stop()) {
    EXPECT_TRUE(WIFEXITED(exit.status) && WEXITSTATUS(exit.status) == 0) << exit.Describe();
  }
}

// Scenario: async (apply on arrival) also learns; every gradient is its own update.
TEST(Training, AsyncLowersTheLoss) {
  auto cluster = launch::LocalCluster::Start(Options(SmallJob(v1::MODE_ASYNC, 2, 1, 3), "async"));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto status = WaitFor(**cluster, Done, absl::Seconds(120));
  ASSERT_TRUE(status.ok()) << status.status();
  // Async applies stale gradients at full weight with the sync hyperparameters, so it learns
  // more slowly (measured 0.68-0.72 here); the bound only says it clearly learned (chance: 0.1,
  // untrained loss: ~2.3).
  EXPECT_GT(status->last_eval().accuracy(), 0.55);
  EXPECT_LT(status->last_eval().loss(), 1.2);
  const v1::ShardStatus& shard = status->shards(0);
  EXPECT_EQ(shard.mode(), v1::MODE_ASYNC);
  EXPECT_EQ(shard.version(), shard.gradients_applied());
}

// Scenario: a worker SIGKILLed mid-run in sync mode leaves the membership within a bounded
// time, the barrier stops waiting for it, its leases are re-issued and the job completes.
TEST(Training, KilledWorkerIsRemovedAndTheRunCompletes) {
  auto cluster = launch::LocalCluster::Start(Options(SmallJob(v1::MODE_SYNC, 3, 2, 3), "kill"));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto running = WaitFor(
      **cluster, [](const v1::ClusterStatus& s) { return s.examples() > 3000; }, absl::Seconds(60));
  ASSERT_TRUE(running.ok()) << running.status();
  ASSERT_EQ(running->membership().worker_ids_size(), 3);
  (*cluster)->processes().Signal(launch::LocalCluster::WorkerName(1), SIGKILL);

  auto shrunk = WaitFor(
      **cluster, [](const v1::ClusterStatus& s) { return s.membership().worker_ids_size() == 2; },
      absl::Seconds(30));
  ASSERT_TRUE(shrunk.ok()) << shrunk.status();
  EXPECT_EQ(shrunk->membership().local_batch(), 32);  // G = 64 re-split across 2 workers

  auto done = WaitFor(**cluster, Done, absl::Seconds(120));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_GE(done->examples(), 18000);
  EXPECT_GT(done->last_eval().accuracy(), 0.70);
  int dead = 0;
  for (const v1::WorkerStatus& w : done->workers()) {
    if (w.name() == launch::LocalCluster::WorkerName(1)) {
      EXPECT_FALSE(w.alive());
      ++dead;
    }
  }
  EXPECT_EQ(dead, 1);
}

}  // namespace
}  // namespace syncopate
