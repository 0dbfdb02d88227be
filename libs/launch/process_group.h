// Child processes of a local cluster: spawned with their output in log files, reaped without
// blocking, stopped with SIGTERM and, after a bounded grace period, SIGKILL. Used by
// `syncopate local` and by the integration tests.
// Thread-safety: thread-compatible (the launcher's one thread owns it).
#ifndef SYNCOPATE_LIBS_LAUNCH_PROCESS_GROUP_H_
#define SYNCOPATE_LIBS_LAUNCH_PROCESS_GROUP_H_

#include <sys/types.h>

#include <map>
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

struct Exit {
  std::string name;
  int status = 0;           // waitpid status
  std::string reason = {};  // the child's own one-line reason, when it wrote one (ChildSpec)
  // "<name> exited with code N: <reason>".
  std::string Describe() const;
};

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
  pid_t Pid(const std::string& name) const;
  void Signal(const std::string& name, int signal);
  // SIGTERM to all, wait up to `grace` for them to exit, then SIGKILL the rest.
  std::vector<Exit> TerminateAll(absl::Duration grace = absl::Seconds(10));

  // Waits for a child's ready file (key=value lines) to appear; fails early if it exits.
  absl::StatusOr<std::map<std::string, std::string>> WaitForReadyFile(const std::string& name,
                                                                      const std::string& path,
                                                                      absl::Duration timeout);

 private:
  Exit Exited(const std::string& name, int status) const;

  std::map<std::string, pid_t> children_;
  std::map<std::string, std::string> termination_logs_;  // by child name
};

}  // namespace syncopate::launch

#endif  // SYNCOPATE_LIBS_LAUNCH_PROCESS_GROUP_H_
