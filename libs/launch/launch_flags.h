// The pieces of `syncopate local`'s command line that describe the cluster rather than the job,
// parsed and checked here so a typo fails at start with one line rather than in a child's log.
// Thread-safety: pure functions; thread-safe.
#ifndef SYNCOPATE_LIBS_LAUNCH_LAUNCH_FLAGS_H_
#define SYNCOPATE_LIBS_LAUNCH_LAUNCH_FLAGS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace syncopate::launch {

// "1,1,1,4" -> {1, 1, 1, 4}: per-worker slowdown factors, each >= 1, at most `workers` of them;
// "" -> {}. INVALID_ARGUMENT naming the bad entry (messages start with "--slowdowns").
absl::StatusOr<std::vector<double>> ParseSlowdowns(absl::string_view text, int workers);

// "3@0s:1,20s:4,60s:1;1@0s:2" -> {3: "0s:1,20s:4,60s:1", 1: "0s:2"}; each schedule must parse
// (worker::SlowdownSchedule) and each index lie in [0, workers). INVALID_ARGUMENT otherwise
// (messages start with "--slowdown_schedule").
absl::StatusOr<std::map<int, std::string>> ParseSlowdownSchedules(absl::string_view text,
                                                                  int workers);

// How many logical workers each worker process stands for (--logical_workers, ADR 0023).
// `requested` > 0: that many, which must divide `workers`. 0 (auto): one process per core — the
// largest divisor p of `workers` with p <= `cores`, each standing for workers / p — unless that
// leaves one process for several cores, or `per_worker_slowdowns` (--slowdowns and
// --slowdown_schedule slow single workers, so each needs its own process): then 1.
// INVALID_ARGUMENT for a count that does not divide `workers`, or > 1 with per-worker slowdowns.
absl::StatusOr<int> ChooseLogicalWorkers(int requested, int workers, int cores,
                                         bool per_worker_slowdowns);

// A loopback TCP port that was free a moment ago (for a child that takes its port as a flag; a
// race with another process taking it in between shows in that child's log).
absl::StatusOr<int> FreeLoopbackPort();

}  // namespace syncopate::launch

#endif  // SYNCOPATE_LIBS_LAUNCH_LAUNCH_FLAGS_H_
