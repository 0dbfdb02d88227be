#include "libs/coordinator/coordinator_core.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "libs/common/status_macros.h"
#include "libs/coordinator/status_builder.h"
#include "libs/job/job_spec.h"
#include "libs/job/kept_evaluation.h"
#include "libs/job/model_kind.h"
#include "libs/model_export/export_reader.h"
#include "libs/straggler/robust_statistics.h"

namespace syncopate::coordinator {
namespace {

// Recent steps kept per worker: enough for a stable median, short enough to follow a change.
constexpr size_t kStepWindow = 16;

// The median of a worker's recent compute times, as the straggler detector computes medians (one
// definition: the status shows it beside the detector's slowdown).
double MedianComputeSeconds(const std::deque<double>& recent) {
  return Median(std::vector<double>(recent.begin(), recent.end()));
}

}  // namespace

class ABSL_SCOPED_LOCKABLE CoordinatorCore::Decision {
 public:
  Decision(CoordinatorCore& core, Outbox& out) ABSL_EXCLUSIVE_LOCK_FUNCTION(core.mu_)
      : core_(core), out_(out) {
    core_.mu_.Lock();
  }
  ~Decision() ABSL_UNLOCK_FUNCTION() {
    {
      absl::MutexLock lock(&core_.delivery_mu_);
      core_.undelivered_.push_back(std::move(out_));
    }
    core_.mu_.Unlock();
  }
  Decision(const Decision&) = delete;
  Decision& operator=(const Decision&) = delete;

 private:
  CoordinatorCore& core_;
  Outbox& out_;
};

void CoordinatorCore::Deliver() {
  {
    absl::MutexLock lock(&delivery_mu_);
    if (delivering_) return;  // that thread delivers ours too, after what was decided before
    delivering_ = true;
  }
  for (;;) {
    Outbox out;
    {
      absl::MutexLock lock(&delivery_mu_);
      if (undelivered_.empty()) {
        delivering_ = false;
        return;
      }
      out = std::move(undelivered_.front());
      undelivered_.pop_front();
    }
    if (out.progress.has_value()) WriteProgress(*out.progress);
    for (auto& [link, message] : out.to_shards) link->Send(std::move(message));
    for (auto& [link, message] : out.to_workers) link->Send(std::move(message));
    for (auto& [link, status] : out.closes) link->Close(status);
  }
}

absl::StatusOr<std::unique_ptr<CoordinatorCore>> CoordinatorCore::Create(
    CoordinatorOptions options) {
  if (options.metrics == nullptr) options.metrics = CoordinatorMetrics::NoOp();
  if (options.model.train_examples <= 0) {
    return absl::InvalidArgumentError("the training set is empty");
  }
  job::ResolveRunLength(options.job, options.model.train_examples);
  // Not kept in options_: a PyTorch module's initial values are the model's size again, and the
  // partitions and the per-shard values below are all the core needs of the layout.
  const job::ModelLayout layout = std::exchange(options.model.layout, {});
  // Every shard and worker gets the job with its layout: a worker checks its model against it.
  *options.job.mutable_model()->mutable_layout() = job::LayoutRecord(layout);
  // A warm start's source must hold this model: refused here in one line, not by every shard.
  SYNCOPATE_RETURN_IF_ERROR(model_export::CheckWarmStart(options.job));
  SYNCOPATE_ASSIGN_OR_RETURN(std::vector<v1::ShardPartition> partitions,
                             job::PartitionModel(layout, options.job.num_shards()));
  SYNCOPATE_ASSIGN_OR_RETURN(
      data::LeaseTable leases,
      data::LeaseTable::Create(options.model.train_examples, options.job.block_size(),
                               options.job.seed()));
  std::vector<std::string> initial_values;
  initial_values.reserve(partitions.size());
  for (const v1::ShardPartition& partition : partitions) {
    initial_values.push_back(job::PackedInitialValues(layout, partition));
  }
  return std::unique_ptr<CoordinatorCore>(new CoordinatorCore(
      std::move(options), std::move(partitions), std::move(initial_values), std::move(leases)));
}

CoordinatorCore::CoordinatorCore(CoordinatorOptions options,
                                 std::vector<v1::ShardPartition> partitions,
                                 std::vector<std::string> initial_values, data::LeaseTable leases)
    : options_(std::move(options)),
      partitions_(std::move(partitions)),
      initial_values_(std::move(initial_values)),
      target_examples_(job::TargetExamples(options_.job, options_.model.train_examples)),
      quality_metric_(job::QualityMetric(options_.job)),
      created_(options_.clock->Now()),
      leases_(std::move(leases)),
      modes_(options_.job, options_.clock, options_.metrics) {
  options_.metrics->SetJobState(v1::JOB_WAITING);
  absl::MutexLock lock(&mu_);
  held_ = options_.hold_start;
  RestoreProgress();
  // A restart into a job that already started (or ended) has nothing to hold.
  if (phase_ != JobPhase::kWaiting) held_ = false;
  if (held_) LOG(INFO) << "holding the job at its start until `syncopate release`";
}

void CoordinatorCore::RestoreProgress() {
  if (options_.journal == nullptr) return;
  absl::StatusOr<v1::CoordinatorProgress> loaded = options_.journal->Load();
  if (absl::IsNotFound(loaded.status())) return;
  if (!loaded.ok()) {
    LOG(ERROR) << "ignoring the saved progress: " << loaded.status();
    return;
  }
  const v1::CoordinatorProgress& progress = *loaded;
  if (progress.job_id() != options_.job.job_id()) {
    LOG(WARNING) << "progress file is of job " << progress.job_id() << "; starting afresh";
    return;
  }
  restarts_ = progress.restarts() + 1;
  examples_ = progress.examples();
  started_ = options_.clock->Now() - absl::Seconds(progress.elapsed_seconds());
  next_worker_id_ = std::max(next_worker_id_, progress.next_worker_id());
  for (const auto& [name, id] : progress.worker_ids()) worker_ids_by_name_[name] = id;
  for (const v1::WorkerStatus& saved : progress.workers()) {
    // Not connected (link null) until it says hello again; its tally carries on.
    Worker& worker = workers_[saved.worker_id()];
    worker.id = saved.worker_id();
    worker.name = saved.name();
    worker.role = saved.role();
    worker.examples = saved.examples();
    worker.steps = saved.steps();
    worker.last_loss = saved.last_loss();
    worker.wire.Restore(saved.wire());
    worker.departed_reason =
        saved.departed_reason().empty() ? "coordinator_restarted" : saved.departed_reason();
    worker.failure = saved.failure();
  }
  modes_.RestoreModes({progress.shard_modes().begin(), progress.shard_modes().end()});
  evals_.assign(progress.evals().begin(), progress.evals().end());
  job::ThinEvaluations(evals_, quality_metric_);
  if (progress.has_leases()) {
    // Without this the lease table would start the epoch over and replay what was done.
    if (absl::Status leases = leases_.Restore(progress.leases()); !leases.ok()) {
      LOG(ERROR) << "lease progress not restored, the data order starts over: " << leases;
    } else {
      LOG(INFO) << "lease table resumes epoch " << progress.leases().epoch() << " with "
                << progress.leases().unfinished_size() << " unfinished block(s) to re-issue";
    }
  }
  // The job had an evaluator: after a restart, wait for it to rejoin before ending without one.
  expect_evaluator_ = !evals_.empty();
  // A running job carries on as soon as its processes re-register; a finished one stays done.
  if (progress.state() == v1::JOB_RUNNING || progress.state() == v1::JOB_FINISHING) {
    EnterPhase(JobPhase::kRunning);
  } else if (progress.state() == v1::JOB_DONE) {
    EnterPhase(JobPhase::kDone);
  }
  LOG(INFO) << "restart " << restarts_ << " of job " << progress.job_id() << ": "
            << JobPhaseName(phase_) << " at " << examples_ << " examples";
  // The rule reads only the evaluations, so it decides as the previous life did.
  if (options_.job.eval().early_stop()) {
    early_stop_reason_ = job::EarlyStopReason(evals_, quality_metric_);
  }
  if (phase_ == JobPhase::kRunning &&
      (examples_ >= target_examples_ || !early_stop_reason_.empty())) {
    Outbox ignored;  // nobody is connected yet
    BeginFinishing(ignored);
    // The previous life received the final evaluation and stopped everyone, then died before
    // the shards' final reports: the job's result is recorded, and the evaluator that sent it
    // has left. Waiting for another final evaluation would wait for nobody.
    if (std::any_of(evals_.begin(), evals_.end(),
                    [](const v1::EvalStatus& e) { return e.final(); })) {
      BeginDraining("final evaluation recorded before the restart", ignored);
    }
  }
}

void CoordinatorCore::SaveProgress(Outbox& out) {
  if (options_.journal == nullptr) return;
  v1::CoordinatorProgress progress;
  progress.set_job_id(options_.job.job_id());
  progress.set_state(ToJobState(phase_));
  progress.set_examples(examples_);
  progress.set_elapsed_seconds(Elapsed());
  progress.set_next_worker_id(next_worker_id_);
  progress.set_restarts(restarts_);
  for (const auto& [name, id] : worker_ids_by_name_) (*progress.mutable_worker_ids())[name] = id;
  for (const auto& [id, worker] : workers_) {
    v1::WorkerStatus* saved = progress.add_workers();
    saved->set_worker_id(id);
    saved->set_name(worker.name);
    saved->set_role(worker.role);
    saved->set_examples(worker.examples);
    saved->set_steps(worker.steps);
    saved->set_last_loss(worker.last_loss);
    saved->set_departed_reason(worker.departed_reason);
    saved->set_failure(worker.failure);
    *saved->mutable_wire() = worker.wire.total();
  }
  for (const auto& [id, mode] : modes_.Modes()) (*progress.mutable_shard_modes())[id] = mode;
  for (const v1::EvalStatus& eval : evals_) *progress.add_evals() = eval;
  *progress.mutable_leases() = leases_.Progress();
  out.progress = ProgressSnapshot{++progress_sequence_, std::move(progress)};
}

void CoordinatorCore::WriteProgress(const ProgressSnapshot& snapshot) {
  absl::MutexLock lock(&progress_file_mu_);
  // Two threads may each carry a snapshot out of mu_; whichever comes second must not put the
  // older one back.
  if (snapshot.sequence <= progress_written_) return;
  progress_written_ = snapshot.sequence;
  absl::Status saved = options_.journal->Save(snapshot.progress);
  if (!saved.ok()) {
    LOG_EVERY_N(WARNING, 30) << "saving the progress: " << saved;
  }
}

absl::Status CoordinatorCore::WrongJob(const std::string& session, const std::string& who,
                                       const std::string& job_id) const {
  options_.metrics->CountRejection(session, "wrong_job");
  LOG(WARNING) << "refused " << who << ": it is in job '" << job_id << "', this is job '"
               << options_.job.job_id() << "'";
  return absl::FailedPreconditionError(absl::StrCat("wrong job id: ", who, " is in job '", job_id,
                                                    "', this coordinator runs job '",
                                                    options_.job.job_id(), "'"));
}

int CoordinatorCore::restarts() const {
  absl::MutexLock lock(&mu_);
  return restarts_;
}

absl::StatusOr<int32_t> CoordinatorCore::WorkerHello(std::shared_ptr<WorkerLink> link,
                                                     const v1::WorkerHello& hello) {
  if (hello.role() != v1::ROLE_WORKER && hello.role() != v1::ROLE_EVALUATOR) {
    return absl::InvalidArgumentError("hello.role must be ROLE_WORKER or ROLE_EVALUATOR");
  }
  // A worker rejoining after a coordinator restart must find the job it left: a coordinator
  // started with another job (a reused address, a wrong --state_dir) would otherwise feed it
  // another model's shard map.
  if (!hello.job_id().empty() && hello.job_id() != options_.job.job_id()) {
    return WrongJob("worker", absl::StrCat("worker '", hello.name(), "'"), hello.job_id());
  }
  if (hello.logical_workers() < 0 || hello.logical_workers() > options_.job.num_workers() ||
      (hello.role() == v1::ROLE_EVALUATOR && hello.logical_workers() > 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hello.logical_workers must be in [1, num_workers = ", options_.job.num_workers(),
        "] for a worker and 1 for an evaluator, got ", hello.logical_workers()));
  }
  Outbox out;
  int32_t id = 0;
  {
    Decision decision(*this, out);
    // While FINISHING the evaluator may still (re)join for the final evaluation; workers not.
    if (phase_ == JobPhase::kDone ||
        ((phase_ == JobPhase::kFinishing || phase_ == JobPhase::kDraining) &&
         hello.role() == v1::ROLE_WORKER)) {
      // OUT_OF_RANGE, "past the end": not the caller's mistake. A worker that finds its job over
      // has nothing left to do and exits 0, so a batch system (a Kubernetes Job) does not count
      // a late or restarted worker of a finished job as a failure.
      return absl::OutOfRangeError("the job has finished");
    }
    // A worker rejoining under its name (after its own or the coordinator's restart) keeps its
    // id, so the shards' membership and its streams stay valid.
    auto known = worker_ids_by_name_.find(hello.name());
    if (!hello.name().empty() && known != worker_ids_by_name_.end()) {
      id = known->second;
      auto previous = workers_.find(id);
      if (previous != workers_.end() && previous->second.link != nullptr) {
        out.closes.emplace_back(previous->second.link,
                                absl::AbortedError("superseded by a new session of the same name"));
        previous->second.link = nullptr;
      }
      // A new session starts with no data: the worker dropped what it had leased, so those
      // blocks go to whoever asks next instead of staying leased to nobody.
      const int released = leases_.ReleaseWorker(id);
      if (released > 0) LOG(INFO) << "re-issuing " << released << " leases of " << hello.name();
    } else {
      id = next_worker_id_++;
      if (!hello.name().empty()) worker_ids_by_name_[hello.name()] = id;
    }
    Worker& worker = workers_[id];
    const int64_t examples = worker.examples;  // a rejoining worker keeps its tally
    const int64_t steps = worker.steps;
    const bool was_member = worker.member;
    worker = Worker();
    worker.examples = examples;
    worker.steps = steps;
    worker.id = id;
    worker.name = hello.name().empty() ? absl::StrCat("worker-", id) : hello.name();
    worker.role = hello.role();
    worker.shares = std::max(1, hello.logical_workers());
    worker.link = std::move(link);
    worker.last_heard = options_.clock->Now();
    LOG(INFO) << "hello from " << worker.name << " (id " << id << ", " << v1::Role_Name(worker.role)
              << ")";
    if (IsUnderway(phase_)) {
      if (worker.role == v1::ROLE_WORKER) {
        // A worker joining a running job becomes a member at its first lease request, when it
        // has loaded its data (it loads after the welcome): a member from its hello held every
        // sync barrier while it loaded (+1.96 s per join at N = 15 in the simulator). The
        // welcome carries the share it will have as a member; a rejoining member leaves the
        // membership until then.
        worker.local_batch = ProspectiveShare(id);
        if (was_member) ReshapeMembership(out);
      }
      // A restarted coordinator may hear from workers before every shard re-registered: the
      // welcome (with the shard map) waits for the last shard (see ShardHello).
      if (AllShardsConnected()) Welcome(worker, out);
    } else {
      MaybeStart(out);
    }
  }
  Deliver();
  return id;
}

bool CoordinatorCore::Release() {
  Outbox out;
  bool was_held = false;
  {
    Decision decision(*this, out);
    was_held = held_;
    held_ = false;
    if (was_held) {
      LOG(INFO) << "released: the job starts once everyone it waits for has registered";
      MaybeStart(out);
    }
  }
  Deliver();
  return was_held;
}

void CoordinatorCore::MaybeStart(Outbox& out) {
  if (phase_ != JobPhase::kWaiting || held_ || !AllShardsConnected()) return;
  // The job's num_workers counts logical workers.
  int workers = 0;
  for (const auto& [id, worker] : workers_) {
    if (worker.link != nullptr && worker.role == v1::ROLE_WORKER) workers += worker.shares;
  }
  const bool grace_over = options_.clock->Now() - created_ >= options_.startup_grace;
  if (workers < options_.job.num_workers() && !(grace_over && workers > 0)) return;
  if (workers < options_.job.num_workers()) {
    LOG(WARNING) << "starting with " << workers << " of " << options_.job.num_workers()
                 << " workers after the startup grace period";
  }
  EnterPhase(JobPhase::kRunning);
  started_ = options_.clock->Now();
  for (auto& [id, worker] : workers_) {
    if (worker.link != nullptr && worker.role == v1::ROLE_WORKER) worker.member = true;
  }
  ReshapeMembership(out);
  for (auto& [id, worker] : workers_) {
    if (worker.link != nullptr) Welcome(worker, out);
  }
  LOG(INFO) << "job " << options_.job.job_id() << " running with " << workers << " workers, "
            << partitions_.size() << " shards, target " << target_examples_ << " examples";
}

void CoordinatorCore::Welcome(Worker& worker, Outbox& out) {
  v1::CoordinatorToWorker message;
  v1::Welcome* welcome = message.mutable_welcome();
  welcome->set_worker_id(worker.id);
  *welcome->mutable_job() = options_.job;
  *welcome->mutable_shard_map() = MakeShardMap();
  welcome->set_local_batch(worker.local_batch);
  if (worker.role == v1::ROLE_EVALUATOR) {
    if (const std::optional<size_t> kept = job::KeptEvaluation(evals_, quality_metric_)) {
      *welcome->mutable_kept_eval() = evals_[*kept];
    }
  }
  worker.welcomed = true;
  // The silence bound restarts here: the wait for the welcome (the job starting, the last shard
  // registering) is the coordinator's, not the worker's, and the role now loads its data.
  worker.last_heard = options_.clock->Now();
  out.to_workers.emplace_back(worker.link, std::move(message));
}

int32_t CoordinatorCore::ProspectiveShare(int32_t id) const {
  int total = 0;
  int position = 0;  // the logical workers before it
  for (const auto& [other, worker] : workers_) {
    if (!worker.member || other == id) continue;
    total += worker.shares;
    if (other < id) position += worker.shares;
  }
  const int shares = workers_.at(id).shares;
  return SharesOfGlobalBatch(options_.job.global_batch(), total + shares, position, shares);
}

int32_t CoordinatorCore::SharesOfGlobalBatch(int32_t global_batch, int total, int first,
                                             int count) {
  int32_t batch = 0;
  for (int j = first; j < first + count; ++j) batch += job::LocalBatchShare(global_batch, total, j);
  return batch;
}

void CoordinatorCore::ReshapeMembership(Outbox& out) {
  std::vector<Worker*> members;
  for (auto& [id, worker] : workers_) {
    if (worker.member) members.push_back(&worker);
  }
  membership_.set_generation(membership_.generation() + 1);
  membership_.clear_worker_ids();
  const int n = static_cast<int>(members.size());
  const int g = options_.job.global_batch();
  // G is split over the logical workers (a process standing for k of them gets k shares), so a
  // process of k logical workers pushes what k processes of one would have.
  int total = 0;
  for (const Worker* worker : members) total += worker->shares;
  int position = 0;
  for (int i = 0; i < n; ++i) {
    Worker& worker = *members[i];
    membership_.add_worker_ids(worker.id);
    const int32_t share = SharesOfGlobalBatch(g, total, position, worker.shares);
    position += worker.shares;
    if (share != worker.local_batch && worker.welcomed && worker.link != nullptr) {
      v1::CoordinatorToWorker message;
      message.mutable_set_local_batch()->set_local_batch(share);
      out.to_workers.emplace_back(worker.link, std::move(message));
    }
    worker.local_batch = share;
  }
  membership_.set_local_batch(n > 0 ? g / n : 0);
  for (auto& [id, shard] : shards_) {
    if (shard.link == nullptr) continue;
    v1::CoordinatorToShard message;
    *message.mutable_membership() = membership_;
    out.to_shards.emplace_back(shard.link, std::move(message));
  }
  options_.metrics->SetMembers(n);
}

void CoordinatorCore::WorkerMessage(int32_t worker_id, const v1::WorkerMessage& message) {
  Outbox out;
  {
    Decision decision(*this, out);
    auto it = workers_.find(worker_id);
    if (it == workers_.end() || it->second.link == nullptr) return;
    Worker& worker = it->second;
    const absl::Time now = options_.clock->Now();
    worker.last_heard = now;
    switch (message.kind_case()) {
      case v1::WorkerMessage::kStep: {
        const v1::StepReport& step = message.step();
        if (step.examples() <= 0 || phase_ != JobPhase::kRunning) break;
        worker.examples += step.examples();
        worker.steps += 1;
        worker.last_loss = step.loss();
        worker.last_step = now;
        worker.wire.Add(step.wire());
        worker.compute_seconds.push_back(step.compute_seconds());
        if (worker.member) modes_.AddStep(worker_id, step);
        if (worker.compute_seconds.size() > kStepWindow) worker.compute_seconds.pop_front();
        examples_ += step.examples();
        throughput_.Add(now, examples_);
        options_.metrics->AddExamples(worker.name, static_cast<double>(step.examples()));
        options_.metrics->SetWorkerLoss(worker.name, step.loss());
        if (examples_ >= target_examples_) BeginFinishing(out);
        break;
      }
      case v1::WorkerMessage::kLeaseRequest: {
        for (int64_t completed : message.lease_request().completed_lease_ids()) {
          absl::Status status = leases_.Complete(completed, worker_id);
          if (!status.ok()) LOG(WARNING) << worker.name << ": " << status;
        }
        if (phase_ != JobPhase::kRunning) break;
        if (!worker.member) {
          if (worker.role != v1::ROLE_WORKER) break;
          // Admitted: it has its data and asks for work (see WorkerHello).
          LOG(INFO) << worker.name << " (id " << worker_id << ") is a member";
          worker.member = true;
          ReshapeMembership(out);
        }
        // Its data is loaded: from here a sync barrier waiting on it counts against it.
        if (worker.last_step == absl::InfiniteFuture()) worker.last_step = now;
        v1::CoordinatorToWorker reply;
        *reply.mutable_lease() = leases_.Acquire(worker_id);
        out.to_workers.emplace_back(worker.link, std::move(reply));
        break;
      }
      case v1::WorkerMessage::kEval:
        HandleEval(message.eval(), out);
        break;
      case v1::WorkerMessage::kGoodbye:
        worker.failure = message.goodbye().reason().substr(0, 1024);
        LOG(WARNING) << worker.name << " failed: " << worker.failure;
        break;
      default:
        break;
    }
  }
  Deliver();
}

void CoordinatorCore::HandleEval(const v1::EvalReport& report, Outbox& out) {
  // After the final evaluation nothing may replace it as the job's result.
  if (phase_ == JobPhase::kDraining || phase_ == JobPhase::kDone) return;
  evals_.push_back(EvalStatusOf(report, examples_, Elapsed()));
  job::ThinEvaluations(evals_, quality_metric_);
  const v1::EvalStatus& eval = evals_.back();
  options_.metrics->SetEval(eval.accuracy(), eval.loss(), eval.auc(),
                            static_cast<double>(eval.examples_at_eval()), eval.seconds_at_eval());
  LOG(INFO) << (report.final() ? "final " : "") << "evaluation: accuracy " << report.accuracy()
            << ", loss " << report.loss();
  if (options_.job.eval().early_stop() && early_stop_reason_.empty() &&
      phase_ == JobPhase::kRunning) {
    early_stop_reason_ = job::EarlyStopReason(evals_, quality_metric_);
    if (!early_stop_reason_.empty()) BeginFinishing(out);
  }
  if (report.final() && phase_ == JobPhase::kFinishing) {
    BeginDraining("final evaluation received", out);
  }
}

void CoordinatorCore::BeginFinishing(Outbox& out) {
  if (phase_ != JobPhase::kRunning) return;
  EnterPhase(JobPhase::kFinishing);
  finishing_since_ = options_.clock->Now();
  if (early_stop_reason_.empty()) {
    LOG(INFO) << "target of " << target_examples_ << " examples reached; stopping workers";
  } else {
    LOG(INFO) << "stopping early at " << examples_ << " examples: " << early_stop_reason_;
  }
  SaveProgress(out);  // a coordinator restarted from here must not wait for the workers it stopped
  for (auto& [id, worker] : workers_) {
    if (worker.link == nullptr || worker.role != v1::ROLE_WORKER) continue;
    v1::CoordinatorToWorker stop;
    stop.mutable_stop()->set_reason("training target reached");
    out.to_workers.emplace_back(worker.link, std::move(stop));
  }
}

void CoordinatorCore::BeginDraining(const std::string& why, Outbox& out) {
  if (phase_ != JobPhase::kFinishing) return;
  EnterPhase(JobPhase::kDraining);
  draining_since_ = options_.clock->Now();
  done_reason_ = why;
  for (auto& [id, worker] : workers_) {
    if (worker.link == nullptr) continue;
    v1::CoordinatorToWorker stop;
    stop.mutable_stop()->set_reason("job done");
    out.to_workers.emplace_back(worker.link, std::move(stop));
  }
  // When the final evaluation is the one the job keeps, the shards' last parameters are the kept
  // version: they write them to kept/ as well (otherwise kept/ would hold an older, worse one).
  const std::optional<size_t> kept = job::KeptEvaluation(evals_, quality_metric_);
  const bool final_is_kept = kept.has_value() && evals_[*kept].final();
  for (auto& [id, shard] : shards_) {
    if (shard.link == nullptr) continue;
    v1::CoordinatorToShard stop;
    stop.mutable_stop()->set_reason("job done");
    stop.mutable_stop()->set_final_is_kept(final_is_kept);
    out.to_shards.emplace_back(shard.link, std::move(stop));
  }
  // Written before the stops go out (Deliver writes the progress first): a coordinator killed
  // after this point restarts knowing the job's result, instead of waiting for an evaluator
  // that was already told to stop.
  SaveProgress(out);
}

void CoordinatorCore::WorkerGone(int32_t worker_id, const std::string& reason,
                                 const WorkerLink* link) {
  Outbox out;
  {
    Decision decision(*this, out);
    auto it = workers_.find(worker_id);
    if (it == workers_.end() || it->second.link == nullptr) return;
    // A superseded session ending must not remove the session that replaced it.
    if (link != nullptr && it->second.link.get() != link) return;
    RemoveWorker(it->second, reason, out);
  }
  Deliver();
}

void CoordinatorCore::RemoveWorker(Worker& worker, const std::string& reason, Outbox& out) {
  // `reason` is a metric label: keep it to a fixed vocabulary ("session_closed", "silent",
  // "stalled").
  LOG(INFO) << worker.name << " (id " << worker.id << ") left: " << reason;
  worker.link = nullptr;
  worker.departed_reason = reason;
  modes_.RemoveWorker(worker.id);
  const int requeued = leases_.ReleaseWorker(worker.id);
  if (requeued > 0) LOG(INFO) << "re-issuing " << requeued << " leases of " << worker.name;
  options_.metrics->CountDeparture(reason);
  if (worker.member) {
    worker.member = false;
    // Also while FINISHING: a barrier must never wait on a worker that has left.
    ReshapeMembership(out);
  }
}

absl::Status CoordinatorCore::ShardHello(std::shared_ptr<ShardLink> link,
                                         const v1::ShardHello& hello) {
  Outbox out;
  {
    Decision decision(*this, out);
    const int32_t id = hello.shard_id();
    if (!hello.job_id().empty() && hello.job_id() != options_.job.job_id()) {
      return WrongJob("shard", absl::StrCat("shard ", id), hello.job_id());
    }
    if (id < 0 || id >= static_cast<int32_t>(partitions_.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("shard id ", id, " is outside [0, ", partitions_.size(), ") for this job"));
    }
    if (hello.address().empty()) return absl::InvalidArgumentError("shard hello has no address");
    Shard& shard = shards_[id];
    if (shard.link != nullptr) {
      return absl::AlreadyExistsError(absl::StrCat("shard ", id, " is already connected"));
    }
    shard.link = std::move(link);
    shard.address = hello.address();
    shard.last_report_at = absl::InfinitePast();
    if (AllShardsConnected()) shards_complete_since_ = options_.clock->Now();
    LOG(INFO) << "shard " << id << " registered at " << shard.address;
    v1::CoordinatorToShard message;
    v1::ShardAssignment* assignment = message.mutable_assignment();
    *assignment->mutable_job() = options_.job;
    *assignment->mutable_partition() = partitions_[id];
    assignment->set_initial_values(initial_values_[id]);
    *assignment->mutable_membership() = membership_;
    assignment->set_mode(modes_.ConnectShard(id));
    out.to_shards.emplace_back(shard.link, std::move(message));
    if (IsUnderway(phase_) && AllShardsConnected()) {
      for (auto& [worker_id, worker] : workers_) {
        if (worker.link != nullptr && !worker.welcomed) Welcome(worker, out);
      }
    }
    MaybeStart(out);
  }
  Deliver();
  return absl::OkStatus();
}

void CoordinatorCore::ShardReport(int32_t shard_id, const v1::ShardReport& report) {
  Outbox out;
  {
    Decision decision(*this, out);
    auto it = shards_.find(shard_id);
    if (it == shards_.end()) return;
    it->second.last_report = report;
    it->second.last_report_at = options_.clock->Now();
    it->second.final_report = it->second.final_report || report.final();
    it->second.wire.Add(report.wire());
    const v1::StalenessCostReport& c = report.staleness_cost();
    modes_.SetStalenessCost(
        shard_id, StalenessCost{c.versions(), c.velocity_squared(), c.velocity_drift_squared(),
                                c.velocity_drift_squared_standard_error()});
    for (const auto& [id, worker] : workers_) {
      if (worker.role != v1::ROLE_WORKER) continue;
      const bool waiting =
          std::find(report.barrier_waiting_for().begin(), report.barrier_waiting_for().end(), id) !=
          report.barrier_waiting_for().end();
      options_.metrics->SetBarrierWaiting(shard_id, worker.name, waiting);
    }
    MaybeFinishDraining(out);
  }
  Deliver();
}

void CoordinatorCore::MaybeFinishDraining(Outbox& out) {
  if (phase_ != JobPhase::kDraining) return;
  // A shard's final report makes the job's status exact; a dead shard cannot send one, and a
  // bounded wait keeps a stuck shard from holding the job open.
  constexpr absl::Duration kShardDrainTimeout = absl::Seconds(5);
  bool drained = true;
  for (const auto& [id, shard] : shards_) {
    if (shard.link != nullptr && !shard.final_report) drained = false;
  }
  if (!drained && options_.clock->Now() - draining_since_ < kShardDrainTimeout) return;
  MarkDone(out);
}

void CoordinatorCore::MarkDone(Outbox& out) {
  EnterPhase(JobPhase::kDone);
  LOG(INFO) << "job done: " << done_reason_;
  SaveProgress(out);
}

void CoordinatorCore::EnterPhase(JobPhase phase) {
  phase_ = phase;
  options_.metrics->SetJobState(ToJobState(phase));
}

void CoordinatorCore::ShardGone(int32_t shard_id) {
  Outbox out;
  {
    Decision decision(*this, out);
    auto it = shards_.find(shard_id);
    if (it == shards_.end()) return;
    if (phase_ != JobPhase::kDraining && phase_ != JobPhase::kDone) {
      LOG(WARNING) << "shard " << shard_id << " disconnected";
    }
    it->second.link = nullptr;
    modes_.DisconnectShard(shard_id);
    MaybeFinishDraining(out);
  }
  Deliver();
}

void CoordinatorCore::Tick() {
  Outbox out;
  {
    Decision decision(*this, out);
    const absl::Time now = options_.clock->Now();
    MaybeStart(out);
    TimeOutSilentWorkers(now, out);
    TimeOutStalledWorkers(now, out);
    MaybeFinishDraining(out);
    MaybeSaveProgress(now, out);
    if (phase_ == JobPhase::kRunning) DecideModes(out);
    if (phase_ == JobPhase::kRunning) MaybeRequestCheckpoints(now, out);
    if (phase_ == JobPhase::kFinishing) AdvanceFinishing(now, out);
  }
  Deliver();
}

absl::Duration CoordinatorCore::StepTimeout(const Worker& worker) const {
  return std::max(options_.min_silence_timeout,
                  absl::Seconds(10 * MedianComputeSeconds(worker.compute_seconds)));
}

void CoordinatorCore::TimeOutSilentWorkers(absl::Time now, Outbox& out) {
  for (auto& [id, worker] : workers_) {
    if (worker.link == nullptr) continue;
    const absl::Duration timeout = StepTimeout(worker);
    if (now - worker.last_heard > timeout) {
      out.closes.emplace_back(
          worker.link,
          absl::DeadlineExceededError("no message within " + absl::FormatDuration(timeout)));
      RemoveWorker(worker, "silent", out);
    }
  }
}

void CoordinatorCore::TimeOutStalledWorkers(absl::Time now, Outbox& out) {
  if (phase_ != JobPhase::kRunning) return;
  // Only the workers a barrier names: the others wait at that barrier (their pulls are held), so
  // their own silence in steps is the stalled worker's doing, not theirs. A worker that beats but
  // never steps (a hung model call, a read that never returns) would otherwise hold every sync
  // barrier until someone noticed the SyncopateBarrierStalled alert.
  // Every step needs every shard: while one is away (a lost node: its session stands until the
  // keepalive ends it, ~20 s) nobody can step, and no one is judged; the bound then counts from
  // the moment the last shard came back. A report older than a few of the shards' 0.5 s intervals
  // is from a shard that stopped answering, and names who it waited for back then. Both judged
  // healthy workers stalled on 2026-12-02 (kube_node_loss_test: three removed when the lost
  // node's shards went silent, and again the moment their replacements registered).
  if (!AllShardsConnected()) return;
  constexpr absl::Duration kFreshReport = absl::Seconds(3);
  for (const auto& [shard_id, shard] : shards_) {
    if (shard.link == nullptr || now - shard.last_report_at > kFreshReport) continue;
    for (const int32_t id : shard.last_report.barrier_waiting_for()) {
      auto it = workers_.find(id);
      if (it == workers_.end()) continue;
      Worker& worker = it->second;
      if (worker.link == nullptr || !worker.member) continue;
      const absl::Duration timeout = StepTimeout(worker);
      if (now - std::max(worker.last_step, shards_complete_since_) <= timeout) continue;
      LOG(WARNING) << worker.name << " (id " << id << ") made no step within "
                   << absl::FormatDuration(timeout) << " while shard " << shard_id
                   << "'s sync barrier waited for it: removed, the barrier goes on without it";
      out.closes.emplace_back(worker.link,
                              absl::DeadlineExceededError(absl::StrCat(
                                  "no step within ", absl::FormatDuration(timeout), " while shard ",
                                  shard_id, "'s sync barrier waited for it")));
      RemoveWorker(worker, "stalled", out);
    }
  }
}

void CoordinatorCore::MaybeSaveProgress(absl::Time now, Outbox& out) {
  // About once a second: what a restarted coordinator carries on from.
  if (now - last_progress_save_ < absl::Seconds(1)) return;
  last_progress_save_ = now;
  SaveProgress(out);
}

void CoordinatorCore::MaybeRequestCheckpoints(absl::Time now, Outbox& out) {
  const absl::Duration interval = absl::Seconds(options_.job.checkpoint_interval_seconds());
  if (last_checkpoint_request_ == absl::InfinitePast()) last_checkpoint_request_ = now;
  if (now - last_checkpoint_request_ < interval) return;
  last_checkpoint_request_ = now;
  for (auto& [id, shard] : shards_) {
    if (shard.link == nullptr) continue;
    v1::CoordinatorToShard message;
    message.mutable_checkpoint_now();
    out.to_shards.emplace_back(shard.link, std::move(message));
  }
}

void CoordinatorCore::AdvanceFinishing(absl::Time now, Outbox& out) {
  const bool workers_left = LiveWorkers(v1::ROLE_WORKER) == 0;
  const bool timed_out = now - finishing_since_ > options_.finish_timeout;
  const int evaluators = LiveWorkers(v1::ROLE_EVALUATOR);
  if ((workers_left || timed_out) && !final_eval_requested_ && evaluators > 0) {
    final_eval_requested_ = true;
    for (auto& [id, worker] : workers_) {
      if (worker.link == nullptr || worker.role != v1::ROLE_EVALUATOR) continue;
      v1::CoordinatorToWorker evaluate;
      evaluate.mutable_evaluate()->set_final(true);
      evaluate.mutable_evaluate()->set_at_examples(examples_);
      evaluate.mutable_evaluate()->set_at_seconds(Elapsed());
      out.to_workers.emplace_back(worker.link, std::move(evaluate));
    }
  }
  if (workers_left && evaluators == 0 && !expect_evaluator_) {
    BeginDraining("workers stopped (no evaluator)", out);
  } else if (now - finishing_since_ > 2 * options_.finish_timeout) {
    BeginDraining("final evaluation timed out", out);
  }
}

void CoordinatorCore::DecideModes(Outbox& out) {
  std::vector<WorkerLoad> loads;
  for (const auto& [id, worker] : workers_) {
    if (worker.member) loads.push_back({id, worker.local_batch});
  }
  ModeRound round = modes_.Decide(loads, Elapsed());
  if (!round.decided) return;
  for (const WorkerAssessment& a : round.assessment.workers) {
    auto it = workers_.find(a.worker);
    if (it == workers_.end() || !a.enough_data) continue;
    options_.metrics->SetSlowdown(it->second.name, a.slowdown, a.straggler);
  }
  options_.metrics->SetStragglers(static_cast<int>(round.assessment.Stragglers().size()));
  for (const SetModeCommand& command : round.commands) {
    auto it = shards_.find(command.shard);
    if (it == shards_.end() || it->second.link == nullptr) continue;
    v1::CoordinatorToShard message;
    *message.mutable_set_mode() = command.ToProto();
    out.to_shards.emplace_back(it->second.link, std::move(message));
  }
}

v1::ShardMap CoordinatorCore::MakeShardMap() const {
  v1::ShardMap map;
  for (const v1::ShardPartition& p : partitions_) {
    v1::ShardEndpoint* endpoint = map.add_shards();
    endpoint->set_shard_id(p.shard_id());
    endpoint->set_flat_begin(p.flat_begin());
    endpoint->set_flat_end(p.flat_end());
    auto it = shards_.find(p.shard_id());
    if (it != shards_.end()) endpoint->set_address(it->second.address);
  }
  return map;
}

bool CoordinatorCore::AllShardsConnected() const {
  for (const v1::ShardPartition& p : partitions_) {
    auto it = shards_.find(p.shard_id());
    if (it == shards_.end() || it->second.link == nullptr) return false;
  }
  return true;
}

int CoordinatorCore::LiveWorkers(v1::Role role) const {
  int live = 0;
  for (const auto& [id, worker] : workers_) {
    if (worker.link != nullptr && worker.role == role) ++live;
  }
  return live;
}

double CoordinatorCore::Elapsed() const {
  if (phase_ == JobPhase::kWaiting) return 0;
  return absl::ToDoubleSeconds(options_.clock->Now() - started_);
}

JobPhase CoordinatorCore::phase() const {
  absl::MutexLock lock(&mu_);
  return phase_;
}

v1::JobState CoordinatorCore::state() const {
  absl::MutexLock lock(&mu_);
  return ToJobState(phase_);
}

v1::JobState CoordinatorCore::WaitUntilDone(absl::Duration timeout) const {
  mu_.LockWhenWithTimeout(
      absl::Condition(
          +[](const JobPhase* phase) { return *phase == JobPhase::kDone; }, &phase_),
      timeout);
  const v1::JobState state = ToJobState(phase_);
  mu_.Unlock();
  return state;
}

absl::Time CoordinatorCore::DrainingSince() const {
  absl::MutexLock lock(&mu_);
  return phase_ == JobPhase::kDraining || phase_ == JobPhase::kDone ? draining_since_
                                                                    : absl::InfiniteFuture();
}

void CoordinatorCore::SetLatestExport(const v1::ExportRecord& record) {
  absl::MutexLock lock(&mu_);
  latest_export_ = record;
}

void CoordinatorCore::SetExportsFinished() {
  absl::MutexLock lock(&mu_);
  exports_finished_ = true;
}

v1::ClusterStatus CoordinatorCore::Status() const {
  absl::MutexLock lock(&mu_);
  v1::ClusterStatus status;
  status.set_job_id(options_.job.job_id());
  if (!latest_export_.path().empty()) *status.mutable_latest_export() = latest_export_;
  status.set_exports_finished(exports_finished_);
  status.set_state(ToJobState(phase_));
  status.set_held(held_);
  status.set_job_mode(options_.job.mode());
  status.set_elapsed_seconds(Elapsed());
  // Training ended when the stop condition was met; a job restored past it counts to its start.
  status.set_training_seconds(
      phase_ == JobPhase::kWaiting
          ? 0
          : absl::ToDoubleSeconds(std::min(options_.clock->Now(), finishing_since_) - started_));
  status.set_examples(examples_);
  status.set_target_examples(target_examples_);
  status.set_epoch(static_cast<double>(examples_) /
                   static_cast<double>(options_.model.train_examples));
  status.set_examples_per_second(throughput_.Rate());
  status.set_global_batch(options_.job.global_batch());
  *status.mutable_membership() = membership_;
  for (const auto& [id, worker] : workers_) {
    v1::WorkerStatus* w = status.add_workers();
    w->set_worker_id(id);
    w->set_name(worker.name);
    w->set_role(worker.role);
    w->set_alive(worker.link != nullptr);
    w->set_examples(worker.examples);
    w->set_steps(worker.steps);
    w->set_median_compute_seconds(MedianComputeSeconds(worker.compute_seconds));
    w->set_last_loss(worker.last_loss);
    w->set_local_batch(worker.local_batch);
    w->set_logical_workers(worker.shares);
    w->set_departed_reason(worker.departed_reason);
    w->set_failure(worker.failure);
    *w->mutable_wire() = worker.wire.total();
  }
  ApplyAssessment(modes_.Assess(), status);
  for (const v1::ShardPartition& p : partitions_) {
    auto it = shards_.find(p.shard_id());
    const bool known = it != shards_.end();
    v1::ShardStatus* s = status.add_shards();
    *s = ShardRow(p, known ? it->second.address : "", known && it->second.link != nullptr,
                  known ? &it->second.last_report : nullptr);
    if (known) {
      modes_.FillShardStatus(p.shard_id(), *s);
      *s->mutable_wire() = it->second.wire.total();
    }
  }
  if (!evals_.empty()) *status.mutable_last_eval() = evals_.back();
  for (const v1::EvalStatus& eval : evals_) *status.add_eval_history() = eval;
  if (const std::optional<size_t> kept = job::KeptEvaluation(evals_, quality_metric_)) {
    *status.mutable_kept_eval() = evals_[*kept];
  }
  status.set_early_stop_reason(early_stop_reason_);
  return status;
}

}  // namespace syncopate::coordinator
