#include "libs/worker/evaluator.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "libs/common/status_macros.h"
#include "libs/job/eval_points.h"
#include "libs/job/kept_evaluation.h"
#include "libs/rpc/grpc_util.h"

namespace syncopate::worker {
namespace {

// How often the evaluator asks whether the next point exists: the point carries the time it was
// made, so this only bounds how soon after it the evaluation starts.
constexpr absl::Duration kPointPoll = absl::Milliseconds(25);

bool ShuttingDown(const EvaluatorOptions& options) {
  return options.shutdown && options.shutdown();
}

// After the final report: stay until the coordinator says the job is done. If the coordinator
// dies before it has recorded the report, the channel breaks (UNAVAILABLE) and the evaluator
// rejoins the restarted coordinator, which asks for the final evaluation again; exiting at once
// would leave it waiting for a report nobody sends. Bounded: a live coordinator marks the job
// done right after the report.
absl::Status AwaitJobDone(CoordinatorChannel& coordinator, const EvaluatorOptions& options) {
  const absl::Time deadline = absl::Now() + options.linger;
  while (!ShuttingDown(options) && absl::Now() < deadline) {
    absl::StatusOr<std::optional<v1::CoordinatorToWorker>> command =
        coordinator.NextCommand(std::min(absl::Seconds(1), deadline - absl::Now()));
    if (!command.ok()) return command.status();
    if (command->has_value() && (*command)->has_stop()) return absl::OkStatus();
  }
  return absl::OkStatus();
}

// What every evaluation reads into and from: the process's buffers, its parameters and how many
// of the test set's examples a point scores (job::EvalPointTestExamples; 0: all of them).
struct Scorer {
  workload::Workload& model;
  ParameterStore& parameters;
  const EvaluatorOptions& options;
  std::vector<float>& params;
  workload::TableRows& rows;
  int64_t point_test_examples = 0;
};

// One evaluation's scores and what they measured (Score says how they are made).
struct Scored {
  model::Evaluation eval;
  std::optional<v1::EvalMetrics> validation;
  bool kept = false;  // the point was released as the version the job keeps
  std::vector<int64_t> versions;
  int64_t point = 0;  // the point evaluated (0: the newest parameters)
  int64_t point_examples = 0;
  absl::Time point_made;  // by this process's clock
};

// One data set's scores as they are reported.
v1::EvalMetrics MetricsOf(const model::Evaluation& eval) {
  v1::EvalMetrics metrics;
  metrics.set_accuracy(eval.accuracy);
  metrics.set_loss(eval.mean_loss);
  metrics.set_auc(eval.auc);
  metrics.set_examples(eval.examples);
  metrics.set_auc_standard_error(eval.auc_standard_error);
  return metrics;
}

// The score of `validation` if it beats `kept_score` (none yet: it does), by the coordinator's
// own measure (job::ValidationScoreOf), so both sides agree on which evaluation is kept;
// nullopt otherwise.
std::optional<double> BetterThanKept(const v1::EvalMetrics& validation, absl::string_view metric,
                                     std::optional<double> kept_score) {
  const std::optional<job::ValidationScore> score = job::ValidationScoreOf(validation, metric);
  if (!score.has_value() || (kept_score.has_value() && score->value <= *kept_score)) {
    return std::nullopt;
  }
  return score->value;
}

// Whether a chunk's read is of the point the pass reads: every shard served the same one, and
// the one the pass's earlier chunks had (the first chunk's names it, with the examples applied
// at it and when every shard had made it). Otherwise `point` becomes 0 (not reached everywhere
// yet) or the newer point to read whole.
bool SamePoint(const PullStats& pulled, Scored& scored, int64_t& point) {
  const auto [lowest, highest] =
      std::minmax_element(pulled.eval_points.begin(), pulled.eval_points.end());
  if (pulled.eval_points.empty() || *lowest == 0) {
    point = 0;
    return false;
  }
  if (*lowest != *highest || (scored.point != 0 && *highest != scored.point)) {
    point = *highest;  // a shard or a later chunk moved on
    return false;
  }
  if (scored.point == 0) {
    scored.point = *highest;
    scored.point_examples =
        *std::max_element(pulled.point_examples.begin(), pulled.point_examples.end());
    // Every shard had made it once the last one did: the youngest age.
    scored.point_made =
        absl::Now() - absl::Seconds(*std::min_element(pulled.point_age_seconds.begin(),
                                                      pulled.point_age_seconds.end()));
  }
  return true;
}

// Scores `data`'s examples [0, limit) chunk by chunk; each chunk pulls the dense parameters and
// the rows its examples touch, the newest (`point` null) or the point's (`releases`: the last
// chunk's read releases it, with keep when `scored.kept`). False when the shards answered
// another point (SamePoint); the caller finishes the set's sums either way.
absl::StatusOr<bool> ScoreChunks(const Scorer& s, workload::Workload& data, int64_t limit,
                                 bool releases, int64_t* point, Scored& scored) {
  for (int64_t begin = 0; begin < limit; begin += data.eval_chunk()) {
    const int64_t end = std::min(limit, begin + data.eval_chunk());
    SYNCOPATE_RETURN_IF_ERROR(data.PrepareEval(begin, end));
    const EvalPointRead read{.point = point == nullptr ? 0 : *point,
                             .release = releases && end == limit,
                             .keep = scored.kept};
    SYNCOPATE_ASSIGN_OR_RETURN(
        const PullStats pulled,
        point == nullptr ? s.parameters.PullAll(s.params, s.options.timeouts.pull,
                                                /*newest=*/true, &data.keys(), &s.rows)
                         : s.parameters.PullEvalPoint(read, s.params, s.options.timeouts.pull,
                                                      &data.keys(), &s.rows));
    if (point != nullptr && !SamePoint(pulled, scored, *point)) return false;
    if (scored.versions.empty()) scored.versions = pulled.versions;
    SYNCOPATE_RETURN_IF_ERROR(data.ScoreEval(s.params, s.rows));
  }
  return true;
}

// One evaluation: the validation set (when the job has one), whole, then the test set. Without
// `point`, the newest parameters (the versions reported are the first chunk's; the final
// evaluation runs after training stopped, so there every chunk sees the same parameters) and
// the whole test set. With `point`, an evaluation point's: every chunk of both sets reads the
// same point and the last one releases it; the test set's first s.point_test_examples only,
// unless the validation set chose the point as the version the job keeps (its test scores are
// then the run's result, so they are the whole set's). `*point` is 0 when a shard has none
// yet, and becomes the newer point to try when the shards or the chunks answered different ones
// (nothing is then reported). `kept_score`: the best validation score so far.
absl::StatusOr<Scored> Score(const Scorer& s, int64_t* point, std::optional<double> kept_score) {
  Scored scored;
  absl::Status unscored = absl::OkStatus();  // a set with nothing scored, reported last
  if (workload::Workload* validation = s.options.validation; validation != nullptr) {
    const absl::StatusOr<bool> complete =
        ScoreChunks(s, *validation, validation->eval_size(), /*releases=*/false, point, scored);
    // Always finished, so an abandoned pass leaves no partial sums behind.
    const absl::StatusOr<model::Evaluation> eval = validation->FinishEval();
    if (!complete.ok()) return complete.status();
    if (!*complete) return Scored{};
    if (eval.ok()) {
      scored.validation = MetricsOf(*eval);
      scored.kept =
          point != nullptr &&
          BetterThanKept(*scored.validation, s.options.quality_metric, kept_score).has_value();
    } else {
      unscored = eval.status();
    }
  }
  const bool sampled = point != nullptr && !scored.kept && s.point_test_examples > 0;
  const int64_t limit =
      sampled ? std::min(s.model.eval_size(), s.point_test_examples) : s.model.eval_size();
  const absl::StatusOr<bool> complete =
      ScoreChunks(s, s.model, limit, /*releases=*/true, point, scored);
  const absl::StatusOr<model::Evaluation> eval = s.model.FinishEval();
  if (!complete.ok()) return complete.status();
  if (!*complete) return Scored{};
  SYNCOPATE_RETURN_IF_ERROR(unscored);
  if (!eval.ok()) return eval.status();
  scored.eval = *eval;
  return scored;
}

// The best validation score of the evaluations before this evaluator joined (the coordinator's
// kept evaluation, which its welcome names); none for a fresh job.
std::optional<double> KeptScoreAtWelcome(const v1::Welcome& welcome, absl::string_view metric) {
  const std::optional<job::ValidationScore> kept =
      job::ValidationScoreOf(welcome.kept_eval(), metric);
  if (!kept.has_value()) return std::nullopt;
  return kept->value;
}

// Whether every shard has made point `next_point` yet, asked by a probe without rows: a model
// with embeddings would otherwise send its first chunk's keys with every poll (a dense-only
// model's first read is as small as a probe, and a probe that finds the point would fetch its
// dense part twice).
absl::StatusOr<bool> PointMade(ParameterStore& parameters, const EvaluatorOptions& options,
                               int64_t next_point, std::vector<float>& params) {
  SYNCOPATE_ASSIGN_OR_RETURN(const PullStats probe,
                             parameters.PullEvalPoint({.point = next_point}, params,
                                                      options.timeouts.pull, nullptr, nullptr));
  return !probe.eval_points.empty() &&
         *std::min_element(probe.eval_points.begin(), probe.eval_points.end()) > 0;
}

// The report of an evaluation `request` asked for (default: a point's, asked by nobody).
v1::WorkerMessage ReportOf(const Scored& scored, const v1::EvaluateNow& request) {
  v1::WorkerMessage report;
  v1::EvalReport* r = report.mutable_eval();
  r->set_accuracy(scored.eval.accuracy);
  r->set_loss(scored.eval.mean_loss);
  r->set_auc(scored.eval.auc);
  r->set_examples(scored.eval.examples);
  r->set_final(request.final());
  r->set_requested_at_examples(request.at_examples());
  r->set_requested_at_seconds(request.at_seconds());
  if (scored.point > 0) {
    r->set_point(scored.point);
    r->set_point_examples(scored.point_examples);
    r->set_point_age_seconds(absl::ToDoubleSeconds(absl::Now() - scored.point_made));
  }
  if (scored.validation.has_value()) *r->mutable_validation() = *scored.validation;
  for (int64_t v : scored.versions) r->add_shard_versions(v);
  return report;
}

void LogEvaluation(const Scored& scored, bool final) {
  LOG(INFO) << "accuracy " << scored.eval.accuracy << " auc " << scored.eval.auc << " on "
            << scored.eval.examples << " examples"
            << (scored.validation.has_value()
                    ? absl::StrCat(" (validation auc ", scored.validation->auc(), ")")
                    : "")
            << " at versions " << (scored.versions.empty() ? -1 : scored.versions[0])
            << (scored.point > 0 ? absl::StrCat(" (point ", scored.point, ")") : "")
            << (scored.kept ? " (kept)" : "") << (final ? " (final)" : "");
}

// How long to wait for the coordinator's next command before evaluating unasked: nothing when
// an evaluation is to be retried or the next point may be readable, the poll's interval while
// waiting for a point, and until `next_eval` for a job that evaluates by time.
absl::Duration CommandWait(bool by_points, bool point_pending, bool retry, absl::Time next_eval) {
  if (retry || (by_points && point_pending)) return absl::ZeroDuration();
  if (by_points) return kPointPoll;
  return std::max(absl::ZeroDuration(), next_eval - absl::Now());
}

void WaitToRetry(const EvaluatorOptions& options, rpc::Backoff& backoff) {
  if (options.wait) {
    options.wait(backoff.Next());
  } else {
    absl::SleepFor(backoff.Next());
  }
}

}  // namespace

absl::Status RunEvaluator(CoordinatorChannel& coordinator, workload::Workload& model,
                          ParameterStore& parameters, const EvaluatorOptions& options) {
  const v1::JobSpec& job = coordinator.welcome().job();
  std::vector<float> params(model.num_parameters());
  workload::TableRows rows;
  const Scorer scorer{.model = model,
                      .parameters = parameters,
                      .options = options,
                      .params = params,
                      .rows = rows,
                      .point_test_examples = job::EvalPointTestExamples(job)};
  rpc::Backoff backoff;
  const absl::Duration interval = absl::Seconds(job.eval().interval_seconds());
  absl::Time next_eval = absl::Now() + interval;
  // Evaluation points (EvalSpec) unless the job evaluates by time; a store without them (an old
  // shard release answers none) falls back to time.
  bool by_points = !job.eval().by_time() && job.eval().every_global_batches() > 0;
  int64_t next_point = 1;
  // A requested evaluation whose pull failed (a shard restarting) is tried again after the
  // backoff, not dropped: the coordinator asks for the final one once, and dropping it left the
  // job waiting out its finish timeout (fault matrix: a shard killed as training ended stalled
  // the job 120 s).
  std::optional<v1::EvaluateNow> retry;
  bool point_pending = false;  // the next point may be readable now: no wait for a command
  std::optional<double> kept_score =
      KeptScoreAtWelcome(coordinator.welcome(), options.quality_metric);
  while (!ShuttingDown(options)) {
    absl::StatusOr<std::optional<v1::CoordinatorToWorker>> command = coordinator.NextCommand(
        CommandWait(by_points, point_pending, retry.has_value(), next_eval));
    if (!command.ok()) return command.status();
    v1::EvaluateNow request;
    if (command->has_value()) {
      if ((*command)->has_stop()) return absl::OkStatus();
      if (!(*command)->has_evaluate()) continue;
      request = (*command)->evaluate();
      // A newer request replaces the one to retry, but never turns a final one into a
      // periodic one.
      if (retry.has_value() && retry->final() && !request.final()) request = *retry;
    } else if (retry.has_value()) {
      request = *retry;
    } else if (!by_points) {
      next_eval = absl::Now() + interval;
    }
    const bool requested = command->has_value() || retry.has_value();
    retry.reset();
    absl::Status connected = parameters.Connect(options.timeouts.connect);
    if (rpc::IsPermanentError(connected)) return connected;
    int64_t point = next_point;
    absl::StatusOr<Scored> scored = Scored{};
    if (!connected.ok()) scored = connected;
    if (connected.ok() && by_points && !requested && !point_pending &&
        !model.table_dims().empty()) {
      absl::StatusOr<bool> made = PointMade(parameters, options, next_point, params);
      if (made.ok() && !*made) continue;
      point_pending = made.ok();
      if (!made.ok()) scored = made.status();
    }
    if (scored.ok()) {
      point_pending = false;
      scored = Score(scorer, by_points && !requested ? &point : nullptr, kept_score);
    }
    if (absl::IsUnimplemented(scored.status()) && by_points && !requested) {
      LOG(WARNING) << "the shards keep no evaluation points; evaluating every "
                   << absl::FormatDuration(interval) << " instead";
      by_points = false;
      next_eval = absl::Now() + interval;
      continue;
    }
    if (rpc::IsPermanentError(scored.status())) return scored.status();
    if (!scored.ok()) {
      LOG(WARNING) << "evaluator pull failed: " << scored.status();
      if (requested) retry = request;
      WaitToRetry(options, backoff);
      continue;
    }
    if (by_points && !requested && scored->point == 0) {
      // Not reached yet (point 0: poll again) or a newer one to read at once.
      if (point > 0) {
        next_point = point;
        point_pending = true;
      }
      continue;
    }
    if (scored->point > 0) {
      next_point = scored->point + 1;
      point_pending = true;  // the evaluator may be behind: the next one may exist already
    }
    if (scored->validation.has_value()) {
      if (auto better = BetterThanKept(*scored->validation, options.quality_metric, kept_score)) {
        kept_score = better;
      }
    }
    coordinator.Send(ReportOf(*scored, request));
    LogEvaluation(*scored, request.final());
    if (request.final()) return AwaitJobDone(coordinator, options);
  }
  return absl::OkStatus();
}

}  // namespace syncopate::worker
