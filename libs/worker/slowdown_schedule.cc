#include "libs/worker/slowdown_schedule.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace syncopate::worker {

absl::StatusOr<SlowdownSchedule> SlowdownSchedule::Parse(absl::string_view text) {
  SlowdownSchedule schedule;
  schedule.steps_.clear();
  for (absl::string_view entry : absl::StrSplit(text, ',')) {
    std::pair<absl::string_view, absl::string_view> parts = absl::StrSplit(entry, ':');
    absl::Duration at;
    double factor = 0;
    if (!absl::ParseDuration(parts.first, &at) || !absl::SimpleAtod(parts.second, &factor) ||
        !(factor >= 1.0)) {
      return absl::InvalidArgumentError(absl::StrCat("slowdown schedule entry '", entry,
                                                     "' is not TIME:FACTOR with FACTOR >= 1"));
    }
    if (schedule.steps_.empty() ? at != absl::ZeroDuration() : at <= schedule.steps_.back().first) {
      return absl::InvalidArgumentError(absl::StrCat(
          "slowdown schedule entry '", entry, "': times must start at 0s and strictly increase"));
    }
    schedule.steps_.emplace_back(at, factor);
  }
  return schedule;
}

double SlowdownSchedule::At(absl::Duration since_start) const {
  double factor = steps_.front().second;
  for (const auto& [at, f] : steps_) {
    if (since_start >= at) factor = f;
  }
  return factor;
}

}  // namespace syncopate::worker
