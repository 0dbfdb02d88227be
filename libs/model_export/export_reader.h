// An export directory read back in C++ (docs/export-format.md): its manifest and job, every dense
// tensor, and its tables looked up by key with the cluster's rule for keys without a row. What a
// warm start restores from, and what tests score the C++ models with.
// Thread-safety: thread-compatible; const methods are safe concurrently.
#ifndef SYNCOPATE_LIBS_MODEL_EXPORT_EXPORT_READER_H_
#define SYNCOPATE_LIBS_MODEL_EXPORT_EXPORT_READER_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "libs/model_export/array_files.h"
#include "syncopate/v1/checkpoint.pb.h"
#include "syncopate/v1/export.pb.h"
#include "syncopate/v1/job.pb.h"

namespace syncopate::model_export {

class ExportedModel {
 public:
  // Reads the manifest, the job and the dense tensors, and every table chunk's header and keys
  // (8 bytes per row; rows stay on disk until looked up). NOT_FOUND for a directory that is not
  // an export; DATA_LOSS naming the file for a truncated or corrupt one; FAILED_PRECONDITION for
  // a manifest that does not match its files.
  static absl::StatusOr<ExportedModel> Open(const std::string& dir);

  const v1::ExportManifest& manifest() const { return manifest_; }
  const v1::JobSpec& job() const { return job_; }
  // The dense tensors in the flat vector's order, concatenated.
  const std::vector<float>& dense() const { return dense_; }

  // Fills `out` (keys.size() x dim) with the rows of `keys` in table `table` (table-id order):
  // a key the export has reads its row; one it lacks reads what the cluster reads (its
  // initializer value, or zeros for a table that admits).
  absl::Status LookUp(int table, std::span<const uint64_t> keys, std::span<float> out) const;

  // The export as one parameters-only checkpoint of every tensor and row (optimizer
  // checkpoint::kParametersOnly, no optimizer state): what RestoreShard reads for a warm start.
  // Holds every row in memory.
  absl::StatusOr<v1::ShardCheckpoint> AsCheckpoint() const;

 private:
  struct Chunk {
    std::string rows_path;
    NpyHeader rows;
    std::vector<uint64_t> keys;
  };
  struct Table {
    std::vector<Chunk> chunks;  // in key order
  };

  std::string dir_;
  v1::ExportManifest manifest_;
  v1::JobSpec job_;
  std::vector<float> dense_;
  std::vector<Table> tables_;
};

// A warm start's source as checkpoints whose parameters RestoreShard reads (parameters_only):
// an export directory (one checkpoint, ExportedModel::AsCheckpoint) or a checkpoint directory
// (its newest complete set: a job's checkpoints, or its kept/ version). FAILED_PRECONDITION, one
// line naming the directory, when it is neither.
absl::StatusOr<std::vector<v1::ShardCheckpoint>> LoadParameters(const std::string& from);

// For a job with model.warm_start (its layout recorded): OK when the source holds exactly the
// job's dense tensors (names, element counts, in order) and tables (names, widths), as far as it
// describes itself (checkpoints from before the export format do not: the shards then check
// coverage). FAILED_PRECONDITION "model.warm_start.from: ..." naming the first difference.
absl::Status CheckWarmStart(const v1::JobSpec& job);

}  // namespace syncopate::model_export

#endif  // SYNCOPATE_LIBS_MODEL_EXPORT_EXPORT_READER_H_
