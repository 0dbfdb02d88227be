// The words for aggregation modes: "sync", "gba", "async", "auto". Used in logs, metric labels,
// `syncopate status` and decision explanations, so they read the same everywhere.
// Thread-safety: pure function, thread-safe.
#ifndef SYNCOPATE_LIBS_COMMON_MODE_NAME_H_
#define SYNCOPATE_LIBS_COMMON_MODE_NAME_H_

#include <string>

#include "syncopate/v1/job.pb.h"

namespace syncopate {

std::string ModeName(v1::Mode mode);

}  // namespace syncopate

#endif  // SYNCOPATE_LIBS_COMMON_MODE_NAME_H_
