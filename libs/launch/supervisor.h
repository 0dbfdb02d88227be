// Supervisor: what `syncopate local` does when its children exit, like compose's `restart:` or
// Kubernetes. An essential child — one the job cannot go on without, which restores its own
// state when started again (LocalCluster marks the coordinator and the shards: progress file,
// checkpoints) — that dies before the job is done is started again on its port, at most
// max_restarts times each (a child that keeps dying is a bug or a broken machine, not something
// to retry forever); when it cannot be, the run fails. A non-essential child (a worker, the
// evaluator) is let go: the coordinator re-issues its leases and the job goes on.
// A clean exit (status 0) of an essential child before the job is seen done is judged one round
// later: a shard exits 0 when the coordinator tells it the job is done, which can reach it
// before the launcher's next look at the coordinator (seen 2026-11-26: a shard restarted into a
// finished job, 0.5 s after its "job done" checkpoint).
// Thread-safety: thread-compatible (the launcher's loop owns it).
#ifndef SYNCOPATE_LIBS_LAUNCH_SUPERVISOR_H_
#define SYNCOPATE_LIBS_LAUNCH_SUPERVISOR_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "libs/launch/process_group.h"

namespace syncopate::launch {

// The children as the supervisor sees them (LocalCluster; a fake in tests).
class SupervisedChildren {
 public:
  virtual ~SupervisedChildren() = default;
  // Children that exited since the last call.
  virtual std::vector<Exit> Reap() = 0;
  // True for a child the job cannot go on without.
  virtual bool Essential(const std::string& name) const = 0;
  // Starts the child again with the same flags, on the same port.
  virtual absl::Status Restart(const std::string& name) = 0;
};

class Supervisor {
 public:
  static constexpr int kMaxRestarts = 5;

  // `run_dir` names the logs in messages (<run_dir>/logs/<name>.log).
  Supervisor(SupervisedChildren& children, std::string run_dir, int max_restarts = kMaxRestarts);

  struct Round {
    std::vector<std::string> lines;   // progress: unclean exits, restarts (stdout)
    std::vector<std::string> errors;  // why the run fails (stderr)
    bool failed = false;              // an essential child died and was not restarted
  };
  // Handles every exit since the last call. `job_done`: the coordinator reported the job done
  // (essential children then exit on their own and are not restarted).
  Round Check(bool job_done);

 private:
  SupervisedChildren& children_;
  const std::string run_dir_;
  const int max_restarts_;
  std::map<std::string, int> restarts_;
  std::vector<Exit> deferred_;  // clean exits seen before the job was done, judged next round
};

}  // namespace syncopate::launch

#endif  // SYNCOPATE_LIBS_LAUNCH_SUPERVISOR_H_
