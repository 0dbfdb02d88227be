// The soak's verdicts (bench/soak_report.h) on canned timelines.
#include "bench/soak_report.h"

#include <algorithm>
#include <functional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncopate::bench {
namespace {

constexpr int64_t kMiB = int64_t{1024} * 1024;

// One sample a second for `seconds`, with `rss(t)` MiB for the coordinator and a shard whose
// version advances every second.
std::vector<SoakSample> Timeline(int seconds, const std::function<double(int)>& rss) {
  std::vector<SoakSample> samples;
  for (int t = 0; t <= seconds; ++t) {
    SoakSample s;
    s.at = absl::Seconds(t);
    s.rss["coordinator"] = static_cast<int64_t>(rss(t) * kMiB);
    s.versions["shard-0"] = t;
    s.rejections[{"shard-0", "not_member"}] = 0;
    samples.push_back(s);
  }
  return samples;
}

SoakCriteria Criteria() {
  SoakCriteria c;
  c.warmup = absl::Seconds(20);
  c.rss_window = absl::Seconds(10);
  return c;
}

SoakRun Running() {
  SoakRun run;
  run.job_running_at_end = true;
  return run;
}

TEST(SoakReport, RssGrowthComparesWindowMeansAfterWarmUp) {
  // Warm-up growth (50 -> 100 MiB over the first 20 s) is ignored. Baseline: t = 20..29, 100 MiB;
  // final: t = 50..60, 104 MiB: growth 4%.
  auto samples = Timeline(60, [](int t) { return t < 20 ? 50 + 2.5 * t : (t < 50 ? 100 : 104); });
  std::vector<RssGrowth> growth = MeasureRssGrowth(samples, Criteria());
  ASSERT_EQ(growth.size(), 1u);
  EXPECT_EQ(growth[0].process, "coordinator");
  EXPECT_DOUBLE_EQ(growth[0].baseline_mib, 100);
  EXPECT_DOUBLE_EQ(growth[0].final_mib, 104);
  EXPECT_NEAR(growth[0].growth, 0.04, 1e-12);
  EXPECT_DOUBLE_EQ(growth[0].peak_mib, 104);
  EXPECT_TRUE(Judge(samples, Running(), Criteria()).failures.empty());
}

TEST(SoakReport, FailsOnFivePercentGrowth) {
  auto samples = Timeline(60, [](int t) { return t < 50 ? 100 : 105; });
  SoakVerdict verdict = Judge(samples, Running(), Criteria());
  ASSERT_EQ(verdict.failures.size(), 1u);
  EXPECT_THAT(verdict.failures[0], testing::HasSubstr("coordinator: RSS grew 5.0%"));
}

TEST(SoakReport, RunShorterThanWarmUpHasNoGrowthAndFails) {
  auto samples = Timeline(15, [](int) { return 100; });
  SoakVerdict verdict = Judge(samples, Running(), Criteria());
  EXPECT_EQ(verdict.rss[0].samples, 0);
  EXPECT_THAT(verdict.failures, testing::Contains(testing::HasSubstr("no RSS samples")));
}

TEST(SoakReport, StallIsTheLongestTimeBetweenVersionAdvances) {
  auto samples = Timeline(60, [](int) { return 100; });
  // The job starts at t = 5 (version 0 until then: waiting for workers, not a stall), and the
  // version stands still from t = 30 to t = 45: 15 s between the advances at 30 and 45.
  for (SoakSample& s : samples) {
    const int t = static_cast<int>(absl::ToInt64Seconds(s.at));
    s.versions["shard-0"] = t < 5 ? 0 : (t <= 30 ? t : (t < 45 ? 30 : t));
  }
  std::vector<Stall> stalls = MeasureStalls(samples);
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_EQ(stalls[0].first_update, absl::Seconds(5));
  EXPECT_EQ(stalls[0].longest, absl::Seconds(15));
  EXPECT_EQ(stalls[0].ends_at, absl::Seconds(45));
  EXPECT_TRUE(Judge(samples, Running(), Criteria()).failures.empty());
  // A failed scrape is no progress: the gap runs on across it (30 -> 51 with 45..50 missing).
  for (SoakSample& s : samples) {
    if (s.at >= absl::Seconds(45) && s.at <= absl::Seconds(50)) s.versions.clear();
  }
  EXPECT_EQ(MeasureStalls(samples)[0].longest, absl::Seconds(21));
  EXPECT_THAT(Judge(samples, Running(), Criteria()).failures,
              testing::ElementsAre(testing::HasSubstr("shard-0: no update for 21.0 s")));
}

TEST(SoakReport, StallRunsToTheEndAndNeverStartingFails) {
  auto samples = Timeline(60, [](int) { return 100; });
  for (SoakSample& s : samples) s.versions["shard-0"] = std::min(absl::ToInt64Seconds(s.at), 35L);
  EXPECT_EQ(MeasureStalls(samples)[0].longest, absl::Seconds(25));  // 35 -> the end at 60
  for (SoakSample& s : samples) s.versions["shard-0"] = 0;
  SoakVerdict verdict = Judge(samples, Running(), Criteria());
  EXPECT_THAT(verdict.failures, testing::ElementsAre(testing::HasSubstr("never advanced")));
}

TEST(SoakReport, RejectionsNearAKillWithAKillReasonAreExplained) {
  auto samples = Timeline(60, [](int) { return 100; });
  // not_member: +2 at t = 11 (a kill at t = 10), +1 at t = 40 (no kill within 20 s before);
  // wrong_shape: +1 at t = 12, never explained by a kill.
  for (SoakSample& s : samples) {
    const int t = static_cast<int>(absl::ToInt64Seconds(s.at));
    s.rejections[{"shard-0", "not_member"}] = (t >= 11 ? 2 : 0) + (t >= 40 ? 1 : 0);
    s.rejections[{"shard-0", "wrong_shape"}] = t >= 12 ? 1 : 0;
  }
  SoakRun run = Running();
  run.kills = {absl::Seconds(10)};
  RejectionTally tally = AttributeRejections(samples, run.kills, Criteria());
  EXPECT_EQ((tally.explained[{"shard-0", "not_member"}]), 2);
  EXPECT_EQ((tally.unexplained[{"shard-0", "not_member"}]), 1);
  EXPECT_EQ((tally.unexplained[{"shard-0", "wrong_shape"}]), 1);
  EXPECT_EQ(tally.total_unexplained(), 2);
  EXPECT_EQ(Judge(samples, run, Criteria()).failures.size(), 2u);
}

TEST(SoakReport, RejectionsBeforeTheFirstSampleAreUnexplained) {
  auto samples = Timeline(60, [](int) { return 100; });
  for (SoakSample& s : samples) s.rejections[{"shard-0", "no_hello"}] = 3;
  RejectionTally tally = AttributeRejections(samples, {}, Criteria());
  EXPECT_EQ((tally.unexplained[{"shard-0", "no_hello"}]), 3);
}

TEST(SoakReport, ErrorsExitsAndAStoppedJobFailAndTheSummarySaysWhy) {
  auto samples = Timeline(60, [](int) { return 100; });
  SoakRun run;
  run.log_errors = {{"shard-1", 2}, {"worker-3", 0}};
  run.first_errors = {"shard-1: E20261126 boom"};
  run.unexpected_exits = {"worker-5 exited with code 1"};
  SoakVerdict verdict = Judge(samples, run, Criteria());
  EXPECT_THAT(verdict.failures,
              testing::ElementsAre(testing::HasSubstr("shard-1: 2 ERROR lines"),
                                   testing::HasSubstr("worker-5 exited with code 1"),
                                   testing::HasSubstr("not running")));
  const std::string summary = SoakSummary(verdict, run, Criteria());
  EXPECT_THAT(summary, testing::HasSubstr("| ERROR/FATAL log lines | 2 in 2 logs | 0 | FAIL |"));
  EXPECT_THAT(summary, testing::HasSubstr("shard-1: E20261126 boom"));
  EXPECT_THAT(summary, testing::HasSubstr("soak: FAILED"));
}

}  // namespace
}  // namespace syncopate::bench
