// Which parameter shard owns an embedding row: the one partitioner of sparse keys, used by the
// workers that route pulls and pushes and by the shards that restore checkpoints onto a new
// shard count.
// Thread-safety: a pure function; safe to call concurrently.
#ifndef SYNCOPATE_LIBS_EMBEDDING_OWNER_SHARD_H_
#define SYNCOPATE_LIBS_EMBEDDING_OWNER_SHARD_H_

#include <cstdint>

namespace syncopate::embedding {

// Which shard owns `key`: SplitMix64(key) mod num_shards. The mix is fixed by definition (never
// std::hash or absl::Hash, which may differ between processes, builds and releases), so every
// worker and shard agrees on the owner, and a checkpoint written by one release restores under
// another. Mixing first spreads structured keys (consecutive ids, hashes with low bits in common)
// evenly. Requires num_shards > 0; returns 0 for num_shards <= 0 rather than dividing by zero.
int32_t OwnerShard(uint64_t key, int32_t num_shards);

}  // namespace syncopate::embedding

#endif  // SYNCOPATE_LIBS_EMBEDDING_OWNER_SHARD_H_
