#include "libs/common/clock.h"

namespace syncopate {
namespace {

class RealClock : public Clock {
 public:
  absl::Time Now() override { return absl::Now(); }
};

}  // namespace

Clock* Clock::Real() {
  static Clock* const kClock = new RealClock();
  return kClock;
}

absl::Time FakeClock::Now() {
  absl::MutexLock lock(&mu_);
  return now_;
}

void FakeClock::Advance(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  now_ += d;
}

}  // namespace syncopate
