#include "libs/shard/shard_core.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "libs/common/clock.h"
#include "libs/shard/shard_metrics.h"
#include "libs/tensor/bfloat16.h"
#include "libs/tensor/packed.h"
#include "prometheus/registry.h"
#include "tests/unit/metric_value.h"

namespace syncopate::shard {
namespace {

using ::syncopate::testing::MetricValue;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// The shard owns flat [10, 14): tensor "w" elements 0..2 and tensor "b" element 0, all zeros.
// G = 4, workers 1 and 2 with local batch 2, plain SGD with lr 0.5 (every float below is exact).
constexpr int64_t kBegin = 10;
constexpr int64_t kEnd = 14;
constexpr float kLearningRate = 0.5f;

v1::Membership Members(const std::vector<int32_t>& ids, int32_t local_batch,
                       int64_t generation = 1) {
  v1::Membership m;
  m.set_generation(generation);
  for (int32_t id : ids) m.add_worker_ids(id);
  m.set_local_batch(local_batch);
  return m;
}

v1::TensorSlice* AddSlice(v1::ShardPartition& p, const std::string& tensor, int64_t tensor_offset,
                          int64_t flat_offset, int64_t length) {
  v1::TensorSlice* slice = p.add_slices();
  slice->set_tensor(tensor);
  slice->set_tensor_offset(tensor_offset);
  slice->set_flat_offset(flat_offset);
  slice->set_length(length);
  slice->mutable_init()->set_kind(v1::Initializer::ZEROS);
  return slice;
}

v1::ShardAssignment Assignment(v1::Mode mode) {
  v1::ShardAssignment a;
  v1::JobSpec& job = *a.mutable_job();
  job.mutable_optimizer()->set_kind(v1::OptimizerSpec::SGD);
  job.mutable_optimizer()->set_learning_rate(kLearningRate);
  job.set_global_batch(4);
  job.set_num_workers(2);
  job.set_num_shards(2);
  job.set_mode(mode);
  job.set_seed(7);
  v1::ShardPartition& p = *a.mutable_partition();
  p.set_shard_id(1);
  p.set_flat_begin(kBegin);
  p.set_flat_end(kEnd);
  AddSlice(p, "w", 0, 10, 3);
  AddSlice(p, "b", 0, 13, 1);
  *a.mutable_membership() = Members({1, 2}, 2);
  a.set_mode(mode);
  return a;
}

v1::PushRequest Gradient(int64_t token, int64_t samples, std::vector<float> g,
                         int64_t request_id = 1) {
  v1::PushRequest push;
  push.set_request_id(request_id);
  push.set_token(token);
  push.set_samples(samples);
  push.set_gradient(tensor::PackFloats(g));
  return push;
}

std::vector<float> Unpack(const std::string& bytes) {
  std::vector<float> values(bytes.size() / sizeof(float));
  EXPECT_TRUE(tensor::UnpackFloatsInto(bytes, values).ok());
  return values;
}

std::vector<uint32_t> Bits(const std::vector<float>& values) {
  std::vector<uint32_t> bits;
  bits.reserve(values.size());
  for (float v : values) bits.push_back(std::bit_cast<uint32_t>(v));
  return bits;
}

class ShardCoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<ShardCore> Make(v1::Mode mode, ShardMetrics* metrics = nullptr) {
    absl::StatusOr<std::unique_ptr<ShardCore>> core =
        ShardCore::Create(Assignment(mode), &clock_, metrics);
    EXPECT_TRUE(core.ok()) << core.status();
    return core.ok() ? std::move(*core) : nullptr;
  }

  // Issues a pull whose response (if any) lands in `out`.
  void PullInto(ShardCore& core, const void* owner, int64_t request_id, int64_t min_version,
                std::optional<v1::PullResponse>& out, int32_t worker = -1) {
    v1::PullRequest request;
    request.set_request_id(request_id);
    request.set_min_version(min_version);
    ASSERT_TRUE(
        core.Pull({owner, worker}, request, [&out](PullReply r) { out = std::move(r).ToMessage(); })
            .ok());
  }

  FakeClock clock_;
};

// --- Creation -----------------------------------------------------------------------------

TEST_F(ShardCoreTest, InitialisesFromSlices) {
  std::unique_ptr<ShardCore> core = Make(v1::MODE_SYNC);
  ASSERT_NE(core, nullptr);
  EXPECT_EQ(core->flat_begin(), kBegin);
  EXPECT_EQ(core->flat_end(), kEnd);
  EXPECT_EQ(core->size(), 4);
  EXPECT_THAT(core->Parameters(), ElementsAre(0.0f, 0.0f, 0.0f, 0.0f));
  ShardStats stats = core->Stats();
  EXPECT_EQ(stats.version, 0);
  EXPECT_EQ(stats.mode, v1::MODE_SYNC);
  EXPECT_EQ(stats.updates, 0);
  EXPECT_THAT(stats.barrier_waiting_for, ElementsAre(1, 2));
}

TEST_F(ShardCoreTest, RandomInitialiserDependsOnlyOnTensorCoordinates) {
  // The same tensor elements initialise identically whichever shard holds them.
  v1::ShardAssignment whole = Assignment(v1::MODE_SYNC);
  whole.mutable_partition()->clear_slices();
  AddSlice(*whole.mutable_partition(), "w", 0, 10, 4)
      ->mutable_init()
      ->set_kind(v1::Initializer::HE_UNIFORM);
  whole.mutable_partition()->mutable_slices(0)->mutable_init()->set_fan_in(4);
  v1::ShardAssignment tail = whole;
  tail.mutable_partition()->set_flat_begin(12);
  tail.mutable_partition()->set_flat_end(14);
  tail.mutable_partition()->mutable_slices(0)->set_tensor_offset(2);
  tail.mutable_partition()->mutable_slices(0)->set_flat_offset(12);
  tail.mutable_partition()->mutable_slices(0)->set_length(2);
  auto a = ShardCore::Create(whole, &clock_, nullptr);
  auto b = ShardCore::Create(tail, &clock_, nullptr);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  const std::vector<float> full = (*a)->Parameters();
  EXPECT_THAT(Bits((*b)->Parameters()), ElementsAre(Bits(full)[2], Bits(full)[3]));
  EXPECT_NE(full[0], 0.0f);
}

TEST_F(ShardCoreTest, RejectsBadAssignments) {
  struct Case {
    std::string what;
    void (*breaks)(v1::ShardAssignment&);
  };
  const Case cases[] = {
      {"empty range", [](v1::ShardAssignment& a) { a.mutable_partition()->set_flat_end(kBegin); }},
      {"reversed range",
       [](v1::ShardAssignment& a) { a.mutable_partition()->set_flat_end(kBegin - 1); }},
      {"slices cover too little",
       [](v1::ShardAssignment& a) { a.mutable_partition()->mutable_slices()->RemoveLast(); }},
      {"no slices", [](v1::ShardAssignment& a) { a.mutable_partition()->clear_slices(); }},
      {"slice outside the range",
       [](v1::ShardAssignment& a) {
         a.mutable_partition()->mutable_slices(1)->set_flat_offset(14);
       }},
      {"slice before the range",
       [](v1::ShardAssignment& a) {
         a.mutable_partition()->mutable_slices(0)->set_flat_offset(9);
       }},
      {"overlapping slices leave a gap",  // [10,13) + [11,12): 4 elements counted, 13 never set
       [](v1::ShardAssignment& a) {
         a.mutable_partition()->mutable_slices(1)->set_flat_offset(11);
       }},
      {"negative slice length",
       [](v1::ShardAssignment& a) {
         a.mutable_partition()->mutable_slices(1)->set_length(-1);
         AddSlice(*a.mutable_partition(), "c", 0, 13, 2);
       }},
      {"mode AUTO", [](v1::ShardAssignment& a) { a.set_mode(v1::MODE_AUTO); }},
      {"mode unspecified", [](v1::ShardAssignment& a) { a.set_mode(v1::MODE_UNSPECIFIED); }},
      {"optimizer unspecified",
       [](v1::ShardAssignment& a) { a.mutable_job()->mutable_optimizer()->clear_kind(); }},
      {"momentum out of range",
       [](v1::ShardAssignment& a) {
         a.mutable_job()->mutable_optimizer()->set_kind(v1::OptimizerSpec::MOMENTUM);
         a.mutable_job()->mutable_optimizer()->set_momentum(1.0f);
       }},
      {"global batch zero", [](v1::ShardAssignment& a) { a.mutable_job()->set_global_batch(0); }},
  };
  for (const Case& c : cases) {
    v1::ShardAssignment assignment = Assignment(v1::MODE_SYNC);
    c.breaks(assignment);
    absl::StatusOr<std::unique_ptr<ShardCore>> core =
        ShardCore::Create(assignment, &clock_, nullptr);
    EXPECT_EQ(core.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
  }
}

// --- Sync -----------------------------------------------------------------------------------

TEST_F(ShardCoreTest, SyncPullIsHeldUntilTheBarrierReleases) {
  std::unique_ptr<ShardCore> core = Make(v1::MODE_SYNC);
  int owner = 0;
  std::optional<v1::PullResponse> initial, next;
  PullInto(*core, &owner, 1, 0, initial);
  ASSERT_TRUE(initial.has_value()) << "version 0 is available at once";
  EXPECT_EQ(initial->version(), 0);
  EXPECT_THAT(Unpack(initial->values()), ElementsAre(0.0f, 0.0f, 0.0f, 0.0f));

  PullInto(*core, &owner, 2, 1, next);
  EXPECT_FALSE(next.has_value());
  EXPECT_EQ(core->Stats().pending_pulls, 1);

  v1::PushAck first = core->Push(1, Gradient(0, 2, {1, 2, 3, 4}, 11));
  EXPECT_EQ(first.outcome(), v1::PUSH_APPLIED);
  EXPECT_EQ(first.request_id(), 11);
  EXPECT_EQ(first.code(), 0);
  EXPECT_EQ(first.version(), 0);
  EXPECT_EQ(first.weight(), 1.0);
  EXPECT_FALSE(next.has_value()) << "the barrier still waits for worker 2";
  EXPECT_THAT(core->Stats().barrier_waiting_for, ElementsAre(2));

  clock_.Advance(absl::Seconds(2));
  v1::PushAck second = core->Push(2, Gradient(0, 2, {3, 6, -1, 8}, 12));
  EXPECT_EQ(second.outcome(), v1::PUSH_APPLIED);
  EXPECT_EQ(second.version(), 1);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->request_id(), 2);
  EXPECT_EQ(next->version(), 1);
  EXPECT_EQ(next->mode(), v1::MODE_SYNC);
  EXPECT_EQ(next->held_seconds(), 2.0);
  // mean = (2*{1,2,3,4} + 2*{3,6,-1,8}) / 4 = {2,4,1,6}; p = 0 - 0.5 * mean.
  EXPECT_THAT(Unpack(next->values()), ElementsAre(-1.0f, -2.0f, -0.5f, -3.0f));
  EXPECT_THAT(core->Parameters(), ElementsAre(-1.0f, -2.0f, -0.5f, -3.0f));

  ShardStats stats = core->Stats();
  EXPECT_EQ(stats.version, 1);
  EXPECT_EQ(stats.updates, 1);
  EXPECT_EQ(stats.gradients.applied(), 2);
  EXPECT_EQ(stats.pending_pulls, 0);
  EXPECT_THAT(stats.barrier_waiting_for, ElementsAre(1, 2));
}

TEST_F(ShardCoreTest, SyncNormalisesUnequalBatchesBySampleCount) {
  std::unique_ptr<ShardCore> core = Make(v1::MODE_SYNC);
  core->Push(1, Gradient(0, 3, {1, 1, 1, 1}));
  core->Push(2, Gradient(0, 1, {5, -3, 1, 9}));
  // mean = (3*1 + 1*g2) / 4 = {2, 0, 1, 3}
  EXPECT_THAT(core->Parameters(), ElementsAre(-1.0f, 0.0f, -0.5f, -1.5f));
}

// Scenario: the coordinator decides generation 3 ({1, 2, 3}) a fraction of a millisecond after
// generation 2 ({1, 2}) on another thread, and 2 arrives last. The late one is ignored: applied,
// it would leave worker 3 a stranger here while the other shards wait on it.
TEST_F(ShardCoreTest, AMembershipOlderThanTheAppliedOneIsIgnoredUntilTheNextSession) {
  std::unique_ptr<ShardCore> core = Make(v1::MODE_SYNC);
  core->SetMembership(Members({1, 2, 3}, 4, 3));
  core->SetMembership(Members({1, 2}, 4, 2));
  // Worker 3 is still a member: its push counts, and the barrier waits on the other two.
  EXPECT_EQ(core->Push(3, Gradient(0, 2, {1, 1, 1, 1})).outcome(), v1::PUSH_APPLIED);
  EXPECT_THAT(core->Stats().barrier_waiting_for, ElementsAre(1, 2));
  // A restarted coordinator counts from the start again: its assignment starts a session.
  core->ResetMembership(Members({1, 2}, 4, 1));
  EXPECT_THAT(core->Stats().barrier_waiting_for, ElementsAre(1, 2));
  core->SetMembership(Members({1, 2, 4}, 4, 2));
  EXPECT_THAT(core->Stats().barrier_waiting_for, ElementsAre(1, 2, 4));
}

TEST_F(ShardCoreTest, MembershipChangeReleasesABarrierWaitingOnADepartedWorker) {
  std::unique_ptr<ShardCore> core = Make(v1::MODE_SYNC);
  int owner = 0;
  std::optional<v1::PullResponse> held;
  PullInto(*core, &owner, 5, 1, held);
  core->Push(1, Gradient(0, 2, {2, 4, 6, 8}));
  ASSERT_FALSE(held.has_value());

  core->SetMembership(Members({1}, 4, 2));
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->version(), 1);
  // Only worker 1's gradient, normalised by its own 2 samples.
  EXPECT_THAT(Unpack(held->values()), ElementsAre(-1.0f, -2.0f, -3.0f, -4.0f));
  EXPECT_THAT(core->Stats().barrier_waiting_for, ElementsAre(1));
  // The departed worker is now a stranger.
  v1::PushAck late = core->Push(2, Gradient(1, 2, {1, 1, 1, 1}));
  EXPECT_EQ(late.outcome(), v1::PUSH_REJECTED);
  EXPECT_EQ(late.code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
}

TEST_F(ShardCoreTest, MembershipChangeWithoutPushesAppliesNothing) {
  std::unique_ptr<ShardCore> core = Make(v1::MODE_SYNC);
  int owner = 0;
  std::optional<v1::PullResponse> held;
  PullInto(*core, &owner, 5, 1, held);
  core->SetMembership(Members({1}, 4, 2));
  EXPECT_FALSE(held.has_value());
  EXPECT_EQ(core->Stats().version, 0);
  EXPECT_EQ(core->Stats().updates, 0);
}

// A stale token in sync: its content is dropped (nothing applied), but it fills the member's
// place in the current barrier, and that member's next pull waits for the barrier's release
// whatever version it asks for (a member owing a barrier could deadlock two shards).
TEST_F(ShardCoreTest, StaleTokenInSyncIsDroppedAndFillsItsPlace) {
  std::unique_ptr<ShardCore> core = Make(v1::MODE_SYNC);
  core->Push(1, Gradient(0, 2, {1, 1, 1, 1}));
  core->Push(2, Gradient(0, 2, {1, 1, 1, 1}));
  ASSERT_EQ(core->Stats().version, 1);
  const std::vector<float> before = core->Parameters();
  v1::PushAck ack = core->Push(1, Gradient(0, 2, {9, 9, 9, 9}, 77));
  EXPECT_EQ(ack.outcome(), v1::PUSH_DROPPED);
  EXPECT_EQ(ack.code(), 0);
  EXPECT_EQ(ack.request_id(), 77);
  EXPECT_EQ(ack.staleness(), 1);
  EXPECT_EQ(ack.version(), 1);
  EXPECT_EQ(core->Stats().gradients.dropped(), 1);
  EXPECT_EQ(core->Stats().gradients.rejected(), 0);
  EXPECT_EQ(Bits(core->Parameters()), Bits(before));
  EXPECT_THAT(core->Stats().barrier_waiting_for, ElementsAre(2));

  int owner = 0;
  std::optional<v1::PullResponse> held;
  PullInto(*core, &owner, 5, /*min_version=*/1, held, /*worker=*/1);
  EXPECT_FALSE(held.has_value()) << "worker 1 filled barrier 1: its pull waits for version 2";
  core->Push(2, Gradient(1, 2, {2, 2, 2, 2}));
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->version(), 2);
}

// --- Push validation ------------------------------------------------------------------------

struct BadPush {
  std::string what;
  int32_t worker;
  v1::PushRequest push;
  absl::StatusCode code;
};

TEST_F(ShardCoreTest, InvalidPushesAreRejectedCountedAndNeverApplied) {
  std::unique_ptr<ShardCore> core = Make(v1::MODE_SYNC);
  // Move to version 1 with non-zero parameters, so "unchanged" means something.
  core->Push(1, Gradient(0, 2, {1, 2, 3, 4}));
  core->Push(2, Gradient(0, 2, {3, 6, -1, 8}));
  ASSERT_EQ(core->Stats().version, 1);
  const std::vector<float> before = core->Parameters();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();

  const std::vector<BadPush> cases = {
      {"short gradient", 1, Gradient(1, 2, {1, 2, 3}), absl::StatusCode::kInvalidArgument},
      {"long gradient", 1, Gradient(1, 2, {1, 2, 3, 4, 5}), absl::StatusCode::kInvalidArgument},
      {"empty gradient", 1, Gradient(1, 2, {}), absl::StatusCode::kInvalidArgument},
      {"NaN", 1, Gradient(1, 2, {1, nan, 3, 4}), absl::StatusCode::kInvalidArgument},
      {"+Inf", 1, Gradient(1, 2, {1, 2, 3, inf}), absl::StatusCode::kInvalidArgument},
      {"-Inf", 2, Gradient(1, 2, {-inf, 2, 3, 4}), absl::StatusCode::kInvalidArgument},
      {"zero samples", 1, Gradient(1, 0, {1, 2, 3, 4}), absl::StatusCode::kInvalidArgument},
      {"negative samples", 1, Gradient(1, -4, {1, 2, 3, 4}), absl::StatusCode::kInvalidArgument},
      {"negative token", 1, Gradient(-1, 2, {1, 2, 3, 4}), absl::StatusCode::kInvalidArgument},
      // Found by fuzzing: version - INT64_MIN overflowed while computing the staleness.
      {"most negative token", 1, Gradient(std::numeric_limits<int64_t>::min(), 2, {1, 2, 3, 4}),
       absl::StatusCode::kInvalidArgument},
      {"more samples than G", 1, Gradient(1, 5, {1, 2, 3, 4}), absl::StatusCode::kInvalidArgument},
      {"huge samples", 1, Gradient(1, std::numeric_limits<int64_t>::max(), {1, 2, 3, 4}),
       absl::StatusCode::kInvalidArgument},
      {"unknown worker", 99, Gradient(1, 2, {1, 2, 3, 4}), absl::StatusCode::kFailedPrecondition},
      {"token from the future", 1, Gradient(2, 2, {1, 2, 3, 4}), absl::StatusCode::kOutOfRange},
  };
  int64_t rejected = 0;
  for (const BadPush& c : cases) {
    SCOPED_TRACE(c.what);
    v1::PushRequest push = c.push;
    push.set_request_id(1000 + rejected);
    v1::PushAck ack = core->Push(c.worker, push);
    ++rejected;
    EXPECT_EQ(ack.outcome(), v1::PUSH_REJECTED);
    EXPECT_EQ(ack.code(), static_cast<int>(c.code)) << ack.message();
    EXPECT_FALSE(ack.message().empty());
    EXPECT_EQ(ack.request_id(), 1000 + rejected - 1);
    EXPECT_EQ(ack.version(), 1);
    ShardStats stats = core->Stats();
    EXPECT_EQ(stats.gradients.rejected(), rejected);
    EXPECT_EQ(stats.version, 1);
    EXPECT_THAT(stats.barrier_waiting_for, ElementsAre(1, 2)) << "nothing entered the barrier";
    EXPECT_EQ(Bits(core->Parameters()), Bits(before));
  }

  // Duplicate: worker 1's first gradient for version 1 counts, the second is refused.
  EXPECT_EQ(core->Push(1, Gradient(1, 2, {2, 2, 2, 2})).outcome(), v1::PUSH_APPLIED);
  v1::PushAck dup = core->Push(1, Gradient(1, 2, {100, 100, 100, 100}));
  EXPECT_EQ(dup.outcome(), v1::PUSH_REJECTED);
  EXPECT_EQ(dup.code(), static_cast<int>(absl::StatusCode::kAlreadyExists));
  EXPECT_EQ(core->Stats().gradients.rejected(), rejected + 1);
  EXPECT_EQ(Bits(core->Parameters()), Bits(before));

  // The next barrier sees exactly the two valid gradients: mean = (2*2 + 2*{0,4,-2,6}) / 4.
  EXPECT_EQ(core->Push(2, Gradient(1, 2, {0, 4, -2, 6})).version(), 2);
  EXPECT_THAT(core->Parameters(), ElementsAre(-1.5f, -3.5f, -0.5f, -5.0f));
  ShardStats stats = core->Stats();
  EXPECT_EQ(stats.gradients.applied(), 4);
  EXPECT_EQ(stats.gradients.dropped(), 0);
  EXPECT_EQ(stats.updates, 2);
}

// --- GBA and mode switches ------------------------------------------------------------------

TEST_F(ShardCoreTest, GbaPullsNeverWait) {
  std::unique_ptr<ShardCore> core = Make(v1::MODE_GBA);
  int owner = 0;
  std::optional<v1::PullResponse> response;
  PullInto(*core, &owner, 3, 100, response);
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->version(), 0);
  EXPECT_EQ(response->mode(), v1::MODE_GBA);
  EXPECT_EQ(response->held_seconds(), 0.0);
  EXPECT_EQ(core->Stats().pending_pulls, 0);
  EXPECT_THAT(core->Stats().barrier_waiting_for, IsEmpty());
}

TEST_F(ShardCoreTest, GbaAppliesOnceAGlobalBatchAccumulatesAndDecaysStaleGradients) {
  std::unique_ptr<ShardCore> core = Make(v1::MODE_GBA);
  // The same worker may push twice: no barrier.
  EXPECT_EQ(core->Push(1, Gradient(0, 2, {4, 4, 4, 4})).outcome(), v1::PUSH_APPLIED);
  EXPECT_EQ(core->Stats().version, 0);
  EXPECT_EQ(core->Push(1, Gradient(0, 2, {0, 4, 8, -4})).version(), 1);
  EXPECT_THAT(core->Parameters(), ElementsAre(-1.0f, -2.0f, -3.0f, 0.0f));
  // Two more updates by worker 2 (version 3); then a token-0 gradient is 3 versions stale.
  core->Push(2, Gradient(1, 4, {0, 0, 0, 0}));
  core->Push(2, Gradient(2, 4, {0, 0, 0, 0}));
  ASSERT_EQ(core->Stats().version, 3);
  // iota = ceil(N*B/G) + 1 = ceil(2*2/4) + 1 = 2, so tau = 3 gets w = 1/(3-2+1) = 1/2.
  v1::PushAck stale = core->Push(1, Gradient(0, 4, {2, 2, 2, 2}));
  EXPECT_EQ(stale.outcome(), v1::PUSH_DECAYED);
  EXPECT_EQ(stale.staleness(), 3);
  EXPECT_EQ(stale.weight(), 0.5);
  EXPECT_EQ(stale.version(), 4);
  // Normalised by the 4 samples, not by the weight: the step is halved. mean = 0.5*2 = 1.
  EXPECT_THAT(core->Parameters(), ElementsAre(-1.5f, -2.5f, -3.5f, -0.5f));
  ShardStats stats = core->Stats();
  EXPECT_EQ(stats.gradients.applied(), 4);
  EXPECT_EQ(stats.gradients.decayed(), 1);
  // Four fresh pushes and one three versions stale.
  EXPECT_EQ(stats.gradients.staleness_sum(), 3);
  EXPECT_EQ(stats.updates, 4);
}

TEST_F(ShardCoreTest, SwitchingSyncToGbaAnswersHeldPullsAndKeepsTheBuffer) {
  std::unique_ptr<ShardCore> core = Make(v1::MODE_SYNC);
  int owner = 0;
  std::optional<v1::PullResponse> held;
  PullInto(*core, &owner, 9, 1, held);
  core->Push(1, Gradient(0, 2, {2, 2, 2, 2}));
  ASSERT_FALSE(held.has_value());

  clock_.Advance(absl::Milliseconds(250));
  core->SetMode(v1::MODE_GBA);
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->request_id(), 9);
  EXPECT_EQ(held->version(), 0) << "sync->gba keeps the version";
  EXPECT_EQ(held->mode(), v1::MODE_GBA);
  EXPECT_EQ(held->held_seconds(), 0.25);
  EXPECT_THAT(Unpack(held->values()), ElementsAre(0.0f, 0.0f, 0.0f, 0.0f));
  EXPECT_EQ(core->Stats().pending_pulls, 0);
  EXPECT_EQ(core->Stats().mode, v1::MODE_GBA);

  // The barrier's 2 samples became the GBA buffer: 2 more complete G = 4.
  EXPECT_EQ(core->Push(2, Gradient(0, 2, {6, 6, 6, 6})).version(), 1);
  EXPECT_THAT(core->Parameters(), ElementsAre(-2.0f, -2.0f, -2.0f, -2.0f));
  EXPECT_EQ(core->Stats().updates, 1);
}

TEST_F(ShardCoreTest, SwitchingGbaToSyncFlushesThePartialBufferOnce) {
  std::unique_ptr<ShardCore> core = Make(v1::MODE_GBA);
  core->Push(1, Gradient(0, 2, {2, 4, 6, 8}));
  ASSERT_EQ(core->Stats().version, 0);

  core->SetMode(v1::MODE_SYNC);
  ShardStats stats = core->Stats();
  EXPECT_EQ(stats.version, 1);
  EXPECT_EQ(stats.updates, 1);
  EXPECT_EQ(stats.mode, v1::MODE_SYNC);
  // Normalised by its own 2 samples.
  EXPECT_THAT(core->Parameters(), ElementsAre(-1.0f, -2.0f, -3.0f, -4.0f));

  core->SetMode(v1::MODE_SYNC);  // no-op: nothing to flush twice
  EXPECT_EQ(core->Stats().updates, 1);

  // The next barrier is on version 1.
  int owner = 0;
  std::optional<v1::PullResponse> held;
  PullInto(*core, &owner, 1, 2, held);
  EXPECT_FALSE(held.has_value());
  core->Push(1, Gradient(1, 2, {2, 2, 2, 2}));
  EXPECT_EQ(core->Push(1, Gradient(0, 2, {1, 1, 1, 1})).outcome(), v1::PUSH_DROPPED);
  core->Push(2, Gradient(1, 2, {2, 2, 2, 2}));
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->version(), 2);
  EXPECT_THAT(Unpack(held->values()), ElementsAre(-2.0f, -3.0f, -4.0f, -5.0f));
}

TEST_F(ShardCoreTest, SwitchingGbaToSyncWithAnEmptyBufferKeepsTheVersion) {
  std::unique_ptr<ShardCore> core = Make(v1::MODE_GBA);
  core->SetMode(v1::MODE_SYNC);
  EXPECT_EQ(core->Stats().version, 0);
  EXPECT_EQ(core->Stats().updates, 0);
}

TEST_F(ShardCoreTest, SetModeIgnoresModesAShardCannotRun) {
  std::unique_ptr<ShardCore> core = Make(v1::MODE_SYNC);
  core->SetMode(v1::MODE_AUTO);
  core->SetMode(v1::MODE_UNSPECIFIED);
  EXPECT_EQ(core->Stats().mode, v1::MODE_SYNC);
}

v1::SetMode ModeCommand(v1::Mode mode, bool keep, bool roll_back) {
  v1::SetMode command;
  command.set_mode(mode);
  command.set_keep_rollback_point(keep);
  command.set_roll_back(roll_back);
  return command;
}

// The LossGuard's round trip: entering gba keeps the state after the switch; leaving with
// roll_back returns the parameters and the optimizer's step count to it, moves the version on by
// one (so a gradient computed on the abandoned parameters is stale) and answers the pulls waiting
// for that version with the restored parameters.
TEST_F(ShardCoreTest, ARollBackReturnsToTheStateKeptWhenGbaWasEntered) {
  std::unique_ptr<ShardCore> core = Make(v1::MODE_SYNC);
  core->Push(1, Gradient(0, 2, {2, 2, 2, 2}));
  core->Push(2, Gradient(0, 2, {2, 2, 2, 2}));
  ASSERT_THAT(core->Parameters(), ElementsAre(-1.0f, -1.0f, -1.0f, -1.0f));

  ASSERT_TRUE(core->ApplyModeCommand(ModeCommand(v1::MODE_GBA, true, false)).ok());
  EXPECT_TRUE(core->has_rollback_point());
  EXPECT_EQ(core->Push(1, Gradient(1, 4, {8, 8, 8, 8})).version(), 2);
  EXPECT_EQ(core->Push(2, Gradient(2, 4, {8, 8, 8, 8})).version(), 3);
  ASSERT_THAT(core->Parameters(), ElementsAre(-9.0f, -9.0f, -9.0f, -9.0f));

  int owner = 0;
  std::optional<v1::PullResponse> waiting;
  ASSERT_TRUE(core->ApplyModeCommand(ModeCommand(v1::MODE_SYNC, false, true)).ok());
  EXPECT_FALSE(core->has_rollback_point());
  EXPECT_THAT(core->Parameters(), ElementsAre(-1.0f, -1.0f, -1.0f, -1.0f));
  const ShardStats stats = core->Stats();
  EXPECT_EQ(stats.mode, v1::MODE_SYNC);
  EXPECT_EQ(stats.version, 4);
  EXPECT_EQ(stats.updates, 3) << "the shard counts every update it applied";
  EXPECT_EQ(core->Snapshot().optimizer_steps(), 1) << "the abandoned updates are undone";
  PullInto(*core, &owner, 5, 4, waiting);
  ASSERT_TRUE(waiting.has_value());
  EXPECT_EQ(waiting->version(), 4);
  EXPECT_THAT(Unpack(waiting->values()), ElementsAre(-1.0f, -1.0f, -1.0f, -1.0f));
  // A gradient computed on the abandoned parameters is stale in sync.
  EXPECT_EQ(core->Push(1, Gradient(3, 2, {1, 1, 1, 1})).outcome(), v1::PUSH_DROPPED);
}

TEST_F(ShardCoreTest, ARollBackWithoutAKeptPointFailsButStillSwitches) {
  std::unique_ptr<ShardCore> core = Make(v1::MODE_GBA);
  const absl::Status rolled = core->ApplyModeCommand(ModeCommand(v1::MODE_SYNC, false, true));
  EXPECT_EQ(rolled.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(core->Stats().mode, v1::MODE_SYNC);
  EXPECT_EQ(core->Stats().version, 0);

  // A switch without roll_back drops a kept point: it cannot be returned to later.
  ASSERT_TRUE(core->ApplyModeCommand(ModeCommand(v1::MODE_GBA, true, false)).ok());
  ASSERT_TRUE(core->ApplyModeCommand(ModeCommand(v1::MODE_SYNC, false, false)).ok());
  EXPECT_FALSE(core->has_rollback_point());
  EXPECT_EQ(core->ApplyModeCommand(ModeCommand(v1::MODE_GBA, false, true)).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(ShardCoreTest, CancelPullsDropsOnlyThatOwnersCallbacks) {
  std::unique_ptr<ShardCore> core = Make(v1::MODE_SYNC);
  int gone = 0, stays = 0;
  std::optional<v1::PullResponse> a1, a2, b;
  PullInto(*core, &gone, 1, 1, a1);
  PullInto(*core, &gone, 2, 1, a2);
  PullInto(*core, &stays, 3, 1, b);
  EXPECT_EQ(core->Stats().pending_pulls, 3);
  core->CancelPulls(&gone);
  EXPECT_EQ(core->Stats().pending_pulls, 1);
  core->Push(1, Gradient(0, 2, {0, 0, 0, 0}));
  core->Push(2, Gradient(0, 2, {0, 0, 0, 0}));
  EXPECT_FALSE(a1.has_value());
  EXPECT_FALSE(a2.has_value());
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->request_id(), 3);
  EXPECT_EQ(b->version(), 1);
}

TEST_F(ShardCoreTest, AsyncAppliesEveryGradient) {
  std::unique_ptr<ShardCore> core = Make(v1::MODE_ASYNC);
  EXPECT_EQ(core->Push(1, Gradient(0, 1, {2, 0, 0, 0})).version(), 1);
  EXPECT_EQ(core->Push(1, Gradient(0, 3, {0, 2, 0, 0})).version(), 2);
  EXPECT_THAT(core->Parameters(), ElementsAre(-1.0f, -1.0f, 0.0f, 0.0f));
}

// A bfloat16 push (DenseEncoding) is unpacked from 2 bytes a value into the same float32
// aggregation; one of the wrong length is rejected whole, as a float32 one would be.
TEST_F(ShardCoreTest, ABfloat16PushIsAppliedAndAWrongSizedOneRejected) {
  std::unique_ptr<ShardCore> core = Make(v1::MODE_ASYNC);
  v1::PushRequest push = Gradient(0, 1, {});
  push.set_encoding(v1::DENSE_BFLOAT16);
  push.set_gradient(tensor::PackBfloat16(std::vector<float>{2, 0, 0, 0}).substr(0, 6));
  const v1::PushAck rejected = core->Push(1, push);
  EXPECT_EQ(rejected.outcome(), v1::PUSH_REJECTED);
  EXPECT_EQ(rejected.code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(core->Parameters(), ElementsAre(0.0f, 0.0f, 0.0f, 0.0f));
  push.set_gradient(tensor::PackBfloat16(std::vector<float>{2, 0, -4, 0}));
  EXPECT_EQ(core->Push(1, push).version(), 1);
  EXPECT_THAT(core->Parameters(), ElementsAre(-1.0f, 0.0f, 2.0f, 0.0f));
}

// --- Metrics --------------------------------------------------------------------------------

TEST_F(ShardCoreTest, CountsOutcomesAndRejectionReasonsInMetrics) {
  prometheus::Registry registry;
  ShardMetrics metrics(registry, 1);
  std::unique_ptr<ShardCore> core = Make(v1::MODE_SYNC, &metrics);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  core->Push(1, Gradient(0, 2, {1, 1, 1, 1}));
  core->Push(2, Gradient(0, 2, {1, 1, 1, 1}));
  core->Push(1, Gradient(1, 2, {1, nan, 1, 1}));  // non_finite
  core->Push(1, Gradient(1, 2, {1, 1}));          // wrong_shape
  core->Push(1, Gradient(1, 0, {1, 1, 1, 1}));    // bad_samples
  core->Push(7, Gradient(1, 2, {1, 1, 1, 1}));    // not_member
  core->Push(1, Gradient(5, 2, {1, 1, 1, 1}));    // future_token
  core->Push(1, Gradient(1, 2, {1, 1, 1, 1}));    // applied
  core->Push(1, Gradient(1, 2, {1, 1, 1, 1}));    // duplicate
  core->Push(2, Gradient(0, 2, {1, 1, 1, 1}));    // dropped

  auto gradients = [&](const char* outcome) {
    return MetricValue(registry, "syncopate_shard_gradients_total",
                       {{"shard", "1"}, {"outcome", outcome}});
  };
  EXPECT_EQ(gradients("applied"), 3.0);
  EXPECT_EQ(gradients("decayed"), 0.0);
  EXPECT_EQ(gradients("dropped"), 1.0);
  EXPECT_EQ(gradients("rejected"), 6.0);
  EXPECT_EQ(core->Stats().gradients.rejected(), 6);
  for (const char* reason :
       {"non_finite", "wrong_shape", "bad_samples", "not_member", "future_token", "duplicate"}) {
    EXPECT_EQ(MetricValue(registry, "syncopate_shard_rejections_total",
                          {{"shard", "1"}, {"reason", reason}}),
              1.0)
        << reason;
  }
  // Two updates: the dropped gradient filled worker 2's place, so barrier 1 released with worker
  // 1's gradient alone.
  EXPECT_EQ(MetricValue(registry, "syncopate_shard_updates_total", {{"shard", "1"}}), 2.0);
  EXPECT_EQ(MetricValue(registry, "syncopate_shard_version", {{"shard", "1"}}), 2.0);
  EXPECT_EQ(MetricValue(registry, "syncopate_shard_mode", {{"shard", "1"}, {"mode", "sync"}}), 1.0);
  EXPECT_EQ(MetricValue(registry, "syncopate_shard_parameter_bytes", {{"shard", "1"}}), 16.0);
  // Staleness is observed for the 4 non-rejected pushes only.
  EXPECT_EQ(MetricValue(registry, "syncopate_shard_staleness", {{"shard", "1"}}), 4.0);

  core->SetMode(v1::MODE_GBA);
  EXPECT_EQ(MetricValue(registry, "syncopate_shard_mode", {{"shard", "1"}, {"mode", "sync"}}), 0.0);
  EXPECT_EQ(MetricValue(registry, "syncopate_shard_mode", {{"shard", "1"}, {"mode", "gba"}}), 1.0);
}

// The size limit applies to the whole message and comes first: an oversize push is refused as
// "oversize" (not as whatever else is wrong with it) and nothing else is looked at.
TEST_F(ShardCoreTest, OversizePushIsRejectedAsResourceExhaustedAndCounted) {
  prometheus::Registry registry;
  ShardMetrics metrics(registry, 1);
  absl::StatusOr<std::unique_ptr<ShardCore>> created =
      ShardCore::Create(Assignment(v1::MODE_SYNC), &clock_, &metrics, /*max_push_bytes=*/64);
  ASSERT_TRUE(created.ok()) << created.status();
  ShardCore& core = **created;
  core.Push(1, Gradient(0, 2, {1, 2, 3, 4}));
  core.Push(2, Gradient(0, 2, {3, 6, -1, 8}));
  ASSERT_EQ(core.Stats().version, 1);
  const std::vector<float> before = core.Parameters();

  v1::PushAck ack = core.Push(1, Gradient(1, 2, std::vector<float>(20, 1.0f), 9));
  EXPECT_EQ(ack.outcome(), v1::PUSH_REJECTED);
  EXPECT_EQ(ack.code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(ack.message(), ::testing::HasSubstr("limit of 64 bytes"));
  EXPECT_EQ(ack.request_id(), 9);
  EXPECT_EQ(ack.version(), 1);
  EXPECT_EQ(Bits(core.Parameters()), Bits(before));
  EXPECT_THAT(core.Stats().barrier_waiting_for, ElementsAre(1, 2)) << "nothing entered the barrier";
  EXPECT_EQ(core.Stats().gradients.rejected(), 1);
  EXPECT_EQ(MetricValue(registry, "syncopate_shard_rejections_total",
                        {{"shard", "1"}, {"reason", "oversize"}}),
            1.0);
  EXPECT_EQ(MetricValue(registry, "syncopate_shard_rejections_total",
                        {{"shard", "1"}, {"reason", "wrong_shape"}}),
            0.0);
  // A push within the limit is served as before.
  EXPECT_EQ(core.Push(1, Gradient(1, 2, {1, 1, 1, 1})).outcome(), v1::PUSH_APPLIED);
  EXPECT_EQ(ShardCore::Create(Assignment(v1::MODE_SYNC), &clock_, nullptr, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// --- A module's buffers (ADR 0018) ---------------------------------------------------------

// "b" as a buffer: with momentum 0.9 the parameters "w" move by the optimizer (-lr * mean g),
// the buffer by the mean of the workers' changes (no learning rate, no velocity), in sync and gba.
TEST_F(ShardCoreTest, ABufferMovesByTheMeanChangeNotByTheOptimizer) {
  for (const v1::Mode mode : {v1::MODE_SYNC, v1::MODE_GBA}) {
    v1::ShardAssignment assignment = Assignment(mode);
    assignment.mutable_job()->mutable_optimizer()->set_kind(v1::OptimizerSpec::MOMENTUM);
    assignment.mutable_job()->mutable_optimizer()->set_momentum(0.9f);
    assignment.mutable_partition()->mutable_slices(1)->set_buffer(true);
    auto core = ShardCore::Create(assignment, &clock_, nullptr);
    ASSERT_TRUE(core.ok()) << core.status();
    // Worker 1's step moved the buffer by +1.0, worker 2's by +3.0: the mean change is +2.
    EXPECT_EQ((*core)->Push(1, Gradient(0, 2, {1, 0, 0, 1.0f})).outcome(), v1::PUSH_APPLIED);
    EXPECT_EQ((*core)->Push(2, Gradient(0, 2, {1, 0, 0, 3.0f})).outcome(), v1::PUSH_APPLIED);
    EXPECT_THAT((*core)->Parameters(), ElementsAre(-0.5f, 0.0f, 0.0f, 2.0f)) << v1::Mode_Name(mode);
    // The second update: the parameter's velocity carries it further (-0.5 - 0.95), the buffer
    // only its own new mean change (+0.5), however many updates came before.
    EXPECT_EQ((*core)->Push(1, Gradient(1, 2, {1, 0, 0, 0.5f})).outcome(), v1::PUSH_APPLIED);
    EXPECT_EQ((*core)->Push(2, Gradient(1, 2, {1, 0, 0, 0.5f})).outcome(), v1::PUSH_APPLIED);
    EXPECT_THAT((*core)->Parameters(),
                ElementsAre(::testing::FloatEq(-1.45f), 0.0f, 0.0f, ::testing::FloatEq(2.5f)))
        << v1::Mode_Name(mode);
    // Its optimizer state stays zero (checkpointed as such).
    const v1::ShardCheckpoint snapshot = (*core)->Snapshot();
    ASSERT_EQ(snapshot.slices(1).optimizer_state_size(), 1);
    EXPECT_THAT(Unpack(snapshot.slices(1).optimizer_state(0)), ElementsAre(0.0f));
  }
}

}  // namespace
}  // namespace syncopate::shard
