// The one way C++ calls into Python (the user's module, Syncopate's Python package): CallPython
// runs a function under the GIL and turns what it raises into a status, so every call into
// Python fails the same way, with one line (python_runtime.h's StatusFromPython).
//
// Thread-safety: CallPython is thread-safe; it needs the interpreter started (EnsurePython) and
// takes the GIL (pybind11::gil_scoped_acquire) for the whole call, the Python objects the
// function makes and drops included.
#ifndef SYNCOPATE_LIBS_PYTORCH_PYTHON_CALL_H_
#define SYNCOPATE_LIBS_PYTORCH_PYTHON_CALL_H_

#include <exception>
#include <functional>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "libs/pytorch/python_runtime.h"
#include "pybind11/pybind11.h"

namespace syncopate::pytorch {
namespace python_call_internal {

// What CallPython returns for a function returning T: absl::Status for void and absl::Status,
// absl::StatusOr<T> otherwise (a function returning absl::StatusOr<T> keeps its type).
template <typename T>
struct StatusFor {
  using type = absl::StatusOr<T>;
};
template <>
struct StatusFor<void> {
  using type = absl::Status;
};
template <>
struct StatusFor<absl::Status> {
  using type = absl::Status;
};
template <typename T>
struct StatusFor<absl::StatusOr<T>> {
  using type = absl::StatusOr<T>;
};

}  // namespace python_call_internal

// f() under the GIL. An exception Python raised is INVALID_ARGUMENT "<raised>: <the traceback's
// last line>" (StatusFromPython: the whole traceback goes to the log); any other exception (a
// value of the wrong type: pybind11::cast_error) is INVALID_ARGUMENT "<wrong_value>: <what()>".
// Returns absl::Status for a function returning void or absl::Status, else absl::StatusOr of
// its result.
template <typename F>
auto CallPython(absl::string_view raised, absl::string_view wrong_value, F&& f) ->
    typename python_call_internal::StatusFor<std::invoke_result_t<F>>::type {
  pybind11::gil_scoped_acquire gil;
  try {
    if constexpr (std::is_void_v<std::invoke_result_t<F>>) {
      std::invoke(std::forward<F>(f));
      return absl::OkStatus();
    } else {
      return std::invoke(std::forward<F>(f));
    }
  } catch (pybind11::error_already_set& e) {
    return StatusFromPython(e, raised);
  } catch (const std::exception& e) {  // a value of the wrong type (pybind11::cast_error)
    return absl::InvalidArgumentError(absl::StrCat(wrong_value, ": ", e.what()));
  }
}

// The same, with one context for both kinds of failure: "<what>: ...".
template <typename F>
auto CallPython(absl::string_view what, F&& f) {
  return CallPython(what, what, std::forward<F>(f));
}

}  // namespace syncopate::pytorch

#endif  // SYNCOPATE_LIBS_PYTORCH_PYTHON_CALL_H_
