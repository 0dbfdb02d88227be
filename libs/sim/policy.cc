#include "libs/sim/policy.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "libs/common/mode_rules.h"

namespace syncopate::sim {

// Why lr · b/G, and why momentum stays.
//
// The shard's async mode applies each push as one update of its own b samples (the schedule
// advances by b/G: ADR 0007). At the rate tuned for G, every b = G/N samples move the
// parameters as far as a whole global batch should: N times sync's step per sample. The default
// MLP diverges to chance from N = 16 on (docs/measurements/sim-policies-at-scale.md). An async PS
// user scales the rate with the batch: the linear scaling rule (Goyal et al. 2017, "Accurate, Large
// Minibatch SGD", §2.1: batch k times larger, rate k times larger), here from G down to b.
//
// Momentum and Nesterov are kept as the job has them: that is the linear scaling rule as
// written, and what the baseline stands for (the job's hyperparameters, only the rate scaled).
// - Goyal et al. keep momentum. Their "momentum correction" is for the form v = μv + lr·g, where
//   the rate sits inside the velocity; our optimizers use PyTorch's (v = μv + g; x -= lr·v,
//   Nesterov x -= lr·(g + μv)), with the rate outside, so there is nothing to correct.
// - With it the effective step per sample equals sync's: under a steady gradient a momentum
//   update moves lr/(1 - μ)·g, and N updates of lr·(b/G)/(1 - μ) make one of sync's
//   lr/(1 - μ) per G samples.
// - It is not the best async: asynchrony adds implicit momentum of about 1 - 1/N per update
//   (Mitliagkas et al. 2016, "Asynchrony begets momentum"), on top of the explicit one. Measured
//   in docs/measurements/sim-policies-at-scale.md (N = 64, G = 1,024, 3 seeds): plain SGD at the
//   same lr/(1 - μ) (10·lr·b/G, no momentum) ends +0.64 [+0.15, +1.13] points above async-scaled;
//   scaling 1 - μ with the batch as well (the SDE scaling rule, Malladi et al. 2022) ends 4.3
//   points below. So gba's margin over async-scaled is an upper bound on its margin over a tuned
//   async.
// The schedule (warmup, cosine) is keyed on global batches, so it reads the same per sample in
// every policy, and the look-ahead of gba pulls does not apply to async.
float FairAsyncLearningRate(const v1::JobSpec& job) {
  if (job.num_workers() <= 0) return job.optimizer().learning_rate();
  // b/G with b = G/N, the mean of job::LocalBatchShare's split: exactly 1/N.
  return job.optimizer().learning_rate() / static_cast<float>(job.num_workers());
}

absl::StatusOr<v1::JobSpec> JobForPolicy(const v1::JobSpec& job, absl::string_view policy) {
  v1::JobSpec out = job;
  if (policy == kAsyncScaled) {
    if (job.num_workers() <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(kAsyncScaled, " needs the job's num_workers (the rate is lr / N)"));
    }
    out.set_mode(v1::MODE_ASYNC);
    out.mutable_optimizer()->set_learning_rate(FairAsyncLearningRate(job));
    return out;
  }
  absl::StatusOr<v1::Mode> mode = ParseMode(policy);
  if (!mode.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown policy '", policy, "' (expected ",
                                                   ModeNameChoices({kAsyncScaled}), ")"));
  }
  out.set_mode(*mode);
  return out;
}

}  // namespace syncopate::sim
