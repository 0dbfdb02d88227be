// GradientStatistics: what staleness would cost this shard, measured from the synchronous
// updates it applies (no model of the network, no constant of the job). It produces the
// StalenessCost (libs/straggler/staleness.h) the coordinator's ModePolicy prices gba with.
//
// Per sync version k it sees the fresh pushes g_i (means over b_i samples, all computed on the
// same parameters) and the update's mean ḡ_k over B_k = Σ b_i samples, and keeps:
//   S   = tr Σ, the per-sample gradient noise, from the pushes' spread around their mean:
//         E[mean|g_i|² − |ḡ_k|²] = S·(mean(1/b_i) − 1/B_k) — the unbiased "simple noise scale"
//         estimator of McCandlish et al. 2018 (An Empirical Model of Large-Batch Training,
//         App. A), combined over versions as a ratio of sums;
//   v_k = μ·v_{k−1} + ḡ_k, the optimizer's velocity (μ = UpdateRule::velocity_decay), and
//   E|v|², E|v_k − v_{k−1}|² − S·2/((1+μ)·B): the velocity's size and its per-update change
//         with the noise removed (the batches' noise ξ gives Δv_k = ξ_k − (1−μ)·Σ_j μ^j ξ_{k−1−j},
//         of variance (S/B)·(1 + (1−μ)/(1+μ)) = (S/B)·2/(1+μ)).
// Velocity terms count once the velocity has forgotten its zero start: μ^k ≤ 5% (k ≥ ln 0.05 /
// ln μ, 29 updates at μ = 0.9; the usual 95% level), and the estimate uses the last
// max(that, 8) such versions (8: the straggler detector's smallest window) so it follows the
// learning-rate schedule, which changes the cost several-fold over a run.
//
// Only rules with a velocity (μ > 0: momentum, Nesterov, Adam) are measured. Without one, the
// same formula reads the raw gradients' change between updates, and it is falsified twice: on the
// default MLP it predicted an efficiency of 0.37 where gba's measured per-sample cost was ~0.8
// (ADR 0007), and on DeepFM with Adagrad it read 0.24-0.65 while gba ended level with sync at
// equal samples (+0.085% AUC [-0.077, +0.246], 5 seeds) and reached the target in 19.1 s
// [13.2, 25.1] against sync's 31.5 s [23.9, 39.0]; the estimate's noise around the veto's bound
// switched auto 1-4 times per shard in those runs (ADR 0007). So for
// μ = 0 the cost stays "not measured" and the policy prices throughput alone (as before the guard);
// the hot path skips the sums.
//
// Thread-safety: thread-compatible. The shard calls it under its own lock.
#ifndef SYNCOPATE_LIBS_AGGREGATION_GRADIENT_STATISTICS_H_
#define SYNCOPATE_LIBS_AGGREGATION_GRADIENT_STATISTICS_H_

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "libs/aggregation/aggregation_kernels.h"
#include "libs/straggler/staleness.h"

namespace syncopate::aggregation {

class GradientStatistics {
 public:
  // `velocity_decay` is μ in [0, 1); 0 measures nothing (see above).
  explicit GradientStatistics(double velocity_decay);

  // False for a rule without a velocity: every call below is then a no-op and Current() is
  // never measured.
  bool measures() const { return decay_ > 0; }

  // A fresh push of the version the next update closes (sync: every admitted push).
  void AddPush(std::span<const float> gradient, int64_t samples);
  // The same, given the push's tensor::SquaredNorm (the shard computes it while validating).
  void AddPush(double squared_norm, int64_t samples);
  // Closes the version: `mean` is the update's mean gradient over `samples` samples.
  void AddUpdate(std::span<const float> mean, int64_t samples);
  // Not sync any more (a switch, a restore): the velocity restarts at the next sync update. The
  // window's versions stay, so the last estimate survives a stay in gba.
  void Reset();

  StalenessCost Current() const;
  // S, per sample (0 until two versions with two pushes each).
  double noise_trace() const;
  // Versions whose velocity terms count, and the window they are kept in.
  int warmup_updates() const { return warmup_; }
  int window() const { return static_cast<int>(window_); }

 private:
  // Forgets the open version's pushes.
  void ClosePushes();

  struct Version {
    double samples = 0;           // B_k
    double push_excess = 0;       // mean|g_i|² − |ḡ_k|²  (0 with fewer than two pushes)
    double push_coefficient = 0;  // mean(1/b_i) − 1/B_k (0 likewise)
    double velocity_squared = 0;  // |v_k|²
    double velocity_change_squared = 0;  // |v_k − v_{k−1}|²
  };

  const AggregationKernels& kernels_;  // the active ISA level's
  const double decay_;
  const int warmup_;
  const size_t window_;
  std::deque<Version> versions_;  // the last window_ versions past the warmup
  // The open version.
  double push_squared_sum_ = 0;
  double push_inverse_samples_sum_ = 0;
  int64_t pushes_ = 0;
  std::vector<float> velocity_;
  int64_t velocity_updates_ = 0;  // since the last Reset
};

}  // namespace syncopate::aggregation

#endif  // SYNCOPATE_LIBS_AGGREGATION_GRADIENT_STATISTICS_H_
