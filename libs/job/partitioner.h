// How the model's dense parameters are split across shards (DESIGN §4): the flat parameter
// vector (all dense tensors concatenated in declaration order) is cut into S contiguous ranges
// of equal size +-1 element, which balances bytes exactly; a tensor may span two shards. Each
// range lists the tensor slices it holds, so checkpoints can store global coordinates.
// Thread-safety: free functions, thread-safe.
#ifndef SYNCOPATE_LIBS_JOB_PARTITIONER_H_
#define SYNCOPATE_LIBS_JOB_PARTITIONER_H_

#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "libs/model/mlp.h"
#include "syncopate/v1/cluster.pb.h"

namespace syncopate::job {

absl::StatusOr<std::vector<v1::ShardPartition>> PartitionDense(
    std::span<const model::DenseTensorSpec> tensors, int num_shards);

// The model a job trains (dimensions come from the dataset kind).
absl::StatusOr<model::Mlp> ModelForJob(const v1::JobSpec& spec);

}  // namespace syncopate::job

#endif  // SYNCOPATE_LIBS_JOB_PARTITIONER_H_
