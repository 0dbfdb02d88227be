// Real shard process, bad pushes over a real Train stream: each gets a precise status code,
// none is applied, and each is counted in the shard's Prometheus metrics.
#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "libs/tensor/packed.h"
#include "libs/worker/parameter_client.h"
#include "tests/integration/cluster_test_util.h"

namespace syncopate {
namespace {

using testing::MetricValue;
using testing::Options;
using testing::ScrapeMetrics;
using testing::SmallJob;
using testing::WaitFor;

v1::PushAck PushOnce(worker::ShardConnection& shard, int64_t token, int64_t samples,
                     const std::vector<float>& gradient) {
  absl::StatusOr<int64_t> id = shard.SendPush(token, samples, tensor::PackFloats(gradient));
  EXPECT_TRUE(id.ok()) << id.status();
  absl::StatusOr<v1::ShardToWorker> reply = shard.WaitReply(*id, absl::Seconds(10));
  EXPECT_TRUE(reply.ok()) << reply.status();
  return reply->ack();
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
      **cluster, [](const v1::ClusterStatus& s) { return s.shards(0).version() > 0; },
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

  worker::ShardConnection stranger(endpoint, /*worker_id=*/999, v1::ROLE_WORKER);
  ASSERT_TRUE(stranger.Connect(absl::Seconds(10)).ok());
  worker::ShardConnection impostor(endpoint, member, v1::ROLE_WORKER);
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

}  // namespace
}  // namespace syncopate
