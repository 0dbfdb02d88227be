// Wide & deep in the simulator: embedding rows routed by the workers' own KeyRouting, pulled and
// pushed as SparseRows through real ShardCores, evaluated by AUC from rows the evaluator does
// not create.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "libs/common/clock.h"
#include "libs/datagen/ctr_generator.h"
#include "libs/job/job_spec.h"
#include "libs/job/model_kind.h"
#include "libs/shard/shard_core.h"
#include "libs/sim/simulation.h"
#include "libs/tensor/packed.h"
#include "libs/worker/key_routing.h"
#include "libs/workload/workload.h"
#include "tests/unit/sim/sim_test_util.h"

namespace syncopate::sim {
namespace {

constexpr int64_t kTrainRows = 512;
constexpr int64_t kTestRows = 256;

// The real data path: Criteo-format files from the generator `syncopate datagen ctr` runs,
// written once for the whole binary.
const std::string& DataDir() {
  static const std::string* dir = [] {
    auto* d = new std::string(::testing::TempDir() + "/sim_ctr_data");
    std::filesystem::create_directories(*d);
    const datagen::CtrTeacherConfig teacher;
    EXPECT_TRUE(datagen::GenerateCtr(teacher, 1, kTrainRows, *d + "/train.tsv").ok());
    EXPECT_TRUE(datagen::GenerateCtr(teacher, 2, kTestRows, *d + "/test.tsv").ok());
    return d;
  }();
  return *dir;
}

// A small wide & deep (embedding width 4, one hidden layer of 8, one wide cross) on 256 of the
// generated rows, Adagrad as in examples/ctr_wdl.textproto.
v1::JobSpec CtrJob(v1::Mode mode, int workers, int shards) {
  v1::JobSpec job;
  job.set_job_id("sim-ctr");
  job.mutable_model()->set_kind(v1::ModelSpec::WDL);
  job.mutable_model()->set_embedding_dim(4);
  job.mutable_model()->add_hidden(8);
  v1::FieldCross* cross = job.mutable_model()->add_wide_crosses();
  cross->set_first(23);
  cross->set_second(20);
  job.mutable_dataset()->set_kind(v1::DatasetSpec::CRITEO);
  job.mutable_dataset()->set_train_path(DataDir() + "/train.tsv");
  job.mutable_dataset()->set_test_path(DataDir() + "/test.tsv");
  job.mutable_dataset()->set_train_limit(256);
  job.mutable_optimizer()->set_kind(v1::OptimizerSpec::ADAGRAD);
  job.mutable_optimizer()->set_learning_rate(0.3f);
  job.set_global_batch(32);
  job.set_num_workers(workers);
  job.set_num_shards(shards);
  job.set_mode(mode);
  job.mutable_stop()->set_epochs(1);
  job.set_block_size(32);
  job.mutable_eval()->set_interval_seconds(0.05);
  job.set_seed(1);
  job::ApplyJobDefaults(job);  // what the coordinator's job spec reader does
  return job;
}

// Pulls the dense parameters and the routed rows from every shard, as ParameterClient does; the
// shards must answer at once.
void PullAll(std::vector<std::unique_ptr<shard::ShardCore>>& shards,
             const std::vector<v1::ShardPartition>& partitions, worker::KeyRouting& routing,
             const shard::Puller& puller, int64_t min_version, std::vector<float>& params,
             workload::TableRows& rows) {
  routing.ShapeRows(rows);
  for (size_t s = 0; s < shards.size(); ++s) {
    v1::PullRequest request;
    request.set_min_version(min_version);
    for (v1::SparseRows& wanted : routing.Requests(static_cast<int32_t>(s))) {
      *request.add_sparse() = std::move(wanted);
    }
    bool answered = false;
    ASSERT_TRUE(
        shards[s]
            ->Pull(
                puller, request,
                [&](const shard::PullReply& reply) {
                  const v1::PullResponse& response = reply.response;
                  const v1::ShardPartition& p = partitions[s];
                  EXPECT_TRUE(
                      tensor::UnpackFloatsInto(tensor::PackedView(*reply.values),
                                               std::span<float>(params).subspan(
                                                   p.flat_begin(), p.flat_end() - p.flat_begin()))
                          .ok());
                  EXPECT_TRUE(
                      routing.ScatterRows(static_cast<int32_t>(s), response.sparse(), rows).ok());
                  answered = true;
                })
            .ok());
    ASSERT_TRUE(answered) << "shard " << s;
  }
}

// The end-to-end check for sparse models: a simulated sync run of wide & deep on two shards
// ends with exactly the dense parameters and the evaluation (AUC, loss, accuracy) that real
// ShardCores give when fed the same batches directly. Two workers, no noise: worker 1 is one
// event ahead of worker 2, so leases alternate (1, 2, 1, 2, ...) and each shard receives worker
// 1's push first at every version (as in the MLP test).
TEST(SimulationCtr, SyncRunMatchesTheRealShardsFedDirectly) {
  const SimOptions options = ClockworkRun(CtrJob(v1::MODE_SYNC, 2, 2));
  absl::StatusOr<SimResult> result = RunSimulation(options);
  ASSERT_TRUE(result.ok()) << result.status();
  const int64_t versions = result->shard_versions[0];
  // 256 examples at G = 32 are 8 updates; a step in flight when the stop arrives may add one.
  ASSERT_GE(versions, 8);
  EXPECT_EQ(result->shard_versions[1], versions);
  EXPECT_EQ(result->gradients.rejected(), 0);
  EXPECT_EQ(result->quality_metric, "auc");

  // The same job by hand: the coordinator's schedule resolution, two real shards, the workers'
  // routing and the job's real model.
  v1::JobSpec job = options.job;
  job::ResolveRunLength(job, 256);
  absl::StatusOr<job::ModelLayout> layout = job::BuiltinLayoutForJob(job);
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_FALSE(layout->tables.empty());
  const std::vector<v1::ShardPartition> partitions = *job::PartitionModel(*layout, 2);
  FakeClock clock;
  v1::Membership membership;
  membership.set_generation(1);
  membership.add_worker_ids(1);
  membership.add_worker_ids(2);
  membership.set_local_batch(16);
  std::vector<std::unique_ptr<shard::ShardCore>> shards;
  for (const v1::ShardPartition& partition : partitions) {
    v1::ShardAssignment assignment;
    *assignment.mutable_job() = job;
    *assignment.mutable_partition() = partition;
    *assignment.mutable_membership() = membership;
    assignment.set_mode(v1::MODE_SYNC);
    absl::StatusOr<std::unique_ptr<shard::ShardCore>> core =
        shard::ShardCore::Create(assignment, &clock, nullptr);
    ASSERT_TRUE(core.ok()) << core.status();
    shards.push_back(std::move(*core));
  }
  const std::vector<std::vector<int64_t>> stream =
      AlternatingLeaseStreams(256, 32, job.seed(), versions * 16);
  auto model = *job::CreateWorkload(job, workload::Purpose::kTrain);
  std::vector<float> params(static_cast<size_t>(model->num_parameters()));
  std::vector<float> grad(params.size());
  workload::TableRows rows, row_grads;
  for (int64_t k = 0; k < versions; ++k) {
    std::vector<std::vector<v1::PushRequest>> pushes(2, std::vector<v1::PushRequest>(2));
    for (int w = 0; w < 2; ++w) {
      std::vector<int64_t> batch(stream[w].begin() + k * 16, stream[w].begin() + (k + 1) * 16);
      ASSERT_TRUE(model->PrepareTrain(batch).ok());
      worker::KeyRouting routing(2, model->table_dims());
      ASSERT_TRUE(routing.Route(&model->keys()).ok());
      PullAll(shards, partitions, routing, {&routing, w + 1, /*trains=*/true}, k, params, rows);
      ASSERT_TRUE(model->TrainStep(params, rows, grad, row_grads).ok());
      for (size_t s = 0; s < 2; ++s) {
        v1::PushRequest& push = pushes[w][s];
        push.set_token(k);
        push.set_samples(16);
        const v1::ShardPartition& p = partitions[s];
        push.set_gradient(tensor::PackFloats(
            std::span<const float>(grad).subspan(p.flat_begin(), p.flat_end() - p.flat_begin())));
        std::vector<v1::SparseRows> sparse;
        ASSERT_TRUE(routing.SplitGradients(static_cast<int32_t>(s), row_grads, sparse).ok());
        for (v1::SparseRows& r : sparse) *push.add_sparse() = std::move(r);
      }
    }
    for (int w = 0; w < 2; ++w) {
      for (size_t s = 0; s < 2; ++s) {
        const v1::PushAck ack = shards[s]->Push(w + 1, pushes[w][s]);
        ASSERT_EQ(ack.outcome(), v1::PUSH_APPLIED) << ack.message();
      }
    }
  }
  std::vector<float> dense;
  int64_t direct_rows = 0;
  for (const auto& core : shards) {
    EXPECT_EQ(core->Stats().version, versions);
    std::vector<float> part = core->Parameters();
    dense.insert(dense.end(), part.begin(), part.end());
    direct_rows += core->Stats().embedding_rows;
  }
  EXPECT_TRUE(BitIdentical(result->parameters, dense));
  EXPECT_EQ(result->gradients.applied(), int64_t{2} * 2 * versions);
  // A pull released for a step the stop then cut short creates its rows in the simulation only.
  EXPECT_GE(result->embedding_rows, direct_rows);
  EXPECT_GT(direct_rows, 0);

  // The evaluator, chunk by chunk, reading rows without creating them.
  auto eval = *job::CreateWorkload(job, workload::Purpose::kEvaluate);
  worker::KeyRouting routing(2, eval->table_dims());
  for (int64_t begin = 0; begin < eval->eval_size(); begin += eval->eval_chunk()) {
    ASSERT_TRUE(
        eval->PrepareEval(begin, std::min(eval->eval_size(), begin + eval->eval_chunk())).ok());
    ASSERT_TRUE(routing.Route(&eval->keys()).ok());
    PullAll(shards, partitions, routing, {&routing, 0, /*trains=*/false}, 0, params, rows);
    ASSERT_TRUE(eval->ScoreEval(params, rows).ok());
  }
  const model::Evaluation e = *eval->FinishEval();
  const SimEvaluation& simulated = result->final_evaluation();
  EXPECT_EQ(simulated.auc, e.auc);
  EXPECT_EQ(simulated.loss, e.mean_loss);
  EXPECT_EQ(simulated.accuracy, e.accuracy);
  EXPECT_EQ(simulated.quality, e.auc);
  int64_t rows_after = 0;
  for (const auto& core : shards) rows_after += core->Stats().embedding_rows;
  EXPECT_EQ(rows_after, direct_rows);
}

// Same seed, same result, bit for bit, with auto mode, noise, hiccups and a straggler; and the
// quality is AUC: time to target is read from it.
TEST(SimulationCtr, SameSeedSameResultBitForBit) {
  SimOptions options = ClockworkRun(CtrJob(v1::MODE_AUTO, 4, 2));
  options.job.mutable_stop()->set_epochs(2);
  options.periodic_eval = true;
  options.spec = NoisyWithAStraggler();
  options.timing_seed = 5;
  absl::StatusOr<SimResult> first = RunSimulation(options);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_GE(first->evaluations.size(), 3u);
  // The target: the second evaluation's AUC, so the first at or above it is known.
  options.target_quality = first->evaluations[1].auc;
  absl::StatusOr<SimResult> second = RunSimulation(options);
  ASSERT_TRUE(second.ok()) << second.status();

  ExpectSameRun(*first, *second);
  EXPECT_GE(first->examples, 512);
  EXPECT_GT(first->embedding_rows, 0);
  std::optional<double> expected_target;
  for (const SimEvaluation& e : first->evaluations) {
    EXPECT_EQ(e.quality, e.auc);
    if (!expected_target.has_value() && e.auc >= options.target_quality) {
      expected_target = e.seconds;
    }
  }
  EXPECT_FALSE(first->seconds_to_target.has_value());  // no target asked for
  EXPECT_EQ(second->seconds_to_target, expected_target);
}

// The evaluator reads rows it never creates, and scoring changes nothing: with or without
// periodic evaluations the run trains the same parameters and rows.
TEST(SimulationCtr, EvaluationsCreateNoRowsAndChangeNothing) {
  SimOptions options = ClockworkRun(CtrJob(v1::MODE_GBA, 3, 2));
  options.spec.mutable_step_time()->set_lognormal_sigma(0.2);
  absl::StatusOr<SimResult> quiet = RunSimulation(options);
  ASSERT_TRUE(quiet.ok()) << quiet.status();
  options.periodic_eval = true;
  absl::StatusOr<SimResult> evaluated = RunSimulation(options);
  ASSERT_TRUE(evaluated.ok()) << evaluated.status();
  EXPECT_GT(evaluated->evaluations.size(), quiet->evaluations.size());
  EXPECT_TRUE(BitIdentical(quiet->parameters, evaluated->parameters));
  EXPECT_EQ(quiet->embedding_rows, evaluated->embedding_rows);
  EXPECT_EQ(quiet->final_evaluation().auc, evaluated->final_evaluation().auc);
  EXPECT_GT(quiet->final_evaluation().auc, 0);
}

}  // namespace
}  // namespace syncopate::sim
