#include <algorithm>
#include <memory>
#include <utility>

#include "libs/sim/event_queue.h"
#include "libs/sim/processor_sharing.h"
#include "libs/sim/simulation_impl.h"

namespace syncopate::sim::internal {

void Simulation::WorkerSession::Send(v1::CoordinatorToWorker message) {
  const int64_t bytes = static_cast<int64_t>(message.ByteSizeLong());
  sim_->Transmit(last_arrival_, bytes, [sim = sim_, w = worker_, m = std::move(message)] {
    if (w == nullptr) return sim->OnEvaluatorMessage(m);
    sim->OnCoordinatorMessage(*w, m);
  });
}

void Simulation::ShardSession::Send(v1::CoordinatorToShard message) {
  if (message.has_assignment()) {
    // The shard process was there before the job: its state is built from the assignment at
    // its registration, before any worker can reach it.
    sim_->AssignShard(shard_, message.assignment());
    return;
  }
  if (message.has_set_mode()) {
    sim_->result_.switches.push_back({sim_->Now(), static_cast<int32_t>(shard_),
                                      message.set_mode().mode(), message.set_mode().reason()});
  }
  const int64_t bytes = static_cast<int64_t>(message.ByteSizeLong());
  sim_->Transmit(last_arrival_, bytes,
                 [sim = sim_, s = shard_, m = std::move(message)] { sim->OnShardCommand(s, m); });
}

void Simulation::Transmit(absl::Duration& last_arrival, int64_t bytes, EventQueue::Action deliver) {
  last_arrival =
      std::max(last_arrival, queue_.now() + absl::Seconds(timing_.MessageSeconds(bytes)));
  queue_.At(last_arrival, std::move(deliver));
}

void Simulation::Send(CpuThread* from, int64_t bytes, EventQueue::Action arrive) {
  if (from == nullptr || !timing_.spec().cpu().network_uses_cores()) {
    queue_.After(absl::Seconds(timing_.MessageSeconds(bytes)), std::move(arrive));
    return;
  }
  // On loopback the bytes are copied and (de)serialised by the machine's cores; the latency is
  // the wake-ups and the stack, a pure delay.
  from->Run(timing_.MessageTransferSeconds(bytes), [this, arrive = std::move(arrive)]() mutable {
    queue_.After(absl::Seconds(timing_.spec().network().latency_seconds()), std::move(arrive));
  });
}

void Simulation::Serve(size_t shard, const SimWorker* w, int64_t bytes, EventQueue::Action serve) {
  if (timing_.spec().shard().stream_threads()) {
    std::unique_ptr<CpuThread>& thread = stream_threads_[{shard, w}];
    if (thread == nullptr) thread = std::make_unique<CpuThread>(cpu_.get());
    thread->Run(timing_.ShardServiceSeconds(bytes), std::move(serve));
    return;
  }
  if (cpu_ == nullptr) {
    const absl::Duration start = std::max(queue_.now(), shard_busy_until_[shard]);
    shard_busy_until_[shard] = start + absl::Seconds(timing_.ShardServiceSeconds(bytes));
    queue_.At(shard_busy_until_[shard], std::move(serve));
    return;
  }
  // The same one-at-a-time service, as CPU work of the shard's thread on the shared cores.
  shard_threads_[shard]->Run(timing_.ShardServiceSeconds(bytes), std::move(serve));
}

}  // namespace syncopate::sim::internal
