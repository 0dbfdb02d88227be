#include "libs/aggregation/push_cadence.h"

#include "gtest/gtest.h"

namespace syncopate::aggregation {
namespace {

absl::Time At(double seconds) { return absl::UnixEpoch() + absl::Seconds(seconds); }

// Every worker pushes 64 samples every `period[w]` seconds, 10 times.
PushCadence Paced(const std::vector<double>& period) {
  PushCadence cadence;
  for (int k = 0; k < 10; ++k) {
    for (size_t w = 0; w < period.size(); ++w) {
      cadence.Record(static_cast<int32_t>(w), 64, At(period[w] * k));
    }
  }
  return cadence;
}

const absl::flat_hash_set<int32_t> kFour = {0, 1, 2, 3};

// G = 256, four equal workers of 64: while worker 0 computes, the others push 192 samples; its
// push lands after the pending update exactly when the buffer already holds a push.
TEST(PushCadence, EqualWorkersLandOneUpdateLateExactlyWhenTheBufferHoldsAPush) {
  const PushCadence cadence = Paced({1, 1, 1, 1});
  EXPECT_EQ(cadence.LandingUpdates(0, 0, 256, kFour), 0);    // (0 + 192) / 256
  EXPECT_EQ(cadence.LandingUpdates(0, 64, 256, kFour), 1);   // (64 + 192) / 256
  EXPECT_EQ(cadence.LandingUpdates(0, 192, 256, kFour), 1);  // (192 + 192) / 256
}

// A 4x straggler: the three others push 4 x 3 x 64 = 768 samples while it computes one gradient,
// three global batches; the fast workers see the straggler push a quarter of a batch each cycle.
TEST(PushCadence, AStragglerLandsAsManyUpdatesLateAsTheOthersFill) {
  const PushCadence cadence = Paced({4, 1, 1, 1});
  EXPECT_EQ(cadence.LandingUpdates(0, 0, 256, kFour), 3);   // 768 / 256
  EXPECT_EQ(cadence.LandingUpdates(0, 64, 256, kFour), 3);  // 832 / 256
  EXPECT_EQ(cadence.LandingUpdates(1, 0, 256, kFour), 0);   // (2 x 64 + 16) / 256
  EXPECT_EQ(cadence.LandingUpdates(1, 128, 256, kFour), 1);
}

// Before any interval is measured, the others are taken to push once each; a worker that never
// pushed counts for nothing; a reset forgets the old regime's pace.
TEST(PushCadence, UnknownPacesCountOnePushEach) {
  PushCadence cadence;
  EXPECT_EQ(cadence.LandingUpdates(0, 64, 256, kFour), 0);  // nobody known: the buffer alone
  cadence.Record(1, 64, At(0));
  cadence.Record(2, 64, At(0));
  cadence.Record(3, 64, At(0));
  EXPECT_EQ(cadence.LandingUpdates(0, 64, 256, kFour), 1);
  cadence.Reset();
  EXPECT_EQ(cadence.LandingUpdates(0, 64, 256, kFour), 0);
}

}  // namespace
}  // namespace syncopate::aggregation
