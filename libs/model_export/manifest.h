// An export directory's description (docs/export-format.md): its file names, and its manifest
// (a v1::ExportManifest as proto3 JSON) and job spec, written and read back.
// Thread-safety: free functions; thread-safe.
#ifndef SYNCOPATE_LIBS_MODEL_EXPORT_MANIFEST_H_
#define SYNCOPATE_LIBS_MODEL_EXPORT_MANIFEST_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "syncopate/v1/export.pb.h"
#include "syncopate/v1/job.pb.h"

namespace syncopate::model_export {

inline constexpr char kFormat[] = "syncopate-export/1";
inline constexpr char kManifestFile[] = "manifest.json";
inline constexpr char kJobFile[] = "job.textproto";
inline constexpr char kDenseFile[] = "dense.safetensors";

// The manifest as it is written (proto3 JSON, field names as in the proto) and read back.
// ReadManifest: NOT_FOUND for a directory without one, DATA_LOSS when it does not parse,
// FAILED_PRECONDITION for another format.
std::string ManifestJson(const v1::ExportManifest& manifest);
absl::StatusOr<v1::ExportManifest> ReadManifest(const std::string& dir);

// The job spec of an export directory (job.textproto).
absl::StatusOr<v1::JobSpec> ReadExportJob(const std::string& dir);

// True when `dir` holds an export (a manifest), as opposed to checkpoints.
bool IsExport(const std::string& dir);

}  // namespace syncopate::model_export

#endif  // SYNCOPATE_LIBS_MODEL_EXPORT_MANIFEST_H_
