// syncopate-perf-bench (`./dev microbench`): Syncopate's hot paths against the ceilings of this
// machine, each as a ratio of two measurements taken in the same run (issue 16, ADR 0008). On a
// shared, noisy machine absolute rates swing by +-50% from run to run; a ratio of two
// measurements interleaved round by round does not.
//   (a) wire: a dense push + pull through a real shard (coordinator and ShardServer in process on
//       localhost, the worker's ParameterClient) / a raw gRPC bidi echo of the same payload
//       (synchronous gRPC on both ends, the same message types, no shard). Goal >= 0.8. A
//       third line echoes the same payload over a Unix domain socket: TCP echo / Unix echo says
//       whether a single-machine cluster would gain from sockets instead of loopback TCP.
//   (b) apply: the shard's optimizer (optim::Optimizer, as ShardCore runs it) over a 16 MiB
//       slice, in bytes the update must read and write per second / memcpy's bytes read and
//       written per second on the same buffers. Goal >= 0.6.
//   (c) compute: the worker's step (Mlp::LossAndGradient on the default job's model and local
//       batch) per example at each ISA level / at the portable baseline. Expected >= 2.5x.
//   (d) statistics: what the goodput guard's measurement (aggregation::GradientStatistics, run on
//       every sync push and update) costs / what aggregating the same sync version costs
//       (GlobalBatchAggregator: 4 pushes and the update), on the default MLP's slice and 16 MiB.
//   (e) lookahead: gba's buffer-aware look-ahead on a shard's slice of the default MLP, per
//       worker step over the job's shards / the worker's compute step (issue 43: gba's samples/s
//       within 5% of before).
// Every figure is the median over --rounds rounds; in each round both sides of a ratio run for
// --seconds each, back to back.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/in_process_cluster.h"
#include "bench/measure.h"
#include "glog/logging.h"
#include "grpcpp/grpcpp.h"
#include "libs/aggregation/global_batch_aggregator.h"
#include "libs/aggregation/gradient_statistics.h"
#include "libs/coordinator/coordinator_server.h"
#include "libs/isa/isa.h"
#include "libs/job/job_spec.h"
#include "libs/job/model_kind.h"
#include "libs/model/mlp.h"
#include "libs/optim/optimizer.h"
#include "libs/rpc/grpc_util.h"
#include "libs/runtime/process_runtime.h"
#include "libs/shard/shard_server.h"
#include "libs/tensor/packed.h"
#include "libs/worker/coordinator_session.h"
#include "libs/worker/parameter_client.h"
#include "syncopate/v1/shard.grpc.pb.h"

ABSL_FLAG(int, rounds, 5, "Rounds per ratio; every figure is the median over rounds");
ABSL_FLAG(double, seconds, 0.4, "Seconds each side of a ratio runs per round");
ABSL_FLAG(int, local_batch, 0,
          "compute: examples per step (default: the default job's G / num_workers = 64; a process "
          "of k logical workers computes k times that, ADR 0023)");
ABSL_FLAG(std::string, only, "",
          "Run one part only: wire | apply | compute | statistics | lookahead (default: all)");

namespace syncopate::bench {
namespace {

// ---- (a) the wire ----

// The ceiling: echoes every push's gradient bytes straight back as a pull response on the same
// kind of stream the shard serves. Synchronous gRPC, no aggregation, no optimizer.
class EchoShard final : public v1::ParameterShard::Service {
 public:
  grpc::Status Train(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::ShardToWorker, v1::WorkerToShard>* stream) override {
    v1::WorkerToShard in;
    v1::ShardToWorker out;
    while (stream->Read(&in)) {
      if (!in.has_push()) continue;
      out.mutable_pull()->set_request_id(in.push().request_id());
      out.mutable_pull()->set_values(std::move(*in.mutable_push()->mutable_gradient()));
      if (!stream->Write(out)) break;
    }
    return grpc::Status::OK;
  }
};

// A one-worker, one-shard sync job whose MLP has `hidden` units in one hidden layer (or the
// default job's two), so a push and a pull each carry that MLP's parameters.
v1::JobSpec WireJob(const std::vector<int>& hidden) {
  v1::JobSpec job = Check(job::ParseJobSpec(job::DefaultJobText()), "default job");
  job.set_job_id("perf-bench");
  if (!hidden.empty()) {
    job.mutable_model()->clear_hidden();
    for (const int width : hidden) job.mutable_model()->add_hidden(width);
  }
  job.set_num_workers(1);
  job.set_num_shards(1);
  job.set_global_batch(64);
  job.set_mode(v1::MODE_SYNC);
  if (absl::Status valid = job::ValidateJobSpec(job); !valid.ok()) Die(valid.ToString());
  return job;
}

struct WireResult {
  double echo_seconds;   // per echo round trip (payload up and back)
  double shard_seconds;  // per push + pull (payload and pull request up, ack and payload back)
};

WireResult MeasureWire(const std::string& label, const std::vector<int>& hidden, int rounds,
                       double seconds) {
  // Fashion-MNIST's size; the job never ends here, since no step reports are sent.
  const v1::JobSpec job = WireJob(hidden);
  std::unique_ptr<InProcessCluster> cluster = Check(
      StartInProcessCluster(
          job, {.layout = Check(job::BuiltinLayoutForJob(job), "layout"), .train_examples = 60000}),
      "in-process cluster");
  worker::ParameterClient& client = *cluster->client;
  const v1::Welcome& welcome = cluster->session->welcome();
  const size_t size = static_cast<size_t>(welcome.shard_map().shards(0).flat_end());
  std::vector<float> params(size);
  // Tiny gradients keep the parameters finite however many steps the benchmark applies.
  const std::vector<float> gradient(size, 1e-9f);
  // As a worker's step exchanges them: the next pull rides behind the push (PushAllThenPull).
  const auto push_pull = [&] {
    absl::StatusOr<worker::PullStats> pulled = absl::UnknownError("not pulled");
    Check(client.PushAllThenPull(gradient, 64, absl::Seconds(60), nullptr,
                                 worker::NextPull{params, nullptr, nullptr, &pulled}),
          "push");
    Check(pulled, "pull");
  };
  Check(client.PullAll(params, absl::Seconds(60), /*newest=*/false, nullptr, nullptr),
        "first pull");

  // The same payload echoed raw, over loopback TCP (the ceiling) and over a Unix domain socket
  // (what a single-machine cluster could use instead: issue 32 asks whether it is faster).
  v1::WorkerToShard request;
  request.mutable_push()->set_gradient(std::string(size * sizeof(float), '\0'));
  std::memcpy(request.mutable_push()->mutable_gradient()->data(), gradient.data(),
              size * sizeof(float));
  struct Echo {
    EchoShard service;
    rpc::StartedServer server;
    std::unique_ptr<v1::ParameterShard::Stub> stub;
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerToShard, v1::ShardToWorker>> stream;
    v1::ShardToWorker reply;
  };
  const auto start_echo = [&](const std::string& listen, const std::string& target) {
    auto echo = std::make_unique<Echo>();
    echo->server =
        Check(rpc::StartServer(listen, {&echo->service}, rpc::TransportSecurity()), "echo");
    echo->stub = v1::ParameterShard::NewStub(
        rpc::CreateChannel(target.empty() ? absl::StrCat("127.0.0.1:", echo->server.port) : target,
                           rpc::TransportSecurity()));
    echo->stream = echo->stub->Train(&echo->context);
    return echo;
  };
  const std::string socket_path = absl::StrCat("/tmp/syncopate-perf-bench-", getpid(), ".sock");
  std::unique_ptr<Echo> tcp_echo = start_echo("127.0.0.1:0", "");
  std::unique_ptr<Echo> unix_echo = start_echo("unix:" + socket_path, "unix:" + socket_path);
  const auto round_trip = [&](Echo& echo) {
    if (!echo.stream->Write(request) || !echo.stream->Read(&echo.reply)) Die("echo stream broke");
    if (echo.reply.pull().values().size() != size * sizeof(float)) Die("echo lost bytes");
  };
  const auto echo_round_trip = [&] { round_trip(*tcp_echo); };
  const auto unix_round_trip = [&] { round_trip(*unix_echo); };

  // The same exchange without the wire: the worker's packing and unpacking and the shard's own
  // work on the version (validate, aggregate, statistics, apply, pack), in this thread. The
  // rest of push+pull is the RPC path: serialisation, the kernel, gRPC's threads.
  const std::shared_ptr<shard::ShardCore> core = cluster->shard->core();
  const int32_t worker_id = welcome.worker_id();
  const int owner = 0;
  int64_t version = 0;
  const auto in_process = [&] {
    v1::PushRequest push;
    push.set_token(version);
    push.set_samples(64);
    push.set_gradient(tensor::PackFloats(gradient));
    const v1::PushAck ack = core->Push(worker_id, push);
    if (ack.outcome() != v1::PUSH_APPLIED) Die("in-process push not applied: " + ack.message());
    v1::PullRequest pull;
    pull.set_min_version(version + 1);
    bool answered = false;
    Check(core->Pull({&owner, worker_id, true}, pull,
                     [&](const shard::PullReply& reply) {
                       Check(tensor::UnpackFloatsInto(tensor::PackedView(*reply.values), params),
                             "unpack");
                       version = reply.response.version();
                       answered = true;
                     }),
          "in-process pull");
    if (!answered) Die("in-process pull was held");
  };

  // The co-located plane (ADR 0022): a second in-process cluster whose worker takes its shard's
  // shared memory, against the floor of any exchange through memory, the payload copied up and
  // back (2 x memcpy).
  std::unique_ptr<InProcessCluster> colocated = Check(
      StartInProcessCluster(
          job, {.layout = Check(job::BuiltinLayoutForJob(job), "layout"), .train_examples = 60000},
          {}, /*shared_memory=*/true),
      "co-located in-process cluster");
  std::vector<float> colocated_params(size);
  Check(colocated->client->PullAll(colocated_params, absl::Seconds(60), false, nullptr, nullptr),
        "co-located first pull");
  const auto colocated_push_pull = [&] {
    absl::StatusOr<worker::PullStats> pulled = absl::UnknownError("not pulled");
    Check(colocated->client->PushAllThenPull(
              gradient, 64, absl::Seconds(60), nullptr,
              worker::NextPull{colocated_params, nullptr, nullptr, &pulled}),
          "co-located push");
    Check(pulled, "co-located pull");
  };
  std::vector<float> staging(size);
  const auto two_copies = [&] {
    std::memcpy(staging.data(), gradient.data(), size * sizeof(float));
    std::memcpy(colocated_params.data(), staging.data(), size * sizeof(float));
  };

  std::vector<double> echo_times, unix_times, shard_times, core_times, colocated_times, copy_times;
  for (int round = 0; round < rounds; ++round) {
    echo_times.push_back(SecondsPerCall(echo_round_trip, seconds));
    unix_times.push_back(SecondsPerCall(unix_round_trip, seconds));
    // Each side starts from the shard's current version (the other side moved it on).
    Check(client.PullAll(params, absl::Seconds(60), /*newest=*/true, nullptr, nullptr), "pull");
    shard_times.push_back(SecondsPerCall(push_pull, seconds));
    version = client.token(0);
    core_times.push_back(SecondsPerCall(in_process, seconds));
    colocated_times.push_back(SecondsPerCall(colocated_push_pull, seconds));
    copy_times.push_back(SecondsPerCall(two_copies, seconds));
  }
  colocated.reset();
  for (Echo* echo : {tcp_echo.get(), unix_echo.get()}) {
    echo->stream->WritesDone();
    echo->stream->Finish().IgnoreError();
    echo->server.server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  }
  std::remove(socket_path.c_str());
  cluster.reset();

  std::vector<double> ratios, unix_ratios;
  ratios.reserve(rounds);
  for (int round = 0; round < rounds; ++round) {
    ratios.push_back(echo_times[round] / shard_times[round]);
    unix_ratios.push_back(echo_times[round] / unix_times[round]);
  }
  const double mib = static_cast<double>(size * sizeof(float)) / (1 << 20);
  const double echo_s = Median(echo_times), shard_s = Median(shard_times);
  std::printf(
      "wire %-9s %7.2f MiB each way: echo %7.2f ms (%5.2f GB/s each way), shard push+pull "
      "%7.2f ms (%5.2f GB/s); ratio %.2f (goal >= 0.8)\n",
      label.c_str(), mib, echo_s * 1e3, size * 4 / echo_s / 1e9, shard_s * 1e3,
      size * 4 / shard_s / 1e9, Median(ratios));
  std::printf("wire %-9s of which the shard's and the packing's own work, in process: %7.2f ms\n",
              label.c_str(), Median(core_times) * 1e3);
  std::vector<double> colocated_ratios;
  for (int round = 0; round < rounds; ++round) {
    colocated_ratios.push_back(copy_times[round] / colocated_times[round]);
  }
  std::printf(
      "wire %-9s co-located (shared memory, mailboxes) push+pull %7.2f ms; 2 x memcpy of the "
      "payload %7.2f ms; ratio %.2f (goal >= 0.5)\n",
      label.c_str(), Median(colocated_times) * 1e3, Median(copy_times) * 1e3,
      Median(colocated_ratios));
  std::printf(
      "wire %-9s echo over a Unix domain socket %7.2f ms; TCP echo / Unix echo %.2f "
      "(median of the per-round ratios; > 1: the socket is faster)\n",
      label.c_str(), Median(unix_times) * 1e3, Median(unix_ratios));
  std::fflush(stdout);
  return {echo_s, shard_s};
}

// ---- (b) the shard's apply ----

// Floats each update reads plus writes per element: SGD reads p, g and writes p; momentum and
// Adagrad also read and write one slot; Adam two.
int TrafficPerElement(v1::OptimizerSpec::Kind kind) {
  switch (kind) {
    case v1::OptimizerSpec::SGD:
      return 3;
    case v1::OptimizerSpec::ADAM:
      return 7;
    default:
      return 5;
  }
}

void MeasureApply(int rounds, double seconds) {
  constexpr size_t kSize = (16 << 20) / sizeof(float);  // a 16 MiB slice
  std::vector<float> params(kSize, 0.5f), gradient(kSize, 1e-6f);
  const isa::IsaLevel active = isa::ActiveIsaLevel();
  for (const v1::OptimizerSpec::Kind kind : {v1::OptimizerSpec::SGD, v1::OptimizerSpec::MOMENTUM,
                                             v1::OptimizerSpec::ADAGRAD, v1::OptimizerSpec::ADAM}) {
    v1::OptimizerSpec spec;
    spec.set_kind(kind);
    spec.set_learning_rate(1e-3f);
    if (kind == v1::OptimizerSpec::MOMENTUM) spec.set_momentum(0.9f);
    std::unique_ptr<optim::Optimizer> fast = Check(optim::CreateOptimizer(spec, kSize), "rule");
    std::unique_ptr<optim::Optimizer> baseline =
        Check(optim::CreateOptimizer(spec, kSize, isa::IsaLevel::kBaseline), "rule");
    // memcpy reads the gradient and writes the parameters: the buffers the update touches.
    const auto copy = [&] { std::memcpy(params.data(), gradient.data(), kSize * sizeof(float)); };
    std::vector<double> ratios, rates, memcpy_rates, baseline_rates;
    const double bytes = static_cast<double>(kSize * sizeof(float));
    const double traffic = bytes * TrafficPerElement(kind);
    for (int round = 0; round < rounds; ++round) {
      // Bytes read + written, as for the update.
      const double memcpy_rate = 2 * bytes / SecondsPerCall(copy, seconds);
      const double rate = traffic / SecondsPerCall([&] { fast->Apply(params, gradient); }, seconds);
      baseline_rates.push_back(traffic /
                               SecondsPerCall([&] { baseline->Apply(params, gradient); }, seconds));
      memcpy_rates.push_back(memcpy_rate);
      rates.push_back(rate);
      ratios.push_back(rate / memcpy_rate);
    }
    std::printf(
        "apply %-8s 16 MiB at %-8s: %5.2f GB/s read+written (baseline kernels %5.2f); memcpy "
        "%5.2f GB/s; ratio %.2f (goal >= 0.6)\n",
        std::string(fast->name()).c_str(), std::string(isa::IsaLevelName(active)).c_str(),
        Median(rates) / 1e9, Median(baseline_rates) / 1e9, Median(memcpy_rates) / 1e9,
        Median(ratios));
    std::fflush(stdout);
  }
}

// ---- (c) the worker's compute ----

// The default job's step: its MLP on one worker's local batch of Fashion-MNIST-shaped inputs.
struct DefaultJobBatch {
  v1::JobSpec job = Check(job::ParseJobSpec(job::DefaultJobText()), "default job");
  int batch = absl::GetFlag(FLAGS_local_batch) > 0 ? absl::GetFlag(FLAGS_local_batch)
                                                   : job.global_batch() / job.num_workers();
  std::vector<int> hidden{job.model().hidden().begin(), job.model().hidden().end()};
  std::vector<float> features;
  std::vector<int32_t> labels;
  static constexpr int kInput = 784, kClasses = 10;  // Fashion-MNIST

  DefaultJobBatch() : features(static_cast<size_t>(batch) * kInput), labels(batch) {
    for (size_t i = 0; i < features.size(); ++i) {
      features[i] = static_cast<float>(i % 255) / 255.0f;
    }
    for (int i = 0; i < batch; ++i) labels[i] = i % kClasses;
  }
  model::BatchView view() const { return {features.data(), labels.data(), batch}; }
  model::Mlp Model(isa::IsaLevel level) const {
    return Check(model::Mlp::Create(kInput, hidden, kClasses, level), "mlp");
  }
};

void MeasureCompute(int rounds, double seconds) {
  const DefaultJobBatch input;
  const std::vector<isa::IsaLevel> levels = isa::SupportedIsaLevels();
  std::vector<model::Mlp> models;
  models.reserve(levels.size());
  for (const isa::IsaLevel level : levels) models.push_back(input.Model(level));
  const std::vector<float> params = model::InitialParameters(models[0], 1);
  std::vector<float> grad(params.size());
  // per_level[l][round]: seconds per step.
  std::vector<std::vector<double>> per_level(levels.size());
  for (int round = 0; round < rounds; ++round) {
    for (size_t l = 0; l < levels.size(); ++l) {
      per_level[l].push_back(SecondsPerCall(
          [&] { Check(models[l].LossAndGradient(params, input.view(), grad), "step"); }, seconds));
    }
  }
  const isa::IsaLevel active = isa::ActiveIsaLevel();
  for (size_t l = 0; l < levels.size(); ++l) {
    std::vector<double> speedups;
    speedups.reserve(rounds);
    for (int round = 0; round < rounds; ++round) {
      speedups.push_back(per_level[0][round] / per_level[l][round]);
    }
    const double step = Median(per_level[l]);
    std::printf(
        "compute %-8s MLP 784-%d-%d-10, batch %d: %6.3f ms/step, %7.0f examples/s; "
        "x%.2f the baseline%s\n",
        std::string(isa::IsaLevelName(levels[l])).c_str(),
        !input.hidden.empty() ? input.hidden[0] : 0, input.hidden.size() > 1 ? input.hidden[1] : 0,
        input.batch, step * 1e3, input.batch / step, Median(speedups),
        levels[l] == active ? " <- dispatched (expected >= 2.5x)" : "");
  }
  std::fflush(stdout);
}

// ---- (d) the goodput guard's measurement ----

void MeasureStatistics(int rounds, double seconds) {
  constexpr int kWorkers = 4;
  constexpr int64_t kLocalBatch = 64;
  // The default MLP (784-256-128-10: 235,146 parameters) is split over 2 shards.
  for (const size_t size : {size_t{235146 / 2}, (size_t{16} << 20) / sizeof(float)}) {
    std::vector<std::vector<float>> pushes(kWorkers, std::vector<float>(size));
    for (int w = 0; w < kWorkers; ++w) {
      for (size_t i = 0; i < size; ++i) pushes[w][i] = 1e-3f * static_cast<float>((i + w) % 97);
    }
    std::vector<float> mean(size);
    aggregation::GlobalBatchAggregator aggregator(static_cast<int64_t>(size),
                                                  kWorkers * kLocalBatch, v1::MODE_SYNC);
    v1::Membership membership;
    for (int w = 0; w < kWorkers; ++w) membership.add_worker_ids(w);
    membership.set_local_batch(kLocalBatch);
    aggregator.SetMembership(membership);
    const auto aggregate = [&] {
      for (int w = 0; w < kWorkers; ++w) {
        aggregator.Push({w, aggregator.version(), kLocalBatch, pushes[w], {}});
      }
      aggregator.TakeUpdate(mean);
    };
    aggregation::GradientStatistics statistics(0.9);
    const auto measure = [&] {
      for (int w = 0; w < kWorkers; ++w) statistics.AddPush(pushes[w], kLocalBatch);
      statistics.AddUpdate(mean, kWorkers * kLocalBatch);
    };
    std::vector<double> ratios, aggregate_times, measure_times;
    for (int round = 0; round < rounds; ++round) {
      const double aggregate_time = SecondsPerCall(aggregate, seconds);
      const double measure_time = SecondsPerCall(measure, seconds);
      aggregate_times.push_back(aggregate_time);
      measure_times.push_back(measure_time);
      ratios.push_back(measure_time / aggregate_time);
    }
    std::printf(
        "statistics %9zu floats: aggregating one sync version (%d pushes + update) %7.3f ms, "
        "measuring it %7.3f ms; ratio %.2f\n",
        size, kWorkers, Median(aggregate_times) * 1e3, Median(measure_times) * 1e3, Median(ratios));
  }
  std::fflush(stdout);
}

// ---- (e) the buffer-aware look-ahead ----

// What gba's look-ahead (ADR 0007, "The pending update") adds per worker step: each of the
// default job's 2 shards runs Optimizer::LookAheadPending over its slice for the worker's pull
// (landing 1: the pending update's step; landing 2: one more update of drift), against a plain
// copy of the slice and against the worker's compute step it serves, measured in the same run.
void MeasureLookAhead(int rounds, double seconds) {
  DefaultJobBatch input;
  model::Mlp mlp = input.Model(isa::ActiveIsaLevel());
  const std::vector<float> params = model::InitialParameters(mlp, 1);
  std::vector<float> grad(params.size());
  const int shards = input.job.num_shards();
  const size_t slice = params.size() / static_cast<size_t>(shards);
  job::ResolveRunLength(input.job, 60000);  // the schedule's length: one Fashion-MNIST epoch
  std::unique_ptr<optim::Optimizer> optimizer = Check(
      optim::CreateOptimizer(input.job.optimizer(), static_cast<int64_t>(slice)), "optimizer");
  const std::span<const float> x(params.data(), slice);
  std::vector<float> pending(slice, 1e-3f), out(slice);
  std::vector<float> trained(x.begin(), x.end());
  optimizer->Apply(trained, pending);  // a velocity to drift with
  std::vector<double> step_times, copy_times, one_times, two_times, shares;
  for (int round = 0; round < rounds; ++round) {
    const double step = SecondsPerCall(
        [&] { Check(mlp.LossAndGradient(params, input.view(), grad), "step"); }, seconds);
    const double copy =
        SecondsPerCall([&] { std::memcpy(out.data(), x.data(), slice * sizeof(float)); }, seconds);
    const double one =
        SecondsPerCall([&] { optimizer->LookAheadPending(x, pending, 1, out); }, seconds);
    const double two =
        SecondsPerCall([&] { optimizer->LookAheadPending(x, pending, 2, out); }, seconds);
    step_times.push_back(step);
    copy_times.push_back(copy);
    one_times.push_back(one);
    two_times.push_back(two);
    shares.push_back(shards * two / step);
  }
  std::printf(
      "lookahead %s over %zu floats (1 of %d shards): landing 1 %6.1f us, landing 2 %6.1f us, a "
      "plain copy %5.1f us; per worker step (%d shards, landing 2) %.1f%% of its compute "
      "(%.3f ms, batch %d)\n",
      std::string(optimizer->name()).c_str(), slice, shards, Median(one_times) * 1e6,
      Median(two_times) * 1e6, Median(copy_times) * 1e6, shards, Median(shares) * 100,
      Median(step_times) * 1e3, input.batch);
  std::fflush(stdout);
}

}  // namespace
}  // namespace syncopate::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // The services' processes run with this allocator setting (runtime::InitProcess); so do the
  // shard, coordinator and echo hosted here, or every 16 MiB payload is a fresh mapping.
  syncopate::runtime::KeepFreedMemoryForReuse();
  FLAGS_minloglevel = google::GLOG_WARNING;  // the in-process cluster's INFO lines are noise here
  const int rounds = std::max(1, absl::GetFlag(FLAGS_rounds));
  const double seconds = absl::GetFlag(FLAGS_seconds);
  const std::string only = absl::GetFlag(FLAGS_only);
  std::printf("syncopate-perf-bench: kernels %s; %d rounds x %.2f s per side, medians\n",
              syncopate::isa::IsaDescription(syncopate::isa::ActiveIsaLevel()).c_str(), rounds,
              seconds);
  std::fflush(stdout);
  if (only.empty() || only == "compute") syncopate::bench::MeasureCompute(rounds, seconds);
  if (only.empty() || only == "apply") syncopate::bench::MeasureApply(rounds, seconds);
  if (only.empty() || only == "statistics") syncopate::bench::MeasureStatistics(rounds, seconds);
  if (only.empty() || only == "lookahead") syncopate::bench::MeasureLookAhead(rounds, seconds);
  if (only.empty() || only == "wire") {
    // The default job's MLP (784-256-128-10, 0.9 MiB) and one with a 16 MiB parameter vector
    // (784-5276-10: 795 * 5276 + 10 = 4,194,430 floats).
    syncopate::bench::MeasureWire("mlp", {}, rounds, seconds);
    syncopate::bench::MeasureWire("16MiB", {5276}, rounds, seconds);
  }
  return 0;
}
