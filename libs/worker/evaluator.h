// The evaluator's loop: at every evaluation point (EvalSpec: the parameters as they were once
// each k-th global batch was applied, which the shards keep until it has read them), or every
// eval.interval_seconds for a job that evaluates by time, and when the coordinator asks (the
// final evaluation, of the newest parameters): pull the parameters chunk by chunk, score the
// evaluation set and report accuracy, loss and AUC with the shard versions measured, and for a
// point the examples applied at it and how long ago it was made; with a validation set, the
// same parameters' scores there too (the coordinator keeps the version that scores best). A
// point is polled for every 25 ms (a model with embeddings polls with a probe that carries no
// rows); an evaluator that falls behind skips to the newest point the shards keep. After the final
// report it stays until the coordinator says the job is done (bounded by `linger`): if the
// coordinator dies before recording the report, the channel breaks (UNAVAILABLE) and the caller
// rejoins the restarted coordinator, which asks again. Like the Trainer it sees the cluster only
// through CoordinatorChannel and ParameterStore. Thread-safety: thread-compatible (one thread runs
// it).
#ifndef SYNCOPATE_LIBS_WORKER_EVALUATOR_H_
#define SYNCOPATE_LIBS_WORKER_EVALUATOR_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "libs/worker/coordinator_channel.h"
#include "libs/worker/parameter_store.h"
#include "libs/worker/trainer.h"
#include "libs/workload/workload.h"

namespace syncopate::worker {

struct EvaluatorOptions {
  LoopTimeouts timeouts;
  // How long to wait for the coordinator's stop after the final report.
  absl::Duration linger = absl::Seconds(30);
  // The validation set (DatasetSpec.validation_path), scored with the same parameters before
  // the test set at every evaluation; null: none. Not owned.
  workload::Workload* validation = nullptr;
  // The job's quality metric (job::QualityMetric): what "best on validation" is judged by. A
  // point better there than every earlier evaluation is released as the version the job keeps
  // (the shards write it to kept/, ADR 0017).
  std::string quality_metric = "accuracy";
  InterruptibleWait wait;          // backoff waits (default: sleep)
  std::function<bool()> shutdown;  // polled: the process is shutting down
};

// Evaluates until the coordinator says stop or the final evaluation was reported (OK), shutdown
// is requested (OK), or an error ends the loop (a permanent refusal; UNAVAILABLE when the
// coordinator channel ended).
absl::Status RunEvaluator(CoordinatorChannel& coordinator, workload::Workload& model,
                          ParameterStore& parameters, const EvaluatorOptions& options);

}  // namespace syncopate::worker

#endif  // SYNCOPATE_LIBS_WORKER_EVALUATOR_H_
