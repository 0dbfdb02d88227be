// The Python interpreter a process embeds to host a user's PyTorch model (pybind11's embedding
// API, the pattern of Horovod, BytePS and PERSIA turned inside out: the C++ worker runtime is the
// program, the model a guest in it). One interpreter per process, started on first use, never
// finalised (torch's extension modules do not survive finalisation).
//
// Thread-safety: every function is thread-safe. Code that touches Python objects holds the GIL
// (pybind11::gil_scoped_acquire); nothing else in the process ever holds it.
#ifndef SYNCOPATE_LIBS_PYTORCH_PYTHON_RUNTIME_H_
#define SYNCOPATE_LIBS_PYTORCH_PYTHON_RUNTIME_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "pybind11/pybind11.h"

namespace syncopate::pytorch {

// Starts the interpreter once: without Python's signal handlers (SIGINT and SIGTERM stay the
// process's: runtime::InitProcess), with Syncopate's Python package (python/syncopate) first on
// sys.path, and the GIL released. The package is looked for in $SYNCOPATE_PYTHONPATH, then
// <executable dir>/../lib/syncopate/python (an installed tree), then the source tree the binary
// was built from. Later calls return the first call's result.
absl::Status EnsurePython();

// The Python exception being handled, as a status: the full traceback goes to the log (WARNING)
// and the message is `context` and the traceback's last line ("ValueError: ..."), so a worker
// exits with one line that says what the user's code raised. INVALID_ARGUMENT: the user's code
// or data is wrong, and retrying cannot fix it (rpc::IsPermanentError).
absl::Status StatusFromPython(pybind11::error_already_set& error, absl::string_view context);

}  // namespace syncopate::pytorch

#endif  // SYNCOPATE_LIBS_PYTORCH_PYTHON_RUNTIME_H_
