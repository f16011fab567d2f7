// Conversion between Python objects and the client's values in tensord._C.
#include "convert.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "errors.h"
#include "tensord/meta/errors.h"

namespace tensord::python {
namespace {

// tensord._C.Tensor's type object (set when the class is registered): an
// isinstance check and the C++ value without pybind11's type-map lookups.
PyTypeObject* g_tensor_type = nullptr;
const py::detail::type_info* g_tensor_tinfo = nullptr;  // its pybind11 type info (set at registration)
bool g_tensor_default_holder = false;  // the holder is std::unique_ptr<tc::Tensor> (set at registration)
bool g_tensor_simple_layout = false;   // pybind11 lays Tensor instances out simply (set at registration)

bool IsNumpyScalar(py::handle o) {
  py::handle type = py::type::handle_of(o);
  py::object mod = type.attr("__module__");
  return py::isinstance<py::str>(mod) && mod.cast<std::string>() == "numpy" && py::hasattr(o, "dtype");
}

ScalarType DtypeOf(py::handle o) {
  const int code = o.attr("_code").cast<int>();
  if (!tensord::IsValidScalarType(code)) {
    Raise(tensord::TypeErr(absl::StrCat("invalid dtype object with code ", code)));
  }
  return static_cast<ScalarType>(code);
}

tc::Arg SequenceToArg(py::handle seq) {
  // A list or tuple (ToArg checks): items read without new references.
  PyObject* const* items = PySequence_Fast_ITEMS(seq.ptr());
  const size_t n = static_cast<size_t>(PySequence_Fast_GET_SIZE(seq.ptr()));
  if (n == 0) return tc::Arg(Shape{});
  bool all_int = true, all_num = true, all_tensor = true, tensor_or_none = true;
  for (size_t i = 0; i < n; ++i) {
    py::handle item = items[i];
    const bool is_tensor = TensorOf(item) != nullptr;
    const bool is_bool = PyBool_Check(item.ptr());
    const bool is_int =
        !is_bool && !is_tensor &&
        (PyLong_Check(item.ptr()) ||
         (!PyFloat_Check(item.ptr()) && !item.is_none() && IsNumpyScalar(item) &&
          py::str(item.attr("dtype").attr("kind")).cast<std::string>().find_first_of("iu") == 0));
    const bool is_float = PyFloat_Check(item.ptr());
    all_int &= is_int;
    all_num &= is_int || is_float;
    all_tensor &= is_tensor;
    tensor_or_none &= is_tensor || item.is_none();
  }
  if (all_int) {
    Shape v;
    v.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      if (PyLong_CheckExact(items[i])) {
        int overflow = 0;
        const long long x = PyLong_AsLongLongAndOverflow(items[i], &overflow);
        if (overflow == 0) {
          v.push_back(static_cast<int64_t>(x));
          continue;
        }
      }
      v.push_back(py::int_(py::reinterpret_borrow<py::object>(items[i])).cast<int64_t>());
    }
    return tc::Arg(std::move(v));
  }
  if (all_tensor) {
    std::vector<tc::Tensor> v;
    v.reserve(n);
    for (size_t i = 0; i < n; ++i) v.push_back(*TensorOf(items[i]));
    return tc::Arg(std::move(v));
  }
  if (tensor_or_none) {
    tc::Arg::OptionalTensors v;
    v.items.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      if (items[i] == Py_None) {
        v.items.emplace_back(std::nullopt);
      } else {
        v.items.emplace_back(*TensorOf(items[i]));
      }
    }
    return tc::Arg(std::move(v));
  }
  if (all_num) {
    std::vector<double> v;
    v.reserve(n);
    for (size_t i = 0; i < n; ++i) v.push_back(py::float_(py::reinterpret_borrow<py::object>(items[i])).cast<double>());
    return tc::Arg(Value(std::move(v)));
  }
  Raise(tensord::TypeErr(absl::StrCat("a sequence argument must hold only ints, only floats or only Tensors; got ",
                                      py::str(py::repr(seq)).cast<std::string>())));
}

}  // namespace

void SetTensorClass(py::handle cls) {
  g_tensor_type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  g_tensor_tinfo = py::detail::get_type_info(typeid(tc::Tensor));
  // TensorToPy's fast path constructs pybind11's default holder
  // (std::unique_ptr<tc::Tensor>) in place.
  g_tensor_default_holder = g_tensor_tinfo->default_holder;
  // The layout pybind11 chose for Tensor instances, from an empty one.
  py::object probe = py::reinterpret_steal<py::object>(py::detail::make_new_instance(g_tensor_type));
  if (!probe) throw py::error_already_set();
  g_tensor_simple_layout = reinterpret_cast<py::detail::instance*>(probe.ptr())->simple_layout;
}

const tc::Tensor* TensorOf(py::handle o) {
  if (g_tensor_type == nullptr || !PyObject_TypeCheck(o.ptr(), g_tensor_type)) return nullptr;
  auto* inst = reinterpret_cast<py::detail::instance*>(o.ptr());
  py::detail::value_and_holder vh = inst->get_value_and_holder();
  if (!vh.holder_constructed()) return nullptr;
  return vh.value_ptr<tc::Tensor>();
}

Device DeviceOf(py::handle o) {
  return Unwrap(tensord::ParseDevice(py::str(o).cast<std::string>()));
}

tc::Arg ToArg(py::handle o) {
  PyObject* p = o.ptr();
  if (p == Py_None) return tc::Arg();
  if (PyBool_Check(p)) return tc::Arg(p == Py_True);
  if (PyLong_Check(p)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(p, &overflow);
    if (overflow != 0) {
      Raise(tensord::RuntimeErr(absl::StrCat("value ", py::str(o).cast<std::string>(),
                                             " cannot be converted to int64 without overflow")));
    }
    return tc::Arg(static_cast<int64_t>(v));
  }
  if (const tc::Tensor* t = TensorOf(o)) return tc::Arg(*t);
  if (PyFloat_Check(p)) return tc::Arg(PyFloat_AS_DOUBLE(p));
  if (PyUnicode_Check(p)) return tc::Arg(o.cast<std::string>());
  const PyTypes& t = Types();
  if (t.dtype_cls && PyObject_IsInstance(p, t.dtype_cls.ptr()) == 1) return tc::Arg(DtypeOf(o));
  if (t.device_cls && PyObject_IsInstance(p, t.device_cls.ptr()) == 1) return tc::Arg(DeviceOf(o));
  if (PyList_Check(p) || PyTuple_Check(p)) return SequenceToArg(o);
  if (IsNumpyScalar(o)) {
    const std::string kind = py::str(o.attr("dtype").attr("kind"));
    if (kind == "b") return tc::Arg(o.attr("item")().cast<bool>());
    if (kind == "i" || kind == "u") return tc::Arg(o.attr("item")().cast<int64_t>());
    if (kind == "f") return tc::Arg(o.attr("item")().cast<double>());
  }
  Raise(tensord::TypeErr(absl::StrCat("cannot pass an object of type ",
                                      py::str(py::type::handle_of(o).attr("__name__")).cast<std::string>(),
                                      " to a tensord op (expected a Tensor, a number, a bool, a sequence of ints, a "
                                      "dtype, a device, a string or None)")));
}

// A new Python Tensor owning `t`, built as pybind11's init_instance does
// (value and unique_ptr holder in the instance's simple layout) but without
// registering the C++ pointer in pybind11's instance registry: that registry
// only serves to hand back an existing Python object for a C++ pointer
// returned by reference, which this binding never does for Tensors (every
// Tensor result is a new object), and pybind11 skips deregistration for
// instances that were not registered. Saves a hash-map insert and erase per
// op result.
py::object TensorToPy(tc::Tensor&& t) {
  if (g_tensor_tinfo == nullptr) return py::cast(std::move(t));
  if (!g_tensor_default_holder) {
    return py::reinterpret_steal<py::object>(py::detail::type_caster_generic::cast(
        &t, py::return_value_policy::move, py::handle(), g_tensor_tinfo, nullptr, [](const void* p) -> void* {
          return new tc::Tensor(std::move(*const_cast<tc::Tensor*>(static_cast<const tc::Tensor*>(p))));
        }));
  }
  py::object obj;
  if (g_tensor_simple_layout) {
    // pybind11's make_new_instance for a simple layout, without looking the
    // type's bases up again: tp_alloc zero-fills, then allocate_layout's
    // simple branch.
    obj = py::reinterpret_steal<py::object>(g_tensor_type->tp_alloc(g_tensor_type, 0));
    if (!obj) throw py::error_already_set();
    auto* inst = reinterpret_cast<py::detail::instance*>(obj.ptr());
    inst->simple_layout = true;
    inst->simple_value_holder[0] = nullptr;
    inst->simple_holder_constructed = false;
    inst->simple_instance_registered = false;
  } else {
    obj = py::reinterpret_steal<py::object>(py::detail::make_new_instance(g_tensor_type));
    if (!obj) throw py::error_already_set();
  }
  auto* inst = reinterpret_cast<py::detail::instance*>(obj.ptr());
  py::detail::value_and_holder v_h = inst->get_value_and_holder(g_tensor_tinfo);
  auto* value = new tc::Tensor(std::move(t));
  v_h.value_ptr() = value;
  inst->owned = true;
  new (std::addressof(v_h.holder<std::unique_ptr<tc::Tensor>>())) std::unique_ptr<tc::Tensor>(value);
  v_h.set_holder_constructed();
  return obj;
}

py::object Wrap(std::vector<tc::Tensor> out, bool as_tuple) {
  if (out.size() == 1 && !as_tuple) return TensorToPy(std::move(out[0]));
  py::tuple t(out.size());
  for (size_t i = 0; i < out.size(); ++i) t[i] = TensorToPy(std::move(out[i]));
  return std::move(t);
}

std::optional<tc::Tensor> OptionalTensor(py::handle o, const char* what) {
  if (o.is_none()) return std::nullopt;
  if (!py::isinstance<tc::Tensor>(o)) {
    Raise(tensord::TypeErr(absl::StrCat(what, " must be a Tensor or None, not ",
                                        py::str(py::type::handle_of(o).attr("__name__")).cast<std::string>())));
  }
  return o.cast<tc::Tensor>();
}

py::object OptionalToPy(const std::optional<tc::Tensor>& t) {
  if (!t.has_value() || !t->defined()) return py::none();
  return py::cast(*t);
}

}  // namespace tensord::python
