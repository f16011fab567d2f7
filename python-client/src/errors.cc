// Errors of tensord._C: Status to Python exception and back, and the
// module's own exception type.
#include "errors.h"

#include <string>

#include "tensord/meta/errors.h"

namespace tensord::python {
namespace {

// tensord.OutOfMemoryError, made at import (BindErrors): a RuntimeError,
// as PyTorch's allocation failures are, and a MemoryError.
PyObject* g_out_of_memory_error = nullptr;

}  // namespace

[[noreturn]] void Raise(const absl::Status& s) {
  PyObject* type = PyExc_RuntimeError;
  switch (tensord::KindOf(s)) {
    case tensord::ErrorKind::kType: type = PyExc_TypeError; break;
    case tensord::ErrorKind::kIndex: type = PyExc_IndexError; break;
    case tensord::ErrorKind::kNotImplemented: type = PyExc_NotImplementedError; break;
    case tensord::ErrorKind::kOutOfMemory:
      type = g_out_of_memory_error != nullptr ? g_out_of_memory_error : PyExc_MemoryError;
      break;
    case tensord::ErrorKind::kRuntime:
    case tensord::ErrorKind::kInternal: type = PyExc_RuntimeError; break;
  }
  PyErr_SetString(type, std::string(s.message()).c_str());
  throw py::error_already_set();
}

void Check(const absl::Status& s) {
  if (!s.ok()) Raise(s);
}

absl::Status StatusFromPython(py::error_already_set& e) {
  std::string msg = e.what();
  tensord::ErrorKind kind = tensord::ErrorKind::kRuntime;
  if (e.matches(PyExc_TypeError)) {
    kind = tensord::ErrorKind::kType;
  } else if (e.matches(PyExc_IndexError)) {
    kind = tensord::ErrorKind::kIndex;
  } else if (e.matches(PyExc_NotImplementedError)) {
    kind = tensord::ErrorKind::kNotImplemented;
  } else if (e.matches(PyExc_MemoryError)) {
    kind = tensord::ErrorKind::kOutOfMemory;
  }
  return tensord::MakeError(kind, msg);
}

void BindErrors(py::module_& m) {
  py::tuple bases = py::make_tuple(py::handle(PyExc_RuntimeError), py::handle(PyExc_MemoryError));
  g_out_of_memory_error = PyErr_NewExceptionWithDoc(
      "tensord.OutOfMemoryError",
      "Raised when the daemon cannot allocate a tensor's storage: over the session's\n"
      "--session-memory-limit (bytes), or the machine refused. A RuntimeError, as\n"
      "PyTorch's allocation failures are (torch.cuda.OutOfMemoryError is one too), and\n"
      "a MemoryError. The session stays usable.",
      bases.ptr(), nullptr);
  if (g_out_of_memory_error == nullptr) throw py::error_already_set();
  m.attr("OutOfMemoryError") = py::handle(g_out_of_memory_error);  // the module keeps a reference too
}

}  // namespace tensord::python
