// Real processes on loopback: coordinator, shards, workers and an evaluator train a small MLP.
#include <csignal>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "libs/job/job_spec.h"
#include "libs/straggler/mode_policy.h"
#include "tests/integration/cluster_test_util.h"

namespace syncopate {
namespace {

using testing::Options;
using testing::PacedOptions;
using testing::SmallJob;
using testing::WaitFor;

bool Done(const v1::ClusterStatus& s) { return s.state() == v1::JOB_DONE; }

// Scenario: sync training of a 6k subset for 2 epochs learns (accuracy well above chance 0.1,
// test loss below the untrained ~2.3) and every update consumed one global batch.
TEST(Training, SyncLowersTheLoss) {
  // Paced, so the run lasts its 188 updates x 10 ms on any machine and the evaluator has time
  // for several of its 26 points however fast the machine trains (unpaced, a loaded 2-core
  // machine finished the run while the evaluator read 1-4 of them).
  auto cluster =
      launch::LocalCluster::Start(PacedOptions(SmallJob(v1::MODE_SYNC, 2, 2, 2), "sync"));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto status = WaitFor(**cluster, Done, absl::Seconds(120));
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_TRUE(status->last_eval().final());
  EXPECT_GT(status->last_eval().accuracy(), 0.70);
  EXPECT_LT(status->last_eval().loss(), 0.9);
  EXPECT_GE(status->examples(), 12000);
  for (const v1::ShardStatus& shard : status->shards()) {
    EXPECT_EQ(shard.mode(), v1::MODE_SYNC);
    // Sync: every update consumed one G/2 gradient from each of the 2 members, i.e. one global
    // batch (the last update may be a partial one, released when the workers left).
    EXPECT_NEAR(static_cast<double>(shard.version()), shard.gradients().applied() / 2.0, 1.0);
    EXPECT_GE(shard.version(), 12000 / 64);
    EXPECT_EQ(shard.gradients().rejected(), 0);
  }
  // Evaluation points (EvalSpec): each evaluation measured the parameters of one point, at
  // exactly n * k global batches in sync, stamped with the job time the point was made.
  v1::JobSpec resolved = SmallJob(v1::MODE_SYNC, 2, 2, 2);
  job::ResolveRunLength(resolved, 6000);  // 188 updates: k = 7
  const int64_t k = resolved.eval().every_global_batches();
  ASSERT_GT(k, 0);
  int points = 0;
  int64_t last_point = 0;
  double last_seconds = 0;
  for (const v1::EvalStatus& e : status->eval_history()) {
    if (e.point() == 0) continue;
    ++points;
    EXPECT_GT(e.point(), last_point);
    EXPECT_EQ(e.examples_at_eval(), e.point() * k * 64);
    EXPECT_GE(e.seconds_at_eval(), last_seconds);
    EXPECT_LE(e.seconds_at_eval(), status->elapsed_seconds());
    last_point = e.point();
    last_seconds = e.seconds_at_eval();
  }
  // 26 points in a run of ~1 s: the evaluator skips to the newest kept one when it falls behind.
  EXPECT_GE(points, 5) << status->DebugString();
  for (const launch::Exit& exit : (*cluster)->StopAfterJob()) {
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
  EXPECT_EQ(shard.version(), shard.gradients().applied());
}

// Scenario: a worker SIGKILLed mid-run in sync mode leaves the membership within a bounded
// time, the barrier stops waiting for it, its leases are re-issued and the job completes.
TEST(Training, KilledWorkerIsRemovedAndTheRunCompletes) {
  // 5 epochs = 469 versions, paced to >= 4.7 s on any machine (testing::kPacedStep): the kill
  // lands while the job runs however fast the machine.
  auto cluster =
      launch::LocalCluster::Start(testing::PacedOptions(SmallJob(v1::MODE_SYNC, 3, 2, 5), "kill"));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto running = WaitFor(
      **cluster, [](const v1::ClusterStatus& s) { return s.examples() > 3000; }, absl::Seconds(60));
  ASSERT_TRUE(running.ok()) << running.status();
  ASSERT_EQ(running->state(), v1::JOB_RUNNING);
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

// Scenario: in sync, one worker's step hangs (its compute padded a million-fold 2 s into its
// training) while its heartbeat goes on. The coordinator removes it as stalled once the barrier
// has waited for it max(10 s, 10 x its median step) without a step, the barrier releases with
// the other two, and the job completes; before 2026-11-29 this run waited for ever.
TEST(Training, AWorkerWhoseStepHangsIsRemovedFromTheSyncBarrierAndTheRunCompletes) {
  launch::LocalClusterOptions options =
      testing::PacedOptions(SmallJob(v1::MODE_SYNC, 3, 2, 5), "hang");
  options.slowdown_schedules[1] = "0s:1,2s:1000000";
  auto cluster = launch::LocalCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::string hung = launch::LocalCluster::WorkerName(1);
  auto removed = WaitFor(
      **cluster,
      [&](const v1::ClusterStatus& s) {
        for (const v1::WorkerStatus& w : s.workers()) {
          if (w.name() == hung && !w.alive()) return true;
        }
        return s.state() == v1::JOB_DONE;
      },
      absl::Seconds(60));
  ASSERT_TRUE(removed.ok()) << removed.status();
  ASSERT_EQ(removed->state(), v1::JOB_RUNNING) << "the job ended before the step hung";
  auto done = WaitFor(**cluster, Done, absl::Seconds(120));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_GE(done->examples(), 30000);
  EXPECT_GT(done->last_eval().accuracy(), 0.70);
  for (const v1::WorkerStatus& w : done->workers()) {
    if (w.name() == hung) {
      EXPECT_EQ(w.departed_reason(), "stalled");
    }
  }
  // Its step still hangs: only SIGKILL ends it.
  (*cluster)->processes().Signal(hung, SIGKILL);
}

// Scenario: mode auto with one worker 4x slower for a stretch in the middle of the run. The
// shards switch to gba while it straggles, and after it recovers they return to sync or stay
// for the reason the policy gives; asserted on GetStatus (the modes the coordinator ordered and
// why), never on wall-clock speed.
TEST(Training, AutoSwitchesToGbaForATransientStragglerAndSettlesAfterIt) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The scenario needs the four padded workers to fit in about one core; instrumented code is
  // 2-3x slower, the straggler signal drowns in CPU contention and the 60 s wait times out
  // (measured in the ASan pass). Memory errors are covered by the other training tests.
  GTEST_SKIP() << "timing-based scenario; not meaningful under a sanitizer";
#endif
  v1::JobSpec job = SmallJob(v1::MODE_AUTO, 4, 2, 1);
  // The default model and batch: steps of milliseconds, so the detector measures compute rather
  // than timer and scheduler jitter.
  job.mutable_model()->clear_hidden();
  job.mutable_model()->add_hidden(256);
  job.mutable_model()->add_hidden(128);
  job.set_global_batch(256);
  job.mutable_stop()->set_epochs(0);
  job.mutable_stop()->set_max_examples(int64_t{1} << 40);  // we stop it ourselves
  launch::LocalClusterOptions options = Options(job, "auto");
  // Every worker padded 4x (the four need about one core), worker 3 another 4x in the middle.
  options.slowdowns = {4, 4, 4, 4};
  options.slowdown_schedules[3] = "0s:4,6s:16,18s:4";
  auto cluster = launch::LocalCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();

  auto slowdown_of_worker_3 = [](const v1::ClusterStatus& s) {
    for (const v1::WorkerStatus& w : s.workers()) {
      if (w.name() == launch::LocalCluster::WorkerName(3)) return w.slowdown();
    }
    return 0.0;
  };
  auto all_shards_in = [](const v1::ClusterStatus& s, v1::Mode mode) {
    for (const v1::ShardStatus& shard : s.shards()) {
      if (shard.mode() != mode || shard.switches() == 0) return false;
    }
    return true;
  };
  auto in_gba = WaitFor(
      **cluster,
      [&](const v1::ClusterStatus& s) {
        return all_shards_in(s, v1::MODE_GBA) && slowdown_of_worker_3(s) > 2;
      },
      absl::Seconds(60));
  ASSERT_TRUE(in_gba.ok()) << in_gba.status();
  for (const v1::ShardStatus& shard : in_gba->shards()) {
    EXPECT_EQ(shard.last_switch().recommended(), v1::MODE_GBA);
    EXPECT_THAT(shard.last_switch().reason(),
                ::testing::AnyOf("straggler_detected", "gba_predicted_faster"));
  }

  // After the recovery the policy holds no straggler. Before the shard has measured its
  // staleness cost a throughput tie sends it back to sync (stragglers_recovered); once measured,
  // it leaves gba only when goodput says sync is better (staleness_cost_exceeds_gain) and
  // otherwise stays (ADR 0007, "Leaving gba"). Either way the last decision must say so with
  // numbers that support it.
  auto settled = WaitFor(
      **cluster,
      [&](const v1::ClusterStatus& s) {
        if (slowdown_of_worker_3(s) >= 1.5) return false;
        for (const v1::ShardStatus& shard : s.shards()) {
          const v1::ModeDecisionStatus& d = shard.last_decision();
          if (!d.stragglers().empty() || d.seconds() <= 18.0) return false;
          const bool returned = shard.mode() == v1::MODE_SYNC && shard.switches() >= 2;
          const bool stays =
              shard.mode() == v1::MODE_GBA && d.reason() == "no_significant_difference";
          if (!returned && !stays) return false;
        }
        return true;
      },
      absl::Seconds(90));
  ASSERT_TRUE(settled.ok()) << settled.status();
  for (const v1::ShardStatus& shard : settled->shards()) {
    if (shard.mode() == v1::MODE_SYNC) {
      EXPECT_EQ(shard.last_switch().recommended(), v1::MODE_SYNC);
      // training_loss_rose: the loss guard's roll-back (ADR 0007) also returns a shard to sync.
      // This job's rate is still warming up (its run is 2^40 examples long), so its loss is flat
      // and noisy; under a loaded test machine the guard tripped on that noise once in three
      // full `./dev test` runs (2026-11-27). It is a return for the reason the policy gives.
      EXPECT_THAT(shard.last_switch().reason(),
                  ::testing::AnyOf("stragglers_recovered", "staleness_cost_exceeds_gain",
                                   "training_loss_rose"));
    } else {
      // Staying needs the cost measured, or, unmeasured (the shards can leave sync before ~37
      // sync updates measured it, as on a loaded machine), gba's lead still above one standard
      // error (ModePolicy::kReturnZ, the hysteresis band; below it the tie rule would have
      // returned the shard); and goodput not significantly below sync's.
      const bool measured =
          shard.last_decision().explanation().find("not measured yet") == std::string::npos;
      EXPECT_TRUE(measured || shard.last_decision().z() > ModePolicy::kReturnZ)
          << shard.last_decision().explanation();
      EXPECT_GE(shard.last_decision().goodput_z(), -2.0);
      EXPECT_GE(shard.last_decision().z(), -2.0);
    }
  }
}

}  // namespace
}  // namespace syncopate
