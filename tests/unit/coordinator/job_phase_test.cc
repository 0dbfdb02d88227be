#include "libs/coordinator/job_phase.h"

#include "gtest/gtest.h"

namespace syncopate::coordinator {
namespace {

TEST(JobPhase, DrainingShowsAsFinishingOutside) {
  EXPECT_EQ(ToJobState(JobPhase::kWaiting), v1::JOB_WAITING);
  EXPECT_EQ(ToJobState(JobPhase::kRunning), v1::JOB_RUNNING);
  EXPECT_EQ(ToJobState(JobPhase::kFinishing), v1::JOB_FINISHING);
  EXPECT_EQ(ToJobState(JobPhase::kDraining), v1::JOB_FINISHING);
  EXPECT_EQ(ToJobState(JobPhase::kDone), v1::JOB_DONE);
}

TEST(JobPhase, UnderwayFromRunningUntilDone) {
  EXPECT_FALSE(IsUnderway(JobPhase::kWaiting));
  EXPECT_TRUE(IsUnderway(JobPhase::kRunning));
  EXPECT_TRUE(IsUnderway(JobPhase::kFinishing));
  EXPECT_TRUE(IsUnderway(JobPhase::kDraining));
  EXPECT_FALSE(IsUnderway(JobPhase::kDone));
  EXPECT_EQ(JobPhaseName(JobPhase::kDraining), "draining");
}

}  // namespace
}  // namespace syncopate::coordinator
