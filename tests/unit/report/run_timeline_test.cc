#include "libs/report/run_timeline.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace syncopate::report {
namespace {

v1::ClusterStatus At(double seconds, v1::JobState state = v1::JOB_RUNNING) {
  v1::ClusterStatus status;
  status.set_state(state);
  status.set_elapsed_seconds(seconds);
  status.set_examples(static_cast<int64_t>(seconds * 100));
  for (int i = 0; i < 2; ++i) {
    v1::WorkerStatus* w = status.add_workers();
    w->set_name(absl::StrCat("worker-", i));
    w->set_role(v1::ROLE_WORKER);
    w->set_alive(true);
    w->set_examples(static_cast<int64_t>(seconds * 50));
    w->set_last_loss(0.5f);
  }
  status.add_workers()->set_role(v1::ROLE_EVALUATOR);
  return status;
}

// Polled every 0.25 s for 3 s of job time, it keeps one sample per second: 0, 1, 2, 3.
TEST(RunTimeline, KeepsOneSamplePerIntervalOfJobTime) {
  RunTimeline timeline(1.0);
  timeline.Observe(At(0, v1::JOB_WAITING));  // before the job runs: nothing to plot
  for (int i = 0; i <= 12; ++i) timeline.Observe(At(0.25 * i));
  ASSERT_EQ(timeline.samples().size(), 4u);
  EXPECT_DOUBLE_EQ(timeline.samples()[1].seconds(), 1.0);
  EXPECT_EQ(timeline.samples()[1].examples(), 100);
  ASSERT_EQ(timeline.samples()[1].workers_size(), 2) << "training workers only";
  EXPECT_EQ(timeline.samples()[1].workers(1).name(), "worker-1");
  EXPECT_EQ(timeline.samples()[1].workers(1).examples(), 50);
  EXPECT_FLOAT_EQ(timeline.samples()[1].workers(1).loss(), 0.5f);
  EXPECT_TRUE(timeline.samples()[1].workers(1).alive());
}

TEST(RunTimeline, TheFinishedJobIsKeptOnceWhateverTheInterval) {
  RunTimeline timeline(1.0);
  timeline.Observe(At(1));
  timeline.Observe(At(1.1, v1::JOB_DONE));
  timeline.Observe(At(5, v1::JOB_DONE));
  ASSERT_EQ(timeline.samples().size(), 2u);
  EXPECT_DOUBLE_EQ(timeline.samples().back().seconds(), 1.1);
}

// With room for 4 samples, the fifth halves the timeline (0, 2, 4 stay) and doubles the
// interval: the next sample is at 6, not 5.
TEST(RunTimeline, ALongRunIsThinnedEvenly) {
  RunTimeline timeline(1.0, 4);
  for (int t = 0; t <= 6; ++t) timeline.Observe(At(t));
  EXPECT_DOUBLE_EQ(timeline.interval_seconds(), 2.0);
  ASSERT_EQ(timeline.samples().size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(timeline.samples()[i].seconds(), 2.0 * i);
}

}  // namespace
}  // namespace syncopate::report
