// Exports published as versions of a directory, for readers that poll it (a serving system's
// model loader, a notebook): each version is written beside the directory's entries and renamed
// in whole, with a READY file inside, and `current` is a symlink swapped atomically to the
// newest (TorchEasyRec's hot export, TF Serving's version directories). A reader that resolves
// `current` never sees a partial version; the oldest versions beyond `keep` are removed, never
// the one `current` names.
//   <dir>/000007-kept-v000000001404/{manifest.json, ..., READY}
//   <dir>/current -> 000007-kept-v000000001404
// A publisher killed at any point leaves at most a hidden partial directory, removed by the next
// publish once its process is gone.
// Thread-safety: one publisher per directory at a time (the coordinator's LiveExporter, or a
// `syncopate export --into`).
#ifndef SYNCOPATE_LIBS_MODEL_EXPORT_PUBLISHER_H_
#define SYNCOPATE_LIBS_MODEL_EXPORT_PUBLISHER_H_

#include <string>

#include "absl/status/statusor.h"
#include "libs/model_export/exporter.h"
#include "syncopate/v1/cluster.pb.h"

namespace syncopate::model_export {

inline constexpr char kReadyFile[] = "READY";
inline constexpr char kCurrentLink[] = "current";

struct PublishOptions {
  std::string dir;                 // the versions' directory (created if missing)
  int keep = 3;                    // versions kept, >= 1
  FormatWriter formats = nullptr;  // model.pt / model.onnx (null: none)
};

// Exports `request` as the directory's next version and points `current` at it. The record names
// the version's path, its source and versions. Errors as ExportTo's; nothing is published then.
absl::StatusOr<v1::ExportRecord> PublishVersion(const ExportRequest& request,
                                                const PublishOptions& options);

// The absolute path of the version `current` names; NOT_FOUND when there is none.
absl::StatusOr<std::string> CurrentVersion(const std::string& dir);

}  // namespace syncopate::model_export

#endif  // SYNCOPATE_LIBS_MODEL_EXPORT_PUBLISHER_H_
