// Errors of tensord._C: a tensord Status raised as the Python exception of
// its kind, and a Python exception turned back into a Status for the Python
// code the client calls (a user-defined Function's backward).
#ifndef TENSORD_PYTHON_CLIENT_SRC_ERRORS_H_
#define TENSORD_PYTHON_CLIENT_SRC_ERRORS_H_

#include <exception>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "binding.h"

namespace tensord::python {

// Raises `s` (not OK) as a Python exception with its message, by its
// ErrorKind: TypeError, IndexError, NotImplementedError,
// tensord.OutOfMemoryError (MemoryError before BindErrors ran) or
// RuntimeError. Sets the Python error and throws py::error_already_set.
[[noreturn]] void Raise(const absl::Status& s);

// The value of `s`; raises its status as Raise does when it is not OK.
template <typename T>
T Unwrap(absl::StatusOr<T> s) {
  if (!s.ok()) Raise(s.status());
  return *std::move(s);
}

// Returns when `s` is OK; raises it as Raise does otherwise.
void Check(const absl::Status& s);

// Maps a Python exception to a Status of the matching kind (its message
// keeps the exception's type name and text). Raises nothing.
absl::Status StatusFromPython(py::error_already_set& e);

// Runs `body`, the work of a function CPython calls directly (a vectorcall
// entry, outside pybind11's dispatch), and gives its result: a new
// reference, or nullptr with the Python error set. A C++ exception thrown
// out of `body` cannot cross into CPython: py::error_already_set (Raise's)
// is set again as the Python error, any other is translated as pybind11's
// dispatch does; the result is then nullptr.
template <typename F>
PyObject* CatchToPython(F&& body) {
  try {
    return body();
  } catch (py::error_already_set& e) {
    e.restore();
    return nullptr;
  } catch (...) {
    py::detail::translate_exception(std::current_exception());
    return nullptr;
  }
}

}  // namespace tensord::python

#endif  // TENSORD_PYTHON_CLIENT_SRC_ERRORS_H_
