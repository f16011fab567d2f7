// tensord._C — the pybind11 binding of the C++ client (client/). Python
// objects are converted to argument Values here (int, float, bool, int lists,
// Tensors, dtype and device objects, strings, None) and every op goes
// through client::Call, which resolves overloads, binds, runs meta and
// streams. Nothing about op semantics is decided in this file or in Python.
#include <Python.h>
#include <frameobject.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/str_cat.h"
#include "tensord/client/client.h"
#include "tensord/meta/autograd_rules.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/op_table.h"

namespace py = pybind11;
namespace tc = tensord::client;
using tensord::Device;
using tensord::ScalarType;
using tensord::Shape;
using tensord::Value;

// Sizes, strides and int lists (tensord::Shape, an absl::InlinedVector) go to
// and from Python as lists of ints, as pybind11/stl.h converts std::vector.
namespace pybind11::detail {
template <>
struct type_caster<tensord::Shape> : list_caster<tensord::Shape, int64_t> {};
}  // namespace pybind11::detail

namespace {

// ---------------------------------------------------------------- errors

// tensord.OutOfMemoryError, made at import (PYBIND11_MODULE): a RuntimeError,
// as PyTorch's allocation failures are, and a MemoryError.
PyObject* g_out_of_memory_error = nullptr;

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

template <typename T>
T Unwrap(absl::StatusOr<T> s) {
  if (!s.ok()) Raise(s.status());
  return *std::move(s);
}

void Check(const absl::Status& s) {
  if (!s.ok()) Raise(s);
}

// ---------------------------------------------------------------- registry

// Python classes the package registers at import (tensord.dtype,
// tensord.device), and the package directory (frames inside it are skipped
// when naming a call site).
struct PyTypes {
  py::object dtype_cls;
  py::object device_cls;
  py::object dtype_by_code;  // list: code -> tensord.dtype object
  std::string package_dir;
};
PyTypes& Types() {
  static PyTypes* t = new PyTypes();  // leaked: outlives interpreter teardown order
  return *t;
}

// "file.py:42" of a code object at an instruction offset, memoised: finding
// a line walks the code's line table, a cost on every streamed op otherwise.
// Keys hold a reference to their code object (an address is never reused
// while cached); the cache is emptied when it grows past kMaxSites. Guarded
// by the GIL.
const std::string& SiteText(PyCodeObject* code, int lasti, const char* fn, PyFrameObject* f) {
  constexpr size_t kMaxSites = 4096;
  using Key = std::pair<PyCodeObject*, int>;
  static auto* cache = new absl::flat_hash_map<Key, std::string>();  // leaked: outlives interpreter teardown
  auto it = cache->find(Key(code, lasti));
  if (it != cache->end()) return it->second;
  if (cache->size() >= kMaxSites) {
    for (auto& [k, v] : *cache) Py_DECREF(k.first);
    cache->clear();
  }
  const char* base = std::strrchr(fn, '/');
  Py_INCREF(code);
  return cache->emplace(Key(code, lasti), absl::StrCat(base ? base + 1 : fn, ":", PyFrame_GetLineNumber(f)))
      .first->second;
}

// "file.py:42" of the innermost frame outside the tensord package.
tc::CallSite PyCallSite() {
  PyFrameObject* f = PyEval_GetFrame();  // borrowed
  Py_XINCREF(f);
  const std::string& pkg = Types().package_dir;
  while (f != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(f);  // new reference
    const char* fn = PyUnicode_AsUTF8(code->co_filename);
    if (fn == nullptr) {
      PyErr_Clear();
      fn = "?";
    }
    const bool inside = !pkg.empty() && std::strncmp(fn, pkg.c_str(), pkg.size()) == 0;
    if (!inside) {
      tc::CallSite site{SiteText(code, PyFrame_GetLasti(f), fn, f)};
      Py_DECREF(code);
      Py_DECREF(f);
      return site;
    }
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(f);  // new reference
    Py_DECREF(f);
    f = back;
  }
  return tc::CallSite{"<python>"};
}

// The call site of one op call from Python, named only when the call leaves
// for the daemon (a pure meta call never walks the frames). The op call runs
// holding the GIL (it is plain CPU work until then); Materialize releases it
// for what follows (the session may block), and the destructor takes it back.
class DeferredPySite final : public tc::CallSite::Source {
 public:
  DeferredPySite() = default;
  DeferredPySite(const DeferredPySite&) = delete;
  DeferredPySite& operator=(const DeferredPySite&) = delete;
  ~DeferredPySite() {
    if (saved_ != nullptr) PyEval_RestoreThread(saved_);
  }
  std::string Materialize() override {
    if (!named_) {
      text_ = PyCallSite().text;
      named_ = true;
      saved_ = PyEval_SaveThread();
    }
    return text_;
  }

 private:
  std::string text_;
  bool named_ = false;
  PyThreadState* saved_ = nullptr;
};

// ---------------------------------------------------------------- conversion

// tensord._C.Tensor's type object (set when the class is registered): an
// isinstance check and the C++ value without pybind11's type-map lookups.
PyTypeObject* g_tensor_type = nullptr;

// The Tensor inside a Python object, or nullptr when it is not a (fully
// constructed) Tensor.
const tc::Tensor* TensorOf(py::handle o) {
  if (g_tensor_type == nullptr || !PyObject_TypeCheck(o.ptr(), g_tensor_type)) return nullptr;
  auto* inst = reinterpret_cast<py::detail::instance*>(o.ptr());
  py::detail::value_and_holder vh = inst->get_value_and_holder();
  if (!vh.holder_constructed()) return nullptr;
  return vh.value_ptr<tc::Tensor>();
}

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

Device DeviceOf(py::handle o) {
  return Unwrap(tensord::ParseDevice(py::str(o).cast<std::string>()));
}

tc::Arg ToArg(py::handle o);

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

// Whether op `name` ("split" or "split.Tensor") returns Tensor[]: such ops
// give a tuple of any length (one view, or none), as in PyTorch.
bool ReturnsList(absl::string_view name) {
  const tensord::OpTable& table = tensord::OpTable::Get();
  if (const tensord::OpEntry* e = table.Find(name)) {
    return !e->schema.returns.empty() && e->schema.returns[0].type == tensord::ArgType::kTensorList;
  }
  for (const tensord::OpEntry* e : table.Overloads(name.substr(0, name.find('.')))) {
    if (!e->schema.returns.empty() && e->schema.returns[0].type == tensord::ArgType::kTensorList) return true;
  }
  return false;
}

// A new Python Tensor owning `t`, built as pybind11's init_instance does
// (value and unique_ptr holder in the instance's simple layout) but without
// registering the C++ pointer in pybind11's instance registry: that registry
// only serves to hand back an existing Python object for a C++ pointer
// returned by reference, which this binding never does for Tensors (every
// Tensor result is a new object), and pybind11 skips deregistration for
// instances that were not registered. Saves a hash-map insert and erase per
// op result.
const py::detail::type_info* g_tensor_tinfo = nullptr;
bool g_tensor_default_holder = false;  // the holder is std::unique_ptr<tc::Tensor> (set at registration)
bool g_tensor_simple_layout = false;   // pybind11 lays Tensor instances out simply (set at registration)
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

py::object Wrap(std::vector<tc::Tensor> out, bool as_tuple = false) {
  if (out.size() == 1 && !as_tuple) return TensorToPy(std::move(out[0]));
  py::tuple t(out.size());
  for (size_t i = 0; i < out.size(); ++i) t[i] = TensorToPy(std::move(out[i]));
  return std::move(t);
}

// Per op name (as passed from Python), what CallOp needs besides the call
// itself; looked up once per name.
struct OpNameInfo {
  bool returns_list = false;
};
const OpNameInfo& InfoFor(absl::string_view name) {
  static auto* cache = new absl::flat_hash_map<std::string, OpNameInfo>();  // leaked, as Types()
  auto it = cache->find(name);
  if (it == cache->end()) it = cache->emplace(std::string(name), OpNameInfo{ReturnsList(name)}).first;
  return it->second;
}

// Calls op `name` with positional args[0..nargs) and the keyword arguments
// named by `kwnames` (values follow the positionals, vectorcall layout).
// `returns_list` is InfoFor(name).returns_list when the caller knows it
// (OpFunction), else it is looked up.
py::object CallOp(absl::string_view name, PyObject* const* args, size_t nargs, PyObject* kwnames, tc::CallMode mode,
                  std::optional<bool> returns_list = std::nullopt) {
  std::vector<tc::Arg> a;
  a.reserve(nargs);
  // The impl of each positional Tensor argument (nullptr for others), for
  // the in-place check below (the Args are moved into the call).
  absl::InlinedVector<const tc::TensorImpl*, 4> arg_impls(nargs, nullptr);
  for (size_t i = 0; i < nargs; ++i) {
    a.push_back(ToArg(args[i]));
    if (a.back().kind() == tc::Arg::kTensor) arg_impls[i] = a.back().tensors()[0]->impl().get();
  }
  tc::Kwargs k;
  if (kwnames != nullptr) {
    const Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
    k.reserve(nk);
    for (Py_ssize_t i = 0; i < nk; ++i) {
      Py_ssize_t len = 0;
      const char* key = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(kwnames, i), &len);
      if (key == nullptr) throw py::error_already_set();
      k.emplace_back(std::string(key, len), ToArg(args[nargs + i]));
    }
  }
  absl::StatusOr<std::vector<tc::Tensor>> r;
  {
    DeferredPySite site;  // holds the GIL until the call leaves for the daemon
    r = tc::Call(name, std::move(a), std::move(k), mode, tc::CallSite::Deferred(&site));
  }
  std::vector<tc::Tensor> out = Unwrap(std::move(r));
  // An in-place op returns its written argument: give back the caller's own
  // Python object (`x.add_(1) is x`, a Parameter stays a Parameter).
  if (out.size() == 1) {
    const tc::TensorImpl* impl = out[0].impl().get();
    for (size_t i = 0; i < nargs; ++i) {
      if (arg_impls[i] == impl) return py::reinterpret_borrow<py::object>(args[i]);
    }
  }
  return Wrap(std::move(out), returns_list.has_value() ? *returns_list : InfoFor(name).returns_list);
}

// tensord._C.call / call_method / call_any: vectorcall functions (no pybind11
// dispatch: these are the per-op hot path). args[0] is the op name.
template <tc::CallMode kMode>
PyObject* FastCall(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  try {
    if (nargs < 1 || !PyUnicode_Check(args[0])) {
      PyErr_SetString(PyExc_TypeError, "the first argument must be the op name (a str)");
      return nullptr;
    }
    Py_ssize_t len = 0;
    const char* name = PyUnicode_AsUTF8AndSize(args[0], &len);
    if (name == nullptr) return nullptr;
    return CallOp(absl::string_view(name, static_cast<size_t>(len)), args + 1, static_cast<size_t>(nargs - 1),
                  kwnames, kMode)
        .release()
        .ptr();
  } catch (py::error_already_set& e) {
    e.restore();
    return nullptr;
  } catch (...) {
    py::detail::translate_exception(std::current_exception());
    return nullptr;
  }
}

// ---------------------------------------------------------------- op functions

// tensord._C.OpFunction(name, mode, operand_check=None, requires_grad_kw=False):
// a callable for one op
// (what tensord.add and Tensor.add are). It is a vectorcall object and a
// method descriptor, so `x.sum(1)` and `a + b` reach CallOp without a Python
// frame, an argument tuple or a bound-method object. mode is "function",
// "method" or "any" (CallMode). With operand_check (the binary operators
// __add__, ...), a second argument that is not a Tensor, int or float is
// passed to operand_check(other) first, and NotImplemented is returned when
// it is false (so Python tries the other operand's reflected operator).
// With requires_grad_kw (factories), a keyword requires_grad is taken out of
// the call and, when true, makes the result a leaf that requires grad.
// Attributes (__name__, __qualname__, __doc__, __module__) live in the
// instance __dict__, set by the package.
struct OpFunctionObject {
  PyObject_HEAD
  PyObject* name;           // str (owned)
  const char* name_utf8;    // name's UTF-8 buffer (owned by name)
  Py_ssize_t name_len;
  tc::CallMode mode;
  bool requires_grad_kw;    // takes requires_grad= (factories): the result becomes a leaf requiring grad
  PyObject* operand_check;  // callable or nullptr (owned)
  bool returns_list;        // InfoFor(name).returns_list
  vectorcallfunc vectorcall;
  PyObject* dict;           // instance __dict__ (owned)
};

PyObject* OpFunctionVectorcall(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* self = reinterpret_cast<OpFunctionObject*>(callable);
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  try {
    if (self->operand_check != nullptr && nargs == 2 && kwnames == nullptr) {
      PyObject* other = args[1];
      if (TensorOf(other) == nullptr && !PyLong_Check(other) && !PyFloat_Check(other)) {
        const int ok = PyObject_IsTrue(py::handle(self->operand_check)(py::handle(other)).ptr());
        if (ok < 0) return nullptr;
        if (ok == 0) Py_RETURN_NOTIMPLEMENTED;
      }
    }
    const absl::string_view name(self->name_utf8, static_cast<size_t>(self->name_len));
    if (self->requires_grad_kw && kwnames != nullptr) {
      // PyTorch's factory keyword requires_grad=False: taken out of the call,
      // then applied to the result (as Tensor.requires_grad_ would).
      const Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
      for (Py_ssize_t i = 0; i < nk; ++i) {
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i), "requires_grad") != 0) continue;
        const int flag = PyObject_IsTrue(args[nargs + i]);
        if (flag < 0) return nullptr;
        std::vector<PyObject*> rest(args, args + nargs);
        py::tuple names(nk - 1);
        for (Py_ssize_t j = 0, o = 0; j < nk; ++j) {
          if (j == i) continue;
          rest.push_back(args[nargs + j]);
          names[o++] = py::reinterpret_borrow<py::object>(PyTuple_GET_ITEM(kwnames, j));
        }
        py::object out = CallOp(name, rest.data(), static_cast<size_t>(nargs), nk > 1 ? names.ptr() : nullptr,
                                self->mode, self->returns_list);
        if (flag) out.attr("_set_requires_grad")(true);
        return out.release().ptr();
      }
    }
    return CallOp(name, args, static_cast<size_t>(nargs), kwnames, self->mode, self->returns_list).release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
    return nullptr;
  } catch (...) {
    py::detail::translate_exception(std::current_exception());
    return nullptr;
  }
}

PyObject* OpFunctionNew(PyTypeObject* type, PyObject* args, PyObject* kwds) {
  static const char* kwlist[] = {"name", "mode", "operand_check", "requires_grad_kw", nullptr};
  PyObject* name = nullptr;
  const char* mode = nullptr;
  PyObject* check = Py_None;
  int requires_grad_kw = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "Us|Op:OpFunction", const_cast<char**>(kwlist), &name, &mode,
                                   &check, &requires_grad_kw)) {
    return nullptr;
  }
  tc::CallMode m;
  if (std::strcmp(mode, "function") == 0) {
    m = tc::CallMode::kFunction;
  } else if (std::strcmp(mode, "method") == 0) {
    m = tc::CallMode::kMethod;
  } else if (std::strcmp(mode, "any") == 0) {
    m = tc::CallMode::kAny;
  } else {
    PyErr_Format(PyExc_ValueError, "OpFunction: mode must be 'function', 'method' or 'any', not '%s'", mode);
    return nullptr;
  }
  if (check != Py_None && !PyCallable_Check(check)) {
    PyErr_SetString(PyExc_TypeError, "OpFunction: operand_check must be callable or None");
    return nullptr;
  }
  Py_ssize_t len = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(name, &len);
  if (utf8 == nullptr) return nullptr;
  auto* self = reinterpret_cast<OpFunctionObject*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  Py_INCREF(name);
  self->name = name;
  self->name_utf8 = utf8;
  self->name_len = len;
  self->mode = m;
  self->requires_grad_kw = requires_grad_kw != 0;
  self->operand_check = check == Py_None ? nullptr : (Py_INCREF(check), check);
  self->returns_list = InfoFor(absl::string_view(utf8, static_cast<size_t>(len))).returns_list;
  self->vectorcall = &OpFunctionVectorcall;
  self->dict = nullptr;
  return reinterpret_cast<PyObject*>(self);
}

void OpFunctionDealloc(PyObject* o) {
  auto* self = reinterpret_cast<OpFunctionObject*>(o);
  Py_XDECREF(self->name);
  Py_XDECREF(self->operand_check);
  Py_XDECREF(self->dict);
  Py_TYPE(o)->tp_free(o);
}

// Tensor.add is the OpFunction itself; x.add is a bound method.
PyObject* OpFunctionGet(PyObject* self, PyObject* obj, PyObject* /*type*/) {
  if (obj == nullptr || obj == Py_None) {
    Py_INCREF(self);
    return self;
  }
  return PyMethod_New(self, obj);
}

PyObject* OpFunctionRepr(PyObject* o) {
  auto* self = reinterpret_cast<OpFunctionObject*>(o);
  return PyUnicode_FromFormat("<tensord op %U>", self->name);
}

PyObject* OpFunctionOpName(PyObject* o, void*) {
  PyObject* n = reinterpret_cast<OpFunctionObject*>(o)->name;
  Py_INCREF(n);
  return n;
}

PyGetSetDef kOpFunctionGetSet[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {"op_name", OpFunctionOpName, nullptr, "The op's name in the table.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject* OpFunctionType() {
  static PyTypeObject t = [] {
    PyTypeObject x{PyVarObject_HEAD_INIT(nullptr, 0)};
    x.tp_name = "tensord._C.OpFunction";
    x.tp_basicsize = sizeof(OpFunctionObject);
    x.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR;
    x.tp_doc =
        "OpFunction(name, mode, operand_check=None, requires_grad_kw=False): the callable of one op (tensord.<op>, "
        "Tensor.<op>).";
    x.tp_new = &OpFunctionNew;
    x.tp_dealloc = &OpFunctionDealloc;
    x.tp_call = &PyVectorcall_Call;
    x.tp_vectorcall_offset = offsetof(OpFunctionObject, vectorcall);
    x.tp_descr_get = &OpFunctionGet;
    x.tp_dictoffset = offsetof(OpFunctionObject, dict);
    x.tp_repr = &OpFunctionRepr;
    x.tp_getset = kOpFunctionGetSet;
    return x;
  }();
  return &t;
}

// ---------------------------------------------------------------- host data

py::object ScalarToPy(const tensord::Scalar& s) {
  if (s.is_bool()) return py::bool_(s.to_bool());
  if (s.is_int()) return py::int_(s.to_int());
  return py::float_(s.to_double());
}

tc::HostData FetchNoGil(const tc::Tensor& t) {
  absl::StatusOr<tc::HostData> d;
  {
    py::gil_scoped_release nogil;
    d = t.Fetch();
  }
  return Unwrap(std::move(d));
}

py::object BuildList(const tc::HostData& d, size_t dim, int64_t* flat) {
  const auto& sizes = d.meta.sizes;
  if (dim == sizes.size()) return ScalarToPy(Unwrap(d.At((*flat)++)));
  py::list l(sizes[dim]);
  for (int64_t i = 0; i < sizes[dim]; ++i) l[i] = BuildList(d, dim + 1, flat);
  return std::move(l);
}

const char* NumpyName(ScalarType t) {
  switch (t) {
    case ScalarType::kBool: return "bool";
    case ScalarType::kUInt8: return "uint8";
    case ScalarType::kInt8: return "int8";
    case ScalarType::kInt16: return "int16";
    case ScalarType::kInt32: return "int32";
    case ScalarType::kInt64: return "int64";
    case ScalarType::kFloat16: return "float16";
    case ScalarType::kFloat32: return "float32";
    case ScalarType::kFloat64: return "float64";
    default: return nullptr;
  }
}

// The data as a NumPy array (owning a copy). `decode` converts dtypes NumPy
// lacks (bfloat16, float8) to float32 instead of raising.
py::array ToNumpy(const tc::Tensor& t, bool decode) {
  if (!t.is_meta() && !NumpyName(t.dtype()) && !decode) {
    Raise(tensord::TypeErr(absl::StrCat("Got unsupported ScalarType ", tensord::DtypeC10Name(t.dtype()),
                                        ": NumPy has no ", tensord::DtypeName(t.dtype()),
                                        " dtype; convert first, e.g. t.float().numpy()")));
  }
  auto d = std::make_unique<tc::HostData>(FetchNoGil(t));
  std::vector<py::ssize_t> shape(d->meta.sizes.begin(), d->meta.sizes.end());
  const char* np = NumpyName(d->meta.dtype);
  if (np == nullptr) {
    std::vector<double> v = d->ToDoubles();
    py::array_t<float> out(shape);
    float* p = out.mutable_data();
    for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<float>(v[i]);
    return std::move(out);
  }
  const int64_t item = d->meta.itemsize();
  std::vector<py::ssize_t> strides;
  for (int64_t s : d->meta.strides) strides.push_back(s * item);
  void* ptr = const_cast<char*>(d->byte_data());  // a writable copy (a string, or a lent segment)
  py::capsule owner(d.get(), [](void* p) { delete static_cast<tc::HostData*>(p); });
  d.release();
  return py::array(py::dtype(np), shape, strides, ptr, owner);
}

py::dict MetaDict(const tensord::TensorMeta& m) {
  py::dict d;
  d["sizes"] = py::tuple(py::cast(m.sizes));
  d["strides"] = py::tuple(py::cast(m.strides));
  d["storage_offset"] = m.storage_offset;
  d["dtype"] = static_cast<int>(m.dtype);
  d["device"] = m.device.ToString();
  return d;
}

py::dict StatsDict(const tc::Stats& s) {
  py::dict d;
  d["ops_issued"] = s.ops_issued;
  d["messages_sent"] = s.messages_sent;
  d["timed_flushes"] = s.timed_flushes;
  d["round_trips"] = s.round_trips;
  d["predicted_backwards"] = s.predicted_backwards;
  d["uploads"] = s.uploads;
  d["releases"] = s.releases;
  d["shm_uploads"] = s.shm_uploads;
  d["shm_fetches"] = s.shm_fetches;
  d["shm_adopted_uploads"] = s.shm_adopted_uploads;
  d["shm_segments_created"] = s.shm_segments_created;
  return d;
}

// Python index key -> TensorIndex list. Lists and nested sequences were
// turned into Tensors by the package (tensord.tensor) before this call.
std::vector<tc::TensorIndex> ToIndices(py::handle key) {
  std::vector<tc::TensorIndex> out;
  auto one = [&](py::handle k) {
    PyObject* p = k.ptr();
    if (p == Py_None) {
      out.emplace_back(tc::NoneIndex{});
    } else if (p == Py_Ellipsis) {
      out.emplace_back(tc::EllipsisIndex{});
    } else if (PyBool_Check(p)) {
      out.emplace_back(p == Py_True);
    } else if (PySlice_Check(p)) {
      const auto* sl = reinterpret_cast<const PySliceObject*>(p);
      tc::Slice s;
      auto get = [](PyObject* v) -> std::optional<int64_t> {
        if (v == Py_None) return std::nullopt;
        return py::int_(py::reinterpret_borrow<py::object>(v)).cast<int64_t>();
      };
      s.start = get(sl->start);
      s.stop = get(sl->stop);
      s.step = get(sl->step);
      // PyTorch's Python indexing refuses a negative or zero step as a ValueError.
      if (s.step.has_value() && *s.step == 0) throw py::value_error("slice step cannot be zero");
      if (s.step.has_value() && *s.step < 0) throw py::value_error("step must be greater than zero");
      out.emplace_back(s);
    } else if (const tc::Tensor* t = TensorOf(k)) {
      out.emplace_back(*t);
    } else if (PyLong_Check(p) || PyIndex_Check(p)) {
      out.emplace_back(static_cast<int64_t>(py::int_(py::reinterpret_borrow<py::object>(k)).cast<int64_t>()));
    } else {
      Raise(tensord::IndexErr(absl::StrCat(
          "only integers, slices (`:`), ellipsis (`...`), None and long or bool tensors are valid indices (got ",
          py::str(py::type::handle_of(k).attr("__name__")).cast<std::string>(), ")")));
    }
  };
  if (PyTuple_Check(key.ptr())) {
    for (py::handle k : py::reinterpret_borrow<py::tuple>(key)) one(k);
  } else {
    one(key);
  }
  return out;
}

// tensord._C.index(tensor, key).
PyObject* IndexFastCall(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs) {
  try {
    const tc::Tensor* self = nargs == 2 ? TensorOf(args[0]) : nullptr;
    if (self == nullptr) {
      PyErr_SetString(PyExc_TypeError, "index(tensor, key): expected a Tensor and an index key");
      return nullptr;
    }
    std::vector<tc::TensorIndex> idx = ToIndices(args[1]);
    absl::StatusOr<tc::Tensor> r;
    {
      DeferredPySite site;  // holds the GIL until a call leaves for the daemon
      r = tc::Index(*self, idx, tc::CallSite::Deferred(&site));
    }
    return TensorToPy(Unwrap(std::move(r))).release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
    return nullptr;
  } catch (...) {
    py::detail::translate_exception(std::current_exception());
    return nullptr;
  }
}

std::shared_ptr<tc::Session> SessionOrNone() { return tc::DefaultSessionIfAny(); }

// ---------------------------------------------------------------- autograd

std::optional<tc::Tensor> OptionalTensor(py::handle o, const char* what) {
  if (o.is_none()) return std::nullopt;
  if (!py::isinstance<tc::Tensor>(o)) {
    Raise(tensord::TypeErr(absl::StrCat(what, " must be a Tensor or None, not ",
                                        py::str(py::type::handle_of(o).attr("__name__")).cast<std::string>())));
  }
  return o.cast<tc::Tensor>();
}

std::vector<tc::Tensor> TensorSeq(py::handle seq, const char* what) {
  std::vector<tc::Tensor> out;
  for (py::handle h : py::reinterpret_borrow<py::sequence>(seq)) {
    std::optional<tc::Tensor> t = OptionalTensor(h, what);
    if (!t) Raise(tensord::TypeErr(absl::StrCat(what, " must hold Tensors, not None")));
    out.push_back(*t);
  }
  return out;
}

std::vector<std::optional<tc::Tensor>> OptionalTensorSeq(py::handle seq, const char* what) {
  std::vector<std::optional<tc::Tensor>> out;
  if (seq.is_none()) return out;
  for (py::handle h : py::reinterpret_borrow<py::sequence>(seq)) out.push_back(OptionalTensor(h, what));
  return out;
}

py::object OptionalToPy(const std::optional<tc::Tensor>& t) {
  if (!t.has_value() || !t->defined()) return py::none();
  return py::cast(*t);
}

// The Python handler for BackwardCallbacks (set by tensord.autograd at
// import). Leaked: it must outlive interpreter teardown order.
py::object* g_backward_handler = nullptr;

// Maps a Python exception to a Status of the matching kind (its message
// keeps the exception's type name and text).
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

absl::StatusOr<std::vector<std::optional<tc::Tensor>>> RunPythonBackward(const tc::BackwardCallbackRequest& req) {
  py::gil_scoped_acquire gil;
  if (g_backward_handler == nullptr) {
    return tensord::RuntimeErr("no Python backward handler is registered (import tensord.autograd)");
  }
  try {
    py::list grads;
    for (const auto& g : req.grads) grads.append(OptionalToPy(g));
    py::list saved;
    for (const auto& t : req.saved) saved.append(OptionalToPy(t));
    py::object r = (*g_backward_handler)(req.function_id, grads, req.create_graph, saved);
    std::vector<std::optional<tc::Tensor>> out;
    for (py::handle h : py::reinterpret_borrow<py::sequence>(r)) {
      out.push_back(OptionalTensor(h, "a gradient returned by backward"));
    }
    return out;
  } catch (py::error_already_set& e) {
    return StatusFromPython(e);
  }
}

std::string NodeRepr(const tc::GradNode& n) {
  return absl::StrCat("<", n.name, " object at 0x", absl::Hex(reinterpret_cast<uintptr_t>(&n)), ">");
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "tensord._C: the compiled binding of the tensord C++ client (use the tensord package instead).";
  // No lock-order graph on every Mutex acquisition of every op (the C++
  // test binaries keep abseil's deadlock detection on).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  {
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

  // ---- Tensor ---------------------------------------------------------------
  // ---- autograd graph nodes ---------------------------------------------------
  py::class_<tc::GradNode, std::shared_ptr<tc::GradNode>>(m, "Node", R"doc(A node of the autograd graph (a tensor's grad_fn).

The graph runs in the daemon; this is the client's mirror of it: name() is
PyTorch's class name ("AddBackward0", "AccumulateGrad", "ExpBackward" for a
user-defined Function Exp), next_functions the (node, output number) pairs
of the inputs (None for inputs that need no gradient).)doc")
      .def("name", [](const tc::GradNode& n) { return n.name; }, "The node's class name, e.g. 'MulBackward0'.")
      .def_property_readonly(
          "next_functions",
          [](const tc::GradNode& n) {
            py::tuple t(n.next_functions.size());
            for (size_t i = 0; i < n.next_functions.size(); ++i) {
              const auto& [node, nr] = n.next_functions[i];
              t[i] = py::make_tuple(node ? py::cast(node) : py::none(), nr);
            }
            return t;
          },
          "A tuple of (Node or None, output number) per differentiable input, in the op's argument order.")
      .def_property_readonly(
          "variable",
          [](const tc::GradNode& n) -> py::object {
            std::shared_ptr<tc::TensorImpl> v = n.variable.lock();
            if (v == nullptr) {
              if (n.name == "AccumulateGrad") Raise(tensord::RuntimeErr("the leaf of this AccumulateGrad node is gone"));
              Raise(tensord::TypeErr(absl::StrCat("'", n.name, "' object has no attribute 'variable'")));
            }
            return py::cast(tc::Tensor(v));
          },
          "AccumulateGrad nodes: the leaf tensor they accumulate into.")
      .def_property_readonly("_function_id", [](const tc::GradNode& n) { return n.function_id; })
      .def("__repr__", &NodeRepr);

  py::class_<tc::Tensor> tensor_cls(m, "Tensor", py::dynamic_attr(), R"doc(A tensor: a handle to data in a tensord daemon, or a meta tensor.

Its metadata (shape, strides, dtype, device) is known locally at once; reading
values (numpy(), item(), tolist(), printing) is a sync point that waits for
the daemon. Create tensors with tensord.tensor, tensord.from_numpy or the
factories (tensord.zeros, tensord.randn, ...). ``Tensor(other)`` makes a new
Python object sharing ``other``'s handle and autograd state (what
``class Parameter(Tensor)`` builds on).)doc");
  g_tensor_type = reinterpret_cast<PyTypeObject*>(tensor_cls.ptr());
  g_tensor_tinfo = py::detail::get_type_info(typeid(tc::Tensor));
  // TensorToPy's fast path constructs pybind11's default holder
  // (std::unique_ptr<tc::Tensor>) in place.
  g_tensor_default_holder = g_tensor_tinfo->default_holder;
  {
    // The layout pybind11 chose for Tensor instances, from an empty one.
    py::object probe = py::reinterpret_steal<py::object>(py::detail::make_new_instance(g_tensor_type));
    if (!probe) throw py::error_already_set();
    g_tensor_simple_layout = reinterpret_cast<py::detail::instance*>(probe.ptr())->simple_layout;
  }
  tensor_cls
      .def(py::init([](const tc::Tensor& other) { return tc::Tensor(other); }), py::arg("other"),
           "Tensor(other): a new Python object for the same tensor (same handle, data and autograd state).")
      .def_property_readonly("_impl_id",
                             [](const tc::Tensor& t) { return reinterpret_cast<uintptr_t>(t.impl().get()); })
      .def_property_readonly("_requires_grad", &tc::Tensor::requires_grad)
      .def(
          "_set_requires_grad",
          [](tc::Tensor& t, bool flag) {
            tc::CallSite site = PyCallSite();
            Check(t.SetRequiresGrad(flag, std::move(site)));
          },
          py::arg("requires_grad"))
      .def_property_readonly("is_leaf", &tc::Tensor::is_leaf,
                             "True for tensors that do not require grad and for tensors that require grad but were "
                             "not produced by a recorded op (their .grad is filled by backward).")
      .def_property_readonly(
          "grad_fn", [](const tc::Tensor& t) -> py::object {
            if (t.grad_fn() == nullptr) return py::none();
            return py::cast(t.grad_fn());
          },
          "The Node that produced this tensor in the autograd graph, or None for a leaf.")
      .def_property_readonly("retains_grad", &tc::Tensor::retains_grad,
                             "True when retain_grad() was called on this non-leaf.")
      .def_property_readonly("output_nr", &tc::Tensor::output_nr,
                             "Which output of its grad_fn this tensor is.")
      .def(
          "retain_grad",
          [](tc::Tensor& t) {
            tc::CallSite site = PyCallSite();
            Check(t.RetainGrad(std::move(site)));
          },
          "Makes a non-leaf keep its .grad after backward (a no-op on leaves). RuntimeError when the tensor does not "
          "require grad.")
      .def("_grad_tensor", [](const tc::Tensor& t) { return OptionalToPy(Unwrap(t.Grad())); })
      .def("_set_grad",
           [](tc::Tensor& t, py::handle g) { Check(t.SetGrad(OptionalTensor(g, "assigned grad"))); })
      .def("_sizes", [](const tc::Tensor& t) { return py::tuple(py::cast(t.sizes())); })
      .def("_strides", [](const tc::Tensor& t) { return py::tuple(py::cast(t.strides())); })
      .def("_size_of", [](const tc::Tensor& t, int64_t d) { return Unwrap(t.size(d)); })
      .def("_stride_of", [](const tc::Tensor& t, int64_t d) { return Unwrap(t.stride(d)); })
      .def_property_readonly("_dtype_code", [](const tc::Tensor& t) { return static_cast<int>(t.dtype()); })
      .def_property_readonly("_device_str", [](const tc::Tensor& t) { return t.device().ToString(); })
      .def_property_readonly("_handle", &tc::Tensor::handle)
      .def_property_readonly("_session_id",
                             [](const tc::Tensor& t) -> py::object {
                               if (t.session() == nullptr) return py::none();
                               return py::int_(t.session()->session_id());
                             })
      .def_property_readonly("is_meta", &tc::Tensor::is_meta, "True when the tensor lives on the meta device (no data).")
      .def("storage_offset", &tc::Tensor::storage_offset,
           "The offset (in elements) of the first element in the tensor's storage.")
      .def("numel", &tc::Tensor::numel, "The number of elements (the product of the sizes; 1 for a 0-dim tensor).")
      .def("dim", &tc::Tensor::dim, "The number of dimensions.")
      .def("is_contiguous", &tc::Tensor::is_contiguous,
           "True when the strides are row-major contiguous (strides of size-1 dims ignored, as PyTorch).")
      .def(
          "item",
          [](const tc::Tensor& t) {
            absl::StatusOr<tensord::Scalar> s;
            {
              py::gil_scoped_release nogil;
              s = t.Item();
            }
            return ScalarToPy(Unwrap(std::move(s)));
          },
          R"doc(The value of a one-element tensor as a Python number (a sync point).

Raises RuntimeError when numel() != 1, NotImplementedError on a meta tensor
(its value depends on data), or the error of the op that produced the tensor
if it failed in the daemon.)doc")
      .def(
          "tolist",
          [](const tc::Tensor& t) {
            tc::HostData d = FetchNoGil(t);
            int64_t flat = 0;
            return BuildList(d, 0, &flat);
          },
          "The data as nested Python lists (a number for a 0-dim tensor). A sync point.")
      .def(
          "numpy",
          [](const tc::Tensor& t, bool force) {
            if (t.requires_grad() && !force) {
              Raise(tensord::RuntimeErr(
                  "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."));
            }
            return ToNumpy(t, false);
          },
          py::kw_only(), py::arg("force") = false,
          R"doc(numpy(*, force=False): a NumPy array holding a copy of the data (a sync point).

dtypes map by name (float32 -> numpy.float32, bool -> numpy.bool_); bfloat16
and float8 raise TypeError (NumPy has no such types); meta tensors raise
NotImplementedError. A tensor that requires grad raises RuntimeError unless
force=True, as in PyTorch (use tensor.detach().numpy()).)doc")
      .def("_host_array", [](const tc::Tensor& t) { return ToNumpy(t, true); })
      .def("_cpp_repr", &tc::Tensor::ToString);

  // ---- ops --------------------------------------------------------------------
  {
    static PyMethodDef defs[] = {
        {"call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&FastCall<tc::CallMode::kFunction>)),
         METH_FASTCALL | METH_KEYWORDS,
         "call(name, *args, **kwargs): calls op `name` as a function (overloads resolved in C++)."},
        {"call_method", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&FastCall<tc::CallMode::kMethod>)),
         METH_FASTCALL | METH_KEYWORDS, "call_method(name, self, *args, **kwargs): calls op `name` as a Tensor method."},
        {"call_any", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&FastCall<tc::CallMode::kAny>)),
         METH_FASTCALL | METH_KEYWORDS,
         "call_any(name, *args, **kwargs): calls op `name` (base or full name) with any overload."},
        {nullptr, nullptr, 0, nullptr}};
    for (PyMethodDef* d = defs; d->ml_name != nullptr; ++d) {
      py::object f = py::reinterpret_steal<py::object>(PyCFunction_NewEx(d, nullptr, m.attr("__name__").ptr()));
      if (!f) throw py::error_already_set();
      m.attr(d->ml_name) = f;
    }
  }
  if (PyType_Ready(OpFunctionType()) < 0) throw py::error_already_set();
  Py_INCREF(OpFunctionType());
  m.attr("OpFunction") = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(OpFunctionType()));
  {
    // index(tensor, key): a vectorcall function too (every x[...] goes here).
    static PyMethodDef index_def = {
        "index", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&IndexFastCall)), METH_FASTCALL,
        "index(tensor, key): tensor[key] (ints, slices, None, Ellipsis, bools, integer and bool tensors)."};
    py::object f = py::reinterpret_steal<py::object>(PyCFunction_NewEx(&index_def, nullptr, m.attr("__name__").ptr()));
    if (!f) throw py::error_already_set();
    m.attr("index") = f;
  }
  m.def(
      "from_buffer",
      [](py::buffer buf, std::vector<int64_t> sizes, int dtype_code, py::object device) {
        if (!tensord::IsValidScalarType(dtype_code)) Raise(tensord::TypeErr("from_buffer: invalid dtype code"));
        py::buffer_info info = buf.request();
        std::optional<Device> dev;
        if (!device.is_none()) dev = DeviceOf(device);
        const size_t nbytes = static_cast<size_t>(info.size) * static_cast<size_t>(info.itemsize);
        tc::CallSite site = PyCallSite();
        absl::StatusOr<tc::Tensor> r;
        {
          py::gil_scoped_release nogil;
          r = tc::FromBlob(info.ptr, nbytes, Shape(sizes.begin(), sizes.end()), static_cast<ScalarType>(dtype_code), dev,
                           std::move(site));
        }
        return Unwrap(std::move(r));
      },
      py::arg("buffer"), py::arg("sizes"), py::arg("dtype"), py::arg("device") = py::none(),
      "from_buffer(buffer, sizes, dtype_code, device=None): a tensor holding a copy of a C-contiguous buffer.");

  m.def(
      "op_table",
      []() {
        py::list out;
        for (const tensord::OpEntry& e : tensord::OpTable::Get().entries()) {
          py::dict d;
          d["id"] = e.id;
          d["name"] = e.schema.name;
          d["overload"] = e.schema.overload;
          d["full_name"] = e.full_name();
          d["schema"] = e.schema_text;
          d["is_method"] = e.has(tensord::kMethod);
          d["is_function"] = e.has(tensord::kFunction);
          d["is_factory"] = e.has(tensord::kFactory);
          d["is_random"] = e.has(tensord::kRandom);
          d["data_dependent"] = e.has(tensord::kDataDependent);
          d["is_view"] = e.is_view();
          d["not_differentiable"] = e.has(tensord::kNotDifferentiable);
          d["differentiable_args"] = tensord::DifferentiableArgs(e);
          py::list args, rets;
          for (const tensord::Argument& a : e.schema.arguments) args.append(a.name);
          for (const tensord::Return& r : e.schema.returns) rets.append(r.name);
          d["arguments"] = args;
          d["returns"] = rets;
          out.append(d);
        }
        return out;
      },
      "The op table: one dict per op (name, overload, schema, flags, argument and return names).");
  m.def("op_table_digest", []() { return tensord::OpTable::Get().digest(); });

  // ---- autograd ---------------------------------------------------------------
  m.def("is_grad_enabled", &tc::IsGradEnabled, "Whether ops on this thread are recorded for autograd.");
  m.def("_set_grad_enabled", &tc::SetGradEnabled, py::arg("mode"));
  m.def(
      "_backward",
      [](py::handle roots, py::handle grad_roots, py::object retain_graph, bool create_graph, py::handle inputs) {
        std::vector<tc::Tensor> r = TensorSeq(roots, "tensors");
        std::vector<std::optional<tc::Tensor>> g = OptionalTensorSeq(grad_roots, "grad_tensors");
        std::vector<tc::Tensor> in = inputs.is_none() ? std::vector<tc::Tensor>{} : TensorSeq(inputs, "inputs");
        std::optional<bool> retain;
        if (!retain_graph.is_none()) retain = retain_graph.cast<bool>();
        tc::CallSite site = PyCallSite();
        absl::Status st;
        {
          py::gil_scoped_release nogil;
          st = tc::Backward(r, g, retain, create_graph, in, std::move(site));
        }
        Check(st);
      },
      "_backward(tensors, grad_tensors, retain_graph, create_graph, inputs): one blocking Backward request.");
  m.def(
      "_grad",
      [](py::handle outputs, py::handle inputs, py::handle grad_outputs, py::object retain_graph, bool create_graph,
         bool allow_unused) {
        std::vector<tc::Tensor> o = TensorSeq(outputs, "outputs");
        std::vector<tc::Tensor> in = TensorSeq(inputs, "inputs");
        std::vector<std::optional<tc::Tensor>> g = OptionalTensorSeq(grad_outputs, "grad_outputs");
        std::optional<bool> retain;
        if (!retain_graph.is_none()) retain = retain_graph.cast<bool>();
        tc::CallSite site = PyCallSite();
        absl::StatusOr<std::vector<std::optional<tc::Tensor>>> r;
        {
          py::gil_scoped_release nogil;
          r = tc::Grad(o, in, g, retain, create_graph, allow_unused, std::move(site));
        }
        std::vector<std::optional<tc::Tensor>> v = Unwrap(std::move(r));
        py::tuple out(v.size());
        for (size_t i = 0; i < v.size(); ++i) out[i] = OptionalToPy(v[i]);
        return out;
      },
      "_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused): tuple of Tensor or None.");
  m.def(
      "_record_function",
      [](uint64_t function_id, const std::string& name, py::handle inputs, py::handle outputs,
         std::vector<bool> non_differentiable, py::handle dirty, bool materialize_grads, py::handle saved) {
        tc::FunctionRecord rec;
        rec.function_id = function_id;
        rec.name = name;
        for (py::handle h : py::reinterpret_borrow<py::sequence>(inputs)) {
          rec.inputs.push_back(py::isinstance<tc::Tensor>(h) ? std::optional<tc::Tensor>(h.cast<tc::Tensor>())
                                                             : std::nullopt);
        }
        rec.outputs = TensorSeq(outputs, "outputs");
        rec.non_differentiable = std::move(non_differentiable);
        rec.dirty = TensorSeq(dirty, "dirty tensors");
        rec.materialize_grads = materialize_grads;
        if (!saved.is_none()) {
          for (py::handle h : py::reinterpret_borrow<py::sequence>(saved)) {
            rec.saved.push_back(OptionalTensor(h, "a tensor given to save_for_backward"));
          }
        }
        tc::CallSite site = PyCallSite();
        return Unwrap(tc::RecordFunction(rec, std::move(site)));
      },
      py::arg("function_id"), py::arg("name"), py::arg("inputs"), py::arg("outputs"), py::arg("non_differentiable"),
      py::arg("dirty"), py::arg("materialize_grads"), py::arg("saved") = py::none(),
      "_record_function(id, name, inputs, outputs, non_differentiable, dirty, materialize_grads, saved=None) -> "
      "recorded. saved: ctx.save_for_backward's tensors (Tensor or None each), kept in the daemon's node.");
  m.def(
      "_set_backward_handler",
      [](py::object handler) {
        if (g_backward_handler == nullptr) g_backward_handler = new py::object();
        *g_backward_handler = std::move(handler);
        tc::SetBackwardCallbackHandler(&RunPythonBackward);
      },
      "Registers handler(function_id, grads, create_graph, saved) -> grads, run when the daemon reaches a Function "
      "node (saved: the node's unpacked saved tensors, Tensor or None each).");
  m.def("_take_released_functions", &tc::TakeReleasedFunctions,
        "Function ids whose daemon node is gone since the last call.");
  m.def(
      "manual_seed",
      [](py::int_ seed) {
        const uint64_t s = seed.cast<uint64_t>();
        absl::Status st;
        {
          py::gil_scoped_release nogil;
          st = tc::ManualSeed(s);
        }
        Check(st);
      },
      "manual_seed(seed): reseeds the current session's generator and every session opened later.");

  // ---- dtypes and devices -----------------------------------------------------
  m.def(
      "dtypes",
      []() {
        py::list out;
        for (int c = 0; c < tensord::kNumScalarTypes; ++c) {
          const auto t = static_cast<ScalarType>(c);
          out.append(py::make_tuple(c, std::string(tensord::DtypeName(t)), tensord::ItemSize(t),
                                    tensord::IsFloating(t), tensord::IsSigned(t),
                                    std::string(tensord::DtypeC10Name(t))));
        }
        return out;
      },
      "All dtypes: (code, name, itemsize, is_floating_point, is_signed, c10 name).");
  m.def(
      "parse_dtype",
      [](const std::string& name) { return static_cast<int>(Unwrap(tensord::ParseDtype(name))); },
      "The code of a dtype name ('float32', 'float', 'long', ...); RuntimeError if unknown.");
  m.def(
      "parse_device",
      [](const std::string& text) {
        Device d = Unwrap(tensord::ParseDevice(text));
        const char* type = d.is_cpu() ? "cpu" : d.is_cuda() ? "cuda" : "meta";
        return py::make_tuple(type, d.is_cuda() ? py::object(py::int_(d.index)) : py::object(py::none()));
      },
      "Parses 'cpu', 'meta', 'cuda', 'cuda:N' into (type, index or None).");
  m.def("push_device", [](py::handle d) { tc::PushDefaultDevice(DeviceOf(d)); });
  m.def("pop_device", []() { tc::PopDefaultDevice(); });
  m.def("_force_meta_device", []() { tc::ForceMetaDevice(); },
        "From now on, in every thread, every op's device= argument (and every factory) is meta, whatever the "
        "device contexts say. Used by `tensord check`; cannot be undone.");
  m.def("default_device", []() -> py::object {
    std::optional<Device> d = tc::DefaultDevice();
    if (!d) return py::none();
    return py::str(d->ToString());
  });
  m.def("_register_types", [](py::object dtype_cls, py::object device_cls, std::string package_dir) {
    Types().dtype_cls = std::move(dtype_cls);
    Types().device_cls = std::move(device_cls);
    Types().package_dir = std::move(package_dir);
  });

  // ---- sessions ---------------------------------------------------------------
  py::class_<tc::Session, std::shared_ptr<tc::Session>>(m, "Session",
                                                          "A session with a tensord daemon (see tensord.connect).")
      .def_property_readonly("session_id", &tc::Session::session_id)
      .def_property_readonly("address", &tc::Session::address)
      .def_property_readonly("daemon_pid", &tc::Session::daemon_pid)
      .def_property_readonly("closed", &tc::Session::closed)
      .def_property_readonly("uses_shared_memory", &tc::Session::uses_shared_memory)
      .def_property_readonly("uses_same_host_stream", &tc::Session::uses_same_host_stream)
      .def_property_readonly("uses_tcp_stream", &tc::Session::uses_tcp_stream)
      .def_property_readonly("devices", [](const tc::Session& s) { return s.daemon_info().devices; })
      .def("stats", [](const tc::Session& s) { return StatsDict(s.stats()); })
      .def("synchronize",
           [](tc::Session& s) {
             absl::Status st;
             {
               py::gil_scoped_release nogil;
               st = s.Synchronize();
             }
             Check(st);
           })
      .def("close", [](tc::Session& s) {
        absl::Status st;
        {
          py::gil_scoped_release nogil;
          st = s.Close();
        }
        Check(st);
      });
  // flush_interval_us < 0: SessionOptions' default ($TENSORD_FLUSH_US, else 2 ms).
  auto options = [](int flush_interval_us) {
    return tc::SessionOptions{.flush_interval_us = flush_interval_us, .client_name = "tensord-python"};
  };
  m.def(
      "connect",
      [options](const std::string& address, int flush_interval_us) {
        absl::StatusOr<std::shared_ptr<tc::Session>> s;
        {
          py::gil_scoped_release nogil;
          s = tc::Session::Connect(address, options(flush_interval_us));
        }
        return Unwrap(std::move(s));
      },
      py::arg("address"), py::arg("flush_interval_us") = -1);
  m.def(
      "spawn_embedded",
      [options](int flush_interval_us) {
        absl::StatusOr<std::shared_ptr<tc::Session>> s;
        {
          py::gil_scoped_release nogil;
          s = tc::Session::SpawnEmbedded(options(flush_interval_us));
        }
        return Unwrap(std::move(s));
      },
      py::arg("flush_interval_us") = -1);
  m.def("current_session", []() {
    absl::StatusOr<std::shared_ptr<tc::Session>> s;
    {
      py::gil_scoped_release nogil;
      s = tc::CurrentSession();
    }
    return Unwrap(std::move(s));
  });
  m.def("default_session", &SessionOrNone);
  m.def("set_default_session", &tc::SetDefaultSession);
  m.def("exchange_thread_session", &tc::ExchangeThreadSession);
  m.def("shutdown", []() {
    py::gil_scoped_release nogil;
    tc::ShutdownAll();
  });
  m.def("meta_ops_run", &tc::MetaOpsRun);
  m.def(
      "_meta_cache_info",
      []() {
        const tc::MetaCacheInfo i = tc::GetMetaCacheInfo();
        py::dict d;
        d["enabled"] = i.enabled;
        d["hits"] = i.hits;
        d["misses"] = i.misses;
        d["size"] = i.size;
        d["capacity"] = i.capacity;
        return d;
      },
      "This thread's meta cache: dict of enabled, hits, misses, size and capacity (entries).");
  m.def("_set_meta_cache_enabled", &tc::SetMetaCacheEnabled, py::arg("enabled"),
        "Turns this thread's meta cache on or off (entries are kept).");
  m.def("_clear_meta_cache", &tc::ClearMetaCache, "Drops this thread's meta cache entries and zeroes its counters.");
  m.def(
      "_daemon_meta",
      [](const tc::Tensor& t) {
        absl::StatusOr<tensord::TensorMeta> r;
        {
          py::gil_scoped_release nogil;
          r = t.DaemonMeta();
        }
        return MetaDict(Unwrap(std::move(r)));
      },
      "The metadata the daemon holds for a tensor (a sync point): dict of sizes, strides, storage_offset, dtype "
      "(code), device.");
  m.def("_client_meta", [](const tc::Tensor& t) { return MetaDict(t.meta()); });
  m.def("_storage_id", [](const tc::Tensor& t) { return t.storage_id(); },
        "The client's id of the storage a tensor views (no round trip; meta tensors too): a view shares its "
        "input's id, every fresh tensor has a new one. For tests and tools comparing aliasing.");
  m.def(
      "_daemon_storage_id",
      [](const tc::Tensor& t) {
        absl::StatusOr<uint64_t> r;
        {
          py::gil_scoped_release nogil;
          r = t.DaemonStorageId();
        }
        return Unwrap(std::move(r));
      },
      "The daemon's id of the storage a tensor views (a sync point): equal ids mean the same storage.");
}
