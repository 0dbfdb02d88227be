// Fault scenarios with real processes: a process is SIGKILLed mid-run and the run completes.
#include <signal.h>  // NOLINT(modernize-deprecated-headers): SIGKILL is POSIX, not in <csignal>
#include <sys/wait.h>

#include <set>

#include "gtest/gtest.h"
#include "tests/integration/cluster_test_util.h"

namespace syncopate {
namespace {

using testing::Options;
using testing::SmallJob;
using testing::WaitFor;

bool Done(const v1::ClusterStatus& s) { return s.state() == v1::JOB_DONE; }

class ShardDeath : public ::testing::TestWithParam<v1::Mode> {};

// Scenario: shard 0 is SIGKILLed mid-run; like a supervisor (compose `restart:`, a StatefulSet)
// the test starts it again on its port; it restores its latest checkpoint (taken every second),
// the workers reconnect with backoff, and the run completes with a trained model.
TEST_P(ShardDeath, KilledShardRestoresItsCheckpointAndTheRunCompletes) {
  // 10 epochs = 937 global batches: the kill comes at version ~150, and what is left must fit
  // the 120 s bound with room on a loaded CI machine (measured there: ~5x slower than a quiet
  // 2-core machine, where 30 epochs left ~2,600 versions at ~125/s).
  v1::JobSpec job = SmallJob(GetParam(), 3, 2, 10);
  job.set_checkpoint_interval_seconds(1);
  auto cluster = launch::LocalCluster::Start(
      Options(job, absl::StrCat("shard-death-", v1::Mode_Name(GetParam()))));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto running = WaitFor(
      **cluster, [](const v1::ClusterStatus& s) { return s.shards(0).version() > 150; },
      absl::Seconds(60));
  ASSERT_TRUE(running.ok()) << running.status();
  // At least one periodic checkpoint exists once a second has passed at these versions.
  absl::SleepFor(absl::Seconds(1.5));
  const int64_t version_before = (*cluster)->Status()->shards(0).version();
  absl::Status restarted = (*cluster)->KillAndRestart(launch::LocalCluster::ShardName(0));
  ASSERT_TRUE(restarted.ok()) << restarted;

  auto done = WaitFor(**cluster, Done, absl::Seconds(120));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_GT(done->last_eval().accuracy(), 0.70);
  // Restored, not restarted from scratch: it resumed near where it was killed.
  const std::string log = testing::ReadFile((*cluster)->run_dir() + "/logs/shard-0.log");
  EXPECT_NE(log.find("restored version"), std::string::npos)
      << log.substr(log.size() > 2000 ? log.size() - 2000 : 0);
  EXPECT_GT(done->shards(0).version(), version_before / 2);
}

INSTANTIATE_TEST_SUITE_P(Modes, ShardDeath, ::testing::Values(v1::MODE_SYNC, v1::MODE_GBA),
                         [](const auto& info) { return v1::Mode_Name(info.param); });

// Scenario: a worker SIGKILLed mid-run in gba mode: no barrier to release, but its leases are
// re-issued and the job completes.
TEST(WorkerDeath, KilledWorkerInGbaModeTheRunCompletes) {
  auto cluster =
      launch::LocalCluster::Start(Options(SmallJob(v1::MODE_GBA, 3, 2, 5), "worker-death-gba"));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto running = WaitFor(
      **cluster, [](const v1::ClusterStatus& s) { return s.examples() > 3000; }, absl::Seconds(60));
  ASSERT_TRUE(running.ok()) << running.status();
  // 5 epochs leave ~27,000 examples after the kill, so it lands while the job runs.
  ASSERT_EQ(running->membership().worker_ids_size(), 3);
  (*cluster)->processes().Signal(launch::LocalCluster::WorkerName(2), SIGKILL);
  auto shrunk = WaitFor(
      **cluster, [](const v1::ClusterStatus& s) { return s.membership().worker_ids_size() == 2; },
      absl::Seconds(30));
  ASSERT_TRUE(shrunk.ok()) << shrunk.status();
  auto done = WaitFor(**cluster, Done, absl::Seconds(120));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_GE(done->examples(), 18000);
  EXPECT_GT(done->last_eval().accuracy(), 0.60);
}

// Scenario: the coordinator is SIGKILLed mid-run and started again on its port with its progress
// file; shards keep their parameters, workers rejoin under their names (same ids), the example
// count carries on, and the run completes.
class CoordinatorDeath : public ::testing::TestWithParam<v1::Mode> {};

TEST_P(CoordinatorDeath, RestartedCoordinatorCarriesOnAndTheRunCompletes) {
  auto cluster = launch::LocalCluster::Start(
      Options(SmallJob(GetParam(), 3, 2, 12),
              absl::StrCat("coordinator-death-", v1::Mode_Name(GetParam()))));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto running = WaitFor(
      **cluster, [](const v1::ClusterStatus& s) { return s.examples() > 8000; }, absl::Seconds(60));
  ASSERT_TRUE(running.ok()) << running.status();
  absl::SleepFor(absl::Seconds(1.5));  // the progress file is written about once a second
  absl::Status restarted = (*cluster)->KillAndRestart("coordinator");
  ASSERT_TRUE(restarted.ok()) << restarted;

  auto resumed = WaitFor(
      **cluster, [](const v1::ClusterStatus& s) { return s.examples() > 0; }, absl::Seconds(30));
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_GE(resumed->examples(), 8000) << "the example count carried on";
  auto done = WaitFor(**cluster, Done, absl::Seconds(120));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_GT(done->last_eval().accuracy(), 0.70);
  std::set<int32_t> ids;
  for (const v1::WorkerStatus& w : done->workers()) {
    if (w.role() == v1::ROLE_WORKER) ids.insert(w.worker_id());
  }
  EXPECT_EQ(ids, (std::set<int32_t>{1, 2, 3})) << "workers rejoined with their ids";
}

INSTANTIATE_TEST_SUITE_P(Modes, CoordinatorDeath, ::testing::Values(v1::MODE_SYNC, v1::MODE_GBA),
                         [](const auto& info) { return v1::Mode_Name(info.param); });

}  // namespace
}  // namespace syncopate
