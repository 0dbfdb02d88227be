// Test fixture: feeds a StragglerDetector with deterministic step times, so every statistic the
// tests expect can be worked out by hand (see the comments on kNoise).
// Thread-safety: not thread-safe; one test thread.
#ifndef SYNCOPATE_TESTS_UNIT_STRAGGLER_SIMULATED_CLUSTER_H_
#define SYNCOPATE_TESTS_UNIT_STRAGGLER_SIMULATED_CLUSTER_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "libs/common/clock.h"
#include "libs/straggler/straggler_detector.h"

namespace syncopate {

// Relative step-time noise, cycled per worker with a per-worker phase. Any 8 consecutive steps
// hold each value once, so a full window (W = 8 for up to 4 workers) has median exactly equal to
// the worker's base time (the two middle values are both 0), MAD = 0.015·base (the mean of the
// 4th and 5th smallest |δ|: 0.01 and 0.02) and robust σ = 1.4826·0.015·base.
inline constexpr std::array<double, 8> kNoise = {-0.03, -0.02, -0.01, 0.0, 0.0, 0.01, 0.02, 0.03};

struct SimulatedCluster {
  FakeClock clock;
  StragglerDetector detector{&clock};
  int64_t step = 0;

  // One step per worker: worker i (ids 0..N-1) computes for base[i]·(1 + noise) seconds and
  // communicates for communication[i] seconds (if given). The clock moves one second first, so
  // samples are always strictly after anything that happened before the call.
  void Step(const std::vector<double>& base, const std::vector<double>& communication = {}) {
    clock.Advance(absl::Seconds(1));
    for (size_t i = 0; i < base.size(); ++i) {
      const double noise = kNoise[(static_cast<size_t>(step) + i) % kNoise.size()];
      ASSERT_TRUE(detector.AddStep(static_cast<int32_t>(i), base[i] * (1 + noise)).ok());
      if (!communication.empty()) {
        ASSERT_TRUE(detector.AddCommunication(static_cast<int32_t>(i), communication[i]).ok());
      }
    }
    ++step;
  }

  void Steps(int n, const std::vector<double>& base,
             const std::vector<double>& communication = {}) {
    for (int k = 0; k < n; ++k) Step(base, communication);
  }
};

}  // namespace syncopate

#endif  // SYNCOPATE_TESTS_UNIT_STRAGGLER_SIMULATED_CLUSTER_H_
