// ShardCore promises thread safety: many workers push and pull at once while the coordinator
// changes membership and mode. Run under ThreadSanitizer by `./dev tsan`; here it also checks
// that concurrent traffic keeps the shard's accounting exact.
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "libs/common/clock.h"
#include "libs/shard/shard_core.h"
#include "libs/tensor/packed.h"

namespace syncopate::shard {
namespace {

constexpr int kWorkers = 4;
constexpr int kPushesPerWorker = 300;

v1::ShardAssignment Assignment() {
  v1::ShardAssignment a;
  v1::JobSpec& job = *a.mutable_job();
  job.mutable_optimizer()->set_kind(v1::OptimizerSpec::MOMENTUM);
  job.mutable_optimizer()->set_learning_rate(0.01f);
  job.mutable_optimizer()->set_momentum(0.9f);
  job.set_global_batch(8);
  job.set_num_workers(kWorkers);
  job.set_num_shards(1);
  job.set_mode(v1::MODE_GBA);
  v1::ShardPartition& p = *a.mutable_partition();
  p.set_flat_begin(0);
  p.set_flat_end(64);
  v1::TensorSlice* slice = p.add_slices();
  slice->set_tensor("w");
  slice->set_length(64);
  slice->mutable_init()->set_kind(v1::Initializer::ZEROS);
  v1::Membership& m = *a.mutable_membership();
  m.set_generation(1);
  for (int w = 1; w <= kWorkers; ++w) m.add_worker_ids(w);
  m.set_local_batch(2);
  a.set_mode(v1::MODE_GBA);
  return a;
}

// Scenario: 4 workers push and pull concurrently while a coordinator thread flips the mode
// between gba, async and sync and re-sends membership; every push gets exactly one outcome.
TEST(ShardCoreConcurrency, PushesPullsAndModeSwitchesFromManyThreads) {
  absl::StatusOr<std::unique_ptr<ShardCore>> core =
      ShardCore::Create(Assignment(), Clock::Real(), nullptr);
  ASSERT_TRUE(core.ok()) << core.status();
  ShardCore& shard = **core;
  std::atomic<int64_t> acks{0};
  std::atomic<int64_t> pulls_answered{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int w = 1; w <= kWorkers; ++w) {
    threads.emplace_back([&, w] {
      const std::string gradient = tensor::PackFloats(std::vector<float>(64, 0.001f * w));
      for (int i = 0; i < kPushesPerWorker; ++i) {
        v1::PushRequest push;
        push.set_request_id(i);
        push.set_token(shard.Stats().version);
        push.set_samples(2);
        push.set_gradient(gradient);
        const v1::PushAck ack = shard.Push(w, push);
        EXPECT_NE(ack.outcome(), v1::PUSH_OUTCOME_UNSPECIFIED);
        ++acks;
        v1::PullRequest pull;
        pull.set_request_id(i);
        EXPECT_TRUE(shard.Pull({&threads}, pull, [&](const PullReply&) { ++pulls_answered; }).ok());
      }
    });
  }
  std::thread coordinator([&] {
    const v1::Mode modes[] = {v1::MODE_GBA, v1::MODE_ASYNC, v1::MODE_GBA, v1::MODE_SYNC};
    for (int i = 0; !done.load(); ++i) {
      shard.SetMode(modes[i % 4]);
      v1::Membership m = Assignment().membership();
      m.set_generation(2 + i);
      shard.SetMembership(m);
      (void)shard.Parameters();
      std::this_thread::yield();
    }
    shard.SetMode(v1::MODE_ASYNC);  // releases any barrier still waiting
  });
  for (std::thread& t : threads) t.join();
  done = true;
  coordinator.join();
  shard.CancelPulls(&threads);
  const ShardStats stats = shard.Stats();
  EXPECT_EQ(acks.load(), kWorkers * kPushesPerWorker);
  EXPECT_EQ(stats.gradients.applied() + stats.gradients.decayed() + stats.gradients.dropped() +
                stats.gradients.rejected(),
            kWorkers * kPushesPerWorker);
  EXPECT_GT(stats.version, 0);
  EXPECT_GT(pulls_answered.load(), 0);
}

}  // namespace
}  // namespace syncopate::shard
