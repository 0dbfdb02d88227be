// docs/metrics.md is every metric the processes register, and nothing else. The names come from
// where they are registered (every `.Name("syncopate_...")` under libs/: prometheus-cpp's registry
// does not list a labelled family until it has a series), checked against a real registry for the
// families that have one, and compared with the reference's tables both ways: a metric added
// without its row, or a row left after its metric went, fails here.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "libs/coordinator/coordinator_metrics.h"
#include "libs/shard/shard_metrics.h"
#include "libs/worker/worker_metrics.h"
#include "prometheus/registry.h"

namespace syncopate {
namespace {

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::set<std::string> Matches(const std::string& text, const std::regex& pattern) {
  std::set<std::string> found;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), pattern);
       it != std::sregex_iterator(); ++it) {
    found.insert((*it)[1]);
  }
  return found;
}

// The names every component registers: prometheus::Build*().Name("syncopate_...").
std::set<std::string> RegisteredInSource() {
  const std::regex name(R"re(\.Name\("(syncopate_[a-z0-9_]+)"\))re");
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(
           std::filesystem::path(SYNCOPATE_SOURCE_DIR) / "libs")) {
    if (entry.path().extension() != ".cc") continue;
    for (const std::string& n : Matches(ReadFile(entry.path()), name)) names.insert(n);
  }
  return names;
}

// A table row naming a metric: "| `syncopate_...` | type | labels | meaning |".
std::set<std::string> Documented() {
  return Matches(ReadFile(std::filesystem::path(SYNCOPATE_SOURCE_DIR) / "docs" / "metrics.md"),
                 std::regex(R"(\n\| `(syncopate_[a-z0-9_]+)` \|)"));
}

TEST(MetricsReference, NamesEveryRegisteredMetricAndNothingElse) {
  const std::set<std::string> registered = RegisteredInSource();
  const std::set<std::string> documented = Documented();
  ASSERT_GT(registered.size(), 30u) << "no .Name(\"syncopate_...\") found under libs/";
  ASSERT_GT(documented.size(), 30u) << "the tables of docs/metrics.md were not read";
  for (const std::string& name : registered) {
    EXPECT_TRUE(documented.count(name)) << name << " is registered but not in docs/metrics.md";
  }
  for (const std::string& name : documented) {
    EXPECT_TRUE(registered.count(name)) << name << " is in docs/metrics.md but registered nowhere";
  }
}

// The source scan sees what the processes register: every family a real registry lists once the
// three components' metrics exist is among the scanned names.
TEST(MetricsReference, TheScanSeesWhatARegistryHolds) {
  prometheus::Registry registry;
  coordinator::CoordinatorMetrics coordinator(registry);
  shard::ShardMetrics shard(registry, 0);
  worker::PrometheusWorkerMetrics worker(registry);
  const std::set<std::string> scanned = RegisteredInSource();
  int families = 0;
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    ++families;
    EXPECT_TRUE(scanned.count(family.name)) << family.name << " escaped the source scan";
  }
  EXPECT_GT(families, 10);
}

}  // namespace
}  // namespace syncopate
