// KeyRouting: the worker's side of the sparse partitioner. A batch's embedding keys (distinct,
// per table) go each to the shard embedding::OwnerShard assigns it; the rows the shards answer
// are put back in the batch's order; the row gradients of the step go back to the same shards,
// split the same way. ParameterClient routes every pull and push through it, and so does the
// simulator (libs/sim) for its simulated workers and evaluator: one routing, in one place.
//
// Keys keep their order within a shard's request (the batch's order, restricted to that shard),
// so a request is a deterministic function of the keys: no hash-order dependence.
// Thread-safety: thread-compatible (one training loop owns an instance).
#ifndef SYNCOPATE_LIBS_WORKER_KEY_ROUTING_H_
#define SYNCOPATE_LIBS_WORKER_KEY_ROUTING_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "libs/workload/workload.h"
#include "syncopate/v1/shard.pb.h"

namespace syncopate::worker {

class KeyRouting {
 public:
  // `table_dims`: the row width of each of the model's embedding tables (empty: a dense model).
  KeyRouting(int32_t num_shards, std::vector<int32_t> table_dims);

  // Routes the keys of the next pull (distinct keys per table); null or no tables routes none.
  // INVALID_ARGUMENT, routing nothing, unless `keys` lists every table of the model (or none).
  absl::Status Route(const workload::TableKeys* keys);
  // Tables the last Route routed (0: none, a dense pull).
  size_t tables() const { return keys_.size(); }

  // The rows shard `shard` is asked for: one SparseRows (table, packed keys) per table with keys
  // on that shard, in table order.
  std::vector<v1::SparseRows> Requests(int32_t shard) const;
  // Sizes `rows` for the routed keys (keys x width per table), ready for ScatterRows.
  void ShapeRows(workload::TableRows& rows) const;
  // Copies the rows of shard `shard`'s answer into their positions in `rows` (ShapeRows first).
  // DATA_LOSS if the answer holds other tables or row counts than the requests asked for.
  absl::Status ScatterRows(int32_t shard,
                           const google::protobuf::RepeatedPtrField<v1::SparseRows>& answered,
                           workload::TableRows& rows) const;
  // Shard `shard`'s share of `row_grads` (aligned with the routed keys): one SparseRows (table,
  // keys, values) per table with keys on that shard. INVALID_ARGUMENT unless `row_grads` has the
  // routed tables' shapes.
  absl::Status SplitGradients(int32_t shard, const workload::TableRows& row_grads,
                              std::vector<v1::SparseRows>& out) const;

 private:
  const int32_t num_shards_;
  const std::vector<int32_t> table_dims_;
  workload::TableKeys keys_;  // the last routed keys
  // positions_[shard][table]: indices into keys_[table] of the keys that shard owns, in order.
  std::vector<std::vector<std::vector<uint32_t>>> positions_;
};

}  // namespace syncopate::worker

#endif  // SYNCOPATE_LIBS_WORKER_KEY_ROUTING_H_
