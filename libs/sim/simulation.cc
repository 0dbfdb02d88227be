#include "libs/sim/simulation.h"

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "libs/common/status_macros.h"
#include "libs/coordinator/coordinator_core.h"
#include "libs/coordinator/job_phase.h"
#include "libs/job/job_spec.h"
#include "libs/job/model_kind.h"
#include "libs/report/run_report.h"
#include "libs/shard/shard_core.h"
#include "libs/sim/event_queue.h"
#include "libs/sim/processor_sharing.h"
#include "libs/sim/step_time_model.h"
#include "libs/tensor/packed.h"
#include "libs/worker/key_routing.h"
#include "libs/worker/lease_buffer.h"
#include "libs/workload/workload.h"

namespace syncopate::sim {
namespace {

// Sums every counter by reflection, so a counter added to GradientCounters is summed too.
void AddCounters(const v1::GradientCounters& from, v1::GradientCounters& to) {
  const google::protobuf::Descriptor* descriptor = to.GetDescriptor();
  const google::protobuf::Reflection* reflection = to.GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = descriptor->field(i);
    reflection->SetInt64(&to, field,
                         reflection->GetInt64(to, field) + reflection->GetInt64(from, field));
  }
}

// Without a limit in the spec: far beyond any job this machine could also run for real.
constexpr double kDefaultMaxVirtualSeconds = 100000;

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

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

  // Worker side (libs/worker/trainer.cc).
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

  // Shard side (libs/shard/shard_node.cc): the assignment, the coordinator's commands, reports.
  void AssignShard(size_t shard, const v1::ShardAssignment& assignment);
  void OnShardCommand(size_t shard, const v1::CoordinatorToShard& command);
  void SendShardReport(size_t shard, bool final);
  void ScheduleShardReport(size_t shard);

  // The coordinator's periodic work, every coordinator::kTickInterval until the job is done.
  void Tick();
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
  void Send(v1::CoordinatorToWorker message) override {
    const int64_t bytes = static_cast<int64_t>(message.ByteSizeLong());
    sim_->Transmit(last_arrival_, bytes, [sim = sim_, w = worker_, m = std::move(message)] {
      if (w == nullptr) return sim->OnEvaluatorMessage(m);
      sim->OnCoordinatorMessage(*w, m);
    });
  }
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
  void Send(v1::CoordinatorToShard message) override {
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
  void Close(absl::Status) override {}

 private:
  Simulation* const sim_;
  const size_t shard_;
  absl::Duration last_arrival_;
};

absl::Status Simulation::Setup() {
  const v1::JobSpec& job = options_.job;
  coordinator::CoordinatorOptions coordinator_options;
  coordinator_options.job = job;
  SYNCOPATE_ASSIGN_OR_RETURN(coordinator_options.model, job::DescribeModel(job));
  coordinator_options.clock = &clock_;
  // The workers there at the start have said hello before the last shard registers, so the job
  // starts with them then; those absent join later (SimSpec.joins) instead of holding the start.
  coordinator_options.startup_grace = absl::ZeroDuration();
  // Simulated workers send no heartbeats: a death is noticed when SimSpec.deaths says.
  coordinator_options.min_silence_timeout = absl::InfiniteDuration();
  SYNCOPATE_ASSIGN_OR_RETURN(coordinator_,
                             coordinator::CoordinatorCore::Create(std::move(coordinator_options)));

  // The coordinator numbers workers from 1 in the order of their first hello: those at the start
  // in index order, then the evaluator, then the joiners.
  const int num_workers = job.num_workers();
  std::vector<int> hello_order(static_cast<size_t>(num_workers));
  std::iota(hello_order.begin(), hello_order.end(), 0);
  auto first_hello = [this](int index) {
    const WorkerLife& first = timing_.Lives(index).front();
    return first.at_start ? -1.0 : first.join_seconds;
  };
  std::stable_sort(hello_order.begin(), hello_order.end(),
                   [&](int a, int b) { return first_hello(a) < first_hello(b); });
  size_t lives = 0;
  for (int index : hello_order) lives += timing_.Lives(index).size();
  workers_.resize(lives);
  result_.workers.resize(static_cast<size_t>(num_workers));
  size_t slot = 0;
  for (size_t k = 0; k < hello_order.size(); ++k) {
    const int index = hello_order[k];
    result_.workers[k].index = index;
    for (size_t life = 0; life < timing_.Lives(index).size(); ++life) {
      SimWorker& w = workers_[slot++];
      w.index = index;
      w.life = static_cast<int>(life);
      w.at_start = timing_.Lives(index)[life].at_start;
      w.state = w.at_start ? WorkerState::kJoining : WorkerState::kAbsent;
    }
  }
  for (SimWorker& w : workers_) {
    if (w.at_start) Hello(w);
  }
  evaluator_.session = std::make_shared<WorkerSession>(this, /*worker=*/nullptr);
  v1::WorkerHello hello;
  hello.set_name("evaluator");
  hello.set_role(v1::ROLE_EVALUATOR);
  hello.set_job_id(job.job_id());
  SYNCOPATE_ASSIGN_OR_RETURN(evaluator_.id, coordinator_->WorkerHello(evaluator_.session, hello));

  // The shards register; the last one starts the job (the welcomes are then on their way).
  const size_t num_shards = static_cast<size_t>(job.num_shards());
  partitions_.resize(num_shards);
  shards_.resize(num_shards);
  shard_stopped_.assign(num_shards, false);
  for (size_t s = 0; s < num_shards; ++s) {
    v1::ShardHello shard_hello;
    shard_hello.set_shard_id(static_cast<int32_t>(s));
    shard_hello.set_address(absl::StrCat("sim-shard-", s));
    shard_hello.set_job_id(job.job_id());
    SYNCOPATE_RETURN_IF_ERROR(
        coordinator_->ShardHello(std::make_shared<ShardSession>(this, s), shard_hello));
    SYNCOPATE_RETURN_IF_ERROR(error_);
  }
  result_.quality_metric = std::string(job::QualityMetric(job_));
  // Every simulated worker prepares its batches on this one workload: keep the blocks of the
  // lease each is finishing and of its next.
  SYNCOPATE_ASSIGN_OR_RETURN(
      train_, job::CreateWorkload(job_, workload::Purpose::kTrain,
                                  {.cached_blocks = 2 * int64_t{job_.num_workers()} + 2}));
  SYNCOPATE_ASSIGN_OR_RETURN(eval_, job::CreateWorkload(job_, workload::Purpose::kEvaluate));
  has_tables_ = !train_->table_dims().empty();
  params_.resize(static_cast<size_t>(train_->num_parameters()));
  evaluator_routing_.emplace(static_cast<int32_t>(num_shards), eval_->table_dims());
  grad_.resize(params_.size());

  shard_busy_until_.assign(num_shards, absl::ZeroDuration());
  if (timing_.spec().cpu().cores() > 0) {
    cpu_ = std::make_unique<ProcessorSharing>(&queue_, timing_.spec().cpu().cores());
    for (size_t s = 0; s < num_shards; ++s) {
      shard_threads_.push_back(std::make_unique<CpuThread>(cpu_.get()));
    }
    for (SimWorker& w : workers_) w.thread = std::make_unique<CpuThread>(cpu_.get());
    evaluator_thread_ = std::make_unique<CpuThread>(cpu_.get());
  }

  for (SimWorker& w : workers_) {
    const WorkerLife& life = timing_.Lives(w.index)[w.life];
    if (!life.at_start) {
      queue_.At(absl::Seconds(life.join_seconds), [this, &w] { Join(w); });
    }
    if (life.death.has_value()) {
      queue_.At(absl::Seconds(life.death->at_seconds()),
                [this, &w, d = *life.death] { Die(w, d); });
    }
  }
  queue_.At(coordinator::kTickInterval, [this] { Tick(); });
  for (size_t s = 0; s < num_shards; ++s) ScheduleShardReport(s);
  if (options_.periodic_eval) SchedulePeriodicEval();
  return absl::OkStatus();
}

std::string Simulation::Progress() const {
  const v1::ClusterStatus status = coordinator_->Status();
  return absl::StrCat(status.examples(), " of ", status.target_examples(), " examples done");
}

absl::StatusOr<SimResult> Simulation::Run() {
  const double limit = timing_.spec().max_virtual_seconds() > 0
                           ? timing_.spec().max_virtual_seconds()
                           : kDefaultMaxVirtualSeconds;
  while (!Done()) {
    if (queue_.empty()) {
      int live = 0;
      for (const SimWorker& w : workers_) {
        live += w.state == WorkerState::kDead || w.state == WorkerState::kAbsent ? 0 : 1;
      }
      return absl::InternalError(absl::StrCat("the simulated cluster stalled at ", Now(),
                                              " s with ", Progress(), " and ", live,
                                              " live workers"));
    }
    if (Seconds(queue_.next_time()) > limit) {
      return absl::DeadlineExceededError(absl::StrCat("the job did not finish within ", limit,
                                                      " s of virtual time (", Progress(), ")"));
    }
    if (options_.stop_requested && queue_.executed() % kStopPollEvents == 0 &&
        options_.stop_requested()) {
      return absl::CancelledError(
          absl::StrCat("stopped at ", Now(), " s of virtual time (", Progress(), ")"));
    }
    queue_.RunNext();
    if (!error_.ok()) return error_;
  }
  result_.events = queue_.executed();
  // What the coordinator counted from the step reports.
  const v1::ClusterStatus status = coordinator_->Status();
  result_.examples = status.examples();
  std::map<int32_t, const v1::WorkerStatus*> by_id;
  for (const v1::WorkerStatus& w : status.workers()) by_id[w.worker_id()] = &w;
  for (SimWorkerTally& tally : result_.workers) {
    for (const SimWorker& w : workers_) {
      if (w.index == tally.index && w.id != 0) tally.id = w.id;
    }
    auto it = by_id.find(tally.id);
    if (tally.id == 0 || it == by_id.end()) continue;
    tally.steps = it->second->steps();
    tally.examples = it->second->examples();
    result_.steps += tally.steps;
    if (auto first = first_step_seconds_.find(tally.id); first != first_step_seconds_.end()) {
      tally.first_step_seconds = first->second;
    }
  }
  for (const auto& shard : shards_) {
    const shard::ShardStats stats = shard->Stats();
    result_.shard_versions.push_back(stats.version);
    result_.embedding_rows += stats.embedding_rows;
    AddCounters(stats.gradients, result_.gradients);
  }
  result_.parameters = GatherParameters();
  return std::move(result_);
}

void Simulation::Tick() {
  coordinator_->Tick();
  if (!Done()) queue_.After(coordinator::kTickInterval, [this] { Tick(); });
}

void Simulation::Transmit(absl::Duration& last_arrival, int64_t bytes, EventQueue::Action deliver) {
  last_arrival =
      std::max(last_arrival, queue_.now() + absl::Seconds(timing_.MessageSeconds(bytes)));
  queue_.At(last_arrival, std::move(deliver));
}

// ---- shards ----

void Simulation::AssignShard(size_t shard, const v1::ShardAssignment& assignment) {
  if (shard == 0) job_ = assignment.job();
  partitions_[shard] = assignment.partition();
  absl::StatusOr<std::unique_ptr<shard::ShardCore>> core =
      shard::ShardCore::Create(assignment, &clock_, nullptr);
  if (!core.ok()) return Fail(core.status());
  shards_[shard] = std::move(*core);
}

void Simulation::OnShardCommand(size_t shard, const v1::CoordinatorToShard& command) {
  switch (command.kind_case()) {
    case v1::CoordinatorToShard::kMembership:
      shards_[shard]->SetMembership(command.membership());
      return;
    case v1::CoordinatorToShard::kSetMode:
      if (absl::Status applied = shards_[shard]->ApplyModeCommand(command.set_mode());
          !applied.ok()) {
        Fail(applied);
      }
      return;
    case v1::CoordinatorToShard::kStop:
      // As ShardNode: the last report, marked final, and no more.
      shard_stopped_[shard] = true;
      SendShardReport(shard, /*final=*/true);
      return;
    default:  // checkpoints are not simulated
      return;
  }
}

void Simulation::SendShardReport(size_t shard, bool final) {
  v1::ShardReport report = shard::ReportOf(shards_[shard]->Stats());
  report.set_final(final);
  const int64_t bytes = static_cast<int64_t>(report.ByteSizeLong());
  Send(ShardThread(shard), bytes, [this, shard, report = std::move(report)] {
    coordinator_->ShardReport(static_cast<int32_t>(shard), report);
  });
}

void Simulation::ScheduleShardReport(size_t shard) {
  queue_.After(shard::kReportInterval, [this, shard] {
    if (shard_stopped_[shard] || Done()) return;
    SendShardReport(shard, /*final=*/false);
    ScheduleShardReport(shard);
  });
}

// ---- workers ----

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
  // Sync: the next pull waits for the barrier this gradient belongs to (ParameterClient).
  w.min_versions[shard] = w.modes[shard] == v1::MODE_SYNC ? w.tokens[shard] + 1 : 0;
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

// ---- evaluation ----

std::vector<float> Simulation::GatherParameters() const {
  std::vector<float> flat;
  for (const auto& shard : shards_) {
    std::vector<float> part = shard->Parameters();
    flat.insert(flat.end(), part.begin(), part.end());
  }
  return flat;
}

absl::Status Simulation::EvaluatorPull(bool& answered) {
  answered = false;
  evaluator_routing_->ShapeRows(eval_rows_);
  int pending = static_cast<int>(shards_.size());
  absl::Status status;
  for (size_t s = 0; s < shards_.size(); ++s) {
    v1::PullRequest request;  // min_version 0: the newest parameters, never held
    request.set_request_id(++evaluator_request_id_);
    for (v1::SparseRows& rows : evaluator_routing_->Requests(static_cast<int32_t>(s))) {
      *request.add_sparse() = std::move(rows);
    }
    const shard::Puller puller{&evaluator_routing_, /*worker=*/0, /*trains=*/false};
    SYNCOPATE_RETURN_IF_ERROR(
        shards_[s]->Pull(puller, request, [&, s](const shard::PullReply& reply) {
          const v1::ShardPartition& p = partitions_[s];
          const v1::PullResponse& response = reply.response;
          absl::Status unpacked = tensor::UnpackFloatsInto(
              tensor::PackedView(*reply.values),
              std::span<float>(params_).subspan(p.flat_begin(), p.flat_end() - p.flat_begin()));
          if (unpacked.ok()) {
            unpacked = evaluator_routing_->ScatterRows(static_cast<int32_t>(s), response.sparse(),
                                                       eval_rows_);
          }
          if (status.ok()) status = unpacked;
          --pending;
        }));
  }
  answered = pending == 0;
  if (!answered) {
    // Never expected (min_version 0 is always due), but a held pull must not outlive the
    // callback's captures.
    for (auto& shard : shards_) shard->CancelPulls(&evaluator_routing_);
  }
  return status;
}

void Simulation::OnEvaluatorMessage(const v1::CoordinatorToWorker& message) {
  if (evaluator_.finished) return;
  if (message.has_stop()) {
    evaluator_.finished = true;
  } else if (message.has_evaluate() && message.evaluate().final()) {
    // The workers have left: the final evaluation measures what the shards hold now.
    evaluator_.finished = true;
    Evaluate(message.evaluate());
  }
}

void Simulation::Evaluate(const v1::EvaluateNow& request) {
  // RunEvaluator, chunk by chunk: route the chunk's keys, pull the newest parameters (no
  // look-ahead) and those rows from every shard as an evaluator (rows never touched read as
  // their initial value and are not created), score. Scoring takes SimSpec.evaluation_seconds
  // (0: no virtual time); the pulls take no shard time.
  for (int64_t begin = 0; begin < eval_->eval_size(); begin += eval_->eval_chunk()) {
    if (absl::Status prepared =
            eval_->PrepareEval(begin, std::min(eval_->eval_size(), begin + eval_->eval_chunk()));
        !prepared.ok()) {
      return Fail(prepared);
    }
    if (absl::Status routed = evaluator_routing_->Route(&eval_->keys()); !routed.ok()) {
      return Fail(routed);
    }
    bool answered = false;
    if (absl::Status pulled = EvaluatorPull(answered); !pulled.ok()) return Fail(pulled);
    if (!answered) return Fail(absl::InternalError("a shard held the evaluator's pull"));
    if (absl::Status scored = eval_->ScoreEval(params_, eval_rows_); !scored.ok()) {
      return Fail(scored);
    }
  }
  absl::StatusOr<model::Evaluation> evaluation = eval_->FinishEval();
  if (!evaluation.ok()) return Fail(evaluation.status());
  const int64_t examples =
      request.final() ? request.at_examples() : coordinator_->Status().examples();
  auto record = [this, e = *evaluation, examples, request] {
    const double quality = result_.quality_metric == "auc" ? e.auc : e.accuracy;
    result_.evaluations.push_back({Now(), examples, e.accuracy, e.mean_loss, e.auc, quality});
    if (options_.target_quality > 0 && !result_.seconds_to_target.has_value() &&
        quality >= options_.target_quality) {
      result_.seconds_to_target = Now();
    }
    if (request.final()) result_.wall_seconds = Now();
    // The report, as RunEvaluator sends it: the coordinator records it in the job's history,
    // and the final one ends the job.
    v1::WorkerMessage message;
    v1::EvalReport* report = message.mutable_eval();
    report->set_accuracy(e.accuracy);
    report->set_loss(e.mean_loss);
    report->set_auc(e.auc);
    report->set_examples(eval_->eval_size());
    report->set_final(request.final());
    report->set_requested_at_examples(request.at_examples());
    report->set_requested_at_seconds(request.at_seconds());
    Send(evaluator_thread_.get(), static_cast<int64_t>(message.ByteSizeLong()),
         [this, message = std::move(message)] {
           coordinator_->WorkerMessage(evaluator_.id, message);
         });
  };
  const double seconds = timing_.spec().evaluation_seconds();
  if (seconds == 0) {
    record();
  } else if (evaluator_thread_ != nullptr) {
    evaluator_thread_->Run(seconds, std::move(record));
  } else {
    queue_.After(absl::Seconds(seconds), std::move(record));
  }
}

void Simulation::SchedulePeriodicEval() {
  const double interval = job_.eval().interval_seconds();
  if (!(interval > 0)) return;
  queue_.After(absl::Seconds(interval), [this] {
    if (evaluator_.finished) return;
    Evaluate(v1::EvaluateNow());
    SchedulePeriodicEval();
  });
}

}  // namespace

absl::StatusOr<v1::SimSpec> ParseSimSpec(absl::string_view text) {
  v1::SimSpec spec;
  SYNCOPATE_RETURN_IF_ERROR(job::ParseTextProto(text, "sim spec", spec));
  return spec;
}

absl::StatusOr<v1::SimSpec> LoadSimSpecFile(const std::string& path) {
  SYNCOPATE_ASSIGN_OR_RETURN(const std::string text, job::ReadSpecFile(path, "sim spec"));
  absl::StatusOr<v1::SimSpec> spec = ParseSimSpec(text);
  if (!spec.ok()) {
    return absl::Status(spec.status().code(), absl::StrCat(path, ": ", spec.status().message()));
  }
  return spec;
}

absl::StatusOr<SimResult> RunSimulation(const SimOptions& options) {
  SYNCOPATE_RETURN_IF_ERROR(job::ValidateJobSpec(options.job));
  SYNCOPATE_ASSIGN_OR_RETURN(
      StepTimeModel timing,
      StepTimeModel::Create(options.spec, options.job.num_workers(), options.timing_seed));
  Simulation simulation(options, std::move(timing));
  SYNCOPATE_RETURN_IF_ERROR(simulation.Setup());
  return simulation.Run();
}

}  // namespace syncopate::sim
