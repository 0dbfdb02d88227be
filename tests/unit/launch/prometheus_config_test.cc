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

}  // namespace
}  // namespace syncopate::launch
