#include "libs/worker/evaluator.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "glog/logging.h"
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

}  // namespace

absl::Status RunEvaluator(CoordinatorChannel& coordinator, workload::Workload& model,
                          ParameterStore& parameters, const EvaluatorOptions& options) {
  const v1::JobSpec& job = coordinator.welcome().job();
  std::vector<float> params(model.num_parameters());
  workload::TableRows rows;
  rpc::Backoff backoff;
  const absl::Duration interval = absl::Seconds(job.eval().interval_seconds());
  absl::Time next_eval = absl::Now() + interval;
  // A requested evaluation whose pull failed (a shard restarting) is tried again after the
  // backoff, not dropped: the coordinator asks for the final one once, and dropping it left the
  // job waiting out its finish timeout (fault matrix: a shard killed as training ended stalled
  // the job 120 s).
  std::optional<v1::EvaluateNow> retry;
  while (!ShuttingDown(options)) {
    absl::StatusOr<std::optional<v1::CoordinatorToWorker>> command = coordinator.NextCommand(
        retry.has_value() ? absl::ZeroDuration()
                          : std::max(absl::ZeroDuration(), next_eval - absl::Now()));
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
    } else {
      next_eval = absl::Now() + interval;
    }
    const bool requested = command->has_value() || retry.has_value();
    retry.reset();
    absl::Status connected = parameters.Connect(options.timeouts.connect);
    if (rpc::IsPermanentError(connected)) return connected;
    // Chunk by chunk: each pulls the newest dense parameters and the rows its examples touch.
    // The versions reported are the first chunk's (the final evaluation runs after training
    // stopped, so there every chunk sees the same parameters).
    absl::Status scored = connected;
    std::vector<int64_t> versions;
    for (int64_t begin = 0; scored.ok() && begin < model.eval_size(); begin += model.eval_chunk()) {
      scored = model.PrepareEval(begin, std::min(model.eval_size(), begin + model.eval_chunk()));
      if (!scored.ok()) break;
      absl::StatusOr<PullStats> pulled =
          parameters.PullAll(params, options.timeouts.pull, /*newest=*/true, &model.keys(), &rows);
      if (!pulled.ok()) {
        scored = pulled.status();
        break;
      }
      if (versions.empty()) versions = pulled->versions;
      scored = model.ScoreEval(params, rows);
    }
    absl::StatusOr<model::Evaluation> eval = model.FinishEval();
    if (rpc::IsPermanentError(scored)) return scored;
    if (!scored.ok()) {
      LOG(WARNING) << "evaluator pull failed: " << scored;
      if (requested) retry = request;
      if (options.wait) {
        options.wait(backoff.Next());
      } else {
        absl::SleepFor(backoff.Next());
      }
      continue;
    }
    if (!eval.ok()) return eval.status();
    v1::WorkerMessage report;
    v1::EvalReport* r = report.mutable_eval();
    r->set_accuracy(eval->accuracy);
    r->set_loss(eval->mean_loss);
    r->set_auc(eval->auc);
    r->set_examples(eval->examples);
    r->set_final(request.final());
    r->set_requested_at_examples(request.at_examples());
    r->set_requested_at_seconds(request.at_seconds());
    for (int64_t v : versions) r->add_shard_versions(v);
    coordinator.Send(report);
    LOG(INFO) << "accuracy " << eval->accuracy << " auc " << eval->auc << " at versions "
              << (versions.empty() ? -1 : versions[0]) << (request.final() ? " (final)" : "");
    if (request.final()) return AwaitJobDone(coordinator, options);
  }
  return absl::OkStatus();
}

}  // namespace syncopate::worker
