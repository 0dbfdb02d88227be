#include "libs/worker/worker_runner.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "libs/rpc/grpc_util.h"
#include "libs/runtime/process_runtime.h"

namespace syncopate::worker {

WorkerRunner::WorkerRunner(ChannelOpener open, RoleLife role, WorkerRunnerOptions options)
    : open_(std::move(open)), role_(std::move(role)), options_(std::move(options)) {}

bool WorkerRunner::ShuttingDown() const { return options_.shutdown && options_.shutdown(); }

WorkerExit WorkerRunner::Interrupted() {
  return {runtime::kExitInterrupted,
          absl::StrCat("stopped before the job ended (exit ", runtime::kExitInterrupted,
                       "): SIGTERM or SIGINT")};
}

bool WorkerRunner::Wait(absl::Duration d) {
  if (options_.wait) return options_.wait(d);
  absl::SleepFor(d);
  return false;
}

std::unique_ptr<CoordinatorChannel> WorkerRunner::Join(const v1::WorkerHello& hello,
                                                       WorkerExit& exit) {
  Clock& clock = *options_.clock;
  const absl::Time give_up = clock.Now() + options_.join_timeout;
  rpc::Backoff backoff(options_.backoff_initial, options_.backoff_max, options_.backoff_seed);
  while (!ShuttingDown()) {
    // At least a second per attempt: a welcome needs a round trip even when the budget is spent.
    absl::StatusOr<std::unique_ptr<CoordinatorChannel>> opened =
        open_(hello, std::max(absl::Seconds(1), give_up - clock.Now()));
    if (opened.ok()) return *std::move(opened);
    if (ShuttingDown()) break;  // the wait for the welcome ended on our own SIGTERM
    const absl::Status& status = opened.status();
    if (absl::IsOutOfRange(status)) {
      // The job ended before this worker (re)joined: nothing left to do, which is success.
      LOG(INFO) << status.message() << ": nothing to do";
      exit = {0, ""};
      return nullptr;
    }
    if (!rpc::IsRetryable(status)) {
      exit = {runtime::kExitRefused, std::string(status.message())};
      return nullptr;
    }
    if (clock.Now() >= give_up) {
      exit = {1, "could not join: " + status.ToString()};
      return nullptr;
    }
    if (Wait(backoff.Next())) break;
  }
  exit = Interrupted();  // shutdown requested while joining
  return nullptr;
}

WorkerExit WorkerRunner::Run(v1::WorkerHello hello) {
  Clock& clock = *options_.clock;
  rpc::Backoff rejoin_backoff(options_.backoff_initial, options_.backoff_max,
                              options_.backoff_seed + 1);
  int quick_rejoins = 0;
  for (;;) {
    WorkerExit exit;
    std::unique_ptr<CoordinatorChannel> channel = Join(hello, exit);
    if (channel == nullptr) return exit;
    LOG(INFO) << hello.name() << (joins_ == 0 ? " joined" : " rejoined") << " as "
              << channel->welcome().worker_id();
    ++joins_;
    // A rejoin (after the coordinator restarted) names the job we were in: a coordinator now
    // running another job refuses us rather than handing us its model.
    hello.set_job_id(channel->welcome().job().job_id());
    const absl::Time life_start = clock.Now();
    const absl::Status status = role_(*channel);
    if (!status.ok() && !rpc::IsRetryable(status) && !ShuttingDown()) {
      // Failing for good: the coordinator's status (and so `syncopate status` and a Kubernetes
      // user's view of the job) carries the reason, not only this process's log.
      v1::WorkerMessage goodbye;
      goodbye.mutable_goodbye()->set_reason(status.ToString());
      channel->Send(goodbye);
    }
    // Whether the coordinator ended the job (its Stop): then a SIGTERM that arrived meanwhile
    // does not make the exit an interruption.
    const bool job_ended = channel->job_ended();
    channel.reset();  // ends the session (and its heartbeat) before a rejoin opens the next
    if (ShuttingDown()) {
      if (!status.ok()) LOG(INFO) << "shutting down (" << status << ")";
      return job_ended ? WorkerExit{0, ""} : Interrupted();
    }
    if (status.ok()) return {0, ""};
    if (!rpc::IsRetryable(status)) return {1, status.ToString()};
    if (clock.Now() - life_start >= options_.stable_life) {
      quick_rejoins = 0;
      rejoin_backoff.Reset();
    }
    if (++quick_rejoins > options_.max_quick_rejoins) {
      return {1, absl::StrCat("gave up after ", options_.max_quick_rejoins,
                              " rejoins in a row, each life shorter than ",
                              absl::FormatDuration(options_.stable_life),
                              "; last: ", status.ToString())};
    }
    LOG(WARNING) << "rejoining after a retryable error (" << status << ")";
    if (Wait(rejoin_backoff.Next())) return Interrupted();
  }
}

}  // namespace syncopate::worker
