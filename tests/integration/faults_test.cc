// Fault scenarios with real processes: a process is SIGKILLed mid-run and the run completes.
#include <signal.h>  // NOLINT(modernize-deprecated-headers): SIGKILL is POSIX, not in <csignal>
#include <sys/wait.h>

#include <set>

#include "gtest/gtest.h"
#include "tests/integration/cluster_test_util.h"

namespace syncopate {
namespace {

using testing::PacedOptions;
using testing::SmallJob;
using testing::WaitFor;

bool Done(const v1::ClusterStatus& s) { return s.state() == v1::JOB_DONE; }

class ShardDeath : public ::testing::TestWithParam<v1::Mode> {};

// Scenario: shard 0 is SIGKILLed mid-run; like a supervisor (compose `restart:`, a StatefulSet)
// the test starts it again on its port; it restores its latest checkpoint (taken every second),
// the workers reconnect with backoff, and the run completes with a trained model.
TEST_P(ShardDeath, KilledShardRestoresItsCheckpointAndTheRunCompletes) {
  // 10 epochs = 938 global batches, paced to >= 9.4 s on any machine (kPacedStep): the kill
  // lands at version ~150 with most of the job still to run.
  v1::JobSpec job = SmallJob(GetParam(), 3, 2, 10);
  job.set_checkpoint_interval_seconds(1);
  auto cluster = launch::LocalCluster::Start(
      PacedOptions(job, absl::StrCat("shard-death-", v1::Mode_Name(GetParam()))));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto running = WaitFor(
      **cluster, [](const v1::ClusterStatus& s) { return s.shards(0).version() > 150; },
      absl::Seconds(60));
  ASSERT_TRUE(running.ok()) << running.status();
  // The event the kill needs: a checkpoint of these versions exists (taken every second).
  ASSERT_TRUE(testing::Eventually(
      [&] { return testing::NewestCheckpointVersion(**cluster, 0) > 100; }, absl::Seconds(30)));
  const v1::ClusterStatus before = *(*cluster)->Status();
  ASSERT_EQ(before.state(), v1::JOB_RUNNING) << "the kill must land while the job runs";
  const int64_t version_before = before.shards(0).version();
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
  // 5 epochs, paced: >= ~4.8 s on any machine (3 workers, one step of 21 examples per 10 ms
  // each); the kill lands after ~0.5 s.
  auto cluster = launch::LocalCluster::Start(
      PacedOptions(SmallJob(v1::MODE_GBA, 3, 2, 5), "worker-death-gba"));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto running = WaitFor(
      **cluster, [](const v1::ClusterStatus& s) { return s.examples() > 3000; }, absl::Seconds(60));
  ASSERT_TRUE(running.ok()) << running.status();
  ASSERT_EQ(running->state(), v1::JOB_RUNNING);
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
  // 12 epochs, paced: >= ~11 s on any machine; the kill lands after ~1.5 s.
  auto cluster = launch::LocalCluster::Start(
      PacedOptions(SmallJob(GetParam(), 3, 2, 12),
                   absl::StrCat("coordinator-death-", v1::Mode_Name(GetParam()))));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  // The event the kill needs: the progress file (written about once a second) records the
  // examples a restarted coordinator carries on from.
  ASSERT_TRUE(testing::Eventually([&] { return testing::SavedProgressExamples(**cluster) > 8000; },
                                  absl::Seconds(60)));
  const v1::ClusterStatus before = *(*cluster)->Status();
  ASSERT_EQ(before.state(), v1::JOB_RUNNING) << "the kill must land while the job runs";
  absl::Status restarted = (*cluster)->KillAndRestart("coordinator");
  ASSERT_TRUE(restarted.ok()) << restarted;

  auto resumed = WaitFor(
      **cluster, [](const v1::ClusterStatus& s) { return s.examples() > 0; }, absl::Seconds(30));
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_GE(resumed->examples(), 8000) << "the example count carried on";
  auto done = WaitFor(**cluster, Done, absl::Seconds(120));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_GT(done->last_eval().accuracy(), 0.70);
  // Read after the end: a finished job's status keeps the workers that trained it.
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
