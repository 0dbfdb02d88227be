// The straggler benchmark's arithmetic and reports, apart from the clusters that produce the
// runs, so the verdicts can be tested on canned runs (tests/unit/bench).
//
// Each scenario x policy runs once per seed. Per cell the report gives the mean and a 95%
// Student-t interval of the final quality at equal samples (test accuracy for the MLP scenarios,
// test AUC for ctr) and of the time to target, and each of issue 11's goals gets a verdict read
// from intervals of differences (Welch) and ratios (Fieller) across seeds:
//   met        the whole 95% interval satisfies the goal,
//   not met    the whole 95% interval violates it,
//   undecided  the interval straddles the bound: these runs cannot tell.
// Time to target is right-censored: a run that never reaches the target within its sample
// budget has no time to target, and dropping it would flatter the policy. So the table shows
// "reached k/n" and a time interval only when every finished run reached the target; a ratio
// verdict needs that on both sides, except that a policy which reached the target in every run
// meets any time goal against one that never did (and misses it the other way round). Any other
// mix of reached and censored runs is undecided.
// Thread-safety: pure functions of their arguments; safe to call from any thread.
#ifndef SYNCOPATE_BENCH_STRAGGLER_REPORT_H_
#define SYNCOPATE_BENCH_STRAGGLER_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "libs/stats/confidence.h"

namespace syncopate::bench {

inline constexpr double kConfidence = 0.95;

struct Scenario {
  std::string id;
  std::string title;
  std::vector<double> factors;  // slowdown of each worker relative to the base padding
  bool transient = false;       // worker 3 is 4x slower during the middle third only
  bool ctr = false;             // wide & deep on CTR data: quality is test AUC, not accuracy
};

// Scenarios a-d (the default MLP) and ctr (wide & deep), in run order.
const std::vector<Scenario>& AllScenarios();

// What to run: validated --scenarios, --policies (mode names: ParseMode, libs/common/mode_rules.h)
// and --seeds.
struct Selection {
  std::vector<Scenario> scenarios;
  std::vector<std::string> policies;
  std::vector<uint64_t> seeds;  // job seeds 1..K: seed 1 is the default job's own seed
};
absl::StatusOr<Selection> ParseSelection(const std::string& scenarios, const std::string& policies,
                                         int seeds);

// One evaluation: the job time and samples when the evaluator pulled the parameters, and the
// quality it measured (accuracy, or AUC for ctr).
struct EvalPoint {
  double seconds = 0;
  int64_t examples = 0;
  double quality = 0;
};

struct RunResult {
  std::string scenario;
  std::string policy;
  uint64_t seed = 1;
  bool finished = false;  // the job reached its sample budget (JOB_DONE)
  double wall_seconds = 0;
  int64_t examples = 0;
  double final_quality = 0;  // the final evaluation, at the full sample budget
  double final_loss = 0;
  double switches_per_shard = 0;
  double wire_bytes_per_example = 0;  // the training workers' (report::WorkersWireBytesPerExample)
  std::vector<EvalPoint> curve;
};

// The first time the quality reaches `target`, interpolated linearly between the last evaluation
// below it and the first at or above it (the evaluator samples every ~2 s; taking the later
// evaluation's time would add up to one interval of noise and bias every policy late). If the
// first evaluation is already at the target, its time. nullopt if the target is never reached.
std::optional<double> TimeToTarget(const std::vector<EvalPoint>& curve, double target);

// How the report reads each scenario's quality.
struct ReportOptions {
  int epochs = 3;
  int64_t samples_per_epoch = 60000;
  double base_slowdown = 4;
  double target_accuracy = 0.85;
  double target_auc = 0;  // ctr's time-to-target target (Bayes AUC − gap)
  double bayes_auc = 0;   // 0: no ctr data
  double bayes_logloss = 0;
  std::string machine;  // where it ran (isa::MachineDescription); "" = not stated
};

// The summary of one scenario x policy cell over its seeds.
struct CellSummary {
  std::string scenario;
  std::string policy;
  int runs = 0;
  int finished = 0;
  std::vector<double> final_quality;                // finished runs only
  std::vector<double> time_to_target;               // finished runs that reached the target
  std::optional<stats::Interval> quality_interval;  // nullopt with fewer than 2 finished runs
  std::optional<stats::Interval> time_interval;     // only when every finished run reached it
  double mean_quality = 0;
  double mean_wall_seconds = 0;
  double mean_switches = 0;
  double mean_loss = 0;
  double mean_wire_bytes_per_example = 0;
};
std::vector<CellSummary> Summarize(const std::vector<RunResult>& runs,
                                   const ReportOptions& options);

struct GoalVerdict {
  std::string goal;  // the goal as the issue states it
  std::string scenario;
  stats::Verdict verdict = stats::Verdict::kUndecided;
  std::string evidence;  // the interval(s) and counts it was read from
};
// Issue 11's goals (time to target vs the fixed policies, quality vs sync, auto vs sync under one
// 4x straggler) and, for ctr, issue 4's (gba vs naive async, sync vs the Bayes AUC), for every
// scenario and policy present in `cells`.
std::vector<GoalVerdict> Verdicts(const std::vector<CellSummary>& cells,
                                  const ReportOptions& options);

// results.md, results.json (per run and aggregated) and the accuracy-vs-time plot with bands.
std::string ResultsMarkdown(const Selection& selection, const std::vector<CellSummary>& cells,
                            const std::vector<GoalVerdict>& verdicts, const ReportOptions& options);
std::string ResultsJson(const Selection& selection, const std::vector<RunResult>& runs,
                        const std::vector<CellSummary>& cells,
                        const std::vector<GoalVerdict>& verdicts, const ReportOptions& options);

// Mean and 95% interval of the runs' quality on a common time grid: a run's quality between two
// evaluations is interpolated linearly and held at its final value after the run ended (the
// model stops changing); a grid point before any run's first evaluation is left out, so every
// point averages all runs.
struct BandPoint {
  double seconds = 0;
  double mean = 0;
  double low = 0;  // = mean with a single run
  double high = 0;
};
std::vector<BandPoint> QualityBand(const std::vector<const RunResult*>& runs,
                                   const std::vector<double>& grid);
// One panel per scenario (libs/plot): each policy's QualityBand on 101 points from 0 to the
// scenario's longest run, and the target as a dashed line.
std::string AccuracySvg(const Selection& selection, const std::vector<RunResult>& runs,
                        const ReportOptions& options);

}  // namespace syncopate::bench

#endif  // SYNCOPATE_BENCH_STRAGGLER_REPORT_H_
