#include "libs/worker/evaluator.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "libs/job/kept_evaluation.h"
#include "libs/rpc/grpc_util.h"

namespace syncopate::worker {
namespace {

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

// One evaluation pass: the validation set (when the job has one), then the test set, chunk by
// chunk; each chunk pulls the dense parameters and the rows its examples touch. Without `point`,
// the newest parameters (the versions reported are the first chunk's; the final evaluation runs
// after training stopped, so there every chunk sees the same parameters). With `point`, an
// evaluation point's: every chunk of both sets reads the same point, and the last one releases
// it; `*point` is 0 when a shard has none yet, and becomes the newer point to try when the shards
// or the chunks answered different ones (the scores are then not reported).
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

// `kept_score`: the best validation score so far; a point that beats it is released with keep.
absl::StatusOr<Scored> Score(workload::Workload& model, ParameterStore& parameters,
                             const EvaluatorOptions& options, std::vector<float>& params,
                             workload::TableRows& rows, int64_t* point,
                             std::optional<double> kept_score) {
  std::vector<workload::Workload*> sets;
  if (options.validation != nullptr) sets.push_back(options.validation);
  sets.push_back(&model);
  Scored scored;
  absl::Status status = absl::OkStatus();
  bool complete = true;
  std::vector<absl::StatusOr<model::Evaluation>> evals;
  for (size_t set = 0; set < sets.size() && status.ok() && complete; ++set) {
    workload::Workload& data = *sets[set];
    const bool last_set = set + 1 == sets.size();
    for (int64_t begin = 0; status.ok() && begin < data.eval_size(); begin += data.eval_chunk()) {
      const int64_t end = std::min(data.eval_size(), begin + data.eval_chunk());
      status = data.PrepareEval(begin, end);
      if (!status.ok()) break;
      absl::StatusOr<PullStats> pulled =
          point == nullptr
              ? parameters.PullAll(params, options.timeouts.pull, /*newest=*/true, &data.keys(),
                                   &rows)
              : parameters.PullEvalPoint({.point = *point,
                                          .release = last_set && end == data.eval_size(),
                                          .keep = scored.kept},
                                         params, options.timeouts.pull, &data.keys(), &rows);
      if (!pulled.ok()) {
        status = pulled.status();
        break;
      }
      if (point != nullptr) {
        const auto [lowest, highest] =
            std::minmax_element(pulled->eval_points.begin(), pulled->eval_points.end());
        if (pulled->eval_points.empty() || *lowest == 0) {
          *point = 0;  // not reached everywhere yet
          complete = false;
          break;
        }
        if (*lowest != *highest || (scored.point != 0 && *highest != scored.point)) {
          *point = *highest;  // a shard or a later chunk moved on: read that one whole
          complete = false;
          break;
        }
        if (scored.point == 0) {
          scored.point = *highest;
          scored.point_examples =
              *std::max_element(pulled->point_examples.begin(), pulled->point_examples.end());
          // Every shard had made it once the last one did: the youngest age.
          scored.point_made =
              absl::Now() - absl::Seconds(*std::min_element(pulled->point_age_seconds.begin(),
                                                            pulled->point_age_seconds.end()));
        }
      }
      if (scored.versions.empty()) scored.versions = pulled->versions;
      status = data.ScoreEval(params, rows);
    }
    // Always finished, so an abandoned pass leaves no partial sums behind.
    evals.push_back(data.FinishEval());
    // The validation set is scored first: a point better there than every earlier one is
    // released (by the test set's last read) as the version the job keeps.
    if (options.validation != nullptr && set == 0 && status.ok() && complete && evals.back().ok()) {
      scored.validation = MetricsOf(*evals.back());
      scored.kept =
          point != nullptr &&
          BetterThanKept(*scored.validation, options.quality_metric, kept_score).has_value();
    }
  }
  if (!status.ok()) return status;
  if (!complete) return Scored{};
  for (const absl::StatusOr<model::Evaluation>& eval : evals) {
    if (!eval.ok()) return eval.status();
  }
  scored.eval = *evals.back();
  return scored;
}

}  // namespace

absl::Status RunEvaluator(CoordinatorChannel& coordinator, workload::Workload& model,
                          ParameterStore& parameters, const EvaluatorOptions& options) {
  const v1::JobSpec& job = coordinator.welcome().job();
  std::vector<float> params(model.num_parameters());
  workload::TableRows rows;
  rpc::Backoff backoff;
  const absl::Duration interval = absl::Seconds(job.eval().interval_seconds());
  absl::Time next_eval = absl::Now() + interval;
  // Evaluation points (EvalSpec) unless the job evaluates by time; a store without them (an old
  // shard release answers none) falls back to time.
  bool by_points = !job.eval().by_time() && job.eval().every_global_batches() > 0;
  int64_t next_point = 1;
  // How often the evaluator asks whether the next point exists: the point carries the time it
  // was made, so this only bounds how soon after it the evaluation starts.
  constexpr absl::Duration kPointPoll = absl::Milliseconds(25);
  // A requested evaluation whose pull failed (a shard restarting) is tried again after the
  // backoff, not dropped: the coordinator asks for the final one once, and dropping it left the
  // job waiting out its finish timeout (fault matrix: a shard killed as training ended stalled
  // the job 120 s).
  std::optional<v1::EvaluateNow> retry;
  bool point_pending = false;  // the next point may be readable now: no wait for a command
  // The best validation score so far (the coordinator's kept evaluation on a rejoin).
  std::optional<double> kept_score;
  if (std::optional<job::ValidationScore> kept =
          job::ValidationScoreOf(coordinator.welcome().kept_eval(), options.quality_metric)) {
    kept_score = kept->value;
  }
  while (!ShuttingDown(options)) {
    absl::Duration wait = std::max(absl::ZeroDuration(), next_eval - absl::Now());
    if (by_points) wait = point_pending ? absl::ZeroDuration() : kPointPoll;
    if (retry.has_value()) wait = absl::ZeroDuration();
    absl::StatusOr<std::optional<v1::CoordinatorToWorker>> command = coordinator.NextCommand(wait);
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
      // A probe without rows: a model with embeddings would otherwise send its first chunk's
      // keys with every poll (a dense-only model's first read is as small as a probe, and a
      // probe that finds the point would fetch its dense part twice).
      absl::StatusOr<PullStats> probe = parameters.PullEvalPoint(
          {.point = next_point}, params, options.timeouts.pull, nullptr, nullptr);
      if (probe.ok()) {
        point_pending = !probe->eval_points.empty() &&
                        *std::min_element(probe->eval_points.begin(), probe->eval_points.end()) > 0;
        if (!point_pending) continue;
      } else {
        scored = probe.status();
      }
    }
    if (scored.ok()) {
      point_pending = false;
      scored = Score(model, parameters, options, params, rows,
                     by_points && !requested ? &point : nullptr, kept_score);
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
      if (options.wait) {
        options.wait(backoff.Next());
      } else {
        absl::SleepFor(backoff.Next());
      }
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
    v1::WorkerMessage report;
    v1::EvalReport* r = report.mutable_eval();
    r->set_accuracy(scored->eval.accuracy);
    r->set_loss(scored->eval.mean_loss);
    r->set_auc(scored->eval.auc);
    r->set_examples(scored->eval.examples);
    r->set_final(request.final());
    r->set_requested_at_examples(request.at_examples());
    r->set_requested_at_seconds(request.at_seconds());
    if (scored->point > 0) {
      r->set_point(scored->point);
      r->set_point_examples(scored->point_examples);
      r->set_point_age_seconds(absl::ToDoubleSeconds(absl::Now() - scored->point_made));
      next_point = scored->point + 1;
      point_pending = true;  // the evaluator may be behind: the next one may exist already
    }
    if (scored->validation.has_value()) {
      if (const std::optional<double> better =
              BetterThanKept(*scored->validation, options.quality_metric, kept_score)) {
        kept_score = better;
      }
      *r->mutable_validation() = *scored->validation;
    }
    for (int64_t v : scored->versions) r->add_shard_versions(v);
    coordinator.Send(report);
    LOG(INFO) << "accuracy " << scored->eval.accuracy << " auc " << scored->eval.auc
              << (scored->validation.has_value()
                      ? absl::StrCat(" (validation auc ", scored->validation->auc(), ")")
                      : "")
              << " at versions " << (scored->versions.empty() ? -1 : scored->versions[0])
              << (scored->point > 0 ? absl::StrCat(" (point ", scored->point, ")") : "")
              << (scored->kept ? " (kept)" : "") << (request.final() ? " (final)" : "");
    if (request.final()) return AwaitJobDone(coordinator, options);
  }
  return absl::OkStatus();
}

}  // namespace syncopate::worker
