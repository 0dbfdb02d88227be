// Trainer: a worker's training loop. Per step: take the coordinator's commands (leases, a new
// local batch, stop), keep two batches of leased examples on hand, pull the parameters (and the
// rows the batch touches), compute the gradient, push it, and report the step (examples, loss,
// compute-only / pull / push / barrier-wait seconds) to the coordinator, whose straggler
// detector feeds on the compute time.
//
// A failed pull or push is logged, backed off (rpc::Backoff) and the step started over; the
// examples of the failed step are not retried. A refusal retrying cannot fix
// (rpc::IsPermanentError) ends the loop with that error; so does the end of the coordinator
// channel (UNAVAILABLE) and no lease within lease_timeout (DEADLINE_EXCEEDED). Both are
// retryable: the caller (WorkerRunner) rejoins.
//
// It sees the cluster only through CoordinatorChannel and ParameterStore, so it runs in a unit
// test against in-memory fakes.
// Thread-safety: thread-compatible (one thread runs it).
#ifndef SYNCOPATE_LIBS_WORKER_TRAINER_H_
#define SYNCOPATE_LIBS_WORKER_TRAINER_H_

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "libs/worker/coordinator_channel.h"
#include "libs/worker/lease_buffer.h"
#include "libs/worker/parameter_store.h"
#include "libs/worker/slowdown_schedule.h"
#include "libs/worker/worker_metrics.h"
#include "libs/workload/workload.h"

namespace syncopate::rpc {
class Backoff;  // libs/rpc/grpc_util.h: the header stays free of gRPC
}  // namespace syncopate::rpc

namespace syncopate::worker {

struct LoopTimeouts {
  // Generous bounds: a sync pull legitimately waits for the slowest member's step, and the
  // coordinator removes a dead member within its silence timeout, well inside these.
  absl::Duration pull = absl::Seconds(120);
  absl::Duration push = absl::Seconds(60);
  absl::Duration connect = absl::Seconds(10);
  absl::Duration lease = absl::Seconds(60);
};

struct TrainerOptions {
  // Emulated machine slowness: compute is padded to this multiple of its real time (a sleep,
  // not a spin: a slower machine, not a busier one).
  SlowdownSchedule slowdown;
  // A floor on each step's (padded) compute time: the job then lasts at least its steps times
  // this on any machine, however fast, so a test or a bench can act while it runs without its
  // outcome depending on the machine's speed. Zero: no floor.
  absl::Duration min_step_time = absl::ZeroDuration();
  WorkerMetrics* metrics = nullptr;  // null: counts nothing
  LoopTimeouts timeouts;
  // Backoff waits; the default sleeps and never asks to stop.
  InterruptibleWait wait;
  // Polled at the top of every step: the process is shutting down.
  std::function<bool()> shutdown;
};

class Trainer {
 public:
  Trainer(CoordinatorChannel& coordinator, workload::Workload& model, ParameterStore& parameters,
          TrainerOptions options);

  // Trains until the coordinator says stop (OK), shutdown is requested (OK), or an error ends
  // the loop (see above).
  absl::Status Run();

 private:
  // Applies queued commands, waiting up to `wait` for the first. False once told to stop.
  absl::StatusOr<bool> HandleCommands(absl::Duration wait);
  // Keeps at least two batches of leased examples, asking for the next block ahead of time.
  // False when told to stop or shutting down while waiting.
  absl::StatusOr<bool> EnsureData();
  // Applies the commands that arrived and, with no batch on hand, takes the next into `batch`.
  // False when the loop ends: told to stop, or no data (EnsureData).
  absl::StatusOr<bool> PrepareStep(std::vector<int64_t>& batch);
  // After a failed pull or push that retrying may fix: logs it and backs off, unless it was
  // cancelled (stopping: the loop head decides). The step then starts over.
  void RetryLater(const absl::Status& failure, absl::string_view what, rpc::Backoff& backoff);
  // Takes the next local batch of leased examples into `batch` and prepares the model for it.
  absl::Status TakeBatch(std::vector<int64_t>& batch);
  // The loss and the compute's seconds, padded to the slowdown at this time of training and to
  // options_.min_step_time, as the step reports them.
  struct ComputedStep {
    float loss = 0;
    double seconds = 0;
  };
  // The gradient of the prepared batch at `params` and `rows`, into `grad` and `row_grads`.
  absl::StatusOr<ComputedStep> Compute(std::span<const float> params,
                                       const workload::TableRows& rows, std::span<float> grad,
                                       workload::TableRows& row_grads, absl::Time training_start);
  // The pull that came with a push, for the next batch: true once it is in `pulled`, false
  // when it failed and the next step pulls again; a permanent error ends the loop.
  absl::StatusOr<bool> AdoptNextPull(absl::StatusOr<PullStats> next_pull, PullStats& pulled);
  // The step's report to the coordinator, and the worker's metrics.
  void ReportStep(int64_t step, int64_t examples, float loss, const StepTimes& times,
                  int64_t token);
  bool Wait(absl::Duration d);
  bool ShuttingDown() const;

  CoordinatorChannel& coordinator_;
  workload::Workload& model_;
  ParameterStore& parameters_;
  TrainerOptions options_;
  WorkerMetrics* const metrics_;
  int64_t local_batch_ = 0;
  LeaseBuffer leased_;
};

}  // namespace syncopate::worker

#endif  // SYNCOPATE_LIBS_WORKER_TRAINER_H_
