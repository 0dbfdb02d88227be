// The export formats that need PyTorch (docs/export-format.md): model.pt, the state_dict plain
// PyTorch loads into the job's own model() (TORCH jobs) or into syncopate.models' module (the
// built-in kinds), and model.onnx for the built-in kinds, written by the Python package
// (python/syncopate/export.py) through this process's embedded interpreter.
// Thread-safety: thread-safe (takes the GIL).
#ifndef SYNCOPATE_LIBS_PYTORCH_TORCH_EXPORT_H_
#define SYNCOPATE_LIBS_PYTORCH_TORCH_EXPORT_H_

#include <string>

#include "absl/status/status.h"
#include "syncopate/v1/export.pb.h"
#include "syncopate/v1/job.pb.h"

namespace syncopate::pytorch {

inline constexpr char kStateDictFile[] = "model.pt";
inline constexpr char kOnnxFile[] = "model.onnx";

// Writes model.pt (and, for the built-in kinds, model.onnx) into the export directory `dir`.
// `module` overrides the TORCH job's model file (manifest.model.module, relative to the working
// directory) when it lives elsewhere on this machine. INVALID_ARGUMENT with the Python error's
// last line (a module that does not build, a parameter the export lacks).
absl::Status WriteTorchFormats(const std::string& dir, const v1::ExportManifest& manifest,
                               const std::string& module = "");

// For a TORCH job that exports as it runs (ExportSpec): OK when its module's state dict can be
// written and loaded back strictly (syncopate.export.check_exportable), so a module that cannot
// export fails the job at start. INVALID_ARGUMENT with the Python error's last line.
absl::Status CheckExportable(const v1::JobSpec& job);

}  // namespace syncopate::pytorch

#endif  // SYNCOPATE_LIBS_PYTORCH_TORCH_EXPORT_H_
