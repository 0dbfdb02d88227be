#include "libs/embedding/owner_shard.h"

#include "libs/common/splitmix64.h"

namespace syncopate::embedding {

int32_t OwnerShard(uint64_t key, int32_t num_shards) {
  if (num_shards <= 0) return 0;
  // The modulo bias of 2^64 mod S over 2^64 is below 2^-32 for any int32 S: negligible.
  return static_cast<int32_t>(SplitMix64(key) % static_cast<uint64_t>(num_shards));
}

}  // namespace syncopate::embedding
