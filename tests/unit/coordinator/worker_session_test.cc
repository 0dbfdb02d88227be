// The worker session over real gRPC: a CoordinatorServer on localhost:0 with a FakeClock (the test
// ticks it) and a worker's CoordinatorSession, or a raw stream where the test must control every
// message. The shard registers through the core directly: these tests are about the worker side.
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "libs/common/clock.h"
#include "libs/coordinator/coordinator_metrics.h"
#include "libs/coordinator/coordinator_server.h"
#include "libs/job/job_spec.h"
#include "libs/job/model_kind.h"
#include "libs/rpc/grpc_util.h"
#include "libs/worker/coordinator_session.h"
#include "prometheus/registry.h"
#include "syncopate/v1/coordinator.grpc.pb.h"
#include "tests/unit/metric_value.h"

namespace syncopate::coordinator {
namespace {

using ::syncopate::testing::MetricValue;
using ::testing::HasSubstr;

constexpr char kToken[] = "worker-session-test-token";

// One worker, one shard: the job starts once both said hello.
v1::JobSpec Job() {
  v1::JobSpec job = *job::ParseJobSpec(job::DefaultJobText());
  job.set_job_id("worker-session-test");
  job.set_num_workers(1);
  job.set_num_shards(1);
  job.set_global_batch(8);
  job.set_block_size(10);
  EXPECT_TRUE(job::ValidateJobSpec(job).ok());
  return job;
}

class IgnoredShardLink : public ShardLink {
 public:
  void Send(v1::CoordinatorToShard /*message*/) override {}
  void Close(absl::Status /*status*/) override {}
};

v1::WorkerHello Hello(const std::string& token) {
  v1::WorkerHello hello;
  hello.set_name("w1");
  hello.set_role(v1::ROLE_WORKER);
  hello.set_join_token(token);
  return hello;
}

class WorkerSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoordinatorServerOptions options;
    options.core.job = Job();
    options.core.model = {.layout = job::BuiltinLayoutForJob(Job()).value(), .train_examples = 100};
    options.core.clock = &clock_;
    options.core.metrics = &metrics_;
    options.core.hold_start = hold_start_;
    options.join_token = kToken;
    options.tick_interval = absl::ZeroDuration();  // the test ticks as it moves the FakeClock
    absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
        CoordinatorServer::Start(std::move(options));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::Coordinator::NewStub(
        rpc::CreateChannel(server_->local_address(), rpc::TransportSecurity()));
  }

  void RegisterShard() {
    v1::ShardHello hello;
    hello.set_shard_id(0);
    hello.set_address("shard-0:7071");
    ASSERT_TRUE(server_->core().ShardHello(std::make_shared<IgnoredShardLink>(), hello).ok());
  }

  double Rejections() {
    return MetricValue(registry_, "syncopate_coordinator_rejections_total",
                       {{"session", "worker"}, {"reason", "unauthenticated"}})
        .value_or(0);
  }

  template <typename Predicate>
  static bool Eventually(Predicate done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline && !done()) absl::SleepFor(absl::Milliseconds(10));
    return done();
  }

  bool hold_start_ = false;  // set by a fixture before SetUp
  FakeClock clock_;
  prometheus::Registry registry_;
  CoordinatorMetrics metrics_{registry_};
  std::unique_ptr<CoordinatorServer> server_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

// A worker whose welcome is late (the job waits for its shard) beats from its hello on, so the
// coordinator does not take the wait for silence. 2026-11-26, kube_node_test: the bound ran from
// the hello while the worker beat only after its welcome, 5 s of the 10 s went to the wait.
TEST_F(WorkerSessionTest, AWorkerWaitingForItsWelcomeIsHeardFromItsHello) {
  std::optional<absl::StatusOr<std::unique_ptr<worker::CoordinatorSession>>> opened;
  std::thread joiner([&] {
    opened = worker::CoordinatorSession::Open(server_->local_address(), Hello(kToken),
                                              absl::Seconds(30));
  });
  ASSERT_TRUE(Eventually([&] { return server_->core().Status().workers_size() == 1; }));
  // 12 s of coordinator time in 4.8 s of real time: beyond the 10 s silence bound. A heartbeat
  // every real second is one every 2.5 coordinator seconds, so the worker stays well inside it
  // unless it does not beat while it waits.
  for (int i = 0; i < 24; ++i) {
    absl::SleepFor(absl::Milliseconds(200));
    clock_.Advance(absl::Milliseconds(500));
    server_->core().Tick();
  }
  EXPECT_TRUE(server_->core().Status().workers(0).alive())
      << server_->core().Status().workers(0).departed_reason();
  RegisterShard();  // the job starts and welcomes the worker
  joiner.join();
  ASSERT_TRUE(opened.has_value());
  ASSERT_TRUE(opened->ok()) << opened->status();
  EXPECT_EQ((**opened)->welcome().worker_id(), 1);
}

// A member timed out as silent is not a stranger: its rejoin, with its token, is welcomed under
// its old id and counts as no refusal. Only a hello with a wrong token is refused and counted.
TEST_F(WorkerSessionTest, AWorkerTimedOutAsSilentRejoinsAndOnlyAWrongTokenIsCounted) {
  RegisterShard();
  // A raw stream that says hello and then nothing: no heartbeat thread to race the fake clock.
  grpc::ClientContext first_context;
  auto first = stub_->WorkerSession(&first_context);
  v1::WorkerMessage hello;
  *hello.mutable_hello() = Hello(kToken);
  ASSERT_TRUE(first->Write(hello));
  v1::CoordinatorToWorker welcome;
  ASSERT_TRUE(first->Read(&welcome));
  ASSERT_TRUE(welcome.has_welcome());
  const int32_t id = welcome.welcome().worker_id();

  clock_.Advance(absl::Seconds(11));
  server_->core().Tick();
  v1::CoordinatorToWorker ignored;
  while (first->Read(&ignored)) {
  }
  const grpc::Status silent = first->Finish();
  EXPECT_EQ(silent.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << silent.error_message();
  EXPECT_THAT(silent.error_message(), HasSubstr("no message within"));
  EXPECT_FALSE(server_->core().Status().workers(0).alive());

  absl::StatusOr<std::unique_ptr<worker::CoordinatorSession>> rejoined =
      worker::CoordinatorSession::Open(server_->local_address(), Hello(kToken), absl::Seconds(10));
  ASSERT_TRUE(rejoined.ok()) << rejoined.status();
  EXPECT_EQ((*rejoined)->welcome().worker_id(), id);
  EXPECT_TRUE(server_->core().Status().workers(0).alive());
  EXPECT_EQ(Rejections(), 0);

  absl::StatusOr<std::unique_ptr<worker::CoordinatorSession>> stranger =
      worker::CoordinatorSession::Open(server_->local_address(), Hello("not-the-token"),
                                       absl::Seconds(10));
  ASSERT_FALSE(stranger.ok());
  EXPECT_EQ(stranger.status().code(), absl::StatusCode::kUnauthenticated) << stranger.status();
  EXPECT_EQ(Rejections(), 1);
  EXPECT_TRUE(server_->core().Status().workers(0).alive()) << "the stranger claimed w1's name";
}

}  // namespace
}  // namespace syncopate::coordinator

namespace syncopate::coordinator {
namespace {

// A coordinator started with --hold_start.
class HeldStartTest : public WorkerSessionTest {
 protected:
  HeldStartTest() { hold_start_ = true; }

  grpc::Status Release(const std::string& token, v1::ReleaseResponse& response) {
    grpc::ClientContext context;
    v1::ReleaseRequest request;
    request.set_join_token(token);
    return stub_->Release(&context, request, &response);
  }
};

// Everyone registers while the job is held; a release without the join token
// is refused (UNAUTHENTICATED, counted) and changes nothing; with it the job starts and the
// waiting worker is welcomed. A second release says the job was not held.
TEST_F(HeldStartTest, TheJobStartsOnlyWhenReleasedWithTheJoinToken) {
  RegisterShard();
  std::optional<absl::StatusOr<std::unique_ptr<worker::CoordinatorSession>>> opened;
  std::thread joiner([&] {
    opened = worker::CoordinatorSession::Open(server_->local_address(), Hello(kToken),
                                              absl::Seconds(30));
  });
  ASSERT_TRUE(Eventually([&] { return server_->core().Status().workers_size() == 1; }));
  // Everyone it waits for has registered: unheld, it would have started (the startup grace is
  // CoordinatorCoreTest.AHeldJobStartsOnlyWhenReleased's).
  server_->core().Tick();
  v1::ClusterStatus status = server_->core().Status();
  EXPECT_EQ(status.state(), v1::JOB_WAITING);
  EXPECT_TRUE(status.held());

  v1::ReleaseResponse response;
  EXPECT_EQ(Release("wrong-token", response).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(MetricValue(registry_, "syncopate_coordinator_rejections_total",
                        {{"session", "release"}, {"reason", "unauthenticated"}}),
            1);
  EXPECT_TRUE(server_->core().Status().held());

  ASSERT_TRUE(Release(kToken, response).ok());
  EXPECT_TRUE(response.was_held());
  EXPECT_EQ(response.state(), v1::JOB_RUNNING);
  joiner.join();
  ASSERT_TRUE(opened.has_value());
  ASSERT_TRUE(opened->ok()) << opened->status();
  EXPECT_EQ((**opened)->welcome().worker_id(), 1);
  EXPECT_FALSE(server_->core().Status().held());

  ASSERT_TRUE(Release(kToken, response).ok());
  EXPECT_FALSE(response.was_held());
}

}  // namespace
}  // namespace syncopate::coordinator
