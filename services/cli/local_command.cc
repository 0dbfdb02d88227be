// `syncopate local`: a whole cluster as child processes on loopback (libs/launch), supervised
// with a progress line every 2 s (libs/launch/run_loop.h), optionally scraped by Prometheus
// (libs/launch/local_prometheus.h), and the run report at the end (libs/report: report.json,
// report.md and report.html, whose curves come from the status sampled along the way).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "libs/common/mode_rules.h"
#include "libs/isa/isa.h"
#include "libs/job/job_spec.h"
#include "libs/job/model_kind.h"
#include "libs/launch/launch_flags.h"
#include "libs/launch/local_cluster.h"
#include "libs/launch/local_prometheus.h"
#include "libs/launch/run_loop.h"
#include "libs/launch/supervisor.h"
#include "libs/report/run_report.h"
#include "libs/report/status_view.h"
#include "libs/rpc/security.h"
#include "libs/runtime/process_runtime.h"
#include "services/cli/commands.h"
#include "services/common/security_flags.h"

namespace syncopate::cli {
namespace {

// --run_dir, or a new timestamped one under runs/.
std::string RunDirFromFlags() {
  std::string run_dir = absl::GetFlag(FLAGS_run_dir);
  if (run_dir.empty()) {
    run_dir = "runs/" + absl::FormatTime("%Y%m%d-%H%M%S", absl::Now(), absl::LocalTimeZone());
  }
  // A run directory keeps the coordinator's progress and the shards' checkpoints, which a new
  // cluster there would take up: a finished job would report its old result at once, a
  // running one carry on. A new run needs a new directory (--resume continues from another's
  // checkpoints on purpose).
  for (const char* state : {"/coordinator/coordinator.state", "/checkpoints"}) {
    std::error_code error;
    const std::filesystem::path path = run_dir + state;
    if (std::filesystem::exists(path, error) && !std::filesystem::is_empty(path, error)) {
      runtime::Die(absl::StrCat("--run_dir ", run_dir, " holds another run (", path.string(),
                                "): pick a new directory, or --resume=", run_dir,
                                " to start from its checkpoints"));
    }
  }
  return run_dir;
}

// The kernels' ISA level: --isa, else this machine's highest.
isa::IsaLevel ChooseKernels() {
  // The children inherit the choice through SYNCOPATE_ISA, which isa::ActiveIsaLevel() reads at
  // their start (this process decided its own level already, validating the job).
  isa::IsaLevel kernels = isa::ActiveIsaLevel();
  if (const std::string isa_flag = absl::GetFlag(FLAGS_isa); !isa_flag.empty()) {
    absl::StatusOr<isa::IsaLevel> level =
        isa::ChooseIsaLevel(isa_flag, isa::HighestSupportedIsaLevel());
    if (!level.ok()) runtime::Die("--isa: " + std::string(level.status().message()));
    kernels = *level;
    setenv("SYNCOPATE_ISA", std::string(isa::IsaLevelName(kernels)).c_str(), /*overwrite=*/1);
  }
  return kernels;
}

// The security flags' join token, or a fresh one.
std::string JoinTokenOf(const rpc::SecurityConfig& security) {
  // Secure by default: loopback ports are reachable by every user of the machine, so a run
  // without a token of its own gets a fresh one, handed to the children in a file (never argv).
  if (!security.join_token.empty() || absl::GetFlag(FLAGS_insecure_no_join_token)) {
    return security.join_token;
  }
  absl::StatusOr<std::string> token = rpc::GenerateJoinToken();
  if (!token.ok()) runtime::Die(std::string(token.status().message()), 1);
  return *std::move(token);
}

// Where the started cluster listens, and how a process joins it by hand.
void PrintClusterEndpoints(const launch::LocalCluster& cluster, const std::string& join_token,
                           const std::string& run_dir) {
  printf("coordinator at %s; metrics:", cluster.coordinator_address().c_str());
  for (const auto& [name, port] : cluster.metrics_ports()) {
    printf(" %s=http://127.0.0.1:%d/metrics", name.c_str(), port);
  }
  printf("\n");
  if (!join_token.empty()) {
    printf(
        "join token in %s/join_token (mode 0600; a process joining by hand needs "
        "--join_token_file=%s/join_token)\n",
        run_dir.c_str(), run_dir.c_str());
  } else {
    printf("no join token: anyone who can reach these ports can join the job\n");
  }
}

// The coordinator publishes the final export once the shards' last checkpoints are on disk (it
// waits up to 60 s for them): wait for that (bounded) before stopping the cluster, so the report
// names it. Not by time: an in-run export may be published after the job ended.
void WaitForFinalExport(launch::LocalCluster& cluster, v1::ClusterStatus& last) {
  const absl::Time deadline = absl::Now() + absl::Seconds(90);
  while (absl::Now() < deadline && !last.exports_finished()) {
    absl::SleepFor(absl::Milliseconds(200));
    if (absl::StatusOr<v1::ClusterStatus> status = cluster.Status(); status.ok()) {
      last = *std::move(status);
    }
  }
}

// The process's exit code for how the run ended, saying why on the way.
int ExitCodeOf(launch::RunEnd end) {
  switch (end) {
    case launch::RunEnd::kDone:
      return 0;
    case launch::RunEnd::kInterrupted:
      printf("interrupted; stopping the cluster\n");
      return 130;
    case launch::RunEnd::kFailed:
      return 1;
    case launch::RunEnd::kTimedOut:
      fprintf(stderr, "syncopate local: timed out after %d s\n",
              absl::GetFlag(FLAGS_timeout_seconds));
      return 1;
  }
  return 0;
}

// The last lines: progress, the final evaluation, the kept version and the latest export.
void PrintOutcome(const v1::ClusterStatus& last, double wall, const v1::RunReport& run_report,
                  const std::string& run_dir) {
  printf("%s\n", report::ProgressLine(last).c_str());
  if (last.has_last_eval()) {
    printf(
        "done: final test accuracy %.2f%%, AUC %.4f, loss %.4f, %ld examples in %.1f s wall "
        "(%.0f examples/s training, %.0f wire bytes/example); report: %s/report.html\n",
        100 * last.last_eval().accuracy(), last.last_eval().auc(), last.last_eval().loss(),
        static_cast<long>(last.examples()), wall, run_report.examples_per_second(),
        run_report.wire_bytes_per_example(), run_dir.c_str());
  }
  if (last.has_kept_eval()) {
    // The version the validation set chose: what a user deploys (the test set never chose).
    printf("kept: %s%s\n", report::KeptVersionSummary(last.kept_eval()).c_str(),
           last.early_stop_reason().empty()
               ? ""
               : absl::StrCat("; stopped early: ", last.early_stop_reason()).c_str());
  }
  if (last.has_latest_export()) {
    printf("export: %s\n", report::ExportSummary(last.latest_export()).c_str());
  }
}

}  // namespace

int RunLocal() {
  absl::StatusOr<v1::JobSpec> job = JobFromFlags();
  if (!job.ok()) runtime::Die(std::string(job.status().message()));
  absl::StatusOr<std::vector<double>> slowdowns =
      launch::ParseSlowdowns(absl::GetFlag(FLAGS_slowdowns), job->num_workers());
  if (!slowdowns.ok()) runtime::Die(std::string(slowdowns.status().message()));
  absl::StatusOr<std::map<int, std::string>> schedules =
      launch::ParseSlowdownSchedules(absl::GetFlag(FLAGS_slowdown_schedule), job->num_workers());
  if (!schedules.ok()) runtime::Die(std::string(schedules.status().message()));
  absl::StatusOr<int> logical_workers =
      launch::ChooseLogicalWorkers(absl::GetFlag(FLAGS_logical_workers), job->num_workers(),
                                   static_cast<int>(std::thread::hardware_concurrency()),
                                   !slowdowns->empty() || !schedules->empty());
  if (!logical_workers.ok()) runtime::Die(std::string(logical_workers.status().message()));
  const std::string run_dir = RunDirFromFlags();
  std::string bin_dir = absl::GetFlag(FLAGS_bin_dir);
  if (bin_dir.empty()) bin_dir = runtime::ExecutableDir();
  if (absl::GetFlag(FLAGS_prometheus)) {
    if (absl::Status installed = launch::LocalPrometheus::CheckInstalled(); !installed.ok()) {
      runtime::Die("--prometheus: " + std::string(installed.message()));
    }
  }

  absl::StatusOr<rpc::SecurityConfig> security = services::SecurityFromFlags();
  if (!security.ok()) runtime::Die(std::string(security.status().message()));

  printf("syncopate local: kernels %s\n", isa::IsaDescription(ChooseKernels()).c_str());

  const absl::Time start = absl::Now();
  printf("syncopate local: job %s, %d workers%s, %d shards, mode %s, G=%d; run dir %s\n",
         job->job_id().c_str(), job->num_workers(),
         *logical_workers > 1 ? absl::StrCat(" in ", job->num_workers() / *logical_workers,
                                             " processes of ", *logical_workers)
                                    .c_str()
                              : "",
         job->num_shards(), ModeName(job->mode()).c_str(), job->global_batch(), run_dir.c_str());
  fflush(stdout);
  launch::LocalClusterOptions options;
  options.job = *job;
  options.bin_dir = bin_dir;
  options.run_dir = run_dir;
  options.slowdowns = *slowdowns;
  options.slowdown_schedules = *schedules;
  options.evaluator = absl::GetFlag(FLAGS_evaluator);
  options.shared_memory = absl::GetFlag(FLAGS_shared_memory);
  options.logical_workers = *logical_workers;
  options.tls = security->tls;
  options.join_token = JoinTokenOf(*security);
  if (!absl::GetFlag(FLAGS_resume).empty()) {
    options.restore_dir = absl::GetFlag(FLAGS_resume) + "/checkpoints";
  }
  absl::StatusOr<std::unique_ptr<launch::LocalCluster>> cluster =
      launch::LocalCluster::Start(options);
  if (!cluster.ok()) {
    fprintf(stderr, "syncopate local: %s (logs in %s/logs)\n",
            std::string(cluster.status().message()).c_str(), run_dir.c_str());
    return 1;
  }
  PrintClusterEndpoints(**cluster, options.join_token, run_dir);
  launch::LocalPrometheus prometheus(run_dir);  // stopped when this function returns
  absl::StatusOr<std::string> prometheus_url =
      prometheus.SetUp((*cluster)->metrics_ports(), absl::GetFlag(FLAGS_prometheus));
  if (!prometheus_url.ok()) {
    fprintf(stderr, "syncopate local: prometheus: %s\n",
            std::string(prometheus_url.status().message()).c_str());
  } else if (!prometheus_url->empty()) {
    printf("prometheus at %s (config %s/prometheus.yml, log %s/logs/prometheus.log)\n",
           prometheus_url->c_str(), run_dir.c_str(), run_dir.c_str());
  }
  fflush(stdout);

  launch::Supervisor supervisor(**cluster, run_dir);
  launch::RunLoopOptions loop;
  loop.status = [&cluster] { return (*cluster)->Status(); };
  loop.wait_for_interrupt = runtime::WaitForShutdown;
  loop.deadline = start + absl::Seconds(absl::GetFlag(FLAGS_timeout_seconds));
  loop.print = [](const std::string& line) {
    printf("%s\n", line.c_str());
    fflush(stdout);
  };
  loop.print_error = [](const std::string& line) { fprintf(stderr, "%s\n", line.c_str()); };
  const launch::RunLoopResult run = launch::SuperviseRun(loop, supervisor, prometheus);
  v1::ClusterStatus last = run.last;
  const bool exports_at_end = std::find(job->export_().on().begin(), job->export_().on().end(),
                                        v1::ExportSpec::END) != job->export_().on().end();
  if (run.end == launch::RunEnd::kDone && exports_at_end) WaitForFinalExport(**cluster, last);
  const int exit_code = ExitCodeOf(run.end);
  (*cluster)->Stop();
  prometheus.Stop();
  const double wall = absl::ToDoubleSeconds(absl::Now() - start);
  v1::RunReport run_report = report::BuildRunReport(last, wall, *slowdowns, run.timeline);
  run_report.set_quality_metric(std::string(job::QualityMetric(*job)));
  absl::Status written = report::WriteRunReport(run_dir, run_report);
  if (!written.ok()) {
    fprintf(stderr, "syncopate local: %s\n", std::string(written.message()).c_str());
  }
  PrintOutcome(last, wall, run_report, run_dir);
  // Every child has been reaped: what each class of process cost (docs/measurements/throughput.md
  // reads it for the per-step cost breakdown).
  printf("%s\n",
         launch::DescribeUsage((*cluster)->processes().UsageByClass(), last.examples()).c_str());
  return exit_code;
}

}  // namespace syncopate::cli
