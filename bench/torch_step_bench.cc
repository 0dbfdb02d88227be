// syncopate-torch-bench (`./dev microbench torch`): what Syncopate adds to a PyTorch model's step
// (issue 30, item 6), each side measured in the same run, round by round, on the same module
// (examples/torch/mlp.py, the default job's MLP) and the same batch:
//   alone: the module's forward and backward in plain PyTorch (zero_grad, loss, backward) on a
//          batch already in tensors: the ceiling;
//   sdk:   the worker's TorchWorkload step without the network: the batch read through the
//          dataset (PrepareTrain) and the step (parameters as views of the runtime's buffer,
//          forward, backward, gradients copied into the push buffer);
//   step:  sdk plus the exchange with a real shard (coordinator and ShardServer in process on
//          localhost): the push and the next pull (PushAllThenPull), sync, one worker; through
//          shared memory unless --shared_memory=false.
// Goal: step / alone <= 1.15 (ADR 0013). Medians over --rounds.
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/in_process_cluster.h"
#include "bench/measure.h"
#include "glog/logging.h"
#include "libs/isa/isa.h"
#include "libs/job/job_spec.h"
#include "libs/job/model_kind.h"
#include "libs/runtime/process_runtime.h"
#include "pybind11/embed.h"
#include "pybind11/stl.h"

ABSL_FLAG(int, rounds, 5, "Rounds; every figure is the median over rounds");
ABSL_FLAG(double, seconds, 0.5, "Seconds each side runs per round");
ABSL_FLAG(int, batch, 64, "Examples per step (the default job's local batch: G = 256 / 4)");
ABSL_FLAG(bool, shared_memory, true,
          "The exchange through the co-located plane (shared memory and mailboxes, ADR 0022), as "
          "a worker on its shard's host runs; false: through the gRPC stream");

namespace syncopate::bench {
namespace {
namespace py = pybind11;

// The module alone, in the same interpreter the workload runs in: examples/torch/mlp.py's
// model() on the same examples, timed in Python.
constexpr const char* kAlone = R"(
import time
import torch
import syncopate.torch as st
from syncopate.torch._host import load_user_module

class Alone:
    def __init__(self, path, directory, examples):
        user = load_user_module(path)
        self.model = user.model()
        self.loss = user.loss
        data = st.FashionMnist(directory, "train")
        self.x, self.y = data.__getitems__(list(examples))

    def seconds_per_step(self, seconds):
        def step():
            self.model.zero_grad(set_to_none=True)
            self.loss(self.model(self.x), self.y).backward()
        step()
        calls, start = 0, time.perf_counter()
        while calls < 2 or time.perf_counter() - start < seconds:
            step()
            calls += 1
        return (time.perf_counter() - start) / calls
)";

int Main() {
  const int rounds = std::max(1, absl::GetFlag(FLAGS_rounds));
  const double seconds = absl::GetFlag(FLAGS_seconds);
  const int batch_size = absl::GetFlag(FLAGS_batch);
  v1::JobSpec job = Check(
      job::LoadJobSpecFile(std::string(SYNCOPATE_SOURCE_DIR) + "/examples/torch/mlp.textproto"),
      "job");
  job.mutable_model()->mutable_torch()->set_module(std::string(SYNCOPATE_SOURCE_DIR) +
                                                   "/examples/torch/mlp.py");
  job.set_num_workers(1);
  job.set_num_shards(1);
  job.set_global_batch(batch_size);
  job.set_mode(v1::MODE_SYNC);
  job::ModelDescription model = Check(job::DescribeModel(job), "model");
  const int64_t train_examples = model.train_examples;
  std::unique_ptr<InProcessCluster> cluster =
      Check(StartInProcessCluster(job, std::move(model), {}, absl::GetFlag(FLAGS_shared_memory)),
            "in-process cluster");
  const v1::JobSpec& handed_out = cluster->session->welcome().job();
  std::unique_ptr<workload::Workload> workload =
      Check(job::CreateWorkload(handed_out, workload::Purpose::kTrain), "workload");

  std::mt19937_64 random(1);
  std::vector<int64_t> examples(batch_size);
  for (int64_t& e : examples) e = static_cast<int64_t>(random() % train_examples);
  std::vector<float> params(workload->num_parameters()), grad(params.size());
  workload::TableRows rows, row_grads;
  worker::ParameterClient& client = *cluster->client;
  Check(client.PullAll(params, absl::Seconds(60), /*newest=*/false, nullptr, nullptr), "pull");

  const auto prepare = [&] { Check(workload->PrepareTrain(examples), "prepare"); };
  const auto sdk = [&] {
    prepare();
    Check(workload->TrainStep(params, rows, grad, row_grads), "step");
  };
  const auto step = [&] {
    sdk();
    absl::StatusOr<worker::PullStats> pulled = absl::UnknownError("not pulled");
    Check(client.PushAllThenPull(grad, batch_size, absl::Seconds(60), nullptr,
                                 worker::NextPull{params, nullptr, nullptr, &pulled}),
          "push");
    Check(pulled, "pull");
  };
  py::object alone;
  {
    py::gil_scoped_acquire gil;
    py::dict scope;
    py::exec(kAlone, scope);
    alone = scope["Alone"](job.model().torch().module(), job.dataset().dir(), examples);
  }
  const auto alone_seconds = [&] {
    py::gil_scoped_acquire gil;
    return alone.attr("seconds_per_step")(seconds).cast<double>();
  };

  std::vector<double> alone_times, prepare_times, sdk_times, step_times, sdk_ratios, step_ratios;
  for (int round = 0; round < rounds; ++round) {
    alone_times.push_back(alone_seconds());
    prepare_times.push_back(SecondsPerCall(prepare, seconds));
    sdk_times.push_back(SecondsPerCall(sdk, seconds));
    step_times.push_back(SecondsPerCall(step, seconds));
    sdk_ratios.push_back(sdk_times.back() / alone_times.back());
    step_ratios.push_back(step_times.back() / alone_times.back());
  }
  {
    py::gil_scoped_acquire gil;
    alone = py::object();
  }
  const double mib = params.size() * sizeof(float) / double{1 << 20};
  std::printf("torch mlp, batch %d, %.2f MiB of parameters each way:\n", batch_size, mib);
  std::printf("  alone (forward + backward in PyTorch)     %7.3f ms\n", Median(alone_times) * 1e3);
  std::printf(
      "  sdk   (+ batch, views, gradient copy)    %7.3f ms  ratio %.3f (the batch: %.3f ms)\n",
      Median(sdk_times) * 1e3, Median(sdk_ratios), Median(prepare_times) * 1e3);
  std::printf("  step  (+ push and pull through a shard)  %7.3f ms  ratio %.3f (goal <= 1.15)\n",
              Median(step_times) * 1e3, Median(step_ratios));
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace syncopate::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  syncopate::runtime::KeepFreedMemoryForReuse();
  FLAGS_minloglevel = google::GLOG_WARNING;
  std::printf("syncopate-torch-bench: kernels %s; %d rounds x %.2f s per side, medians\n",
              syncopate::isa::IsaDescription(syncopate::isa::ActiveIsaLevel()).c_str(),
              std::max(1, absl::GetFlag(FLAGS_rounds)), absl::GetFlag(FLAGS_seconds));
  return syncopate::bench::Main();
}
