// An injectable clock, so time-driven policies (timeouts, windows, mode decisions) are tested
// deterministically with FakeClock.
// Thread-safety: all implementations are thread-safe.
#ifndef SYNCOPATE_LIBS_COMMON_CLOCK_H_
#define SYNCOPATE_LIBS_COMMON_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace syncopate {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() = 0;

  // The process-wide real clock; never destroyed.
  static Clock* Real();
};

// A clock that only moves when told to.
class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::UnixEpoch() + absl::Hours(1)) : now_(start) {}
  absl::Time Now() override;
  void Advance(absl::Duration d);

 private:
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace syncopate

#endif  // SYNCOPATE_LIBS_COMMON_CLOCK_H_
