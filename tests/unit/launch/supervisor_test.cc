#include "libs/launch/supervisor.h"

#include <sys/wait.h>

#include <map>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace syncopate::launch {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// waitpid statuses: a clean exit, exit code 1, killed by SIGKILL.
constexpr int kClean = 0;
constexpr int kExit1 = 1 << 8;
constexpr int kKilled = SIGKILL;

class FakeChildren : public SupervisedChildren {
 public:
  std::vector<Exit> Reap() override { return std::exchange(exits, {}); }
  bool Essential(const std::string& name) const override { return essential.contains(name); }
  absl::Status Restart(const std::string& name) override {
    restarted.push_back(name);
    return refuse_restart ? absl::UnavailableError("port taken") : absl::OkStatus();
  }

  std::vector<Exit> exits;
  std::set<std::string> essential = {"coordinator", "shard-0"};
  std::vector<std::string> restarted;
  bool refuse_restart = false;
};

TEST(Supervisor, AnEssentialChildDyingMidJobIsRestartedOnItsPort) {
  FakeChildren children;
  Supervisor supervisor(children, "runs/x");
  children.exits = {{"shard-0", kKilled}};
  Supervisor::Round round = supervisor.Check(/*job_done=*/false);
  EXPECT_FALSE(round.failed);
  EXPECT_THAT(children.restarted, ElementsAre("shard-0"));
  ASSERT_EQ(round.lines.size(), 2u);
  EXPECT_THAT(round.lines[1], HasSubstr("restarting shard-0 (restart 1 of at most 5): ok"));
  EXPECT_THAT(round.errors, IsEmpty());
}

// Workers and the evaluator are let go, whatever their exit; the job goes on without them.
TEST(Supervisor, NonEssentialChildrenAreLetGo) {
  FakeChildren children;
  Supervisor supervisor(children, "runs/x");
  children.exits = {{"worker-1", kKilled}, {"evaluator", kClean}};
  Supervisor::Round round = supervisor.Check(false);
  EXPECT_FALSE(round.failed);
  EXPECT_THAT(children.restarted, IsEmpty());
  EXPECT_EQ(round.lines.size(), 1u) << "the unclean exit is described";
}

TEST(Supervisor, AChildThatKeepsDyingFailsTheRunAfterMaxRestarts) {
  FakeChildren children;
  Supervisor supervisor(children, "runs/x", /*max_restarts=*/2);
  for (int i = 0; i < 2; ++i) {
    children.exits = {{"coordinator", kExit1}};
    EXPECT_FALSE(supervisor.Check(false).failed);
  }
  children.exits = {{"coordinator", kExit1}};
  Supervisor::Round round = supervisor.Check(false);
  EXPECT_TRUE(round.failed);
  EXPECT_THAT(round.errors,
              ElementsAre("syncopate local: coordinator died; see runs/x/logs/coordinator.log"));
  EXPECT_EQ(children.restarted.size(), 2u);
}

TEST(Supervisor, ARestartThatFailsFailsTheRun) {
  FakeChildren children;
  children.refuse_restart = true;
  Supervisor supervisor(children, "runs/x");
  children.exits = {{"shard-0", kKilled}};
  Supervisor::Round round = supervisor.Check(false);
  EXPECT_TRUE(round.failed);
  EXPECT_THAT(round.lines.back(), HasSubstr("port taken"));
}

// Once the job is done essential children exit on their own: clean exits are expected, not
// restarted; an unclean one still fails the run.
TEST(Supervisor, AfterTheJobIsDoneCleanExitsAreExpected) {
  FakeChildren children;
  Supervisor supervisor(children, "runs/x");
  children.exits = {{"shard-0", kClean}, {"coordinator", kClean}};
  Supervisor::Round round = supervisor.Check(/*job_done=*/true);
  EXPECT_FALSE(round.failed);
  EXPECT_THAT(children.restarted, IsEmpty());
  children.exits = {{"shard-0", kKilled}};
  EXPECT_TRUE(supervisor.Check(true).failed);
}

// A shard exits 0 when the coordinator says the job is done, which can reach it before the
// launcher sees the job done: a clean exit is judged one round later.
TEST(Supervisor, ACleanExitBeforeTheJobIsSeenDoneIsJudgedOnTheNextRound) {
  FakeChildren children;
  Supervisor supervisor(children, "runs/x");
  children.exits = {{"shard-0", kClean}};
  Supervisor::Round round = supervisor.Check(/*job_done=*/false);
  EXPECT_FALSE(round.failed);
  EXPECT_THAT(round.lines, IsEmpty());
  EXPECT_THAT(children.restarted, IsEmpty());
  round = supervisor.Check(/*job_done=*/true);
  EXPECT_FALSE(round.failed);
  EXPECT_THAT(children.restarted, IsEmpty()) << "the job was done: the exit was expected";

  // Still not done a round later: it stopped too early, and is restarted like any death.
  children.exits = {{"shard-0", kClean}};
  EXPECT_THAT(supervisor.Check(false).lines, IsEmpty());
  round = supervisor.Check(false);
  EXPECT_THAT(children.restarted, ElementsAre("shard-0"));
  ASSERT_EQ(round.lines.size(), 1u);
  EXPECT_THAT(round.lines[0], HasSubstr("restarting shard-0 (restart 1 of at most 5)"));
}

}  // namespace
}  // namespace syncopate::launch
