#include "libs/straggler/mode_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "libs/common/mode_rules.h"
#include "libs/common/status_macros.h"
#include "libs/straggler/robust_statistics.h"
#include "libs/straggler/staleness.h"

namespace syncopate {
namespace {

using ::syncopate::v1::Mode;

// Differences smaller than this fraction of the larger prediction are ties. The two predictions
// are sums of N terms in double (rounding ≈ N·1e-16 relative); 1e-9 leaves ample margin and is
// far below anything a step timer can resolve, so it only absorbs arithmetic, never a
// measurement.
constexpr double kTieRelative = 1e-9;

// How many standard errors `difference` is from zero, for a difference between two predictions
// whose larger is `scale`: 0 for a tie (kTieRelative), ±inf for a nonzero difference with no
// measured noise.
double SignificanceZ(double difference, double scale, double standard_error) {
  if (std::abs(difference) <= kTieRelative * scale) return 0;
  if (standard_error > 0) return difference / standard_error;
  return std::copysign(std::numeric_limits<double>::infinity(), difference);
}

struct Prediction {
  double sync = 0;
  double sync_standard_error = 0;
  int32_t sync_bottleneck = 0;  // the worker whose share the barrier waits for
  double gba = 0;
  double gba_standard_error = 0;
  double gba_staleness = 0;  // mean staleness of the samples gba counts
  int64_t threshold = 0;
};

// The cost model (docs/design.md §6). For worker i: m_i median compute time at its local batch b_i,
// c_i median communication time, σ's their robust spreads over n samples.
//
// Sync: every worker computes the share G/N at its own measured per-sample speed m_i/b_i, then
// communicates; the barrier releases when the slowest is done:
//   T_i = m_i·(G/N)/b_i + c_i,   sync = G / max_i T_i.
// (Compute scales with the batch; communication moves parameters and gradients whose size does
// not, so c_i is not rescaled.)
//
// GBA: every worker keeps its batch and cycles every t_i = m_i + c_i, producing b_i/t_i samples/s;
// the shard counts all of them toward versions, so it bumps at R = Σ_j b_j/t_j / G versions/s.
// Worker i's gradient is as stale as the versions bumped during its own cycle: y_i = t_i·R, the
// same quantity StalenessThreshold's derivation uses. Versions are discrete and the phase is
// arbitrary, so τ_i = ⌊y_i⌋ with probability 1 − frac(y_i) and ⌈y_i⌉ otherwise (the expected
// count of bumps in the cycle is y_i), hence the mean weight the shard will give it:
//   w̄_i = (1 − f)·w(⌊y_i⌋) + f·w(⌊y_i⌋ + 1),  f = frac(y_i),  w = StalenessWeight,
//   gba = Σ_i (b_i/t_i)·w̄_i   (a gradient decayed by w moves the model like w·b samples).
// ι = StalenessThreshold(N, ⌈Σb/N⌉, G): what the shard uses, with the mean local batch.
//
// Standard errors, by first-order (delta-method) propagation, treating workers as independent:
//   se(m_i) = √(π/2)·σ_i/√n_i (MedianStandardError), likewise se(c_i);
//   sync: the bottleneck worker k is taken as known, se(sync) = sync·se(T_k)/T_k — it ignores the
//     chance that a different worker is the true bottleneck, which matters only when the top two
//     are within noise, i.e. exactly when sync's max is least sensitive to either;
//   gba: se(gba)² = Σ_i (w̄_i·b_i·se(t_i)/t_i²)², holding each w̄_i fixed (w is piecewise constant
//     in y and its linear interpolation changes slowly next to b_i/t_i).
// The two predictions share their inputs and are positively correlated, so adding their
// variances overstates the variance of the difference: the test is conservative.
// gba_staleness = Σ_i (b_i/t_i)·w̄_i·y_i / gba: the mean staleness of the samples gba counts (the
// expected bumps in a worker's cycle is y_i), at which the measured StalenessCost is read.
Prediction Predict(const std::vector<const WorkerAssessment*>& workers,
                   const std::vector<WorkerLoad>& loads, int64_t global_batch) {
  Prediction p;
  const double g = static_cast<double>(global_batch);
  const double n = static_cast<double>(loads.size());
  const double share = g / n;

  std::vector<double> cycle(loads.size());
  std::vector<double> cycle_se(loads.size());
  double bottleneck_time = -1;
  double bottleneck_se = 0;
  double raw_rate = 0;
  int64_t batch_sum = 0;
  for (size_t i = 0; i < loads.size(); ++i) {
    const WorkerAssessment& a = *workers[i];
    const double b = static_cast<double>(loads[i].local_batch);
    const double se_m =
        MedianStandardError(a.compute_sigma_seconds, static_cast<size_t>(a.compute_samples));
    const double se_c = MedianStandardError(a.communication_sigma_seconds,
                                            static_cast<size_t>(a.communication_samples));
    const double sync_time = a.median_compute_seconds * share / b + a.median_communication_seconds;
    if (sync_time > bottleneck_time) {
      bottleneck_time = sync_time;
      bottleneck_se = std::hypot(se_m * share / b, se_c);
      p.sync_bottleneck = a.worker;
    }
    cycle[i] = a.median_compute_seconds + a.median_communication_seconds;
    cycle_se[i] = std::hypot(se_m, se_c);
    raw_rate += b / cycle[i];
    batch_sum += loads[i].local_batch;
  }
  p.sync = g / bottleneck_time;
  p.sync_standard_error = p.sync * bottleneck_se / bottleneck_time;

  const int64_t mean_batch =
      (batch_sum + static_cast<int64_t>(loads.size()) - 1) / static_cast<int64_t>(loads.size());
  p.threshold = StalenessThreshold(static_cast<int>(loads.size()), mean_batch, global_batch);
  double variance = 0;
  for (size_t i = 0; i < loads.size(); ++i) {
    const double b = static_cast<double>(loads[i].local_batch);
    const double versions_per_cycle = cycle[i] * raw_rate / g;
    const double whole = std::floor(versions_per_cycle);
    const double frac = versions_per_cycle - whole;
    const int64_t tau = static_cast<int64_t>(whole);
    const double mean_weight = (1 - frac) * StalenessWeight(tau, p.threshold) +
                               frac * StalenessWeight(tau + 1, p.threshold);
    p.gba += b / cycle[i] * mean_weight;
    p.gba_staleness += b / cycle[i] * mean_weight * versions_per_cycle;
    const double term = mean_weight * b * cycle_se[i] / (cycle[i] * cycle[i]);
    variance += term * term;
  }
  p.gba_standard_error = std::sqrt(variance);
  if (p.gba > 0) p.gba_staleness /= p.gba;
  return p;
}

// InvalidArgument for a non-positive local batch or a worker listed twice.
absl::Status ValidateLoads(const std::vector<WorkerLoad>& loads) {
  // Duplicates by sorting the ids: one allocation, where a std::set made one per worker, per
  // shard, per round (16,000 a round at 1,000 workers x 16 shards).
  std::vector<int32_t> ids;
  ids.reserve(loads.size());
  for (const WorkerLoad& load : loads) {
    if (load.local_batch <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "worker ", load.worker, ": local batch must be positive, got ", load.local_batch));
    }
    ids.push_back(load.worker);
  }
  std::sort(ids.begin(), ids.end());
  if (auto twice = std::adjacent_find(ids.begin(), ids.end()); twice != ids.end()) {
    return absl::InvalidArgumentError(absl::StrCat("worker ", *twice, " listed twice"));
  }
  return absl::OkStatus();
}

// Records the two predictions in `d` with how significantly they differ, in throughput and in
// goodput.
void ComparePredictions(const Prediction& p, const StalenessCost& cost, ModeDecision& d) {
  d.sync_samples_per_second = p.sync;
  d.gba_samples_per_second = p.gba;
  d.gba_staleness = p.gba_staleness;
  d.staleness_threshold = p.threshold;

  // Throughput: samples that count toward updates (GBA's decayed ones by their weight).
  d.standard_error = std::hypot(p.sync_standard_error, p.gba_standard_error);
  d.z = SignificanceZ(p.gba - p.sync, std::max(p.gba, p.sync), d.standard_error);
  d.close_call = d.z != 0 && std::abs(d.z) <= ModePolicy::kSignificanceZ;

  // Goodput (Pollux, OSDI'21): gba's samples at the per-sample efficiency the shard measured for
  // its predicted staleness. The efficiency's error adds to gba's (independent: one comes from
  // step times, the other from gradients).
  d.gba_efficiency = cost.Efficiency(p.gba_staleness);
  const double gba_goodput = p.gba * d.gba_efficiency;
  d.goodput_standard_error = std::hypot(
      p.sync_standard_error, std::hypot(p.gba_standard_error * d.gba_efficiency,
                                        p.gba * cost.EfficiencyStandardError(p.gba_staleness)));
  d.goodput_z =
      SignificanceZ(gba_goodput - p.sync, std::max(gba_goodput, p.sync), d.goodput_standard_error);
}

struct Recommendation {
  Mode mode;
  absl::string_view reason;  // one of the kReason* labels
};

// The mode the compared predictions in `d` recommend for a shard running `current`, before the
// dwell.
Recommendation Recommend(const ModeDecision& d, Mode current, bool cost_measured) {
  constexpr double kSignificanceZ = ModePolicy::kSignificanceZ;
  constexpr double kReturnZ = ModePolicy::kReturnZ;
  // The efficiency is a model (docs/design.md §6) calibrated only on average: it matched the
  // per-sample cost the straggler bench measured over whole runs (~0.85 vs ~0.8) but reads as
  // low as 0.63 early in a run, where entering gba under a 4x straggler still reached the
  // target sooner (measured: pricing gba by goodput both ways kept auto in sync until 41 s of a
  // 54 s run, against ~11 s by throughput). So it is a veto, not a second criterion: gba must
  // be significantly faster in samples, and staleness must not measurably cost more than that
  // gain (goodput significantly below sync's). Both tests use the same z cut-off; no constant
  // is added.
  const bool staleness_too_costly = cost_measured && d.goodput_z < -kSignificanceZ;
  const bool sync_better = d.z < -kSignificanceZ || staleness_too_costly;
  const bool gba_better = d.z > kSignificanceZ && !staleness_too_costly;
  Mode recommended = current;
  absl::string_view reason;
  if (sync_better) {
    recommended = v1::MODE_SYNC;
    reason = d.z < -kSignificanceZ ? kReasonSyncPredictedFaster : kReasonStalenessCostExceedsGain;
  } else if (gba_better) {
    recommended = v1::MODE_GBA;
    reason = d.stragglers.empty() ? kReasonGbaPredictedFaster : kReasonStragglerDetected;
  } else if (current == v1::MODE_SYNC) {  // NOLINT(bugprone-branch-clone): see the comment
    // In sync, no significant difference: stay. The tie in GBA below ends with the same reason
    // for a different case; the branches stay apart so that each case keeps its why.
    reason = kReasonNoSignificantDifference;
  } else if (!d.stragglers.empty()) {
    // In GBA with a straggler still flagged: stay. Leaving needs the straggler gone too, which
    // gives the policy hysteresis: entering GBA took a significant gain, leaving takes both the
    // gain and its cause to disappear.
    reason = kReasonStragglerDetected;
  } else if (cost_measured || d.z > kReturnZ) {
    // In GBA, no straggler, no significant difference either way: stay.
    // - With the staleness cost measured, goodput prices what sync keeps (every gradient
    //   fresh), and it did not say sync is better (staleness_cost_exceeds_gain above): a switch
    //   back would rest on noise and cost a dwell. Measured on the straggler benchmark's
    //   scenario a (4 CPU-bound workers on 2 cores, no straggler), returning on ties flapped 4-9
    //   times per shard in ~25 s runs (5.6 on average over 5 seeds; 2.2 without the tie rule):
    //   sync's idle barrier hides the CPU contention gba's step times
    //   then show, so each mode's measurements favour the other.
    // - Unmeasured, a lead that is no longer significant but more than one standard error is
    //   inside the hysteresis band. Without the band a true difference sitting near the entry
    //   threshold re-crosses it every other window and the shard flaps (8 switches per shard
    //   in 37 s, measured on the same benchmark before the band).
    reason = kReasonNoSignificantDifference;
  } else {
    // In GBA, no straggler, no significant gain, staleness cost not measured yet: go back to
    // sync. Ties go to sync because the throughput model does not price what sync keeps —
    // every gradient fresh (τ = 0), the convergence behaviour the job was tuned with; GBA is
    // only worth its staleness when it is measurably faster.
    recommended = v1::MODE_SYNC;
    reason = kReasonStragglersRecovered;
  }
  return {recommended, reason};
}

// Dwell: a switch must rest on a full window measured entirely in the current mode, for every
// pushing worker (the window is full here, so "oldest sample after the switch" means at least
// W steps since it). Communication counts too when fed, since it changes with the mode. The
// workers whose window began before `last_switch_at`.
std::vector<int32_t> StaleWindows(const std::vector<const WorkerAssessment*>& workers,
                                  absl::Time last_switch_at) {
  std::vector<int32_t> stale_windows;
  for (const WorkerAssessment* a : workers) {
    const bool fresh =
        a->oldest_compute_at > last_switch_at &&
        (a->communication_samples == 0 || a->oldest_communication_at > last_switch_at);
    if (!fresh) stale_windows.push_back(a->worker);
  }
  return stale_windows;
}

}  // namespace

ModePolicy::ModePolicy(Clock* clock, int64_t global_batch)
    : clock_(clock), global_batch_(global_batch) {}

absl::Status ModePolicy::SetPinned(std::optional<Mode> mode) {
  if (mode.has_value() && *mode == v1::MODE_UNSPECIFIED) {
    return absl::InvalidArgumentError("cannot pin a shard to MODE_UNSPECIFIED");
  }
  if (mode.has_value() && *mode == v1::MODE_AUTO) mode.reset();
  pinned_ = mode;
  return absl::OkStatus();
}

void ModePolicy::NotifySwitched(Mode new_mode) {
  last_switch_at_ = clock_->Now();
  last_switched_to_ = new_mode;
}

absl::StatusOr<ModeDecision> ModePolicy::Decide(const Assessment& assessment, Mode current,
                                                const std::vector<WorkerLoad>& loads,
                                                const StalenessCost& cost) const {
  ModeDecision d;
  d.current = current;
  d.recommended = current;
  d.at = clock_->Now();

  if (pinned_.has_value()) {
    d.recommended = *pinned_;
    d.switch_now = current != *pinned_;
    d.reason = std::string(kReasonPinned);
    d.explanation = absl::StrCat("pinned to ", ModeName(*pinned_), " by the job spec; running ",
                                 ModeName(current));
    return d;
  }
  if (global_batch_ <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("global batch must be positive, got ", global_batch_));
  }
  if (current != v1::MODE_SYNC && current != v1::MODE_GBA) {
    return absl::InvalidArgumentError(absl::StrCat("ModePolicy chooses between sync and gba; ",
                                                   ModeName(current), " is neither"));
  }
  SYNCOPATE_RETURN_IF_ERROR(ValidateLoads(loads));

  // The cost model needs every pushing worker's full window: the bottleneck may be exactly the
  // worker we know least about.
  std::vector<const WorkerAssessment*> workers;
  std::vector<std::string> missing;
  for (const WorkerLoad& load : loads) {
    const WorkerAssessment* a = assessment.Find(load.worker);
    if (a == nullptr || a->compute_samples < assessment.window) {
      missing.push_back(absl::StrCat("worker ", load.worker, " has ",
                                     a == nullptr ? 0 : a->compute_samples, "/", assessment.window,
                                     " steps"));
      continue;
    }
    workers.push_back(a);
    if (a->straggler) d.stragglers.push_back(a->worker);
  }
  if (loads.empty() || !missing.empty()) {
    d.reason = std::string(kReasonInsufficientData);
    d.explanation = loads.empty() ? std::string("no workers push to this shard")
                                  : absl::StrCat("staying ", ModeName(current), ": ",
                                                 absl::StrJoin(missing, ", "));
    return d;
  }

  const Prediction p = Predict(workers, loads, global_batch_);
  ComparePredictions(p, cost, d);
  const double gba_goodput = p.gba * d.gba_efficiency;
  const auto [recommended, reason] = Recommend(d, current, cost.measured());
  d.recommended = recommended;

  const std::vector<int32_t> stale_windows = StaleWindows(workers, last_switch_at_);
  const bool wants_switch = d.recommended != current;
  if (wants_switch && !stale_windows.empty()) {
    d.reason = std::string(kReasonHoldMinDwell);
  } else {
    d.reason = std::string(reason);
    d.switch_now = wants_switch;
  }

  std::string line = absl::StrFormat(
      "%s: sync %.1f samples/s (barrier waits for worker %d) vs gba %.1f samples/s "
      "(iota %d); gba-sync %+.1f +/- %.1f, z %.2f; gba goodput %.1f (efficiency %.3f at "
      "staleness %.2f%s), z %.2f; stragglers [%s]; %s",
      d.reason, p.sync, p.sync_bottleneck, p.gba, p.threshold, p.gba - p.sync, d.standard_error,
      d.z, gba_goodput, d.gba_efficiency, p.gba_staleness,
      cost.measured() ? "" : ", not measured yet", d.goodput_z, absl::StrJoin(d.stragglers, ","),
      d.switch_now ? absl::StrCat("switch ", ModeName(current), " -> ", ModeName(d.recommended))
                   : absl::StrCat("stay ", ModeName(current)));
  if (d.reason == kReasonHoldMinDwell) {
    absl::StrAppend(&line, "; in ", ModeName(last_switched_to_), " for ",
                    absl::FormatDuration(d.at - last_switch_at_),
                    ", waiting for a fresh window from ", stale_windows.size(), " worker(s)");
  }
  d.explanation = std::move(line);
  return d;
}

}  // namespace syncopate
