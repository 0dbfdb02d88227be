#include "libs/launch/local_prometheus.h"

#include <unistd.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "libs/launch/launch_flags.h"
#include "libs/launch/prometheus_config.h"

namespace syncopate::launch {

absl::Status LocalPrometheus::CheckInstalled() {
  if (access(kBinary, X_OK) == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(kBinary, " not found; install it with: apt-get install prometheus"));
}

absl::StatusOr<std::string> LocalPrometheus::SetUp(const std::map<std::string, int>& metrics_ports,
                                                   bool start) {
  const std::string config = run_dir_ + "/prometheus.yml";
  {
    // The alert rules of deploy/prometheus/rules.yml, next to the configuration that loads them.
    std::ofstream rules(run_dir_ + "/rules.yml");
    rules << AlertRules();
    if (!rules) return absl::UnavailableError("cannot write " + run_dir_ + "/rules.yml");
    std::ofstream out(config);
    out << LocalPrometheusConfig(metrics_ports, absl::Seconds(1), "rules.yml");
    if (!out) return absl::UnavailableError("cannot write " + config);
  }
  if (!start) return "";
  absl::StatusOr<int> port = FreeLoopbackPort();
  if (!port.ok()) return port.status();
  const std::string listen = absl::StrCat("127.0.0.1:", *port);
  absl::StatusOr<pid_t> pid = group_.Spawn(
      {"prometheus",
       {kBinary, "--config.file=" + config, "--storage.tsdb.path=" + run_dir_ + "/prometheus-data",
        "--web.listen-address=" + listen},
       run_dir_ + "/logs/prometheus.log"});
  if (!pid.ok()) return pid.status();
  return "http://" + listen;
}

std::vector<std::string> LocalPrometheus::ReapExits() {
  std::vector<std::string> lines;
  for (const Exit& exit : group_.Reap()) {
    lines.push_back(absl::StrCat("syncopate local: prometheus stopped (", exit.Describe(),
                                 "); see ", run_dir_, "/logs/prometheus.log"));
  }
  return lines;
}

}  // namespace syncopate::launch
