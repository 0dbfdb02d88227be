#include "libs/launch/prometheus_config.h"

#include "gtest/gtest.h"

namespace syncopate::launch {
namespace {

TEST(LocalPrometheusConfig, LabelsEveryProcessByRoleAndWorkersByName) {
  const std::string config = LocalPrometheusConfig(
      {{"coordinator", 9100}, {"shard-0", 9101}, {"worker-0", 9102}, {"evaluator", 9103}},
      absl::Seconds(1));
  EXPECT_EQ(config,
            "# Written by `syncopate local`: scrapes every process of this run.\n"
            "global:\n"
            "  scrape_interval: 1000ms\n"
            "  evaluation_interval: 1000ms\n"
            "scrape_configs:\n"
            "  - job_name: syncopate\n"
            "    static_configs:\n"
            "      - targets: ['127.0.0.1:9100']\n"
            "        labels: {role: coordinator}\n"
            "      - targets: ['127.0.0.1:9103']\n"
            "        labels: {role: evaluator}\n"
            "      - targets: ['127.0.0.1:9101']\n"
            "        labels: {role: shard}\n"
            "      - targets: ['127.0.0.1:9102']\n"
            "        labels: {role: worker, worker: 'worker-0'}\n");
}

TEST(LocalPrometheusConfig, LoadsTheRuleFileWhenGivenOne) {
  const std::string config =
      LocalPrometheusConfig({{"coordinator", 9100}}, absl::Seconds(1), "rules.yml");
  EXPECT_NE(
      config.find("  evaluation_interval: 1000ms\nrule_files: ['rules.yml']\nscrape_configs:\n"),
      std::string::npos)
      << config;
}

TEST(AlertRules, AreDeployPrometheusRulesYml) {
  // The compiled-in text is the file itself (deploy/prometheus/rules.yml): spot-check an alert
  // from each end of it.
  const std::string rules(AlertRules());
  EXPECT_EQ(rules.rfind("# Alert rules for a Syncopate cluster.", 0), 0u) << rules.substr(0, 80);
  EXPECT_NE(rules.find("alert: SyncopateCoordinatorDown"), std::string::npos);
  EXPECT_NE(rules.find("alert: SyncopateGradientsRejected"), std::string::npos);
}

}  // namespace
}  // namespace syncopate::launch
