// `syncopate export`'s core: the shards' checkpoints of a job (the newest complete set in a
// checkpoint directory, or the kept version in its kept/ directory; written by any number of
// shards, in either checkpoint format) merged into one export directory (docs/export-format.md):
// the manifest, the job spec, every dense tensor in dense.safetensors and every embedding table as
// chunks of sorted keys and rows. Streamed: the dense part is held whole (a dense model fits in
// memory), a table never is (each shard's file yields its rows in key order, merged by a heap into
// NpyWriters), so a table of any size exports with one checkpoint record per shard in memory. The
// output depends only on the state, not on how many shards held it. What the Python package adds
// (model.pt, model.onnx) is written by the caller (services/cli/export_command.cc).
// Thread-safety: free functions; thread-safe for distinct output directories.
#ifndef SYNCOPATE_LIBS_MODEL_EXPORT_EXPORTER_H_
#define SYNCOPATE_LIBS_MODEL_EXPORT_EXPORTER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "libs/model_export/manifest.h"
#include "syncopate/v1/export.pb.h"
#include "syncopate/v1/job.pb.h"

namespace syncopate::model_export {

// The most rows a table chunk holds: 1 GiB of float32 rows.
inline constexpr int64_t kChunkBytes = int64_t{1} << 30;

struct ExportRequest {
  // A checkpoint directory (its newest complete set of shard files) or a kept/ directory.
  std::string from;
  // The job spec, for checkpoints written before the export format (they do not carry one);
  // null: the checkpoints' own.
  const v1::JobSpec* job = nullptr;
  // Rows per table chunk; 0: as many as kChunkBytes holds (tests make it small).
  int64_t chunk_rows = 0;
};

// Writes the export into `dir` (an existing, empty directory) and returns its manifest.
// FAILED_PRECONDITION, one line naming the problem, for: no complete set of checkpoints; files of
// different jobs or shard counts; a kept set whose shards hold different evaluation points (a
// shard failed while the kept version was released); checkpoints without a job spec and no
// `job`; a table the job lacks; dense values not covered exactly once. DATA_LOSS naming the file
// for a corrupt or truncated checkpoint. On an error `dir` may hold partial files: the caller
// writes into a temporary directory and renames it into place only on success.
absl::StatusOr<v1::ExportManifest> WriteExport(const ExportRequest& request,
                                               const std::string& dir);

// What a checkpoint directory holds, from its files' headers alone: whether it is a kept
// version, and the versions of its newest complete set (ascending). FAILED_PRECONDITION as
// WriteExport's for a directory without a complete set.
struct SourceSummary {
  bool kept = false;
  std::vector<int64_t> versions;
  std::vector<std::string> files;  // the set's files, in shard order
};
absl::StatusOr<SourceSummary> SummarizeSource(const std::string& from);

// What adds the formats the Python package writes (model.pt, model.onnx) to a complete export
// directory: libs/pytorch's WriteTorchFormats in a build with PyTorch.
using FormatWriter =
    std::function<absl::Status(const std::string& dir, const v1::ExportManifest& manifest)>;

// WriteExport, then `formats` (when set), into a temporary directory beside `out` that is renamed
// to `out` only when everything is written: a reader never sees part of an export, and a failed
// export leaves nothing behind. FAILED_PRECONDITION when `out` exists.
absl::StatusOr<v1::ExportManifest> ExportTo(const ExportRequest& request, const std::string& out,
                                            const FormatWriter& formats = nullptr);

}  // namespace syncopate::model_export

#endif  // SYNCOPATE_LIBS_MODEL_EXPORT_EXPORTER_H_
