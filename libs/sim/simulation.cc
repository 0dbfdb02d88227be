#include "libs/sim/simulation.h"

#include <algorithm>
#include <memory>
#include <numeric>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "libs/common/status_macros.h"
#include "libs/coordinator/mode_controller.h"
#include "libs/data/lease_table.h"
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

// The real coordinator ticks every 200 ms (services/coordinator); its mode-control round runs
// on a tick at most every ModeController::kDecisionInterval.
constexpr absl::Duration kCoordinatorTick = absl::Milliseconds(200);
// Without a limit in the spec: far beyond any job this machine could also run for real.
constexpr double kDefaultMaxVirtualSeconds = 100000;

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

// kAbsent: this life's process has not started yet (SimSpec.joins); kJoining: its hello is on
// the way. A worker accepted by the coordinator is kIdle until its first step.
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
  int index = 0;  // the spec's worker index: its step-time stream and slowdowns
  int32_t id = 0;
  int life = 0;
  WorkerState state = WorkerState::kIdle;
  bool stop_requested = false;
  bool member = true;  // the coordinator's view
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

// kFinalEval: every worker has stopped and the final evaluation is under way.
enum class Phase { kRunning, kFinishing, kFinalEval, kDone };

class Simulation {
 public:
  Simulation(const SimOptions& options, StepTimeModel timing)
      : options_(options), job_(options.job), timing_(std::move(timing)), clock_(&queue_) {}

  absl::Status Setup();
  absl::StatusOr<SimResult> Run();

 private:
  // Worker side (libs/worker/trainer.cc).
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
  void Join(SimWorker& w);

  // Coordinator side (libs/coordinator/coordinator_core.cc).
  void OnHello(SimWorker& w);
  void OnLeaseRequest(SimWorker& w, const v1::LeaseRequest& request);
  void OnStepReport(SimWorker& w, const v1::StepReport& report);
  void OnWorkerGone(SimWorker& w);
  void ReshapeMembership();
  void Tick();
  void BeginFinishing();
  void MaybeDone();

  // A shard serves one message at a time: `serve` runs once the shard got to it.
  void Serve(size_t shard, int64_t bytes, EventQueue::Action serve);
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
  std::vector<float> GatherParameters() const;
  // Scores the parameters the shards hold now; `then` runs once the evaluation is recorded.
  void Evaluate(EventQueue::Action then = nullptr);
  // The evaluator's pull of the routed chunk into params_ and eval_rows_; `answered` says every
  // shard answered at once (an evaluator's pull is never held).
  absl::Status EvaluatorPull(bool& answered);
  void SchedulePeriodicEval();
  double Now() const { return Seconds(queue_.now()); }

  const SimOptions& options_;
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
  // With contention: each shard's serving thread (the real one works under one lock), and the
  // evaluator's.
  std::vector<std::unique_ptr<CpuThread>> shard_threads_;
  std::unique_ptr<CpuThread> evaluator_;

  // One per life, in id order (the coordinator's member order), a worker's lives in time
  // order. Never resized after Setup: pull owners point into it.
  std::vector<SimWorker> workers_;
  Phase phase_ = Phase::kRunning;
  std::unique_ptr<data::LeaseTable> leases_;
  std::unique_ptr<coordinator::ModeController> modes_;
  v1::Membership membership_;
  int64_t target_examples_ = 0;

  SimResult result_;
};

absl::Status Simulation::Setup() {
  SYNCOPATE_ASSIGN_OR_RETURN(job::ModelLayout layout, job::LayoutForJob(job_));
  // As CoordinatorCore::Create: the job every shard and worker sees records its layout.
  *job_.mutable_model()->mutable_layout() = job::LayoutRecord(layout);
  has_tables_ = !layout.tables.empty();
  result_.quality_metric = std::string(job::QualityMetric(job_));
  SYNCOPATE_ASSIGN_OR_RETURN(const int64_t train_examples, job::CountTrainExamples(job_));
  // What the coordinator does to the job before anyone sees it (CoordinatorCore::Create).
  job::ResolveRunLength(job_, train_examples);
  target_examples_ = job::TargetExamples(job_, train_examples);
  SYNCOPATE_ASSIGN_OR_RETURN(partitions_, job::PartitionModel(layout, job_.num_shards()));
  SYNCOPATE_ASSIGN_OR_RETURN(
      auto leases, data::LeaseTable::Create(train_examples, job_.block_size(), job_.seed()));
  leases_ = std::make_unique<data::LeaseTable>(std::move(leases));
  modes_ = std::make_unique<coordinator::ModeController>(job_, &clock_);
  // Every simulated worker prepares its batches on this one workload: keep the blocks of the
  // lease each is finishing and of its next.
  SYNCOPATE_ASSIGN_OR_RETURN(
      train_, job::CreateWorkload(job_, workload::Purpose::kTrain,
                                  {.cached_blocks = 2 * int64_t{job_.num_workers()} + 2}));
  SYNCOPATE_ASSIGN_OR_RETURN(eval_, job::CreateWorkload(job_, workload::Purpose::kEvaluate));
  params_.resize(static_cast<size_t>(train_->num_parameters()));
  evaluator_routing_.emplace(static_cast<int32_t>(partitions_.size()), eval_->table_dims());
  grad_.resize(params_.size());

  // The workers there at the start are the members from the start (the real job waits for
  // num_workers); the others join later (SimSpec.joins). The coordinator numbers workers from 1
  // in the order of their first hello: those at the start in index order, then the joiners.
  const int num_workers = job_.num_workers();
  std::vector<int> hello_order(static_cast<size_t>(num_workers));
  std::iota(hello_order.begin(), hello_order.end(), 0);
  auto first_hello = [this](int index) {
    const WorkerLife& first = timing_.Lives(index).front();
    return first.at_start ? -1.0 : first.join_seconds;
  };
  std::stable_sort(hello_order.begin(), hello_order.end(),
                   [&](int a, int b) { return first_hello(a) < first_hello(b); });
  size_t lives = 0;
  int n = 0;  // members at the start
  for (int index : hello_order) {
    lives += timing_.Lives(index).size();
    n += timing_.Lives(index).front().at_start ? 1 : 0;
  }
  workers_.resize(lives);
  result_.workers.resize(static_cast<size_t>(num_workers));
  const size_t num_shards = partitions_.size();
  membership_.set_generation(1);
  size_t slot = 0;
  for (size_t k = 0; k < hello_order.size(); ++k) {
    const int index = hello_order[k];
    result_.workers[k].id = static_cast<int32_t>(k) + 1;
    result_.workers[k].index = index;
    for (size_t life = 0; life < timing_.Lives(index).size(); ++life) {
      SimWorker& w = workers_[slot++];
      w.index = index;
      w.id = static_cast<int32_t>(k) + 1;
      w.life = static_cast<int>(life);
      const bool member = timing_.Lives(index)[life].at_start;
      w.state = member ? WorkerState::kIdle : WorkerState::kAbsent;
      w.member = member;
      // Members at the start come first in hello order: the i-th has id i + 1.
      if (member) {
        w.local_batch = job::LocalBatchShare(job_.global_batch(), n, static_cast<int>(k));
        membership_.add_worker_ids(w.id);
      }
      // Per shard, as a new ParameterClient starts.
      w.tokens.assign(num_shards, 0);
      w.min_versions.assign(num_shards, 0);
      w.modes.assign(num_shards, v1::MODE_UNSPECIFIED);
      w.pulled.resize(num_shards);
      w.pushes.resize(num_shards);
      w.routing.emplace(static_cast<int32_t>(num_shards), train_->table_dims());
    }
  }
  membership_.set_local_batch(job_.global_batch() / n);

  for (size_t s = 0; s < num_shards; ++s) {
    v1::ShardAssignment assignment;
    *assignment.mutable_job() = job_;
    *assignment.mutable_partition() = partitions_[s];
    assignment.set_initial_values(job::PackedInitialValues(layout, partitions_[s]));
    *assignment.mutable_membership() = membership_;
    assignment.set_mode(modes_->ConnectShard(static_cast<int32_t>(s)));
    SYNCOPATE_ASSIGN_OR_RETURN(auto core, shard::ShardCore::Create(assignment, &clock_, nullptr));
    shards_.push_back(std::move(core));
  }
  shard_busy_until_.assign(num_shards, absl::ZeroDuration());
  if (timing_.spec().cpu().cores() > 0) {
    cpu_ = std::make_unique<ProcessorSharing>(&queue_, timing_.spec().cpu().cores());
    for (size_t s = 0; s < num_shards; ++s) {
      shard_threads_.push_back(std::make_unique<CpuThread>(cpu_.get()));
    }
    for (SimWorker& w : workers_) w.thread = std::make_unique<CpuThread>(cpu_.get());
    evaluator_ = std::make_unique<CpuThread>(cpu_.get());
  }

  const absl::Duration startup = absl::Seconds(timing_.spec().startup_seconds());
  for (SimWorker& w : workers_) {
    const WorkerLife& life = timing_.Lives(w.index)[w.life];
    if (life.at_start) {
      queue_.At(startup, [this, &w] { StartStep(w); });
    } else {
      queue_.At(absl::Seconds(life.join_seconds), [this, &w] { Join(w); });
    }
    if (life.death.has_value()) {
      queue_.At(absl::Seconds(life.death->at_seconds()),
                [this, &w, d = *life.death] { Die(w, d); });
    }
  }
  queue_.At(kCoordinatorTick, [this] { Tick(); });
  if (options_.periodic_eval) SchedulePeriodicEval();
  return absl::OkStatus();
}

absl::StatusOr<SimResult> Simulation::Run() {
  const double limit = timing_.spec().max_virtual_seconds() > 0
                           ? timing_.spec().max_virtual_seconds()
                           : kDefaultMaxVirtualSeconds;
  while (phase_ != Phase::kDone) {
    if (queue_.empty()) {
      int live = 0;
      for (const SimWorker& w : workers_) {
        live += w.state == WorkerState::kDead || w.state == WorkerState::kAbsent ? 0 : 1;
      }
      return absl::InternalError(
          absl::StrCat("the simulated cluster stalled at ", Now(), " s with ", result_.examples,
                       " of ", target_examples_, " examples done and ", live, " live workers"));
    }
    if (Seconds(queue_.next_time()) > limit) {
      return absl::DeadlineExceededError(absl::StrCat("the job did not finish within ", limit,
                                                      " s of virtual time (", result_.examples,
                                                      " of ", target_examples_, " examples done)"));
    }
    if (options_.stop_requested && queue_.executed() % kStopPollEvents == 0 &&
        options_.stop_requested()) {
      return absl::CancelledError(absl::StrCat("stopped at ", Now(), " s of virtual time (",
                                               result_.examples, " of ", target_examples_,
                                               " examples done)"));
    }
    queue_.RunNext();
    if (!error_.ok()) return error_;
  }
  result_.events = queue_.executed();
  for (const auto& shard : shards_) {
    const shard::ShardStats stats = shard->Stats();
    result_.shard_versions.push_back(stats.version);
    result_.embedding_rows += stats.embedding_rows;
    AddCounters(stats.gradients, result_.gradients);
  }
  result_.parameters = GatherParameters();
  return std::move(result_);
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

void Simulation::SendLeaseRequest(SimWorker& w) {
  const v1::WorkerMessage message = w.leased.NextRequest();
  Send(ThreadOf(w), static_cast<int64_t>(message.ByteSizeLong()),
       [this, &w, request = message.lease_request()] { OnLeaseRequest(w, request); });
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
      Serve(s, bytes, [this, &w, s, request] {
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
      Serve(s, bytes, [this, &w, s] {
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
  Send(ThreadOf(w), static_cast<int64_t>(message.ByteSizeLong()),
       [this, &w, step = message.step()] { OnStepReport(w, step); });
  StartStep(w);
}

void Simulation::OnLease(SimWorker& w, const v1::DataLease& lease) {
  if (w.state == WorkerState::kDead || w.state == WorkerState::kStopped) return;
  w.leased.Add(lease);
  if (w.state == WorkerState::kWaitingLease) StartStep(w);
}

void Simulation::OnStop(SimWorker& w) {
  // A life not yet accepted is no member: the coordinator's stop goes to members only.
  if (w.state == WorkerState::kDead || w.state == WorkerState::kStopped ||
      w.state == WorkerState::kAbsent || w.state == WorkerState::kJoining) {
    return;
  }
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
  MaybeDone();
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
  queue_.After(absl::Seconds(detect), [this, &w] { OnWorkerGone(w); });
  MaybeDone();
}

void Simulation::Join(SimWorker& w) {
  // The process starts and says hello (WorkerRunner::Join); the coordinator decides on arrival.
  w.state = WorkerState::kJoining;
  v1::WorkerHello hello;
  hello.set_name(absl::StrCat("worker-", w.index));
  hello.set_role(v1::ROLE_WORKER);
  hello.set_job_id(job_.job_id());
  Send(ThreadOf(w), static_cast<int64_t>(hello.ByteSizeLong()), [this, &w] { OnHello(w); });
}

// ---- coordinator ----

void Simulation::OnHello(SimWorker& w) {
  if (w.state != WorkerState::kJoining) return;  // it died on the way
  if (phase_ != Phase::kRunning) {
    // CoordinatorCore::WorkerHello refuses workers once the job is finishing (OUT_OF_RANGE);
    // the worker has nothing left to do and exits.
    queue_.After(absl::Seconds(timing_.MessageSeconds(0)), [this, &w] {
      if (w.state == WorkerState::kJoining) Stop(w);
    });
    return;
  }
  // A worker rejoining under its name keeps its id. If the coordinator still holds its earlier
  // session (the death not yet noticed), the new one supersedes it: the leases go back to the
  // table (the new session starts with no data); its mode-control window stays, as in
  // WorkerHello. The earlier session's removal, when it comes, then finds it no member.
  bool superseded_member = false;
  for (SimWorker& earlier : workers_) {
    if (earlier.id == w.id && &earlier != &w && earlier.member) {
      earlier.member = false;
      leases_->ReleaseWorker(w.id);
      superseded_member = true;
    }
  }
  w.state = WorkerState::kIdle;
  result_.joins.push_back({Now(), w.id});
  // As CoordinatorCore::WorkerHello: a member from its first lease request (OnLeaseRequest), once
  // it has loaded the data set (startup_seconds); the welcome carries the share it will have.
  int members = 0;
  int position = 0;
  for (const SimWorker& other : workers_) {
    if (!other.member) continue;
    ++members;
    if (other.id < w.id) ++position;
  }
  w.local_batch = job::LocalBatchShare(job_.global_batch(), members + 1, position);
  if (superseded_member) ReshapeMembership();
  const double startup = std::max(timing_.spec().startup_seconds(), timing_.MessageSeconds(0));
  queue_.After(absl::Seconds(startup), [this, &w] { StartStep(w); });
}

void Simulation::OnLeaseRequest(SimWorker& w, const v1::LeaseRequest& request) {
  for (int64_t completed : request.completed_lease_ids()) {
    // A late report of a re-issued lease is refused, as in the coordinator; nothing to do.
    leases_->Complete(completed, w.id).IgnoreError();
  }
  if (phase_ != Phase::kRunning) return;
  if (!w.member) {
    if (w.state == WorkerState::kAbsent || w.state == WorkerState::kJoining ||
        w.state == WorkerState::kDead || w.state == WorkerState::kStopped) {
      return;
    }
    w.member = true;  // admitted at its first lease request, as in CoordinatorCore
    ReshapeMembership();
  }
  v1::CoordinatorToWorker reply;
  *reply.mutable_lease() = leases_->Acquire(w.id);
  Send(nullptr, static_cast<int64_t>(reply.ByteSizeLong()),
       [this, &w, lease = reply.lease()] { OnLease(w, lease); });
}

void Simulation::OnStepReport(SimWorker& w, const v1::StepReport& report) {
  if (phase_ != Phase::kRunning || report.examples() <= 0) return;
  result_.examples += report.examples();
  ++result_.steps;
  SimWorkerTally& tally = result_.workers[static_cast<size_t>(w.id) - 1];
  if (tally.steps == 0) tally.first_step_seconds = Now();
  ++tally.steps;
  tally.examples += report.examples();
  if (w.member) modes_->AddStep(w.id, report);
  if (result_.examples >= target_examples_) BeginFinishing();
}

void Simulation::OnWorkerGone(SimWorker& w) {
  if (!w.member) return;
  w.member = false;
  modes_->RemoveWorker(w.id);
  leases_->ReleaseWorker(w.id);
  // Also while finishing: a barrier must never wait on a worker that has left.
  ReshapeMembership();
}

void Simulation::ReshapeMembership() {
  std::vector<SimWorker*> members;
  for (SimWorker& w : workers_) {
    if (w.member) members.push_back(&w);
  }
  const int n = static_cast<int>(members.size());
  membership_.set_generation(membership_.generation() + 1);
  membership_.clear_worker_ids();
  for (int i = 0; i < n; ++i) {
    SimWorker& w = *members[i];
    membership_.add_worker_ids(w.id);
    const int32_t share = job::LocalBatchShare(job_.global_batch(), n, i);
    if (share != w.local_batch) {
      queue_.After(absl::Seconds(timing_.MessageSeconds(0)),
                   [&w, share] { w.local_batch = share; });
    }
  }
  membership_.set_local_batch(n > 0 ? job_.global_batch() / n : 0);
  for (size_t s = 0; s < shards_.size(); ++s) {
    queue_.After(absl::Seconds(timing_.MessageSeconds(0)),
                 [this, s, membership = membership_] { shards_[s]->SetMembership(membership); });
  }
}

void Simulation::Tick() {
  if (phase_ != Phase::kRunning) return;
  std::vector<WorkerLoad> loads;
  for (const SimWorker& w : workers_) {
    if (w.member) loads.push_back({w.id, w.local_batch});
  }
  // The real coordinator reads each shard's staleness cost from its periodic report; here the
  // shard is in the same process, so the tick reads its latest measurement directly.
  for (size_t s = 0; s < shards_.size(); ++s) {
    modes_->SetStalenessCost(static_cast<int32_t>(s), shards_[s]->Stats().staleness_cost);
  }
  coordinator::ModeRound round = modes_->Decide(loads, Now());
  for (const coordinator::SetModeCommand& command : round.commands) {
    result_.switches.push_back({Now(), command.shard, command.mode, command.reason});
    const size_t s = static_cast<size_t>(command.shard);
    queue_.After(absl::Seconds(timing_.MessageSeconds(0)), [this, s, message = command.ToProto()] {
      if (absl::Status applied = shards_[s]->ApplyModeCommand(message); !applied.ok()) {
        Fail(applied);
      }
    });
  }
  queue_.After(kCoordinatorTick, [this] { Tick(); });
}

void Simulation::BeginFinishing() {
  if (phase_ != Phase::kRunning) return;
  phase_ = Phase::kFinishing;
  for (SimWorker& w : workers_) {
    queue_.After(absl::Seconds(timing_.MessageSeconds(0)), [this, &w] { OnStop(w); });
  }
  MaybeDone();
}

void Simulation::MaybeDone() {
  if (phase_ != Phase::kFinishing) return;
  // A life that has not started (or whose hello is on the way) is nobody the coordinator knows:
  // it will be refused.
  for (const SimWorker& w : workers_) {
    if (w.state != WorkerState::kDead && w.state != WorkerState::kStopped &&
        w.state != WorkerState::kAbsent && w.state != WorkerState::kJoining) {
      return;
    }
  }
  // Every worker has stopped: the final evaluation measures what the shards hold now, and the
  // job is done once it is in (the real coordinator waits for it).
  phase_ = Phase::kFinalEval;
  Evaluate([this] {
    phase_ = Phase::kDone;
    result_.wall_seconds = Now();
  });
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

void Simulation::Serve(size_t shard, int64_t bytes, EventQueue::Action serve) {
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

void Simulation::Evaluate(EventQueue::Action then) {
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
  auto record = [this, e = *evaluation, examples = result_.examples, then = std::move(then)] {
    const double quality = result_.quality_metric == "auc" ? e.auc : e.accuracy;
    result_.evaluations.push_back({Now(), examples, e.accuracy, e.mean_loss, e.auc, quality});
    if (options_.target_quality > 0 && !result_.seconds_to_target.has_value() &&
        quality >= options_.target_quality) {
      result_.seconds_to_target = Now();
    }
    if (then) then();
  };
  const double seconds = timing_.spec().evaluation_seconds();
  if (seconds == 0) {
    record();
  } else if (evaluator_ != nullptr) {
    evaluator_->Run(seconds, std::move(record));
  } else {
    queue_.After(absl::Seconds(seconds), std::move(record));
  }
}

void Simulation::SchedulePeriodicEval() {
  const double interval = job_.eval().interval_seconds();
  if (!(interval > 0)) return;
  queue_.After(absl::Seconds(interval), [this] {
    if (phase_ == Phase::kFinalEval || phase_ == Phase::kDone) return;
    Evaluate();
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
