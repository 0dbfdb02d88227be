#include "libs/coordinator/job_summary.h"

#include "gtest/gtest.h"

namespace syncopate::coordinator {
namespace {

v1::ClusterStatus DoneStatus() {
  v1::ClusterStatus status;
  status.set_job_id("fashion-mnist-mlp");
  status.set_state(v1::JOB_DONE);
  status.set_elapsed_seconds(92.34);
  status.set_examples(480000);
  status.set_epoch(8);
  for (int i = 0; i < 4; ++i) status.add_workers()->set_role(v1::ROLE_WORKER);
  status.add_workers()->set_role(v1::ROLE_EVALUATOR);  // not a worker
  status.add_shards();
  status.add_shards();
  return status;
}

TEST(JobSummary, SaysHowTheJobEndedWithItsFinalEvaluation) {
  v1::ClusterStatus status = DoneStatus();
  status.mutable_last_eval()->set_accuracy(0.87123);
  status.mutable_last_eval()->set_loss(0.36118);
  status.mutable_last_eval()->set_final(true);
  EXPECT_EQ(
      JobSummary(status),
      "job fashion-mnist-mlp JOB_DONE after 92.3 s: 480000 examples (8.00 epochs), 4 workers, "
      "2 shards; final evaluation: accuracy 87.12%, loss 0.3612");
  status.mutable_last_eval()->set_auc(0.79512);
  status.mutable_last_eval()->set_final(false);
  EXPECT_EQ(
      JobSummary(status),
      "job fashion-mnist-mlp JOB_DONE after 92.3 s: 480000 examples (8.00 epochs), 4 workers, "
      "2 shards; last evaluation: accuracy 87.12%, AUC 0.7951, loss 0.3612");
}

TEST(JobSummary, WithoutEvaluationSaysSo) {
  EXPECT_EQ(
      JobSummary(DoneStatus()),
      "job fashion-mnist-mlp JOB_DONE after 92.3 s: 480000 examples (8.00 epochs), 4 workers, "
      "2 shards; no evaluation");
}

TEST(JobSummary, FitsAKubernetesTerminationMessageWhateverTheClusterSize) {
  v1::ClusterStatus status = DoneStatus();
  for (int i = 0; i < 10000; ++i) status.add_workers()->set_role(v1::ROLE_WORKER);
  status.mutable_last_eval()->set_accuracy(0.5);
  EXPECT_LT(JobSummary(status).size(), 4096u);
}

}  // namespace
}  // namespace syncopate::coordinator
