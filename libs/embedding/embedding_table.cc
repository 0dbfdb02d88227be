#include "libs/embedding/embedding_table.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#ifdef __linux__
#include <sys/mman.h>
#endif
#include "libs/common/status_macros.h"
#include "libs/tensor/initializer.h"

namespace syncopate::embedding {
namespace {

using ::syncopate::v1::Initializer;

// Chunk sizing. Chunks start at kFirstChunkRows and double up to kMaxChunkBytes, then stay there.
// Doubling keeps a small table (a categorical column with a handful of values; a WDL job has 26
// tables on every shard) at a few kilobytes, while the unused tail of the arena is never more
// than the last chunk: at most about as many rows as are already stored while chunks grow, and
// at most 8 MiB once they are full size (under 7% of a 1M-row, dim-16 Adagrad table). 8 MiB
// (64k rows of dim 16 with one slot) makes the chunk list tiny and is four huge pages.
constexpr size_t kFirstChunkRows = 64;
constexpr size_t kMaxChunkBytes = size_t{8} << 20;

// Rules with more slots than this are refused (Adam, the largest, has 2), so Apply can hand the
// rule its slot views from the stack.
constexpr int kMaxSlots = 4;

// Keys resolved (and their rows prefetched) ahead of use by the batched calls: enough misses in
// flight to cover memory latency, few enough that the rows (32 x 192 bytes for dim-16 Adam) stay
// in L1 until used.
constexpr size_t kBlock = 32;
constexpr size_t kCacheLine = 64;
constexpr size_t kHugePage = size_t{2} << 20;

// An evicting table's row trailer: key (8 bytes) then last-touched step (8 bytes).
constexpr size_t kTrailerFloats = 16 / sizeof(float);

}  // namespace

absl::StatusOr<std::unique_ptr<EmbeddingTable>> EmbeddingTable::Create(
    const v1::EmbeddingTableSpec& spec, uint64_t seed, const optim::UpdateRule* rule) {
  const std::string table = absl::StrCat("embedding table '", spec.name(), "'");
  if (rule == nullptr) return absl::InvalidArgumentError(absl::StrCat(table, ": no update rule"));
  if (rule->num_slots() < 0 || rule->num_slots() > kMaxSlots) {
    return absl::InvalidArgumentError(
        absl::StrCat(table, ": update rule ", std::string(rule->name()), " has ", rule->num_slots(),
                     " slots, at most ", kMaxSlots, " are supported"));
  }
  if (spec.dim() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(table, ": dim must be > 0, got ", spec.dim()));
  }
  if (spec.init().kind() != Initializer::ZEROS && spec.init().kind() != Initializer::UNIFORM) {
    return absl::InvalidArgumentError(absl::StrCat(table,
                                                   ": init.kind must be ZEROS or UNIFORM, got ",
                                                   Initializer::Kind_Name(spec.init().kind())));
  }
  if (spec.admit_after_count() < 0 || spec.admit_after_count() > AdmissionSketch::kMaxCount) {
    return absl::InvalidArgumentError(absl::StrCat(table, ": admit_after_count must be in [0, ",
                                                   AdmissionSketch::kMaxCount, "], got ",
                                                   spec.admit_after_count()));
  }
  if (spec.evict_after_updates() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        table, ": evict_after_updates must be >= 0, got ", spec.evict_after_updates()));
  }
  // Initialising an empty row checks the rest (UNIFORM's scale) once, so row creation need not.
  SYNCOPATE_RETURN_IF_ERROR(
      tensor::InitializeRow(spec.init(), seed, spec.name(), 0, std::span<float>()));
  return std::unique_ptr<EmbeddingTable>(new EmbeddingTable(spec, seed, rule));
}

EmbeddingTable::EmbeddingTable(const v1::EmbeddingTableSpec& spec, uint64_t seed,
                               const optim::UpdateRule* rule)
    : spec_(spec),
      seed_(seed),
      rule_(rule),
      dim_(spec.dim()),
      num_slots_(rule->num_slots()),
      row_floats_(static_cast<size_t>(spec.dim()) * (1 + rule->num_slots())),
      evict_after_updates_(spec.evict_after_updates()),
      admit_after_count_(spec.admit_after_count()),
      stride_floats_(row_floats_ + (evict_after_updates_ > 0 ? kTrailerFloats : 0)),
      max_chunk_rows_(std::max<size_t>(1, kMaxChunkBytes / (stride_floats_ * sizeof(float)))) {
  // Admitting after one sighting is admitting every key: no sketch needed.
  if (admit_after_count_ > 1) admission_ = std::make_unique<AdmissionSketch>();
}

void EmbeddingTable::FreeChunk::operator()(float* chunk) const { std::free(chunk); }

float* EmbeddingTable::AllocateRow() {
  if (free_head_ != nullptr) {
    float* row = free_head_;
    free_head_ = NextFree(row);
    return row;
  }
  if (chunks_.empty() || last_chunk_used_ == chunk_rows_.back()) {
    const size_t rows = chunks_.empty() ? std::min(kFirstChunkRows, max_chunk_rows_)
                                        : std::min(2 * chunk_rows_.back(), max_chunk_rows_);
    const size_t row_bytes = stride_floats_ * sizeof(float);
    size_t bytes = rows * row_bytes;
    void* chunk = nullptr;
    if (bytes >= kHugePage) {
      // Chunks of 2 MiB and more are whole, aligned huge pages and ask for transparent huge
      // pages: random rows over gigabytes otherwise miss the TLB on nearly every access
      // (measured: about 1.5x the batched push rate on the 10M-row benchmark table). Rounding
      // down (to fewer rows than doubling asked for) keeps the unused tail small; a row larger
      // than the rounded size gets the pages it needs.
      const size_t pages = std::max(bytes / kHugePage, (row_bytes + kHugePage - 1) / kHugePage);
      bytes = pages * kHugePage;
      chunk = std::aligned_alloc(kHugePage, bytes);
#ifdef __linux__
      if (chunk != nullptr) madvise(chunk, bytes, MADV_HUGEPAGE);
#endif
    } else {
      chunk = std::malloc(bytes);
    }
    // Out of memory is fatal as it is for std::vector: there is no partial table to fall back on.
    if (chunk == nullptr) throw std::bad_alloc();
    // Uninitialised: every row is written in full before it is read.
    chunks_.emplace_back(static_cast<float*>(chunk));
    arena_bytes_ += static_cast<int64_t>(bytes);
    chunk_rows_.push_back(bytes / row_bytes);
    last_chunk_used_ = 0;
  }
  ++arena_rows_;
  return chunks_.back().get() + stride_floats_ * last_chunk_used_++;
}

void EmbeddingTable::WriteTrailer(float* row, uint64_t key, int64_t last_touched) const {
  // memcpy: the trailer is 4-byte aligned only (a row of an odd number of floats).
  std::memcpy(row + row_floats_, &key, sizeof(key));
  std::memcpy(row + row_floats_ + 2, &last_touched, sizeof(last_touched));
}

void EmbeddingTable::Touch(float* row, int64_t step) const {
  if (evicts()) std::memcpy(row + row_floats_ + 2, &step, sizeof(step));
}

uint64_t EmbeddingTable::TrailerKey(const float* row) const {
  uint64_t key;
  std::memcpy(&key, row + row_floats_, sizeof(key));
  return key;
}

float* EmbeddingTable::NextFree(const float* row) const {
  float* next;
  std::memcpy(&next, row + row_floats_, sizeof(next));
  return next;
}

int64_t EmbeddingTable::LastTouched(const float* row) const {
  int64_t step;
  std::memcpy(&step, row + row_floats_ + 2, sizeof(step));
  return step;
}

void EmbeddingTable::InitializeRow(uint64_t key, float* row) const {
  // Create validated the initializer, so this cannot fail.
  (void)tensor::InitializeRow(spec_.init(), seed_, spec_.name(), key,
                              std::span<float>(row, static_cast<size_t>(dim_)));
  for (int slot = 0; slot < num_slots_; ++slot) {
    float* begin = row + static_cast<size_t>(dim_) * (1 + slot);
    std::fill(begin, begin + dim_, rule_->slot_initial_value(slot));
  }
}

float* EmbeddingTable::CreateRow(uint64_t key) {
  float* row = AllocateRow();
  InitializeRow(key, row);
  if (evicts()) WriteTrailer(row, key, step_);
  ++events_.admitted;
  return row;
}

float* EmbeddingTable::Resolve(uint64_t key, Access access, int64_t step) {
  if (admission_ == nullptr) {
    auto [it, inserted] = index_.try_emplace(key, nullptr);
    if (inserted) it->second = CreateRow(key);
    Touch(it->second, step);
    return it->second;
  }
  if (auto it = index_.find(key); it != index_.end()) {
    Touch(it->second, step);
    return it->second;
  }
  // Only training reads count sightings: a gradient follows a read of the same batch, so
  // counting both would count every sighting twice.
  if (access == Access::kUpdate) {
    ++events_.unadmitted_gradients;
    return nullptr;
  }
  if (admission_->Add(key) < admit_after_count_) {
    ++events_.unadmitted_lookups;
    return nullptr;
  }
  float* row = CreateRow(key);
  Touch(row, step);
  index_.emplace(key, row);
  return row;
}

void EmbeddingTable::ReadAbsent(uint64_t key, std::span<float> out) const {
  if (admits()) {
    std::fill(out.begin(), out.end(), 0.0f);
    return;
  }
  (void)tensor::InitializeRow(spec_.init(), seed_, spec_.name(), key, out);
}

void EmbeddingTable::Pull(uint64_t key, std::span<float> out) {
  PullBatch(std::span<const uint64_t>(&key, 1), out);
}

void EmbeddingTable::Peek(uint64_t key, std::span<float> out) const {
  auto it = index_.find(key);
  if (it == index_.end()) {
    ReadAbsent(key, out);
    return;
  }
  std::copy(it->second, it->second + dim_, out.begin());
}

void EmbeddingTable::ApplyToRow(float* row, std::span<const float> grad,
                                const optim::Step& step) const {
  const size_t dim = static_cast<size_t>(dim_);
  std::array<std::span<float>, kMaxSlots> slots;
  for (int slot = 0; slot < num_slots_; ++slot) {
    slots[slot] = std::span<float>(row + dim * (1 + slot), dim);
  }
  rule_->Apply(std::span<float>(row, dim), grad,
               std::span<const std::span<float>>(slots.data(), static_cast<size_t>(num_slots_)),
               step);
}

void EmbeddingTable::Apply(uint64_t key, std::span<const float> grad, const optim::Step& step) {
  ApplyBatch(std::span<const uint64_t>(&key, 1), grad, step);
}

void EmbeddingTable::ResolveBlock(std::span<const uint64_t> keys, Access access, int64_t step,
                                  float** rows) {
  for (const uint64_t key : keys) index_.prefetch(key);
  const size_t row_bytes = stride_floats_ * sizeof(float);
  for (size_t i = 0; i < keys.size(); ++i) {
    rows[i] = Resolve(keys[i], access, step);
    if (rows[i] == nullptr) continue;
    const char* bytes = reinterpret_cast<const char*>(rows[i]);
    for (size_t line = 0; line < row_bytes; line += kCacheLine) {
      __builtin_prefetch(bytes + line, /*rw=*/1);
    }
  }
}

void EmbeddingTable::PullBatch(std::span<const uint64_t> keys, std::span<float> out) {
  const size_t dim = static_cast<size_t>(dim_);
  std::array<float*, kBlock> rows;
  for (size_t begin = 0; begin < keys.size(); begin += kBlock) {
    const std::span<const uint64_t> block =
        keys.subspan(begin, std::min(kBlock, keys.size() - begin));
    ResolveBlock(block, Access::kRead, step_, rows.data());
    for (size_t i = 0; i < block.size(); ++i) {
      const std::span<float> to = out.subspan((begin + i) * dim, dim);
      if (rows[i] == nullptr) {
        ReadAbsent(block[i], to);
      } else {
        std::copy(rows[i], rows[i] + dim, to.begin());
      }
    }
  }
}

void EmbeddingTable::ApplyBatch(std::span<const uint64_t> keys, std::span<const float> grads,
                                const optim::Step& step) {
  const size_t dim = static_cast<size_t>(dim_);
  std::array<float*, kBlock> rows;
  for (size_t begin = 0; begin < keys.size(); begin += kBlock) {
    const std::span<const uint64_t> block =
        keys.subspan(begin, std::min(kBlock, keys.size() - begin));
    ResolveBlock(block, Access::kUpdate, step.index, rows.data());
    for (size_t i = 0; i < block.size(); ++i) {
      if (rows[i] != nullptr) ApplyToRow(rows[i], grads.subspan((begin + i) * dim, dim), step);
    }
  }
}

int64_t EmbeddingTable::EndUpdate(int64_t step) {
  step_ = step;
  if (!evicts() || arena_rows_ == 0) return 0;
  // One pass over the arena every evict_after_updates updates (the header says why).
  int64_t budget = (arena_rows_ + evict_after_updates_ - 1) / evict_after_updates_;
  int64_t evicted = 0;
  while (budget > 0) {
    if (sweep_chunk_ >= chunks_.size()) sweep_chunk_ = 0;
    const size_t used =
        sweep_chunk_ + 1 == chunks_.size() ? last_chunk_used_ : chunk_rows_[sweep_chunk_];
    if (sweep_row_ >= used) {
      ++sweep_chunk_;
      sweep_row_ = 0;
      continue;
    }
    --budget;
    float* row = chunks_[sweep_chunk_].get() + stride_floats_ * sweep_row_++;
    const int64_t touched = LastTouched(row);
    if (touched == kFreeRow || step - touched < evict_after_updates_) continue;
    index_.erase(TrailerKey(row));
    // The free list runs through the freed rows' trailers: it costs no memory of its own.
    uint64_t next;
    std::memcpy(&next, &free_head_, sizeof(next));
    WriteTrailer(row, next, kFreeRow);
    free_head_ = row;
    ++evicted;
  }
  events_.evicted += evicted;
  return evicted;
}

void EmbeddingTable::ForEach(
    const std::function<void(uint64_t key, std::span<const float> value,
                             std::span<const float> slots, int64_t last_touched)>& fn) const {
  const size_t dim = static_cast<size_t>(dim_);
  for (const auto& [key, row] : index_) {
    fn(key, std::span<const float>(row, dim), std::span<const float>(row + dim, row_floats_ - dim),
       evicts() ? LastTouched(row) : step_);
  }
}

void EmbeddingTable::Set(uint64_t key, std::span<const float> value, std::span<const float> slots,
                         int64_t last_touched) {
  auto [it, inserted] = index_.try_emplace(key, nullptr);
  if (inserted) it->second = AllocateRow();
  float* row = it->second;
  std::copy(value.begin(), value.begin() + dim_, row);
  std::copy(slots.begin(), slots.begin() + (row_floats_ - dim_), row + dim_);
  if (evicts()) WriteTrailer(row, key, last_touched);
}

int64_t EmbeddingTable::memory_bytes() const {
  // absl's SwissTable (raw_hash_set.h, AllocSize) allocates one control byte per slot plus a
  // sentinel and a copy of the first group (16 bytes in all on SSE2), padded to the slots'
  // alignment, then capacity() slots.
  using Slot = decltype(index_)::value_type;
  const size_t capacity = index_.capacity();
  const size_t control_bytes = (capacity + 16 + alignof(Slot) - 1) / alignof(Slot) * alignof(Slot);
  const size_t index_bytes = capacity == 0 ? 0 : control_bytes + capacity * sizeof(Slot);
  return arena_bytes_ + static_cast<int64_t>(index_bytes) +
         static_cast<int64_t>(chunks_.capacity() * sizeof(chunks_[0]) +
                              chunk_rows_.capacity() * sizeof(chunk_rows_[0])) +
         (admission_ == nullptr ? 0 : admission_->memory_bytes());
}

int64_t EmbeddingTable::raw_bytes() const {
  return size() * static_cast<int64_t>(row_floats_ * sizeof(float));
}

}  // namespace syncopate::embedding
