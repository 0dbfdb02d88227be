// Checkpoints by global coordinates: a model trained on S shards restores onto S' shards.
#include <vector>

#include "gtest/gtest.h"
#include "libs/job/job_spec.h"
#include "libs/job/model_kind.h"
#include "libs/shard/shard_core.h"
#include "libs/tensor/packed.h"

namespace syncopate::shard {
namespace {

v1::JobSpec Job() {
  v1::JobSpec job = *job::ParseJobSpec(job::DefaultJobText());
  job.mutable_model()->clear_hidden();
  job.mutable_model()->add_hidden(8);
  job.set_global_batch(1);
  job.set_num_workers(1);
  return job;
}

std::vector<std::unique_ptr<ShardCore>> Shards(const v1::JobSpec& spec, int num_shards,
                                               FakeClock& clock) {
  v1::JobSpec job = spec;
  job.set_num_shards(num_shards);
  auto model = job::ModelForJob(job);
  auto partitions = job::PartitionDense(model->tensors(), num_shards);
  std::vector<std::unique_ptr<ShardCore>> shards;
  for (const v1::ShardPartition& p : *partitions) {
    v1::ShardAssignment a;
    *a.mutable_job() = job;
    *a.mutable_partition() = p;
    a.mutable_membership()->add_worker_ids(1);
    a.mutable_membership()->set_local_batch(1);
    a.set_mode(v1::MODE_ASYNC);
    shards.push_back(*ShardCore::Create(a, &clock, nullptr));
  }
  return shards;
}

// Trains every shard a few async steps with a deterministic gradient.
void Train(std::vector<std::unique_ptr<ShardCore>>& shards, int steps) {
  for (int step = 0; step < steps; ++step) {
    for (auto& shard : shards) {
      std::vector<float> grad(shard->size());
      for (size_t i = 0; i < grad.size(); ++i) grad[i] = 0.01f * ((i + step) % 7) - 0.03f;
      v1::PushRequest push;
      push.set_token(shard->Stats().version);
      push.set_samples(1);
      push.set_gradient(tensor::PackFloats(grad));
      ASSERT_EQ(shard->Push(1, push).outcome(), v1::PUSH_APPLIED);
    }
  }
}

std::vector<float> Flat(const std::vector<std::unique_ptr<ShardCore>>& shards) {
  std::vector<float> flat;
  for (const auto& s : shards) {
    std::vector<float> p = s->Parameters();
    flat.insert(flat.end(), p.begin(), p.end());
  }
  return flat;
}

TEST(ShardRestore, ThreeShardsRestoreOntoTwoAndFiveExactly) {
  FakeClock clock;
  auto three = Shards(Job(), 3, clock);
  Train(three, 5);
  std::vector<v1::ShardCheckpoint> checkpoints;
  checkpoints.reserve(three.size());
  for (const auto& s : three) checkpoints.push_back(s->Snapshot());
  const std::vector<float> trained = Flat(three);

  for (int target : {2, 5, 3}) {
    auto restored = Shards(Job(), target, clock);
    for (auto& s : restored) {
      absl::Status status = s->Restore(checkpoints);
      ASSERT_TRUE(status.ok()) << status;
      EXPECT_EQ(s->Stats().version, 5);
    }
    EXPECT_EQ(Flat(restored), trained) << "onto " << target << " shards";
    // The optimizer state came along: one more identical step gives identical parameters.
    auto reference = Shards(Job(), target, clock);
    for (auto& s : reference) ASSERT_TRUE(s->Restore(checkpoints).ok());
    Train(restored, 1);
    Train(reference, 1);
    EXPECT_EQ(Flat(restored), Flat(reference));
  }
}

TEST(ShardRestore, MomentumStateIsRestoredNotReset) {
  FakeClock clock;
  v1::JobSpec job = Job();  // momentum 0.9
  auto original = Shards(job, 1, clock);
  Train(original, 3);
  const v1::ShardCheckpoint checkpoint = original[0]->Snapshot();
  auto restored = Shards(job, 1, clock);
  ASSERT_TRUE(restored[0]->Restore({checkpoint}).ok());
  Train(original, 1);
  Train(restored, 1);
  EXPECT_EQ(original[0]->Parameters(), restored[0]->Parameters());
}

TEST(ShardRestore, RefusesIncompleteOrForeignCheckpointsAndChangesNothing) {
  FakeClock clock;
  auto two = Shards(Job(), 2, clock);
  Train(two, 2);
  auto target = Shards(Job(), 1, clock);
  const std::vector<float> before = target[0]->Parameters();
  absl::Status partial = target[0]->Restore({two[0]->Snapshot()});
  EXPECT_EQ(partial.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(partial.message().find("cover"), std::string::npos) << partial;
  v1::ShardCheckpoint foreign = two[0]->Snapshot();
  foreign.set_job_id("other");
  EXPECT_EQ(target[0]->Restore({foreign, two[1]->Snapshot()}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(target[0]->Parameters(), before);
  EXPECT_EQ(target[0]->Stats().version, 0);
}

}  // namespace
}  // namespace syncopate::shard
