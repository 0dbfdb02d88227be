#include "libs/pytorch/python_runtime.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "glog/logging.h"
#include "pybind11/embed.h"

// native_module.cc: syncopate_native, the readers python/syncopate/torch/data.py uses.
extern "C" PyObject* PyInit_syncopate_native();

namespace syncopate::pytorch {
namespace py = pybind11;
namespace {

// Where python/syncopate may be, in order (see EnsurePython).
std::vector<std::string> PackageCandidates() {
  std::vector<std::string> candidates;
  if (const char* path = std::getenv("SYNCOPATE_PYTHONPATH"); path != nullptr && *path != '\0') {
    candidates.emplace_back(path);
  }
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) candidates.push_back((exe.parent_path() / "../lib/syncopate/python").string());
  candidates.emplace_back(SYNCOPATE_PYTHON_SOURCE_DIR);
  return candidates;
}

absl::Status StartInterpreter() {
  std::string package;
  for (const std::string& candidate : PackageCandidates()) {
    if (std::filesystem::exists(std::filesystem::path(candidate) / "syncopate" / "torch")) {
      package = std::filesystem::weakly_canonical(candidate).string();
      break;
    }
  }
  if (package.empty()) {
    return absl::FailedPreconditionError(
        "Syncopate's Python package (python/syncopate) is not installed beside this binary; "
        "set SYNCOPATE_PYTHONPATH to the directory that holds it");
  }
  // One thread per process for torch's intra-op pool and for OpenBLAS's own (which ignores
  // torch.set_num_threads): a machine runs several workers, and two BLAS threads per worker
  // spinning against each other made a step many times slower on 2 cores. A user's setting wins.
  setenv("OMP_NUM_THREADS", "1", /*overwrite=*/0);
  setenv("OPENBLAS_NUM_THREADS", "1", /*overwrite=*/0);
  PyImport_AppendInittab("syncopate_native", &PyInit_syncopate_native);
  // false: no Python signal handlers, the process's own SIGTERM/SIGINT handling stays.
  py::initialize_interpreter(/*init_signal_handlers=*/false);
  absl::Status status;
  try {
    py::module_::import("sys").attr("path").attr("insert")(0, package);
    // Import torch now, on the thread that started the interpreter: its first import takes
    // seconds and loads OpenMP and BLAS, better done once here than inside a timed step.
    py::module_::import("torch");
    py::module_::import("syncopate.torch._host");
  } catch (py::error_already_set& e) {
    status = StatusFromPython(e, "starting Python for a PyTorch model");
  }
  LOG(INFO) << "Python " << Py_GetVersion() << " with Syncopate's package from " << package;
  // Every later Python call takes the GIL with gil_scoped_acquire, from whatever thread.
  PyEval_SaveThread();
  return status;
}

}  // namespace

absl::Status EnsurePython() {
  static std::once_flag once;
  static absl::Status* started = nullptr;
  std::call_once(once, [] { started = new absl::Status(StartInterpreter()); });
  return *started;
}

absl::Status StatusFromPython(py::error_already_set& error, absl::string_view context) {
  std::string last_line = error.what();
  try {
    py::object format = py::module_::import("traceback").attr("format_exception");
    py::list lines = format(error.type(), error.value(), error.trace());
    std::string traceback;
    for (py::handle line : lines) traceback += line.cast<std::string>();
    LOG(WARNING) << context << ": Python raised\n" << traceback;
    if (!lines.empty()) {
      last_line = std::string(
          absl::StripTrailingAsciiWhitespace(lines[lines.size() - 1].cast<std::string>()));
    }
  } catch (py::error_already_set&) {
    // Formatting failed: what() already says what was raised.
  }
  return absl::InvalidArgumentError(absl::StrCat(context, ": ", last_line));
}

}  // namespace syncopate::pytorch
