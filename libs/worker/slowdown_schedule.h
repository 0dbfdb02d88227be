// Emulated machine slowness for tests and benchmarks: a piecewise-constant factor over time
// since the worker started training, written "0s:1,20s:4,60s:1" (4x slower from 20 s to 60 s).
// Thread-safety: immutable after Parse; thread-safe.
#ifndef SYNCOPATE_LIBS_WORKER_SLOWDOWN_SCHEDULE_H_
#define SYNCOPATE_LIBS_WORKER_SLOWDOWN_SCHEDULE_H_

#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace syncopate::worker {

class SlowdownSchedule {
 public:
  // A constant factor.
  explicit SlowdownSchedule(double factor = 1.0) : steps_{{absl::ZeroDuration(), factor}} {}
  // "T:F,T:F,...": times are absl durations ("0s", "1.5s", "2m"), strictly increasing, the first
  // 0s; factors >= 1. INVALID_ARGUMENT naming the bad entry otherwise.
  static absl::StatusOr<SlowdownSchedule> Parse(absl::string_view text);

  double At(absl::Duration since_start) const;

 private:
  std::vector<std::pair<absl::Duration, double>> steps_;
};

}  // namespace syncopate::worker

#endif  // SYNCOPATE_LIBS_WORKER_SLOWDOWN_SCHEDULE_H_
