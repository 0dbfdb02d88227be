// Re-sharding restore: a shard's state under its current assignment, assembled from the
// checkpoints of any partitioning of the same model (S shards restore onto S'). Checkpoints
// address values by global coordinates (tensor name + offset, embedding key), so each of the
// target's slices is filled from the overlapping slices of the sources, and each source's
// embedding rows go to the shard that owns their key under the new partitioning
// (embedding::OwnerShard). Rows keep their idle time (for eviction), and admission sketches
// carry over: from the namesake source under the same shard count, and as the element-wise
// maximum of every source's under another (ADR 0010). A pure function: it reads the sources and
// builds new state; the shard swaps it in only when everything checked out, so a refused restore
// changes nothing. Thread-safety: pure function of its arguments (the update rule is immutable);
// thread-safe.
#ifndef SYNCOPATE_LIBS_CHECKPOINT_SHARD_RESTORE_H_
#define SYNCOPATE_LIBS_CHECKPOINT_SHARD_RESTORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "libs/embedding/embedding_table.h"
#include "libs/optim/update_rule.h"
#include "syncopate/v1/checkpoint.pb.h"
#include "syncopate/v1/coordinator.pb.h"

namespace syncopate::checkpoint {

// The shard being restored.
struct RestoreTarget {
  // The job (its id, seed and shard count) and the shard's partition (dense slices, tables).
  const v1::ShardAssignment* assignment = nullptr;
  // The shard's optimizer: its name (checkpoints record it) and how many dense state vectors it
  // keeps (one per slot of its update rule).
  std::string optimizer;
  int optimizer_vectors = 0;
  // The embedding rows' update rule (not owned; the restored tables keep a pointer to it).
  const optim::UpdateRule* row_rule = nullptr;
  // A warm start (ModelSpec.warm_start): the sources' parameters only, from any job, optimizer
  // and shard count. Optimizer state (dense and rows) starts as the rule's fresh slots, the
  // version, update count and schedule at zero, admission and idle times afresh; the sources'
  // own optimizer state, if any, is ignored.
  bool parameters_only = false;
};

// The restored state, ready to be swapped in.
struct RestoredShard {
  std::vector<float> parameters;                    // the shard's flat range
  std::vector<std::vector<float>> optimizer_state;  // optimizer_vectors × parameters.size()
  std::vector<std::unique_ptr<embedding::EmbeddingTable>> tables;  // in partition order
  int64_t version = 0;                                             // the newest source's
  int64_t optimizer_steps = 0;                                     // the largest among the sources
  double schedule_progress = 0;  // the learning-rate schedule's position: the largest too
};

// FAILED_PRECONDITION when a source belongs to another job or optimizer (unless
// parameters_only), has optimizer state of
// another shape or an embedding table the job lacks (or of another width), or when the sources
// do not cover every element of the shard's range exactly once; DATA_LOSS for a source whose
// fields are inconsistent (lengths that do not match their byte counts). Every slice is checked
// before anything is allocated for it, so a crafted file cannot make it allocate what its fields
// claim (found by tests/fuzz/checkpoint_fuzz.cc).
absl::StatusOr<RestoredShard> RestoreShard(const RestoreTarget& target,
                                           const std::vector<v1::ShardCheckpoint>& sources);

}  // namespace syncopate::checkpoint

#endif  // SYNCOPATE_LIBS_CHECKPOINT_SHARD_RESTORE_H_
