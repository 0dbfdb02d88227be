#include "libs/report/status_view.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncopate::report {
namespace {

using ::testing::HasSubstr;

v1::ClusterStatus Running() {
  v1::ClusterStatus s;
  s.set_job_id("j");
  s.set_state(v1::JOB_RUNNING);
  s.set_elapsed_seconds(12.34);
  s.set_epoch(1.5);
  s.set_examples(90000);
  s.set_examples_per_second(7400.4);
  s.set_global_batch(256);
  for (int i = 0; i < 2; ++i) {
    v1::ShardStatus* shard = s.add_shards();
    shard->set_shard_id(i);
    shard->set_version(351);
    shard->set_mode(i == 0 ? v1::MODE_SYNC : v1::MODE_GBA);
  }
  v1::WorkerStatus* w = s.add_workers();
  w->set_name("worker-3");
  w->set_worker_id(4);
  w->set_role(v1::ROLE_WORKER);
  w->set_alive(true);
  w->set_slowdown(3.9);
  w->set_straggler(true);
  w->set_robust_z(12.25);
  return s;
}

TEST(StatusView, ProgressLineBeforeAndAfterTheFirstEvaluation) {
  v1::ClusterStatus s = Running();
  EXPECT_EQ(ProgressLine(s),
            "[  12.3s] epoch 1.50  examples 90000  7400 ex/s  shards: v351 sync, v351 gba  test "
            "acc -");
  s.mutable_last_eval()->set_accuracy(0.841);
  s.mutable_last_eval()->set_auc(0.985);
  EXPECT_THAT(ProgressLine(s), HasSubstr("test acc 84.10% auc 0.9850"));
}

TEST(StatusView, StatusTextShowsWorkersShardsDecisionsAndTheLastEvaluation) {
  v1::ClusterStatus s = Running();
  s.mutable_shards(1)->mutable_last_decision()->set_explanation("gba 1.9x faster");
  s.mutable_shards(1)->mutable_last_decision()->set_seconds(10);
  s.mutable_shards(1)->set_switches(1);
  s.mutable_last_eval()->set_accuracy(0.8);
  s.mutable_last_eval()->set_final(true);
  const std::string text = StatusText(s);
  EXPECT_THAT(text, HasSubstr("job j: JOB_RUNNING, 12.3 s, epoch 1.50, 90000 examples, 7400 ex/s, "
                              "G=256\n"));
  EXPECT_THAT(text, HasSubstr("3.90x YES (z 12.2)"));
  EXPECT_THAT(text,
              HasSubstr("shard 1 mode policy (1 switches so far), at 10.0s: gba 1.9x faster"));
  EXPECT_THAT(text, HasSubstr("last evaluation: accuracy 80.00%"));
  EXPECT_THAT(text, HasSubstr("(final)"));
}

// The kept version reads the same in `syncopate status`, `syncopate local` and report.md, and
// ctr_quality.sh reads its test AUC as ", AUC <x>,".
TEST(StatusView, StatusTextNamesTheKeptVersionAndAnEarlyStop) {
  v1::ClusterStatus s = Running();
  v1::EvalStatus& kept = *s.mutable_kept_eval();
  kept.set_point(8);
  kept.set_examples_at_eval(380928);
  kept.set_accuracy(0.7787);
  kept.set_auc(0.7671);
  kept.set_loss(0.4744);
  kept.mutable_validation()->set_auc(0.7705);
  kept.mutable_validation()->set_accuracy(0.7775);
  EXPECT_EQ(KeptVersionSummary(kept),
            "test accuracy 77.87%, AUC 0.7671, loss 0.4744 of point 8 at 380928 examples "
            "(validation AUC 0.7705, accuracy 77.75%)");
  s.set_early_stop_reason("validation auc fell");
  const std::string text = StatusText(s);
  EXPECT_THAT(text, HasSubstr("kept version (best on validation): test accuracy 77.87%"));
  EXPECT_THAT(text, HasSubstr("stopped early: validation auc fell\n"));
  kept.set_final(true);
  EXPECT_THAT(KeptVersionSummary(kept), HasSubstr("of the final parameters at 380928 examples"));
}

}  // namespace
}  // namespace syncopate::report
