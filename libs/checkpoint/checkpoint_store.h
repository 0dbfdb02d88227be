// Checkpoint files of parameter shards: written atomically (temp file, fsync, rename, fsync of
// the directory) with CRC-32s, so a crash mid-write leaves the previous file intact and a torn or
// corrupt file is detected and refused, never loaded.
//
// File format 2 ("SYNCKPT2", since issue 41): a stream of records, so a shard's state has no size
// limit (protobuf refuses to serialize or parse a message over 2 GiB, and format 1 was one
// message: ~16M rows of a dim-16 Adagrad table per shard, measured in bench/checkpoint_scale.sh):
//   "SYNCKPT2" | record* | end
//   record: payload length (u64 LE) | payload (a serialized v1::ShardCheckpoint fragment) |
//           CRC-32 of the payload (u32 LE)
//   end:    0xFFFFFFFFFFFFFFFF (u64) | number of records (u64 LE) | CRC-32 of that count (u32 LE)
// The first record is the header: every field but `slices` and `embeddings`, with `table_rows`
// filled in. Every later record holds one dense slice (at most kRecordBytes of values and
// optimizer state) or one chunk of one embedding table (at most kRecordBytes of rows), and a
// table's rows are written in ascending key order: an exporter merges the shards' files into one
// sorted table without holding a table in memory. Merging the fragments (MergeFrom) into the
// header gives the checkpoint back.
// Format 1 ("SYNCKPT1" | payload length (u64 LE) | one serialized v1::ShardCheckpoint | CRC-32),
// written by releases before issue 41, still reads; the coordinator's progress file keeps it
// (WriteFramedFile).
// Names: <dir>/shard-<id>-of-<S>-v<version, 12 digits>.ckpt; the newest kKeep per shard are kept.
// Thread-safety: free functions and CheckpointStore are thread-compatible; a directory should
// have one writer per shard id (a ShardClaim makes sure of it when writers are replaced). A
// CheckpointReader is thread-compatible.
#ifndef SYNCOPATE_LIBS_CHECKPOINT_CHECKPOINT_STORE_H_
#define SYNCOPATE_LIBS_CHECKPOINT_CHECKPOINT_STORE_H_

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "libs/checkpoint/shard_claim.h"
#include "syncopate/v1/checkpoint.pb.h"

namespace syncopate::checkpoint {

// The framing, for any small state file (also the coordinator's progress file).
absl::Status WriteFramedFile(const std::string& path, const std::string& payload);
absl::StatusOr<std::string> ReadFramedFile(const std::string& path);

// The `optimizer` of a checkpoint that holds parameters only (a kept version, ADR 0017): it never
// restores as a training state, and an export or a warm start reads its values alone.
inline constexpr char kParametersOnly[] = "none (the kept evaluation point's parameters)";

// Where a shard writes the version the job keeps (ADR 0017): <checkpoint_dir>/kept.
inline constexpr char kKeptDir[] = "kept";

// A record's target size: a dense slice or a table chunk is cut so its values and optimizer
// state stay near this (a row is never cut), which keeps a reader's memory per file small.
inline constexpr int64_t kRecordBytes = int64_t{16} << 20;

// Writes format 2. A table's rows may come in any order and in several EmbeddingSlices; they
// are written sorted by key (INTERNAL for a key that appears twice in one table).
absl::Status WriteCheckpointFile(const std::string& path, const v1::ShardCheckpoint& checkpoint);
// The same, checking `claim` (if not null) once the data is written, before the rename makes it
// visible: its error then, and nothing visible written.
absl::Status WriteCheckpointFileChecked(const std::string& path,
                                        const v1::ShardCheckpoint& checkpoint,
                                        const ShardClaim* claim);
// DATA_LOSS for a truncated, corrupt or foreign file (the message says which and why);
// NOT_FOUND when it does not exist. Reads either format.
absl::StatusOr<v1::ShardCheckpoint> ReadCheckpointFile(const std::string& path);

// Reads a checkpoint file a fragment at a time: a format 2 file from disk, record by record (its
// memory is one record's); a format 1 file whole, then handed out the same way.
class CheckpointReader {
 public:
  // Reads the header; errors as ReadCheckpointFile.
  static absl::StatusOr<std::unique_ptr<CheckpointReader>> Open(const std::string& path);

  // Every field but slices and embeddings, with table_rows filled in (for a format 1 file too).
  const v1::ShardCheckpoint& header() const { return header_; }
  int format() const { return format_; }
  const std::string& path() const { return path_; }

  // The next fragment (one slice or one table chunk, in file order) into `fragment`; false
  // after the last one, once the end record checked out. DATA_LOSS for a torn or corrupt record.
  absl::StatusOr<bool> Next(v1::ShardCheckpoint& fragment);

 private:
  CheckpointReader() = default;

  std::string path_;
  int format_ = 0;
  v1::ShardCheckpoint header_;
  std::ifstream in_;                            // format 2
  uint64_t records_read_ = 0;                   // format 2, the header included
  std::unique_ptr<v1::ShardCheckpoint> whole_;  // format 1
  int next_slice_ = 0;
  int next_embedding_ = 0;
};

class CheckpointStore {
 public:
  // Checkpoints kept per shard: the newest and one before it, so a corrupt newest file still
  // leaves a good one.
  static constexpr int kKeep = 2;

  explicit CheckpointStore(std::string dir) : dir_(std::move(dir)) {}

  // Writes the checkpoint and prunes older ones of the same shard and layout. With a claim
  // (shard_claim.h): only while the claim holds, checked before writing, before the rename and
  // after it; FAILED_PRECONDITION (ShardClaim::IsSuperseded) and nothing of this call left on
  // disk once another process claimed the directory.
  absl::Status Save(const v1::ShardCheckpoint& checkpoint, const ShardClaim* claim = nullptr);

  // The newest valid checkpoint of (shard_id, num_shards), skipping (and reporting in
  // `refused`) corrupt ones. NOT_FOUND when there is none.
  absl::StatusOr<v1::ShardCheckpoint> LoadLatest(int shard_id, int num_shards,
                                                 std::vector<std::string>* refused = nullptr) const;

  // For restoring onto a different number of shards: the newest valid checkpoint of every shard
  // of the most recent complete layout in the directory (the layout whose every shard has a
  // valid checkpoint, preferring the one with the highest version). NOT_FOUND when none.
  absl::StatusOr<std::vector<v1::ShardCheckpoint>> LoadLatestLayout(
      std::vector<std::string>* refused = nullptr) const;

  // The newest file of every shard of the most recent complete layout, judged by file names
  // alone (nothing is read): what a streaming reader (an export) opens, in shard order.
  // NOT_FOUND when no layout has a file for every shard.
  absl::StatusOr<std::vector<std::string>> LatestLayoutFiles() const;

  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace syncopate::checkpoint

#endif  // SYNCOPATE_LIBS_CHECKPOINT_CHECKPOINT_STORE_H_
