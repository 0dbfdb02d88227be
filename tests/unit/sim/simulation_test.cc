#include "libs/sim/simulation.h"

#include <vector>

#include "gtest/gtest.h"
#include "libs/aggregation/global_batch_aggregator.h"
#include "libs/data/lease_table.h"
#include "libs/job/job_spec.h"
#include "libs/job/model_kind.h"
#include "libs/optim/optimizer.h"
#include "libs/tensor/initializer.h"
#include "libs/workload/workload.h"
#include "tests/unit/sim/sim_test_util.h"

namespace syncopate::sim {
namespace {

// A small MLP (784-16-10) on the first 256 Fashion-MNIST images: real model, real data, a run
// of a few hundred events.
v1::JobSpec TinyJob(v1::Mode mode, int workers, int shards) {
  v1::JobSpec job = *job::ParseJobSpec(job::DefaultJobText());
  job.mutable_model()->clear_hidden();
  job.mutable_model()->add_hidden(16);
  job.mutable_dataset()->set_train_limit(256);
  job.mutable_dataset()->set_test_limit(200);
  job.set_global_batch(32);
  job.set_num_workers(workers);
  job.set_num_shards(shards);
  job.set_block_size(32);
  job.mutable_stop()->set_epochs(2);
  job.set_mode(mode);
  return job;
}

TEST(Simulation, SameSeedSameResultBitForBit) {
  SimOptions options;
  options.job = TinyJob(v1::MODE_AUTO, 4, 2);
  options.spec = NoisyWithAStraggler();
  options.timing_seed = 11;
  options.job.mutable_eval()->set_interval_seconds(0.5);
  absl::StatusOr<SimResult> first = RunSimulation(options);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<SimResult> second = RunSimulation(options);
  ASSERT_TRUE(second.ok()) << second.status();

  ExpectSameRun(*first, *second);
  // Two epochs of 256 examples: the coordinator stops at 512.
  EXPECT_GE(first->examples, 512);

  // Another timing seed moves the step times, so the result differs.
  options.timing_seed = 12;
  absl::StatusOr<SimResult> other = RunSimulation(options);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(other->wall_seconds, first->wall_seconds);
}

// The coordinator's own mode controller runs in the simulation: a persistent 4x straggler moves
// an auto job's shards from sync to gba, confirmed, and only that way.
TEST(Simulation, AutoSwitchesToGbaUnderAPersistentStraggler) {
  SimOptions options;
  options.job = TinyJob(v1::MODE_AUTO, 4, 2);
  options.job.mutable_dataset()->set_train_limit(2048);
  options.spec = Clockwork();
  options.spec.mutable_step_time()->set_lognormal_sigma(0.05);
  options.periodic_eval = false;
  v1::WorkerSpeed* slow = options.spec.add_speeds();
  slow->set_worker(3);
  slow->set_factor(4);
  absl::StatusOr<SimResult> result = RunSimulation(options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->switches.size(), 2u);  // one per shard
  for (const SimSwitch& s : result->switches) {
    EXPECT_EQ(s.mode, v1::MODE_GBA);
    EXPECT_GT(s.seconds, 0);
  }
  // In gba the straggler's gradients land beyond the staleness threshold and are decayed.
  EXPECT_GT(result->gradients.decayed(), 0);
}

TEST(Simulation, AWorkerDyingMidStepNeverHoldsTheSyncBarrier) {
  SimOptions options;
  options.job = TinyJob(v1::MODE_SYNC, 4, 2);
  options.spec = Clockwork();
  options.periodic_eval = false;
  // The first pull is back at ~2 ms, the first compute ends at ~12 ms: worker 1 (id 2) dies in
  // the middle of its first step, its gradient never pushed. The coordinator hears of it 50 ms
  // later (a silent death, not a closed stream).
  v1::WorkerDeath* death = options.spec.add_deaths();
  death->set_worker(1);
  death->set_at_seconds(0.006);
  death->set_detected_after_seconds(0.05);
  absl::StatusOr<SimResult> result = RunSimulation(options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->dead_workers, std::vector<int32_t>{2});
  EXPECT_GE(result->examples, 512);
  EXPECT_EQ(result->gradients.rejected(), 0);
  // The barrier of version 0 waited for the detection (~56 ms), then the three survivors split
  // G = 32 as 11 + 11 + 10 and went on: more than 512 / 32 = 16 updates' worth of time.
  EXPECT_GT(result->wall_seconds, 0.056);
  EXPECT_GE(result->shard_versions[0], 16);
  EXPECT_EQ(result->shard_versions[0], result->shard_versions[1]);
  // Nothing the dead worker computed reached a shard: version 0 took the 3 survivors' pushes,
  // every later version too (per shard), and no push was dropped as stale.
  EXPECT_EQ(result->gradients.applied(), int64_t{2} * 3 * result->shard_versions[0]);
  EXPECT_EQ(result->gradients.dropped(), 0);
}

// The real coordinator waits for workers to come back; with none coming back (no joins in the
// spec) that is a wait until the virtual-time limit, reported as such rather than a hang.
TEST(Simulation, EveryWorkerDeadEndsAtTheVirtualTimeLimit) {
  SimOptions options;
  options.job = TinyJob(v1::MODE_SYNC, 2, 1);
  options.spec = Clockwork();
  options.spec.set_max_virtual_seconds(10);
  options.periodic_eval = false;
  for (int w = 0; w < 2; ++w) {
    v1::WorkerDeath* death = options.spec.add_deaths();
    death->set_worker(w);
    death->set_at_seconds(0.1);
  }
  absl::StatusOr<SimResult> result = RunSimulation(options);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded) << result.status();
}

// SimSpec.joins: worker 3 (index) is absent at the start and joins at 0.1 s. Its hello arrives
// one latency later (1 ms) and makes it a member at once; it then pulls, computes and pushes like
// the others, and a sync barrier counts its gradient from then on. A worker whose join comes
// after the job's end is never accepted and never holds the job up.
TEST(Simulation, AJoinerBecomesAMemberAtItsHelloAndPushesFromThen) {
  SimOptions options = ClockworkRun(TinyJob(v1::MODE_SYNC, 5, 2));
  options.job.mutable_dataset()->set_train_limit(1024);  // ~1 s of steps
  AddJoin(options.spec, 3, 0.1);
  AddJoin(options.spec, 1, 1000);
  absl::StatusOr<SimResult> result = RunSimulation(options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_LT(result->wall_seconds, 100);

  // The coordinator's ids, in hello order: indices 0, 2, 4 at the start are 1, 2, 3, the
  // evaluator is 4, index 3 is 5; index 1 is refused and has none.
  ASSERT_EQ(result->workers.size(), 5u);
  EXPECT_EQ(result->workers[3].index, 3);
  EXPECT_EQ(result->workers[3].id, 5);
  EXPECT_EQ(result->workers[4].index, 1);
  EXPECT_EQ(result->workers[4].id, 0);
  ASSERT_EQ(result->joins.size(), 1u);
  EXPECT_EQ(result->joins[0].worker, 5);
  EXPECT_NEAR(result->joins[0].seconds, 0.101, 1e-9);
  // Its first step: the welcome (1 ms), a pull (2 ms), 10 ms of compute, a push (2 ms), then the
  // report (1 ms), and in sync the barrier of the version it pulled may hold its next pull.
  const SimWorkerTally& joiner = result->workers[3];
  EXPECT_GE(joiner.first_step_seconds, 0.101 + 0.001 + 0.002 + 0.01 + 0.002 + 0.001 - 1e-9);
  EXPECT_GT(joiner.steps, 10);
  EXPECT_EQ(result->workers[4].steps, 0);  // joins after the end: refused, never ran
  for (int k = 0; k < 3; ++k) EXPECT_LT(result->workers[k].first_step_seconds, 0.1);

  // Every version applied the gradient of every member: 3 per shard before the join, 4 after
  // (no push dropped or rejected around the membership change).
  EXPECT_EQ(result->gradients.rejected(), 0);
  EXPECT_EQ(result->gradients.dropped(), 0);
  const int64_t versions = result->shard_versions[0];
  EXPECT_GT(result->gradients.applied(), int64_t{2} * 3 * versions);
  EXPECT_LT(result->gradients.applied(), int64_t{2} * 4 * versions);
  EXPECT_GE(result->examples, 2048);
}

// Worker 1 dies mid-step at 6 ms and the coordinator would notice only at 0.506 s; it restarts
// at 50 ms and rejoins under its name: same id, and the new session supersedes the old one, so
// the sync barrier of version 0 stops waiting for the dead life (three members) instead of
// waiting for the detection, and the new life is a member again from its first lease request.
// The old session's removal at 0.506 s then finds it superseded and leaves the new member
// alone: every version after that applies 4 gradients per shard.
TEST(Simulation, ARejoinKeepsItsIdAndSupersedesAnUnnoticedDeath) {
  SimOptions options = ClockworkRun(TinyJob(v1::MODE_SYNC, 4, 2));
  options.job.mutable_dataset()->set_train_limit(1024);
  AddDeath(options.spec, 1, 0.006, /*detected_after=*/0.5);
  AddJoin(options.spec, 1, 0.05);
  absl::StatusOr<SimResult> result = RunSimulation(options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->dead_workers, std::vector<int32_t>{2});
  ASSERT_EQ(result->joins.size(), 1u);
  EXPECT_EQ(result->joins[0].worker, 2);
  EXPECT_GT(result->wall_seconds, 0.6);  // the job outlives the stale detection
  EXPECT_GT(result->workers[1].steps, 10);
  EXPECT_LT(result->workers[1].first_step_seconds, 0.1);
  EXPECT_EQ(result->gradients.rejected(), 0);
  EXPECT_EQ(result->gradients.dropped(), 0);
  const int64_t versions = result->shard_versions[0];
  // At most the version of the supersession and the one before the readmission had three.
  EXPECT_GE(result->gradients.applied(), int64_t{2} * (4 * versions - 2));
  EXPECT_LT(result->gradients.applied(), int64_t{2} * 4 * (versions + 1));
}

// The job the all-dead test below cannot finish finishes once one worker comes back: the
// coordinator accepts it as a member again and it does the rest of the work alone.
TEST(Simulation, AWorkerRejoiningAfterEveryoneDiedFinishesTheJob) {
  SimOptions options = ClockworkRun(TinyJob(v1::MODE_SYNC, 2, 1));
  options.spec.set_max_virtual_seconds(10);
  AddDeath(options.spec, 0, 0.1);
  AddDeath(options.spec, 1, 0.1);
  AddJoin(options.spec, 0, 0.5);
  absl::StatusOr<SimResult> result = RunSimulation(options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->dead_workers, (std::vector<int32_t>{1, 2}));
  EXPECT_GE(result->examples, 512);
  EXPECT_GT(result->wall_seconds, 0.5);
  EXPECT_EQ(result->gradients.rejected(), 0);
}

// Joins and rejoins draw nothing at random: with noise, hiccups, a straggler, auto mode, a late
// joiner, a rejoin the coordinator has not noticed and one it has, two runs agree bit for bit,
// and the run differs from the one without joins.
TEST(Simulation, JoinsAndRejoinsSameSeedSameResultBitForBit) {
  SimOptions options;
  options.job = TinyJob(v1::MODE_AUTO, 6, 2);
  options.job.mutable_dataset()->set_train_limit(1024);
  options.job.mutable_eval()->set_interval_seconds(0.25);
  options.spec = NoisyWithAStraggler();
  options.spec.set_startup_seconds(0.02);
  options.timing_seed = 5;
  absl::StatusOr<SimResult> without = RunSimulation(options);
  ASSERT_TRUE(without.ok()) << without.status();
  AddJoin(options.spec, 5, 0.2);
  AddDeath(options.spec, 1, 0.15, /*detected_after=*/1);  // unnoticed when it rejoins
  AddJoin(options.spec, 1, 0.3);
  AddDeath(options.spec, 2, 0.1);  // noticed, then rejoins
  AddJoin(options.spec, 2, 0.4);
  absl::StatusOr<SimResult> first = RunSimulation(options);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<SimResult> second = RunSimulation(options);
  ASSERT_TRUE(second.ok()) << second.status();
  ExpectSameRun(*first, *second);
  ASSERT_EQ(first->joins.size(), 3u);
  ASSERT_EQ(first->joins.size(), second->joins.size());
  for (size_t i = 0; i < first->joins.size(); ++i) {
    EXPECT_EQ(first->joins[i].seconds, second->joins[i].seconds);
    EXPECT_EQ(first->joins[i].worker, second->joins[i].worker);
  }
  for (size_t k = 0; k < first->workers.size(); ++k) {
    EXPECT_EQ(first->workers[k].steps, second->workers[k].steps);
    EXPECT_GT(first->workers[k].steps, 0) << "id " << first->workers[k].id;
  }
  EXPECT_EQ(first->dead_workers, (std::vector<int32_t>{3, 2}));
  EXPECT_FALSE(BitIdentical(first->parameters, without->parameters));
}

TEST(Simulation, AStopRequestEndsTheRunCancelled) {
  SimOptions options;
  options.job = TinyJob(v1::MODE_SYNC, 2, 1);
  options.job.mutable_stop()->set_epochs(20);  // well over kStopPollEvents events
  options.spec = Clockwork();
  options.periodic_eval = false;
  int polls = 0;
  options.stop_requested = [&polls] { return ++polls == 2; };
  absl::StatusOr<SimResult> result = RunSimulation(options);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled) << result.status();
  // Polled at event 0 and again kStopPollEvents later, where it said stop.
  EXPECT_EQ(polls, 2);

  options.stop_requested = [] { return false; };
  absl::StatusOr<SimResult> unstopped = RunSimulation(options);
  ASSERT_TRUE(unstopped.ok()) << unstopped.status();
  options.stop_requested = nullptr;
  absl::StatusOr<SimResult> plain = RunSimulation(options);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ExpectSameRun(*unstopped, *plain);
}

// The end-to-end check: a simulated sync run produces exactly the parameters the real
// aggregator and optimizer produce when fed the same batches directly. Two workers, one shard,
// no noise: worker 1 is always one event ahead of worker 2, so the coordinator hands out leases
// alternately (1, 2, 1, 2, ...) and the shard receives worker 1's push first at every version.
TEST(Simulation, SyncRunMatchesTheRealAggregatorFedDirectly) {
  SimOptions options;
  options.job = TinyJob(v1::MODE_SYNC, 2, 1);
  options.job.mutable_dataset()->set_train_limit(64);
  options.job.mutable_stop()->set_epochs(1);
  options.spec = Clockwork();
  options.periodic_eval = false;
  absl::StatusOr<SimResult> result = RunSimulation(options);
  ASSERT_TRUE(result.ok()) << result.status();
  const int64_t versions = result->shard_versions[0];
  // 64 examples at G = 32 are 2 updates; a step in flight when the stop arrives may add one.
  ASSERT_GE(versions, 2);

  // The same job, by hand: the coordinator's schedule resolution, the shard's initial values,
  // the job's optimizer and the real aggregator.
  v1::JobSpec job = options.job;
  job::ResolveRunLength(job, 64);
  absl::StatusOr<job::ModelLayout> layout = job::BuiltinLayoutForJob(job);
  ASSERT_TRUE(layout.ok());
  std::vector<v1::ShardPartition> partitions = *job::PartitionModel(*layout, 1);
  std::vector<float> params(static_cast<size_t>(partitions[0].flat_end()));
  for (const v1::TensorSlice& slice : partitions[0].slices()) {
    ASSERT_TRUE(tensor::InitializeSlice(
                    slice.init(), job.seed(), slice.tensor(), slice.tensor_offset(),
                    std::span<float>(params).subspan(slice.flat_offset(), slice.length()))
                    .ok());
  }
  auto optimizer = *optim::CreateOptimizer(job.optimizer(), static_cast<int64_t>(params.size()));
  aggregation::GlobalBatchAggregator aggregator(static_cast<int64_t>(params.size()), 32,
                                                v1::MODE_SYNC);
  v1::Membership membership;
  membership.add_worker_ids(1);
  membership.add_worker_ids(2);
  membership.set_local_batch(16);
  aggregator.SetMembership(membership);
  // Each worker visits its leases' examples in order; leases alternate between the workers.
  const std::vector<std::vector<int64_t>> stream =
      AlternatingLeaseStreams(64, 32, job.seed(), versions * 16);
  auto model = *job::CreateWorkload(job, workload::Purpose::kTrain);
  std::vector<float> grad(params.size()), mean(params.size());
  workload::TableRows rows, row_grads;
  for (int64_t k = 0; k < versions; ++k) {
    for (int w = 0; w < 2; ++w) {
      std::vector<int64_t> batch(stream[w].begin() + k * 16, stream[w].begin() + (k + 1) * 16);
      ASSERT_TRUE(model->PrepareTrain(batch).ok());
      ASSERT_TRUE(model->TrainStep(params, rows, grad, row_grads).ok());
      const aggregation::PushVerdict verdict = aggregator.Push({w + 1, k, 16, grad, {}});
      ASSERT_EQ(verdict.outcome, v1::PUSH_APPLIED);
    }
    ASSERT_TRUE(aggregator.UpdateReady());
    aggregator.TakeUpdate(mean);
    optimizer->Apply(params, mean, 1.0);
  }
  EXPECT_TRUE(BitIdentical(result->parameters, params));
  EXPECT_EQ(result->gradients.applied(), 2 * versions);
}

// cpu.cores 0 is "every process on a machine of its own": the other cpu fields then change
// nothing, to the last bit, so specs written before the CPU model keep their results.
TEST(Simulation, ZeroCoresIsTheModelWithoutContentionBitForBit) {
  SimOptions options;
  options.job = TinyJob(v1::MODE_AUTO, 4, 2);
  options.spec = Clockwork();
  options.spec.mutable_step_time()->set_lognormal_sigma(0.2);
  options.spec.add_speeds()->set_worker(3);
  options.spec.mutable_speeds(0)->set_factor(4);
  options.job.mutable_eval()->set_interval_seconds(0.5);
  absl::StatusOr<SimResult> before = RunSimulation(options);
  ASSERT_TRUE(before.ok()) << before.status();
  options.spec.mutable_cpu()->set_cores(0);
  options.spec.mutable_cpu()->set_compute_padding(4);
  options.spec.mutable_cpu()->set_network_uses_cores(true);
  absl::StatusOr<SimResult> after = RunSimulation(options);
  ASSERT_TRUE(after.ok()) << after.status();
  ExpectSameRun(*before, *after);
}

// Processor sharing in a whole run. Four sync workers on one core, compute padded 4x by sleep:
// released together by each barrier, the four 2.5 ms CPU parts share the core and all end at
// 10 ms, and each trainer then sleeps 3 x 10 ms, so a round's compute takes 40 ms instead of 10.
// All CPU (padding 1), the same four 10 ms steps take 40 ms too, but no round can be shorter
// than the core's 40 ms of work. With enough cores there is no contention at all.
TEST(Simulation, SharedCoresStretchComputeByProcessorSharing) {
  SimOptions options;
  options.job = TinyJob(v1::MODE_SYNC, 4, 1);
  options.spec = Clockwork();
  options.periodic_eval = false;
  absl::StatusOr<SimResult> alone = RunSimulation(options);
  ASSERT_TRUE(alone.ok()) << alone.status();
  const double rounds = static_cast<double>(alone->shard_versions[0]);

  options.spec.mutable_cpu()->set_cores(4);
  absl::StatusOr<SimResult> enough = RunSimulation(options);
  ASSERT_TRUE(enough.ok()) << enough.status();
  EXPECT_NEAR(enough->wall_seconds, alone->wall_seconds, 1e-6);
  EXPECT_EQ(enough->shard_versions, alone->shard_versions);

  options.spec.mutable_cpu()->set_cores(1);
  options.spec.mutable_cpu()->set_compute_padding(4);
  absl::StatusOr<SimResult> padded = RunSimulation(options);
  ASSERT_TRUE(padded.ok()) << padded.status();
  EXPECT_EQ(padded->shard_versions, alone->shard_versions);
  // 30 ms more per round: the messages' 4 ms per round stay as they were. (Training time: the
  // job's end waits for the coordinator's next tick, a 200 ms grid.)
  EXPECT_NEAR(padded->training_seconds - alone->training_seconds, 0.03 * rounds, 0.002 * rounds);

  options.spec.mutable_cpu()->set_compute_padding(1);
  absl::StatusOr<SimResult> busy = RunSimulation(options);
  ASSERT_TRUE(busy.ok()) << busy.status();
  EXPECT_NEAR(busy->training_seconds, padded->training_seconds, 0.002 * rounds);

  // gba: the workers drift apart, and four all-CPU workers on one core are bounded by it: every
  // step is 10 ms of the core's time.
  options.job.set_mode(v1::MODE_GBA);
  absl::StatusOr<SimResult> gba = RunSimulation(options);
  ASSERT_TRUE(gba.ok()) << gba.status();
  EXPECT_GE(gba->training_seconds, 0.01 * static_cast<double>(gba->steps) - 0.001);
}

// With contention everything (compute, messages, shard service, evaluations, a death mid-step)
// still happens in one order: two runs agree bit for bit.
TEST(Simulation, ContentionIsDeterministicBitForBit) {
  SimOptions options;
  options.job = TinyJob(v1::MODE_AUTO, 4, 2);
  options.spec = Clockwork();
  options.spec.mutable_step_time()->set_seconds_per_example(0.001);
  options.spec.mutable_step_time()->set_lognormal_sigma(0.3);
  options.spec.mutable_network()->set_bandwidth_bytes_per_second(2e7);
  options.spec.mutable_shard()->set_seconds_per_message(0.0005);
  options.spec.add_speeds()->set_worker(3);
  options.spec.mutable_speeds(0)->set_factor(4);
  v1::WorkerDeath* death = options.spec.add_deaths();
  death->set_worker(1);
  death->set_at_seconds(0.3);
  v1::CpuSpec* cpu = options.spec.mutable_cpu();
  cpu->set_cores(2);
  cpu->set_compute_padding(4);
  cpu->set_network_uses_cores(true);
  options.spec.set_evaluation_seconds(0.02);
  options.job.mutable_eval()->set_interval_seconds(0.25);
  absl::StatusOr<SimResult> first = RunSimulation(options);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<SimResult> second = RunSimulation(options);
  ASSERT_TRUE(second.ok()) << second.status();
  ExpectSameRun(*first, *second);
  EXPECT_EQ(first->dead_workers, std::vector<int32_t>{2});
}

// The coordinator is the real one: it asks for the final evaluation only once every worker's
// session has ended, so a gba job whose dead worker goes unnoticed for 5 s trains to its end
// without it but finishes only after the death is noticed (the old simulator ended at once).
TEST(Simulation, TheFinalEvaluationWaitsForTheCoordinatorToNoticeADeath) {
  SimOptions options = ClockworkRun(TinyJob(v1::MODE_GBA, 3, 1));
  AddDeath(options.spec, 1, 0.05, /*detected_after=*/5);
  absl::StatusOr<SimResult> result = RunSimulation(options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_GE(result->examples, 512);
  EXPECT_LT(result->training_seconds, 2);
  EXPECT_GT(result->wall_seconds, 5.05);
  // On the coordinator's next tick after it noticed: a 200 ms grid, a message and the report.
  EXPECT_LT(result->wall_seconds, 5.05 + 0.2 + 0.01);
}

// SimSpec.shard.stream_threads: the real shard serves each worker's stream on its own gRPC
// thread, so a gba worker's pull does not queue behind every other worker's push. In the
// bench's regime (scenario a's spec, the default model, 4 workers, 2 shards on 2 cores), one
// server per shard keeps the four gba workers in a convoy (each pull waits for the pushes ahead
// of it, as a barrier would: no staleness at all); a thread per stream lets them drift apart
// (mean staleness ~0.5), as the real ones do. Both are deterministic.
TEST(Simulation, StreamThreadsLetGbaWorkersDriftApart) {
  SimOptions options;
  options.job = *job::ParseJobSpec(job::DefaultJobText());  // the bench's model: 0.9 MiB a step
  options.job.mutable_dataset()->set_train_limit(4096);
  options.job.mutable_dataset()->set_test_limit(200);
  options.job.mutable_stop()->set_epochs(1);
  options.job.set_mode(v1::MODE_GBA);
  absl::StatusOr<v1::SimSpec> spec =
      LoadSimSpecFile(std::string(SYNCOPATE_SOURCE_DIR) + "/examples/sim/bench_a.textproto");
  ASSERT_TRUE(spec.ok()) << spec.status();
  options.spec = *spec;
  options.spec.set_startup_seconds(0);
  options.spec.mutable_shard()->set_stream_threads(false);
  options.periodic_eval = false;
  auto mean_staleness = [](const SimResult& r) {
    return static_cast<double>(r.gradients.staleness_sum()) /
           static_cast<double>(r.gradients.applied() + r.gradients.decayed());
  };
  absl::StatusOr<SimResult> convoy = RunSimulation(options);
  ASSERT_TRUE(convoy.ok()) << convoy.status();
  options.spec.mutable_shard()->set_stream_threads(true);
  absl::StatusOr<SimResult> streams = RunSimulation(options);
  ASSERT_TRUE(streams.ok()) << streams.status();
  absl::StatusOr<SimResult> again = RunSimulation(options);
  ASSERT_TRUE(again.ok()) << again.status();
  ExpectSameRun(*streams, *again);
  EXPECT_GT(mean_staleness(*streams), mean_staleness(*convoy) + 0.2)
      << "convoy " << mean_staleness(*convoy) << ", streams " << mean_staleness(*streams);
  // The streams' service overlaps: the same work in less time.
  EXPECT_LT(streams->training_seconds, convoy->training_seconds);
}

// The real job's overheads: workers start after a startup, and the job ends once the final
// evaluation is in. Without contention both add exactly their time to a sync run.
TEST(Simulation, StartupAndTheFinalEvaluationAddTheirTime) {
  SimOptions options;
  options.job = TinyJob(v1::MODE_SYNC, 2, 1);
  options.spec = Clockwork();
  options.periodic_eval = false;
  absl::StatusOr<SimResult> plain = RunSimulation(options);
  ASSERT_TRUE(plain.ok()) << plain.status();
  options.spec.set_startup_seconds(2);
  options.spec.set_evaluation_seconds(0.5);
  absl::StatusOr<SimResult> real_like = RunSimulation(options);
  ASSERT_TRUE(real_like.ok()) << real_like.status();
  EXPECT_NEAR(real_like->wall_seconds, plain->wall_seconds + 2.5, 1e-6);
  EXPECT_NEAR(real_like->final_evaluation().seconds, real_like->wall_seconds, 1e-9);
  EXPECT_EQ(real_like->final_evaluation().accuracy, plain->final_evaluation().accuracy);
}

TEST(Simulation, RefusesBadSpecs) {
  SimOptions options;
  options.job = TinyJob(v1::MODE_SYNC, 2, 1);
  options.spec = Clockwork();
  options.spec.add_speeds()->set_worker(2);  // the job has workers 0 and 1
  options.spec.mutable_speeds(0)->set_factor(2);
  EXPECT_EQ(RunSimulation(options).status().code(), absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(ParseSimSpec("step_time { seconds_per_step: }").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadSimSpecFile("/nonexistent/spec.textproto").status().code(),
            absl::StatusCode::kNotFound);
  options.job = TinyJob(v1::MODE_SYNC, 2, 1);
  options.spec = Clockwork();
  options.spec.mutable_cpu()->set_compute_padding(0.5);  // a sleep cannot be negative
  EXPECT_EQ(RunSimulation(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.spec = Clockwork();
  options.spec.mutable_cpu()->set_cores(-1);
  EXPECT_EQ(RunSimulation(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.spec = Clockwork();
  options.spec.mutable_shard()->set_stream_threads(true);  // nothing would bound the threads
  EXPECT_EQ(RunSimulation(options).status().code(), absl::StatusCode::kInvalidArgument);
}

// SimSpec.mode_schedule: a sync job's shards run gba from half of the run's global batches on,
// every shard switched once, at the tick after the slower shard passed the half.
TEST(Simulation, AModeScheduleSwitchesEveryShardAtItsFraction) {
  SimOptions options;
  options.job = TinyJob(v1::MODE_SYNC, 4, 2);
  options.job.mutable_dataset()->set_train_limit(2048);  // 2 epochs: 128 global batches of 32
  options.spec = Clockwork();
  options.periodic_eval = false;
  v1::ModeAt* at = options.spec.add_mode_schedule();
  at->set_at_fraction(0.5);
  at->set_mode(v1::MODE_GBA);
  absl::StatusOr<SimResult> result = RunSimulation(options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->switches.size(), 2u);
  for (const SimSwitch& s : result->switches) {
    EXPECT_EQ(s.mode, v1::MODE_GBA);
    EXPECT_EQ(s.reason, "mode_schedule");
    // Half of the run's virtual time, give or take a tick and the start-up.
    EXPECT_GT(s.seconds, 0.4 * result->wall_seconds);
    EXPECT_LT(s.seconds, 0.6 * result->wall_seconds);
  }
  EXPECT_GE(result->examples, 4096);

  // Refused: an auto job (the policy would fight the script), a fraction outside (0, 1) or not
  // increasing, a mode no shard runs.
  options.job = TinyJob(v1::MODE_AUTO, 4, 2);
  EXPECT_EQ(RunSimulation(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.job = TinyJob(v1::MODE_SYNC, 4, 2);
  at->set_at_fraction(1);
  EXPECT_EQ(RunSimulation(options).status().code(), absl::StatusCode::kInvalidArgument);
  at->set_at_fraction(0.5);
  options.spec.add_mode_schedule()->CopyFrom(*at);
  EXPECT_EQ(RunSimulation(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.spec.mutable_mode_schedule()->RemoveLast();
  options.spec.mutable_mode_schedule(0)->set_mode(v1::MODE_AUTO);
  EXPECT_EQ(RunSimulation(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Simulation, ShippedBenchScenariosParse) {
  for (const char* name : {"bench_a", "bench_b", "bench_c", "bench_d", "scale", "scale_ctr"}) {
    absl::StatusOr<v1::SimSpec> spec =
        LoadSimSpecFile(std::string(SYNCOPATE_SOURCE_DIR) + "/examples/sim/" + name + ".textproto");
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_GT(spec->step_time().seconds_per_example(), 0) << name;
  }
}

}  // namespace
}  // namespace syncopate::sim
