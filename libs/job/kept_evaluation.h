// Which evaluation a job keeps, and when its validation scores say training should stop
// (DatasetSpec.validation_path, EvalSpec.early_stop; ADR 0017). Both read only the validation
// scores, so the test set never chooses; both are pure functions of the job's evaluations, so a
// restarted coordinator that reloads them decides the same.
// Thread-safety: pure functions; safe from any thread.
#ifndef SYNCOPATE_LIBS_JOB_KEPT_EVALUATION_H_
#define SYNCOPATE_LIBS_JOB_KEPT_EVALUATION_H_

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "syncopate/v1/cluster.pb.h"

namespace syncopate::job {

// An evaluation counts as worse than the kept one when its validation score trails the kept
// score by more than this many of the kept score's standard errors: a gap noise alone reaches
// about 2% of the time.
inline constexpr double kWorseByStandardErrors = 2.0;
// EvalSpec.early_stop ends training after this many worse evaluations in a row: one can be an
// unlucky evaluation point; three (12% of a run at 25 points) are a trend.
inline constexpr int kWorseEvaluationsToStop = 3;

struct ValidationScore {
  double value = 0;
  // How far the same parameters' score would move on another validation sample of that size;
  // 0 when unknown (then no evaluation is ever judged worse).
  double standard_error = 0;
};

// The validation score of `eval` in the job's quality metric (job::QualityMetric): "auc" is the
// AUC with its Hanley-McNeil standard error, anything else the accuracy with its binomial one,
// sqrt(a (1 - a) / n). nullopt when the evaluation has no validation scores.
std::optional<ValidationScore> ValidationScoreOf(const v1::EvalStatus& eval,
                                                 absl::string_view metric);
// The same for one data set's scores (what the evaluator has before it reports them).
std::optional<ValidationScore> ValidationScoreOf(const v1::EvalMetrics& validation,
                                                 absl::string_view metric);

// The index of the evaluation the job keeps: the best validation score, the earliest on a tie.
// nullopt when none has validation scores.
std::optional<size_t> KeptEvaluation(std::span<const v1::EvalStatus> evals,
                                     absl::string_view metric);

// Non-empty (why, in words) when the last kWorseEvaluationsToStop evaluations all came after the
// kept one and are worse than it (kWorseByStandardErrors).
std::string EarlyStopReason(std::span<const v1::EvalStatus> evals, absl::string_view metric);

// How many evaluations a job remembers at most (the coordinator's history, its progress journal,
// ClusterStatus.eval_history and so the run report's curve). A job evaluated once per epoch for
// many epochs would otherwise grow without end: the soak's (a million 10k-example epochs)
// evaluates 1.6 times a second, and its coordinator grew ~100 KB a minute and rewrote every
// evaluation at each progress save (2026-11-29).
inline constexpr size_t kEvaluationsRemembered = 256;

// Once `evals` holds more than `limit`, thins it to about half: evaluations spaced evenly over
// the examples the run has seen, plus the first, the kept one and the latest
// kWorseEvaluationsToStop. The history still spans the whole run (coarser as it grows), in
// amortised constant time per evaluation. KeptEvaluation and EarlyStopReason decide the same on
// what is left: the kept one stays (everything forgotten scored lower, or it would be the
// earliest best), and so do the latest.
void ThinEvaluations(std::vector<v1::EvalStatus>& evals, absl::string_view metric,
                     size_t limit = kEvaluationsRemembered);

}  // namespace syncopate::job

#endif  // SYNCOPATE_LIBS_JOB_KEPT_EVALUATION_H_
