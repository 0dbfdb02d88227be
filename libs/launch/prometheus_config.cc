#include "libs/launch/prometheus_config.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace syncopate::launch {

std::string LocalPrometheusConfig(const std::map<std::string, int>& metrics_ports,
                                  absl::Duration scrape_interval, const std::string& rule_file) {
  const std::string interval = absl::StrCat(absl::ToInt64Milliseconds(scrape_interval), "ms");
  std::string out = absl::StrCat(
      "# Written by `syncopate local`: scrapes every process of this run.\n"
      "global:\n"
      "  scrape_interval: ",
      interval, "\n  evaluation_interval: ", interval, "\n",
      rule_file.empty() ? "" : absl::StrCat("rule_files: ['", rule_file, "']\n"),
      "scrape_configs:\n"
      "  - job_name: syncopate\n"
      "    static_configs:\n");
  for (const auto& [name, port] : metrics_ports) {
    std::string role = "worker";
    if (name == "coordinator" || name == "evaluator") role = name;
    if (absl::StartsWith(name, "shard-")) role = "shard";
    absl::StrAppend(&out, "      - targets: ['127.0.0.1:", port,
                    "']\n        labels: {role: ", role,
                    role == "worker" ? absl::StrCat(", worker: '", name, "'") : "", "}\n");
  }
  return out;
}

}  // namespace syncopate::launch
