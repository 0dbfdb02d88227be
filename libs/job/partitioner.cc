#include "libs/job/partitioner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "libs/job/job_spec.h"

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
      done += length;
      flat += length;
    }
  }
  return partitions;
}

absl::StatusOr<model::CtrModel> CtrModelForJob(const v1::JobSpec& spec) {
  model::CtrModelOptions options;
  switch (spec.model().kind()) {
    case v1::ModelSpec::WDL:
      options.architecture = model::CtrArchitecture::kWideDeep;
      break;
    case v1::ModelSpec::DEEPFM:
      options.architecture = model::CtrArchitecture::kDeepFm;
      break;
    case v1::ModelSpec::DCN:
      options.architecture = model::CtrArchitecture::kDcn;
      break;
    default:
      return absl::InvalidArgumentError("not a CTR (WDL, DEEPFM or DCN) job");
  }
  for (const v1::FieldCross& cross : spec.model().wide_crosses()) {
    // Criteo column numbers C1..C26 in the job; 0-based fields in the model.
    options.crosses.push_back({cross.first() - 1, cross.second() - 1});
  }
  options.embedding_dim = spec.model().embedding_dim();
  options.hidden.assign(spec.model().hidden().begin(), spec.model().hidden().end());
  options.cross_layers = spec.model().cross_layers();
  return model::CtrModel::Create(std::move(options));
}

absl::StatusOr<ModelLayout> LayoutForJob(const v1::JobSpec& spec) {
  ModelLayout layout;
  if (IsCtrModel(spec.model().kind())) {
    absl::StatusOr<model::CtrModel> ctr = CtrModelForJob(spec);
    if (!ctr.ok()) return ctr.status();
    layout.dense = ctr->tensors();
    layout.tables = ctr->tables();
    for (v1::EmbeddingTableSpec& table : layout.tables) {
      table.set_admit_after_count(spec.model().admit_after_count());
      table.set_evict_after_updates(spec.model().evict_after_updates());
    }
    return layout;
  }
  absl::StatusOr<model::Mlp> mlp = ModelForJob(spec);
  if (!mlp.ok()) return mlp.status();
  layout.dense = mlp->tensors();
  return layout;
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

absl::StatusOr<model::Mlp> ModelForJob(const v1::JobSpec& spec) {
  if (spec.dataset().kind() != v1::DatasetSpec::FASHION_MNIST ||
      spec.model().kind() != v1::ModelSpec::MLP) {
    return absl::InvalidArgumentError("only FASHION_MNIST jobs have an MLP");
  }
  constexpr int kPixels = 28 * 28;
  constexpr int kClasses = 10;
  return model::Mlp::Create(
      kPixels, std::vector<int>(spec.model().hidden().begin(), spec.model().hidden().end()),
      kClasses);
}

}  // namespace syncopate::job
