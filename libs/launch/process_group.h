// Child processes of a local cluster: spawned with their output in log files, reaped without
// blocking, stopped with SIGTERM and, after a bounded grace period, SIGKILL. Used by
// `syncopate local` and by the integration tests.
// Thread-safety: thread-compatible (the launcher's one thread owns it).
#ifndef SYNCOPATE_LIBS_LAUNCH_PROCESS_GROUP_H_
#define SYNCOPATE_LIBS_LAUNCH_PROCESS_GROUP_H_

#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace syncopate::launch {

struct ChildSpec {
  std::string name;               // unique within the group, e.g. "shard-0"
  std::vector<std::string> argv;  // argv[0] is the executable path
  std::string log_path;           // stdout and stderr go here
  // Where the child writes the one line it exits with on a fatal error
  // (SYNCOPATE_TERMINATION_LOG, runtime::Die): its Exit carries the line. Empty: none.
  std::string termination_log = {};
};

// What children used, from the kernel's accounting at reaping (wait4's rusage): CPU seconds
// (user + system) and context switches, voluntary (a wait: a lock, a socket, a sleep) and
// involuntary (preempted). Summed per class of child (ProcessGroup::UsageByClass).
struct ResourceUse {
  double cpu_seconds = 0;
  int64_t voluntary_switches = 0;
  int64_t involuntary_switches = 0;
  int processes = 0;  // reaped processes summed here
  void Add(const ResourceUse& other);
};

struct Exit {
  std::string name;
  int status = 0;           // waitpid status
  std::string reason = {};  // the child's own one-line reason, when it wrote one (ChildSpec)
  ResourceUse usage = {};   // this process's, over its whole life
  // "<name> exited with code N: <reason>".
  std::string Describe() const;
};

// A child's class: its name without a trailing "-<number>" ("shard-1" -> "shard").
std::string ChildClass(const std::string& name);

// One line for `syncopate local`'s end: CPU seconds and context switches per class, the total,
// and CPU microseconds per training example (`examples` > 0), e.g. "cpu: coordinator 0.8 s,
// shard 6.1 s (2 processes), worker 30.2 s (4 processes); 37.1 CPU-s, 77.3 us/example; context
// switches 81234 voluntary, 5120 involuntary".
std::string DescribeUsage(const std::map<std::string, ResourceUse>& by_class, int64_t examples);

class ProcessGroup {
 public:
  ProcessGroup() = default;
  ~ProcessGroup() { TerminateAll(absl::Seconds(5)); }
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  absl::StatusOr<pid_t> Spawn(const ChildSpec& spec);
  // Children that exited since the last call (they are forgotten).
  std::vector<Exit> Reap();
  bool Running(const std::string& name) const { return children_.contains(name); }
  // Children not reaped yet.
  size_t size() const { return children_.size(); }
  pid_t Pid(const std::string& name) const;
  void Signal(const std::string& name, int signal);
  // SIGTERM to all, wait up to `grace` for them to exit, then SIGKILL the rest.
  std::vector<Exit> TerminateAll(absl::Duration grace = absl::Seconds(10));

  // What every reaped child used, summed per ChildClass (restarts included).
  const std::map<std::string, ResourceUse>& UsageByClass() const { return usage_by_class_; }

  // Waits for a child's ready file (key=value lines) to appear; fails early if it exits.
  absl::StatusOr<std::map<std::string, std::string>> WaitForReadyFile(const std::string& name,
                                                                      const std::string& path,
                                                                      absl::Duration timeout);

 private:
  // The Exit of a reaped child, its usage added to usage_by_class_.
  Exit Exited(const std::string& name, int status, const struct rusage& usage);
  // wait4 on `pid` (WNOHANG unless `block`): the Exit once it has ended.
  std::optional<Exit> Wait(const std::string& name, pid_t pid, bool block);

  std::map<std::string, pid_t> children_;
  std::map<std::string, ResourceUse> usage_by_class_;
  std::map<std::string, std::string> termination_logs_;  // by child name
};

}  // namespace syncopate::launch

#endif  // SYNCOPATE_LIBS_LAUNCH_PROCESS_GROUP_H_
