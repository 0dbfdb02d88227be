#include "libs/launch/run_loop.h"

#include <csignal>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncopate::launch {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using ::testing::StartsWith;

class FakeChildren : public SupervisedChildren {
 public:
  std::vector<Exit> Reap() override { return std::exchange(exits, {}); }
  bool Essential(const std::string& name) const override { return name == "coordinator"; }
  absl::Status Restart(const std::string& name) override {
    return absl::UnavailableError("port taken");
  }

  std::vector<Exit> exits;
};

// A run in job time: each poll of the loop waits 250 ms of the fake clock, and the coordinator's
// job time advances with it. The job is done at `done_after` (InfiniteDuration: never).
class FakeRun {
 public:
  explicit FakeRun(absl::Duration done_after) : done_after_(done_after) {}

  RunLoopOptions Options() {
    RunLoopOptions options;
    options.now = [this] { return now_; };
    options.wait_for_interrupt = [this](absl::Duration timeout) {
      now_ += timeout;
      return interrupt_at_ <= now_;
    };
    options.status = [this]() -> absl::StatusOr<v1::ClusterStatus> {
      ++polls_;
      if (unreachable_) return absl::UnavailableError("coordinator restarting");
      v1::ClusterStatus status;
      const absl::Duration elapsed = now_ - start_;
      status.set_state(elapsed >= done_after_ ? v1::JOB_DONE : v1::JOB_RUNNING);
      status.set_elapsed_seconds(absl::ToDoubleSeconds(elapsed));
      status.set_examples(100 * absl::ToInt64Milliseconds(elapsed) / 250);
      return status;
    };
    options.print = [this](const std::string& line) { out.push_back(line); };
    options.print_error = [this](const std::string& line) { err.push_back(line); };
    return options;
  }

  // SuperviseRun over this run and `children`, ending at `deadline` after the start.
  RunLoopResult Supervise(absl::Duration deadline = absl::InfiniteDuration()) {
    Supervisor supervisor(children, "runs/x");
    LocalPrometheus prometheus("runs/x");  // never set up: nothing to reap
    RunLoopOptions options = Options();
    options.deadline = start_ + deadline;
    return SuperviseRun(options, supervisor, prometheus);
  }

  void InterruptAt(absl::Duration after) { interrupt_at_ = start_ + after; }
  void Unreachable() { unreachable_ = true; }
  int polls() const { return polls_; }

  FakeChildren children;
  std::vector<std::string> out;
  std::vector<std::string> err;

 private:
  const absl::Time start_ = absl::FromUnixSeconds(1'000'000);
  absl::Time now_ = start_;
  absl::Time interrupt_at_ = absl::InfiniteFuture();
  const absl::Duration done_after_;
  bool unreachable_ = false;
  int polls_ = 0;
};

TEST(SuperviseRun, PrintsProgressEveryTwoSecondsUntilTheJobIsDone) {
  FakeRun run(absl::Seconds(5));
  const RunLoopResult result = run.Supervise();
  EXPECT_EQ(result.end, RunEnd::kDone);
  EXPECT_EQ(result.last.state(), v1::JOB_DONE);
  // Polls at 0.25 s, 0.5 s, ..., 5.0 s (done): 20 polls. Progress lines at the first poll
  // (0.25 s), then at the first poll at least 2 s later (2.25 s, 4.25 s).
  EXPECT_EQ(run.polls(), 20);
  ASSERT_THAT(run.out, SizeIs(3));
  EXPECT_THAT(run.out[0], StartsWith("[   0.2s] epoch "));
  EXPECT_THAT(run.out[1], StartsWith("[   2.2s] epoch "));
  EXPECT_THAT(run.out[2], StartsWith("[   4.2s] epoch "));
  EXPECT_THAT(run.err, IsEmpty());
  // RunTimeline keeps one sample a second of job time plus the finished job's status:
  // 0.25, 1.25, 2.25, 3.25, 4.25 s and 5.0 s.
  ASSERT_EQ(result.timeline.size(), 6u);
  EXPECT_EQ(result.timeline.back().seconds(), 5.0);
  EXPECT_EQ(result.timeline.back().examples(), 2000);
}

TEST(SuperviseRun, StopsAtTheDeadlineWhenTheJobIsNotDone) {
  FakeRun run(absl::InfiniteDuration());
  const RunLoopResult result = run.Supervise(/*deadline=*/absl::Seconds(3));
  EXPECT_EQ(result.end, RunEnd::kTimedOut);
  // The first poll after the deadline (3.25 s) ends the run, with that status read.
  EXPECT_EQ(run.polls(), 13);
  EXPECT_EQ(result.last.elapsed_seconds(), 3.25);
  EXPECT_EQ(result.last.state(), v1::JOB_RUNNING);
}

TEST(SuperviseRun, AnInterruptEndsTheRunBeforeTheNextPoll) {
  FakeRun run(absl::InfiniteDuration());
  run.InterruptAt(absl::Seconds(1));
  const RunLoopResult result = run.Supervise();
  EXPECT_EQ(result.end, RunEnd::kInterrupted);
  EXPECT_EQ(run.polls(), 3);  // 0.25, 0.5, 0.75 s; the wait ending at 1 s was interrupted
  EXPECT_EQ(result.last.elapsed_seconds(), 0.75);
}

// The supervisor's verdict ends the run: an essential child that died and could not be
// restarted fails it, with the supervisor's lines printed (the restart attempt to stdout, why
// the run fails to stderr).
TEST(SuperviseRun, AnEssentialChildThatCannotBeRestartedFailsTheRun) {
  FakeRun run(absl::InfiniteDuration());
  run.children.exits = {{"coordinator", SIGKILL}};
  const RunLoopResult result = run.Supervise();
  EXPECT_EQ(result.end, RunEnd::kFailed);
  EXPECT_EQ(run.polls(), 0) << "the run fails before the status is read";
  EXPECT_THAT(run.out, ElementsAre(HasSubstr("coordinator"), HasSubstr("port taken")));
  EXPECT_THAT(run.err, ElementsAre(StartsWith("syncopate local: coordinator died")));
}

// A coordinator that cannot be reached (restarting) prints no progress and ends nothing: the
// deadline still applies, and the last status stays the last one read.
TEST(SuperviseRun, AnUnreachableCoordinatorPrintsNoProgress) {
  FakeRun run(absl::InfiniteDuration());
  run.Unreachable();
  const RunLoopResult result = run.Supervise(/*deadline=*/absl::Seconds(1));
  EXPECT_EQ(result.end, RunEnd::kTimedOut);
  EXPECT_THAT(run.out, IsEmpty());
  EXPECT_EQ(result.last.state(), v1::JOB_STATE_UNSPECIFIED);
  EXPECT_TRUE(result.timeline.empty());
}

}  // namespace
}  // namespace syncopate::launch
