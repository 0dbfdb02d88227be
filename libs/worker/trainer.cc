#include "libs/worker/trainer.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "glog/logging.h"
#include "libs/rpc/grpc_util.h"

namespace syncopate::worker {
namespace {

double Seconds(absl::Time since) { return absl::ToDoubleSeconds(absl::Now() - since); }

}  // namespace

Trainer::Trainer(CoordinatorChannel& coordinator, workload::Workload& model,
                 ParameterStore& parameters, TrainerOptions options)
    : coordinator_(coordinator),
      model_(model),
      parameters_(parameters),
      options_(std::move(options)),
      metrics_(options_.metrics != nullptr ? options_.metrics : WorkerMetrics::NoOp()) {}

bool Trainer::Wait(absl::Duration d) {
  if (options_.wait) return options_.wait(d);
  absl::SleepFor(d);
  return ShuttingDown();
}

bool Trainer::ShuttingDown() const { return options_.shutdown && options_.shutdown(); }

absl::Status Trainer::Run() {
  const v1::Welcome& welcome = coordinator_.welcome();
  local_batch_ = welcome.local_batch();
  const LoopTimeouts& timeouts = options_.timeouts;
  std::vector<float> params(model_.num_parameters());
  std::vector<float> grad(model_.num_parameters());
  workload::TableRows rows, row_grads;
  std::vector<int64_t> batch;  // kept across a failed pull: its examples are already leased
  // `params` and `rows` hold a pull for `batch`: the last step's push fetched them.
  bool pulled_for_batch = false;
  PullStats pulled;
  double pull_seconds = 0;
  rpc::Backoff backoff;
  const absl::Time training_start = absl::Now();
  LOG(INFO) << "worker " << welcome.worker_id() << " training with local batch " << local_batch_;

  for (int64_t step = 0; !ShuttingDown(); ++step) {
    if (batch.empty()) pulled_for_batch = false;  // a batch not yet taken has no pull
    absl::StatusOr<bool> ready = PrepareStep(batch);
    if (!ready.ok()) return ready.status();
    if (!*ready) return absl::OkStatus();

    absl::Status connected = parameters_.Connect(timeouts.connect);
    if (rpc::IsPermanentError(connected)) return connected;
    if (!connected.ok()) {
      LOG(WARNING) << connected;
      pulled_for_batch = false;
      Wait(backoff.Next());
      continue;
    }
    if (!pulled_for_batch) {
      const absl::Time pull_start = absl::Now();
      absl::StatusOr<PullStats> pull =
          parameters_.PullAll(params, timeouts.pull, /*newest=*/false, &model_.keys(), &rows);
      if (rpc::IsPermanentError(pull.status())) return pull.status();
      if (!pull.ok()) {
        RetryLater(pull.status(), "pull", backoff);
        continue;
      }
      pulled = *std::move(pull);
      pull_seconds = Seconds(pull_start) - pulled.held_seconds;
    }

    const int64_t b = static_cast<int64_t>(batch.size());
    batch.clear();
    pulled_for_batch = false;
    absl::StatusOr<ComputedStep> computed = Compute(params, rows, grad, row_grads, training_start);
    if (!computed.ok()) return computed.status();
    const int64_t token = parameters_.token(0);
    const double held_seconds = pulled.held_seconds;

    // The next batch, when one is already leased, is chosen now so that its pull can follow this
    // push in the same exchange (ParameterStore::PushAllThenPull). Commands that arrived during
    // the step apply first, as they would at the loop head; a stop ends the loop after the push.
    absl::StatusOr<bool> keep_going = HandleCommands(absl::ZeroDuration());
    if (!keep_going.ok()) return keep_going.status();
    const bool stop_after_push = !*keep_going;
    if (!stop_after_push && leased_.size() >= local_batch_) {
      if (absl::Status taken = TakeBatch(batch); !taken.ok()) return taken;
    }
    const absl::Time push_start = absl::Now();
    absl::StatusOr<PullStats> next_pull = absl::UnknownError("not pulled");
    absl::StatusOr<PushStats> pushed =
        batch.empty()
            ? parameters_.PushAll(grad, b, timeouts.push, &row_grads)
            : parameters_.PushAllThenPull(grad, b, timeouts.push, &row_grads,
                                          NextPull{params, &model_.keys(), &rows, &next_pull});
    const double exchange_seconds = Seconds(push_start);
    if (!pushed.ok()) {
      if (rpc::IsPermanentError(pushed.status())) return pushed.status();
      if (stop_after_push) return absl::OkStatus();  // the stop is consumed: honour it here
      RetryLater(pushed.status(), "push", backoff);
      continue;
    }
    for (const v1::PushAck& rejection : pushed->rejections) {
      LOG(WARNING) << "push rejected: " << rejection.message();
    }
    backoff.Reset();
    const double push_seconds = batch.empty() ? exchange_seconds : pushed->ack_seconds;
    if (!batch.empty()) {
      absl::StatusOr<bool> adopted = AdoptNextPull(std::move(next_pull), pulled);
      if (!adopted.ok()) return adopted.status();
      pulled_for_batch = *adopted;
    }

    ReportStep(step, b, computed->loss,
               StepTimes{computed->seconds, pull_seconds, push_seconds, held_seconds}, token);
    if (stop_after_push) return absl::OkStatus();
    // The pull that came with this push is the next step's: its time is the exchange's rest.
    if (pulled_for_batch) {
      pull_seconds = std::max(0.0, exchange_seconds - push_seconds - pulled.held_seconds);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> Trainer::PrepareStep(std::vector<int64_t>& batch) {
  absl::StatusOr<bool> keep_going = HandleCommands(absl::ZeroDuration());
  if (!keep_going.ok() || !*keep_going) return keep_going;
  if (!batch.empty()) return true;
  absl::StatusOr<bool> have_data = EnsureData();
  if (!have_data.ok() || !*have_data) return have_data;
  if (absl::Status taken = TakeBatch(batch); !taken.ok()) return taken;
  return true;
}

void Trainer::RetryLater(const absl::Status& failure, absl::string_view what,
                         rpc::Backoff& backoff) {
  if (absl::IsCancelled(failure)) return;  // stopping: the loop head decides
  LOG(WARNING) << what << " failed: " << failure;
  Wait(backoff.Next());
}

absl::Status Trainer::TakeBatch(std::vector<int64_t>& batch) {
  leased_.Take(local_batch_, batch);
  // The rows to pull depend on the batch, so it is chosen before the pull.
  return model_.PrepareTrain(batch);
}

absl::StatusOr<Trainer::ComputedStep> Trainer::Compute(std::span<const float> params,
                                                       const workload::TableRows& rows,
                                                       std::span<float> grad,
                                                       workload::TableRows& row_grads,
                                                       absl::Time training_start) {
  const absl::Time compute_start = absl::Now();
  absl::StatusOr<float> loss = model_.TrainStep(params, rows, grad, row_grads);
  if (!loss.ok()) return loss.status();
  const double compute_seconds = Seconds(compute_start);
  const double slowdown = options_.slowdown.At(absl::Now() - training_start);
  // Sleep rather than spin: a slower machine, not a busier one.
  const absl::Duration padded_to =
      std::max(absl::Seconds(compute_seconds * slowdown), options_.min_step_time);
  absl::SleepFor(padded_to - (absl::Now() - compute_start));
  return ComputedStep{*loss, Seconds(compute_start)};
}

absl::StatusOr<bool> Trainer::AdoptNextPull(absl::StatusOr<PullStats> next_pull,
                                            PullStats& pulled) {
  if (next_pull.ok()) {
    pulled = *std::move(next_pull);
    return true;
  }
  if (rpc::IsPermanentError(next_pull.status())) return next_pull.status();
  if (!absl::IsCancelled(next_pull.status())) {
    LOG(WARNING) << "pull failed: " << next_pull.status();
  }
  return false;
}

void Trainer::ReportStep(int64_t step, int64_t examples, float loss, const StepTimes& times,
                         int64_t token) {
  v1::WorkerMessage report;
  v1::StepReport* r = report.mutable_step();
  r->set_step(step);
  r->set_examples(examples);
  r->set_loss(loss);
  r->set_compute_seconds(times.compute);
  r->set_pull_seconds(times.pull);
  r->set_push_seconds(times.push);
  r->set_wait_seconds(times.wait);
  r->set_token(token);
  *r->mutable_wire() = parameters_.wire_bytes();
  coordinator_.Send(report);
  metrics_->RecordStep(examples, loss, times, r->wire());
}

absl::StatusOr<bool> Trainer::HandleCommands(absl::Duration wait) {
  for (;;) {
    absl::StatusOr<std::optional<v1::CoordinatorToWorker>> command = coordinator_.NextCommand(wait);
    if (!command.ok()) return command.status();
    if (!command->has_value()) return true;
    wait = absl::ZeroDuration();
    const v1::CoordinatorToWorker& c = **command;
    if (c.has_stop()) {
      LOG(INFO) << "stopping: " << c.stop().reason();
      return false;
    }
    if (c.has_lease()) leased_.Add(c.lease());
    if (c.has_set_local_batch()) {
      local_batch_ = c.set_local_batch().local_batch();
      LOG(INFO) << "local batch is now " << local_batch_;
    }
  }
}

absl::StatusOr<bool> Trainer::EnsureData() {
  const absl::Time deadline = absl::Now() + options_.timeouts.lease;
  while (leased_.size() < 2 * local_batch_) {
    if (!leased_.request_outstanding()) coordinator_.Send(leased_.NextRequest());
    if (leased_.size() >= local_batch_) return true;
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError("no data lease from the coordinator");
    }
    absl::StatusOr<bool> keep_going = HandleCommands(absl::Milliseconds(200));
    if (!keep_going.ok() || !*keep_going) return keep_going;
    if (ShuttingDown()) return false;
  }
  return true;
}

}  // namespace syncopate::worker
