// The straggler benchmark's report on canned runs (no clusters): flags, time to target, the
// censoring rule, every goal's verdict, and the files it writes.
#include "bench/straggler_report.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace syncopate::bench {
namespace {

using stats::Verdict;
using ::testing::HasSubstr;
using ::testing::Not;

RunResult Finished(const std::string& scenario, const std::string& policy, uint64_t seed,
                   double wall, double final_quality) {
  RunResult r;
  r.scenario = scenario;
  r.policy = policy;
  r.seed = seed;
  r.finished = true;
  r.wall_seconds = wall;
  r.examples = 180000;
  r.final_quality = final_quality;
  r.final_loss = 0.4;
  return r;
}

// A run whose accuracy climbs linearly from 0.70 at 2 s to `final_quality` at `wall` seconds,
// evaluated every 2 s, so it crosses `target` at a time the test can compute.
RunResult LinearRun(const std::string& scenario, const std::string& policy, uint64_t seed,
                    double wall, double final_quality) {
  RunResult r = Finished(scenario, policy, seed, wall, final_quality);
  for (double t = 2; t <= wall + 1e-9; t += 2) {
    r.curve.push_back({t, static_cast<int64_t>(t / wall * 180000),
                       0.70 + (final_quality - 0.70) * (t - 2) / (wall - 2)});
  }
  return r;
}

// A run that reaches `target` at exactly `seconds`: accuracy 0.80 at 2 s, 0.85 at `seconds`, then
// `final_quality` at `seconds` + 10.
RunResult CrossingRun(const std::string& scenario, const std::string& policy, uint64_t seed,
                      double seconds, double final_quality) {
  RunResult r = Finished(scenario, policy, seed, seconds + 10, final_quality);
  r.curve = {{2, 1000, 0.80}, {seconds, 90000, 0.85}, {seconds + 10, 180000, final_quality}};
  return r;
}

const GoalVerdict* Find(const std::vector<GoalVerdict>& verdicts, const std::string& scenario,
                        const std::string& goal_prefix) {
  for (const GoalVerdict& g : verdicts) {
    if (g.scenario == scenario && g.goal.rfind(goal_prefix, 0) == 0) return &g;
  }
  return nullptr;
}

TEST(ParseSelection, AcceptsKnownScenariosAndPoliciesAndNumbersSeeds) {
  absl::StatusOr<Selection> s = ParseSelection("b,ctr", "sync,gba", 3);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->scenarios.size(), 2u);
  EXPECT_EQ(s->scenarios[0].id, "b");
  EXPECT_TRUE(s->scenarios[1].ctr);
  EXPECT_EQ(s->policies, (std::vector<std::string>{"sync", "gba"}));
  EXPECT_EQ(s->seeds, (std::vector<uint64_t>{1, 2, 3}));  // seed 1 is the default job's
}

TEST(ParseSelection, RefusesUnknownNamesEmptyListsAndNoSeeds) {
  EXPECT_THAT(ParseSelection("b,e", "sync", 1).status().message(), HasSubstr("'e'"));
  EXPECT_THAT(ParseSelection("b", "sync,fast", 1).status().message(), HasSubstr("fast"));
  EXPECT_FALSE(ParseSelection("", "sync", 1).ok());
  EXPECT_FALSE(ParseSelection("a", "", 1).ok());
  EXPECT_THAT(ParseSelection("a", "sync", 0).status().message(), HasSubstr("--seeds"));
}

TEST(TimeToTarget, InterpolatesBetweenTheEvaluationsAroundTheCrossing) {
  // 0.84 at 4 s, 0.88 at 6 s: 0.85 is a quarter of the way, at 4.5 s.
  const std::vector<EvalPoint> curve = {{2, 0, 0.80}, {4, 0, 0.84}, {6, 0, 0.88}, {8, 0, 0.83}};
  EXPECT_DOUBLE_EQ(*TimeToTarget(curve, 0.85), 4.5);
  EXPECT_DOUBLE_EQ(*TimeToTarget(curve, 0.88), 6);      // exactly at an evaluation
  EXPECT_DOUBLE_EQ(*TimeToTarget(curve, 0.70), 2);      // already there at the first
  EXPECT_FALSE(TimeToTarget(curve, 0.89).has_value());  // never
  EXPECT_FALSE(TimeToTarget({}, 0.5).has_value());
}

TEST(Summarize, CountsCensoredRunsAndGivesNoTimeIntervalThen) {
  std::vector<RunResult> runs = {CrossingRun("a", "sync", 1, 30, 0.86),
                                 CrossingRun("a", "sync", 2, 32, 0.87),
                                 LinearRun("a", "sync", 3, 40, 0.84)};  // never reaches 85%
  RunResult failed = CrossingRun("a", "sync", 4, 30, 0.86);
  failed.finished = false;
  runs.push_back(failed);
  const std::vector<CellSummary> cells = Summarize(runs, ReportOptions{});
  ASSERT_EQ(cells.size(), 1u);
  EXPECT_EQ(cells[0].runs, 4);
  EXPECT_EQ(cells[0].finished, 3);
  EXPECT_EQ(cells[0].time_to_target, (std::vector<double>{30, 32}));
  EXPECT_FALSE(cells[0].time_interval.has_value());  // 2 of 3 reached: no honest interval
  ASSERT_TRUE(cells[0].quality_interval.has_value());
  EXPECT_NEAR(cells[0].mean_quality, (0.86 + 0.87 + 0.84) / 3, 1e-12);
}

// Scenario b as the issue wants it: auto as fast as gba, twice as fast as sync, sync-quality.
std::vector<RunResult> GoodScenarioB() {
  std::vector<RunResult> runs;
  const double sync_t[] = {40, 42, 38}, gba_t[] = {20, 20.2, 19.8}, auto_t[] = {18, 18.2, 17.8};
  const double sync_q[] = {0.8620, 0.8621, 0.8619}, gba_q[] = {0.836, 0.838, 0.834},
               auto_q[] = {0.8625, 0.8626, 0.8624};
  for (int s = 0; s < 3; ++s) {
    runs.push_back(CrossingRun("b", "sync", s + 1, sync_t[s], sync_q[s]));
    runs.push_back(LinearRun("b", "async", s + 1, 20, 0.80));  // never reaches 85%
    runs.push_back(CrossingRun("b", "gba", s + 1, gba_t[s], gba_q[s]));
    runs.push_back(CrossingRun("b", "auto", s + 1, auto_t[s], auto_q[s]));
  }
  return runs;
}

TEST(Verdicts, ReadEachGoalFromIntervalsOverSeeds) {
  const std::vector<CellSummary> cells = Summarize(GoodScenarioB(), ReportOptions{});
  const std::vector<GoalVerdict> verdicts = Verdicts(cells, ReportOptions{});

  // auto/sync ≈ 0.45, auto/gba ≈ 0.90 ± 0.03, async never reached 85%: met against each.
  const GoalVerdict* best = Find(verdicts, "b", "auto's time to target <= 1.05x");
  ASSERT_NE(best, nullptr);
  EXPECT_EQ(best->verdict, Verdict::kMet) << best->evidence;
  EXPECT_THAT(best->evidence, HasSubstr("auto/async: only auto reached the target"));

  const GoalVerdict* straggler = Find(verdicts, "b", "under one 4x straggler");
  ASSERT_NE(straggler, nullptr);
  EXPECT_EQ(straggler->verdict, Verdict::kMet) << straggler->evidence;

  // gba 2.6 points below sync with ±0.3 noise: the whole interval is below −0.3.
  const GoalVerdict* gba = Find(verdicts, "b", "gba's accuracy within 0.3 points");
  ASSERT_NE(gba, nullptr);
  EXPECT_EQ(gba->verdict, Verdict::kNotMet) << gba->evidence;
  const GoalVerdict* auto_quality = Find(verdicts, "b", "auto's accuracy within 0.3 points");
  ASSERT_NE(auto_quality, nullptr);
  EXPECT_EQ(auto_quality->verdict, Verdict::kMet) << auto_quality->evidence;
}

TEST(Verdicts, AutoSlowerThanAFixedPolicyIsNotMet) {
  std::vector<RunResult> runs;
  for (int s = 0; s < 3; ++s) {
    runs.push_back(CrossingRun("a", "sync", s + 1, 20 + 0.1 * s, 0.86));
    runs.push_back(CrossingRun("a", "auto", s + 1, 30 + 0.1 * s, 0.86));  // 1.5x sync's
  }
  const std::vector<GoalVerdict> verdicts =
      Verdicts(Summarize(runs, ReportOptions{}), ReportOptions{});
  const GoalVerdict* best = Find(verdicts, "a", "auto's time to target");
  ASSERT_NE(best, nullptr);
  EXPECT_EQ(best->verdict, Verdict::kNotMet) << best->evidence;
  EXPECT_EQ(Find(verdicts, "a", "under one 4x straggler"), nullptr);  // scenario b only
}

TEST(Verdicts, CensoredMixesAndSingleRunsAreUndecided) {
  std::vector<RunResult> runs;
  runs.reserve(4);
  for (int s = 0; s < 3; ++s) runs.push_back(CrossingRun("b", "sync", s + 1, 40 + s, 0.86));
  runs.push_back(CrossingRun("b", "auto", 1, 18, 0.86));
  runs.push_back(CrossingRun("b", "auto", 2, 18.5, 0.86));
  runs.push_back(LinearRun("b", "auto", 3, 30, 0.84));  // never reaches 85%
  std::vector<GoalVerdict> verdicts = Verdicts(Summarize(runs, ReportOptions{}), ReportOptions{});
  const GoalVerdict* straggler = Find(verdicts, "b", "under one 4x straggler");
  ASSERT_NE(straggler, nullptr);
  EXPECT_EQ(straggler->verdict, Verdict::kUndecided);
  EXPECT_THAT(straggler->evidence, HasSubstr("reached 2/3 vs 3/3"));

  // One seed each: never a verdict, however clear the single numbers look.
  const std::vector<RunResult> one = {CrossingRun("b", "sync", 1, 40, 0.86),
                                      CrossingRun("b", "auto", 1, 10, 0.86)};
  verdicts = Verdicts(Summarize(one, ReportOptions{}), ReportOptions{});
  for (const GoalVerdict& g : verdicts) {
    EXPECT_EQ(g.verdict, Verdict::kUndecided) << g.goal << ": " << g.evidence;
  }
}

TEST(Verdicts, CtrUsesRelativeAucAndIssueFourGoals) {
  ReportOptions options;
  options.bayes_auc = 0.80;
  options.target_auc = 0.79;
  std::vector<RunResult> runs;
  const double sync_auc[] = {0.7950, 0.7952, 0.7948}, gba_auc[] = {0.7951, 0.7953, 0.7949},
               async_auc[] = {0.7800, 0.7810, 0.7790};
  for (int s = 0; s < 3; ++s) {
    RunResult sync = CrossingRun("ctr", "sync", s + 1, 50 + s, sync_auc[s]);
    RunResult gba = CrossingRun("ctr", "gba", s + 1, 30 + s, gba_auc[s]);
    RunResult async = CrossingRun("ctr", "async", s + 1, 30 + s, async_auc[s]);
    for (RunResult* r : {&sync, &gba, &async}) {
      r->curve = {{2, 0, 0.70}, {r->wall_seconds, 0, r->final_quality}};
    }
    runs.insert(runs.end(), {sync, gba, async});
  }
  const std::vector<GoalVerdict> verdicts = Verdicts(Summarize(runs, options), options);
  const GoalVerdict* relative = Find(verdicts, "ctr", "gba's AUC within 0.1% (relative)");
  ASSERT_NE(relative, nullptr);
  EXPECT_EQ(relative->verdict, Verdict::kMet) << relative->evidence;
  const GoalVerdict* vs_async = Find(verdicts, "ctr", "gba's AUC >= naive async's");
  ASSERT_NE(vs_async, nullptr);
  EXPECT_EQ(vs_async->verdict, Verdict::kMet) << vs_async->evidence;  // +0.015 ± 0.003
  const GoalVerdict* bayes = Find(verdicts, "ctr", "sync's AUC within 0.01 of the Bayes");
  ASSERT_NE(bayes, nullptr);
  EXPECT_EQ(bayes->verdict, Verdict::kMet) << bayes->evidence;  // 0.795 vs ≥ 0.79
}

TEST(QualityBand, AveragesRunsOnTheGridAndHoldsTheFinalValue) {
  RunResult a = Finished("a", "sync", 1, 4, 0.8);
  a.curve = {{2, 0, 0.6}, {4, 0, 0.8}};
  RunResult b = Finished("a", "sync", 2, 6, 0.9);
  b.curve = {{2, 0, 0.7}, {6, 0, 0.9}};
  const std::vector<BandPoint> band = QualityBand({&a, &b}, {0, 1, 2, 3, 6});
  ASSERT_EQ(band.size(), 3u);  // 0 s and 1 s come before the first evaluation
  EXPECT_DOUBLE_EQ(band[0].mean, 0.65);
  EXPECT_DOUBLE_EQ(band[1].mean, (0.7 + 0.75) / 2);  // a at 3 s: 0.7; b: 0.75
  EXPECT_DOUBLE_EQ(band[2].mean, (0.8 + 0.9) / 2);   // a ended at 4 s and holds 0.8
  EXPECT_LT(band[2].low, band[2].mean);
  EXPECT_GT(band[2].high, band[2].mean);
}

TEST(Reports, MarkdownJsonAndSvgCarryTheVerdictsAndParse) {
  const absl::StatusOr<Selection> selection = ParseSelection("b", "sync,async,gba,auto", 3);
  ASSERT_TRUE(selection.ok());
  const std::vector<RunResult> runs = GoodScenarioB();
  ReportOptions options;
  options.machine = "Some CPU @ 2.5GHz, 2 cores, kernels isa v4";
  const std::vector<CellSummary> cells = Summarize(runs, options);
  const std::vector<GoalVerdict> verdicts = Verdicts(cells, options);

  const std::string md = ResultsMarkdown(*selection, cells, verdicts, options);
  EXPECT_THAT(md, HasSubstr("Machine: Some CPU @ 2.5GHz, 2 cores, kernels isa v4."));
  EXPECT_THAT(md, HasSubstr("3 job seeds"));
  EXPECT_THAT(md, HasSubstr("| b | async | 3/3 | 80.00% [80.00, 80.00] | not reached | 0/3 |"));
  EXPECT_THAT(md, HasSubstr("| under one 4x straggler, auto's time to target <= 0.6x sync's | b "
                            "| **met** |"));
  EXPECT_THAT(md, HasSubstr("**not met**"));

  const std::string json = ResultsJson(*selection, runs, cells, verdicts, options);
  google::protobuf::Struct parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok()) << json;
  EXPECT_EQ(parsed.fields().at("runs").list_value().values_size(), 12);
  EXPECT_EQ(parsed.fields().at("config").struct_value().fields().at("machine").string_value(),
            options.machine);
  EXPECT_EQ(parsed.fields().at("cells").list_value().values_size(), 4);
  EXPECT_EQ(parsed.fields().at("verdicts").list_value().values_size(),
            static_cast<int>(verdicts.size()));
  EXPECT_THAT(json, Not(HasSubstr("nan")));
  EXPECT_THAT(json, Not(HasSubstr("inf")));

  const std::string svg = AccuracySvg(*selection, runs, options);
  EXPECT_THAT(svg, HasSubstr("(b) one worker 4x slower"));
  EXPECT_THAT(svg, HasSubstr("target 85.00%"));
  EXPECT_THAT(svg, HasSubstr("<polygon"));  // the bands
  EXPECT_THAT(svg, HasSubstr("</svg>"));
}

}  // namespace
}  // namespace syncopate::bench
