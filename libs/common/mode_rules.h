// The aggregation modes a job can name (v1::Mode), one row each in one table: everything the
// cluster outside the aggregator and the mode policy knows about a mode. The job spec's
// validation and default, the mode flags' parsing, the shard (which modes it runs, whether pulls
// wait for a barrier, what it measures and serves), the worker's ParameterClient and the
// simulator's worker (the version a next pull asks for), the metric labels, logs, status and
// the run report's timeline all read the row. How a mode weighs pushes and when it applies an
// update is the aggregator's (libs/aggregation/global_batch_aggregator.h); whether the
// coordinator picks it is the policy's (libs/straggler/mode_policy.h). Adding a mode is its enum
// value, its row here, its branch in the aggregator (and in the policy, if the coordinator should
// pick it) and the docs: docs/architecture.md, "How to add a model, a mode or a metric".
// Thread-safety: the table is immutable; every function here is pure and thread-safe.
#ifndef SYNCOPATE_LIBS_COMMON_MODE_RULES_H_
#define SYNCOPATE_LIBS_COMMON_MODE_RULES_H_

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "syncopate/v1/job.pb.h"

namespace syncopate {

struct ModeRules {
  v1::Mode mode = v1::MODE_UNSPECIFIED;
  // The word for the mode in logs, metric labels, `syncopate status`, reports, decision
  // explanations and the --mode and --policy flags, so it reads the same everywhere.
  absl::string_view name;
  // A shard aggregates in it. Auto is not a shard's mode: the coordinator runs each shard in
  // one of the others (a job spec's mode only).
  bool shard_runs = false;
  // A barrier per version: pulls wait for a version, pushes fill a version's barrier
  // (docs/architecture.md, "A sync step").
  bool barrier = false;
  // Every update is the mean of fresh gradients all computed on the same parameters, so the
  // shard measures what staleness would cost from its updates (aggregation::GradientStatistics);
  // any other mode's updates reset that measurement.
  bool measures_staleness_cost = false;
  // A training pull is served the parameters the pending update will produce, where the
  // worker's gradient is predicted to land (ADR 0007, "The pending update"): a mode that fills
  // a global batch without a barrier. Async applies every push alone: nothing is pending.
  bool looks_ahead = false;
};

// One row per mode of the proto but MODE_UNSPECIFIED (mode_rules_test fails on a missing one),
// in the order reports list them: a shard mode's position among the shard modes is its level on
// the run report's mode timeline, bottom up.
inline constexpr std::array<ModeRules, 4> kModeRules = {{
    {.mode = v1::MODE_SYNC,
     .name = "sync",
     .shard_runs = true,
     .barrier = true,
     .measures_staleness_cost = true},
    {.mode = v1::MODE_GBA, .name = "gba", .shard_runs = true, .looks_ahead = true},
    {.mode = v1::MODE_ASYNC, .name = "async", .shard_runs = true},
    {.mode = v1::MODE_AUTO, .name = "auto"},
}};

// The mode of a job spec that names none (job::ApplyJobDefaults).
inline constexpr v1::Mode kDefaultMode = v1::MODE_SYNC;

// The row of `mode`; nullptr for MODE_UNSPECIFIED and any number without a row: not a mode a
// job spec may name.
constexpr const ModeRules* FindModeRules(v1::Mode mode) {
  for (const ModeRules& row : kModeRules) {
    if (row.mode == mode) return &row;
  }
  return nullptr;
}

// The row's fields; false for a mode without a row.
constexpr bool IsShardMode(v1::Mode mode) {
  const ModeRules* row = FindModeRules(mode);
  return row != nullptr && row->shard_runs;
}
constexpr bool HasBarrier(v1::Mode mode) {
  const ModeRules* row = FindModeRules(mode);
  return row != nullptr && row->barrier;
}
constexpr bool MeasuresStalenessCost(v1::Mode mode) {
  const ModeRules* row = FindModeRules(mode);
  return row != nullptr && row->measures_staleness_cost;
}
constexpr bool LooksAhead(v1::Mode mode) {
  const ModeRules* row = FindModeRules(mode);
  return row != nullptr && row->looks_ahead;
}

// The version a worker's next pull asks for after pushing a gradient computed on `token`: the
// next barrier's with a barrier, any (0: the newest) otherwise.
constexpr int64_t NextPullMinVersion(v1::Mode mode, int64_t token) {
  return HasBarrier(mode) ? token + 1 : 0;
}

// The row's name; "unspecified" for a mode without a row.
std::string ModeName(v1::Mode mode);

// A row's name -> its mode; INVALID_ARGUMENT "unknown mode '<name>' (expected sync, ...)".
absl::StatusOr<v1::Mode> ParseMode(absl::string_view name);

// The choices for a message: "sync, gba, async or auto", with `more` listed after the modes
// (a simulator's baselines). ModeEnumChoices: the proto's names, "MODE_SYNC, ... or MODE_AUTO".
std::string ModeNameChoices(std::initializer_list<absl::string_view> more = {});
std::string ModeEnumChoices();

}  // namespace syncopate

#endif  // SYNCOPATE_LIBS_COMMON_MODE_RULES_H_
