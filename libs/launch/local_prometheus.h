// LocalPrometheus: `syncopate local --prometheus`. Writes <run_dir>/prometheus.yml (scraping the
// cluster's metrics ports, LocalPrometheusConfig) and <run_dir>/rules.yml (AlertRules) beside it,
// and, when asked, runs /usr/bin/prometheus on them on a free loopback port, in a process group
// of its own that is stopped with this object.
// Thread-safety: thread-compatible (the launcher's loop owns it).
#ifndef SYNCOPATE_LIBS_LAUNCH_LOCAL_PROMETHEUS_H_
#define SYNCOPATE_LIBS_LAUNCH_LOCAL_PROMETHEUS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "libs/launch/process_group.h"

namespace syncopate::launch {

class LocalPrometheus {
 public:
  static constexpr char kBinary[] = "/usr/bin/prometheus";

  // FAILED_PRECONDITION naming the package to install when kBinary is not executable.
  static absl::Status CheckInstalled();

  explicit LocalPrometheus(std::string run_dir) : run_dir_(std::move(run_dir)) {}

  // Writes the configuration and the rules for `metrics_ports` (process name -> port, as
  // LocalCluster::metrics_ports() reports them) and, if `start`, starts Prometheus on them.
  // Returns Prometheus' URL, or "" when only the files were written.
  absl::StatusOr<std::string> SetUp(const std::map<std::string, int>& metrics_ports, bool start);

  // One line per Prometheus exit since the last call (it is not restarted: the job does not
  // need it).
  std::vector<std::string> ReapExits();

  void Stop(absl::Duration grace = absl::Seconds(5)) { group_.TerminateAll(grace); }

 private:
  const std::string run_dir_;
  ProcessGroup group_;  // stopped when destroyed
};

}  // namespace syncopate::launch

#endif  // SYNCOPATE_LIBS_LAUNCH_LOCAL_PROMETHEUS_H_
