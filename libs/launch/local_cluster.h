// A whole Syncopate cluster as child processes on loopback: coordinator, shards, workers and
// an evaluator, each on a free port, each logging to <run_dir>/logs/<name>.log. The engine of
// `syncopate local` and of the integration tests.
// Thread-safety: thread-compatible.
#ifndef SYNCOPATE_LIBS_LAUNCH_LOCAL_CLUSTER_H_
#define SYNCOPATE_LIBS_LAUNCH_LOCAL_CLUSTER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "libs/launch/process_group.h"
#include "libs/launch/supervisor.h"
#include "libs/rpc/security.h"
#include "syncopate/v1/coordinator.grpc.pb.h"

namespace syncopate::launch {

struct LocalClusterOptions {
  v1::JobSpec job;
  std::string bin_dir;  // where syncopate-coordinator, -shard and -worker live
  std::string run_dir;
  std::vector<double> slowdowns;  // per worker; missing entries mean 1
  // Worker index -> --slowdown_schedule (e.g. "0s:1,20s:4,60s:1"); overrides `slowdowns`.
  std::map<int, std::string> slowdown_schedules;
  // Every worker's --min_step_time: a floor on each step, so the job lasts at least its steps
  // times this however fast the machine (tests that act while the job runs).
  absl::Duration min_step_time = absl::ZeroDuration();
  // The co-located data plane between the shards and the workers (ADR 0022); false passes
  // --shared_memory=false to both, so every payload takes the wire (A/B benchmarks).
  bool shared_memory = true;
  // How many of the job's workers each worker process stands for (--logical_workers, ADR 0023):
  // job.num_workers / logical_workers processes, each passed --logical_workers.
  int logical_workers = 1;
  bool evaluator = true;
  // Worker processes to start; -1: job.num_workers. Tests that play the workers themselves
  // start fewer (the job still waits for job.num_workers hellos).
  int worker_processes = -1;
  // Shards checkpoint here (default <run_dir>/checkpoints) and restore from here after a crash.
  std::string checkpoint_dir;
  // Shards with no checkpoint of their own restore from here (`syncopate local --resume`).
  std::string restore_dir;
  // mTLS on every link when set (all three files); every child gets the same certificate.
  rpc::TlsOptions tls;
  // Shared join token (empty = none); handed to children in <run_dir>/join_token (mode 0600),
  // never on a command line.
  std::string join_token;
  absl::Duration ready_timeout = absl::Seconds(30);
  // Put before the worker's and the evaluator's command lines (an absolute path first), e.g.
  // {"/usr/bin/prlimit", "--data=268435456", "--"} or a script that enters a memory cgroup: how
  // a test confines them the way a container limit would.
  std::vector<std::string> worker_command_prefix;
};

class LocalCluster final : public SupervisedChildren {
 public:
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(LocalClusterOptions options);

  absl::StatusOr<v1::ClusterStatus> Status(absl::Duration timeout = absl::Seconds(5));
  ProcessGroup& processes() { return processes_; }
  // Children that exited since the last call.
  std::vector<Exit> Reap() override { return processes_.Reap(); }
  // The coordinator and the shards: the job cannot go on without them, and they restore their
  // state when restarted. Workers and the evaluator are not.
  bool Essential(const std::string& name) const override;
  const std::string& coordinator_address() const { return coordinator_address_; }
  const std::string& run_dir() const { return options_.run_dir; }
  // name -> metrics port, for every process.
  const std::map<std::string, int>& metrics_ports() const { return metrics_ports_; }
  static std::string WorkerName(int i) { return "worker-" + std::to_string(i); }
  static std::string ShardName(int i) { return "shard-" + std::to_string(i); }

  std::vector<Exit> Stop() { return processes_.TerminateAll(); }
  // After the job ended: lets every process but the (lingering) coordinator exit on its own, up
  // to `grace` — the coordinator's stop and release reach workers and shards asynchronously, and
  // a loaded machine (a sanitizer build beside another test) takes seconds — then stops the rest
  // as Stop does. A SIGTERM that beats a shard's release makes it exit 143, as mid-job.
  std::vector<Exit> StopAfterJob(absl::Duration grace = absl::Seconds(20));

  // Starts a child that died again, with the same flags and on the same gRPC port, so peers
  // find it where they left it (the supervisor's job, like compose's `restart:`).
  absl::Status Restart(const std::string& name) override;

  // SIGKILLs a child, waits (bounded) until it is reaped, then restarts it: a fault injection
  // followed by what a supervisor does.
  absl::Status KillAndRestart(const std::string& name);

 private:
  LocalCluster() = default;
  absl::StatusOr<int> StartChild(const std::string& name, std::vector<std::string> argv,
                                 const std::string& port_key, bool essential);

  struct Child {
    std::vector<std::string> argv;  // as first started, without the ready/metrics flags
    std::string port_key;
    int grpc_port = 0;
    bool essential = false;
  };
  std::map<std::string, Child> children_;

  LocalClusterOptions options_;
  ProcessGroup processes_;
  std::vector<std::string> security_flags_;  // appended to every child's argv
  std::string coordinator_address_;
  std::map<std::string, int> metrics_ports_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

}  // namespace syncopate::launch

#endif  // SYNCOPATE_LIBS_LAUNCH_LOCAL_CLUSTER_H_
