#include "libs/worker/worker_runner.h"

#include <deque>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "libs/runtime/process_runtime.h"
#include "tests/unit/worker/fakes.h"

namespace syncopate::worker {
namespace {

using testing::FakeCoordinator;
using ::testing::HasSubstr;

v1::Welcome Welcome(int32_t worker_id) {
  v1::Welcome welcome;
  welcome.set_worker_id(worker_id);
  welcome.mutable_job()->set_job_id("job-7");
  return welcome;
}

v1::WorkerHello Hello() {
  v1::WorkerHello hello;
  hello.set_name("w1");
  hello.set_role(v1::ROLE_WORKER);
  return hello;
}

// A scripted cluster: each join takes the next join outcome (an error, or OK: a welcomed fake
// channel), each life the next role outcome. Joins and lives may move the fake clock, as a real
// wait for a welcome or a real training life would.
struct Script {
  FakeClock clock;
  std::deque<absl::Status> joins;  // OK means welcome
  std::deque<absl::Status> lives;
  absl::Duration join_takes = absl::ZeroDuration();
  absl::Duration life_takes = absl::ZeroDuration();
  bool shutdown = false;
  bool shutdown_in_life = false;  // the process is told to stop during the next life
  bool stop_on_wait = false;      // a backoff wait is interrupted by shutdown
  bool job_ends_in_life = false;  // the coordinator sends Stop during the next life
  bool shutdown_in_join = false;  // the process is told to stop while waiting for a welcome

  std::vector<v1::WorkerHello> hellos;
  std::vector<absl::Duration> join_timeouts;
  std::vector<absl::Duration> waits;
  int lives_run = 0;

  WorkerRunner Runner(int max_quick_rejoins = 10) {
    WorkerRunnerOptions options;
    options.join_timeout = absl::Seconds(600);
    options.max_quick_rejoins = max_quick_rejoins;
    options.stable_life = absl::Minutes(5);
    options.backoff_seed = 1;
    options.clock = &clock;
    options.wait = [this](absl::Duration d) {
      waits.push_back(d);
      clock.Advance(d);
      return stop_on_wait;
    };
    options.shutdown = [this] { return shutdown; };
    return WorkerRunner(
        [this](const v1::WorkerHello& hello,
               absl::Duration timeout) -> absl::StatusOr<std::unique_ptr<CoordinatorChannel>> {
          hellos.push_back(hello);
          join_timeouts.push_back(timeout);
          clock.Advance(join_takes);
          if (shutdown_in_join) shutdown = true;
          absl::Status next = joins.empty() ? absl::OkStatus() : joins.front();
          if (!joins.empty()) joins.pop_front();
          if (!next.ok()) return next;
          return std::make_unique<FakeCoordinator>(Welcome(4));
        },
        [this](CoordinatorChannel& channel) {
          EXPECT_EQ(channel.welcome().worker_id(), 4);
          ++lives_run;
          clock.Advance(life_takes);
          if (shutdown_in_life) shutdown = true;
          if (job_ends_in_life) static_cast<FakeCoordinator&>(channel).Stop();
          absl::Status next = lives.empty() ? absl::OkStatus() : lives.front();
          if (!lives.empty()) lives.pop_front();
          return next;
        },
        std::move(options));
  }
};

// The coordinator said stop: the role returns OK after one join, the worker exits 0.
TEST(WorkerRunner, RoleThatEndsOkExitsZeroAfterOneJoin) {
  Script script;
  WorkerRunner runner = script.Runner();
  const WorkerExit exit = runner.Run(Hello());
  EXPECT_EQ(exit.code, 0);
  EXPECT_EQ(exit.message, "");
  EXPECT_EQ(runner.joins(), 1);
  EXPECT_EQ(script.lives_run, 1);
  // The first hello names no job: the worker takes whatever job the coordinator runs.
  EXPECT_EQ(script.hellos.at(0).job_id(), "");
  EXPECT_EQ(script.join_timeouts.at(0), absl::Seconds(600));
}

// A late (or restarted) worker of a finished job has nothing to do: exit 0 without a life, so a
// batch system does not count it as failed.
TEST(WorkerRunner, JobOverOnJoinExitsZeroWithoutRunningTheRole) {
  Script script;
  script.joins = {absl::OutOfRangeError("the job has finished")};
  WorkerRunner runner = script.Runner();
  EXPECT_EQ(runner.Run(Hello()).code, 0);
  EXPECT_EQ(script.lives_run, 0);
  EXPECT_EQ(script.hellos.size(), 1u);
}

// The coordinator's refusal of our hello (here a wrong join token) exits at once with the exit
// code of a permanent refusal (3: a Kubernetes podFailurePolicy fails the Job on it) and the
// refusal as the one line: no wait, no second hello.
TEST(WorkerRunner, RefusedJoinExitsRefusedWithOneLine) {
  Script refused_join;
  refused_join.joins = {absl::UnauthenticatedError("wrong join token")};
  const WorkerExit join_exit = refused_join.Runner().Run(Hello());
  EXPECT_EQ(join_exit.code, runtime::kExitRefused);
  EXPECT_EQ(join_exit.code, 3);  // the number the chart's values.yaml and the docs name
  EXPECT_EQ(join_exit.message, "wrong join token");
  EXPECT_EQ(refused_join.hellos.size(), 1u);
  EXPECT_TRUE(refused_join.waits.empty());
}

// A role's permanent error (a shard refusing our job id, the user's model code raising) ends
// this worker with exit 1 and the error as the one line, without a rejoin: the job goes on
// without it, and a batch system may retry it.
TEST(WorkerRunner, PermanentRoleErrorExitsOneWithoutRejoining) {
  Script refused_role;
  refused_role.lives = {absl::FailedPreconditionError("shard 0 runs another job")};
  const WorkerExit role_exit = refused_role.Runner().Run(Hello());
  EXPECT_EQ(role_exit.code, 1);
  EXPECT_THAT(role_exit.message, HasSubstr("shard 0 runs another job"));
  EXPECT_EQ(refused_role.hellos.size(), 1u);
}

// Every retryable end of a life rejoins — the session ended (UNAVAILABLE), no data lease in time
// (DEADLINE_EXCEEDED, decided in worker_runner.h), a peer reset mid-stream (INTERNAL) — with the
// same name and the job id of the first welcome, so a coordinator now running another job
// refuses us instead of handing us its model.
TEST(WorkerRunner, RetryableRoleErrorsRejoinWithTheSameNameAndJobId) {
  Script script;
  script.lives = {absl::UnavailableError("coordinator session ended"),
                  absl::DeadlineExceededError("no data lease from the coordinator"),
                  absl::InternalError("RST_STREAM"), absl::OkStatus()};
  WorkerRunner runner = script.Runner();
  EXPECT_EQ(runner.Run(Hello()).code, 0);
  EXPECT_EQ(runner.joins(), 4);
  ASSERT_EQ(script.hellos.size(), 4u);
  EXPECT_EQ(script.hellos[0].job_id(), "");
  for (int i = 1; i < 4; ++i) {
    EXPECT_EQ(script.hellos[i].name(), "w1");
    EXPECT_EQ(script.hellos[i].job_id(), "job-7");
  }
  // One backoff before each rejoin, full jitter under 200 ms · 2^k.
  ASSERT_EQ(script.waits.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_LE(script.waits[k], absl::Milliseconds(200) * (1 << k));
  }
}

// While the coordinator is unreachable the join retries with backoff, each attempt given what is
// left of the 600 s budget; once the budget is spent the worker exits 1 naming the last error.
// Each attempt takes 100 s here: attempts at 0, 100 (+backoff), ... until the clock passes 600.
TEST(WorkerRunner, RetryableJoinErrorsRetryUntilTheJoinTimeout) {
  Script script;
  script.join_takes = absl::Seconds(100);
  for (int i = 0; i < 20; ++i) script.joins.push_back(absl::UnavailableError("connection refused"));
  WorkerRunner runner = script.Runner();
  const WorkerExit exit = runner.Run(Hello());
  EXPECT_EQ(exit.code, 1);
  EXPECT_THAT(exit.message, HasSubstr("could not join"));
  EXPECT_THAT(exit.message, HasSubstr("connection refused"));
  EXPECT_EQ(script.lives_run, 0);
  // 600 s at 100 s (plus up to 0.2, 0.4, ... s of backoff) per attempt: six attempts.
  ASSERT_EQ(script.hellos.size(), 6u);
  EXPECT_EQ(script.join_timeouts[0], absl::Seconds(600));
  for (size_t i = 1; i < script.join_timeouts.size(); ++i) {
    EXPECT_LT(script.join_timeouts[i], script.join_timeouts[i - 1]);
    EXPECT_GE(script.join_timeouts[i], absl::Seconds(1));
  }
  EXPECT_EQ(script.waits.size(), 5u);
}

// SIGTERM before the job ended exits 143 (runtime::kExitInterrupted) with one line and without
// another hello: during a life whatever the life returned (its error is the shutdown's doing),
// while waiting to retry a join, and while waiting to rejoin. Never 0: a worker Job (a work queue)
// starts no new pod after its first success, so an evicted worker exiting 0 would leave the job
// without its replacement (ADR 0006).
TEST(WorkerRunner, ShutdownBeforeTheJobEndedExitsInterruptedWithoutJoiningAgain) {
  Script during_life;
  during_life.shutdown_in_life = true;
  during_life.lives = {absl::UnavailableError("coordinator session ended")};
  const WorkerExit life_exit = during_life.Runner().Run(Hello());
  EXPECT_EQ(life_exit.code, runtime::kExitInterrupted);
  EXPECT_EQ(life_exit.code, 143);  // the number the chart's podFailurePolicy and the docs name
  EXPECT_THAT(life_exit.message, HasSubstr("stopped before the job ended"));
  EXPECT_EQ(during_life.hellos.size(), 1u);
  EXPECT_EQ(during_life.lives_run, 1);

  Script clean_leave;  // the life itself ended OK (a goodbye sent) because of the SIGTERM
  clean_leave.shutdown_in_life = true;
  EXPECT_EQ(clean_leave.Runner().Run(Hello()).code, runtime::kExitInterrupted);

  Script while_joining;
  while_joining.stop_on_wait = true;
  while_joining.joins = {absl::UnavailableError("connection refused")};
  EXPECT_EQ(while_joining.Runner().Run(Hello()).code, runtime::kExitInterrupted);
  EXPECT_EQ(while_joining.hellos.size(), 1u);
  EXPECT_EQ(while_joining.lives_run, 0);

  // The wait for the welcome (the job not started yet) ends CANCELLED on the SIGTERM: an
  // interruption, not a refusal (CANCELLED is not retryable).
  Script awaiting_welcome;
  awaiting_welcome.shutdown_in_join = true;
  awaiting_welcome.joins = {absl::CancelledError("stopped while waiting for the welcome")};
  EXPECT_EQ(awaiting_welcome.Runner().Run(Hello()).code, runtime::kExitInterrupted);
  EXPECT_EQ(awaiting_welcome.hellos.size(), 1u);

  Script while_rejoining;
  while_rejoining.stop_on_wait = true;
  while_rejoining.lives = {absl::UnavailableError("coordinator session ended")};
  EXPECT_EQ(while_rejoining.Runner().Run(Hello()).code, runtime::kExitInterrupted);
  EXPECT_EQ(while_rejoining.hellos.size(), 1u);
}

// A SIGTERM that arrives after the coordinator's Stop (the job is over; Kubernetes or the
// launcher tidies up) is not an interruption: exit 0, the Job's success.
TEST(WorkerRunner, ShutdownAfterTheJobEndedExitsZero) {
  Script script;
  script.job_ends_in_life = true;
  script.shutdown_in_life = true;
  const WorkerExit exit = script.Runner().Run(Hello());
  EXPECT_EQ(exit.code, 0);
  EXPECT_EQ(exit.message, "");
}

// A coordinator that welcomes but never leases: every life ends in the 60 s lease timeout. With
// at most 3 quick rejoins the worker gives up on the fourth such life, exit 1 in one line.
TEST(WorkerRunner, QuickRejoinsInARowAreBounded) {
  Script script;
  script.life_takes = absl::Seconds(60);
  for (int i = 0; i < 10; ++i) {
    script.lives.push_back(absl::DeadlineExceededError("no data lease from the coordinator"));
  }
  WorkerRunner runner = script.Runner(/*max_quick_rejoins=*/3);
  const WorkerExit exit = runner.Run(Hello());
  EXPECT_EQ(exit.code, 1);
  EXPECT_THAT(exit.message, HasSubstr("gave up after 3 rejoins"));
  EXPECT_THAT(exit.message, HasSubstr("no data lease"));
  EXPECT_EQ(script.lives_run, 4);
}

// Lives of at least stable_life (5 min) reset the count: a long job survives any number of
// coordinator restarts spread over time, even with max_quick_rejoins 1.
TEST(WorkerRunner, StableLivesResetTheRejoinBound) {
  Script script;
  script.life_takes = absl::Minutes(6);
  for (int i = 0; i < 5; ++i) script.lives.push_back(absl::UnavailableError("session ended"));
  WorkerRunner runner = script.Runner(/*max_quick_rejoins=*/1);
  EXPECT_EQ(runner.Run(Hello()).code, 0);
  EXPECT_EQ(script.lives_run, 6);
  EXPECT_EQ(runner.joins(), 6);
}

}  // namespace
}  // namespace syncopate::worker
