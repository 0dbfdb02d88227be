#include "libs/report/run_report.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace syncopate::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::ClusterStatus FinishedRun() {
  v1::ClusterStatus status;
  status.set_job_id("a \"quoted\"\njob");  // escaping is the JSON printer's job
  status.set_state(v1::JOB_DONE);
  status.set_job_mode(v1::MODE_GBA);
  status.set_elapsed_seconds(10);
  status.set_examples(50000);
  status.set_epoch(0.83);
  status.set_global_batch(256);
  for (int i = 0; i < 2; ++i) {
    v1::WorkerStatus* w = status.add_workers();
    w->set_worker_id(i + 1);
    w->set_name(absl::StrCat("worker-", i));
    w->set_role(v1::ROLE_WORKER);
    w->set_alive(i == 0);
    w->set_examples(25000);
    w->set_steps(200);
    w->set_median_compute_seconds(0.01 * (i + 1));
  }
  v1::WorkerStatus* evaluator = status.add_workers();
  evaluator->set_name("evaluator");
  evaluator->set_role(v1::ROLE_EVALUATOR);
  v1::ShardStatus* shard = status.add_shards();
  shard->set_shard_id(0);
  shard->set_version(195);
  shard->set_mode(v1::MODE_GBA);
  shard->mutable_gradients()->set_applied(380);
  shard->mutable_gradients()->set_decayed(10);
  shard->mutable_gradients()->set_dropped(2);
  shard->mutable_gradients()->set_rejected(1);
  shard->mutable_gradients()->set_staleness_sum(195);
  v1::EvalStatus* eval = status.add_eval_history();
  eval->set_accuracy(0.85);
  eval->set_loss(0.4);
  eval->set_auc(0.98);
  eval->set_final(true);
  eval->add_shard_versions(195);
  *status.mutable_last_eval() = *eval;
  return status;
}

TEST(RunReport, CarriesTheRunsNumbers) {
  const v1::RunReport report = BuildRunReport(FinishedRun(), 12.5, {1.0, 4.0});
  EXPECT_EQ(report.mode(), "gba");
  EXPECT_EQ(report.state(), v1::JOB_DONE);
  EXPECT_DOUBLE_EQ(report.final_accuracy(), 0.85);
  EXPECT_DOUBLE_EQ(report.examples_per_second(), 5000);
  ASSERT_EQ(report.workers_size(), 2) << "training workers only";
  EXPECT_DOUBLE_EQ(report.workers(1).slowdown(), 4.0);
  EXPECT_FALSE(report.workers(1).alive_at_end());
  EXPECT_EQ(report.shards(0).mode(), "gba");
  // The shard's counters as the coordinator reported them (one GradientCounters message).
  EXPECT_EQ(report.shards(0).gradients().applied(), 380);
  EXPECT_EQ(report.shards(0).gradients().decayed(), 10);
  EXPECT_EQ(report.shards(0).gradients().dropped(), 2);
  EXPECT_EQ(report.shards(0).gradients().rejected(), 1);
  EXPECT_EQ(report.eval_history_size(), 1);
  // Workers without a slowdown entry ran at 1.
  EXPECT_DOUBLE_EQ(BuildRunReport(FinishedRun(), 1, {}).workers(1).slowdown(), 1.0);
}

// Bytes per example: each worker's over its own examples, the shard's over the cluster's, the
// headline over the training workers only (the evaluator's pulls are not training's cost).
TEST(RunReport, BytesPerExampleAreTheWiresBytesOverTheExamples) {
  v1::ClusterStatus status = FinishedRun();
  for (int i = 0; i < 2; ++i) {
    v1::WireBytes* wire = status.mutable_workers(i)->mutable_wire();
    wire->set_sent_dense(25000 * 100);  // 100 B/example each way, plus 4 B/example of headers
    wire->set_received_dense(25000 * 100);
    wire->set_sent_header(25000 * 2);
    wire->set_received_header(25000 * 2);
  }
  status.mutable_workers(2)->mutable_wire()->set_received_dense(1 << 30);  // the evaluator
  v1::WireBytes* shard = status.mutable_shards(0)->mutable_wire();
  shard->set_received_dense(50000 * 100);
  shard->set_sent_dense(50000 * 150);
  const v1::RunReport report = BuildRunReport(status, 12.5, {});
  EXPECT_DOUBLE_EQ(report.workers(0).wire_bytes_per_example(), 204);
  EXPECT_DOUBLE_EQ(report.wire_bytes_per_example(), 204);
  EXPECT_DOUBLE_EQ(report.shards(0).wire_bytes_per_example(), 250);
  EXPECT_EQ(report.workers(1).wire().sent_dense(), 2500000);
  EXPECT_EQ(WireBytesCell(report.workers(0).wire(), 25000),
            "204 (sent 102 / received 102; 98.0% dense)");
  EXPECT_EQ(WireBytesCell(v1::WireBytes(), 0), "n/a");
  EXPECT_THAT(RunReportMarkdown(report), HasSubstr("| wire (workers) | 204 bytes/example |"));
  EXPECT_THAT(RunReportHtml(report),
              HasSubstr("<td>204 (sent 102 / received 102; 98.0% dense)</td>"));
}

// report.json is the proto's JSON mapping: it parses back to the same report, keeps the proto's
// field names, and prints every field (zeros too).
TEST(RunReport, MeanStalenessIsOverTheAggregatedPushes) {
  // 195 versions of staleness over 380 applied + 10 decayed pushes (dropped and rejected ones
  // were never aggregated).
  const v1::RunReport report = BuildRunReport(FinishedRun(), 12.5, {1.0, 4.0});
  EXPECT_DOUBLE_EQ(MeanStaleness(report.shards(0).gradients()), 0.5);
  EXPECT_THAT(RunReportMarkdown(report), HasSubstr("| 0 | 195 | gba | 0.50 |"));
  EXPECT_THAT(RunReportHtml(report), HasSubstr("<td>0.50</td>"));
  EXPECT_DOUBLE_EQ(MeanStaleness(v1::GradientCounters()), 0.0);
}

TEST(RunReport, JsonRoundTripsWithTheProtosFieldNames) {
  const v1::RunReport report = BuildRunReport(FinishedRun(), 12.5, {1.0, 4.0});
  absl::StatusOr<std::string> json = RunReportJson(report);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"final_accuracy\": 0.85"));
  EXPECT_THAT(*json, HasSubstr("\"state\": \"JOB_DONE\""));
  EXPECT_THAT(*json, HasSubstr("\"examples\": \"50000\"")) << "int64 is a JSON string";
  EXPECT_THAT(*json, HasSubstr("\"alive_at_end\": false"));
  EXPECT_THAT(*json, HasSubstr("\"gradients\": {"));
  EXPECT_THAT(*json, HasSubstr("\"decayed\": \"10\""));
  EXPECT_THAT(*json, HasSubstr("\\\"quoted\\\"\\n"));
  v1::RunReport parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(*json, &parsed).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(parsed, report));
}

TEST(RunReport, WithoutAnEvaluationTheFinalMetricsAreAbsent) {
  v1::ClusterStatus status = FinishedRun();
  status.clear_last_eval();
  status.clear_eval_history();
  const v1::RunReport report = BuildRunReport(status, 1, {});
  EXPECT_FALSE(report.has_final_accuracy());
  absl::StatusOr<std::string> json = RunReportJson(report);
  ASSERT_TRUE(json.ok());
  EXPECT_THAT(*json, Not(HasSubstr("final_accuracy")));
  EXPECT_THAT(RunReportMarkdown(report), HasSubstr("| final test accuracy | n/a |"));
}

TEST(RunReport, WritesJsonAndMarkdown) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/run-report-", getpid());
  std::filesystem::create_directories(dir);
  const v1::RunReport report = BuildRunReport(FinishedRun(), 12.5, {});
  ASSERT_TRUE(WriteRunReport(dir, report).ok());
  std::stringstream md;
  md << std::ifstream(dir + "/report.md").rdbuf();
  EXPECT_THAT(md.str(), HasSubstr("| final test accuracy | 85.00% |"));
  EXPECT_THAT(md.str(), HasSubstr("| examples | 50000 (0.83 epochs) |"));
  EXPECT_THAT(md.str(), HasSubstr("| worker-1 | 25000 | 200 | 0.0200 |"));
  EXPECT_THAT(md.str(), HasSubstr("| 0 | 195 | gba |"));
  std::stringstream json;
  json << std::ifstream(dir + "/report.json").rdbuf();
  EXPECT_EQ(json.str(), *RunReportJson(report));
  EXPECT_FALSE(WriteRunReport(dir + "/missing/dir", report).ok());
  std::filesystem::remove_all(dir);
}

v1::ClusterStatus WithSwitchesAndStaleness() {
  v1::ClusterStatus status = FinishedRun();
  v1::ShardStatus* shard = status.mutable_shards(0);
  v1::StalenessBucket* b = shard->add_staleness();
  b->set_min_staleness(0);
  b->set_max_staleness(0);
  b->set_count(370);
  b = shard->add_staleness();
  b->set_min_staleness(1);
  b->set_max_staleness(-1);
  b->set_count(20);
  v1::ModeDecisionStatus* d = shard->add_switch_history();
  d->set_seconds(4.5);
  d->set_current(v1::MODE_SYNC);
  d->set_recommended(v1::MODE_GBA);
  d->set_reason("straggler_detected");
  d->set_explanation("worker-1 is 4.0x slower <than> the median & more");
  return status;
}

TEST(RunReport, CarriesStalenessSwitchesAndTheTimeline) {
  std::vector<v1::RunReport::Sample> timeline(3);
  for (int i = 0; i < 3; ++i) timeline[i].set_seconds(i);
  const v1::RunReport report = BuildRunReport(WithSwitchesAndStaleness(), 12.5, {}, timeline);
  ASSERT_EQ(report.shards(0).staleness_size(), 2);
  EXPECT_EQ(report.shards(0).staleness(0).count(), 370);
  ASSERT_EQ(report.shards(0).switches_size(), 1);
  EXPECT_EQ(report.shards(0).switches(0).reason(), "straggler_detected");
  ASSERT_EQ(report.timeline_size(), 3);
  EXPECT_DOUBLE_EQ(report.timeline(2).seconds(), 2);
}

// report.html stands alone: no scripts, nothing fetched (no src, no link, no url() but the
// charts' own clip paths), every text escaped; and it has every chart and the switch's reason.
TEST(RunReportHtml, IsSelfContainedAndShowsEveryChart) {
  v1::RunReport report = BuildRunReport(WithSwitchesAndStaleness(), 12.5, {1.0, 4.0});
  const std::string html = RunReportHtml(report);
  EXPECT_TRUE(absl::StartsWith(html, "<!DOCTYPE html>"));
  for (const char* banned : {"<script", "src=", "<link", "@import", "http://", "https://"}) {
    std::string rest = html;
    // The SVG namespace is a name, not a fetch.
    for (size_t at;
         (at = rest.find("xmlns=\"http://www.w3.org/2000/svg\"")) != std::string::npos;) {
      rest.erase(at, 34);
    }
    EXPECT_THAT(rest, Not(HasSubstr(banned))) << banned;
  }
  for (size_t at = html.find("url("); at != std::string::npos; at = html.find("url(", at + 1)) {
    EXPECT_EQ(html.compare(at, 5, "url(#"), 0) << "only in-page references";
  }
  for (const char* id : {"quality-vs-time", "quality-vs-samples", "loss-vs-time", "loss-vs-samples",
                         "modes", "staleness", "throughput-vs-time", "throughput-per-worker"}) {
    EXPECT_THAT(html, HasSubstr(absl::StrCat("<figure id=\"", id, "\">"))) << id;
  }
  EXPECT_THAT(html, HasSubstr("Test accuracy vs wall time"));
  EXPECT_THAT(html, HasSubstr("a &quot;quoted&quot;")) << "the job id is escaped";
  EXPECT_THAT(html, HasSubstr("4.0x slower &lt;than&gt; the median &amp; more"));
  EXPECT_THAT(html, HasSubstr(">s0 gba</text>")) << "the switch marker";
  EXPECT_THAT(html, HasSubstr("<title>0: 370</title>")) << "staleness bar";
  EXPECT_THAT(html, HasSubstr("<title>1+: 20</title>"));

  report.set_quality_metric("auc");
  EXPECT_THAT(RunReportHtml(report), HasSubstr("Test AUC vs samples"));
}

}  // namespace
}  // namespace syncopate::report
