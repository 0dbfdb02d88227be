// How the model's dense parameters are split across shards (docs/design.md §4): the flat parameter
// vector (all dense tensors concatenated in declaration order) is cut into S contiguous ranges
// of equal size +-1 element, which balances bytes exactly; a tensor may span two shards. Each
// range lists the tensor slices it holds, so checkpoints can store global coordinates.
// Embedding tables are not cut into ranges: every shard holds the rows whose key hash maps to it
// (embedding::OwnerShard), so each partition lists every table.
// Thread-safety: free functions, thread-safe.
#ifndef SYNCOPATE_LIBS_JOB_PARTITIONER_H_
#define SYNCOPATE_LIBS_JOB_PARTITIONER_H_

#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "libs/model/mlp.h"  // model::DenseTensorSpec
#include "syncopate/v1/cluster.pb.h"

namespace syncopate::job {

absl::StatusOr<std::vector<v1::ShardPartition>> PartitionDense(
    std::span<const model::DenseTensorSpec> tensors, int num_shards);

// What a job's model stores on the shards: its dense tensors (flat-vector order) and its
// embedding tables (table-id order); a job's model kind says (job::DescribeModel).
struct ModelLayout {
  std::vector<model::DenseTensorSpec> dense;
  // The tensors' own shapes where the model has them (a PyTorch module's), parallel to `dense`;
  // empty: each is [rows, cols].
  std::vector<std::vector<int64_t>> dense_shapes;
  std::vector<v1::EmbeddingTableSpec> tables;
  // The flat vector's initial values when the model initialises itself (its tensors' init is
  // PROVIDED); empty when the shards initialise every slice from its Initializer.
  std::vector<float> initial_values;
};

// The layout as a job spec records it (ModelSpec.layout): names and shapes, no values.
v1::ModelLayoutRecord LayoutRecord(const ModelLayout& layout);

// ShardAssignment.initial_values for `partition`: its range of the layout's initial values,
// packed; empty when the layout has none.
std::string PackedInitialValues(const ModelLayout& layout, const v1::ShardPartition& partition);

// The dense partition of the layout plus every table on every shard.
absl::StatusOr<std::vector<v1::ShardPartition>> PartitionModel(const ModelLayout& layout,
                                                               int num_shards);

}  // namespace syncopate::job

#endif  // SYNCOPATE_LIBS_JOB_PARTITIONER_H_
