#include "libs/launch/local_cluster.h"

#include <fcntl.h>
#include <signal.h>  // NOLINT(modernize-deprecated-headers): SIGKILL is POSIX, not in <csignal>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "libs/common/status_macros.h"
#include "libs/job/job_spec.h"
#include "libs/rpc/grpc_util.h"

namespace syncopate::launch {

bool LocalCluster::Essential(const std::string& name) const {
  auto it = children_.find(name);
  return it != children_.end() && it->second.essential;
}

absl::StatusOr<int> LocalCluster::StartChild(const std::string& name, std::vector<std::string> argv,
                                             const std::string& port_key, bool essential) {
  const std::string ready = absl::StrCat(options_.run_dir, "/ready/", name);
  Child& child = children_[name];
  if (child.argv.empty()) child = {argv, port_key, 0, essential};
  std::filesystem::remove(ready);
  argv.push_back("--ready_file=" + ready);
  argv.emplace_back("--metrics_listen=127.0.0.1:0");
  argv.insert(argv.end(), security_flags_.begin(), security_flags_.end());
  SYNCOPATE_RETURN_IF_ERROR(
      processes_
          .Spawn({.name = name,
                  .argv = std::move(argv),
                  .log_path = absl::StrCat(options_.run_dir, "/logs/", name, ".log"),
                  .termination_log = absl::StrCat(options_.run_dir, "/logs/", name, ".reason")})
          .status());
  SYNCOPATE_ASSIGN_OR_RETURN(auto values,
                             processes_.WaitForReadyFile(name, ready, options_.ready_timeout));
  metrics_ports_[name] = std::atoi(values["metrics_port"].c_str());
  child.grpc_port = port_key.empty() ? 0 : std::atoi(values[port_key].c_str());
  return child.grpc_port;
}

absl::Status LocalCluster::KillAndRestart(const std::string& name) {
  if (!processes_.Running(name)) return absl::NotFoundError(absl::StrCat(name, " is not running"));
  processes_.Signal(name, SIGKILL);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (processes_.Running(name)) {
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(name, " survived SIGKILL for 10 s"));
    }
    processes_.Reap();
    absl::SleepFor(absl::Milliseconds(20));
  }
  return Restart(name);
}

std::vector<Exit> LocalCluster::StopAfterJob(absl::Duration grace) {
  std::vector<Exit> exits;
  const absl::Time deadline = absl::Now() + grace;
  while (processes_.size() > (processes_.Running("coordinator") ? 1u : 0u) &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
    for (Exit& exit : processes_.Reap()) exits.push_back(std::move(exit));
  }
  for (Exit& exit : processes_.TerminateAll()) exits.push_back(std::move(exit));
  return exits;
}

absl::Status LocalCluster::Restart(const std::string& name) {
  auto it = children_.find(name);
  if (it == children_.end()) return absl::NotFoundError(absl::StrCat("no child named ", name));
  std::vector<std::string> argv = it->second.argv;
  if (it->second.grpc_port != 0) {
    for (std::string& arg : argv) {
      if (arg == "--listen=127.0.0.1:0") {
        arg = absl::StrCat("--listen=127.0.0.1:", it->second.grpc_port);
      }
    }
  }
  return StartChild(name, std::move(argv), it->second.port_key, it->second.essential).status();
}

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(LocalClusterOptions options) {
  auto cluster = std::unique_ptr<LocalCluster>(new LocalCluster());
  cluster->options_ = std::move(options);
  const LocalClusterOptions& o = cluster->options_;
  std::error_code error;
  std::filesystem::create_directories(o.run_dir + "/logs", error);
  std::filesystem::create_directories(o.run_dir + "/ready", error);
  if (error) return absl::UnavailableError("cannot create " + o.run_dir + ": " + error.message());
  const std::string job_path = o.run_dir + "/job.textproto";
  {
    std::ofstream out(job_path);
    out << job::JobSpecToText(o.job);
    if (!out) return absl::UnavailableError("cannot write " + job_path);
  }
  SYNCOPATE_ASSIGN_OR_RETURN(const rpc::TransportSecurity security,
                             rpc::LoadTransportSecurity(o.tls));
  if (security.tls()) {
    cluster->security_flags_ = {"--tls_cert=" + o.tls.cert_file, "--tls_key=" + o.tls.key_file,
                                "--tls_ca=" + o.tls.ca_file};
    if (!o.tls.server_name.empty()) {
      cluster->security_flags_.push_back("--tls_server_name=" + o.tls.server_name);
    }
  }
  if (!o.join_token.empty()) {
    const std::string token_path = o.run_dir + "/join_token";
    const int fd = open(token_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const bool written = fd >= 0 && write(fd, o.join_token.data(), o.join_token.size()) ==
                                        static_cast<ssize_t>(o.join_token.size());
    if (fd >= 0) close(fd);
    if (!written) return absl::UnavailableError("cannot write " + token_path);
    cluster->security_flags_.push_back("--join_token_file=" + token_path);
  }
  const std::string bin = o.bin_dir + "/";
  SYNCOPATE_ASSIGN_OR_RETURN(
      int coordinator_port,
      cluster->StartChild(
          "coordinator",
          {bin + "syncopate-coordinator", "--job=" + job_path, "--listen=127.0.0.1:0",
           "--state_dir=" + o.run_dir + "/coordinator",
           "--checkpoint_dir=" +
               (o.checkpoint_dir.empty() ? o.run_dir + "/checkpoints" : o.checkpoint_dir)},
          "grpc_port", /*essential=*/true));
  cluster->coordinator_address_ = absl::StrCat("127.0.0.1:", coordinator_port);
  cluster->stub_ =
      v1::Coordinator::NewStub(rpc::CreateChannel(cluster->coordinator_address_, security));
  const std::string coordinator = "--coordinator=" + cluster->coordinator_address_;
  const std::string checkpoint_dir =
      o.checkpoint_dir.empty() ? o.run_dir + "/checkpoints" : o.checkpoint_dir;
  for (int s = 0; s < o.job.num_shards(); ++s) {
    std::vector<std::string> argv = {bin + "syncopate-shard", coordinator,
                                     absl::StrCat("--shard_id=", s), "--listen=127.0.0.1:0",
                                     "--checkpoint_dir=" + checkpoint_dir};
    if (!o.restore_dir.empty()) argv.push_back("--restore_dir=" + o.restore_dir);
    if (!o.shared_memory) argv.push_back("--shared_memory=false");
    SYNCOPATE_RETURN_IF_ERROR(
        cluster->StartChild(ShardName(s), std::move(argv), "grpc_port", /*essential=*/true)
            .status());
  }
  const int logical = std::max(1, o.logical_workers);
  const int workers = o.worker_processes >= 0 ? o.worker_processes : o.job.num_workers() / logical;
  for (int w = 0; w < workers; ++w) {
    const double slowdown = w < static_cast<int>(o.slowdowns.size()) ? o.slowdowns[w] : 1.0;
    std::vector<std::string> argv = o.worker_command_prefix;
    argv.insert(argv.end(), {bin + "syncopate-worker", coordinator, "--name=" + WorkerName(w),
                             absl::StrCat("--slowdown=", slowdown)});
    if (o.min_step_time > absl::ZeroDuration()) {
      argv.push_back("--min_step_time=" + absl::FormatDuration(o.min_step_time));
    }
    if (logical > 1) argv.push_back(absl::StrCat("--logical_workers=", logical));
    if (!o.shared_memory) argv.push_back("--shared_memory=false");
    auto schedule = o.slowdown_schedules.find(w);
    if (schedule != o.slowdown_schedules.end()) {
      argv.push_back("--slowdown_schedule=" + schedule->second);
    }
    SYNCOPATE_RETURN_IF_ERROR(
        cluster->StartChild(WorkerName(w), std::move(argv), "", /*essential=*/false).status());
  }
  if (o.evaluator) {
    std::vector<std::string> argv = o.worker_command_prefix;
    argv.insert(argv.end(),
                {bin + "syncopate-worker", coordinator, "--name=evaluator", "--role=evaluator",
                 // It shares the machine's cores with training: it scores in what training
                 // leaves (nice(1)'s customary 10), since a sync barrier waits on any worker it
                 // preempts.
                 "--nice=10"});
    if (!o.shared_memory) argv.push_back("--shared_memory=false");
    SYNCOPATE_RETURN_IF_ERROR(
        cluster->StartChild("evaluator", std::move(argv), "", /*essential=*/false).status());
  }
  return cluster;
}

absl::StatusOr<v1::ClusterStatus> LocalCluster::Status(absl::Duration timeout) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  v1::ClusterStatus status;
  grpc::Status rpc = stub_->GetStatus(&context, v1::GetStatusRequest(), &status);
  if (!rpc.ok()) return rpc::FromGrpcStatus(rpc);
  return status;
}

}  // namespace syncopate::launch
