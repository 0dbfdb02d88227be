#include "libs/common/clock.h"

#include "gtest/gtest.h"

namespace syncopate {
namespace {

TEST(FakeClock, MovesOnlyWhenAdvanced) {
  FakeClock clock;
  const absl::Time start = clock.Now();
  EXPECT_EQ(clock.Now(), start);
  clock.Advance(absl::Seconds(3));
  EXPECT_EQ(clock.Now() - start, absl::Seconds(3));
}

TEST(RealClock, IsMonotoneEnoughForTimeouts) {
  const absl::Time a = Clock::Real()->Now();
  const absl::Time b = Clock::Real()->Now();
  EXPECT_LE(a, b);
}

}  // namespace
}  // namespace syncopate
