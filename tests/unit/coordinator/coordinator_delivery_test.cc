// The core's messages reach each peer in the order the core decided them, whatever thread
// carries them out: joins, leaves and local-batch changes decided within a millisecond on several
// threads arrive in decision order (membership generations only grow; a worker's last local
// batch is the one the core holds).
#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "libs/common/clock.h"
#include "libs/coordinator/coordinator_core.h"
#include "libs/job/job_spec.h"
#include "libs/job/model_kind.h"

namespace syncopate::coordinator {
namespace {

// Sleeps a random few microseconds before recording, so that a thread that decided later but
// reaches Send first overtakes, as gRPC's threads do.
void Jitter() {
  thread_local std::mt19937 random(std::random_device{}());
  std::this_thread::sleep_for(std::chrono::microseconds(random() % 300));
}

class RecordingShardLink : public ShardLink {
 public:
  void Send(v1::CoordinatorToShard message) override {
    Jitter();
    absl::MutexLock lock(&mu_);
    if (message.has_membership()) generations_.push_back(message.membership().generation());
  }
  void Close(absl::Status) override {}
  std::vector<int64_t> generations() {
    absl::MutexLock lock(&mu_);
    return generations_;
  }

 private:
  absl::Mutex mu_;
  std::vector<int64_t> generations_ ABSL_GUARDED_BY(mu_);
};

class RecordingWorkerLink : public WorkerLink {
 public:
  void Send(v1::CoordinatorToWorker message) override {
    Jitter();
    absl::MutexLock lock(&mu_);
    if (message.has_welcome()) last_local_batch_ = message.welcome().local_batch();
    if (message.has_set_local_batch()) {
      last_local_batch_ = message.set_local_batch().local_batch();
    }
  }
  void Close(absl::Status) override {}
  int32_t last_local_batch() {
    absl::MutexLock lock(&mu_);
    return last_local_batch_;
  }

 private:
  absl::Mutex mu_;
  int32_t last_local_batch_ ABSL_GUARDED_BY(mu_) = -1;
};

TEST(CoordinatorDelivery, ConcurrentDecisionsArriveInDecisionOrder) {
  v1::JobSpec job = *job::ParseJobSpec(job::DefaultJobText());
  job.set_num_workers(2);
  job.set_num_shards(2);
  job.set_global_batch(1000);
  job.mutable_stop()->set_epochs(0);
  job.mutable_stop()->set_max_examples(int64_t{1} << 40);
  FakeClock clock;
  CoordinatorOptions options;
  options.job = job;
  options.model = {.layout = job::BuiltinLayoutForJob(job).value(), .train_examples = 60000};
  options.clock = &clock;
  std::unique_ptr<CoordinatorCore> core = *CoordinatorCore::Create(options);
  std::vector<std::shared_ptr<RecordingShardLink>> shards;
  for (int s = 0; s < 2; ++s) {
    shards.push_back(std::make_shared<RecordingShardLink>());
    v1::ShardHello hello;
    hello.set_shard_id(s);
    hello.set_address(absl::StrCat("shard-", s));
    ASSERT_TRUE(core->ShardHello(shards.back(), hello).ok());
  }
  // Two workers stay for the whole test; eight threads each join and leave again and again.
  std::vector<std::shared_ptr<RecordingWorkerLink>> stayers;
  std::vector<int32_t> stayer_ids;
  for (int w = 0; w < 2; ++w) {
    stayers.push_back(std::make_shared<RecordingWorkerLink>());
    v1::WorkerHello hello;
    hello.set_name(absl::StrCat("stayer-", w));
    hello.set_role(v1::ROLE_WORKER);
    stayer_ids.push_back(*core->WorkerHello(stayers.back(), hello));
  }
  v1::WorkerMessage lease_request;
  lease_request.mutable_lease_request();
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        auto link = std::make_shared<RecordingWorkerLink>();
        v1::WorkerHello hello;
        hello.set_name(absl::StrCat("visitor-", t));
        hello.set_role(v1::ROLE_WORKER);
        absl::StatusOr<int32_t> id = core->WorkerHello(link, hello);
        if (!id.ok()) continue;
        core->WorkerMessage(*id, lease_request);  // a member now: everyone's share changes
        core->WorkerGone(*id, "session_closed", link.get());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  for (int s = 0; s < 2; ++s) {
    const std::vector<int64_t> generations = shards[s]->generations();
    ASSERT_FALSE(generations.empty());
    for (size_t i = 1; i < generations.size(); ++i) {
      ASSERT_LT(generations[i - 1], generations[i])
          << "shard " << s << " was told membership generation " << generations[i] << " after "
          << generations[i - 1];
    }
  }
  const v1::ClusterStatus status = core->Status();
  for (int w = 0; w < 2; ++w) {
    int32_t held = -1;
    for (const v1::WorkerStatus& worker : status.workers()) {
      if (worker.worker_id() == stayer_ids[w]) held = worker.local_batch();
    }
    EXPECT_EQ(stayers[w]->last_local_batch(), held)
        << "stayer " << w << " was last told a local batch the core no longer holds";
  }
}

}  // namespace
}  // namespace syncopate::coordinator
