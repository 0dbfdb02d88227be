// The Prometheus configuration that scrapes a local cluster: what `syncopate local` writes to
// <run_dir>/prometheus.yml. Labels match deploy/prometheus/ so the dashboards and alert rules in
// deploy/ work unchanged: one scrape job "syncopate"; every target carries role=coordinator |
// shard | worker | evaluator, and worker targets carry worker=<worker name> (worker processes do
// not label their own series; shard series carry their own shard label).
// Thread-safety: pure functions; safe to call from any thread.
#ifndef SYNCOPATE_LIBS_LAUNCH_PROMETHEUS_CONFIG_H_
#define SYNCOPATE_LIBS_LAUNCH_PROMETHEUS_CONFIG_H_

#include <map>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace syncopate::launch {

// `metrics_ports`: process name ("coordinator", "shard-<i>", "evaluator", else a worker name)
// -> metrics port on 127.0.0.1, as LocalCluster::metrics_ports() reports them.
// `rule_file`: a rules file to load (relative to the configuration's directory), e.g.
// "rules.yml" holding AlertRules(); empty = none.
std::string LocalPrometheusConfig(const std::map<std::string, int>& metrics_ports,
                                  absl::Duration scrape_interval,
                                  const std::string& rule_file = "");

// deploy/prometheus/rules.yml, compiled in: the alert rules every deployment loads.
absl::string_view AlertRules();

}  // namespace syncopate::launch

#endif  // SYNCOPATE_LIBS_LAUNCH_PROMETHEUS_CONFIG_H_
