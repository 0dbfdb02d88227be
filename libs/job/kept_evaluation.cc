#include "libs/job/kept_evaluation.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace syncopate::job {

std::optional<ValidationScore> ValidationScoreOf(const v1::EvalStatus& eval,
                                                 absl::string_view metric) {
  if (!eval.has_validation()) return std::nullopt;
  return ValidationScoreOf(eval.validation(), metric);
}

std::optional<ValidationScore> ValidationScoreOf(const v1::EvalMetrics& v,
                                                 absl::string_view metric) {
  if (v.examples() <= 0) return std::nullopt;
  if (metric == "auc") return ValidationScore{v.auc(), v.auc_standard_error()};
  const double a = v.accuracy();
  return ValidationScore{a,
                         std::sqrt(std::max(0.0, a * (1 - a)) / static_cast<double>(v.examples()))};
}

std::optional<size_t> KeptEvaluation(std::span<const v1::EvalStatus> evals,
                                     absl::string_view metric) {
  std::optional<size_t> kept;
  double best = 0;
  for (size_t i = 0; i < evals.size(); ++i) {
    const std::optional<ValidationScore> score = ValidationScoreOf(evals[i], metric);
    if (!score.has_value() || std::isnan(score->value)) continue;
    if (!kept.has_value() || score->value > best) {
      kept = i;
      best = score->value;
    }
  }
  return kept;
}

std::string EarlyStopReason(std::span<const v1::EvalStatus> evals, absl::string_view metric) {
  const std::optional<size_t> kept = KeptEvaluation(evals, metric);
  if (!kept.has_value() ||
      evals.size() - *kept - 1 < static_cast<size_t>(kWorseEvaluationsToStop)) {
    return "";
  }
  const ValidationScore best = *ValidationScoreOf(evals[*kept], metric);
  const double margin = kWorseByStandardErrors * best.standard_error;
  if (!(margin > 0)) return "";
  for (size_t i = evals.size() - kWorseEvaluationsToStop; i < evals.size(); ++i) {
    const std::optional<ValidationScore> score = ValidationScoreOf(evals[i], metric);
    if (!score.has_value() || !(best.value - score->value > margin)) return "";
  }
  const ValidationScore last = *ValidationScoreOf(evals.back(), metric);
  return absl::StrFormat(
      "validation %s fell from %.4f to %.4f: the last %d evaluations trail the best by more than "
      "%.0f standard errors (%.4f)",
      metric == "auc" ? "auc" : "accuracy", best.value, last.value, kWorseEvaluationsToStop,
      kWorseByStandardErrors, margin);
}

void ThinEvaluations(std::vector<v1::EvalStatus>& evals, absl::string_view metric, size_t limit) {
  // Room for the first, the kept one, the latest that EarlyStopReason reads, and a few spaced.
  limit = std::max<size_t>(limit, 4 * (kWorseEvaluationsToStop + 2));
  if (evals.size() <= limit) return;
  const std::optional<size_t> kept = KeptEvaluation(evals, metric);
  const size_t latest = evals.size() - kWorseEvaluationsToStop;
  auto protected_at = [&](size_t i) { return i == 0 || i == kept || i >= latest; };
  // Evenly over the examples the run has seen (the report's curve is accuracy against examples):
  // half the limit, so that thinning comes again only after as many new evaluations.
  const double span =
      static_cast<double>(evals.back().examples_at_eval() - evals.front().examples_at_eval());
  const double spacing = span / static_cast<double>(limit / 2);
  std::vector<v1::EvalStatus> thinned;
  thinned.reserve(limit);
  double last = 0;
  for (size_t i = 0; i < evals.size(); ++i) {
    const auto examples = static_cast<double>(evals[i].examples_at_eval());
    // Without examples to space by (all at one count), every second one.
    const bool spaced = spacing > 0 ? examples >= last + spacing : i % 2 == 0;
    if (!protected_at(i) && !spaced) continue;
    last = std::max(last, examples);
    thinned.push_back(std::move(evals[i]));
  }
  evals = std::move(thinned);
}

}  // namespace syncopate::job
