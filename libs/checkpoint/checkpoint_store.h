// Checkpoint files of parameter shards: written atomically (temp file, fsync, rename, fsync of
// the directory) with a CRC-32 over the payload, so a crash mid-write leaves the previous file
// intact and a torn or corrupt file is detected and refused, never loaded.
//
// File format: "SYNCKPT1" | payload length (u64, little-endian) | payload (a serialized
// v1::ShardCheckpoint) | CRC-32 of the payload (u32, little-endian).
// Names: <dir>/shard-<id>-of-<S>-v<version, 12 digits>.ckpt; the newest kKeep per shard are kept.
// Thread-safety: free functions and CheckpointStore are thread-compatible; a directory should
// have one writer per shard id.
#ifndef SYNCOPATE_LIBS_CHECKPOINT_CHECKPOINT_STORE_H_
#define SYNCOPATE_LIBS_CHECKPOINT_CHECKPOINT_STORE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "syncopate/v1/checkpoint.pb.h"

namespace syncopate::checkpoint {

// The framing, for any small state file (also the coordinator's progress file).
absl::Status WriteFramedFile(const std::string& path, const std::string& payload);
absl::StatusOr<std::string> ReadFramedFile(const std::string& path);

absl::Status WriteCheckpointFile(const std::string& path, const v1::ShardCheckpoint& checkpoint);
// DATA_LOSS for a truncated, corrupt or foreign file (the message says which and why);
// NOT_FOUND when it does not exist.
absl::StatusOr<v1::ShardCheckpoint> ReadCheckpointFile(const std::string& path);

class CheckpointStore {
 public:
  // Checkpoints kept per shard: the newest and one before it, so a corrupt newest file still
  // leaves a good one.
  static constexpr int kKeep = 2;

  explicit CheckpointStore(std::string dir) : dir_(std::move(dir)) {}

  // Writes the checkpoint and prunes older ones of the same shard and layout.
  absl::Status Save(const v1::ShardCheckpoint& checkpoint);

  // The newest valid checkpoint of (shard_id, num_shards), skipping (and reporting in
  // `refused`) corrupt ones. NOT_FOUND when there is none.
  absl::StatusOr<v1::ShardCheckpoint> LoadLatest(int shard_id, int num_shards,
                                                 std::vector<std::string>* refused = nullptr) const;

  // For restoring onto a different number of shards: the newest valid checkpoint of every shard
  // of the most recent complete layout in the directory (the layout whose every shard has a
  // valid checkpoint, preferring the one with the highest version). NOT_FOUND when none.
  absl::StatusOr<std::vector<v1::ShardCheckpoint>> LoadLatestLayout(
      std::vector<std::string>* refused = nullptr) const;

  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace syncopate::checkpoint

#endif  // SYNCOPATE_LIBS_CHECKPOINT_CHECKPOINT_STORE_H_
