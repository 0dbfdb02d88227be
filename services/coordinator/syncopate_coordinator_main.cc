// syncopate-coordinator: owns the job spec, membership, data leases and the stop condition;
// serves the worker and shard sessions and GetStatus.
#include <fstream>
#include <memory>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "libs/coordinator/coordinator_server.h"
#include "libs/coordinator/job_summary.h"
#include "libs/coordinator/progress_journal.h"
#include "libs/job/job_spec.h"
#include "libs/job/model_kind.h"
#include "libs/metrics/metrics_server.h"
#include "libs/model_export/live_exporter.h"
#include "libs/rpc/grpc_util.h"
#include "libs/rpc/security.h"
#include "libs/runtime/process_runtime.h"
#include "services/common/security_flags.h"
#ifdef SYNCOPATE_WITH_TORCH
#include "libs/pytorch/torch_export.h"
#endif

ABSL_FLAG(std::string, job, "", "Job spec (protobuf text format); empty = the built-in default");
ABSL_FLAG(std::string, listen, "0.0.0.0:7070", "gRPC listen address; port 0 picks a free port");
ABSL_FLAG(std::string, metrics_listen, "0.0.0.0:9100", "Prometheus /metrics address");
ABSL_FLAG(std::string, ready_file, "", "If set, write grpc_port/metrics_port here once serving");
ABSL_FLAG(std::string, state_dir, "",
          "Keep the progress file here; a coordinator restarted with the same directory carries "
          "on the same job (empty: no progress file)");
ABSL_FLAG(int, startup_grace_seconds, 60,
          "Start with fewer than num_workers workers after waiting this long");
ABSL_FLAG(bool, hold_start, false,
          "Hold the job before it starts, with everyone registered and serving, until "
          "`syncopate release --coordinator=HOST:PORT` (with the join token) lets it go");
ABSL_FLAG(int, exit_after_done_seconds, -1,
          "Once the job is done, keep serving its final status this long, then exit 0 (a batch "
          "system's job then completes); -1 = serve until stopped");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "The shards' checkpoint directory (a volume they share with the coordinator): a job "
          "that exports as it runs (ExportSpec) reads its checkpoints here and publishes its "
          "exports in <dir>/exports unless the job names another directory");
ABSL_FLAG(std::string, final_status_file, "",
          "When exiting after the job is done, write a one-paragraph summary here (Kubernetes: "
          "/dev/termination-log, shown by kubectl describe pod)");

namespace syncopate::coordinator {
namespace {

int Main() {
  absl::StatusOr<rpc::SecurityConfig> security = services::SecurityFromFlags();
  if (!security.ok()) runtime::Die(std::string(security.status().message()));
  const std::string job_path = absl::GetFlag(FLAGS_job);
  absl::StatusOr<v1::JobSpec> job =
      job_path.empty() ? job::ParseJobSpec(job::DefaultJobText()) : job::LoadJobSpecFile(job_path);
  if (!job.ok()) runtime::Die(std::string(job.status().message()));
  if (job->export_().on_size() > 0 && absl::GetFlag(FLAGS_checkpoint_dir).empty()) {
    runtime::Die(
        "the job exports as it runs (export.on): --checkpoint_dir must name the shards' "
        "checkpoint directory");
  }
  absl::StatusOr<job::ModelDescription> model = job::DescribeModel(*job);
  if (!model.ok()) runtime::Die(std::string(model.status().message()));
  const int64_t train_examples = model->train_examples;

  absl::StatusOr<std::unique_ptr<metrics::MetricsServer>> metrics_server =
      metrics::MetricsServer::Start(absl::GetFlag(FLAGS_metrics_listen));
  if (!metrics_server.ok()) runtime::Die(std::string(metrics_server.status().message()), 1);
  CoordinatorMetrics metrics((*metrics_server)->registry());

  CoordinatorServerOptions options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.core.job = *job;
  options.core.model = *std::move(model);
  options.core.metrics = &metrics;
  options.core.startup_grace = absl::Seconds(absl::GetFlag(FLAGS_startup_grace_seconds));
  options.core.hold_start = absl::GetFlag(FLAGS_hold_start);
  if (!absl::GetFlag(FLAGS_state_dir).empty()) {
    options.core.journal = std::make_shared<FileProgressJournal>(absl::GetFlag(FLAGS_state_dir));
  }
  options.join_token = security->join_token;
  options.security = security->transport;
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
      CoordinatorServer::Start(std::move(options));
  if (!server.ok()) {
    runtime::Die(std::string(server.status().message()),
                 absl::IsUnavailable(server.status()) ? 1 : 2);
  }
  CoordinatorCore& core = (*server)->core();
  const int port = (*server)->port();
  // Exports as the job runs (ExportSpec): published from the shards' checkpoint directory.
  std::unique_ptr<model_export::LiveExporter> exporter;
  if (job->export_().on_size() > 0) {
    model_export::LiveExporterOptions live{.spec = job->export_(),
                                           .checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir)};
    live.published = [&core](const v1::ExportRecord& record) { core.SetLatestExport(record); };
#ifdef SYNCOPATE_WITH_TORCH
    live.formats = [](const std::string& dir, const v1::ExportManifest& manifest) {
      return pytorch::WriteTorchFormats(dir, manifest);
    };
#endif
    exporter = std::make_unique<model_export::LiveExporter>(std::move(live));
    LOG(INFO) << "exports published in "
              << model_export::LiveExporter::Directory(job->export_(),
                                                       absl::GetFlag(FLAGS_checkpoint_dir));
  }
  LOG(INFO) << "coordinator for job " << job->job_id() << " serving on port " << port
            << ", metrics on " << (*metrics_server)->port() << "; " << train_examples
            << " training examples; " << (security->transport.tls() ? "mTLS" : "plaintext")
            << (security->join_token.empty() ? "" : ", join token required");
  if (security->join_token.empty()) {
    LOG(WARNING) << "no join token (--join_token_file): anyone who can reach port " << port
                 << " can join this job as a worker or shard";
  }
  if (!absl::GetFlag(FLAGS_ready_file).empty()) {
    absl::Status written =
        runtime::WriteKeyValueFile(absl::GetFlag(FLAGS_ready_file),
                                   {{"grpc_port", std::to_string(port)},
                                    {"metrics_port", std::to_string((*metrics_server)->port())}});
    if (!written.ok()) runtime::Die(std::string(written.message()), 1);
  }
  // The coordinator keeps serving after the job is done, so status stays readable until the
  // launcher stops it, or (--exit_after_done_seconds) for a while before it exits 0 so a batch
  // system (a Kubernetes Job) sees the job complete.
  const int linger = absl::GetFlag(FLAGS_exit_after_done_seconds);
  bool done = false;
  while (!done && !runtime::ShutdownRequested()) {
    done = (*server)->Wait(absl::Milliseconds(200)) == v1::JOB_DONE;
  }
  if (done && exporter != nullptr) {
    // The shards write their last checkpoints as they stop: END publishes those.
    exporter->Finish(core.DrainingSince(), absl::Seconds(60));
    core.SetExportsFinished();
  }
  exporter.reset();
  if (done) {
    LOG(INFO) << JobSummary(core.Status());
    runtime::WaitForShutdown(linger >= 0 ? absl::Seconds(linger) : absl::InfiniteDuration());
  }
  (*server)->Shutdown();
  if (done && !absl::GetFlag(FLAGS_final_status_file).empty()) {
    std::ofstream out(absl::GetFlag(FLAGS_final_status_file));
    out << JobSummary(core.Status()) << "\n";
  }
  LOG(INFO) << "coordinator stopped";
  return 0;
}

}  // namespace
}  // namespace syncopate::coordinator

int main(int argc, char** argv) {
  syncopate::runtime::InitProcess(argc, argv,
                                  "syncopate-coordinator [--job=FILE] [flags]\n"
                                  "Coordinates a Syncopate training job.");
  return syncopate::coordinator::Main();
}
