// The simulator's insides, shared by the files that hold its actors (RunSimulation in
// simulation.h is the interface; nothing outside libs/sim includes this header):
//   simulation.cc            setup, the event loop and the result: the orchestration
//   simulation_worker.cc     the worker processes: Trainer::Run's order as events, their lives
//   simulation_evaluator.cc  the evaluator process: periodic and final evaluations
//   simulation_shard.cc      the shard processes around their real ShardCores
//   simulation_links.cc      the coordinator's links and the network: transit, the shared cores
//                            a message is copied on, a shard's serving of it
// Thread-safety: none; one thread runs a simulation (its event loop) from start to end.
#ifndef SYNCOPATE_LIBS_SIM_SIMULATION_IMPL_H_
#define SYNCOPATE_LIBS_SIM_SIMULATION_IMPL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "libs/coordinator/coordinator_core.h"
#include "libs/coordinator/job_phase.h"
#include "libs/shard/shard_core.h"
#include "libs/sim/event_queue.h"
#include "libs/sim/processor_sharing.h"
#include "libs/sim/simulation.h"
#include "libs/sim/step_time_model.h"
#include "libs/worker/key_routing.h"
#include "libs/worker/lease_buffer.h"
#include "libs/workload/workload.h"

namespace syncopate::sim::internal {

inline double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

// kAbsent: this life's process has not started yet (SimSpec.joins); kJoining: its hello is on
// the way, or its welcome is. A worker the coordinator welcomed is kIdle until its first step.
enum class WorkerState {
  kAbsent,
  kJoining,
  kIdle,
  kWaitingLease,
  kPulling,
  kComputing,
  kPushing,
  kStopped,
  kDead
};

// One life of a worker process (StepTimeModel::Lives): a worker that dies and rejoins has one
// SimWorker per life under the same id, so what the dead one had in flight never reaches the
// new one (every event checks its own life's state).
struct SimWorker {
  int index = 0;   // the spec's worker index: its step-time stream and slowdowns
  int32_t id = 0;  // the coordinator's, from its hello (0 until then)
  int life = 0;
  bool at_start = false;  // there when the job starts (else it joins: SimSpec.joins)
  WorkerState state = WorkerState::kAbsent;
  // This life's session with the coordinator (null before its hello is accepted).
  std::shared_ptr<coordinator::WorkerLink> session;
  bool stop_requested = false;
  int64_t local_batch = 0;
  worker::LeaseBuffer leased;
  std::vector<int64_t> batch;
  int64_t step = 0;
  int64_t next_request_id = 1;
  // Per shard, as the real ParameterClient keeps them.
  std::vector<int64_t> tokens;
  std::vector<int64_t> min_versions;
  std::vector<v1::Mode> modes;
  // This step's pulled values, per shard (a sync version's pullers share one copy).
  std::vector<std::shared_ptr<const std::vector<float>>> pulled;
  std::vector<v1::PushRequest> pushes;  // this step's gradient, per shard
  // The batch's embedding keys routed to their shards (ParameterClient's routing), and the
  // rows pulled for them; empty for a dense model.
  std::optional<worker::KeyRouting> routing;
  workload::TableRows rows;
  int outstanding = 0;  // replies still expected in this phase
  absl::Duration pull_start;
  absl::Duration push_start;
  double held_seconds = 0;
  double pull_seconds = 0;
  double compute_seconds = 0;
  // With contention: the trainer's thread on the shared cores (compute, sending).
  std::unique_ptr<CpuThread> thread;
  float loss = 0;
  int64_t examples = 0;  // of the current step
};

// The evaluator process (ROLE_EVALUATOR): it scores the shards' parameters every
// job.eval().interval_seconds until the coordinator asks for the final evaluation or says stop.
struct SimEvaluator {
  int32_t id = 0;
  std::shared_ptr<coordinator::WorkerLink> session;
  bool finished = false;  // no more evaluations: the final one was asked for, or stop
};

class Simulation {
 public:
  Simulation(const SimOptions& options, StepTimeModel timing)
      : options_(options), timing_(std::move(timing)), clock_(&queue_) {}

  absl::Status Setup();
  absl::StatusOr<SimResult> Run();

 private:
  // The coordinator's links to the simulated processes: what the coordinator sends travels as
  // a message, in the order it was sent on that stream.
  class WorkerSession;
  class ShardSession;

  // The workers' lives in workers_, in the order of their first hello, and their tallies.
  void CreateWorkers();

  // Worker side (libs/worker/trainer.cc): simulation_worker.cc.
  void Hello(SimWorker& w);
  void OnCoordinatorMessage(SimWorker& w, const v1::CoordinatorToWorker& message);
  void OnWelcome(SimWorker& w, const v1::Welcome& welcome);
  void StartStep(SimWorker& w);
  void SendLeaseRequest(SimWorker& w);
  void StartPull(SimWorker& w);
  void OnPullReply(SimWorker& w, size_t shard, const shard::PullReply& reply);
  void Compute(SimWorker& w);
  void StartPush(SimWorker& w);
  void OnPushAck(SimWorker& w, size_t shard);
  void OnLease(SimWorker& w, const v1::DataLease& lease);
  void OnStop(SimWorker& w);
  void Stop(SimWorker& w);
  void Die(SimWorker& w, const v1::WorkerDeath& death);
  // The coordinator learns, `after_seconds` from now, that this life's session ended.
  void EndSession(SimWorker& w, double after_seconds);
  void Join(SimWorker& w);
  v1::WorkerHello HelloOf(const SimWorker& w) const;
  // A worker's message to the coordinator, handed to it on arrival.
  void SendToCoordinator(SimWorker& w, v1::WorkerMessage message);

  // Shard side (libs/shard/shard_node.cc), simulation_shard.cc: the assignment, the
  // coordinator's commands, reports.
  void AssignShard(size_t shard, const v1::ShardAssignment& assignment);
  void OnShardCommand(size_t shard, const v1::CoordinatorToShard& command);
  void SendShardReport(size_t shard, bool final);
  void ScheduleShardReport(size_t shard);

  // The coordinator's periodic work, every coordinator::kTickInterval until the job is done.
  void Tick();
  // SimSpec.mode_schedule: once every shard has applied the next entry's fraction of the run's
  // global batches, tells every shard its mode (checked at each tick).
  void ApplyModeSchedule();
  // A message on one of the coordinator's streams travels MessageSeconds(bytes) and never
  // overtakes the one sent before it on that stream (`last_arrival`: that one's arrival).
  void Transmit(absl::Duration& last_arrival, int64_t bytes, EventQueue::Action deliver);

  // The shard serves a message of worker `w`'s stream: `serve` runs once the shard got to it.
  // One message at a time per shard, or with SimSpec.shard.stream_threads on the stream's own
  // thread.
  void Serve(size_t shard, const SimWorker* w, int64_t bytes, EventQueue::Action serve);
  // A message of `bytes` arrives after the network's transit time. With the network on the
  // shared cores, copying it out is work of the sender's thread (`from`; null for the
  // coordinator, whose messages are small).
  void Send(CpuThread* from, int64_t bytes, EventQueue::Action arrive);
  CpuThread* ThreadOf(const SimWorker& w) const { return w.thread.get(); }
  CpuThread* ShardThread(size_t shard) const {
    return shard_threads_.empty() ? nullptr : shard_threads_[shard].get();
  }
  void Fail(absl::Status status) {
    if (error_.ok()) error_ = std::move(status);
  }
  bool Done() const { return coordinator_->phase() == coordinator::JobPhase::kDone; }
  // "N of M examples done", for the errors that end a run early.
  std::string Progress() const;
  std::vector<float> GatherParameters() const;
  // The evaluator scores the parameters the shards hold now and reports to the coordinator;
  // `final` with the point the coordinator asked about (EvaluateNow).
  void Evaluate(const v1::EvaluateNow& request);
  // The evaluator process starts and says hello (after the workers there at the start).
  absl::Status EvaluatorHello();
  void OnEvaluatorMessage(const v1::CoordinatorToWorker& message);
  // The evaluator's pull of the routed chunk into params_ and eval_rows_; `answered` says every
  // shard answered at once (an evaluator's pull is never held).
  absl::Status EvaluatorPull(bool& answered);
  void SchedulePeriodicEval();
  double Now() const { return Seconds(queue_.now()); }

  const SimOptions& options_;
  // The job as the coordinator hands it out (run length resolved, layout recorded), from the
  // shards' assignments.
  v1::JobSpec job_;
  StepTimeModel timing_;
  EventQueue queue_;
  VirtualClock clock_;
  // The machine's shared cores (SimSpec.cpu); null without contention.
  std::unique_ptr<ProcessorSharing> cpu_;
  absl::Status error_;

  std::unique_ptr<workload::Workload> train_;
  std::unique_ptr<workload::Workload> eval_;
  std::optional<worker::KeyRouting> evaluator_routing_;
  workload::TableRows eval_rows_;
  int64_t evaluator_request_id_ = 0;
  std::vector<float> params_;  // scratch: one worker's pulled parameters
  std::vector<float> grad_;    // scratch: its gradient
  workload::TableRows row_grads_;
  std::vector<v1::SparseRows> sparse_;  // scratch: one shard's share of the row gradients
  bool has_tables_ = false;

  std::vector<v1::ShardPartition> partitions_;
  std::vector<std::unique_ptr<shard::ShardCore>> shards_;
  std::vector<absl::Duration> shard_busy_until_;
  std::vector<bool> shard_stopped_;  // the coordinator said stop: no more reports
  int next_scheduled_mode_ = 0;      // SimSpec.mode_schedule's next entry
  int64_t run_global_batches_ = 0;   // ceil(target examples / G), known once the job started
  // With contention: each shard's serving thread (the real one works under one lock), and the
  // evaluator's.
  std::vector<std::unique_ptr<CpuThread>> shard_threads_;
  // With SimSpec.shard.stream_threads: each (shard, worker life) stream's serving thread.
  std::map<std::pair<size_t, const SimWorker*>, std::unique_ptr<CpuThread>> stream_threads_;
  std::unique_ptr<CpuThread> evaluator_thread_;

  // One per life, the workers there at the start first (in index order), then the joiners in
  // the order of their first hello; a worker's lives in time order. Never resized after Setup:
  // pull owners and sessions point into it.
  std::vector<SimWorker> workers_;
  SimEvaluator evaluator_;
  std::map<int32_t, double> first_step_seconds_;  // by worker id: its first step report's arrival
  // The real coordinator on the virtual clock, with no journal; the sessions above are its
  // links. Everything about membership, leases, mode control and the job's lifecycle is its.
  std::unique_ptr<coordinator::CoordinatorCore> coordinator_;

  SimResult result_;
};

// A worker's session, or the evaluator's (`worker` null).
class Simulation::WorkerSession final : public coordinator::WorkerLink {
 public:
  WorkerSession(Simulation* sim, SimWorker* worker) : sim_(sim), worker_(worker) {}
  void Send(v1::CoordinatorToWorker message) override;
  // The coordinator closes a session it superseded (the worker rejoined) or found silent. The
  // simulated coordinator has no silence bound (simulated workers send no heartbeats; SimSpec
  // says when a death is noticed), so the life whose session it closes is dead already.
  void Close(absl::Status) override {}

 private:
  Simulation* const sim_;
  SimWorker* const worker_;
  absl::Duration last_arrival_;
};

class Simulation::ShardSession final : public coordinator::ShardLink {
 public:
  ShardSession(Simulation* sim, size_t shard) : sim_(sim), shard_(shard) {}
  void Send(v1::CoordinatorToShard message) override;
  void Close(absl::Status) override {}

 private:
  Simulation* const sim_;
  const size_t shard_;
  absl::Duration last_arrival_;
};

}  // namespace syncopate::sim::internal

#endif  // SYNCOPATE_LIBS_SIM_SIMULATION_IMPL_H_
