// tensord._C's layout math for tensord.TensorMeta (tensord/_meta_value.py):
// one function that checks a layout described field by field and gives what
// the Python value keeps and answers, every number computed by meta/
// (TensorMeta::Strided, StorageBytesNeeded, is_contiguous, numel), so the
// Python type and a meta tensor cannot disagree. Pure meta/ code: it never
// opens, finds or waits for a session (TensorMeta works with no daemon, in
// `tensord check`).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "binding.h"
#include "errors.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/tensor_meta.h"

namespace tensord::python {
namespace {

// Every message starts with the name of the Python type the user called.
constexpr char kWhat[] = "TensorMeta";

std::string TypeName(py::handle o) { return py::str(py::type::handle_of(o).attr("__name__")).cast<std::string>(); }

// `o` (a Python int) as int64; RuntimeError naming `what` when it does not fit.
int64_t ToInt64(py::handle o, const char* what) {
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(o.ptr(), &overflow);
  if (overflow != 0) {
    Raise(RuntimeErr(absl::StrCat(kWhat, ": ", what, " value ", py::str(o).cast<std::string>(),
                                  " does not fit in int64")));
  }
  if (v == -1 && PyErr_Occurred() != nullptr) throw py::error_already_set();
  return static_cast<int64_t>(v);
}

// A sequence of ints (ints or objects with __index__, such as NumPy integers;
// never bools), or one int standing for a one-element sequence. TypeError
// naming `what` for anything else, RuntimeError for an int beyond int64.
Shape IntsOf(py::handle o, const char* what) {
  if (PyLong_Check(o.ptr()) && !PyBool_Check(o.ptr())) return Shape{ToInt64(o, what)};
  PyObject* it = PyObject_GetIter(o.ptr());
  if (it == nullptr) {
    PyErr_Clear();
    Raise(TypeErr(absl::StrCat(kWhat, ": ", what, " must be a sequence of ints, not ", TypeName(o))));
  }
  py::object iter = py::reinterpret_steal<py::object>(it);
  Shape out;
  while (PyObject* raw = PyIter_Next(iter.ptr())) {
    py::object item = py::reinterpret_steal<py::object>(raw);
    py::object index;
    if (!PyBool_Check(raw) && PyIndex_Check(raw)) {
      index = py::reinterpret_steal<py::object>(PyNumber_Index(raw));
      if (!index) PyErr_Clear();
    }
    if (!index) {
      Raise(TypeErr(absl::StrCat(kWhat, ": ", what, " must be ints, got ", py::repr(item).cast<std::string>(), " (",
                                 TypeName(item), ")")));
    }
    out.push_back(ToInt64(index, what));
  }
  if (PyErr_Occurred() != nullptr) throw py::error_already_set();  // the iteration itself failed
  return out;
}

py::dict Layout(py::handle shape, py::handle strides, py::handle storage_offset, py::handle dtype,
                py::handle device) {
  Shape sizes = IntsOf(shape, "shape");
  std::optional<Shape> given;
  if (!strides.is_none()) given = IntsOf(strides, "strides");
  if (!PyLong_Check(storage_offset.ptr()) || PyBool_Check(storage_offset.ptr())) {
    Raise(TypeErr(absl::StrCat(kWhat, ": storage_offset must be an int, not ", TypeName(storage_offset))));
  }
  const int64_t offset = ToInt64(storage_offset, "storage_offset");
  const py::object& dtype_cls = Types().dtype_cls;
  if (!dtype_cls || !py::isinstance(dtype, dtype_cls)) {
    Raise(TypeErr(absl::StrCat(kWhat, ": dtype must be a tensord.dtype, not ", TypeName(dtype))));
  }
  const int code = dtype.attr("_code").cast<int>();
  if (!IsValidScalarType(code)) Raise(TypeErr(absl::StrCat(kWhat, ": invalid dtype object with code ", code)));
  absl::StatusOr<Device> dev = ParseDevice(py::str(device).cast<std::string>());
  if (!dev.ok()) Raise(WithContext(dev.status(), absl::StrCat(kWhat, ": ")));
  const TensorMeta m = Unwrap(
      TensorMeta::Strided(kWhat, std::move(sizes), std::move(given), offset, static_cast<ScalarType>(code), *dev));
  py::dict out;
  out["sizes"] = py::tuple(py::cast(m.sizes));
  out["strides"] = py::tuple(py::cast(m.strides));
  out["storage_nbytes"] = Unwrap(m.StorageBytesNeeded());
  out["numel"] = m.numel();
  out["is_contiguous"] = m.is_contiguous();
  return out;
}

}  // namespace

void BindTensorMetaLayout(py::module_& m) {
  m.def("_tensor_meta_layout", &Layout, py::arg("shape"), py::arg("strides"), py::arg("storage_offset"),
        py::arg("dtype"), py::arg("device"),
        "The layout math of tensord.TensorMeta, done by meta/ (no session, no daemon).\n\n"
        "Takes shape (a sequence of ints, or one int), strides (the same, or None for the contiguous\n"
        "strides PyTorch gives: size-0 dims counted as 1), storage_offset (an int, in elements), dtype\n"
        "(a tensord.dtype) and device (a tensord.device or its name).\n\n"
        "Gives a dict: sizes and strides (tuples of ints, in elements), storage_nbytes (the bytes the\n"
        "storage must hold: (storage_offset + 1 + sum((size - 1) * stride)) * itemsize, or\n"
        "storage_offset * itemsize when a size is 0), numel (int) and is_contiguous (PyTorch's rule:\n"
        "size-1 dims ignored, empty tensors contiguous).\n\n"
        "Raises TypeError ('TensorMeta: shape must be ints, got 3.5 (float)') for arguments of the\n"
        "wrong type, and RuntimeError, every message starting 'TensorMeta: ', for an int beyond int64,\n"
        "more than 64 dims, a negative size ('Trying to create tensor with negative dimension -1:\n"
        "[2, -1]'), strides of another length ('dimensionality of sizes (2) must match dimensionality\n"
        "of strides (1)'), negative strides, a negative storage_offset, a device name that does not\n"
        "parse, or a storage size (or contiguous stride) that overflows int64 ('Storage size\n"
        "calculation overflowed with sizes=[...] and strides=[...] (storage_offset 0)').");
}

}  // namespace tensord::python
