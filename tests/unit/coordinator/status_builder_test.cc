#include "libs/coordinator/status_builder.h"

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncopate::coordinator {
namespace {

using ::testing::ElementsAre;

TEST(StatusBuilder, AssessmentFillsOnlyJudgedWorkers) {
  v1::ClusterStatus status;
  status.add_workers()->set_worker_id(1);
  status.add_workers()->set_worker_id(2);
  status.add_workers()->set_worker_id(3);
  Assessment assessment;
  WorkerAssessment judged;
  judged.worker = 1;
  judged.enough_data = true;
  judged.slowdown = 2.5;
  judged.robust_z = std::numeric_limits<double>::infinity();
  judged.straggler = true;
  judged.median_communication_seconds = 0.2;
  WorkerAssessment young;
  young.worker = 2;
  young.slowdown = 9;  // not meaningful without enough data
  young.median_communication_seconds = 0.3;
  assessment.workers = {judged, young};

  ApplyAssessment(assessment, status);
  EXPECT_DOUBLE_EQ(status.workers(0).slowdown(), 2.5);
  EXPECT_DOUBLE_EQ(status.workers(0).robust_z(), 1e9);
  EXPECT_TRUE(status.workers(0).straggler());
  EXPECT_DOUBLE_EQ(status.workers(0).median_communication_seconds(), 0.2);
  EXPECT_DOUBLE_EQ(status.workers(1).slowdown(), 0);
  EXPECT_DOUBLE_EQ(status.workers(1).median_communication_seconds(), 0.3);
  EXPECT_DOUBLE_EQ(status.workers(2).median_communication_seconds(), 0);
}

TEST(StatusBuilder, ShardRowCopiesTheReportOnlyOnceRegistered) {
  v1::ShardPartition partition;
  partition.set_shard_id(1);
  partition.set_flat_begin(10);
  partition.set_flat_end(30);
  v1::ShardStatus unregistered = ShardRow(partition, "ignored", true, nullptr);
  EXPECT_EQ(unregistered.shard_id(), 1);
  EXPECT_EQ(unregistered.flat_end(), 30);
  EXPECT_FALSE(unregistered.connected());
  EXPECT_EQ(unregistered.address(), "");

  v1::ShardReport report;
  report.set_version(7);
  report.set_mode(v1::MODE_GBA);
  report.set_updates(6);
  report.add_barrier_waiting_for(3);
  report.mutable_gradients()->set_applied(1);
  report.mutable_gradients()->set_decayed(2);
  report.mutable_gradients()->set_dropped(3);
  report.mutable_gradients()->set_rejected(4);
  report.add_staleness()->set_count(9);
  v1::ShardStatus row = ShardRow(partition, "h:1", true, &report);
  EXPECT_EQ(row.address(), "h:1");
  EXPECT_TRUE(row.connected());
  EXPECT_EQ(row.version(), 7);
  EXPECT_EQ(row.mode(), v1::MODE_GBA);
  EXPECT_EQ(row.updates(), 6);
  EXPECT_THAT(row.barrier_waiting_for(), ElementsAre(3));
  EXPECT_EQ(row.gradients().applied(), 1);
  EXPECT_EQ(row.gradients().decayed(), 2);
  EXPECT_EQ(row.gradients().dropped(), 3);
  EXPECT_EQ(row.gradients().rejected(), 4);
  ASSERT_EQ(row.staleness_size(), 1);
  EXPECT_EQ(row.staleness(0).count(), 9);
}

TEST(StatusBuilder, PeriodicEvaluationsAreStampedOnArrivalTheFinalOneWhenAsked) {
  v1::EvalReport report;
  report.set_accuracy(0.8);
  report.set_auc(0.9);
  report.set_loss(0.4);
  report.set_requested_at_examples(100);
  report.set_requested_at_seconds(5);
  report.add_shard_versions(3);
  v1::EvalStatus periodic = EvalStatusOf(report, 250, 12.5);
  EXPECT_EQ(periodic.examples_at_eval(), 250);
  EXPECT_DOUBLE_EQ(periodic.seconds_at_eval(), 12.5);
  EXPECT_FALSE(periodic.final());
  EXPECT_THAT(periodic.shard_versions(), ElementsAre(3));
  report.set_final(true);
  v1::EvalStatus final = EvalStatusOf(report, 250, 12.5);
  EXPECT_EQ(final.examples_at_eval(), 100);
  EXPECT_DOUBLE_EQ(final.seconds_at_eval(), 5);
  EXPECT_TRUE(final.final());
  EXPECT_DOUBLE_EQ(final.accuracy(), 0.8);
  EXPECT_DOUBLE_EQ(final.auc(), 0.9);
  EXPECT_DOUBLE_EQ(final.loss(), 0.4);
}

// 100 examples per second for 10 s: the window keeps the last 5 s, whose rate is exact.
TEST(ThroughputWindow, RateOverTheTrailingWindow) {
  ThroughputWindow window;
  const absl::Time t0 = absl::UnixEpoch();
  EXPECT_EQ(window.Rate(), 0);
  window.Add(t0, 0);
  EXPECT_EQ(window.Rate(), 0) << "one sample";
  for (int s = 1; s <= 10; ++s) window.Add(t0 + absl::Seconds(s), int64_t{100} * s);
  EXPECT_DOUBLE_EQ(window.Rate(), 100);
  // A burst in the last second lifts the window's mean: 5 s from 500 to 1500 examples.
  window.Add(t0 + absl::Seconds(11), 1500);
  EXPECT_DOUBLE_EQ(window.Rate(), (1500 - 600) / 5.0);
}

}  // namespace
}  // namespace syncopate::coordinator
