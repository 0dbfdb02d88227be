// The coordinator at scale (issue 12, item 5): Google Benchmarks of one full decision round of
// the real coordinator with N workers x 16 shards, and of its memory per worker.
//
//   syncopate-coordinator-bench [--benchmark_filter=...]   (./dev microbench coordinator)
//
// Nothing is re-implemented: a real CoordinatorCore (fake links that count and drop messages, a
// FakeClock) runs an AUTO job of the default MLP with N workers and 16 shards. Workers report
// steps through CoordinatorCore::WorkerMessage as the worker sessions do, in time order, with
// compute times drawn by the simulator's StepTimeModel: 2 ms + 0.4 ms/example at a local batch of
// 64 (27.6 ms; examples/sim/scale.textproto's step), log-normal noise sigma 0.2, Pareto hiccups
// (2% of steps, alpha 1.5, 20 ms scale: a heavy tail) and one straggler in 200 at 3x (5 of
// 1,000). Communication (pull + push) is 10% of the step, with the same noise. Before anything
// is timed every worker has reported W + 1 steps, so the detector's windows
// (W = StragglerDetector::WindowForWorkers(N) steps per worker) are full and every round runs the
// policy over full windows.
//
// - BM_CoordinatorRound/N: one round = 500 ms of the workers' step reports (untimed, ~16 per
//   worker), then CoordinatorCore::Tick (timed): the coordinator's periodic work, whose
//   DecideModes runs ModeController::Decide (StragglerDetector::Assess, then ModePolicy +
//   SwitchConfirmation for each of the 16 shards) exactly as the real coordinator does every
//   tick. The ModeController's kDecisionInterval is 500 ms, so each timed Tick decides.
// - BM_ModeDecision/N: the same round with only ModeController::Decide timed (the decision
//   without the rest of Tick), fed the same reports through ModeController::AddStep.
// - BM_StepReport/N: one step report through CoordinatorCore::WorkerMessage, the per-report
//   cost the coordinator pays N / step-time times a second.
// - BM_CoordinatorMemory/N: heap bytes (glibc mallinfo2, in use) of a CoordinatorCore with N
//   workers registered and full windows, per worker.
// Times are CPU time of this process (Google Benchmark's default), steadier than wall time on a
// shared machine.
#include <malloc.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "glog/logging.h"
#include "libs/common/clock.h"
#include "libs/coordinator/coordinator_core.h"
#include "libs/coordinator/mode_controller.h"
#include "libs/job/job_spec.h"
#include "libs/job/model_kind.h"
#include "libs/sim/step_time_model.h"
#include "libs/straggler/straggler_detector.h"
#include "syncopate/v1/sim.pb.h"

namespace syncopate::bench {
namespace {

constexpr int kShards = 16;
constexpr int64_t kLocalBatch = 64;
constexpr int64_t kTrainExamples = 60'000;  // Fashion-MNIST's training set
constexpr double kCommunicationShare = 0.1;
constexpr absl::Duration kRound = coordinator::ModeController::kDecisionInterval;

class CountingWorkerLink final : public coordinator::WorkerLink {
 public:
  void Send(v1::CoordinatorToWorker) override { ++sent; }
  void Close(absl::Status) override {}
  int64_t sent = 0;
};

class CountingShardLink final : public coordinator::ShardLink {
 public:
  void Send(v1::CoordinatorToShard) override { ++sent; }
  void Close(absl::Status) override {}
  int64_t sent = 0;
};

v1::JobSpec AutoJob(int workers) {
  v1::JobSpec job = job::ParseJobSpec(job::DefaultJobText()).value();
  job.set_mode(v1::MODE_AUTO);
  job.set_num_workers(workers);
  job.set_num_shards(kShards);
  job.set_global_batch(kLocalBatch * workers);
  job.mutable_stop()->set_epochs(0);
  job.mutable_stop()->set_max_examples(int64_t{1} << 50);  // never stops
  CHECK(job::ValidateJobSpec(job).ok());
  return job;
}

// Heavy-tailed step times with a few stragglers (see the file comment).
v1::SimSpec StepTimes(int workers) {
  v1::SimSpec spec;
  v1::StepTimeSpec& step = *spec.mutable_step_time();
  step.set_seconds_per_step(0.002);
  step.set_seconds_per_example(0.0004);
  step.set_lognormal_sigma(0.2);
  step.set_hiccup_probability(0.02);
  step.set_hiccup_scale_seconds(0.02);
  step.set_hiccup_alpha(1.5);
  for (int w = 7; w < workers; w += 200) {
    v1::WorkerSpeed& straggler = *spec.add_speeds();
    straggler.set_worker(w);
    straggler.set_factor(3);
  }
  return spec;
}

// N workers reporting steps in time order to `report` (worker index, report), from a shared
// FakeClock that they advance to each report's time.
class Workers {
 public:
  Workers(int n, FakeClock* clock)
      : clock_(clock),
        start_(clock->Now()),
        model_(sim::StepTimeModel::Create(StepTimes(n), n, /*seed=*/1).value()) {
    for (int i = 0; i < n; ++i) Schedule(i, 0);
  }

  // Delivers every step that ends within `duration` from now, then moves the clock to its end.
  void Run(absl::Duration duration, const std::function<void(int, const v1::StepReport&)>& report) {
    const double end = Seconds() + absl::ToDoubleSeconds(duration);
    while (next_.top().first <= end) {
      auto [at, index] = next_.top();
      next_.pop();
      clock_->Advance(absl::Seconds(at) - (clock_->Now() - start_));
      v1::StepReport step;
      step.set_step(++steps_);
      step.set_examples(kLocalBatch);
      step.set_loss(0.5f);
      step.set_compute_seconds(compute_[index]);
      step.set_pull_seconds(communication_[index] / 2);
      step.set_push_seconds(communication_[index] / 2);
      report(index, step);
      Schedule(index, at);
    }
    clock_->Advance(absl::Seconds(end) - (clock_->Now() - start_));
  }
  // Runs until every worker has reported at least `steps` steps.
  void RunSteps(int steps, const std::function<void(int, const v1::StepReport&)>& report) {
    // The slowest worker (3x straggler with noise and hiccups) needs < 0.2 s a step.
    while (min_steps() < steps) Run(absl::Seconds(1), report);
  }

 private:
  double Seconds() { return absl::ToDoubleSeconds(clock_->Now() - start_); }
  int64_t min_steps() const { return *std::min_element(counts_.begin(), counts_.end()); }
  void Schedule(int index, double now) {
    if (index >= static_cast<int>(compute_.size())) {
      compute_.resize(index + 1);
      communication_.resize(index + 1);
      counts_.resize(index + 1);
    }
    compute_[index] = model_.ComputeSeconds(index, kLocalBatch, now);
    communication_[index] = kCommunicationShare * model_.ComputeSeconds(index, kLocalBatch, now);
    ++counts_[index];
    next_.push({now + compute_[index] + communication_[index], index});
  }

  FakeClock* clock_;
  absl::Time start_;
  sim::StepTimeModel model_;
  std::vector<double> compute_;        // of each worker's step in flight
  std::vector<double> communication_;  // likewise
  std::vector<int64_t> counts_;
  int64_t steps_ = 0;
  std::priority_queue<std::pair<double, int>, std::vector<std::pair<double, int>>, std::greater<>>
      next_;
};

// A running AUTO job: a real CoordinatorCore with 16 shards and N member workers.
struct Cluster {
  explicit Cluster(int n) : workers(n, &clock) {
    coordinator::CoordinatorOptions options;
    options.job = AutoJob(n);
    options.model = {.layout = job::BuiltinLayoutForJob(options.job).value(),
                     .train_examples = kTrainExamples};
    options.clock = &clock;
    options.min_silence_timeout = absl::Seconds(60);
    core = coordinator::CoordinatorCore::Create(options).value();
    for (int s = 0; s < kShards; ++s) {
      auto link = std::make_shared<CountingShardLink>();
      v1::ShardHello hello;
      hello.set_shard_id(s);
      hello.set_address(absl::StrCat("shard-", s, ":7000"));
      CHECK(core->ShardHello(link, hello).ok());
      shard_links.push_back(link);
    }
    for (int i = 0; i < n; ++i) {
      auto link = std::make_shared<CountingWorkerLink>();
      v1::WorkerHello hello;
      hello.set_name(absl::StrCat("worker-", i));
      hello.set_role(v1::ROLE_WORKER);
      ids.push_back(core->WorkerHello(link, hello).value());
      worker_links.push_back(link);
    }
    core->Tick();  // every worker and shard is there: the job starts
    CHECK(core->phase() == coordinator::JobPhase::kRunning);
  }

  void Report(int index, const v1::StepReport& step) {
    v1::WorkerMessage message;
    *message.mutable_step() = step;
    core->WorkerMessage(ids[index], message);
  }
  // Every worker fills its detector window (W steps) and one more.
  void FillWindows(int n) {
    workers.RunSteps(StragglerDetector::WindowForWorkers(n) + 1,
                     [this](int i, const v1::StepReport& s) { Report(i, s); });
  }

  FakeClock clock;
  Workers workers;
  std::unique_ptr<coordinator::CoordinatorCore> core;
  std::vector<int32_t> ids;
  std::vector<std::shared_ptr<CountingWorkerLink>> worker_links;
  std::vector<std::shared_ptr<CountingShardLink>> shard_links;
};

// Setup logs one line per worker; the timed part logs as the coordinator does.
class QuietSetup {
 public:
  QuietSetup() : level_(FLAGS_minloglevel) { FLAGS_minloglevel = google::GLOG_WARNING; }
  ~QuietSetup() { FLAGS_minloglevel = level_; }

 private:
  int level_;
};

// One running cluster per N with full windows, shared by the benchmarks and their repetitions
// (Google Benchmark calls a benchmark several times to size its iterations; filling the windows
// of 1,000 workers takes a while). Never destroyed.
Cluster& FilledCluster(int n) {
  static auto* const clusters = new std::map<int, std::unique_ptr<Cluster>>();
  std::unique_ptr<Cluster>& cluster = (*clusters)[n];
  if (cluster == nullptr) {
    QuietSetup quiet;
    cluster = std::make_unique<Cluster>(n);
    cluster->FillWindows(n);
  }
  return *cluster;
}

void BM_CoordinatorRound(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Cluster* cluster = &FilledCluster(n);
  int64_t reports = 0;
  for (auto _ : state) {
    state.PauseTiming();
    cluster->workers.Run(kRound, [&](int i, const v1::StepReport& s) {
      cluster->Report(i, s);
      ++reports;
    });
    state.ResumeTiming();
    cluster->core->Tick();
  }
  state.counters["workers"] = n;
  state.counters["shards"] = kShards;
  state.counters["reports_per_round"] =
      static_cast<double>(reports) / static_cast<double>(state.iterations());
}

// The ModeController alone, fed the same reports (a cluster of its own per N, kept like
// FilledCluster's).
struct Controller {
  explicit Controller(int n) : workers(n, &clock), modes(AutoJob(n), &clock) {
    for (int s = 0; s < kShards; ++s) modes.ConnectShard(s);
    for (int i = 0; i < n; ++i) loads.push_back({i, kLocalBatch});
    workers.RunSteps(StragglerDetector::WindowForWorkers(n) + 1,
                     [this](int i, const v1::StepReport& s) { modes.AddStep(i, s); });
  }
  FakeClock clock;
  Workers workers;
  coordinator::ModeController modes;
  std::vector<WorkerLoad> loads;
};

void BM_ModeDecision(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  static auto* const controllers = new std::map<int, std::unique_ptr<Controller>>();
  std::unique_ptr<Controller>& c = (*controllers)[n];
  if (c == nullptr) c = std::make_unique<Controller>(n);
  const auto add = [&](int i, const v1::StepReport& s) { c->modes.AddStep(i, s); };
  int64_t switches = 0;
  for (auto _ : state) {
    state.PauseTiming();
    c->workers.Run(kRound, add);
    state.ResumeTiming();
    coordinator::ModeRound round = c->modes.Decide(c->loads, 0);
    CHECK(round.decided);
    switches += static_cast<int64_t>(round.commands.size());
  }
  state.counters["switches"] = static_cast<double>(switches);
}

void BM_StepReport(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Cluster* cluster = &FilledCluster(n);
  // Pre-drawn reports of the next rounds, replayed in order (the clock stays put: the cost of a
  // report does not depend on it).
  std::vector<std::pair<int, v1::WorkerMessage>> messages;
  cluster->workers.Run(kRound * 4, [&](int i, const v1::StepReport& s) {
    v1::WorkerMessage m;
    *m.mutable_step() = s;
    messages.emplace_back(i, std::move(m));
  });
  size_t next = 0;
  for (auto _ : state) {
    const auto& [index, message] = messages[next];
    cluster->core->WorkerMessage(cluster->ids[index], message);
    next = next + 1 == messages.size() ? 0 : next + 1;
  }
}

void BM_CoordinatorMemory(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  for (auto _ : state) {
    QuietSetup quiet;
    const size_t before = mallinfo2().uordblks;
    auto cluster = std::make_unique<Cluster>(n);
    const size_t registered = mallinfo2().uordblks;
    cluster->FillWindows(n);
    const size_t full = mallinfo2().uordblks;
    // The step-time generator's state (per-worker RNG streams) is the benchmark's, not the
    // coordinator's; measured apart so it can be subtracted.
    const size_t generator_before = mallinfo2().uordblks;
    {
      FakeClock clock;
      Workers generator(n, &clock);
      state.counters["generator_bytes_per_worker"] =
          static_cast<double>(mallinfo2().uordblks - generator_before) / n;
    }
    const double generator = state.counters["generator_bytes_per_worker"];
    state.counters["registered_bytes_per_worker"] =
        static_cast<double>(registered - before) / n - generator;
    state.counters["bytes_per_worker"] = static_cast<double>(full - before) / n - generator;
    state.counters["window_steps"] = StragglerDetector::WindowForWorkers(n);
  }
}

BENCHMARK(BM_CoordinatorRound)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ModeDecision)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_StepReport)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CoordinatorMemory)
    ->Arg(100)
    ->Arg(300)
    ->Arg(1000)
    ->Iterations(1)
    ->Unit(benchmark::kSecond);

}  // namespace
}  // namespace syncopate::bench

BENCHMARK_MAIN();
