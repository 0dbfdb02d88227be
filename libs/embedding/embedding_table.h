// One embedding table's share on one parameter shard: the rows whose keys the shard owns
// (OwnerShard), each created on first touch with its deterministic initial value and updated
// lazily by the job's UpdateRule (only touched rows and their slots ever change, as in
// TensorFlow's sparse Adagrad and LazyAdam).
//
// Memory: rows live in a chunked arena, each row contiguous as [value(dim) | slot0(dim) | ...];
// a hash index maps key -> row. Growth allocates a new chunk and never moves a row, so it neither
// copies the table nor transiently doubles it; chunks of 2 MiB and more ask Linux for transparent
// huge pages. memory_bytes() reports what the table holds.
//
// Thread-safety: thread-compatible (const methods may run concurrently with each other, anything
// else needs exclusive access); the shard serialises access under its own lock.
#ifndef SYNCOPATE_LIBS_EMBEDDING_EMBEDDING_TABLE_H_
#define SYNCOPATE_LIBS_EMBEDDING_EMBEDDING_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "libs/optim/update_rule.h"
#include "syncopate/v1/cluster.pb.h"

namespace syncopate::embedding {

class EmbeddingTable {
 public:
  // `rule` (not owned, must outlive the table) decides the number of slots and their initial
  // value. INVALID_ARGUMENT for a null rule, dim <= 0, or an `init` that is not ZEROS or
  // UNIFORM with a finite scale > 0.
  static absl::StatusOr<std::unique_ptr<EmbeddingTable>> Create(const v1::EmbeddingTableSpec& spec,
                                                                uint64_t seed,
                                                                const optim::UpdateRule* rule);
  EmbeddingTable(const EmbeddingTable&) = delete;
  EmbeddingTable& operator=(const EmbeddingTable&) = delete;

  const v1::EmbeddingTableSpec& spec() const { return spec_; }
  int32_t dim() const { return dim_; }
  int64_t size() const { return static_cast<int64_t>(index_.size()); }  // rows stored

  // The spans below must have exactly the sizes stated (the caller validates wire and
  // checkpoint input against dim() first).

  // Writes the row's current value (dim floats) into `out`, creating the row with its
  // initializer value (and initial slots) if absent ("created on first touch").
  void Pull(uint64_t key, std::span<float> out);
  // Like Pull but never creates: an absent row reads as its initializer value (the evaluator's
  // reads).
  void Peek(uint64_t key, std::span<float> out) const;
  // Applies the rule to the row (created first if absent) with `grad` (dim floats) at the
  // shard's global `step` (index and scheduled rate). Lazy: untouched rows and their slots never
  // change. The int64 overloads use the spec's constant learning rate.
  void Apply(uint64_t key, std::span<const float> grad, const optim::Step& step);
  void Apply(uint64_t key, std::span<const float> grad, int64_t step) {
    Apply(key, grad, optim::Step{step, rule_->learning_rate()});
  }
  // Batched Pull and Apply: the same as calling Pull / Apply for each key in order (keys may
  // repeat), with `out` / `grads` holding keys.size() * dim floats, row i at [i*dim, (i+1)*dim).
  // Faster on large tables: they prefetch the index entries and rows of a block of keys before
  // touching any, so the cache and TLB misses of different rows overlap instead of queueing
  // behind one another (measured in bench/embedding_bench.cc).
  void PullBatch(std::span<const uint64_t> keys, std::span<float> out);
  void ApplyBatch(std::span<const uint64_t> keys, std::span<const float> grads,
                  const optim::Step& step);
  void ApplyBatch(std::span<const uint64_t> keys, std::span<const float> grads, int64_t step) {
    ApplyBatch(keys, grads, optim::Step{step, rule_->learning_rate()});
  }

  // Checkpoints: visits every row (order unspecified): key, value span (dim floats), and the
  // slots as one span of num_slots*dim floats (slot 0's dim floats, then slot 1's, ...).
  void ForEach(const std::function<void(uint64_t key, std::span<const float> value,
                                        std::span<const float> slots)>& fn) const;
  // Restore: sets (creating or overwriting) a row's value (dim floats) and slots (num_slots*dim
  // floats, laid out as ForEach gives them).
  void Set(uint64_t key, std::span<const float> value, std::span<const float> slots);

  // Bytes this table holds: arena chunks actually allocated + the hash index's capacity * slot
  // size + control bytes. (Used by metrics and the memory microbenchmark.)
  int64_t memory_bytes() const;
  // Raw bytes of the stored rows: size() * dim * (1 + num_slots) * sizeof(float).
  int64_t raw_bytes() const;

 private:
  EmbeddingTable(const v1::EmbeddingTableSpec& spec, uint64_t seed, const optim::UpdateRule* rule);

  // The row of `key`, created (initial value and slots) if absent.
  float* FindOrCreate(uint64_t key);
  // Finds or creates the rows of `keys` (at most kBlock of them) into `rows`, prefetching the
  // index entries first and the rows after.
  void ResolveBlock(std::span<const uint64_t> keys, float** rows);
  // Applies the rule to one row.
  void ApplyToRow(float* row, std::span<const float> grad, const optim::Step& step) const;
  // Writes row `key`'s initial value and slots into `row`.
  void InitializeRow(uint64_t key, float* row) const;
  // Uninitialised storage for one more row, from the last chunk or a new one.
  float* AllocateRow();

  const v1::EmbeddingTableSpec spec_;
  const uint64_t seed_;
  const optim::UpdateRule* const rule_;
  const int32_t dim_;
  const int num_slots_;
  const size_t row_floats_;      // dim * (1 + num_slots)
  const size_t max_chunk_rows_;  // rows of a full-size chunk

  struct FreeChunk {
    void operator()(float* chunk) const;
  };
  std::vector<std::unique_ptr<float[], FreeChunk>> chunks_;
  size_t last_chunk_rows_ = 0;  // capacity of chunks_.back(), in rows
  size_t last_chunk_used_ = 0;  // rows handed out from chunks_.back()
  int64_t arena_bytes_ = 0;     // sum of the chunks' sizes
  // key -> the row's first float. A pointer rather than a row number: the slot is 16 bytes
  // either way (a uint64 key pads a 32-bit number to 8), chunks never move, and it saves
  // decoding a chunk and offset on every lookup.
  absl::flat_hash_map<uint64_t, float*> index_;
};

}  // namespace syncopate::embedding

#endif  // SYNCOPATE_LIBS_EMBEDDING_EMBEDDING_TABLE_H_
