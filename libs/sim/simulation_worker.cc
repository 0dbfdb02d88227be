#include <algorithm>
#include <memory>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "libs/common/mode_rules.h"
#include "libs/sim/simulation_impl.h"
#include "libs/tensor/packed.h"

namespace syncopate::sim::internal {

void Simulation::StartStep(SimWorker& w) {
  if (w.state == WorkerState::kDead || w.state == WorkerState::kStopped) return;
  w.state = WorkerState::kIdle;
  if (w.stop_requested) return Stop(w);
  if (w.batch.empty()) {
    // Trainer::EnsureData: keep two batches on hand, asking for the next lease ahead of time.
    if (w.leased.size() < 2 * w.local_batch && !w.leased.request_outstanding()) {
      SendLeaseRequest(w);
    }
    if (w.leased.size() < w.local_batch) {
      w.state = WorkerState::kWaitingLease;  // OnLease resumes the step
      return;
    }
    w.leased.Take(w.local_batch, w.batch);
    if (has_tables_) {
      // Trainer::Run: the rows to pull depend on the batch, so it is prepared before the pull.
      // The workload is shared by every simulated worker, so Compute prepares it again.
      if (absl::Status prepared = train_->PrepareTrain(w.batch); !prepared.ok()) {
        return Fail(prepared);
      }
      if (absl::Status routed = w.routing->Route(&train_->keys()); !routed.ok()) {
        return Fail(routed);
      }
    }
  }
  StartPull(w);
}

void Simulation::SendLeaseRequest(SimWorker& w) { SendToCoordinator(w, w.leased.NextRequest()); }

void Simulation::SendToCoordinator(SimWorker& w, v1::WorkerMessage message) {
  const int64_t bytes = static_cast<int64_t>(message.ByteSizeLong());
  Send(ThreadOf(w), bytes, [this, &w, message = std::move(message)] {
    if (message.has_step() && first_step_seconds_.count(w.id) == 0 &&
        coordinator_->phase() == coordinator::JobPhase::kRunning) {
      first_step_seconds_[w.id] = Now();
    }
    coordinator_->WorkerMessage(w.id, message);
  });
}

void Simulation::StartPull(SimWorker& w) {
  w.state = WorkerState::kPulling;
  w.pull_start = queue_.now();
  w.held_seconds = 0;
  w.outstanding = static_cast<int>(shards_.size());
  w.routing->ShapeRows(w.rows);
  for (size_t s = 0; s < shards_.size(); ++s) {
    v1::PullRequest request;
    request.set_request_id(w.next_request_id++);
    request.set_min_version(w.min_versions[s]);
    for (v1::SparseRows& rows : w.routing->Requests(static_cast<int32_t>(s))) {
      *request.add_sparse() = std::move(rows);
    }
    const int64_t bytes = static_cast<int64_t>(request.ByteSizeLong());
    Send(ThreadOf(w), bytes, [this, &w, s, bytes, request] {
      if (w.state != WorkerState::kPulling) return;  // died or stopped on the way
      Serve(s, &w, bytes, [this, &w, s, request] {
        if (w.state != WorkerState::kPulling) return;
        const shard::Puller puller{&w, w.id, /*trains=*/true};
        // The answer may come now or when a sync barrier releases (inside another worker's push).
        absl::Status pulled =
            shards_[s]->Pull(puller, request, [this, &w, s](shard::PullReply reply) {
              auto shared = std::make_shared<shard::PullReply>(std::move(reply));
              // On the wire the values are a field of the response (rpc::EncodeWithPayload).
              const size_t bytes = shared->response.ByteSizeLong() +
                                   (shared->values ? shared->values->size() * sizeof(float) : 0);
              Send(ShardThread(s), static_cast<int64_t>(bytes),
                   [this, &w, s, shared] { OnPullReply(w, s, *shared); });
            });
        if (!pulled.ok()) Fail(pulled);
      });
    });
  }
}

void Simulation::OnPullReply(SimWorker& w, size_t shard, const shard::PullReply& reply) {
  if (w.state != WorkerState::kPulling) return;
  const v1::PullResponse& response = reply.response;
  if (absl::Status scattered =
          w.routing->ScatterRows(static_cast<int32_t>(shard), response.sparse(), w.rows);
      !scattered.ok()) {
    return Fail(scattered);
  }
  w.pulled[shard] = reply.values;
  w.tokens[shard] = response.version();
  w.modes[shard] = response.mode();
  w.held_seconds = std::max(w.held_seconds, response.held_seconds());
  if (--w.outstanding == 0) Compute(w);
}

void Simulation::Compute(SimWorker& w) {
  w.pull_seconds = Seconds(queue_.now() - w.pull_start) - w.held_seconds;
  for (size_t s = 0; s < shards_.size(); ++s) {
    const v1::ShardPartition& p = partitions_[s];
    // The last reference goes here: 1,000 workers x the model would not fit twice.
    const std::shared_ptr<const std::vector<float>> values = std::move(w.pulled[s]);
    absl::Status unpacked = tensor::UnpackFloatsInto(
        tensor::PackedView(*values),
        std::span<float>(params_).subspan(p.flat_begin(), p.flat_end() - p.flat_begin()));
    if (!unpacked.ok()) return Fail(unpacked);
  }
  // The real model's real gradient on the real batch and its pulled rows; only its duration is
  // modelled.
  if (absl::Status prepared = train_->PrepareTrain(w.batch); !prepared.ok()) return Fail(prepared);
  absl::StatusOr<float> loss = train_->TrainStep(params_, w.rows, grad_, row_grads_);
  if (!loss.ok()) return Fail(loss.status());
  workload::TableRows().swap(w.rows);
  w.loss = *loss;
  w.examples = static_cast<int64_t>(w.batch.size());
  w.batch.clear();
  const StepCompute step = timing_.Compute(w.index, w.examples, Now());
  w.compute_seconds = step.seconds;
  for (size_t s = 0; s < shards_.size(); ++s) {
    const v1::ShardPartition& p = partitions_[s];
    v1::PushRequest& push = w.pushes[s];
    push.Clear();
    push.set_request_id(w.next_request_id++);
    push.set_token(w.tokens[s]);
    push.set_samples(w.examples);
    push.set_gradient(tensor::PackFloats(
        std::span<const float>(grad_).subspan(p.flat_begin(), p.flat_end() - p.flat_begin())));
    if (absl::Status split =
            w.routing->SplitGradients(static_cast<int32_t>(s), row_grads_, sparse_);
        !split.ok()) {
      return Fail(split);
    }
    for (v1::SparseRows& rows : sparse_) *push.add_sparse() = std::move(rows);
  }
  w.state = WorkerState::kComputing;
  if (cpu_ == nullptr) {
    queue_.After(absl::Seconds(w.compute_seconds), [this, &w] { StartPush(w); });
    return;
  }
  // Trainer::Run pads compute by sleeping (padding - 1) times the compute's measured wall time:
  // only the unpadded part is CPU work, and contention stretches the sleep along with it.
  const double padding = std::max(1.0, std::max(1.0, timing_.spec().cpu().compute_padding()) *
                                           timing_.Slowdown(w.index, Now()));
  const double cpu_seconds = (step.seconds - step.hiccup_seconds) / padding;
  const absl::Duration start = queue_.now();
  w.thread->Run(cpu_seconds, [this, &w, start, padding, step] {
    if (w.state != WorkerState::kComputing) return;
    const double busy = Seconds(queue_.now() - start);
    // What the trainer reports: the padded compute, as a machine of its own would see it.
    w.compute_seconds = busy * padding + step.hiccup_seconds;
    queue_.After(absl::Seconds(busy * (padding - 1) + step.hiccup_seconds),
                 [this, &w] { StartPush(w); });
  });
}

void Simulation::StartPush(SimWorker& w) {
  if (w.state != WorkerState::kComputing) return;
  w.state = WorkerState::kPushing;
  w.push_start = queue_.now();
  w.outstanding = static_cast<int>(shards_.size());
  for (size_t s = 0; s < shards_.size(); ++s) {
    const int64_t bytes = static_cast<int64_t>(w.pushes[s].ByteSizeLong());
    Send(ThreadOf(w), bytes, [this, &w, s, bytes] {
      if (w.state != WorkerState::kPushing) return;  // lost with its dead sender
      Serve(s, &w, bytes, [this, &w, s] {
        if (w.state != WorkerState::kPushing) return;
        const v1::PushAck ack = shards_[s]->Push(w.id, w.pushes[s]);
        w.pushes[s].Clear();
        Send(ShardThread(s), static_cast<int64_t>(ack.ByteSizeLong()),
             [this, &w, s] { OnPushAck(w, s); });
      });
    });
  }
}

void Simulation::OnPushAck(SimWorker& w, size_t shard) {
  if (w.state != WorkerState::kPushing) return;
  // With a barrier the next pull waits for the one this gradient belongs to (as ParameterClient).
  w.min_versions[shard] = NextPullMinVersion(w.modes[shard], w.tokens[shard]);
  if (--w.outstanding > 0) return;
  v1::WorkerMessage message;
  v1::StepReport* report = message.mutable_step();
  report->set_step(w.step++);
  report->set_examples(w.examples);
  report->set_loss(w.loss);
  report->set_compute_seconds(w.compute_seconds);
  report->set_pull_seconds(w.pull_seconds);
  report->set_push_seconds(Seconds(queue_.now() - w.push_start));
  report->set_wait_seconds(w.held_seconds);
  report->set_token(w.tokens[0]);
  SendToCoordinator(w, std::move(message));
  StartStep(w);
}

void Simulation::OnLease(SimWorker& w, const v1::DataLease& lease) {
  if (w.state == WorkerState::kDead || w.state == WorkerState::kStopped) return;
  w.leased.Add(lease);
  if (w.state == WorkerState::kWaitingLease) StartStep(w);
}

void Simulation::OnStop(SimWorker& w) {
  if (w.state == WorkerState::kDead || w.state == WorkerState::kStopped) return;
  w.stop_requested = true;
  // A worker waiting (for a lease or a pull) abandons the wait; one computing or pushing
  // finishes its step and stops at the top of the next (Trainer::Run).
  if (w.state == WorkerState::kIdle || w.state == WorkerState::kWaitingLease ||
      w.state == WorkerState::kPulling) {
    for (auto& shard : shards_) shard->CancelPulls(&w);
    Stop(w);
  }
}

void Simulation::Stop(SimWorker& w) {
  w.state = WorkerState::kStopped;
  result_.training_seconds = std::max(result_.training_seconds, Now());
  // The process exits and its stream closes.
  EndSession(w, timing_.MessageSeconds(0));
}

void Simulation::EndSession(SimWorker& w, double after_seconds) {
  if (w.session == nullptr) return;  // its hello was not accepted: nobody to tell
  queue_.After(absl::Seconds(after_seconds),
               [this, &w] { coordinator_->WorkerGone(w.id, "session_closed", w.session.get()); });
}

void Simulation::Die(SimWorker& w, const v1::WorkerDeath& death) {
  if (w.state == WorkerState::kDead || w.state == WorkerState::kStopped) return;
  if (w.thread != nullptr) w.thread->Stop();  // its compute and sends in progress are lost
  w.state = WorkerState::kDead;
  w.batch.clear();
  workload::TableRows().swap(w.rows);
  for (auto& pulled : w.pulled) pulled.reset();
  for (v1::PushRequest& push : w.pushes) push.Clear();
  result_.dead_workers.push_back(w.id);
  // Its streams close: each shard drops its held pulls once it sees that.
  for (size_t s = 0; s < shards_.size(); ++s) {
    queue_.After(absl::Seconds(timing_.MessageSeconds(0)),
                 [this, &w, s] { shards_[s]->CancelPulls(&w); });
  }
  const double detect = death.detected_after_seconds() > 0 ? death.detected_after_seconds()
                                                           : timing_.MessageSeconds(0);
  EndSession(w, detect);
}

void Simulation::Join(SimWorker& w) {
  // The process starts and says hello (WorkerRunner::Join); the coordinator decides on arrival.
  w.state = WorkerState::kJoining;
  Send(ThreadOf(w), static_cast<int64_t>(HelloOf(w).ByteSizeLong()), [this, &w] { Hello(w); });
}

v1::WorkerHello Simulation::HelloOf(const SimWorker& w) const {
  v1::WorkerHello hello;
  hello.set_name(absl::StrCat("worker-", w.index));  // a rejoin keeps its name, so its id
  hello.set_role(v1::ROLE_WORKER);
  hello.set_job_id(options_.job.job_id());
  return hello;
}

void Simulation::Hello(SimWorker& w) {
  if (w.state != WorkerState::kJoining) return;  // it died on the way
  auto session = std::make_shared<WorkerSession>(this, &w);
  absl::StatusOr<int32_t> id = coordinator_->WorkerHello(session, HelloOf(w));
  if (!id.ok()) {
    // Refused once the job is finishing (OUT_OF_RANGE): the worker has nothing left to do and
    // exits.
    queue_.After(absl::Seconds(timing_.MessageSeconds(0)), [this, &w] {
      if (w.state == WorkerState::kJoining) Stop(w);
    });
    return;
  }
  w.id = *id;
  w.session = std::move(session);
  if (!w.at_start) result_.joins.push_back({Now(), w.id});
}

void Simulation::OnCoordinatorMessage(SimWorker& w, const v1::CoordinatorToWorker& message) {
  if (w.state == WorkerState::kDead || w.state == WorkerState::kStopped) return;
  switch (message.kind_case()) {
    case v1::CoordinatorToWorker::kWelcome:
      return OnWelcome(w, message.welcome());
    case v1::CoordinatorToWorker::kLease:
      return OnLease(w, message.lease());
    case v1::CoordinatorToWorker::kSetLocalBatch:
      w.local_batch = message.set_local_batch().local_batch();
      return;
    case v1::CoordinatorToWorker::kStop:
      return OnStop(w);
    default:
      return;
  }
}

void Simulation::OnWelcome(SimWorker& w, const v1::Welcome& welcome) {
  if (w.state != WorkerState::kJoining) return;
  w.state = WorkerState::kIdle;
  w.local_batch = welcome.local_batch();
  // Per shard, as a new ParameterClient starts.
  const size_t num_shards = static_cast<size_t>(welcome.shard_map().shards_size());
  w.tokens.assign(num_shards, 0);
  w.min_versions.assign(num_shards, 0);
  w.modes.assign(num_shards, v1::MODE_UNSPECIFIED);
  w.pulled.assign(num_shards, nullptr);
  w.pushes.assign(num_shards, v1::PushRequest());
  w.routing.emplace(static_cast<int32_t>(num_shards), train_->table_dims());
  // The worker loads its data set after the welcome (WorkerRunner), then trains.
  queue_.After(absl::Seconds(timing_.spec().startup_seconds()), [this, &w] { StartStep(w); });
}

}  // namespace syncopate::sim::internal
