#include "libs/data/criteo_block_cache.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "libs/common/status_macros.h"

namespace syncopate::data {

absl::StatusOr<CriteoBlockCache> CriteoBlockCache::Create(std::unique_ptr<CriteoFiles> files,
                                                          int64_t block_size,
                                                          int64_t cached_blocks) {
  if (block_size < 1 || cached_blocks < 1) {
    return absl::InvalidArgumentError("cached_blocks and block_size must be >= 1");
  }
  return CriteoBlockCache(std::move(files), block_size, cached_blocks);
}

absl::Status CriteoBlockCache::Gather(std::span<const int64_t> examples, CtrDataset& out) {
  const size_t n = examples.size();
  out.size = static_cast<int64_t>(n);
  out.numeric.resize(n * kCriteoNumeric);
  out.categorical.resize(n * kCriteoCategorical);
  out.labels.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t e = examples[i];
    if (e < 0 || e >= files_->rows()) {
      return absl::OutOfRangeError(
          absl::StrCat("example ", e, " is outside the training set's ", files_->rows()));
    }
    SYNCOPATE_ASSIGN_OR_RETURN(const Block* block, BlockOf(e));
    const int64_t row = e % block_size_;
    std::copy_n(block->rows.numeric_row(row), kCriteoNumeric,
                out.numeric.data() + i * kCriteoNumeric);
    std::copy_n(block->rows.categorical_row(row), kCriteoCategorical,
                out.categorical.data() + i * kCriteoCategorical);
    out.labels[i] = block->rows.labels[row];
  }
  return absl::OkStatus();
}

absl::StatusOr<const CriteoBlockCache::Block*> CriteoBlockCache::BlockOf(int64_t e) {
  const int64_t begin = e / block_size_ * block_size_;
  ++clock_;
  if (auto it = blocks_.find(begin); it != blocks_.end()) {
    it->second.last_used = clock_;
    return &it->second;
  }
  SYNCOPATE_ASSIGN_OR_RETURN(CtrDataset rows,
                             files_->Read(begin, std::min(begin + block_size_, files_->rows())));
  if (static_cast<int64_t>(blocks_.size()) >= cached_blocks_) {
    blocks_.erase(std::min_element(
        blocks_.begin(), blocks_.end(),
        [](const auto& a, const auto& b) { return a.second.last_used < b.second.last_used; }));
  }
  Block& block = blocks_[begin];
  block = Block{.rows = std::move(rows), .last_used = clock_};
  return &block;
}

}  // namespace syncopate::data
