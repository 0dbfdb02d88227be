#include "libs/pytorch/torch_export.h"

#include "absl/strings/str_cat.h"
#include "libs/common/status_macros.h"
#include "libs/pytorch/python_call.h"
#include "libs/pytorch/python_runtime.h"
#include "pybind11/pybind11.h"

namespace syncopate::pytorch {
namespace py = pybind11;

absl::Status WriteTorchFormats(const std::string& dir, const v1::ExportManifest& manifest,
                               const std::string& module) {
  SYNCOPATE_RETURN_IF_ERROR(EnsurePython());
  return CallPython("writing the PyTorch files of the export", [&] {
    py::module_ exporter = py::module_::import("syncopate.export");
    const py::object module_path = module.empty() ? py::none() : py::object(py::str(module));
    exporter.attr("write_state_dict")(dir, absl::StrCat(dir, "/", kStateDictFile), module_path);
    if (manifest.model_kind() != "TORCH") {
      exporter.attr("write_onnx")(dir, absl::StrCat(dir, "/", kOnnxFile));
    }
  });
}

absl::Status CheckExportable(const v1::JobSpec& job) {
  SYNCOPATE_RETURN_IF_ERROR(EnsurePython());
  const std::string context =
      absl::StrCat("job spec: export.on: ", job.model().torch().module(), " cannot export");
  return CallPython(context, [&] {
    py::module_::import("syncopate.export")
        .attr("check_exportable")(job.model().torch().module(), job.seed());
  });
}

}  // namespace syncopate::pytorch
