// WorkerRunner: a worker's (or evaluator's) life cycle around its loop — join the job, run the
// role, and when the role ends with a retryable error, rejoin under the same name and job id.
// It decides the process's exit code; the service main only wires flags, the real
// CoordinatorSession and the role to it.
//
// The decisions, each by rpc::IsRetryable (the one retry policy, libs/rpc/grpc_util.h):
//   join OK, role OK                       -> exit 0 (the coordinator said stop)
//   join OUT_OF_RANGE                      -> exit 0: the job ended before we (re)joined; a batch
//                                             system must not count a late worker as failed
//   join error, permanent                  -> exit runtime::kExitRefused (3) with the error as
//                                             one line: the coordinator refused our hello (a
//                                             wrong join token, another job, a bad role), and a
//                                             restart with the same flags meets the same answer
//   role error, permanent                  -> exit 1 with the error as one line (below)
//   join error, retryable                  -> retry with backoff until join_timeout, then exit 1
//   role error, retryable                  -> rejoin (same name, so the same worker id, and the
//                                             job id of the welcome), after a backoff
//   shutdown requested (SIGTERM, SIGINT)   -> exit runtime::kExitInterrupted (143) with one line,
//                                             whatever the role returned, unless the
//                                             coordinator had ended the job (exit 0). Not 0: a
//                                             worker evicted mid-job by a drain, a lost node or
//                                             a scale-down is not a completion, and a worker
//                                             Job (work queue, no completions) starts no new
//                                             pod after its first success (ADR 0006)
//
// "No data lease within the lease timeout" (Trainer, DEADLINE_EXCEEDED) is retryable like any
// other timeout, so the runner rejoins. Decided on purpose: the session is open but the
// coordinator gives nothing, and a fresh hello settles what is wrong in one bounded step — the
// coordinator supersedes the old session (releasing its leases) and welcomes us, or says the job
// is over (exit 0), or refuses (exit 3), or does not answer within join_timeout (exit 1).
// Exiting 1 instead would only hand the same rejoin to the supervisor (or Kubernetes) after a
// process restart.
//
// Every wait is bounded: each join by join_timeout; the rejoins by max_quick_rejoins — a role
// that keeps ending with retryable errors, each life shorter than stable_life (a coordinator
// that welcomes but never leases, or crash-loops), ends the worker with exit 1 after that many
// rejoins in a row. A life of at least stable_life resets the count, so a long job survives any
// number of coordinator restarts spread over time.
//
// A role's permanent error is not a refusal of the process: it ends this worker (the goodbye
// names it in the coordinator's status, which re-issues its leases) while the job goes on, and it
// may be the user's model code raising on one batch (ADR 0013) or a shard that runs another
// job. Exit 1 leaves a retry to the batch system; exit 3 makes a Kubernetes podFailurePolicy fail
// the whole Job, which only the coordinator's refusal deserves.
//
// Thread-safety: thread-compatible (one thread calls Run).
#ifndef SYNCOPATE_LIBS_WORKER_WORKER_RUNNER_H_
#define SYNCOPATE_LIBS_WORKER_WORKER_RUNNER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "libs/common/clock.h"
#include "libs/worker/coordinator_channel.h"
#include "libs/worker/trainer.h"
#include "syncopate/v1/coordinator.pb.h"

namespace syncopate::worker {

// Says `hello` and waits up to the duration for the welcome (CoordinatorSession::Open).
using ChannelOpener = std::function<absl::StatusOr<std::unique_ptr<CoordinatorChannel>>(
    const v1::WorkerHello& hello, absl::Duration timeout)>;
// One life of the role on a welcomed channel (a Trainer or RunEvaluator run).
using RoleLife = std::function<absl::Status(CoordinatorChannel& channel)>;

struct WorkerRunnerOptions {
  // Give up joining when no welcome arrives within this time (--join_timeout_seconds).
  absl::Duration join_timeout = absl::Seconds(600);
  // Waits between join attempts and before a rejoin (rpc::Backoff, full jitter).
  absl::Duration backoff_initial = absl::Milliseconds(200);
  absl::Duration backoff_max = absl::Seconds(5);
  uint64_t backoff_seed = std::random_device{}();
  // The rejoin bound (see the header comment). 10 lives that end within 5 minutes each: a
  // worker whose lease requests go unanswered gives up after about 10 × (60 s + backoff).
  int max_quick_rejoins = 10;
  absl::Duration stable_life = absl::Minutes(5);
  // Measures join deadlines and life lengths; not owned.
  Clock* clock = Clock::Real();
  // Backoff waits; true once the process should stop. The default sleeps and never stops.
  InterruptibleWait wait;
  // Polled between steps: the process is shutting down.
  std::function<bool()> shutdown;
};

struct WorkerExit {
  int code = 0;
  // Why, in one line: empty on a normal exit, the error otherwise.
  std::string message;
};

class WorkerRunner {
 public:
  WorkerRunner(ChannelOpener open, RoleLife role, WorkerRunnerOptions options);

  // Joins with `hello` and runs the role until the job is over, the process shuts down or an
  // error the runner cannot recover from.
  WorkerExit Run(v1::WorkerHello hello);

  // Welcomes so far (the first join plus the rejoins); for tests and logs.
  int joins() const { return joins_; }

 private:
  // A welcomed channel; null with `exit` set when the runner must stop (job over, refused,
  // join timeout, shutdown).
  std::unique_ptr<CoordinatorChannel> Join(const v1::WorkerHello& hello, WorkerExit& exit);
  // The exit of a process stopped (SIGTERM, SIGINT) before its job ended.
  static WorkerExit Interrupted();
  bool ShuttingDown() const;
  bool Wait(absl::Duration d);

  const ChannelOpener open_;
  const RoleLife role_;
  const WorkerRunnerOptions options_;
  int joins_ = 0;
};

}  // namespace syncopate::worker

#endif  // SYNCOPATE_LIBS_WORKER_WORKER_RUNNER_H_
