// Look-ahead pulls (ADR 0007), end to end through the real ShardCore: its aggregator predicts
// each worker's staleness, its optimizer extrapolates gba pulls, its pushes are aggregated as in
// production. The model is one parameter on the quadratic f(x) = (x - 1)^2 / 2 (curvature 1, so
// the learning rate is lr * curvature), with momentum 0.9.
//
// Scripted staleness: G = 2, two workers of local batch 1; worker 1 always pushes a gradient one
// update old (computed on the version before), worker 2 a fresh one, so a fraction p = 1/2 of
// every global batch is one version stale. Heavy ball's recurrence is then
//   x+ = x + mu (x - x-) - a ((1 - p) x + p x-),
// stable iff mu + a p < 1 (Jury's criterion): a < (1 - mu) / p = 0.2, against 2 (1 + mu) = 3.8
// in sync. With look-ahead the stale gradient is taken at x - a mu v; the same analysis gives
// a < 0.385 (the spectral radius of the 3x3 companion matrix crosses 1 there).
#include <cmath>
#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "libs/common/clock.h"
#include "libs/shard/shard_core.h"
#include "libs/tensor/packed.h"

namespace syncopate::shard {
namespace {

constexpr double kMomentum = 0.9;

v1::ShardAssignment Quadratic(v1::Mode mode, double learning_rate, bool nesterov) {
  v1::ShardAssignment a;
  v1::JobSpec& job = *a.mutable_job();
  job.mutable_optimizer()->set_kind(v1::OptimizerSpec::MOMENTUM);
  job.mutable_optimizer()->set_learning_rate(static_cast<float>(learning_rate));
  job.mutable_optimizer()->set_momentum(static_cast<float>(kMomentum));
  job.mutable_optimizer()->set_nesterov(nesterov);
  job.set_global_batch(2);
  job.set_num_workers(2);
  job.set_num_shards(1);
  job.set_mode(mode);
  v1::ShardPartition& p = *a.mutable_partition();
  p.set_shard_id(0);
  p.set_flat_begin(0);
  p.set_flat_end(1);
  v1::TensorSlice* slice = p.add_slices();
  slice->set_tensor("x");
  slice->set_length(1);
  slice->mutable_init()->set_kind(v1::Initializer::ZEROS);
  a.mutable_membership()->add_worker_ids(1);
  a.mutable_membership()->add_worker_ids(2);
  a.mutable_membership()->set_local_batch(1);
  a.set_mode(mode);
  return a;
}

struct Pulled {
  int64_t version;
  float x;
  double look_ahead;
};

Pulled Pull(ShardCore& core, int32_t worker) {
  std::optional<v1::PullResponse> response;
  EXPECT_TRUE(core.Pull({nullptr, worker, true}, v1::PullRequest(),
                        [&](v1::PullResponse r) { response = std::move(r); })
                  .ok());
  std::vector<float> x(1);
  EXPECT_TRUE(tensor::UnpackFloatsInto(response->values(), x).ok());
  return {response->version(), x[0], response->look_ahead_updates()};
}

void Push(ShardCore& core, int32_t worker, const Pulled& from) {
  v1::PushRequest push;
  push.set_token(from.version);
  push.set_samples(1);
  push.set_gradient(tensor::PackFloats(std::vector<float>{from.x - 1.0f}));  // f'(x)
  const v1::PushAck ack = core.Push(worker, push);
  EXPECT_NE(ack.outcome(), v1::PUSH_REJECTED) << ack.message();
}

// What a worker without look-ahead would read: the parameters as they are.
Pulled Raw(const ShardCore& core) { return {core.Stats().version, core.Parameters()[0], 0}; }

// |x - 1| after `updates` updates of the scripted gba run (or of sync: both workers fresh);
// `plain` makes the stale worker read the raw parameters instead of its pull's.
double Error(v1::Mode mode, double learning_rate, bool nesterov, int updates = 1500,
             double* mean_look_ahead = nullptr, bool plain = false) {
  FakeClock clock;
  auto core = ShardCore::Create(Quadratic(mode, learning_rate, nesterov), &clock, nullptr);
  EXPECT_TRUE(core.ok()) << core.status();
  Pulled stale = Pull(**core, 1);
  double look_ahead = 0;
  for (int k = 0; k < updates; ++k) {
    Push(**core, 1, stale);      // computed on the version before (on the first update: this one)
    if (mode == v1::MODE_GBA) {  // worker 1 reads before the update...
      stale = Pull(**core, 1);
      if (plain) stale = Raw(**core);
    }
    look_ahead += stale.look_ahead;
    Push(**core, 2, Pull(**core, 2));  // ...worker 2's fresh gradient completes it
    if (mode == v1::MODE_SYNC) stale = Pull(**core, 1);
    const float x = (*core)->Parameters()[0];
    if (!std::isfinite(x) || std::abs(x) > 1e6) return INFINITY;
  }
  if (mean_look_ahead != nullptr) *mean_look_ahead = look_ahead / updates;
  return std::abs((*core)->Parameters()[0] - 1.0);
}

TEST(LookAhead, SyncIsUnchangedAndStableFarBeyondTheGbaLimits) {
  double look_ahead = -1;
  EXPECT_LT(Error(v1::MODE_SYNC, 1.0, /*nesterov=*/false, 1500, &look_ahead), 1e-4);
  EXPECT_EQ(look_ahead, 0);  // d = 0 in sync: pulls see the parameters as they are
}

TEST(LookAhead, HeavyBallPlainGbaDivergesWhereLookAheadConverges) {
  constexpr bool kHeavyBall = false;
  // Below the plain limit (0.2) both converge.
  EXPECT_LT(Error(v1::MODE_GBA, 0.15, kHeavyBall, 1500, nullptr, /*plain=*/true), 1e-3);
  EXPECT_LT(Error(v1::MODE_GBA, 0.15, kHeavyBall), 1e-3);
  // Just above the plain limit, plain gba diverges...
  EXPECT_GT(Error(v1::MODE_GBA, 0.22, kHeavyBall, 1500, nullptr, /*plain=*/true), 1.0);
  // ...and up to look-ahead's limit (0.385) the extrapolated pulls converge.
  double look_ahead = 0;
  EXPECT_LT(Error(v1::MODE_GBA, 0.35, kHeavyBall, 1500, &look_ahead), 1e-3);
  EXPECT_NEAR(look_ahead, 1.0, 0.01);  // the predicted staleness is the scripted one
  // Above it look-ahead diverges too: the extrapolation ignores the gradients still to come.
  EXPECT_GT(Error(v1::MODE_GBA, 0.42, kHeavyBall), 1.0);
}

// Nesterov (PyTorch's form) already takes gradients at a look-ahead point: its pulls are not
// extrapolated, and the same scripted staleness leaves it stable to a = 0.77 (update_rule.h).
TEST(LookAhead, NesterovPullsAreNotExtrapolated) {
  double look_ahead = -1;
  EXPECT_LT(Error(v1::MODE_GBA, 0.7, /*nesterov=*/true, 3000, &look_ahead), 1e-3);
  EXPECT_EQ(look_ahead, 0);
  EXPECT_GT(Error(v1::MODE_GBA, 0.85, /*nesterov=*/true), 1.0);
}

}  // namespace
}  // namespace syncopate::shard
