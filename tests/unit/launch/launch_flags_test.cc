#include "libs/launch/launch_flags.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncopate::launch {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

TEST(LaunchFlags, SlowdownsAreFactorsOfAtLeastOneForAtMostEveryWorker) {
  EXPECT_THAT(*ParseSlowdowns("", 4), IsEmpty());
  EXPECT_THAT(*ParseSlowdowns("1,1,1,4", 4), ElementsAre(1, 1, 1, 4));
  EXPECT_THAT(ParseSlowdowns("1,0.5", 4).status().message(),
              HasSubstr("--slowdowns: '0.5' is not a factor >= 1"));
  EXPECT_THAT(ParseSlowdowns("1,x", 4).status().message(), HasSubstr("'x'"));
  EXPECT_THAT(ParseSlowdowns("1,1,1", 2).status().message(),
              HasSubstr("lists 3 factors for 2 workers"));
}

TEST(LaunchFlags, SchedulesNameAWorkerAndParse) {
  EXPECT_THAT(*ParseSlowdownSchedules("", 4), IsEmpty());
  EXPECT_THAT(*ParseSlowdownSchedules("3@0s:1,20s:4,60s:1;1@0s:2", 4),
              ElementsAre(Pair(1, "0s:2"), Pair(3, "0s:1,20s:4,60s:1")));
  EXPECT_THAT(ParseSlowdownSchedules("4@0s:2", 4).status().message(), HasSubstr("INDEX in [0, 4)"));
  EXPECT_THAT(ParseSlowdownSchedules("1@5s:2", 4).status().message(),
              HasSubstr("--slowdown_schedule: "));
}

TEST(LaunchFlags, AFreeLoopbackPortIsAPort) {
  absl::StatusOr<int> port = FreeLoopbackPort();
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_GT(*port, 0);
  EXPECT_LT(*port, 65536);
}

}  // namespace
}  // namespace syncopate::launch
