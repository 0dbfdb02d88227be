#include "libs/coordinator/coordinator_core.h"

#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "libs/common/clock.h"
#include "libs/job/job_spec.h"
#include "libs/job/model_kind.h"
#include "prometheus/registry.h"
#include "tests/unit/metric_value.h"

namespace syncopate::coordinator {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::syncopate::testing::MetricValue;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int64_t kTrainExamples = 100;

class FakeWorkerLink : public WorkerLink {
 public:
  void Send(v1::CoordinatorToWorker message) override { sent.push_back(std::move(message)); }
  void Close(absl::Status status) override { closed = std::move(status); }

  // Messages of one kind, in order.
  std::vector<v1::CoordinatorToWorker> Of(v1::CoordinatorToWorker::KindCase kind) const {
    std::vector<v1::CoordinatorToWorker> out;
    for (const auto& m : sent) {
      if (m.kind_case() == kind) out.push_back(m);
    }
    return out;
  }
  std::vector<v1::CoordinatorToWorker> sent;
  std::optional<absl::Status> closed;
};

class FakeShardLink : public ShardLink {
 public:
  void Send(v1::CoordinatorToShard message) override { sent.push_back(std::move(message)); }
  void Close(absl::Status status) override { closed = std::move(status); }

  std::vector<v1::CoordinatorToShard> Of(v1::CoordinatorToShard::KindCase kind) const {
    std::vector<v1::CoordinatorToShard> out;
    for (const auto& m : sent) {
      if (m.kind_case() == kind) out.push_back(m);
    }
    return out;
  }
  // The membership the shard was last told about (assignment or membership message).
  v1::Membership LastMembership() const {
    v1::Membership last;
    for (const auto& m : sent) {
      if (m.has_assignment()) last = m.assignment().membership();
      if (m.has_membership()) last = m.membership();
    }
    return last;
  }
  std::vector<v1::CoordinatorToShard> sent;
  std::optional<absl::Status> closed;
};

// The default job shrunk: 2 workers, 2 shards, G = 8, stop after 40 examples.
v1::JobSpec SmallJob(v1::Mode mode = v1::MODE_SYNC) {
  absl::StatusOr<v1::JobSpec> spec = job::ParseJobSpec(job::DefaultJobText());
  EXPECT_TRUE(spec.ok()) << spec.status();
  spec->set_num_workers(2);
  spec->set_num_shards(2);
  spec->set_global_batch(8);
  spec->set_block_size(25);
  spec->set_mode(mode);
  spec->mutable_stop()->set_epochs(0);
  spec->mutable_stop()->set_max_examples(40);
  EXPECT_TRUE(job::ValidateJobSpec(*spec).ok());
  return *spec;
}

// The job as shards and workers get it: the schedule's run-dependent fields resolved.
// The job as the coordinator hands it out: the schedule resolved, the layout recorded.
v1::JobSpec Resolved(v1::JobSpec job) {
  job::ResolveRunLength(job, kTrainExamples);
  *job.mutable_model()->mutable_layout() = job::LayoutRecord(*job::BuiltinLayoutForJob(job));
  return job;
}

v1::WorkerHello Hello(const std::string& name, v1::Role role = v1::ROLE_WORKER) {
  v1::WorkerHello hello;
  hello.set_name(name);
  hello.set_role(role);
  return hello;
}

v1::WorkerMessage Step(int64_t examples, double compute_seconds = 0.1, float loss = 1.5f) {
  v1::WorkerMessage m;
  m.mutable_step()->set_step(1);
  m.mutable_step()->set_examples(examples);
  m.mutable_step()->set_loss(loss);
  m.mutable_step()->set_compute_seconds(compute_seconds);
  return m;
}

v1::WorkerMessage LeaseRequest() {
  v1::WorkerMessage m;
  m.mutable_lease_request();
  return m;
}

v1::WorkerMessage Heartbeat() {
  v1::WorkerMessage m;
  m.mutable_heartbeat();
  return m;
}

class CoordinatorCoreTest : public ::testing::Test {
 protected:
  void Create(v1::JobSpec job = SmallJob()) {
    CoordinatorOptions options;
    options.model = {.layout = job::BuiltinLayoutForJob(job).value(),
                     .train_examples = kTrainExamples};
    options.job = std::move(job);
    options.clock = &clock_;
    if (metrics_ != nullptr) options.metrics = metrics_;
    options.journal = journal_;
    options.hold_start = hold_start_;
    absl::StatusOr<std::unique_ptr<CoordinatorCore>> core = CoordinatorCore::Create(options);
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = std::move(*core);
  }

  std::shared_ptr<FakeShardLink> ConnectShard(int id) {
    auto link = std::make_shared<FakeShardLink>();
    v1::ShardHello hello;
    hello.set_shard_id(id);
    hello.set_address(absl::StrCat("shard-", id, ":7000"));
    absl::Status status = core_->ShardHello(link, hello);
    EXPECT_TRUE(status.ok()) << status;
    shards_.push_back(link);
    return link;
  }

  std::shared_ptr<FakeWorkerLink> Join(const std::string& name, int32_t* id_out = nullptr,
                                       v1::Role role = v1::ROLE_WORKER) {
    auto link = std::make_shared<FakeWorkerLink>();
    absl::StatusOr<int32_t> id = core_->WorkerHello(link, Hello(name, role));
    EXPECT_TRUE(id.ok()) << id.status();
    if (id_out != nullptr && id.ok()) *id_out = *id;
    return link;
  }

  // Two shards and two workers (ids 1 and 2): the job is running.
  void StartJob() {
    ConnectShard(0);
    ConnectShard(1);
    w1_ = Join("w1", &id1_);
    w2_ = Join("w2", &id2_);
    ASSERT_EQ(core_->state(), v1::JOB_RUNNING);
  }

  v1::ShardReport StartAndMakeShard0WaitForW2();

  FakeClock clock_;
  bool hold_start_ = false;
  CoordinatorMetrics* metrics_ = nullptr;
  std::shared_ptr<ProgressJournal> journal_;
  std::unique_ptr<CoordinatorCore> core_;
  std::vector<std::shared_ptr<FakeShardLink>> shards_;
  std::shared_ptr<FakeWorkerLink> w1_, w2_;
  int32_t id1_ = 0, id2_ = 0;
};

TEST_F(CoordinatorCoreTest, CreateRejectsAnEmptyTrainingSet) {
  CoordinatorOptions options;
  options.job = SmallJob();
  options.model = {.layout = job::BuiltinLayoutForJob(options.job).value(), .train_examples = 0};
  options.clock = &clock_;
  EXPECT_EQ(CoordinatorCore::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CoordinatorCoreTest, ShardsGetTheirPartitionAndTheJobMode) {
  Create();
  auto s1 = ConnectShard(1);
  auto s0 = ConnectShard(0);
  absl::StatusOr<model::Mlp> mlp = job::ModelForJob(SmallJob());
  ASSERT_TRUE(mlp.ok());
  absl::StatusOr<std::vector<v1::ShardPartition>> parts = job::PartitionDense(mlp->tensors(), 2);
  ASSERT_TRUE(parts.ok());
  for (int id : {0, 1}) {
    const FakeShardLink& link = id == 0 ? *s0 : *s1;
    auto assignments = link.Of(v1::CoordinatorToShard::kAssignment);
    ASSERT_EQ(assignments.size(), 1u) << id;
    const v1::ShardAssignment& a = assignments[0].assignment();
    EXPECT_TRUE(MessageDifferencer::Equals(a.partition(), (*parts)[id])) << id;
    EXPECT_EQ(a.partition().shard_id(), id);
    EXPECT_EQ(a.mode(), v1::MODE_SYNC);
    EXPECT_TRUE(MessageDifferencer::Equals(a.job(), Resolved(SmallJob())));
    EXPECT_EQ(a.job().optimizer().schedule().total_updates(), 5);  // 40 examples / G = 8
    EXPECT_THAT(a.membership().worker_ids(), IsEmpty()) << "no workers yet";
  }
  EXPECT_EQ(core_->state(), v1::JOB_WAITING);
}

TEST_F(CoordinatorCoreTest, AutoModeStartsShardsInSync) {
  Create(SmallJob(v1::MODE_AUTO));
  auto s0 = ConnectShard(0);
  EXPECT_EQ(s0->Of(v1::CoordinatorToShard::kAssignment)[0].assignment().mode(), v1::MODE_SYNC);
  EXPECT_EQ(core_->Status().job_mode(), v1::MODE_AUTO);
}

TEST_F(CoordinatorCoreTest, GbaModeIsPassedThrough) {
  Create(SmallJob(v1::MODE_GBA));
  auto s0 = ConnectShard(0);
  EXPECT_EQ(s0->Of(v1::CoordinatorToShard::kAssignment)[0].assignment().mode(), v1::MODE_GBA);
}

TEST_F(CoordinatorCoreTest, NothingIsWelcomedUntilAllShardsAndWorkersJoined) {
  Create();
  int32_t id1 = 0, id2 = 0;
  auto w1 = Join("w1", &id1);
  auto s0 = ConnectShard(0);
  auto w2 = Join("w2", &id2);
  EXPECT_TRUE(w1->sent.empty());
  EXPECT_TRUE(w2->sent.empty());
  EXPECT_EQ(core_->state(), v1::JOB_WAITING);
  core_->Tick();
  EXPECT_TRUE(w1->sent.empty());

  auto s1 = ConnectShard(1);
  EXPECT_EQ(core_->state(), v1::JOB_RUNNING);
  EXPECT_EQ(id1, 1);
  EXPECT_EQ(id2, 2);
  for (const auto& shard : {s0, s1}) {
    v1::Membership m = shard->LastMembership();
    EXPECT_EQ(m.generation(), 1);
    EXPECT_THAT(m.worker_ids(), ElementsAre(1, 2));
    EXPECT_EQ(m.local_batch(), 4);
  }
  ASSERT_EQ(w1->sent.size(), 1u);
  ASSERT_EQ(w2->sent.size(), 1u);
  EXPECT_EQ(w1->sent[0].welcome().worker_id(), 1);
  EXPECT_EQ(w2->sent[0].welcome().worker_id(), 2);
}

// Logical workers (ADR 0023): a process standing for k of the job's workers counts k toward
// num_workers, is one member of the barrier, and gets k workers' shares of G; a member leaving
// gives its shares back to the rest.
TEST_F(CoordinatorCoreTest, AProcessOfLogicalWorkersCountsAndBatchesForEachOfThem) {
  v1::JobSpec job = SmallJob();
  job.set_num_workers(3);  // G = 8 over 3 logical workers: 3 + 3 + 2
  Create(job);
  ConnectShard(0);
  ConnectShard(1);
  v1::WorkerHello two = Hello("two");
  two.set_logical_workers(2);
  auto first = std::make_shared<FakeWorkerLink>();
  absl::StatusOr<int32_t> id = core_->WorkerHello(first, two);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(core_->state(), v1::JOB_WAITING) << "2 of 3";
  int32_t one_id = 0;
  auto one = Join("one", &one_id);
  ASSERT_EQ(core_->state(), v1::JOB_RUNNING);
  EXPECT_EQ(first->Of(v1::CoordinatorToWorker::kWelcome)[0].welcome().local_batch(), 6);
  EXPECT_EQ(one->Of(v1::CoordinatorToWorker::kWelcome)[0].welcome().local_batch(), 2);
  EXPECT_THAT(shards_[0]->LastMembership().worker_ids(), ElementsAre(*id, one_id));
  const v1::ClusterStatus status = core_->Status();
  EXPECT_EQ(status.workers(0).logical_workers(), 2);
  EXPECT_EQ(status.workers(1).logical_workers(), 1);

  core_->WorkerGone(one_id, "test");
  const auto resized = first->Of(v1::CoordinatorToWorker::kSetLocalBatch);
  ASSERT_FALSE(resized.empty());
  EXPECT_EQ(resized.back().set_local_batch().local_batch(), 8);

  v1::WorkerHello too_many = Hello("too-many");
  too_many.set_logical_workers(4);
  EXPECT_EQ(core_->WorkerHello(std::make_shared<FakeWorkerLink>(), too_many).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(CoordinatorCoreTest, WelcomeCarriesTheShardMapAndLocalBatchesSumToG) {
  v1::JobSpec job = SmallJob();
  job.set_num_workers(3);  // G = 8 over 3 workers: 3 + 3 + 2
  Create(job);
  ConnectShard(0);
  ConnectShard(1);
  std::vector<std::shared_ptr<FakeWorkerLink>> workers = {Join("a"), Join("b"), Join("c")};
  int total = 0;
  std::vector<int> shares;
  for (const auto& w : workers) {
    ASSERT_EQ(w->sent.size(), 1u);
    const v1::Welcome& welcome = w->sent[0].welcome();
    EXPECT_TRUE(MessageDifferencer::Equals(welcome.job(), Resolved(job)));
    const v1::ShardMap& map = welcome.shard_map();
    ASSERT_EQ(map.shards_size(), 2);
    EXPECT_EQ(map.shards(0).shard_id(), 0);
    EXPECT_EQ(map.shards(0).address(), "shard-0:7000");
    EXPECT_EQ(map.shards(1).shard_id(), 1);
    EXPECT_EQ(map.shards(1).address(), "shard-1:7000");
    EXPECT_EQ(map.shards(0).flat_begin(), 0);
    EXPECT_EQ(map.shards(0).flat_end(), map.shards(1).flat_begin());
    EXPECT_EQ(map.shards(1).flat_end(), 235146);
    shares.push_back(welcome.local_batch());
    total += welcome.local_batch();
  }
  EXPECT_THAT(shares, ElementsAre(3, 3, 2));
  EXPECT_EQ(total, 8);
}

TEST_F(CoordinatorCoreTest, LeaseRequestsGetLeasesOnlyWhileRunning) {
  Create();
  ConnectShard(0);
  ConnectShard(1);
  int32_t id1 = 0;
  auto w1 = Join("w1", &id1);
  core_->WorkerMessage(id1, LeaseRequest());
  EXPECT_TRUE(w1->Of(v1::CoordinatorToWorker::kLease).empty()) << "job not running yet";
  auto w2 = Join("w2");
  ASSERT_EQ(core_->state(), v1::JOB_RUNNING);

  core_->WorkerMessage(id1, LeaseRequest());
  core_->WorkerMessage(id1, LeaseRequest());
  auto leases = w1->Of(v1::CoordinatorToWorker::kLease);
  ASSERT_EQ(leases.size(), 2u);
  for (const auto& m : leases) {
    EXPECT_GT(m.lease().lease_id(), 0);
    EXPECT_EQ(m.lease().end() - m.lease().begin(), 25);
    EXPECT_GE(m.lease().begin(), 0);
    EXPECT_LE(m.lease().end(), kTrainExamples);
  }
  EXPECT_NE(leases[0].lease().lease_id(), leases[1].lease().lease_id());
  EXPECT_NE(leases[0].lease().begin(), leases[1].lease().begin());
}

TEST_F(CoordinatorCoreTest, EvaluatorsGetNoLeases) {
  Create();
  StartJob();
  int32_t eval = 0;
  auto e = Join("eval", &eval, v1::ROLE_EVALUATOR);
  ASSERT_EQ(e->Of(v1::CoordinatorToWorker::kWelcome).size(), 1u);
  core_->WorkerMessage(eval, LeaseRequest());
  EXPECT_TRUE(e->Of(v1::CoordinatorToWorker::kLease).empty());
  // An evaluator is not a member: the shards' membership is unchanged.
  EXPECT_THAT(shards_[0]->LastMembership().worker_ids(), ElementsAre(1, 2));
}

TEST_F(CoordinatorCoreTest, FullLifecycleEndsWithTheFinalEvaluation) {
  Create();
  StartJob();
  int32_t eval = 0;
  auto e = Join("eval", &eval, v1::ROLE_EVALUATOR);

  // 4 steps of 4 examples each per worker: 32 < 40.
  for (int i = 0; i < 4; ++i) {
    core_->WorkerMessage(id1_, Step(4));
    core_->WorkerMessage(id2_, Step(4));
  }
  EXPECT_EQ(core_->state(), v1::JOB_RUNNING);
  EXPECT_EQ(core_->phase(), JobPhase::kRunning);
  EXPECT_EQ(core_->Status().examples(), 32);
  EXPECT_TRUE(w1_->Of(v1::CoordinatorToWorker::kStop).empty());

  clock_.Advance(absl::Seconds(3));
  core_->WorkerMessage(id1_, Step(4));
  core_->WorkerMessage(id2_, Step(4));  // 40: the target
  EXPECT_EQ(core_->state(), v1::JOB_FINISHING);
  EXPECT_EQ(core_->phase(), JobPhase::kFinishing);
  // Training took 3 s; what follows (the final evaluation, the drain) is elapsed, not training.
  clock_.Advance(absl::Seconds(2));
  EXPECT_DOUBLE_EQ(core_->Status().training_seconds(), 3);
  EXPECT_DOUBLE_EQ(core_->Status().elapsed_seconds(), 5);
  ASSERT_EQ(w1_->Of(v1::CoordinatorToWorker::kStop).size(), 1u);
  ASSERT_EQ(w2_->Of(v1::CoordinatorToWorker::kStop).size(), 1u);
  EXPECT_TRUE(e->Of(v1::CoordinatorToWorker::kStop).empty()) << "the evaluator stays";
  EXPECT_TRUE(shards_[0]->Of(v1::CoordinatorToShard::kStop).empty());

  // Steps after the target do not count; nobody new may join.
  core_->WorkerMessage(id1_, Step(4));
  EXPECT_EQ(core_->Status().examples(), 40);
  auto late = std::make_shared<FakeWorkerLink>();
  EXPECT_EQ(core_->WorkerHello(late, Hello("late")).status().code(), absl::StatusCode::kOutOfRange);

  core_->WorkerGone(id1_, "stopped");
  core_->Tick();
  EXPECT_TRUE(e->Of(v1::CoordinatorToWorker::kEvaluate).empty()) << "w2 still running";
  core_->WorkerGone(id2_, "stopped");
  core_->Tick();
  auto evaluate = e->Of(v1::CoordinatorToWorker::kEvaluate);
  ASSERT_EQ(evaluate.size(), 1u);
  EXPECT_TRUE(evaluate[0].evaluate().final());
  EXPECT_EQ(evaluate[0].evaluate().at_examples(), 40);
  core_->Tick();
  EXPECT_EQ(e->Of(v1::CoordinatorToWorker::kEvaluate).size(), 1u) << "asked once";
  EXPECT_EQ(core_->state(), v1::JOB_FINISHING);

  v1::WorkerMessage report;
  report.mutable_eval()->set_accuracy(0.75);
  report.mutable_eval()->set_loss(0.5);
  report.mutable_eval()->set_final(true);
  report.mutable_eval()->set_requested_at_examples(40);
  core_->WorkerMessage(eval, report);
  for (const auto& shard : shards_) {
    ASSERT_EQ(shard->Of(v1::CoordinatorToShard::kStop).size(), 1u);
  }
  // DONE waits for every shard's final report, so the final status is exact.
  EXPECT_EQ(core_->state(), v1::JOB_FINISHING);
  EXPECT_EQ(core_->phase(), JobPhase::kDraining);
  v1::ShardReport final_report;
  final_report.set_version(5);
  final_report.set_final(true);
  core_->ShardReport(0, final_report);
  EXPECT_EQ(core_->state(), v1::JOB_FINISHING);
  core_->ShardReport(1, final_report);
  EXPECT_EQ(core_->state(), v1::JOB_DONE);
  EXPECT_EQ(core_->phase(), JobPhase::kDone);
  EXPECT_EQ(e->Of(v1::CoordinatorToWorker::kStop).size(), 1u);
  v1::ClusterStatus status = core_->Status();
  EXPECT_EQ(status.state(), v1::JOB_DONE);
  EXPECT_EQ(status.last_eval().accuracy(), 0.75);
  EXPECT_TRUE(status.last_eval().final());
  EXPECT_EQ(status.last_eval().examples_at_eval(), 40);
  EXPECT_EQ(status.eval_history_size(), 1);
}

TEST_F(CoordinatorCoreTest, WithoutAnEvaluatorTheJobIsDoneWhenWorkersLeave) {
  Create();
  StartJob();
  core_->WorkerMessage(id1_, Step(40));
  ASSERT_EQ(core_->state(), v1::JOB_FINISHING);
  core_->WorkerGone(id1_, "stopped");
  core_->WorkerGone(id2_, "stopped");
  core_->Tick();
  EXPECT_EQ(shards_[1]->Of(v1::CoordinatorToShard::kStop).size(), 1u);
  // A shard that never sends its final report holds DONE back only for a bounded time.
  EXPECT_EQ(core_->state(), v1::JOB_FINISHING);
  clock_.Advance(absl::Seconds(6));
  core_->Tick();
  EXPECT_EQ(core_->state(), v1::JOB_DONE);
}

TEST_F(CoordinatorCoreTest, AWorkerLeavingMidRunReshapesMembershipAndLocalBatches) {
  v1::JobSpec job = SmallJob();
  job.set_num_workers(3);
  Create(job);
  ConnectShard(0);
  ConnectShard(1);
  int32_t a = 0, b = 0, c = 0;
  auto la = Join("a", &a);
  auto lb = Join("b", &b);
  auto lc = Join("c", &c);
  ASSERT_EQ(core_->state(), v1::JOB_RUNNING);
  core_->WorkerMessage(b, LeaseRequest());

  core_->WorkerGone(b, "stream closed");
  for (const auto& shard : shards_) {
    v1::Membership m = shard->LastMembership();
    EXPECT_EQ(m.generation(), 2);
    EXPECT_THAT(m.worker_ids(), ElementsAre(a, c));
    EXPECT_EQ(m.local_batch(), 4);
  }
  // a had 3, c had 2: both now get G / 2 = 4.
  auto sa = la->Of(v1::CoordinatorToWorker::kSetLocalBatch);
  auto sc = lc->Of(v1::CoordinatorToWorker::kSetLocalBatch);
  ASSERT_EQ(sa.size(), 1u);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sa[0].set_local_batch().local_batch() + sc[0].set_local_batch().local_batch(), 8);
  EXPECT_EQ(sa[0].set_local_batch().local_batch(), 4);
  EXPECT_TRUE(lb->Of(v1::CoordinatorToWorker::kSetLocalBatch).empty());

  // b's lease is re-issued to the next worker that asks.
  const v1::DataLease b_lease = lb->Of(v1::CoordinatorToWorker::kLease)[0].lease();
  core_->WorkerMessage(a, LeaseRequest());
  const v1::DataLease reissued = la->Of(v1::CoordinatorToWorker::kLease)[0].lease();
  EXPECT_EQ(reissued.begin(), b_lease.begin());
  EXPECT_EQ(reissued.end(), b_lease.end());
  EXPECT_NE(reissued.lease_id(), b_lease.lease_id());

  v1::ClusterStatus status = core_->Status();
  ASSERT_EQ(status.workers_size(), 3);
  EXPECT_FALSE(status.workers(1).alive());
  EXPECT_EQ(status.workers(1).departed_reason(), "stream closed");
  EXPECT_EQ(status.workers(0).local_batch(), 4);
}

// A joiner is welcomed at its hello with the share it will have, but becomes a member only at
// its first lease request (it loads its data in between): until then no barrier waits for it.
TEST_F(CoordinatorCoreTest, AWorkerJoiningMidRunIsWelcomedAndAdmittedAtItsFirstLeaseRequest) {
  Create();
  StartJob();
  int32_t id3 = 0;
  auto w3 = Join("w3", &id3);
  ASSERT_EQ(w3->sent.size(), 1u);
  EXPECT_EQ(w3->sent[0].welcome().local_batch(), 2);  // 3 + 3 + 2
  EXPECT_TRUE(w1_->Of(v1::CoordinatorToWorker::kSetLocalBatch).empty());
  EXPECT_THAT(shards_[0]->LastMembership().worker_ids(), ElementsAre(1, 2));
  EXPECT_EQ(core_->Status().membership().worker_ids_size(), 2);

  core_->WorkerMessage(id3, LeaseRequest());
  EXPECT_EQ(w1_->Of(v1::CoordinatorToWorker::kSetLocalBatch)[0].set_local_batch().local_batch(), 3);
  EXPECT_EQ(w2_->Of(v1::CoordinatorToWorker::kSetLocalBatch)[0].set_local_batch().local_batch(), 3);
  EXPECT_TRUE(w3->Of(v1::CoordinatorToWorker::kSetLocalBatch).empty()) << "welcomed with it";
  EXPECT_THAT(shards_[0]->LastMembership().worker_ids(), ElementsAre(1, 2, id3));
  EXPECT_EQ(w3->Of(v1::CoordinatorToWorker::kLease).size(), 1u);
}

TEST_F(CoordinatorCoreTest, ASilentWorkerIsTimedOut) {
  Create();
  StartJob();
  clock_.Advance(absl::Seconds(5));
  core_->WorkerMessage(id1_, Heartbeat());
  clock_.Advance(absl::Seconds(5));  // w2 silent for exactly 10 s: not yet
  core_->Tick();
  EXPECT_FALSE(w2_->closed.has_value());
  EXPECT_THAT(shards_[0]->LastMembership().worker_ids(), ElementsAre(1, 2));

  clock_.Advance(absl::Seconds(1));
  core_->Tick();
  ASSERT_TRUE(w2_->closed.has_value());
  EXPECT_EQ(w2_->closed->code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(w1_->closed.has_value()) << "w1 spoke 6 s ago";
  for (const auto& shard : shards_) {
    EXPECT_THAT(shard->LastMembership().worker_ids(), ElementsAre(1));
    EXPECT_EQ(shard->LastMembership().local_batch(), 8);
  }
  auto set = w1_->Of(v1::CoordinatorToWorker::kSetLocalBatch);
  ASSERT_EQ(set.size(), 1u);
  EXPECT_EQ(set[0].set_local_batch().local_batch(), 8);
  v1::ClusterStatus status = core_->Status();
  EXPECT_FALSE(status.workers(1).alive());
  EXPECT_THAT(status.workers(1).departed_reason(), ::testing::HasSubstr("silent"));
  // Messages from the departed worker are ignored.
  core_->WorkerMessage(id2_, Step(4));
  EXPECT_EQ(core_->Status().examples(), 0);
}

// The silence bound runs from the welcome: a worker that waited 8 s for the job to start (its
// last shard registering) still has the whole 10 s to load its data and beat.
TEST_F(CoordinatorCoreTest, SilenceIsCountedFromTheWelcomeNotTheHello) {
  Create();
  ConnectShard(0);
  w1_ = Join("w1", &id1_);
  w2_ = Join("w2", &id2_);
  ASSERT_EQ(core_->state(), v1::JOB_WAITING);
  clock_.Advance(absl::Seconds(8));
  ConnectShard(1);  // t = 8 s: the job starts, both are welcomed
  ASSERT_EQ(core_->state(), v1::JOB_RUNNING);
  ASSERT_EQ(w1_->Of(v1::CoordinatorToWorker::kWelcome).size(), 1u);
  clock_.Advance(absl::Seconds(9));  // 17 s after the hello, 9 s after the welcome
  core_->Tick();
  EXPECT_FALSE(w1_->closed.has_value());
  EXPECT_FALSE(w2_->closed.has_value());
  core_->WorkerMessage(id1_, Heartbeat());
  clock_.Advance(absl::Seconds(2));  // 11 s after the welcome: w2 said nothing since
  core_->Tick();
  EXPECT_FALSE(w1_->closed.has_value());
  ASSERT_TRUE(w2_->closed.has_value());
  EXPECT_EQ(w2_->closed->code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(CoordinatorCoreTest, SilenceTimeoutGrowsWithTheObservedStepTime) {
  Create();
  StartJob();
  core_->WorkerMessage(id1_, Step(4, /*compute_seconds=*/3.0));
  core_->WorkerMessage(id2_, Step(4, /*compute_seconds=*/0.1));
  clock_.Advance(absl::Seconds(25));  // beyond 10 s, within 10 x 3 s
  core_->Tick();
  EXPECT_FALSE(w1_->closed.has_value());
  ASSERT_TRUE(w2_->closed.has_value());
  clock_.Advance(absl::Seconds(6));
  core_->Tick();
  EXPECT_TRUE(w1_->closed.has_value());
}

// The job started, both workers asked for work and stepped once, and shard 0 reported that its
// sync barrier waits for w2; returns that report.
v1::ShardReport CoordinatorCoreTest::StartAndMakeShard0WaitForW2() {
  Create();
  StartJob();
  for (int32_t id : {id1_, id2_}) {
    core_->WorkerMessage(id, LeaseRequest());
    core_->WorkerMessage(id, Step(4));
  }
  v1::ShardReport waiting_for_w2;
  waiting_for_w2.add_barrier_waiting_for(id2_);
  core_->ShardReport(0, waiting_for_w2);
  return waiting_for_w2;
}

// A worker that beats but makes no step (a hung step) while a sync barrier waits for it is
// removed after the silence bound, counted from its last step; the workers waiting at that barrier
// made no step either, but no barrier names them, so they stay.
TEST_F(CoordinatorCoreTest, AWorkerASyncBarrierWaitsForIsRemovedWhenItMakesNoStep) {
  const v1::ShardReport waiting_for_w2 = StartAndMakeShard0WaitForW2();
  for (int second = 1; second <= 10; ++second) {  // 10 s without a step: not yet
    clock_.Advance(absl::Seconds(1));
    core_->WorkerMessage(id1_, Heartbeat());
    core_->WorkerMessage(id2_, Heartbeat());
    core_->ShardReport(0, waiting_for_w2);
    core_->Tick();
  }
  EXPECT_FALSE(w2_->closed.has_value());
  clock_.Advance(absl::Seconds(1));
  core_->WorkerMessage(id1_, Heartbeat());
  core_->WorkerMessage(id2_, Heartbeat());
  core_->ShardReport(0, waiting_for_w2);
  core_->Tick();
  ASSERT_TRUE(w2_->closed.has_value());
  EXPECT_EQ(w2_->closed->code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(w2_->closed->message()), ::testing::HasSubstr("sync barrier"));
  EXPECT_FALSE(w1_->closed.has_value()) << "w1 waited at the barrier; no barrier named it";
  for (const auto& shard : shards_) {
    EXPECT_THAT(shard->LastMembership().worker_ids(), ElementsAre(id1_));
  }
  v1::ClusterStatus status = core_->Status();
  EXPECT_EQ(status.workers(1).departed_reason(), "stalled");
}

// Scenario: the node of shard 0 is lost. Its last report names w2 at its barrier, then nothing
// comes (frozen); later its session ends and a replacement registers. No worker can step
// meanwhile, so none is judged stalled: not from the stale report, not while the shard is away,
// and not the moment it is back (the bound counts from then), until the bound passes again.
TEST_F(CoordinatorCoreTest, AStallIsNotJudgedFromAStaleReportOrWhileAShardWasAway) {
  const v1::ShardReport waiting_for_w2 = StartAndMakeShard0WaitForW2();
  auto beat = [&](int seconds) {
    for (int second = 1; second <= seconds; ++second) {
      clock_.Advance(absl::Seconds(1));
      core_->WorkerMessage(id1_, Heartbeat());
      core_->WorkerMessage(id2_, Heartbeat());
      core_->ShardReport(1, v1::ShardReport());
      core_->Tick();
    }
  };
  beat(20);  // shard 0 silent: its report goes stale
  EXPECT_FALSE(w2_->closed.has_value());
  core_->ShardGone(0);
  beat(60);  // away
  EXPECT_FALSE(w2_->closed.has_value());
  ConnectShard(0);
  for (int second = 1; second <= 10; ++second) {
    core_->ShardReport(0, waiting_for_w2);
    beat(1);
  }
  EXPECT_FALSE(w2_->closed.has_value()) << "judged within 10 s of the shard's return";
  core_->ShardReport(0, waiting_for_w2);
  beat(1);
  ASSERT_TRUE(w2_->closed.has_value()) << "a real stall after the return is still judged";
  EXPECT_FALSE(w1_->closed.has_value());
}

// Before its first request for work a worker is loading its data: a barrier that names it does
// not count against it, and a worker that steps on time is never stalled, named or not.
TEST_F(CoordinatorCoreTest, AStallIsJudgedOnlyFromTheFirstRequestForWorkAndOnlyWithoutSteps) {
  Create();
  StartJob();
  v1::ShardReport waiting_for_both;
  waiting_for_both.add_barrier_waiting_for(id1_);
  waiting_for_both.add_barrier_waiting_for(id2_);
  core_->ShardReport(1, waiting_for_both);
  core_->WorkerMessage(id2_, LeaseRequest());
  for (int second = 1; second <= 30; ++second) {
    clock_.Advance(absl::Seconds(1));
    core_->WorkerMessage(id1_, Heartbeat());  // still loading: never asked for work
    core_->WorkerMessage(id2_, Step(4));      // steps every second
    core_->ShardReport(1, waiting_for_both);
    core_->Tick();
  }
  EXPECT_FALSE(w1_->closed.has_value());
  EXPECT_FALSE(w2_->closed.has_value());
  EXPECT_THAT(shards_[0]->LastMembership().worker_ids(), ElementsAre(id1_, id2_));
}

TEST_F(CoordinatorCoreTest, StartsWithFewerWorkersAfterTheStartupGrace) {
  Create();
  ConnectShard(0);
  ConnectShard(1);
  int32_t id = 0;
  auto w = Join("only", &id);
  clock_.Advance(absl::Seconds(59));
  core_->WorkerMessage(id, Heartbeat());
  core_->Tick();
  EXPECT_EQ(core_->state(), v1::JOB_WAITING);
  EXPECT_TRUE(w->sent.empty());
  clock_.Advance(absl::Seconds(1));
  core_->Tick();
  EXPECT_EQ(core_->state(), v1::JOB_RUNNING);
  ASSERT_EQ(w->sent.size(), 1u);
  EXPECT_EQ(w->sent[0].welcome().local_batch(), 8);
  EXPECT_THAT(shards_[0]->LastMembership().worker_ids(), ElementsAre(id));
  EXPECT_EQ(shards_[0]->LastMembership().local_batch(), 8);
}

// --hold_start: everyone registers, nothing is welcomed, not even after the startup grace,
// until Release; then the job starts as it would have.
TEST_F(CoordinatorCoreTest, AHeldJobStartsOnlyWhenReleased) {
  hold_start_ = true;
  Create();
  ConnectShard(0);
  ConnectShard(1);
  int32_t id1 = 0, id2 = 0;
  auto w1 = Join("w1", &id1);
  auto w2 = Join("w2", &id2);
  // Past the 60 s startup grace, both beating (as waiting workers do) so neither goes silent.
  for (int i = 0; i < 14; ++i) {
    clock_.Advance(absl::Seconds(5));
    core_->WorkerMessage(id1, Heartbeat());
    core_->WorkerMessage(id2, Heartbeat());
    core_->Tick();
  }
  EXPECT_EQ(core_->state(), v1::JOB_WAITING);
  EXPECT_TRUE(core_->Status().held());
  EXPECT_TRUE(w1->sent.empty());
  EXPECT_TRUE(core_->Release());
  EXPECT_EQ(core_->state(), v1::JOB_RUNNING);
  EXPECT_FALSE(core_->Status().held());
  ASSERT_EQ(w1->Of(v1::CoordinatorToWorker::kWelcome).size(), 1u);
  ASSERT_EQ(w2->Of(v1::CoordinatorToWorker::kWelcome).size(), 1u);
  EXPECT_FALSE(core_->Release()) << "not held any more";
}

// A coordinator restarted with --hold_start into a job already under way carries on: the hold
// is for a job's start, not for its restarts.
TEST_F(CoordinatorCoreTest, ARestartIntoARunningJobIsNotHeld) {
  const std::string state_dir = absl::StrCat(::testing::TempDir(), "/coordinator-held-", getpid());
  std::filesystem::remove_all(state_dir);
  journal_ = std::make_shared<FileProgressJournal>(state_dir);
  Create();
  StartJob();
  clock_.Advance(absl::Seconds(1));
  core_->Tick();  // writes the progress file
  core_.reset();
  shards_.clear();
  hold_start_ = true;
  Create();
  EXPECT_EQ(core_->state(), v1::JOB_RUNNING);
  EXPECT_FALSE(core_->Status().held());
  ConnectShard(0);
  ConnectShard(1);
  auto w1 = Join("w1");
  EXPECT_EQ(w1->Of(v1::CoordinatorToWorker::kWelcome).size(), 1u);
  std::filesystem::remove_all(state_dir);
}

// Released before everyone registered: the job waits for them as an unheld one does.
TEST_F(CoordinatorCoreTest, AReleaseBeforeEveryoneRegisteredStillWaitsForThem) {
  hold_start_ = true;
  Create();
  ConnectShard(0);
  EXPECT_TRUE(core_->Release());
  auto w1 = Join("w1");
  auto w2 = Join("w2");
  EXPECT_EQ(core_->state(), v1::JOB_WAITING) << "shard 1 missing";
  ConnectShard(1);
  EXPECT_EQ(core_->state(), v1::JOB_RUNNING);
}

TEST_F(CoordinatorCoreTest, NoStartWithoutWorkersOrWithAShardMissing) {
  Create();
  ConnectShard(0);
  clock_.Advance(absl::Seconds(120));
  core_->Tick();
  EXPECT_EQ(core_->state(), v1::JOB_WAITING) << "no workers at all";
  auto w = Join("w");
  EXPECT_EQ(core_->state(), v1::JOB_WAITING) << "shard 1 missing";
  ConnectShard(1);
  EXPECT_EQ(core_->state(), v1::JOB_RUNNING);
}

TEST_F(CoordinatorCoreTest, BadHellosGetPreciseErrors) {
  Create();
  auto link = std::make_shared<FakeWorkerLink>();
  EXPECT_EQ(core_->WorkerHello(link, Hello("x", v1::ROLE_UNSPECIFIED)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(core_->WorkerHello(link, Hello("x", static_cast<v1::Role>(9))).status().code(),
            absl::StatusCode::kInvalidArgument);

  auto shard = std::make_shared<FakeShardLink>();
  v1::ShardHello hello;
  hello.set_address("s:1");
  for (int bad : {-1, 2, 100}) {
    hello.set_shard_id(bad);
    EXPECT_EQ(core_->ShardHello(shard, hello).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  hello.set_shard_id(0);
  hello.clear_address();
  EXPECT_EQ(core_->ShardHello(shard, hello).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(shard->sent.empty());

  ConnectShard(0);
  auto dup = std::make_shared<FakeShardLink>();
  hello.set_address("elsewhere:1");
  EXPECT_EQ(core_->ShardHello(dup, hello).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(dup->sent.empty());
  EXPECT_EQ(core_->Status().shards(0).address(), "shard-0:7000");

  // After the shard's session ends, the same id may register again.
  core_->ShardGone(0);
  EXPECT_TRUE(core_->ShardHello(dup, hello).ok());
  EXPECT_EQ(core_->Status().shards(0).address(), "elsewhere:1");
}

TEST_F(CoordinatorCoreTest, HellosOfAnotherJobAreRefusedAndCounted) {
  prometheus::Registry registry;
  CoordinatorMetrics metrics(registry);
  metrics_ = &metrics;
  Create();
  auto rejected = [&](const char* session) {
    return MetricValue(registry, "syncopate_coordinator_rejections_total",
                       {{"session", session}, {"reason", "wrong_job"}});
  };
  EXPECT_EQ(rejected("worker"), 0.0) << "born at 0";
  EXPECT_EQ(rejected("shard"), 0.0);
  const std::string job = SmallJob().job_id();
  ASSERT_FALSE(job.empty());

  // A shard re-registering with another job's parameters is refused, as is a worker rejoining
  // from another job; nothing of theirs is admitted.
  auto stranger_shard = std::make_shared<FakeShardLink>();
  v1::ShardHello shard_hello;
  shard_hello.set_shard_id(0);
  shard_hello.set_address("s:1");
  shard_hello.set_job_id("another-job");
  absl::Status refused_shard = core_->ShardHello(stranger_shard, shard_hello);
  EXPECT_EQ(refused_shard.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused_shard.message()), ::testing::HasSubstr("wrong job id"));
  EXPECT_TRUE(stranger_shard->sent.empty());
  EXPECT_FALSE(core_->Status().shards(0).connected());

  v1::WorkerHello worker_hello = Hello("w1");
  worker_hello.set_job_id("another-job");
  auto stranger = std::make_shared<FakeWorkerLink>();
  absl::StatusOr<int32_t> refused_worker = core_->WorkerHello(stranger, worker_hello);
  EXPECT_EQ(refused_worker.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused_worker.status().message()), ::testing::HasSubstr("wrong job id"));
  EXPECT_TRUE(stranger->sent.empty());
  EXPECT_EQ(rejected("worker"), 1.0);
  EXPECT_EQ(rejected("shard"), 1.0);
  EXPECT_EQ(MetricValue(registry, "syncopate_coordinator_rejections_total",
                        {{"session", "worker"}, {"reason", "unauthenticated"}}),
            0.0);

  // The right job id, or none at all (a first join does not know it yet), is admitted.
  shard_hello.set_job_id(job);
  EXPECT_TRUE(core_->ShardHello(std::make_shared<FakeShardLink>(), shard_hello).ok());
  ConnectShard(1);
  worker_hello.set_job_id(job);
  EXPECT_TRUE(core_->WorkerHello(std::make_shared<FakeWorkerLink>(), worker_hello).ok());
  EXPECT_TRUE(core_->WorkerHello(std::make_shared<FakeWorkerLink>(), Hello("w2")).ok());
  EXPECT_EQ(core_->state(), v1::JOB_RUNNING);
  EXPECT_EQ(rejected("worker"), 1.0);
}

// A worker that rejoins under its name starts with no data; what it held goes to the next asker.
TEST_F(CoordinatorCoreTest, AWorkerRejoiningHandsBackItsLeases) {
  Create();
  StartJob();
  core_->WorkerMessage(id1_, LeaseRequest());
  const v1::DataLease held = w1_->Of(v1::CoordinatorToWorker::kLease)[0].lease();
  int32_t again = 0;
  auto w1_again = Join("w1", &again);
  EXPECT_EQ(again, id1_);
  // Until the new session asks for data, the barrier does not wait for it.
  EXPECT_THAT(shards_[0]->LastMembership().worker_ids(), ElementsAre(id2_));
  core_->WorkerMessage(id2_, LeaseRequest());
  const v1::DataLease reissued = w2_->Of(v1::CoordinatorToWorker::kLease)[0].lease();
  EXPECT_EQ(reissued.begin(), held.begin());
  EXPECT_EQ(reissued.epoch(), held.epoch());
  EXPECT_NE(reissued.lease_id(), held.lease_id());
  core_->WorkerMessage(again, LeaseRequest());
  EXPECT_THAT(shards_[0]->LastMembership().worker_ids(), ElementsAre(id1_, id2_));
  EXPECT_EQ(w1_again->Of(v1::CoordinatorToWorker::kLease).size(), 1u);
}

// Scenario: the coordinator dies after two blocks of an epoch were completed and one was left
// outstanding; restarted from its progress file (FakeClock throughout), it re-issues the
// outstanding block first, never hands out the completed ones again, and the epoch is covered
// exactly once before the next one starts.
TEST_F(CoordinatorCoreTest, ARestartedCoordinatorResumesTheLeaseTable) {
  // The real progress file, as the coordinator process keeps it.
  const std::string state_dir =
      absl::StrCat(::testing::TempDir(), "/coordinator-restart-", getpid());
  std::filesystem::remove_all(state_dir);
  journal_ = std::make_shared<FileProgressJournal>(state_dir);
  v1::JobSpec job = SmallJob();
  job.set_block_size(10);  // 10 blocks per epoch
  job.mutable_stop()->set_max_examples(1000);
  Create(job);
  StartJob();
  auto lease_of = [](const std::shared_ptr<FakeWorkerLink>& link) {
    return link->Of(v1::CoordinatorToWorker::kLease).back().lease();
  };
  std::multiset<int64_t> epoch0_begins;
  core_->WorkerMessage(id1_, LeaseRequest());
  const v1::DataLease a = lease_of(w1_);
  v1::WorkerMessage complete_a = LeaseRequest();
  complete_a.mutable_lease_request()->add_completed_lease_ids(a.lease_id());
  core_->WorkerMessage(id1_, complete_a);
  const v1::DataLease b = lease_of(w1_);
  v1::WorkerMessage complete_b = LeaseRequest();
  complete_b.mutable_lease_request()->add_completed_lease_ids(b.lease_id());
  core_->WorkerMessage(id1_, complete_b);  // and takes c, which it will not finish
  const v1::DataLease c = lease_of(w1_);
  core_->WorkerMessage(id2_, LeaseRequest());
  const v1::DataLease d = lease_of(w2_);  // outstanding too
  epoch0_begins.insert(a.begin());
  epoch0_begins.insert(b.begin());
  clock_.Advance(absl::Seconds(1));
  core_->Tick();  // writes the progress file (about once a second)
  core_.reset();  // SIGKILL: nothing else is written

  shards_.clear();
  Create(job);
  EXPECT_EQ(core_->restarts(), 1);
  EXPECT_EQ(core_->state(), v1::JOB_RUNNING);
  ConnectShard(0);
  ConnectShard(1);
  int32_t id1 = 0, id2 = 0;
  auto w1 = Join("w1", &id1);
  auto w2 = Join("w2", &id2);
  EXPECT_EQ(id1, id1_);
  EXPECT_EQ(id2, id2_);
  ASSERT_EQ(w1->Of(v1::CoordinatorToWorker::kWelcome).size(), 1u);

  // The outstanding blocks come back first (their holders lost them with the old session).
  core_->WorkerMessage(id1, LeaseRequest());
  const v1::DataLease c_again = lease_of(w1);
  core_->WorkerMessage(id2, LeaseRequest());
  const v1::DataLease d_again = lease_of(w2);
  EXPECT_EQ(c_again.begin(), c.begin());
  EXPECT_EQ(d_again.begin(), d.begin());
  EXPECT_EQ(c_again.epoch(), 0);
  EXPECT_GT(c_again.lease_id(), d.lease_id()) << "lease ids are not reused across restarts";
  // Then the rest of epoch 0: eight blocks in all after a and b, none of them a or b again.
  std::vector<v1::DataLease> after = {c_again, d_again};
  std::map<int32_t, int64_t> holding = {{id1, c_again.lease_id()}, {id2, d_again.lease_id()}};
  for (int i = 0; i < 6; ++i) {
    const int32_t who = i % 2 == 0 ? id1 : id2;
    v1::WorkerMessage next = LeaseRequest();
    next.mutable_lease_request()->add_completed_lease_ids(holding[who]);
    core_->WorkerMessage(who, next);
    after.push_back(lease_of(who == id1 ? w1 : w2));
    holding[who] = after.back().lease_id();
  }
  for (const v1::DataLease& lease : after) {
    EXPECT_EQ(lease.epoch(), 0) << lease.ShortDebugString();
    epoch0_begins.insert(lease.begin());
  }
  EXPECT_EQ(epoch0_begins, (std::multiset<int64_t>{0, 10, 20, 30, 40, 50, 60, 70, 80, 90}))
      << "every block of epoch 0 exactly once across the restart";
  core_->WorkerMessage(id1, LeaseRequest());
  EXPECT_EQ(lease_of(w1).epoch(), 1);
  std::filesystem::remove_all(state_dir);
}

// Scenario (found by the fault matrix): the coordinator receives the final evaluation, stops
// everyone, and is killed before the shards' final reports. Restarted, it must not wait for a
// final evaluation from an evaluator that already left.
TEST_F(CoordinatorCoreTest, ARestartAfterTheFinalEvaluationEndsTheJobWithoutWaiting) {
  journal_ = std::make_shared<InMemoryProgressJournal>();
  v1::JobSpec job = SmallJob();
  job.mutable_stop()->set_max_examples(100);
  Create(job);
  StartJob();
  int32_t evaluator_id = 0;
  auto evaluator = Join("eval", &evaluator_id, v1::ROLE_EVALUATOR);
  core_->WorkerMessage(id1_, Step(100));
  core_->WorkerGone(id1_, "stopped");
  core_->WorkerGone(id2_, "stopped");
  core_->Tick();  // no workers left: the final evaluation is requested
  ASSERT_FALSE(evaluator->Of(v1::CoordinatorToWorker::kEvaluate).empty());
  v1::WorkerMessage report;
  report.mutable_eval()->set_accuracy(0.8);
  report.mutable_eval()->set_final(true);
  core_->WorkerMessage(evaluator_id, report);
  ASSERT_FALSE(evaluator->Of(v1::CoordinatorToWorker::kStop).empty());
  core_.reset();  // SIGKILL before the shards' final reports: nothing else is written

  shards_.clear();
  Create(job);
  EXPECT_EQ(core_->restarts(), 1);
  clock_.Advance(absl::Seconds(1));
  core_->Tick();
  EXPECT_EQ(core_->state(), v1::JOB_DONE);
  ASSERT_TRUE(core_->Status().last_eval().final());
  EXPECT_DOUBLE_EQ(core_->Status().last_eval().accuracy(), 0.8);
}

// An evaluation point's report with validation scores: AUC and accuracy `validation` (the MLP job
// keeps by accuracy: standard error sqrt(a (1 - a) / 5000) ~ 0.006).
v1::WorkerMessage PointReport(int64_t point, double validation, double test) {
  v1::WorkerMessage report;
  v1::EvalReport* eval = report.mutable_eval();
  eval->set_point(point);
  eval->set_point_examples(point * 8);
  eval->set_auc(test);
  eval->set_accuracy(test);
  eval->mutable_validation()->set_auc(validation);
  eval->mutable_validation()->set_accuracy(validation);
  eval->mutable_validation()->set_auc_standard_error(0.002);
  eval->mutable_validation()->set_examples(5000);
  return report;
}

// With a validation set the status names the version the job keeps (chosen by validation,
// never by the test scores); with early_stop, training ends once three evaluations in a row
// trail it by more than twice its standard error, and a restarted coordinator decides the same.
TEST_F(CoordinatorCoreTest, KeepsTheBestValidatedVersionAndStopsEarlyWhenItClearlyWorsens) {
  journal_ = std::make_shared<InMemoryProgressJournal>();
  v1::JobSpec job = SmallJob();
  job.mutable_stop()->set_max_examples(100);
  job.mutable_eval()->set_early_stop(true);
  Create(job);
  StartJob();
  int32_t evaluator = 0;
  auto e = Join("eval", &evaluator, v1::ROLE_EVALUATOR);
  core_->WorkerMessage(id1_, Step(16));
  core_->WorkerMessage(evaluator, PointReport(1, 0.70, 0.80));
  core_->WorkerMessage(evaluator, PointReport(2, 0.75, 0.70));  // the best on validation
  core_->WorkerMessage(evaluator, PointReport(3, 0.74, 0.90));  // within noise: not worse
  core_->WorkerMessage(evaluator, PointReport(4, 0.73, 0.90));
  core_->WorkerMessage(evaluator, PointReport(5, 0.73, 0.90));
  EXPECT_EQ(core_->phase(), JobPhase::kRunning) << "two worse evaluations are not a trend";
  v1::ClusterStatus status = core_->Status();
  EXPECT_EQ(status.kept_eval().point(), 2);
  EXPECT_DOUBLE_EQ(status.kept_eval().auc(), 0.70) << "the kept version's test score";
  EXPECT_EQ(status.early_stop_reason(), "");

  core_->WorkerMessage(evaluator, PointReport(6, 0.72, 0.90));
  EXPECT_EQ(core_->phase(), JobPhase::kFinishing);
  EXPECT_EQ(w1_->Of(v1::CoordinatorToWorker::kStop).size(), 1u);
  EXPECT_EQ(core_->Status().examples(), 16) << "ended before its 100 examples";
  EXPECT_NE(core_->Status().early_stop_reason(), "");
  EXPECT_EQ(core_->Status().kept_eval().point(), 2);

  core_.reset();
  shards_.clear();
  Create(job);
  EXPECT_EQ(core_->phase(), JobPhase::kFinishing) << "the restarted coordinator stops too";
  EXPECT_EQ(core_->Status().kept_eval().point(), 2);
}

// A job that finished (or ran on) before its coordinator restarted still shows the workers that
// trained it: ids, names, roles and tallies come back from the progress file, not connected.
TEST_F(CoordinatorCoreTest, ARestartedCoordinatorStillShowsTheWorkersThatTrained) {
  journal_ = std::make_shared<InMemoryProgressJournal>();
  v1::JobSpec job = SmallJob();
  job.mutable_stop()->set_max_examples(100);
  Create(job);
  StartJob();
  core_->WorkerMessage(id1_, Step(60));
  core_->WorkerMessage(id2_, Step(40));  // the target: FINISHING, saved
  core_->WorkerGone(id1_, "session_closed");
  core_->WorkerGone(id2_, "session_closed");
  clock_.Advance(absl::Seconds(2));
  core_->Tick();  // no evaluator: DRAINING, saved
  core_.reset();

  shards_.clear();
  Create(job);
  const v1::ClusterStatus status = core_->Status();
  ASSERT_EQ(status.workers_size(), 2);
  EXPECT_EQ(status.workers(0).worker_id(), id1_);
  EXPECT_EQ(status.workers(0).name(), "w1");
  EXPECT_EQ(status.workers(0).role(), v1::ROLE_WORKER);
  EXPECT_EQ(status.workers(0).examples(), 60);
  EXPECT_EQ(status.workers(1).examples(), 40);
  EXPECT_FALSE(status.workers(1).alive());
  EXPECT_EQ(status.workers(1).departed_reason(), "session_closed");
}

// A running job's restarted coordinator lists its workers as not connected until they rejoin;
// one that rejoins under its name keeps its id and its tally.
TEST_F(CoordinatorCoreTest, AWorkerRejoiningARestartedCoordinatorKeepsItsTally) {
  journal_ = std::make_shared<InMemoryProgressJournal>();
  Create();
  StartJob();
  core_->WorkerMessage(id1_, Step(8));
  clock_.Advance(absl::Seconds(2));
  core_->Tick();  // saved
  core_.reset();

  shards_.clear();
  Create();
  ASSERT_EQ(core_->Status().workers_size(), 2);
  EXPECT_FALSE(core_->Status().workers(0).alive());
  EXPECT_EQ(core_->Status().workers(0).departed_reason(), "coordinator_restarted");
  ConnectShard(0);
  ConnectShard(1);
  int32_t rejoined = 0;
  Join("w1", &rejoined);
  EXPECT_EQ(rejoined, id1_);
  const v1::WorkerStatus w1 = core_->Status().workers(0);
  EXPECT_TRUE(w1.alive());
  EXPECT_EQ(w1.examples(), 8);
  EXPECT_EQ(w1.departed_reason(), "");
}

TEST_F(CoordinatorCoreTest, AReconnectingShardGetsTheCurrentMembership) {
  Create();
  StartJob();
  core_->ShardGone(1);
  EXPECT_FALSE(core_->Status().shards(1).connected());
  core_->WorkerGone(id2_, "stream closed");
  auto again = std::make_shared<FakeShardLink>();
  v1::ShardHello hello;
  hello.set_shard_id(1);
  hello.set_address("shard-1:7001");
  ASSERT_TRUE(core_->ShardHello(again, hello).ok());
  auto assignments = again->Of(v1::CoordinatorToShard::kAssignment);
  ASSERT_EQ(assignments.size(), 1u);
  EXPECT_THAT(assignments[0].assignment().membership().worker_ids(), ElementsAre(1));
  EXPECT_EQ(assignments[0].assignment().membership().generation(), 2);
}

TEST_F(CoordinatorCoreTest, StatusReportsProgressWorkersAndShards) {
  Create();
  StartJob();
  core_->WorkerMessage(id1_, Step(4, 0.5, 2.0f));
  core_->WorkerMessage(id1_, Step(4, 0.25, 1.0f));
  core_->WorkerMessage(id2_, Step(6, 1.0, 3.0f));
  v1::ShardReport report;
  report.set_version(7);
  report.set_mode(v1::MODE_GBA);
  report.set_updates(7);
  report.add_barrier_waiting_for(2);
  report.mutable_gradients()->set_applied(11);
  report.mutable_gradients()->set_decayed(3);
  report.mutable_gradients()->set_dropped(2);
  report.mutable_gradients()->set_rejected(1);
  core_->ShardReport(1, report);
  core_->ShardReport(5, report);  // unknown shard: ignored
  clock_.Advance(absl::Seconds(3));

  v1::ClusterStatus status = core_->Status();
  EXPECT_EQ(status.job_id(), "fashion-mnist-mlp");
  EXPECT_EQ(status.state(), v1::JOB_RUNNING);
  EXPECT_EQ(status.job_mode(), v1::MODE_SYNC);
  EXPECT_EQ(status.examples(), 14);
  EXPECT_EQ(status.target_examples(), 40);
  EXPECT_DOUBLE_EQ(status.epoch(), 0.14);
  EXPECT_EQ(status.global_batch(), 8);
  EXPECT_EQ(status.elapsed_seconds(), 3.0);
  EXPECT_THAT(status.membership().worker_ids(), ElementsAre(1, 2));

  ASSERT_EQ(status.workers_size(), 2);
  int alive = 0;
  for (const v1::WorkerStatus& w : status.workers()) alive += w.alive() ? 1 : 0;
  EXPECT_EQ(alive, 2);
  const v1::WorkerStatus& w1 = status.workers(0);
  EXPECT_EQ(w1.worker_id(), 1);
  EXPECT_EQ(w1.name(), "w1");
  EXPECT_EQ(w1.role(), v1::ROLE_WORKER);
  EXPECT_EQ(w1.examples(), 8);
  EXPECT_EQ(w1.steps(), 2);
  EXPECT_EQ(w1.last_loss(), 1.0f);
  EXPECT_EQ(w1.local_batch(), 4);
  // The median of {0.5, 0.25}: the mean of the two middle values (straggler::Median's definition).
  EXPECT_EQ(w1.median_compute_seconds(), 0.375);
  EXPECT_EQ(status.workers(1).examples(), 6);

  ASSERT_EQ(status.shards_size(), 2);
  const v1::ShardStatus& s0 = status.shards(0);
  EXPECT_TRUE(s0.connected());
  EXPECT_EQ(s0.address(), "shard-0:7000");
  EXPECT_EQ(s0.version(), 0);
  const v1::ShardStatus& s1 = status.shards(1);
  EXPECT_EQ(s1.shard_id(), 1);
  EXPECT_EQ(s1.version(), 7);
  EXPECT_EQ(s1.mode(), v1::MODE_GBA);
  EXPECT_EQ(s1.updates(), 7);
  EXPECT_THAT(s1.barrier_waiting_for(), ElementsAre(2));
  EXPECT_EQ(s1.gradients().applied(), 11);
  EXPECT_EQ(s1.gradients().decayed(), 3);
  EXPECT_EQ(s1.gradients().dropped(), 2);
  EXPECT_EQ(s1.gradients().rejected(), 1);
  EXPECT_EQ(s0.flat_end(), s1.flat_begin());
}

TEST_F(CoordinatorCoreTest, ThroughputIsMeasuredOnTheFakeClock) {
  Create();
  StartJob();
  core_->WorkerMessage(id1_, Step(4));
  clock_.Advance(absl::Seconds(2));
  core_->WorkerMessage(id1_, Step(8));
  // 8 examples between the first and last sample, 2 s apart.
  EXPECT_EQ(core_->Status().examples_per_second(), 4.0);
}

TEST_F(CoordinatorCoreTest, StatusNamesTheLatestExportAndWhenExportsAreFinal) {
  Create();
  EXPECT_FALSE(core_->Status().has_latest_export());
  v1::ExportRecord record;
  record.set_path("/exports/000001-latest-v000000000079");
  record.set_source("latest");
  core_->SetLatestExport(record);
  EXPECT_EQ(core_->Status().latest_export().path(), record.path());
  // An in-run export is not the last one until the coordinator says so (syncopate local waits
  // for this, not for a time, before it names the job's export).
  EXPECT_FALSE(core_->Status().exports_finished());
  core_->SetExportsFinished();
  EXPECT_TRUE(core_->Status().exports_finished());
}

}  // namespace
}  // namespace syncopate::coordinator
