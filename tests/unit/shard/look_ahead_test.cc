// Look-ahead pulls (ADR 0007), end to end through the real ShardCore: its aggregator predicts
// each worker's staleness, its optimizer extrapolates gba pulls, its pushes are aggregated as in
// production. The model is one parameter on the quadratic f(x) = (x - 1)^2 / 2 (curvature 1, so
// the learning rate is lr * curvature), with momentum 0.9 (Adam: beta1 0.9).
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

enum class Rule { kHeavyBall, kNesterov, kAdam };

// Adam with an epsilon far above every gradient the runs see (|g| <= ~1 while they converge):
// m̂/(√v̂ + eps) = m̂/eps to within |g|/eps, so Adam is heavy ball in its EMA form,
// m = b1·m + (1 − b1)·g, x −= (lr/eps)·m̂; with v_pt = m/(1 − b1) that is PyTorch's heavy ball
// with momentum b1 and learning rate (lr/eps)·(1 − b1), bias correction aside (→ 1). So the
// heavy-ball limits apply to a = (lr/eps)·(1 − b1), and Adam's look-ahead (the same geometric
// sum in b1, with m/(√v + eps)) is the heavy-ball one. The bias correction folds √(1 − b2^t)
// into the step (update_rule.cc), which with the default b2 = 0.999 stays well below 1 for
// thousands of updates (0.88 at t = 1500) and would move the limits; b2 = 0.5 makes it 1 after
// a few dozen.
constexpr double kAdamEpsilon = 1e4;
constexpr double kAdamBeta2 = 0.5;

// The learning rate that gives the recurrence's a (lr × curvature, curvature 1) for `rule`.
double LearningRateFor(Rule rule, double a) {
  return rule == Rule::kAdam ? a * kAdamEpsilon / (1 - kMomentum) : a;
}

v1::ShardAssignment Quadratic(v1::Mode mode, double a, Rule rule) {
  v1::ShardAssignment assignment;
  v1::JobSpec& job = *assignment.mutable_job();
  v1::OptimizerSpec& optimizer = *job.mutable_optimizer();
  optimizer.set_learning_rate(static_cast<float>(LearningRateFor(rule, a)));
  if (rule == Rule::kAdam) {
    optimizer.set_kind(v1::OptimizerSpec::ADAM);
    optimizer.set_beta1(static_cast<float>(kMomentum));
    optimizer.set_beta2(static_cast<float>(kAdamBeta2));
    optimizer.set_epsilon(static_cast<float>(kAdamEpsilon));
  } else {
    optimizer.set_kind(v1::OptimizerSpec::MOMENTUM);
    optimizer.set_momentum(static_cast<float>(kMomentum));
    optimizer.set_nesterov(rule == Rule::kNesterov);
  }
  job.set_global_batch(2);
  job.set_num_workers(2);
  job.set_num_shards(1);
  job.set_mode(mode);
  v1::ShardPartition& p = *assignment.mutable_partition();
  p.set_shard_id(0);
  p.set_flat_begin(0);
  p.set_flat_end(1);
  v1::TensorSlice* slice = p.add_slices();
  slice->set_tensor("x");
  slice->set_length(1);
  slice->mutable_init()->set_kind(v1::Initializer::ZEROS);
  assignment.mutable_membership()->add_worker_ids(1);
  assignment.mutable_membership()->add_worker_ids(2);
  assignment.mutable_membership()->set_local_batch(1);
  assignment.set_mode(mode);
  return assignment;
}

struct Pulled {
  int64_t version;
  float x;
  double look_ahead;
};

Pulled Pull(ShardCore& core, int32_t worker) {
  std::optional<v1::PullResponse> response;
  EXPECT_TRUE(core.Pull({nullptr, worker, true}, v1::PullRequest(),
                        [&](PullReply r) { response = std::move(r).ToMessage(); })
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
double Error(v1::Mode mode, double a, Rule rule, int updates = 1500,
             double* mean_look_ahead = nullptr, bool plain = false) {
  FakeClock clock;
  auto core = ShardCore::Create(Quadratic(mode, a, rule), &clock, nullptr);
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
  EXPECT_LT(Error(v1::MODE_SYNC, 1.0, Rule::kHeavyBall, 1500, &look_ahead), 1e-4);
  EXPECT_EQ(look_ahead, 0);  // d = 0 in sync: pulls see the parameters as they are
}

TEST(LookAhead, HeavyBallPlainGbaDivergesWhereLookAheadConverges) {
  // Below the plain limit (0.2) both converge.
  EXPECT_LT(Error(v1::MODE_GBA, 0.15, Rule::kHeavyBall, 1500, nullptr, /*plain=*/true), 1e-3);
  EXPECT_LT(Error(v1::MODE_GBA, 0.15, Rule::kHeavyBall), 1e-3);
  // Just above the plain limit, plain gba diverges...
  EXPECT_GT(Error(v1::MODE_GBA, 0.22, Rule::kHeavyBall, 1500, nullptr, /*plain=*/true), 1.0);
  // ...and up to look-ahead's limit (0.385) the extrapolated pulls converge.
  double look_ahead = 0;
  EXPECT_LT(Error(v1::MODE_GBA, 0.35, Rule::kHeavyBall, 1500, &look_ahead), 1e-3);
  EXPECT_NEAR(look_ahead, 1.0, 0.01);  // the predicted staleness is the scripted one
  // Above it look-ahead diverges too: the extrapolation ignores the gradients still to come.
  EXPECT_GT(Error(v1::MODE_GBA, 0.42, Rule::kHeavyBall), 1.0);
}

// Nesterov (PyTorch's form) already takes gradients at a look-ahead point: its pulls are not
// extrapolated, and the same scripted staleness leaves it stable to a = 0.77 (update_rule.h).
TEST(LookAhead, NesterovPullsAreNotExtrapolated) {
  double look_ahead = -1;
  EXPECT_LT(Error(v1::MODE_GBA, 0.7, Rule::kNesterov, 3000, &look_ahead), 1e-3);
  EXPECT_EQ(look_ahead, 0);
  EXPECT_GT(Error(v1::MODE_GBA, 0.85, Rule::kNesterov), 1.0);
}

// Adam with a dominant epsilon is heavy ball in EMA form (see kAdamEpsilon): the same limits hold
// for a = (lr/eps)(1 − b1), and its look-ahead lifts them the same way.
TEST(LookAhead, AdamPlainGbaDivergesWhereLookAheadConverges) {
  EXPECT_LT(Error(v1::MODE_SYNC, 1.0, Rule::kAdam), 1e-3);
  EXPECT_LT(Error(v1::MODE_GBA, 0.15, Rule::kAdam, 1500, nullptr, /*plain=*/true), 1e-3);
  EXPECT_GT(Error(v1::MODE_GBA, 0.22, Rule::kAdam, 1500, nullptr, /*plain=*/true), 1.0);
  double look_ahead = 0;
  EXPECT_LT(Error(v1::MODE_GBA, 0.35, Rule::kAdam, 1500, &look_ahead), 1e-3);
  EXPECT_NEAR(look_ahead, 1.0, 0.01);
  EXPECT_GT(Error(v1::MODE_GBA, 0.42, Rule::kAdam), 1.0);
}

}  // namespace
}  // namespace syncopate::shard
