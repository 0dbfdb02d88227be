#include "libs/job/partitioner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "libs/tensor/packed.h"

namespace syncopate::job {

absl::StatusOr<std::vector<v1::ShardPartition>> PartitionDense(
    std::span<const model::DenseTensorSpec> tensors, int num_shards) {
  int64_t total = 0;
  for (const model::DenseTensorSpec& t : tensors) total += t.size();
  if (num_shards <= 0) return absl::InvalidArgumentError("num_shards must be positive");
  if (total < num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot split ", total, " parameters across ", num_shards, " shards"));
  }
  std::vector<v1::ShardPartition> partitions(num_shards);
  for (int s = 0; s < num_shards; ++s) {
    v1::ShardPartition& p = partitions[s];
    p.set_shard_id(s);
    p.set_flat_begin(total * s / num_shards);
    p.set_flat_end(total * (s + 1) / num_shards);
  }
  // Walk the tensors once, cutting each where it crosses a shard boundary.
  int64_t flat = 0;
  int shard = 0;
  for (const model::DenseTensorSpec& t : tensors) {
    int64_t done = 0;
    while (done < t.size()) {
      while (flat >= partitions[shard].flat_end()) ++shard;
      const int64_t length = std::min(t.size() - done, partitions[shard].flat_end() - flat);
      v1::TensorSlice* slice = partitions[shard].add_slices();
      slice->set_tensor(t.name);
      slice->set_tensor_offset(done);
      slice->set_flat_offset(flat);
      slice->set_length(length);
      *slice->mutable_init() = t.init;
      slice->set_buffer(t.buffer);
      done += length;
      flat += length;
    }
  }
  return partitions;
}

absl::StatusOr<std::vector<v1::ShardPartition>> PartitionModel(const ModelLayout& layout,
                                                               int num_shards) {
  absl::StatusOr<std::vector<v1::ShardPartition>> partitions =
      PartitionDense(layout.dense, num_shards);
  if (!partitions.ok()) return partitions.status();
  for (v1::ShardPartition& partition : *partitions) {
    for (const v1::EmbeddingTableSpec& table : layout.tables) *partition.add_tables() = table;
  }
  return partitions;
}

v1::ModelLayoutRecord LayoutRecord(const ModelLayout& layout) {
  v1::ModelLayoutRecord record;
  for (size_t i = 0; i < layout.dense.size(); ++i) {
    const model::DenseTensorSpec& tensor = layout.dense[i];
    v1::TensorShape* shape = record.add_dense();
    shape->set_name(tensor.name);
    shape->set_buffer(tensor.buffer);
    shape->set_dtype(tensor.dtype);
    if (i < layout.dense_shapes.size()) {
      for (int64_t d : layout.dense_shapes[i]) shape->add_shape(d);
    } else {
      shape->add_shape(tensor.rows);
      shape->add_shape(tensor.cols);
    }
  }
  for (const v1::EmbeddingTableSpec& table : layout.tables) {
    v1::TableShape* shape = record.add_tables();
    shape->set_name(table.name());
    shape->set_dim(table.dim());
    *shape->mutable_init() = table.init();
    shape->set_admit_after_count(table.admit_after_count());
  }
  return record;
}

std::string PackedInitialValues(const ModelLayout& layout, const v1::ShardPartition& partition) {
  if (layout.initial_values.empty()) return "";
  return tensor::PackFloats(
      std::span<const float>(layout.initial_values)
          .subspan(partition.flat_begin(), partition.flat_end() - partition.flat_begin()));
}

}  // namespace syncopate::job
