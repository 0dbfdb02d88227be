// CriteoBlockCache: examples of a Criteo dataset on disk (CriteoFiles) gathered by number, read
// a lease block at a time. A worker's batches come from the lease blocks it holds, so parsing
// whole blocks and keeping the last few (least recently used dropped first) reads each block
// about once per epoch while memory stays at `cached_blocks` blocks whatever the dataset's size
// (ADR 0011). Used by the CTR workload and by syncopate.torch.Criteo.
// Thread-safety: thread-compatible (one reader owns an instance).
#ifndef SYNCOPATE_LIBS_DATA_CRITEO_BLOCK_CACHE_H_
#define SYNCOPATE_LIBS_DATA_CRITEO_BLOCK_CACHE_H_

#include <cstdint>
#include <memory>
#include <span>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "libs/data/criteo_files.h"
#include "libs/data/criteo_reader.h"

namespace syncopate::data {

class CriteoBlockCache {
 public:
  // INVALID_ARGUMENT unless block_size and cached_blocks are >= 1.
  static absl::StatusOr<CriteoBlockCache> Create(std::unique_ptr<CriteoFiles> files,
                                                 int64_t block_size, int64_t cached_blocks);

  int64_t rows() const { return files_->rows(); }
  CriteoFiles& files() { return *files_; }

  // The examples, in order, into `out` (resized). OUT_OF_RANGE for an example outside
  // [0, rows()); a read's errors (DATA_LOSS: a bad line, a file changed since it was counted).
  absl::Status Gather(std::span<const int64_t> examples, CtrDataset& out);

 private:
  struct Block {
    CtrDataset rows;
    int64_t last_used = 0;
  };
  CriteoBlockCache(std::unique_ptr<CriteoFiles> files, int64_t block_size, int64_t cached_blocks)
      : files_(std::move(files)), block_size_(block_size), cached_blocks_(cached_blocks) {}
  // The cached block holding example `e`, read (and the least recently used dropped) if absent.
  absl::StatusOr<const Block*> BlockOf(int64_t e);

  std::unique_ptr<CriteoFiles> files_;
  int64_t block_size_;
  int64_t cached_blocks_;
  absl::flat_hash_map<int64_t, Block> blocks_;  // keyed by first example; at most cached_blocks_
  int64_t clock_ = 0;                           // lookups, for least-recently-used
};

}  // namespace syncopate::data

#endif  // SYNCOPATE_LIBS_DATA_CRITEO_BLOCK_CACHE_H_
