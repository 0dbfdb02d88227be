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

namespace syncopate::launch {
namespace {

// One process per core by default: the default job's 4 workers on 2 cores are 2 processes of 2;
// per-worker slowdowns keep a process per worker; a count that does not divide is refused.
TEST(ChooseLogicalWorkers, OneProcessPerCoreUnlessAWorkerMustBeItsOwn) {
  EXPECT_EQ(*ChooseLogicalWorkers(0, 4, 2, false), 2);
  EXPECT_EQ(*ChooseLogicalWorkers(0, 4, 4, false), 1);
  EXPECT_EQ(*ChooseLogicalWorkers(0, 4, 8, false), 1);
  EXPECT_EQ(*ChooseLogicalWorkers(0, 8, 2, false), 4);
  EXPECT_EQ(*ChooseLogicalWorkers(0, 6, 4, false), 2)
      << "3 processes of 2: 3 is 6's largest divisor <= 4";
  EXPECT_EQ(*ChooseLogicalWorkers(0, 3, 2, false), 1) << "no divisor but 1 fits: a process each";
  EXPECT_EQ(*ChooseLogicalWorkers(0, 4, 1, false), 4) << "one core: one process";
  EXPECT_EQ(*ChooseLogicalWorkers(0, 1, 2, false), 1);
  EXPECT_EQ(*ChooseLogicalWorkers(0, 4, 2, true), 1) << "a straggler is one worker";
  EXPECT_EQ(*ChooseLogicalWorkers(2, 4, 8, false), 2);
  EXPECT_EQ(ChooseLogicalWorkers(3, 4, 2, false).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ChooseLogicalWorkers(2, 4, 2, true).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ChooseLogicalWorkers(-1, 4, 2, false).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace syncopate::launch
