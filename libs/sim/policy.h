// The policies a simulation compares (`syncopate sim --policy`, `./dev bench --sim`): the job's
// own modes, and baselines derived from the job by changing its spec. A baseline is a
// transformation of the job a user would write by hand, never a change of the product: the
// shard's async mode stays "apply each gradient as it arrives" (docs/design.md §5), a baseline
// for comparison only.
//
//   sync, gba, async, auto   the job with that mode, nothing else changed. `async` is naive
//                            async: every worker's gradient of b = G/N samples is applied alone
//                            at the learning rate set for G.
//   async-scaled             async as an async parameter-server user would configure it: the
//                            learning rate scaled by the linear scaling rule, lr · b/G
//                            (FairAsyncLearningRate says why, why momentum stays, and
//                            that async without momentum measured better).
//
// Thread-safety: free functions, thread-safe.
#ifndef SYNCOPATE_LIBS_SIM_POLICY_H_
#define SYNCOPATE_LIBS_SIM_POLICY_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "syncopate/v1/job.pb.h"

namespace syncopate::sim {

// The name of the fair async baseline.
inline constexpr absl::string_view kAsyncScaled = "async-scaled";

// The job to run for `policy`: the mode set, and for a baseline its spec transformation.
// INVALID_ARGUMENT for an unknown name (listing the known ones) or, for async-scaled, a job
// without workers.
absl::StatusOr<v1::JobSpec> JobForPolicy(const v1::JobSpec& job, absl::string_view policy);

// The learning rate of the fair async baseline: lr · b/G, b = G/N the mean local batch.
float FairAsyncLearningRate(const v1::JobSpec& job);

}  // namespace syncopate::sim

#endif  // SYNCOPATE_LIBS_SIM_POLICY_H_
