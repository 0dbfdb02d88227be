#include "libs/sim/simulation.h"

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "libs/common/mode_rules.h"
#include "libs/common/status_macros.h"
#include "libs/coordinator/coordinator_core.h"
#include "libs/job/job_spec.h"
#include "libs/job/model_kind.h"
#include "libs/shard/shard_core.h"
#include "libs/sim/simulation_impl.h"
#include "libs/sim/step_time_model.h"

namespace syncopate::sim {
namespace internal {
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

}  // namespace

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

  CreateWorkers();
  for (SimWorker& w : workers_) {
    if (w.at_start) Hello(w);
  }
  SYNCOPATE_RETURN_IF_ERROR(EvaluatorHello());

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

void Simulation::CreateWorkers() {
  // The coordinator numbers workers from 1 in the order of their first hello: those at the start
  // in index order, then the evaluator, then the joiners.
  const int num_workers = options_.job.num_workers();
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
  ApplyModeSchedule();
  if (!Done()) queue_.After(coordinator::kTickInterval, [this] { Tick(); });
}

void Simulation::ApplyModeSchedule() {
  const auto& schedule = timing_.spec().mode_schedule();
  if (next_scheduled_mode_ >= schedule.size() || shards_.empty()) return;
  int64_t version = std::numeric_limits<int64_t>::max();
  for (const auto& shard : shards_) {
    if (shard == nullptr) return;  // not assigned yet (job_ neither)
    version = std::min(version, shard->Stats().version);
  }
  if (run_global_batches_ == 0) {
    const int64_t target = coordinator_->Status().target_examples();
    if (target <= 0 || job_.global_batch() <= 0) return;
    run_global_batches_ = (target + job_.global_batch() - 1) / job_.global_batch();
  }
  const v1::ModeAt& next = schedule[next_scheduled_mode_];
  if (static_cast<double>(version) <
      next.at_fraction() * static_cast<double>(run_global_batches_)) {
    return;
  }
  ++next_scheduled_mode_;
  v1::SetMode command;
  command.set_mode(next.mode());
  command.set_reason("mode_schedule");
  for (size_t s = 0; s < shards_.size(); ++s) {
    result_.switches.push_back({Now(), static_cast<int32_t>(s), next.mode(), command.reason()});
    if (absl::Status applied = shards_[s]->ApplyModeCommand(command); !applied.ok()) {
      return Fail(applied);
    }
  }
}

std::vector<float> Simulation::GatherParameters() const {
  std::vector<float> flat;
  for (const auto& shard : shards_) {
    std::vector<float> part = shard->Parameters();
    flat.insert(flat.end(), part.begin(), part.end());
  }
  return flat;
}

}  // namespace internal

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

namespace {

absl::Status ValidateModeSchedule(const v1::SimSpec& spec, const v1::JobSpec& job) {
  double last = 0;
  for (const v1::ModeAt& entry : spec.mode_schedule()) {
    if (!IsShardMode(job.mode())) {
      return absl::InvalidArgumentError(
          "sim spec: mode_schedule needs a job mode a shard runs: sync, gba or async (auto would "
          "fight it)");
    }
    if (!(entry.at_fraction() > last && entry.at_fraction() < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("sim spec: mode_schedule.at_fraction ", entry.at_fraction(),
                       " must lie in (0, 1) and increase from one entry to the next"));
    }
    last = entry.at_fraction();
    if (!IsShardMode(entry.mode())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sim spec: mode_schedule.mode must be a mode a shard runs (sync, gba, async), not ",
          v1::Mode_Name(entry.mode())));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SimResult> RunSimulation(const SimOptions& options) {
  SYNCOPATE_RETURN_IF_ERROR(job::ValidateJobSpec(options.job));
  SYNCOPATE_RETURN_IF_ERROR(ValidateModeSchedule(options.spec, options.job));
  SYNCOPATE_ASSIGN_OR_RETURN(
      StepTimeModel timing,
      StepTimeModel::Create(options.spec, options.job.num_workers(), options.timing_seed));
  internal::Simulation simulation(options, std::move(timing));
  SYNCOPATE_RETURN_IF_ERROR(simulation.Setup());
  return simulation.Run();
}

}  // namespace syncopate::sim
