// Real shard and coordinator processes, bad input over real streams: each gets a precise status
// code, none is applied, and each is counted by reason in the Prometheus metrics.
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "libs/rpc/grpc_util.h"
#include "libs/rpc/train_wire.h"
#include "libs/shard/shard_core.h"
#include "libs/tensor/packed.h"
#include "libs/worker/coordinator_session.h"
#include "libs/worker/parameter_client.h"
#include "syncopate/v1/coordinator.grpc.pb.h"
#include "syncopate/v1/shard.grpc.pb.h"
#include "tests/integration/cluster_test_util.h"

namespace syncopate {
namespace {

using testing::MetricValue;
using testing::Options;
using testing::ScrapeMetrics;
using testing::SmallJob;
using testing::WaitFor;

v1::PushAck PushBytes(worker::ShardConnection& shard, int64_t token, int64_t samples,
                      const std::string& gradient) {
  absl::StatusOr<worker::ShardConnection::PushAndPullIds> ids =
      shard.SendPush(token, samples, gradient);
  EXPECT_TRUE(ids.ok()) << ids.status();
  if (!ids.ok()) return v1::PushAck();
  absl::StatusOr<worker::ShardReply> reply = shard.WaitReply(ids->push, absl::Seconds(30));
  EXPECT_TRUE(reply.ok()) << reply.status();
  return reply.ok() ? reply->message.ack() : v1::PushAck();
}

v1::PushAck PushOnce(worker::ShardConnection& shard, int64_t token, int64_t samples,
                     const std::vector<float>& gradient) {
  return PushBytes(shard, token, samples, tensor::PackFloats(gradient));
}

// Scenario: wrong length, NaN, Inf, non-positive samples, an unknown worker and a token from
// the future are each rejected with their own code and counted by reason.
TEST(BadInput, RejectedPushesGetPreciseCodesAndAreCounted) {
  v1::JobSpec job = SmallJob(v1::MODE_SYNC, 1, 1, 1);
  job.mutable_stop()->set_max_examples(int64_t{1} << 40);  // keep training while we probe
  job.mutable_stop()->set_epochs(0);
  launch::LocalClusterOptions options = Options(job, "bad-input");
  options.evaluator = false;
  auto cluster = launch::LocalCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto running = WaitFor(
      **cluster,
      [](const v1::ClusterStatus& s) {
        return s.shards(0).version() > 0 && s.membership().worker_ids_size() > 0;
      },
      absl::Seconds(60));
  ASSERT_TRUE(running.ok()) << running.status();
  const v1::ShardStatus& shard_status = running->shards(0);
  const int32_t member = running->membership().worker_ids(0);
  v1::ShardEndpoint endpoint;
  endpoint.set_shard_id(0);
  endpoint.set_address(shard_status.address());
  endpoint.set_flat_begin(shard_status.flat_begin());
  endpoint.set_flat_end(shard_status.flat_end());
  const size_t size = shard_status.flat_end() - shard_status.flat_begin();

  worker::ShardConnection stranger(endpoint, {.worker_id = 999});
  ASSERT_TRUE(stranger.Connect(absl::Seconds(10)).ok());
  worker::ShardConnection impostor(endpoint, {.worker_id = member});
  ASSERT_TRUE(impostor.Connect(absl::Seconds(10)).ok());

  const std::vector<float> good(size, 0.01f);
  std::vector<float> nan = good;
  nan[size / 2] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> inf = good;
  inf[0] = std::numeric_limits<float>::infinity();

  const int invalid = static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT);
  v1::PushAck ack = PushOnce(impostor, 0, 1, std::vector<float>(3, 0.0f));
  EXPECT_EQ(ack.outcome(), v1::PUSH_REJECTED);
  EXPECT_EQ(ack.code(), invalid);
  EXPECT_NE(ack.message().find("wrong length"), std::string::npos) << ack.message();
  EXPECT_EQ(PushOnce(impostor, 0, 1, nan).code(), invalid);
  EXPECT_EQ(PushOnce(impostor, 0, 1, inf).code(), invalid);
  EXPECT_EQ(PushOnce(impostor, 0, 0, good).code(), invalid);
  EXPECT_EQ(PushOnce(stranger, 0, 1, good).code(),
            static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION));
  EXPECT_EQ(PushOnce(impostor, int64_t{1} << 40, 1, good).code(),
            static_cast<int>(grpc::StatusCode::OUT_OF_RANGE));

  const std::string metrics = ScrapeMetrics((*cluster)->metrics_ports().at("shard-0"));
  auto rejected = [&](const std::string& reason) {
    return MetricValue(metrics,
                       "syncopate_shard_rejections_total{reason=\"" + reason + "\",shard=\"0\"}");
  };
  EXPECT_EQ(rejected("wrong_shape"), 1) << metrics;
  EXPECT_EQ(rejected("non_finite"), 2);
  EXPECT_EQ(rejected("bad_samples"), 1);
  EXPECT_EQ(rejected("not_member"), 1);
  EXPECT_EQ(rejected("future_token"), 1);
  EXPECT_EQ(
      MetricValue(metrics, "syncopate_shard_gradients_total{outcome=\"rejected\",shard=\"0\"}"), 6);
  // The real worker kept training through all of it.
  auto later = WaitFor(
      **cluster,
      [&](const v1::ClusterStatus& s) {
        return s.shards(0).version() > shard_status.version() + 5;
      },
      absl::Seconds(30));
  EXPECT_TRUE(later.ok()) << later.status();
}

// The shard's rejection counters and push outcomes, by label value, from one real scrape.
struct ShardCounts {
  std::map<std::string, double> rejections;  // reason -> count
  std::map<std::string, double> outcomes;    // outcome -> count
  double coordinator_wrong_job_worker = 0;
  double coordinator_wrong_job_shard = 0;
};

ShardCounts Scrape(launch::LocalCluster& cluster) {
  const std::string shard = ScrapeMetrics(cluster.metrics_ports().at("shard-0"));
  ShardCounts counts;
  for (shard::RejectionReason r : shard::kAllRejectionReasons) {
    const std::string reason(shard::RejectionReasonName(r));
    counts.rejections[reason] = MetricValue(
        shard,
        absl::StrCat("syncopate_shard_rejections_total{reason=\"", reason, "\",shard=\"0\"}"));
  }
  for (const char* outcome : {"applied", "decayed", "dropped", "rejected"}) {
    counts.outcomes[outcome] = MetricValue(
        shard,
        absl::StrCat("syncopate_shard_gradients_total{outcome=\"", outcome, "\",shard=\"0\"}"));
  }
  const std::string coordinator = ScrapeMetrics(cluster.metrics_ports().at("coordinator"));
  counts.coordinator_wrong_job_worker = MetricValue(
      coordinator,
      "syncopate_coordinator_rejections_total{reason=\"wrong_job\",session=\"worker\"}");
  counts.coordinator_wrong_job_shard =
      MetricValue(coordinator,
                  "syncopate_coordinator_rejections_total{reason=\"wrong_job\",session=\"shard\"}");
  return counts;
}

// Exactly `reason` (if any) and `outcome` (if any) went up by one since `before`; nothing else.
void ExpectCountedOnce(const ShardCounts& before, const ShardCounts& after,
                       const std::string& reason, const std::string& outcome) {
  for (const auto& [name, value] : after.rejections) {
    EXPECT_EQ(value - before.rejections.at(name), name == reason ? 1 : 0) << "reason " << name;
  }
  for (const auto& [name, value] : after.outcomes) {
    EXPECT_EQ(value - before.outcomes.at(name), name == outcome ? 1 : 0) << "outcome " << name;
  }
}

struct Parameters {
  int64_t version = -1;
  std::string values;  // packed floats, compared bit for bit
};

Parameters Pull(worker::ShardConnection& shard) {
  absl::StatusOr<int64_t> id = shard.SendPull(/*min_version=*/0);
  EXPECT_TRUE(id.ok()) << id.status();
  absl::StatusOr<worker::ShardReply> reply = shard.WaitReply(*id, absl::Seconds(10));
  EXPECT_TRUE(reply.ok()) << reply.status();
  if (!reply.ok()) return {};
  std::string values;
  for (const std::span<const char> chunk : reply->values.chunks()) {
    values.append(chunk.data(), chunk.size());
  }
  return {reply->message.pull().version(), std::move(values)};
}

// Polls the shard's metrics until its sync barrier waits for `members` workers (the membership
// the coordinator sent has arrived).
bool WaitForBarrierMembers(launch::LocalCluster& cluster, int members) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    const std::string text = ScrapeMetrics(cluster.metrics_ports().at("shard-0"));
    if (MetricValue(text, "syncopate_shard_barrier_waiting_workers{shard=\"0\"}") == members) {
      return true;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return false;
}

// Scenario: real coordinator and shard, the two members are played by the test (so nothing but
// its own pushes moves the parameters). Every rejection path of issue 7 - wrong shape, NaN, Inf,
// bad sample count, unknown worker, token from the future, oversize message, duplicate push,
// departed worker, wrong job id at the shard and at the coordinator - gets its status code, is
// counted once under its reason, and leaves version and parameters bit-for-bit unchanged; a
// token of a released sync barrier is dropped (outcome "dropped", not a rejection).
TEST(BadInput, EveryRejectionPathIsCountedAndChangesNothing) {
  v1::JobSpec job = SmallJob(v1::MODE_SYNC, 2, 1, 0);
  job.mutable_stop()->set_max_examples(int64_t{1} << 40);
  launch::LocalClusterOptions options = Options(job, "bad-input-held");
  options.evaluator = false;
  options.worker_processes = 0;
  auto started = launch::LocalCluster::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  launch::LocalCluster& cluster = **started;

  // Both hellos must be in before either is welcomed.
  auto open = [&](const std::string& name) {
    v1::WorkerHello hello;
    hello.set_name(name);
    hello.set_role(v1::ROLE_WORKER);
    return worker::CoordinatorSession::Open(cluster.coordinator_address(), hello,
                                            absl::Seconds(60));
  };
  absl::StatusOr<std::unique_ptr<worker::CoordinatorSession>> session_a;
  std::thread opener([&] { session_a = open("probe-a"); });
  absl::StatusOr<std::unique_ptr<worker::CoordinatorSession>> session_b = open("probe-b");
  opener.join();
  ASSERT_TRUE(session_a.ok()) << session_a.status();
  ASSERT_TRUE(session_b.ok()) << session_b.status();
  const v1::Welcome welcome_a = (*session_a)->welcome();
  const v1::Welcome welcome_b = (*session_b)->welcome();
  const std::string job_id = welcome_a.job().job_id();
  ASSERT_EQ(job_id, "integration");
  const v1::ShardEndpoint endpoint = welcome_a.shard_map().shards(0);
  const size_t size = endpoint.flat_end() - endpoint.flat_begin();
  const int32_t a_id = welcome_a.worker_id();
  const int32_t b_id = welcome_b.worker_id();

  worker::ShardConnection a(endpoint, {.worker_id = a_id, .job_id = job_id});
  worker::ShardConnection b(endpoint, {.worker_id = b_id, .job_id = job_id});
  worker::ShardConnection stranger(endpoint, {.worker_id = 999, .job_id = job_id});
  // Reads the parameters between probes. Not a and not b: a sync member that has filled its place
  // in the barrier waits for the barrier's release when it pulls.
  worker::ShardConnection observer(
      endpoint, {.worker_id = 998, .role = v1::ROLE_EVALUATOR, .job_id = job_id});
  // The welcome can overtake the shard's assignment by a moment (the shard then ends the stream
  // with UNAVAILABLE, "no partition assigned yet"); connect as a worker would, with retries.
  auto connect = [](worker::ShardConnection& c) {
    absl::Status status;
    for (int attempt = 0; attempt < 50; ++attempt) {
      status = c.Connect(absl::Seconds(10));
      if (!absl::IsUnavailable(status)) break;
      absl::SleepFor(absl::Milliseconds(100));
    }
    return status;
  };
  ASSERT_TRUE(connect(a).ok());
  ASSERT_TRUE(connect(b).ok());
  ASSERT_TRUE(connect(stranger).ok());
  ASSERT_TRUE(connect(observer).ok());
  ASSERT_TRUE(WaitForBarrierMembers(cluster, 2));

  const std::vector<float> good(size, 0.01f);
  std::vector<float> nan = good;
  nan[size / 2] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> inf = good;
  inf[0] = -std::numeric_limits<float>::infinity();

  // One probe: its ack code, then exactly one count under `reason`, and unchanged parameters.
  Parameters params = Pull(observer);
  ASSERT_EQ(params.version, 0);
  ASSERT_EQ(params.values.size(), size * sizeof(float));
  auto probe = [&](const std::string& what, worker::ShardConnection& from, int64_t token,
                   int64_t samples, const std::string& gradient, grpc::StatusCode code,
                   const std::string& reason) {
    SCOPED_TRACE(what);
    const ShardCounts before = Scrape(cluster);
    const v1::PushAck ack = PushBytes(from, token, samples, gradient);
    EXPECT_EQ(ack.outcome(), v1::PUSH_REJECTED);
    EXPECT_EQ(ack.code(), static_cast<int>(code)) << ack.message();
    EXPECT_FALSE(ack.message().empty());
    ExpectCountedOnce(before, Scrape(cluster), reason, "rejected");
    const Parameters now = Pull(observer);
    EXPECT_EQ(now.version, params.version);
    EXPECT_TRUE(now.values == params.values) << "parameters changed";
  };
  probe("wrong shape", a, 0, 1, tensor::PackFloats(std::vector<float>(3, 0.0f)),
        grpc::StatusCode::INVALID_ARGUMENT, "wrong_shape");
  probe("NaN", a, 0, 1, tensor::PackFloats(nan), grpc::StatusCode::INVALID_ARGUMENT, "non_finite");
  probe("-Inf", a, 0, 1, tensor::PackFloats(inf), grpc::StatusCode::INVALID_ARGUMENT, "non_finite");
  probe("zero samples", a, 0, 0, tensor::PackFloats(good), grpc::StatusCode::INVALID_ARGUMENT,
        "bad_samples");
  probe("unknown worker", stranger, 0, 1, tensor::PackFloats(good),
        grpc::StatusCode::FAILED_PRECONDITION, "not_member");
  probe("token from the future", a, int64_t{1} << 40, 1, tensor::PackFloats(good),
        grpc::StatusCode::OUT_OF_RANGE, "future_token");
  // Above the shard's own limit but below gRPC's: the handler sees it, refuses and counts it.
  probe("oversize", a, 0, 1, std::string(shard::kMaxPushBytes + 4, '\0'),
        grpc::StatusCode::RESOURCE_EXHAUSTED, "oversize");

  // Duplicate: a's first gradient for version 0 enters the barrier (no update: b has not
  // pushed), its second is refused.
  EXPECT_EQ(PushBytes(a, 0, 32, tensor::PackFloats(good)).outcome(), v1::PUSH_APPLIED);
  probe("duplicate push", a, 0, 32, tensor::PackFloats(good), grpc::StatusCode::ALREADY_EXISTS,
        "duplicate");
  // b completes the barrier: version 1, parameters moved. The shard kept serving throughout.
  EXPECT_EQ(PushBytes(b, 0, 32, tensor::PackFloats(good)).version(), 1);
  const Parameters moved = Pull(observer);
  EXPECT_EQ(moved.version, 1);
  EXPECT_FALSE(moved.values == params.values);
  params = moved;

  // A token of the released barrier: dropped (valid but too stale for sync), counted as
  // outcome "dropped", no rejection reason, nothing applied (it fills b's place in barrier 1).
  {
    const ShardCounts before = Scrape(cluster);
    const v1::PushAck ack = PushBytes(b, 0, 32, tensor::PackFloats(good));
    EXPECT_EQ(ack.outcome(), v1::PUSH_DROPPED);
    EXPECT_EQ(ack.code(), 0);
    EXPECT_EQ(ack.staleness(), 1);
    ExpectCountedOnce(before, Scrape(cluster), "", "dropped");
    const Parameters now = Pull(observer);
    EXPECT_EQ(now.version, 1);
    EXPECT_TRUE(now.values == params.values);
  }

  // b departs (its coordinator session ends): the coordinator removes it from the membership
  // and its pushes are refused from then on.
  session_b->reset();
  ASSERT_TRUE(WaitForBarrierMembers(cluster, 1));
  probe("departed worker", b, 1, 32, tensor::PackFloats(good),
        grpc::StatusCode::FAILED_PRECONDITION, "not_member");

  // A Train stream opened with `hello` alone: the shard must end it without a reply.
  auto refused_hello = [&](const v1::TrainHello& hello) {
    auto stub = v1::ParameterShard::NewStub(
        rpc::CreateChannel(endpoint.address(), rpc::TransportSecurity()));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    auto stream = stub->Train(&context);
    v1::WorkerToShard message;
    *message.mutable_hello() = hello;
    stream->Write(message);
    v1::ShardToWorker reply;
    EXPECT_FALSE(stream->Read(&reply)) << reply.ShortDebugString();
    return stream->Finish();
  };
  v1::TrainHello hello;
  hello.set_worker_id(a_id);
  hello.set_role(v1::ROLE_WORKER);
  hello.set_wire_version(rpc::kTrainWireVersion);

  // Wrong job id on a Train stream: refused before any push is read.
  {
    const ShardCounts before = Scrape(cluster);
    v1::TrainHello other_job = hello;
    other_job.set_job_id("another-job");
    const grpc::Status status = refused_hello(other_job);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(status.error_message().find("wrong job id"), std::string::npos)
        << status.error_message();
    ExpectCountedOnce(before, Scrape(cluster), "wrong_job", "");
    EXPECT_TRUE(Pull(observer).values == params.values);
  }

  // A worker of another release (another Train wire version; 0: from before the versioned wire):
  // refused with one line that says so, counted, before any payload is read.
  for (const int32_t version : {0, rpc::kTrainWireVersion + 1}) {
    const ShardCounts before = Scrape(cluster);
    v1::TrainHello other_release = hello;
    other_release.set_wire_version(version);
    const grpc::Status status = refused_hello(other_release);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(status.error_message().find(absl::StrCat("speaks Train wire version ", version)),
              std::string::npos)
        << status.error_message();
    ExpectCountedOnce(before, Scrape(cluster), "wire_version", "");
  }

  // Bytes that are not a Train message at all (the shard decodes them itself, beside
  // protobuf: rpc::DecodeWithPayload): INVALID_ARGUMENT, counted, nothing applied.
  {
    const ShardCounts before = Scrape(cluster);
    const std::shared_ptr<grpc::Channel> channel =
        rpc::CreateChannel(endpoint.address(), rpc::TransportSecurity());
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    auto stream = rpc::OpenRawTrainStream(channel, &context);
    // Field 3 (the push) said to be 256 MiB long, in a 19-byte message.
    const std::string garbage = "\x1a\xff\xff\xff\x0f not a push";
    const grpc::Slice slice(garbage);
    stream->Write(grpc::ByteBuffer(&slice, 1));
    grpc::ByteBuffer reply;
    EXPECT_FALSE(stream->Read(&reply));
    const grpc::Status status = stream->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("malformed message"), std::string::npos)
        << status.error_message();
    ExpectCountedOnce(before, Scrape(cluster), "malformed", "");
    EXPECT_TRUE(Pull(observer).values == params.values);
  }

  // Wrong job id at the coordinator: a worker rejoining from another job, and a shard
  // re-registering with another job's parameters.
  {
    const ShardCounts before = Scrape(cluster);
    v1::WorkerHello hello;
    hello.set_name("probe-a");
    hello.set_role(v1::ROLE_WORKER);
    hello.set_job_id("another-job");
    auto refused =
        worker::CoordinatorSession::Open(cluster.coordinator_address(), hello, absl::Seconds(10));
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
    EXPECT_NE(refused.status().message().find("wrong job id"), std::string::npos);

    auto stub = v1::Coordinator::NewStub(
        rpc::CreateChannel(cluster.coordinator_address(), rpc::TransportSecurity()));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    auto stream = stub->ShardSession(&context);
    v1::ShardMessage shard_hello;
    shard_hello.mutable_hello()->set_shard_id(0);
    shard_hello.mutable_hello()->set_address("127.0.0.1:1");
    shard_hello.mutable_hello()->set_job_id("another-job");
    stream->Write(shard_hello);
    v1::CoordinatorToShard assignment;
    EXPECT_FALSE(stream->Read(&assignment)) << "no assignment for another job's shard";
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::FAILED_PRECONDITION);

    const ShardCounts after = Scrape(cluster);
    EXPECT_EQ(after.coordinator_wrong_job_worker - before.coordinator_wrong_job_worker, 1);
    EXPECT_EQ(after.coordinator_wrong_job_shard - before.coordinator_wrong_job_shard, 1);
    // The real shard and member a are untouched: a's session and stream still work.
    auto status = cluster.Status();
    ASSERT_TRUE(status.ok()) << status.status();
    EXPECT_TRUE(status->shards(0).connected());
    EXPECT_EQ(status->shards(0).address(), endpoint.address());
    EXPECT_FALSE((*session_a)->stop_requested());
    EXPECT_TRUE(Pull(observer).values == params.values);
  }
}

}  // namespace
}  // namespace syncopate
