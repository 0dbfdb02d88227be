#include "libs/worker/trainer.h"

#include <numeric>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/worker/fakes.h"

namespace syncopate::worker {
namespace {

using ::testing::ElementsAre;
using testing::FakeCoordinator;
using testing::FakeParameters;
using testing::FakeWorkload;

v1::Welcome Welcome(int32_t local_batch) {
  v1::Welcome welcome;
  welcome.set_worker_id(3);
  welcome.set_local_batch(local_batch);
  return welcome;
}

v1::CoordinatorToWorker Lease(int64_t id, int64_t begin, int64_t end) {
  v1::CoordinatorToWorker command;
  v1::DataLease* lease = command.mutable_lease();
  lease->set_lease_id(id);
  lease->set_begin(begin);
  lease->set_end(end);
  lease->set_shuffle_seed(7);
  return command;
}

// A coordinator with three leases of 10 examples, one per request; the request after the last
// lease gets a stop (the worker still trains the batch it holds, then sees the stop).
FakeCoordinator::Reply ThreeLeasesThenStop() {
  return [leases = 0](const v1::WorkerMessage& message, FakeCoordinator& coordinator) mutable {
    if (!message.has_lease_request()) return;
    if (leases == 3) {
      coordinator.Stop();
      return;
    }
    coordinator.Queue(Lease(leases + 1, int64_t{10} * leases, int64_t{10} * leases + 10));
    ++leases;
  };
}

TrainerOptions Options(std::vector<absl::Duration>* waits = nullptr) {
  TrainerOptions options;
  options.wait = [waits](absl::Duration d) {
    if (waits != nullptr) waits->push_back(d);
    return false;
  };
  return options;
}

// Batches of 5 over leases of 10: six steps, each example exactly once, every completed lease
// reported back, and the one parameter walks toward the target (w ← w − 0.1·2(w − 1)).
TEST(Trainer, TrainsEveryLeasedExampleOnceReportsStepsAndStopsWhenTold) {
  FakeCoordinator coordinator(Welcome(5), ThreeLeasesThenStop());
  FakeWorkload model(/*target=*/1.0f);
  FakeParameters parameters({0.0f}, 0.1f);
  ASSERT_TRUE(Trainer(coordinator, model, parameters, Options()).Run().ok());

  std::set<int64_t> trained(model.trained.begin(), model.trained.end());
  EXPECT_EQ(model.trained.size(), 30u);
  EXPECT_EQ(trained.size(), 30u) << "each example once";
  EXPECT_EQ(*trained.begin(), 0);
  EXPECT_EQ(*trained.rbegin(), 29);
  EXPECT_THAT(parameters.pushed_samples, ElementsAre(5, 5, 5, 5, 5, 5));
  EXPECT_EQ(parameters.version(), 6);
  // w_k = 1 − 0.8^k after k steps.
  EXPECT_NEAR(parameters.params()[0], 1 - std::pow(0.8, 6), 1e-6);

  std::vector<int64_t> completed;
  int steps = 0;
  float previous_loss = 1e9;
  for (const v1::WorkerMessage& m : coordinator.sent()) {
    for (int64_t id : m.lease_request().completed_lease_ids()) completed.push_back(id);
    if (!m.has_step()) continue;
    EXPECT_EQ(m.step().step(), steps);
    EXPECT_EQ(m.step().token(), steps) << "pushed on the version it pulled";
    EXPECT_GT(m.step().compute_seconds(), 0);
    EXPECT_LT(m.step().loss(), previous_loss);
    previous_loss = m.step().loss();
    ++steps;
  }
  EXPECT_EQ(steps, 6);
  // Lease 3's last batch is taken while the step before it pushes (its pull rides on that push),
  // so lease 3 is complete by the request that is answered with the stop.
  EXPECT_THAT(completed, ElementsAre(1, 2, 3));
}

TEST(Trainer, ANewLocalBatchAppliesFromTheNextBatch) {
  FakeCoordinator coordinator(Welcome(5), ThreeLeasesThenStop());
  v1::CoordinatorToWorker smaller;
  smaller.mutable_set_local_batch()->set_local_batch(2);
  FakeWorkload model(1.0f);
  FakeParameters parameters({0.0f}, 0.1f);
  coordinator.Queue(smaller);
  ASSERT_TRUE(Trainer(coordinator, model, parameters, Options()).Run().ok());
  EXPECT_EQ(parameters.pushed_samples.front(), 2);
  EXPECT_EQ(std::accumulate(parameters.pushed_samples.begin(), parameters.pushed_samples.end(),
                            int64_t{0}),
            30);
}

// UNAVAILABLE and DEADLINE_EXCEEDED are retried after a backoff wait; the step's batch is kept
// across a failed pull (its examples are leased), dropped after a failed push.
TEST(Trainer, TransientFailuresAreBackedOffAndRetried) {
  FakeCoordinator coordinator(Welcome(5), ThreeLeasesThenStop());
  FakeWorkload model(1.0f);
  FakeParameters parameters({0.0f}, 0.1f);
  parameters.connect_failures = {absl::UnavailableError("shard down")};
  parameters.pull_failures = {absl::DeadlineExceededError("slow")};
  parameters.push_failures = {absl::UnavailableError("broken stream")};
  std::vector<absl::Duration> waits;
  ASSERT_TRUE(Trainer(coordinator, model, parameters, Options(&waits)).Run().ok());
  EXPECT_EQ(waits.size(), 3u);
  EXPECT_EQ(parameters.pushed_samples.size(), 5u) << "the failed push's batch is not retried";
  EXPECT_EQ(model.trained.size(), 30u);
}

// Every step's push carries the next step's pull (PushAllThenPull): six steps, seven pulls when
// the second one, behind the first push, fails. Its batch is pulled again at the next step's
// start; the gradient already pushed is not pushed twice.
TEST(Trainer, APullBehindAPushThatFailsIsRetriedAtTheNextStep) {
  FakeCoordinator coordinator(Welcome(5), ThreeLeasesThenStop());
  FakeWorkload model(1.0f);
  FakeParameters parameters({0.0f}, 0.1f);
  parameters.pull_failures = {absl::OkStatus(), absl::DeadlineExceededError("slow")};
  ASSERT_TRUE(Trainer(coordinator, model, parameters, Options()).Run().ok());
  EXPECT_EQ(parameters.pulls, 7);
  EXPECT_THAT(parameters.pushed_samples, ElementsAre(5, 5, 5, 5, 5, 5));
  EXPECT_EQ(model.trained.size(), 30u);
  std::set<int64_t> trained(model.trained.begin(), model.trained.end());
  EXPECT_EQ(trained.size(), 30u) << "each example once";
}

TEST(Trainer, APermanentRefusalEndsTheLoopWithIt) {
  FakeCoordinator coordinator(Welcome(5), ThreeLeasesThenStop());
  FakeWorkload model(1.0f);
  FakeParameters parameters({0.0f}, 0.1f);
  parameters.pull_failures = {absl::UnauthenticatedError("wrong join token")};
  absl::Status status = Trainer(coordinator, model, parameters, Options()).Run();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(parameters.pushed_samples.empty());
}

TEST(Trainer, TheEndOfTheCoordinatorChannelIsUnavailable) {
  FakeCoordinator coordinator(Welcome(5));
  coordinator.End();
  FakeWorkload model(1.0f);
  FakeParameters parameters({0.0f}, 0.1f);
  EXPECT_EQ(Trainer(coordinator, model, parameters, Options()).Run().code(),
            absl::StatusCode::kUnavailable);
}

TEST(Trainer, NoLeaseWithinTheTimeoutIsAnError) {
  FakeCoordinator coordinator(Welcome(5));
  FakeWorkload model(1.0f);
  FakeParameters parameters({0.0f}, 0.1f);
  TrainerOptions options = Options();
  options.timeouts.lease = absl::Milliseconds(300);
  EXPECT_EQ(Trainer(coordinator, model, parameters, options).Run().code(),
            absl::StatusCode::kDeadlineExceeded);
  ASSERT_FALSE(coordinator.sent().empty());
  EXPECT_TRUE(coordinator.sent()[0].has_lease_request());
  EXPECT_EQ(coordinator.sent().size(), 1u) << "one outstanding request, not one per poll";
}

TEST(Trainer, ShutdownEndsTheLoopCleanly) {
  FakeCoordinator coordinator(Welcome(5), ThreeLeasesThenStop());
  FakeWorkload model(1.0f);
  FakeParameters parameters({0.0f}, 0.1f);
  TrainerOptions options = Options();
  options.shutdown = [&parameters] { return parameters.version() >= 2; };
  ASSERT_TRUE(Trainer(coordinator, model, parameters, options).Run().ok());
  EXPECT_EQ(parameters.version(), 2);
}

}  // namespace
}  // namespace syncopate::worker
