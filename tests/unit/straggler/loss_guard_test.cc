#include "libs/straggler/loss_guard.h"

#include <cmath>
#include <deque>
#include <limits>
#include <optional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "libs/straggler/switch_confirmation.h"

namespace syncopate {
namespace {

using ::testing::HasSubstr;

// A deterministic noise pattern with mean 0 and spread ~0.1 (the cycle of simulated_cluster.h's
// idea: nonzero variance, no randomness).
constexpr double kNoise[] = {0.1, -0.1, 0.05, -0.05, 0.15, -0.15, 0.0, 0.0};

bool Tripped(const std::optional<LossGuard::Verdict>& verdict) {
  return verdict.has_value() && verdict->tripped;
}

void AddLosses(LossGuard& guard, int count, double level, double slope = 0) {
  for (int i = 0; i < count; ++i) guard.Add(level + slope * i + kNoise[i % 8]);
}

// A guard of window K whose reference is K sync losses around `level`, now in gba.
LossGuard InGbaAfterSyncAt(int window, double level) {
  LossGuard guard(window);
  AddLosses(guard, window, level);
  guard.EnterGba();
  return guard;
}

TEST(LossGuardTest, NoTripWhileTheLossStaysLevelOrFalls) {
  LossGuard guard = InGbaAfterSyncAt(32, 1.0);
  ASSERT_TRUE(guard.in_gba());
  AddLosses(guard, 32, 1.0);
  std::optional<LossGuard::Verdict> verdict = guard.Check();
  ASSERT_TRUE(verdict.has_value());
  EXPECT_FALSE(verdict->tripped);
  EXPECT_LT(std::abs(verdict->z), 1) << "level: only the noise pattern's own trend";
  AddLosses(guard, 32, 0.8);
  verdict = guard.Check();
  ASSERT_TRUE(verdict.has_value());
  EXPECT_FALSE(verdict->tripped);
  EXPECT_LT(verdict->z, -2);
}

TEST(LossGuardTest, AMarginalRiseTripsWhenTheNextWindowConfirmsIt) {
  LossGuard guard = InGbaAfterSyncAt(32, 1.0);
  AddLosses(guard, 31, 1.12);
  EXPECT_FALSE(guard.Check().has_value()) << "a window needs K losses";
  guard.Add(1.12);
  std::optional<LossGuard::Verdict> verdict = guard.Check();
  ASSERT_TRUE(verdict.has_value());
  EXPECT_TRUE(verdict->significant);
  EXPECT_FALSE(verdict->tripped) << "one marginal window is not enough";
  EXPECT_GT(verdict->z, 2);
  EXPECT_LT(verdict->z, SwitchConfirmation::kDecisiveZ);
  EXPECT_EQ(verdict->gba.count, 32);
  EXPECT_NEAR(verdict->gba.mean, 1.12, 0.1);
  EXPECT_NEAR(verdict->sync.mean, 1.0, 0.1);
  EXPECT_THAT(verdict->explanation, HasSubstr("training loss at the end of 32 gba steps"));
  EXPECT_THAT(verdict->explanation, HasSubstr("awaiting the next"));
  EXPECT_FALSE(guard.Check().has_value()) << "the window was consumed";
  AddLosses(guard, 32, 1.12);
  verdict = guard.Check();
  ASSERT_TRUE(Tripped(verdict));
  EXPECT_THAT(verdict->explanation, HasSubstr("the second window in a row"));
}

TEST(LossGuardTest, AnOverwhelmingRiseTripsAtOnce) {
  LossGuard guard = InGbaAfterSyncAt(32, 1.0);
  AddLosses(guard, 32, 1.5);
  const std::optional<LossGuard::Verdict> verdict = guard.Check();
  ASSERT_TRUE(Tripped(verdict));
  EXPECT_GT(verdict->z, SwitchConfirmation::kDecisiveZ);
  EXPECT_THAT(verdict->explanation, HasSubstr("> 3.28 at once"));
}

// A significant window followed by one back near the reference withdraws the trip; the window
// after that must again be followed by a second before the guard trips.
TEST(LossGuardTest, AMarginalWindowTheNextOneDoesNotConfirmIsForgotten) {
  LossGuard guard = InGbaAfterSyncAt(32, 1.0);
  AddLosses(guard, 32, 1.12);
  ASSERT_TRUE(guard.Check()->significant);
  AddLosses(guard, 32, 1.0);
  const std::optional<LossGuard::Verdict> recovered = guard.Check();
  ASSERT_TRUE(recovered.has_value());
  EXPECT_FALSE(recovered->significant);
  EXPECT_FALSE(recovered->tripped);
  AddLosses(guard, 32, 1.12);
  EXPECT_FALSE(Tripped(guard.Check()));
  AddLosses(guard, 32, 1.12);
  EXPECT_TRUE(Tripped(guard.Check()));
}

// A new stint starts with no significant window behind it.
TEST(LossGuardTest, AMarginalWindowDoesNotCarryIntoTheNextStint) {
  LossGuard guard = InGbaAfterSyncAt(8, 1.0);
  AddLosses(guard, 8, 1.25);
  ASSERT_TRUE(guard.Check()->significant);
  guard.LeaveGba();
  AddLosses(guard, 8, 1.0);
  guard.EnterGba();
  AddLosses(guard, 8, 1.25);
  const std::optional<LossGuard::Verdict> verdict = guard.Check();
  ASSERT_TRUE(verdict.has_value());
  EXPECT_TRUE(verdict->significant);
  EXPECT_LT(verdict->z, SwitchConfirmation::kDecisiveZ);
  EXPECT_FALSE(verdict->tripped);
}

// A gba stint often starts with a bump the run recovers from within the window: what counts is
// where the window ended, not its mean.
TEST(LossGuardTest, ABumpTheWindowRecoveredFromDoesNotTrip) {
  LossGuard guard = InGbaAfterSyncAt(64, 1.0);
  AddLosses(guard, 32, 1.8);  // the bump
  AddLosses(guard, 32, 1.0);  // back where sync left it
  std::optional<LossGuard::Verdict> verdict = guard.Check();
  ASSERT_TRUE(verdict.has_value());
  EXPECT_FALSE(verdict->tripped) << verdict->explanation;
}

// The reference is where the sync trend ended, not the window's mean: while the loss falls fast,
// a gba window that sits below the sync window's mean but well above its end has risen.
TEST(LossGuardTest, TheReferenceIsTheLevelTheSyncTrendReached) {
  LossGuard guard(64);
  AddLosses(guard, 64, 2.0, -1.0 / 64);  // falls from 2.0 to ~1.0, mean ~1.5
  guard.EnterGba();
  AddLosses(guard, 64, 1.3);
  const std::optional<LossGuard::Verdict> rise = guard.Check();
  ASSERT_TRUE(Tripped(rise));
  EXPECT_NEAR(rise->sync.mean, 1.0, 0.05);
  EXPECT_LT(rise->gba.mean, 1.5);
}

TEST(LossGuardTest, WithoutAFullSyncWindowNothingIsJudged) {
  LossGuard guard(32);
  AddLosses(guard, 31, 1.0);
  guard.EnterGba();
  AddLosses(guard, 32, 9.0);
  const std::optional<LossGuard::Verdict> verdict = guard.Check();
  ASSERT_TRUE(verdict.has_value());
  EXPECT_FALSE(verdict->tripped);
  EXPECT_EQ(verdict->sync.count, 0);
  EXPECT_THAT(verdict->explanation, HasSubstr("no sync reference"));
}

TEST(LossGuardTest, NonFiniteLossesAreIgnored) {
  LossGuard guard = InGbaAfterSyncAt(8, 1.0);
  guard.Add(std::numeric_limits<double>::quiet_NaN());
  guard.Add(std::numeric_limits<double>::infinity());
  AddLosses(guard, 7, 1.0);
  EXPECT_FALSE(guard.Check().has_value()) << "7 finite losses are not a window of 8";
  guard.Add(1.0);
  const std::optional<LossGuard::Verdict> verdict = guard.Check();
  ASSERT_TRUE(verdict.has_value());
  EXPECT_FALSE(verdict->tripped);
  EXPECT_EQ(verdict->gba.count, 8);
}

TEST(LossGuardTest, LeavingGbaStartsTheSyncWindowAfresh) {
  LossGuard guard = InGbaAfterSyncAt(8, 1.0);
  guard.LeaveGba();
  EXPECT_FALSE(guard.in_gba());
  AddLosses(guard, 4, 1.0);
  guard.EnterGba();
  for (int window = 0; window < 2; ++window) {
    AddLosses(guard, 8, 5.0);
    const std::optional<LossGuard::Verdict> verdict = guard.Check();
    ASSERT_TRUE(verdict.has_value());
    EXPECT_EQ(verdict->sync.count, 0) << "4 sync losses since leaving: no reference";
    EXPECT_FALSE(verdict->tripped);
  }
}

TEST(LossGuardTest, TheBackOffLastsAsLongAsTheRunHadAndDoubles) {
  LossGuard guard(8);
  EXPECT_TRUE(guard.GbaAllowed(0));
  guard.BackOff(10);
  EXPECT_EQ(guard.trips(), 1);
  EXPECT_FALSE(guard.GbaAllowed(19.9));
  EXPECT_TRUE(guard.GbaAllowed(20));
  guard.BackOff(21);
  EXPECT_EQ(guard.retry_at_seconds(), 42);
  EXPECT_EQ(guard.trips(), 2);
}

TEST(LossGuardTest, TheWindowIsAtLeastTwoAndShrinkingItTrimsTheSyncLosses) {
  LossGuard guard(0);
  EXPECT_EQ(guard.window(), 2);
  guard.SetWindow(16);
  AddLosses(guard, 16, 1.0);
  guard.SetWindow(8);
  guard.EnterGba();
  AddLosses(guard, 8, 3.0);
  const std::optional<LossGuard::Verdict> rise = guard.Check();
  ASSERT_TRUE(Tripped(rise));
  EXPECT_EQ(rise->sync.count, 8);
}

}  // namespace
}  // namespace syncopate
