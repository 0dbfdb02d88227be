// The coordinator's data lease table (docs/design.md §7): each epoch is split into blocks, the
// block order is shuffled per epoch, and blocks are leased to workers one at a time, so a fast
// worker simply asks more often and ingests more. A departed worker's leases are re-issued, so
// every example is seen once per epoch, save what a death replays.
//
// Reproducibility: every random choice derives from the job seed through SplitMix64 (Steele et al.,
// "Fast splittable pseudorandom number generators", OOPSLA 2014) feeding std::mt19937_64, whose
// output sequence the C++ standard fixes, and a hand-written Fisher-Yates shuffle with rejection
// sampling (std::shuffle and std::uniform_int_distribution are implementation-defined). The same
// seed gives the same orders on every platform and standard library.
//
// Thread-safety: LeaseTable is NOT thread-safe; the coordinator serializes all calls under its own
// mutex. LeaseExampleOrder is a pure function, safe to call concurrently.
#ifndef SYNCOPATE_LIBS_DATA_LEASE_TABLE_H_
#define SYNCOPATE_LIBS_DATA_LEASE_TABLE_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "syncopate/v1/coordinator.pb.h"

namespace syncopate::data {

class LeaseTable {
 public:
  // Splits [0, num_examples) into blocks of `block_size` examples (the last may be shorter). The
  // block order is shuffled per epoch with a seed derived from (seed, epoch). Leases never run
  // out: after the last block of epoch e the table moves on to epoch e + 1.
  // INVALID_ARGUMENT unless num_examples > 0 and block_size > 0.
  static absl::StatusOr<LeaseTable> Create(int64_t num_examples, int64_t block_size, uint64_t seed);

  // The next lease for `worker`: a block re-queued from a departed worker first (oldest first),
  // else the next block of the current epoch's order. lease_id is unique and > 0; shuffle_seed is
  // derived from (seed, epoch, block), so a re-issued block is visited in the same order.
  syncopate::v1::DataLease Acquire(int32_t worker);

  // Marks `lease_id` done. NOT_FOUND if the table never issued it; FAILED_PRECONDITION if another
  // worker holds it, or it is no longer outstanding (already completed, or released because
  // its worker departed: the late report is refused and the re-issued copy counts instead).
  absl::Status Complete(int64_t lease_id, int32_t worker);

  // Puts every lease `worker` holds back for re-issue, with the same epoch and block but a new
  // lease_id when re-issued. Returns how many leases were released.
  int ReleaseWorker(int32_t worker);

  // Examples in completed leases, over all epochs.
  int64_t completed_examples() const { return completed_examples_; }
  // Epoch of the most recently issued fresh (not re-queued) block; 0 before any Acquire.
  int32_t current_epoch() const { return epoch_; }
  // Leases issued and not yet completed or released.
  int64_t outstanding() const { return static_cast<int64_t>(outstanding_.size()); }

  // What a restarted coordinator needs to hand out exactly the unfinished blocks: the position
  // in the current epoch's order plus every issued block not yet completed (outstanding or
  // re-queued). Size is O(unfinished blocks), independent of the dataset.
  syncopate::v1::LeaseTableProgress Progress() const;

  // Continues from `progress` (taken by Progress() of a table of the same shape and seed): the
  // unfinished blocks are re-issued first (their holders are gone with the old coordinator),
  // completed ones never again, then the epoch's order continues where it stopped. Lease ids
  // continue after the old ones. FAILED_PRECONDITION for another table shape, INVALID_ARGUMENT
  // for an inconsistent record; the table is unchanged on error.
  absl::Status Restore(const syncopate::v1::LeaseTableProgress& progress);

 private:
  // No default member initializers: GCC rejects them in a nested struct that the enclosing
  // class's containers instantiate before the class is complete. Always brace-initialize.
  struct Block {
    int32_t epoch;
    int64_t index;  // block number within the epoch, before shuffling
  };
  struct Holder {
    int32_t worker;
    Block block;
  };

  LeaseTable(int64_t num_examples, int64_t block_size, uint64_t seed);

  int64_t BlockBegin(int64_t index) const { return index * block_size_; }
  int64_t BlockEnd(int64_t index) const;  // the last block may be shorter
  Block NextFreshBlock();
  syncopate::v1::DataLease Issue(const Block& block, int32_t worker);

  int64_t num_examples_;
  int64_t block_size_;
  int64_t num_blocks_;
  uint64_t seed_;

  int32_t epoch_ = 0;
  std::vector<int64_t> epoch_order_;  // block indices of `epoch_`, shuffled
  int64_t next_in_order_ = 0;         // position in epoch_order_ of the next fresh block
  std::deque<Block> requeued_;        // released by departed workers, re-issued first
  // Keyed by lease_id; ordered so ReleaseWorker re-queues in issue order (deterministic).
  absl::btree_map<int64_t, Holder> outstanding_;
  int64_t next_lease_id_ = 1;  // ids in [1, next_lease_id_) have been issued
  int64_t completed_examples_ = 0;
};

// The order a worker visits the examples of `lease`: [begin, end) shuffled deterministically with
// lease.shuffle_seed. Empty if end <= begin.
std::vector<int64_t> LeaseExampleOrder(const syncopate::v1::DataLease& lease);

}  // namespace syncopate::data

#endif  // SYNCOPATE_LIBS_DATA_LEASE_TABLE_H_
