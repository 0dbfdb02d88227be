// syncopate-worker: a model replica. Pulls parameters from every shard, computes gradients on
// leased data blocks and pushes them back; reports step times to the coordinator.
// With --role=evaluator it instead measures the newest parameters on the test set.
// Wiring only: the loops are libs/worker (Trainer, RunEvaluator), the join/rejoin policy and
// the exit codes are WorkerRunner.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "libs/isa/isa.h"
#include "libs/job/job_spec.h"
#include "libs/job/model_kind.h"
#include "libs/metrics/metrics_server.h"
#include "libs/rpc/security.h"
#include "libs/runtime/process_runtime.h"
#include "libs/worker/coordinator_session.h"
#include "libs/worker/evaluator.h"
#include "libs/worker/parameter_client.h"
#include "libs/worker/slowdown_schedule.h"
#include "libs/worker/trainer.h"
#include "libs/worker/worker_metrics.h"
#include "libs/worker/worker_runner.h"
#include "services/common/security_flags.h"

ABSL_FLAG(std::string, coordinator, "127.0.0.1:7070", "Coordinator address (host:port)");
ABSL_FLAG(std::string, name, "", "Stable worker name (default: the host name)");
ABSL_FLAG(std::string, role, "worker", "worker | evaluator");
ABSL_FLAG(double, slowdown, 1.0,
          "Pad each step's compute to this multiple of its real time (emulates a slower "
          "machine without using more CPU); >= 1");
ABSL_FLAG(std::string, slowdown_schedule, "",
          "Time-varying slowdown since training started, e.g. 0s:1,20s:4,60s:1 (overrides "
          "--slowdown)");
ABSL_FLAG(absl::Duration, min_step_time, absl::ZeroDuration(),
          "Pad each step's compute to at least this long (e.g. 10ms): a job that lasts at least "
          "its steps times this on any machine, for tests and benchmarks that act mid-run");
ABSL_FLAG(int, nice, 0,
          "Raise this process's niceness by this much at start, in [0, 19] (syncopate local and "
          "docker-compose give the evaluator 10: it scores in the CPU training leaves)");
ABSL_FLAG(std::string, metrics_listen, "0.0.0.0:9102", "Prometheus /metrics address");
ABSL_FLAG(std::string, ready_file, "", "If set, write metrics_port here once running");
ABSL_FLAG(int, join_timeout_seconds, 600, "Give up if no welcome arrives within this time");
ABSL_FLAG(int, logical_workers, 1,
          "How many of the job's num_workers this process stands for: it trains their shares of "
          "the global batch as one batch and pushes once per step (one process per core; "
          "docs/decisions/0023-logical-workers.md)");
ABSL_FLAG(bool, shared_memory, true,
          "Take a co-located shard's offer of shared memory for the dense payloads (same kernel "
          "and IPC namespace; docs/decisions/0022-co-located-data-plane.md); false: the wire");

namespace syncopate::worker {
namespace {

// One life of the role on a welcome: the workload the job names, the parameter client on the
// shard map, then the loop.
absl::Status RunRole(CoordinatorChannel& session, bool trainer, const rpc::SecurityConfig& security,
                     const SlowdownSchedule& slowdown, WorkerMetrics& metrics) {
  const v1::Welcome& welcome = session.welcome();
  absl::StatusOr<std::unique_ptr<workload::Workload>> model = job::CreateWorkload(
      welcome.job(), trainer ? workload::Purpose::kTrain : workload::Purpose::kEvaluate);
  if (!model.ok()) return model.status();
  const auto wait = [](absl::Duration d) { return runtime::WaitForShutdown(d); };
  const auto shutdown = [] { return runtime::ShutdownRequested(); };
  ParameterClientOptions client_options{
      .connection = {.worker_id = welcome.worker_id(),
                     .role = trainer ? v1::ROLE_WORKER : v1::ROLE_EVALUATOR,
                     .join_token = security.join_token,
                     .job_id = welcome.job().job_id(),
                     .security = security.transport,
                     .dense_encoding =
                         trainer ? job::TrainingDenseEncoding(welcome.job()) : v1::DENSE_FLOAT32,
                     .shared_memory = absl::GetFlag(FLAGS_shared_memory)},
      .table_dims = (*model)->table_dims(),
      .abort = shutdown,
      .wait = wait};
  if (!trainer) {
    std::unique_ptr<workload::Workload> validation;
    if (!welcome.job().dataset().validation_path().empty()) {
      absl::StatusOr<std::unique_ptr<workload::Workload>> created =
          job::CreateWorkload(welcome.job(), workload::Purpose::kValidate);
      if (!created.ok()) return created.status();
      validation = *std::move(created);
    }
    ParameterClient client(welcome.shard_map(), std::move(client_options));
    EvaluatorOptions options;
    options.validation = validation.get();
    options.quality_metric = std::string(job::QualityMetric(welcome.job()));
    options.wait = wait;
    options.shutdown = shutdown;
    return RunEvaluator(session, **model, client, options);
  }
  client_options.abort = [&session] {
    return session.stop_requested() || runtime::ShutdownRequested();
  };
  ParameterClient client(welcome.shard_map(), std::move(client_options));
  TrainerOptions options;
  options.slowdown = slowdown;
  options.min_step_time = absl::GetFlag(FLAGS_min_step_time);
  options.metrics = &metrics;
  options.wait = wait;
  options.shutdown = shutdown;
  return Trainer(session, **model, client, std::move(options)).Run();
}

int Main() {
  const std::string role = absl::GetFlag(FLAGS_role);
  if (role != "worker" && role != "evaluator") {
    runtime::Die("--role must be worker or evaluator, got '" + role + "'");
  }
  if (!(absl::GetFlag(FLAGS_slowdown) >= 1.0)) runtime::Die("--slowdown must be >= 1");
  const int niceness = absl::GetFlag(FLAGS_nice);
  if (niceness < 0 || niceness > 19) runtime::Die("--nice must be in [0, 19]");
  // Before the threads that work exist (Linux keeps niceness per thread, and new threads inherit
  // their creator's; InitProcess's signal thread only waits). An evaluator sharing cores with
  // training at equal priority preempts the workers, and in sync one preempted worker holds every
  // barrier: co-located with the default job on 2 cores, its 25 evaluations cost ~10% of the
  // job's throughput at nice 0 and ~5% at 10 (docs/operations.md, "The evaluator's priority").
  errno = 0;
  if (niceness > 0 && ::nice(niceness) == -1 && errno != 0) {
    LOG(WARNING) << "--nice=" << niceness << " not applied: " << std::strerror(errno);
  }
  if (absl::GetFlag(FLAGS_logical_workers) < 1) runtime::Die("--logical_workers must be >= 1");
  if (absl::GetFlag(FLAGS_min_step_time) < absl::ZeroDuration()) {
    runtime::Die("--min_step_time must be >= 0");
  }
  absl::StatusOr<rpc::SecurityConfig> security = services::SecurityFromFlags();
  if (!security.ok()) runtime::Die(std::string(security.status().message()));
  SlowdownSchedule slowdown(absl::GetFlag(FLAGS_slowdown));
  if (!absl::GetFlag(FLAGS_slowdown_schedule).empty()) {
    absl::StatusOr<SlowdownSchedule> parsed =
        SlowdownSchedule::Parse(absl::GetFlag(FLAGS_slowdown_schedule));
    if (!parsed.ok()) {
      runtime::Die("--slowdown_schedule: " + std::string(parsed.status().message()));
    }
    slowdown = *parsed;
  }
  absl::StatusOr<std::unique_ptr<metrics::MetricsServer>> metrics_server =
      metrics::MetricsServer::Start(absl::GetFlag(FLAGS_metrics_listen));
  if (!metrics_server.ok()) runtime::Die(std::string(metrics_server.status().message()), 1);
  PrometheusWorkerMetrics metrics((*metrics_server)->registry());
  if (!absl::GetFlag(FLAGS_ready_file).empty()) {
    absl::Status written =
        runtime::WriteKeyValueFile(absl::GetFlag(FLAGS_ready_file),
                                   {{"metrics_port", std::to_string((*metrics_server)->port())}});
    if (!written.ok()) runtime::Die(std::string(written.message()), 1);
  }
  std::string name = absl::GetFlag(FLAGS_name);
  if (name.empty()) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    name = host;
  }
  // The level every model and optimizer kernel of this process runs (SYNCOPATE_ISA overrides).
  LOG(INFO) << name << ": kernels " << isa::IsaDescription(isa::ActiveIsaLevel());
  v1::WorkerHello hello;
  hello.set_name(name);
  hello.set_role(role == "worker" ? v1::ROLE_WORKER : v1::ROLE_EVALUATOR);
  hello.set_join_token(security->join_token);
  if (role == "worker") hello.set_logical_workers(absl::GetFlag(FLAGS_logical_workers));

  // Join, run the role, rejoin when it is lost: libs/worker/worker_runner.h decides (and
  // documents) every exit code.
  const std::string coordinator = absl::GetFlag(FLAGS_coordinator);
  WorkerRunnerOptions options;
  options.join_timeout = absl::Seconds(absl::GetFlag(FLAGS_join_timeout_seconds));
  options.wait = [](absl::Duration d) { return runtime::WaitForShutdown(d); };
  options.shutdown = [] { return runtime::ShutdownRequested(); };
  WorkerRunner runner(
      [&coordinator, &security](const v1::WorkerHello& hello, absl::Duration timeout)
          -> absl::StatusOr<std::unique_ptr<CoordinatorChannel>> {
        return CoordinatorSession::Open(coordinator, hello, timeout, security->transport,
                                        [] { return runtime::ShutdownRequested(); });
      },
      [&](CoordinatorChannel& session) {
        return RunRole(session, role == "worker", *security, slowdown, metrics);
      },
      std::move(options));
  const WorkerExit exit = runner.Run(std::move(hello));
  if (exit.code != 0) runtime::Die(exit.message, exit.code);
  LOG(INFO) << name << " done";
  return 0;
}

}  // namespace
}  // namespace syncopate::worker

int main(int argc, char** argv) {
  syncopate::runtime::InitProcess(argc, argv,
                                  "syncopate-worker --coordinator=HOST:PORT [--role=evaluator] "
                                  "[flags]\nTrains (or evaluates) a model replica.");
  return syncopate::worker::Main();
}
