// The small shard assignment the shard fuzz targets run on: flat [10, 14) of tensors "w" (3
// elements) and "b" (1), G = 4, workers 1 and 2 with local batch 2; one embedding table "emb" of
// width 2 (this shard owns the keys embedding::OwnerShard maps to 1 of 2).
#ifndef SYNCOPATE_TESTS_FUZZ_SMALL_ASSIGNMENT_H_
#define SYNCOPATE_TESTS_FUZZ_SMALL_ASSIGNMENT_H_

#include <tuple>

#include "syncopate/v1/coordinator.pb.h"

namespace syncopate::fuzz {

inline v1::ShardAssignment SmallAssignment(v1::Mode mode, bool momentum) {
  v1::ShardAssignment a;
  v1::JobSpec& job = *a.mutable_job();
  job.mutable_optimizer()->set_kind(momentum ? v1::OptimizerSpec::MOMENTUM
                                             : v1::OptimizerSpec::SGD);
  job.mutable_optimizer()->set_learning_rate(0.5f);
  job.mutable_optimizer()->set_momentum(0.9f);
  job.set_global_batch(4);
  job.set_num_workers(2);
  job.set_num_shards(2);
  job.set_mode(mode);
  job.set_seed(7);
  v1::ShardPartition& p = *a.mutable_partition();
  p.set_shard_id(1);
  p.set_flat_begin(10);
  p.set_flat_end(14);
  for (auto [tensor, offset, length] : {std::tuple{"w", 10, 3}, std::tuple{"b", 13, 1}}) {
    v1::TensorSlice* slice = p.add_slices();
    slice->set_tensor(tensor);
    slice->set_flat_offset(offset);
    slice->set_length(length);
    slice->mutable_init()->set_kind(v1::Initializer::ZEROS);
  }
  v1::EmbeddingTableSpec* table = p.add_tables();
  table->set_name("emb");
  table->set_dim(2);
  table->mutable_init()->set_kind(v1::Initializer::UNIFORM);
  table->mutable_init()->set_scale(0.1);
  v1::Membership& m = *a.mutable_membership();
  m.set_generation(1);
  m.add_worker_ids(1);
  m.add_worker_ids(2);
  m.set_local_batch(2);
  a.set_mode(mode);
  return a;
}

}  // namespace syncopate::fuzz

#endif  // SYNCOPATE_TESTS_FUZZ_SMALL_ASSIGNMENT_H_
