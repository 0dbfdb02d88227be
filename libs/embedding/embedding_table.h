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
// Bounded memory on endless streams (ADR 0010; both off by default, as Monolith and TorchRec
// offer them):
// * Admission (spec.admit_after_count = t > 1): a training read of a key without a row counts
//   one sighting in an AdmissionSketch (fixed size, whatever the key space); the read that brings
//   the count to t creates the row. Until then the key reads as zeros, not its initializer value:
//   a key that rare carries no trained information, and zeros, the same for every such key, act
//   as one shared out-of-vocabulary value the dense layers learn to discount, where a per-key
//   random vector that never trains would be noise in the model's input. Gradients for keys
//   without a row are dropped. The evaluator's Peek reads absent keys the same way (never
//   counting, never creating), so evaluation sees what training saw.
// * Eviction (spec.evict_after_updates = N > 0): each row records the shard update that last read
//   or updated it; rows idle for N updates are removed and their arena slots reused through a
//   free list, so a stream whose keys come and go holds a flat footprint. Eviction runs as a
//   bounded sweep after each update (EvictIdle), ceil(rows / N) rows at a time from where the
//   last one stopped, not as a pass over the whole table: the shard's lock is then held for a
//   cost proportional to the update itself (a full pass over a 10M-row table would stall every
//   pull and push for tens of milliseconds), and every row is still visited once per N updates,
//   so an idle row goes between N and about 2N updates after its last touch. Evicted rows lose
//   their value and optimizer slots; a key that comes back starts over.
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
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "libs/embedding/admission_sketch.h"
#include "libs/optim/update_rule.h"
#include "syncopate/v1/cluster.pb.h"

namespace syncopate::embedding {

// What admission and eviction did (counted since the last EmbeddingTable::TakeEvents).
struct RowEvents {
  int64_t admitted = 0;              // rows created by training (at first sight without admission)
  int64_t unadmitted_lookups = 0;    // training reads of keys not yet admitted (read as zeros)
  int64_t unadmitted_gradients = 0;  // gradient rows dropped: their key had no row
  int64_t evicted = 0;               // idle rows removed
};

class EmbeddingTable {
 public:
  // `rule` (not owned, must outlive the table) decides the number of slots and their initial
  // value. INVALID_ARGUMENT for a null rule, dim <= 0, or an `init` that is not ZEROS or
  // UNIFORM with a finite scale > 0, an admit_after_count outside [0, 255] or a negative
  // evict_after_updates.
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

  // A training read: writes the row's current value (dim floats) into `out`, creating the row
  // with its initializer value (and initial slots) if absent ("created on first touch"); with
  // admission, only once the key is admitted (until then it reads as zeros).
  void Pull(uint64_t key, std::span<float> out);
  // Like Pull but never creates, counts or touches: an absent row reads as its initializer
  // value, or as zeros when the table admits (the evaluator's reads).
  void Peek(uint64_t key, std::span<float> out) const;
  // Applies the rule to the row with `grad` (dim floats) at the shard's global `step` (index and
  // scheduled rate). An absent row is created first, except when the table admits: then the
  // gradient is dropped (counted). Lazy: untouched rows and their slots never change. The int64
  // overloads use the spec's constant learning rate.
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

  // Ends update `step` (the shard's update count, Step::index): later reads touch rows at this
  // step, and, when the table evicts, sweeps the next ceil(rows / evict_after_updates) arena
  // slots and evicts the rows idle for evict_after_updates updates. Returns the rows evicted.
  int64_t EndUpdate(int64_t step);
  // The step of the latest EndUpdate (or set_step); restores set it.
  int64_t step() const { return step_; }
  void set_step(int64_t step) { step_ = step; }

  // Checkpoints: visits every row (order unspecified): key, value span (dim floats), the slots
  // as one span of num_slots*dim floats (slot 0's dim floats, then slot 1's, ...), and the step
  // that last touched the row (the current step() when the table does not evict).
  void ForEach(
      const std::function<void(uint64_t key, std::span<const float> value,
                               std::span<const float> slots, int64_t last_touched)>& fn) const;
  // Restore: sets (creating or overwriting) a row's value (dim floats), slots (num_slots*dim
  // floats, laid out as ForEach gives them) and the step that last touched it.
  void Set(uint64_t key, std::span<const float> value, std::span<const float> slots,
           int64_t last_touched);
  void Set(uint64_t key, std::span<const float> value, std::span<const float> slots) {
    Set(key, value, slots, step_);
  }

  bool admits() const { return admission_ != nullptr; }
  bool evicts() const { return evict_after_updates_ > 0; }
  // The sightings of keys not yet admitted; null when the table does not admit.
  const AdmissionSketch* admission() const { return admission_.get(); }
  AdmissionSketch* mutable_admission() { return admission_.get(); }
  // The events since the last call (the shard adds them to its metrics).
  RowEvents TakeEvents() { return std::exchange(events_, RowEvents{}); }

  // Bytes this table holds: arena chunks actually allocated + the hash index's capacity * slot
  // size + control bytes + the admission sketch. (Used by metrics and the memory
  // microbenchmark.)
  int64_t memory_bytes() const;
  // Raw bytes of the stored rows: size() * dim * (1 + num_slots) * sizeof(float).
  int64_t raw_bytes() const;

 private:
  EmbeddingTable(const v1::EmbeddingTableSpec& spec, uint64_t seed, const optim::UpdateRule* rule);

  // Why a row is looked up: a training read may admit a key, an update never does.
  enum class Access { kRead, kUpdate };
  // The row of `key` for `access` at `step`, created (initial value and slots) if absent and
  // admitted; null for a key the table does not admit (yet). Touches the row.
  float* Resolve(uint64_t key, Access access, int64_t step);
  // Resolves the rows of `keys` (at most kBlock of them) into `rows`, prefetching the index
  // entries first and the rows after.
  void ResolveBlock(std::span<const uint64_t> keys, Access access, int64_t step, float** rows);
  // A new row for `key` with its initial value and slots.
  float* CreateRow(uint64_t key);
  // Applies the rule to one row.
  void ApplyToRow(float* row, std::span<const float> grad, const optim::Step& step) const;
  // Writes row `key`'s initial value and slots into `row`.
  void InitializeRow(uint64_t key, float* row) const;
  // What a key without a row reads as: its initializer value, or zeros when the table admits.
  void ReadAbsent(uint64_t key, std::span<float> out) const;
  // Storage for one more row: a freed one, or uninitialised space from the last chunk or a new one.
  float* AllocateRow();
  // The trailer of an evicting table's row: its key and the step that last touched it; a row on
  // the free list holds the next free row in place of the key, and kFreeRow as its step.
  static constexpr int64_t kFreeRow = -1;
  void WriteTrailer(float* row, uint64_t key, int64_t last_touched) const;
  void Touch(float* row, int64_t step) const;
  uint64_t TrailerKey(const float* row) const;
  int64_t LastTouched(const float* row) const;
  float* NextFree(const float* row) const;

  const v1::EmbeddingTableSpec spec_;
  const uint64_t seed_;
  const optim::UpdateRule* const rule_;
  const int32_t dim_;
  const int num_slots_;
  const size_t row_floats_;  // dim * (1 + num_slots)
  const int64_t evict_after_updates_;
  const int admit_after_count_;
  // Floats an arena slot takes: the row, then, when the table evicts, a 16-byte trailer (key,
  // last-touched step); tables that keep every row pay nothing for eviction.
  const size_t stride_floats_;
  const size_t max_chunk_rows_;  // rows of a full-size chunk
  int64_t step_ = 0;

  struct FreeChunk {
    void operator()(float* chunk) const;
  };
  std::vector<std::unique_ptr<float[], FreeChunk>> chunks_;
  std::vector<size_t> chunk_rows_;  // capacity of each chunk, in rows
  size_t last_chunk_used_ = 0;      // rows handed out from chunks_.back()
  int64_t arena_rows_ = 0;          // rows handed out from the arena, live or free
  int64_t arena_bytes_ = 0;         // sum of the chunks' sizes
  float* free_head_ = nullptr;      // evicted rows, reused before the arena grows
  // Where the eviction sweep resumes: a chunk and a row in it.
  size_t sweep_chunk_ = 0;
  size_t sweep_row_ = 0;
  std::unique_ptr<AdmissionSketch> admission_;  // null when the table does not admit
  RowEvents events_;
  // key -> the row's first float. A pointer rather than a row number: the slot is 16 bytes
  // either way (a uint64 key pads a 32-bit number to 8), chunks never move, and it saves
  // decoding a chunk and offset on every lookup.
  absl::flat_hash_map<uint64_t, float*> index_;
};

}  // namespace syncopate::embedding

#endif  // SYNCOPATE_LIBS_EMBEDDING_EMBEDDING_TABLE_H_
