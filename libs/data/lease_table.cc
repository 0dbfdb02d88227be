#include "libs/data/lease_table.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <numeric>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "libs/common/splitmix64.h"

namespace syncopate::data {
namespace {

// Distinct domain tags keep the epoch-order seeds and the per-block shuffle seeds (DeriveSeed)
// from ever coinciding for the same (seed, epoch).
constexpr uint64_t kEpochOrderDomain = 0x6f72646572;    // "order"
constexpr uint64_t kBlockShuffleDomain = 0x626c6f636b;  // "block"

uint64_t EpochOrderSeed(uint64_t seed, int32_t epoch) {
  return DeriveSeed(DeriveSeed(seed, kEpochOrderDomain), static_cast<uint64_t>(epoch));
}

uint64_t BlockShuffleSeed(uint64_t seed, int32_t epoch, int64_t block) {
  return DeriveSeed(DeriveSeed(DeriveSeed(seed, kBlockShuffleDomain), static_cast<uint64_t>(epoch)),
                    static_cast<uint64_t>(block));
}

// Uniform in [0, bound) by rejection (no modulo bias); bound > 0. Written out because
// std::uniform_int_distribution's algorithm differs between standard libraries.
uint64_t UniformBelow(std::mt19937_64& rng, uint64_t bound) {
  // Values below 2^64 mod bound are rejected so the rest split evenly into `bound` classes.
  const uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    const uint64_t r = rng();
    if (r >= threshold) return r % bound;
  }
}

// Fisher-Yates (Knuth, TAOCP vol. 2, Algorithm P), driven by mt19937_64(seed).
void ShuffleDeterministically(std::vector<int64_t>& values, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (size_t i = values.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(UniformBelow(rng, i));
    std::swap(values[i - 1], values[j]);
  }
}

std::vector<int64_t> ShuffledRange(int64_t begin, int64_t end, uint64_t seed) {
  std::vector<int64_t> values(static_cast<size_t>(std::max<int64_t>(end - begin, 0)));
  std::iota(values.begin(), values.end(), begin);
  ShuffleDeterministically(values, seed);
  return values;
}

}  // namespace

absl::StatusOr<LeaseTable> LeaseTable::Create(int64_t num_examples, int64_t block_size,
                                              uint64_t seed) {
  if (num_examples <= 0 || block_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a lease table needs num_examples > 0 and block_size > 0, got num_examples=", num_examples,
        " block_size=", block_size));
  }
  return LeaseTable(num_examples, block_size, seed);
}

LeaseTable::LeaseTable(int64_t num_examples, int64_t block_size, uint64_t seed)
    : num_examples_(num_examples),
      block_size_(block_size),
      num_blocks_((num_examples + block_size - 1) / block_size),
      seed_(seed),
      epoch_order_(ShuffledRange(0, num_blocks_, EpochOrderSeed(seed, 0))) {}

int64_t LeaseTable::BlockEnd(int64_t index) const {
  return std::min(BlockBegin(index) + block_size_, num_examples_);
}

LeaseTable::Block LeaseTable::NextFreshBlock() {
  if (next_in_order_ == num_blocks_) {
    ++epoch_;
    epoch_order_ = ShuffledRange(0, num_blocks_, EpochOrderSeed(seed_, epoch_));
    next_in_order_ = 0;
  }
  return Block{epoch_, epoch_order_[next_in_order_++]};
}

syncopate::v1::DataLease LeaseTable::Issue(const Block& block, int32_t worker) {
  syncopate::v1::DataLease lease;
  lease.set_lease_id(next_lease_id_++);
  lease.set_epoch(block.epoch);
  lease.set_begin(BlockBegin(block.index));
  lease.set_end(BlockEnd(block.index));
  lease.set_shuffle_seed(BlockShuffleSeed(seed_, block.epoch, block.index));
  outstanding_.emplace(lease.lease_id(), Holder{worker, block});
  return lease;
}

syncopate::v1::DataLease LeaseTable::Acquire(int32_t worker) {
  if (!requeued_.empty()) {
    const Block block = requeued_.front();
    requeued_.pop_front();
    return Issue(block, worker);
  }
  return Issue(NextFreshBlock(), worker);
}

absl::Status LeaseTable::Complete(int64_t lease_id, int32_t worker) {
  if (lease_id <= 0 || lease_id >= next_lease_id_) {
    return absl::NotFoundError(absl::StrCat("lease ", lease_id, " was never issued"));
  }
  auto it = outstanding_.find(lease_id);
  if (it == outstanding_.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "lease ", lease_id,
        " is no longer outstanding (already completed, or released when its worker departed)"));
  }
  if (it->second.worker != worker) {
    return absl::FailedPreconditionError(absl::StrCat("lease ", lease_id, " is held by worker ",
                                                      it->second.worker, ", not worker ", worker));
  }
  const int64_t block = it->second.block.index;
  completed_examples_ += BlockEnd(block) - BlockBegin(block);
  outstanding_.erase(it);
  return absl::OkStatus();
}

int LeaseTable::ReleaseWorker(int32_t worker) {
  int released = 0;
  for (auto it = outstanding_.begin(); it != outstanding_.end();) {
    if (it->second.worker == worker) {
      requeued_.push_back(it->second.block);
      it = outstanding_.erase(it);
      ++released;
    } else {
      ++it;
    }
  }
  return released;
}

syncopate::v1::LeaseTableProgress LeaseTable::Progress() const {
  syncopate::v1::LeaseTableProgress progress;
  progress.set_num_examples(num_examples_);
  progress.set_block_size(block_size_);
  progress.set_epoch(epoch_);
  progress.set_next_in_order(next_in_order_);
  // Re-queued blocks first, then the outstanding ones in issue order: the order they will be
  // handed out again after a restart.
  auto add = [&progress](const Block& block) {
    syncopate::v1::LeaseBlock* out = progress.add_unfinished();
    out->set_epoch(block.epoch);
    out->set_index(block.index);
  };
  for (const Block& block : requeued_) add(block);
  for (const auto& [id, holder] : outstanding_) add(holder.block);
  progress.set_next_lease_id(next_lease_id_);
  progress.set_completed_examples(completed_examples_);
  return progress;
}

absl::Status LeaseTable::Restore(const syncopate::v1::LeaseTableProgress& progress) {
  if (progress.num_examples() != num_examples_ || progress.block_size() != block_size_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "lease progress is of ", progress.num_examples(), " examples in blocks of ",
        progress.block_size(), ", this table has ", num_examples_, " in blocks of ", block_size_));
  }
  if (progress.epoch() < 0 || progress.next_in_order() < 0 ||
      progress.next_in_order() > num_blocks_ || progress.next_lease_id() < 1 ||
      progress.completed_examples() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("inconsistent lease progress: ", progress.ShortDebugString()));
  }
  std::deque<Block> unfinished;
  for (const syncopate::v1::LeaseBlock& block : progress.unfinished()) {
    if (block.epoch() < 0 || block.epoch() > progress.epoch() || block.index() < 0 ||
        block.index() >= num_blocks_) {
      return absl::InvalidArgumentError(absl::StrCat("lease progress names block ", block.index(),
                                                     " of epoch ", block.epoch(), " (", num_blocks_,
                                                     " blocks, epoch ", progress.epoch(), ")"));
    }
    unfinished.push_back(Block{block.epoch(), block.index()});
  }
  epoch_ = progress.epoch();
  epoch_order_ = ShuffledRange(0, num_blocks_, EpochOrderSeed(seed_, epoch_));
  next_in_order_ = progress.next_in_order();
  requeued_ = std::move(unfinished);
  outstanding_.clear();
  next_lease_id_ = progress.next_lease_id();
  completed_examples_ = progress.completed_examples();
  return absl::OkStatus();
}

std::vector<int64_t> LeaseExampleOrder(const syncopate::v1::DataLease& lease) {
  return ShuffledRange(lease.begin(), lease.end(), lease.shuffle_seed());
}

}  // namespace syncopate::data
