// What an aggregation mode asks of the two ends of the Train stream, named once for the worker's
// parameter client and the shard (docs/architecture.md, "A sync step" and "The gba path"): only
// sync has a barrier, so only sync holds a pull until a version exists, and only there does a
// worker's next pull wait for the version after the one its gradient was computed on. Everything
// else about a mode (how pushes are weighed, when an update is applied, switching) is the
// aggregator's (libs/aggregation/global_batch_aggregator.h).
// Thread-safety: pure functions.
#ifndef SYNCOPATE_LIBS_COMMON_MODE_RULES_H_
#define SYNCOPATE_LIBS_COMMON_MODE_RULES_H_

#include <cstdint>

#include "syncopate/v1/job.pb.h"

namespace syncopate {

// The mode has a barrier per version: pulls wait for a version, pushes fill a version's barrier.
inline bool HasBarrier(v1::Mode mode) { return mode == v1::MODE_SYNC; }

// The version a worker's next pull asks for after pushing a gradient computed on `token`: the
// next barrier's in sync, any (0: the newest) otherwise.
inline int64_t NextPullMinVersion(v1::Mode mode, int64_t token) {
  return HasBarrier(mode) ? token + 1 : 0;
}

}  // namespace syncopate

#endif  // SYNCOPATE_LIBS_COMMON_MODE_RULES_H_
