#include "libs/embedding/embedding_table.h"

#include <algorithm>
#include <array>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
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
// (64k rows of dim 16 with one slot) makes the chunk list tiny and each allocation an mmap the
// kernel backs lazily.
constexpr size_t kFirstChunkRows = 64;
constexpr size_t kMaxChunkBytes = size_t{8} << 20;

// Rules with more slots than this are refused (Adam, the largest, has 2), so Apply can hand the
// rule its slot views from the stack.
constexpr int kMaxSlots = 4;

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
      max_chunk_rows_(std::max<size_t>(1, kMaxChunkBytes / (row_floats_ * sizeof(float)))) {}

float* EmbeddingTable::AllocateRow() {
  if (chunks_.empty() || last_chunk_used_ == last_chunk_rows_) {
    last_chunk_rows_ = chunks_.empty() ? std::min(kFirstChunkRows, max_chunk_rows_)
                                       : std::min(2 * last_chunk_rows_, max_chunk_rows_);
    // Uninitialised: every row is written in full before it is read.
    chunks_.push_back(std::make_unique_for_overwrite<float[]>(last_chunk_rows_ * row_floats_));
    arena_bytes_ += static_cast<int64_t>(last_chunk_rows_ * row_floats_ * sizeof(float));
    last_chunk_used_ = 0;
  }
  return chunks_.back().get() + row_floats_ * last_chunk_used_++;
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

float* EmbeddingTable::FindOrCreate(uint64_t key) {
  auto [it, inserted] = index_.try_emplace(key, nullptr);
  if (inserted) {
    it->second = AllocateRow();
    InitializeRow(key, it->second);
  }
  return it->second;
}

void EmbeddingTable::Pull(uint64_t key, std::span<float> out) {
  const float* row = FindOrCreate(key);
  std::copy(row, row + dim_, out.begin());
}

void EmbeddingTable::Peek(uint64_t key, std::span<float> out) const {
  auto it = index_.find(key);
  if (it == index_.end()) {
    (void)tensor::InitializeRow(spec_.init(), seed_, spec_.name(), key, out);
    return;
  }
  std::copy(it->second, it->second + dim_, out.begin());
}

void EmbeddingTable::Apply(uint64_t key, std::span<const float> grad, int64_t step) {
  float* row = FindOrCreate(key);
  const size_t dim = static_cast<size_t>(dim_);
  std::array<std::span<float>, kMaxSlots> slots;
  for (int slot = 0; slot < num_slots_; ++slot) {
    slots[slot] = std::span<float>(row + dim * (1 + slot), dim);
  }
  rule_->Apply(std::span<float>(row, dim), grad,
               std::span<const std::span<float>>(slots.data(), static_cast<size_t>(num_slots_)),
               step);
}

void EmbeddingTable::ForEach(const std::function<void(uint64_t key, std::span<const float> value,
                                                      std::span<const float> slots)>& fn) const {
  const size_t dim = static_cast<size_t>(dim_);
  for (const auto& [key, row] : index_) {
    fn(key, std::span<const float>(row, dim), std::span<const float>(row + dim, row_floats_ - dim));
  }
}

void EmbeddingTable::Set(uint64_t key, std::span<const float> value, std::span<const float> slots) {
  auto [it, inserted] = index_.try_emplace(key, nullptr);
  if (inserted) it->second = AllocateRow();
  float* row = it->second;
  std::copy(value.begin(), value.begin() + dim_, row);
  std::copy(slots.begin(), slots.begin() + (row_floats_ - dim_), row + dim_);
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
         static_cast<int64_t>(chunks_.capacity() * sizeof(chunks_[0]));
}

int64_t EmbeddingTable::raw_bytes() const {
  return size() * static_cast<int64_t>(row_floats_ * sizeof(float));
}

}  // namespace syncopate::embedding
