#include "libs/launch/process_group.h"

#include <unistd.h>

#include <string>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncopate::launch {
namespace {

using ::testing::HasSubstr;

TEST(ChildClass, DropsTheIndex) {
  EXPECT_EQ(ChildClass("shard-1"), "shard");
  EXPECT_EQ(ChildClass("worker-12"), "worker");
  EXPECT_EQ(ChildClass("evaluator"), "evaluator");
  EXPECT_EQ(ChildClass("coordinator"), "coordinator");
  EXPECT_EQ(ChildClass("odd-name"), "odd-name");
  EXPECT_EQ(ChildClass("trailing-"), "trailing-");
}

// A child that burns CPU is charged for it when reaped, under its class, restarts summed.
TEST(ProcessGroup, AReapedChildsCpuAndContextSwitchesAreChargedToItsClass) {
  ProcessGroup group;
  const std::string log = ::testing::TempDir() + "/process_group_test.log";
  for (const char* name : {"spin-0", "spin-1"}) {
    ASSERT_TRUE(
        group
            .Spawn({.name = name,
                    .argv = {"/bin/sh", "-c",
                             "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 0.05"},
                    .log_path = log})
            .ok());
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  int reaped = 0;
  while (reaped < 2 && absl::Now() < deadline) {
    for (const Exit& exit : group.Reap()) {
      ++reaped;
      EXPECT_EQ(exit.usage.processes, 1);
      EXPECT_GT(exit.usage.cpu_seconds, 0) << exit.name;
      EXPECT_GT(exit.usage.voluntary_switches, 0) << exit.name << ": its sleep is one";
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(reaped, 2);
  ASSERT_TRUE(group.UsageByClass().contains("spin"));
  const ResourceUse& spin = group.UsageByClass().at("spin");
  EXPECT_EQ(spin.processes, 2);
  EXPECT_GT(spin.cpu_seconds, 0);
}

TEST(DescribeUsage, SaysEachClassTheTotalAndThePerExampleCost) {
  std::map<std::string, ResourceUse> by_class;
  by_class["coordinator"] = {
      .cpu_seconds = 1.0, .voluntary_switches = 10, .involuntary_switches = 1, .processes = 1};
  by_class["worker"] = {
      .cpu_seconds = 3.0, .voluntary_switches = 30, .involuntary_switches = 3, .processes = 4};
  const std::string line = DescribeUsage(by_class, 2'000'000);
  EXPECT_EQ(line,
            "cpu: coordinator 1.0 s, worker 3.0 s (4 processes); 4.0 CPU-s, 2.0 us/example; "
            "context switches 40 voluntary, 4 involuntary");
  EXPECT_THAT(DescribeUsage(by_class, 0), ::testing::Not(HasSubstr("us/example")));
}

}  // namespace
}  // namespace syncopate::launch
