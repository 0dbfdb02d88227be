#include "libs/worker/slowdown_schedule.h"

#include "gtest/gtest.h"

namespace syncopate::worker {
namespace {

TEST(SlowdownSchedule, IsPiecewiseConstant) {
  auto schedule = SlowdownSchedule::Parse("0s:1,20s:4,60s:1");
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  EXPECT_EQ(schedule->At(absl::Seconds(0)), 1);
  EXPECT_EQ(schedule->At(absl::Seconds(19.9)), 1);
  EXPECT_EQ(schedule->At(absl::Seconds(20)), 4);
  EXPECT_EQ(schedule->At(absl::Seconds(59)), 4);
  EXPECT_EQ(schedule->At(absl::Seconds(600)), 1);
}

TEST(SlowdownSchedule, ConstantFactor) { EXPECT_EQ(SlowdownSchedule(2.5).At(absl::Hours(1)), 2.5); }

TEST(SlowdownSchedule, RejectsBadEntriesByName) {
  for (const char* bad : {"", "1s:2", "0s:1,0s:2", "0s:1,5s:0.5", "0s:x", "soon:2", "0s"}) {
    auto schedule = SlowdownSchedule::Parse(bad);
    EXPECT_EQ(schedule.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_NE(SlowdownSchedule::Parse("0s:1,5s:0.5").status().message().find("5s:0.5"),
            std::string::npos);
}

}  // namespace
}  // namespace syncopate::worker
