#include "libs/launch/supervisor.h"

#include <sys/wait.h>

#include <utility>
#include <vector>

#include "absl/strings/str_format.h"

namespace syncopate::launch {

Supervisor::Supervisor(SupervisedChildren& children, std::string run_dir, int max_restarts)
    : children_(children), run_dir_(std::move(run_dir)), max_restarts_(max_restarts) {}

Supervisor::Round Supervisor::Check(bool job_done) {
  Round round;
  std::vector<Exit> exits = std::exchange(deferred_, {});
  const size_t judged_before = exits.size();
  for (Exit& exit : children_.Reap()) exits.push_back(std::move(exit));
  for (size_t i = 0; i < exits.size(); ++i) {
    const Exit& exit = exits[i];
    const bool clean = WIFEXITED(exit.status) && WEXITSTATUS(exit.status) == 0;
    if (!clean) round.lines.push_back(exit.Describe());
    if (!children_.Essential(exit.name)) continue;
    if (clean && !job_done && i >= judged_before) {
      deferred_.push_back(exit);
      continue;
    }
    if (!job_done && ++restarts_[exit.name] <= max_restarts_) {
      absl::Status restarted = children_.Restart(exit.name);
      round.lines.push_back(absl::StrFormat("restarting %s (restart %d of at most %d): %s",
                                            exit.name, restarts_[exit.name], max_restarts_,
                                            restarted.ok() ? "ok" : restarted.message()));
      if (restarted.ok()) continue;
    }
    if (clean && job_done) continue;
    round.errors.push_back(absl::StrFormat("syncopate local: %s died; see %s/logs/%s.log",
                                           exit.name, run_dir_, exit.name));
    round.failed = true;
  }
  return round;
}

}  // namespace syncopate::launch
