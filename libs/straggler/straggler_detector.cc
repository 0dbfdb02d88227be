#include "libs/straggler/straggler_detector.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "libs/straggler/robust_statistics.h"

namespace syncopate {

const WorkerAssessment* Assessment::Find(int32_t worker) const {
  // `workers` is ordered by id (the detector fills it so): a binary search, since ModePolicy and
  // SwitchConfirmation look up every pushing worker for every shard (16 x 1,000 per round).
  auto it = std::lower_bound(workers.begin(), workers.end(), worker,
                             [](const WorkerAssessment& a, int32_t id) { return a.worker < id; });
  if (it != workers.end() && it->worker == worker) return &*it;
  return nullptr;
}

std::vector<int32_t> Assessment::Stragglers() const {
  std::vector<int32_t> ids;
  for (const WorkerAssessment& w : workers) {
    if (w.straggler) ids.push_back(w.worker);
  }
  return ids;
}

StragglerDetector::StragglerDetector(Clock* clock) : clock_(clock) {}

// W = max(8, ⌈4·log2 N⌉) (docs/design.md §6), fixed by the code, never by the job: 8 up to
// N = 4, 16 at 16, 24 at 64, 32 at 256, 40 at 1,000, 54 at 10,000.
// - 8 is the statistical floor. The median of 8 steps ignores up to 3 outlying ones, and its
//   standard error is √(π/2)·σ/√8 ≈ 0.44σ, so a worker's median moves by well under one noise σ
//   between windows while a 2× straggler moves it by 100%. It is the design point every real
//   run (N = 4) was measured at.
// - The window grows with the cluster because the verdict is taken N times per assessment at a
//   fixed cutoff (kStragglerZ): the largest of N workers' median noises grows like √(2·ln N)
//   standard errors (the expected maximum of N normals), so for the worst worker's noise to stay
//   what it is at the design point, each median's standard error must shrink by the same
//   factor: 1/√W ∝ 1/√(ln N), i.e. W ∝ ln N, anchored at W = 8 for N = 4 (8 = 4·log2 4).
//   A window of 2N steps (the rule until 2026-11-26) satisfied this with a large margin but
//   could not be filled: at 1,000 workers and G = 4,096 each worker takes ~15 steps per epoch of
//   Fashion-MNIST, so 2N = 2,000 steps (and a second window to confirm) outlasted every run and
//   auto never left sync (docs/simulation.md); the coordinator also held 128·N bytes per
//   worker for it, N² in all.
// - The window is also ModePolicy's minimum dwell (a switch rests on a full window measured in
//   the current mode, SwitchConfirmation asks for two): ⌈4·log2 N⌉ steps keeps that a handful of
//   steps per worker at any scale.
int StragglerDetector::WindowForWorkers(int num_workers) {
  if (num_workers <= 4) return 8;
  return std::max(8, static_cast<int>(std::ceil(4 * std::log2(num_workers))));
}

int StragglerDetector::window() const {
  return WindowForWorkers(static_cast<int>(workers_.size()));
}

void StragglerDetector::Append(Window& window, double seconds) {
  window.arrivals.push_back(Sample{seconds, clock_->Now()});
  window.ascending.insert(
      std::upper_bound(window.ascending.begin(), window.ascending.end(), seconds), seconds);
  // Trim to the current W; a shrinking cluster shrinks the window, a growing one lets it refill.
  const size_t w = static_cast<size_t>(this->window());
  while (window.arrivals.size() > w) {
    const double oldest = window.arrivals.front().seconds;
    window.arrivals.pop_front();
    window.ascending.erase(
        std::lower_bound(window.ascending.begin(), window.ascending.end(), oldest));
  }
}

absl::Status StragglerDetector::AddStep(int32_t worker, double compute_seconds) {
  if (!std::isfinite(compute_seconds) || compute_seconds <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", worker, ": compute time must be finite and > 0, got ", compute_seconds));
  }
  WorkerWindows& windows = workers_[worker];
  Append(windows.compute, compute_seconds);
  ++windows.steps_recorded;
  return absl::OkStatus();
}

absl::Status StragglerDetector::AddCommunication(int32_t worker, double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", worker, ": communication time must be finite and >= 0, got ", seconds));
  }
  Append(workers_[worker].communication, seconds);
  return absl::OkStatus();
}

void StragglerDetector::RemoveWorker(int32_t worker) { workers_.erase(worker); }

namespace {

// The last `w` samples of `window` in ascending order, and when the oldest of them was taken.
// Normally the window holds at most `w` samples and its sorted copy is returned as is; only
// when the cluster shrank since the worker's last sample (W fell) are the last `w` sorted anew
// into `scratch`.
template <typename Window>
absl::Span<const double> LastSorted(const Window& window, size_t w, absl::Time* oldest_at,
                                    std::vector<double>& scratch) {
  const size_t n = std::min(window.arrivals.size(), w);
  auto first = window.arrivals.end() - static_cast<std::ptrdiff_t>(n);
  *oldest_at = n == 0 ? absl::InfinitePast() : first->at;
  if (n == window.arrivals.size()) return window.ascending;
  scratch.clear();
  for (auto it = first; it != window.arrivals.end(); ++it) scratch.push_back(it->seconds);
  std::sort(scratch.begin(), scratch.end());
  return scratch;
}

double Log(double x) { return std::log(x); }

}  // namespace

// The verdict, per docs/design.md §6:
//   m_i = median of worker i's window, r = median_i m_i, s_i = m_i / r,
//   z_i = (log m_i − median_j log m_j) / σ,  σ = max(σ_between, σ_noise),
//   straggler ⇔ z_i > kStragglerZ and s_i > 1.
// Logs, because slowness is multiplicative: a 2× slower and a 2× faster worker are equally far
// from the centre, and the noise of a step time scales with the step.
// σ_between = 1.4826·MAD_j(log m_j) is Iglewicz & Hoaglin's modified z-score (0.6745 = 1/1.4826)
// with the workers' medians as the sample.
// σ_noise is the floor that keeps identical workers from looking different: if all workers were
// alike, their medians would still scatter by the sampling error of a median, √(π/2)·σ_i/√n_i
// for n_i samples of noise σ_i (the median's asymptotic variance for normal data). σ_i is each
// worker's own within-window robust σ of log step time, so the floor is measured, not set. We
// take the median of that standard error over workers so that the straggler's own (often
// noisier) window cannot inflate the floor and hide itself. Without the floor, N identical
// workers with tiny noise have a tiny MAD and a noise blip would score a huge z.
// With exactly zero dispersion everywhere σ = 0: any difference is then certain (z = ±inf) and
// no difference scores 0. Two workers can never be told apart (their z is at most 0.6745): a
// straggler needs at least three workers to be outvoted.
Assessment StragglerDetector::Assess() const {
  Assessment out;
  out.at = clock_->Now();
  out.window = window();
  const size_t w = static_cast<size_t>(out.window);

  std::vector<double> eligible_log_medians;
  std::vector<double> eligible_medians;
  std::vector<double> median_standard_errors;
  out.workers.reserve(workers_.size());
  std::vector<double> scratch;
  for (const auto& [id, windows] : workers_) {
    WorkerAssessment a;
    a.worker = id;
    a.steps_recorded = windows.steps_recorded;
    // Sorted windows: the same medians and MADs as sorting copies (SummarizeSorted), logs taken
    // only of the few elements a binary search reads (log is increasing).
    const absl::Span<const double> communication =
        LastSorted(windows.communication, w, &a.oldest_communication_at, scratch);
    a.communication_samples = static_cast<int>(communication.size());
    if (!communication.empty()) {
      const SortedSummary summary = SummarizeSorted(communication);
      a.median_communication_seconds = summary.median;
      a.communication_sigma_seconds = summary.robust_sigma;
    }
    const absl::Span<const double> compute =
        LastSorted(windows.compute, w, &a.oldest_compute_at, scratch);
    a.compute_samples = static_cast<int>(compute.size());
    if (!compute.empty()) {
      const SortedSummary summary = SummarizeSorted(compute);
      a.median_compute_seconds = summary.median;
      a.compute_sigma_seconds = summary.robust_sigma;
    }
    a.enough_data = a.compute_samples >= kMinSamples;
    if (a.enough_data) {
      eligible_medians.push_back(a.median_compute_seconds);
      eligible_log_medians.push_back(std::log(a.median_compute_seconds));
      median_standard_errors.push_back(
          MedianStandardError(SummarizeSorted(compute, &Log).robust_sigma, compute.size()));
    }
    out.workers.push_back(a);
  }
  if (eligible_medians.empty()) return out;

  out.cluster_median_seconds = Median(eligible_medians);
  const double log_centre = Median(eligible_log_medians);
  out.log_sigma_between_workers = RobustSigma(eligible_log_medians);
  out.log_sigma_noise_floor = Median(median_standard_errors);
  out.log_sigma = std::max(out.log_sigma_between_workers, out.log_sigma_noise_floor);

  for (WorkerAssessment& a : out.workers) {
    if (!a.enough_data) continue;
    a.slowdown = a.median_compute_seconds / out.cluster_median_seconds;
    const double deviation = std::log(a.median_compute_seconds) - log_centre;
    if (out.log_sigma > 0) {
      a.robust_z = deviation / out.log_sigma;
    } else if (deviation != 0) {
      a.robust_z = std::copysign(std::numeric_limits<double>::infinity(), deviation);
    }
    a.straggler = a.robust_z > kStragglerZ && a.slowdown > 1;
  }
  return out;
}

}  // namespace syncopate
