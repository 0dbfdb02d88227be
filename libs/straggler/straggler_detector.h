// StragglerDetector: finds workers whose compute-only step time is significantly slower than the
// rest of the cluster, judged against the measurements' own dispersion (docs/design.md §6), never
// against a hand-set per-job constant.
//
// Fed by the coordinator with each worker's compute-only step time (forward + backward, never
// barrier or network waits: under sync those even out across workers and hide the culprit) and,
// optionally, its communication time (pull + push, excluding any barrier wait), which ModePolicy
// uses in its cost model.
//
// Thread-safety: NOT thread-safe. A pure class; the coordinator holds its own lock around every
// call. The injected Clock must outlive the detector.
#ifndef SYNCOPATE_LIBS_STRAGGLER_STRAGGLER_DETECTOR_H_
#define SYNCOPATE_LIBS_STRAGGLER_STRAGGLER_DETECTOR_H_

#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "libs/common/clock.h"

namespace syncopate {

// One worker's verdict. Statistics come from the last `window` samples only.
struct WorkerAssessment {
  int32_t worker = 0;
  // Samples in the compute window (≤ Assessment::window) and the total ever recorded.
  int compute_samples = 0;
  int64_t steps_recorded = 0;
  // False below StragglerDetector::kMinSamples: the worker is then left out of the cluster
  // statistics and its slowdown, z and straggler fields are not meaningful (zero / false).
  bool enough_data = false;
  // m_i, the median compute-only step time, and a robust σ of the window's samples
  // (1.4826·MAD, consistent with the standard deviation for normal noise).
  double median_compute_seconds = 0;
  double compute_sigma_seconds = 0;
  // s_i = m_i / r, where r is the cluster median (Assessment::cluster_median_seconds).
  double slowdown = 0;
  // Robust z-score of log m_i (see StragglerDetector::Assess).
  double robust_z = 0;
  bool straggler = false;
  // Median and robust σ of the communication window; zeros when none was fed.
  int communication_samples = 0;
  double median_communication_seconds = 0;
  double communication_sigma_seconds = 0;
  // When the oldest sample still in each window was recorded (InfinitePast if the window is
  // empty). ModePolicy uses these to tell fresh windows from ones that straddle a mode switch.
  absl::Time oldest_compute_at = absl::InfinitePast();
  absl::Time oldest_communication_at = absl::InfinitePast();
};

struct Assessment {
  // W at the time of the assessment (StragglerDetector::WindowForWorkers).
  int window = 0;
  // r: median of m_i over the workers with enough data (0 if none).
  double cluster_median_seconds = 0;
  // The σ of log m_i the z-scores were computed against: the larger of the between-worker MAD
  // estimate and the noise floor (both reported, so a log line can show which one decided).
  double log_sigma = 0;
  double log_sigma_between_workers = 0;
  double log_sigma_noise_floor = 0;
  // Every known worker, ordered by id.
  std::vector<WorkerAssessment> workers;
  absl::Time at;

  // The worker's entry, or nullptr if the detector does not know it.
  const WorkerAssessment* Find(int32_t worker) const;
  // Ids of the flagged stragglers, ordered.
  std::vector<int32_t> Stragglers() const;
};

class StragglerDetector {
 public:
  // Iglewicz & Hoaglin, "How to Detect and Handle Outliers" (ASQC, 1993): a robust ("modified")
  // z-score above 3.5 marks a potential outlier. For normal data a |z| > 3.5 happens with
  // probability ≈ 4.7e-4 per worker per assessment, so false alarms stay rare even across many
  // workers, while a genuine 2× straggler in a cluster with a few percent of noise scores in the
  // tens.
  static constexpr double kStragglerZ = 3.5;
  // A worker needs this many samples before it is judged: at n = 5 the median and the MAD each
  // tolerate 2 outlying steps (breakdown point ⌊(n−1)/2⌋), so one hiccup (a GC pause, a
  // checkpoint, a data-lease fetch) plus one more cannot decide a verdict; with fewer, one slow
  // step would be half the evidence.
  static constexpr int kMinSamples = 5;

  // The clock stamps every sample; it is not owned and must outlive the detector.
  explicit StragglerDetector(Clock* clock);

  // W = max(8, ⌈4·log2 N⌉) for N known workers; see the definition for why.
  static int WindowForWorkers(int num_workers);
  int window() const;

  // Records one compute-only step time. A worker is known from its first sample on.
  // InvalidArgument unless `compute_seconds` is finite and > 0 (its log is taken).
  absl::Status AddStep(int32_t worker, double compute_seconds);
  // Records one step's communication time (pull + push, no barrier wait).
  // InvalidArgument unless `seconds` is finite and ≥ 0.
  absl::Status AddCommunication(int32_t worker, double seconds);
  // Forgets the worker and its samples (it died or left); unknown ids are ignored.
  void RemoveWorker(int32_t worker);

  // Judges every known worker over its last W samples. O(N log W) for N workers: the windows are
  // kept sorted as samples arrive (AddStep costs O(W) for that, a move of up to W doubles).
  Assessment Assess() const;

 private:
  struct Sample {
    double seconds;
    absl::Time at;
  };
  // One window: its samples in arrival order, and the same values in ascending order, so that
  // Assess reads a median and a MAD in O(log W) (SummarizeSorted) instead of sorting W values:
  // it keeps one assessment of 1,000 workers well under a millisecond.
  struct Window {
    std::deque<Sample> arrivals;
    std::vector<double> ascending;
  };
  struct WorkerWindows {
    Window compute;
    Window communication;
    int64_t steps_recorded = 0;
  };

  void Append(Window& window, double seconds);

  Clock* clock_;
  std::map<int32_t, WorkerWindows> workers_;
};

}  // namespace syncopate

#endif  // SYNCOPATE_LIBS_STRAGGLER_STRAGGLER_DETECTOR_H_
