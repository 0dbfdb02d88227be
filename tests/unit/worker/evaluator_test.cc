#include "libs/worker/evaluator.h"

#include <thread>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/worker/fakes.h"

namespace syncopate::worker {
namespace {

using ::testing::ElementsAre;
using testing::FakeCoordinator;
using testing::FakeParameters;
using testing::FakeWorkload;
using ::testing::Pair;

v1::Welcome EvaluatorWelcome() {
  v1::Welcome welcome;
  welcome.set_worker_id(9);
  welcome.mutable_job()->mutable_eval()->set_interval_seconds(3600);  // only on request
  return welcome;
}

// Options with a validation set that chooses the kept version by AUC.
EvaluatorOptions ChoosingByAuc(FakeWorkload& validation) {
  EvaluatorOptions options;
  options.validation = &validation;
  options.quality_metric = "auc";
  return options;
}

// The point reads that released a point: (point, keep), in order.
std::vector<std::pair<int64_t, bool>> Releases(const FakeParameters& parameters) {
  std::vector<std::pair<int64_t, bool>> releases;
  for (const EvalPointRead& read : parameters.point_reads) {
    if (read.release) releases.emplace_back(read.point, read.keep);
  }
  return releases;
}

v1::CoordinatorToWorker Evaluate(bool final) {
  v1::CoordinatorToWorker command;
  command.mutable_evaluate()->set_final(final);
  command.mutable_evaluate()->set_at_examples(1234);
  command.mutable_evaluate()->set_at_seconds(5.5);
  return command;
}

// A requested evaluation scores every chunk of the newest parameters and reports the metrics,
// the versions measured and the moment it was asked for; after the final one it waits for stop.
TEST(Evaluator, ScoresEveryChunkOnRequestAndReportsTheFinalEvaluation) {
  FakeCoordinator coordinator(EvaluatorWelcome(),
                              [](const v1::WorkerMessage& m, FakeCoordinator& c) {
                                if (m.has_eval() && m.eval().final()) c.Stop();
                              });
  FakeWorkload model(0, /*eval_size=*/10, /*eval_chunk=*/4);
  FakeParameters parameters({0.25f}, 0.1f);
  coordinator.Queue(Evaluate(false));
  coordinator.Queue(Evaluate(true));
  ASSERT_TRUE(RunEvaluator(coordinator, model, parameters, {}).ok());

  EXPECT_THAT(model.chunks, ElementsAre(Pair(0, 4), Pair(4, 8), Pair(8, 10), Pair(0, 4), Pair(4, 8),
                                        Pair(8, 10)));
  EXPECT_FLOAT_EQ(model.last_scored, 0.25f);
  for (bool newest : parameters.pulled_newest) EXPECT_TRUE(newest) << "never waits on a barrier";
  const std::vector<v1::WorkerMessage> sent = coordinator.sent();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_FALSE(sent[0].eval().final());
  const v1::EvalReport& final = sent[1].eval();
  EXPECT_TRUE(final.final());
  EXPECT_DOUBLE_EQ(final.accuracy(), 0.5);
  EXPECT_DOUBLE_EQ(final.loss(), 0.25);
  EXPECT_DOUBLE_EQ(final.auc(), 0.75);
  EXPECT_EQ(final.examples(), 10);
  EXPECT_EQ(final.requested_at_examples(), 1234);
  EXPECT_DOUBLE_EQ(final.requested_at_seconds(), 5.5);
  EXPECT_THAT(final.shard_versions(), ElementsAre(0));
}

// With a validation set, every evaluation scores it first with the same parameters and reports
// its scores beside the test set's.
TEST(Evaluator, ScoresTheValidationSetBesideTheTestSet) {
  FakeCoordinator coordinator(EvaluatorWelcome(),
                              [](const v1::WorkerMessage& m, FakeCoordinator& c) {
                                if (m.has_eval() && m.eval().final()) c.Stop();
                              });
  FakeWorkload model(0, /*eval_size=*/10, /*eval_chunk=*/4);
  FakeWorkload validation(0, /*eval_size=*/6, /*eval_chunk=*/4);
  validation.auc = 0.6;
  validation.auc_standard_error = 0.01;
  FakeParameters parameters({0.25f}, 0.1f);
  coordinator.Queue(Evaluate(true));
  EvaluatorOptions options;
  options.validation = &validation;
  ASSERT_TRUE(RunEvaluator(coordinator, model, parameters, options).ok());

  EXPECT_THAT(validation.chunks, ElementsAre(Pair(0, 4), Pair(4, 6)));
  EXPECT_THAT(model.chunks, ElementsAre(Pair(0, 4), Pair(4, 8), Pair(8, 10)));
  EXPECT_FLOAT_EQ(validation.last_scored, 0.25f);
  const std::vector<v1::WorkerMessage> sent = coordinator.sent();
  ASSERT_EQ(sent.size(), 1u);
  const v1::EvalReport& report = sent[0].eval();
  EXPECT_DOUBLE_EQ(report.auc(), 0.75);
  EXPECT_EQ(report.examples(), 10);
  ASSERT_TRUE(report.has_validation());
  EXPECT_DOUBLE_EQ(report.validation().auc(), 0.6);
  EXPECT_DOUBLE_EQ(report.validation().auc_standard_error(), 0.01);
  EXPECT_EQ(report.validation().examples(), 6);
}

// At evaluation points, a point whose validation score beats every earlier one (and the kept
// evaluation the welcome names) is released with keep; the others are released plainly.
TEST(Evaluator, ReleasesAPointBetterOnValidationThanAnyBeforeItAsKept) {
  v1::Welcome welcome = EvaluatorWelcome();
  welcome.mutable_job()->mutable_eval()->set_every_global_batches(1);
  welcome.mutable_kept_eval()->mutable_validation()->set_auc(0.62);  // before a rejoin
  welcome.mutable_kept_eval()->mutable_validation()->set_examples(6);
  FakeCoordinator coordinator(welcome, [](const v1::WorkerMessage& m, FakeCoordinator& c) {
    if (m.has_eval() && m.eval().point() == 4) c.Stop();
  });
  FakeWorkload model(0, /*eval_size=*/10, /*eval_chunk=*/10);
  FakeWorkload validation(0, /*eval_size=*/6, /*eval_chunk=*/6);
  validation.auc_sequence = {0.6, 0.7, 0.65, 0.8};
  FakeParameters parameters({0.25f}, 0.1f);
  parameters.serve_points = true;
  ASSERT_TRUE(RunEvaluator(coordinator, model, parameters, ChoosingByAuc(validation)).ok());

  for (const EvalPointRead& read : parameters.point_reads) {
    EXPECT_FALSE(read.keep && !read.release) << "only the release carries keep";
  }
  EXPECT_THAT(Releases(parameters),
              ElementsAre(Pair(1, false), Pair(2, true), Pair(3, false), Pair(4, true)));
  const std::vector<v1::WorkerMessage> sent = coordinator.sent();
  ASSERT_EQ(sent.size(), 4u);
  EXPECT_DOUBLE_EQ(sent[1].eval().validation().auc(), 0.7);
}

// Evaluation within its budget (job::EvalPointTestExamples): with k = 1 and G = 10, a point
// scores the test set's first ceil(10% x 3 x 1 x 10) = 3 examples, the same ones at every point,
// and its read of them releases the point; the final evaluation scores the whole set.
TEST(Evaluator, ScoresAPointOnTheTestSetsFirstExamplesAndTheFinalOnAll) {
  v1::Welcome welcome = EvaluatorWelcome();
  welcome.mutable_job()->set_global_batch(10);
  welcome.mutable_job()->mutable_eval()->set_every_global_batches(1);
  FakeCoordinator coordinator(welcome, [](const v1::WorkerMessage& m, FakeCoordinator& c) {
    if (m.has_eval() && m.eval().point() == 2) c.Queue(Evaluate(true));
    if (m.has_eval() && m.eval().final()) c.Stop();
  });
  FakeWorkload model(0, /*eval_size=*/10, /*eval_chunk=*/4);
  FakeParameters parameters({0.25f}, 0.1f);
  parameters.serve_points = true;
  ASSERT_TRUE(RunEvaluator(coordinator, model, parameters, {}).ok());

  EXPECT_THAT(model.chunks,
              ElementsAre(Pair(0, 3), Pair(0, 3), Pair(0, 4), Pair(4, 8), Pair(8, 10)));
  EXPECT_THAT(Releases(parameters), ElementsAre(Pair(1, false), Pair(2, false)));
  const std::vector<v1::WorkerMessage> sent = coordinator.sent();
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[0].eval().examples(), 3);
  EXPECT_EQ(sent[1].eval().examples(), 3);
  EXPECT_TRUE(sent[2].eval().final());
  EXPECT_EQ(sent[2].eval().examples(), 10);
}

// The kept version's test scores are the run's result (ADR 0017), so a point the validation set
// (always scored whole) chooses scores the whole test set; a point it does not choose scores
// the budget's first 3 examples (k = 1, G = 10, as above).
TEST(Evaluator, AKeptPointScoresTheWholeTestSet) {
  v1::Welcome welcome = EvaluatorWelcome();
  welcome.mutable_job()->set_global_batch(10);
  welcome.mutable_job()->mutable_eval()->set_every_global_batches(1);
  FakeCoordinator coordinator(welcome, [](const v1::WorkerMessage& m, FakeCoordinator& c) {
    if (m.has_eval() && m.eval().point() == 2) c.Stop();
  });
  FakeWorkload model(0, /*eval_size=*/10, /*eval_chunk=*/4);
  FakeWorkload validation(0, /*eval_size=*/6, /*eval_chunk=*/4);
  validation.auc_sequence = {0.6, 0.5};  // point 1 is the best, point 2 is not
  FakeParameters parameters({0.25f}, 0.1f);
  parameters.serve_points = true;
  ASSERT_TRUE(RunEvaluator(coordinator, model, parameters, ChoosingByAuc(validation)).ok());

  EXPECT_THAT(validation.chunks, ElementsAre(Pair(0, 4), Pair(4, 6), Pair(0, 4), Pair(4, 6)));
  EXPECT_THAT(model.chunks, ElementsAre(Pair(0, 4), Pair(4, 8), Pair(8, 10), Pair(0, 3)));
  EXPECT_THAT(Releases(parameters), ElementsAre(Pair(1, true), Pair(2, false)));
  const std::vector<v1::WorkerMessage> sent = coordinator.sent();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].eval().examples(), 10);
  EXPECT_EQ(sent[0].eval().validation().examples(), 6);
  EXPECT_EQ(sent[1].eval().examples(), 3);
  EXPECT_EQ(sent[1].eval().validation().examples(), 6);
}

// A failed pull is retried on the next request; a permanent refusal ends the loop.
TEST(Evaluator, RetriesATransientFailureAndEndsOnARefusal) {
  FakeCoordinator coordinator(EvaluatorWelcome());
  FakeWorkload model(0);
  FakeParameters parameters({0.0f}, 0.1f);
  parameters.pull_failures = {absl::UnavailableError("down"),
                              absl::PermissionDeniedError("certificate")};
  int waits = 0;
  EvaluatorOptions options;
  options.wait = [&waits](absl::Duration) {
    ++waits;
    return false;
  };
  coordinator.Queue(Evaluate(false));
  coordinator.Queue(Evaluate(false));
  EXPECT_EQ(RunEvaluator(coordinator, model, parameters, options).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(waits, 1);
  EXPECT_TRUE(coordinator.sent().empty());
}

// The final evaluation is asked for once: when its pull fails (a shard restarting as training
// ended) it is tried again after the backoff, not dropped for the next periodic one.
TEST(Evaluator, AFinalEvaluationWhosePullFailedIsTriedAgain) {
  FakeCoordinator coordinator(EvaluatorWelcome(),
                              [](const v1::WorkerMessage& m, FakeCoordinator& c) {
                                if (m.has_eval() && m.eval().final()) c.Stop();
                              });
  FakeWorkload model(0);
  FakeParameters parameters({0.0f}, 0.1f);
  parameters.pull_failures = {absl::UnavailableError("shard 1 is unreachable")};
  EvaluatorOptions options;
  options.wait = [](absl::Duration) { return false; };
  coordinator.Queue(Evaluate(true));
  // Without the retry the evaluator would wait an hour for its next periodic evaluation: end
  // the session after 10 s so that such a failure is a failed test, not a hung one.
  absl::Notification done;
  std::thread guard([&] {
    if (!done.WaitForNotificationWithTimeout(absl::Seconds(10))) coordinator.End();
  });
  const absl::Status status = RunEvaluator(coordinator, model, parameters, options);
  done.Notify();
  guard.join();
  EXPECT_TRUE(status.ok()) << status;
  const std::vector<v1::WorkerMessage> sent = coordinator.sent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_TRUE(sent[0].eval().final());
  EXPECT_EQ(sent[0].eval().requested_at_examples(), 1234);
}

// After the final report, a channel that breaks before the stop surfaces as UNAVAILABLE, so the
// caller rejoins the restarted coordinator (which asks again).
TEST(Evaluator, AChannelLostAfterTheFinalReportIsUnavailable) {
  FakeCoordinator coordinator(EvaluatorWelcome(),
                              [](const v1::WorkerMessage& m, FakeCoordinator& c) {
                                if (m.has_eval()) c.End();
                              });
  FakeWorkload model(0);
  FakeParameters parameters({0.0f}, 0.1f);
  coordinator.Queue(Evaluate(true));
  EXPECT_EQ(RunEvaluator(coordinator, model, parameters, {}).code(),
            absl::StatusCode::kUnavailable);
}

TEST(Evaluator, LingersBoundedWithoutAStop) {
  FakeCoordinator coordinator(EvaluatorWelcome());
  FakeWorkload model(0);
  FakeParameters parameters({0.0f}, 0.1f);
  coordinator.Queue(Evaluate(true));
  EvaluatorOptions options;
  options.linger = absl::Milliseconds(200);
  const absl::Time start = absl::Now();
  EXPECT_TRUE(RunEvaluator(coordinator, model, parameters, options).ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

}  // namespace
}  // namespace syncopate::worker
