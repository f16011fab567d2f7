// Op calls from Python in tensord._C: call, call_method and call_any (an op
// by name) and OpFunction, the callable of one op (tensord.add, Tensor.add);
// all of them vectorcall, as every op call from Python comes this way. Also
// the op table as Python data.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "binding.h"
#include "call_sites.h"
#include "convert.h"
#include "errors.h"
#include "tensord/meta/autograd_rules.h"
#include "tensord/meta/op_table.h"

namespace tensord::python {
namespace {

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
  return CatchToPython([&]() -> PyObject* {
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
  });
}

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
  return CatchToPython([&]() -> PyObject* {
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
  });
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

// Pickled by reference, as a Python function is: __reduce__ gives its
// __qualname__, which pickle resolves in __module__ (tensord.add,
// tensord.Tensor.add); unpickling finds the same object. TypeError for one
// without a __qualname__ (made by hand, not by the package).
PyObject* OpFunctionReduce(PyObject* o, PyObject* /*unused*/) {
  PyObject* q = PyObject_GetAttrString(o, "__qualname__");
  if (q == nullptr || !PyUnicode_Check(q)) {
    Py_XDECREF(q);
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "cannot pickle tensord op %U: it has no __qualname__",
                 reinterpret_cast<OpFunctionObject*>(o)->name);
    return nullptr;
  }
  return q;
}

PyMethodDef kOpFunctionMethods[] = {
    {"__reduce__", &OpFunctionReduce, METH_NOARGS, "Pickles the op by reference (its __module__ and __qualname__)."},
    {nullptr, nullptr, 0, nullptr}};

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
    x.tp_methods = kOpFunctionMethods;
    return x;
  }();
  return &t;
}

}  // namespace

void BindOpCalls(py::module_& m) {
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
}

namespace {

// One op as Python data: name, overload, schema, flags, argument and
// return names.
py::dict EntryDict(const tensord::OpEntry& e) {
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
  d["has_derivative"] = tensord::HasSavedReadsRule(e);  // a formula, or a declared derivative
  py::list args, rets;
  for (const tensord::Argument& a : e.schema.arguments) args.append(a.name);
  for (const tensord::Return& r : e.schema.returns) rets.append(r.name);
  d["arguments"] = args;
  d["returns"] = rets;
  return d;
}

}  // namespace

void BindOpTable(py::module_& m) {
  m.def(
      "op_table",
      []() {
        py::list out;
        for (const tensord::OpEntry& e : tensord::OpTable::Get().entries()) out.append(EntryDict(e));
        return out;
      },
      "The op table: one dict per op (name, overload, schema, flags, argument and return names).");
  m.def("op_table_digest", []() { return tensord::OpTable::Get().digest(); });
  m.def(
      "define_op",
      [](const std::string& schema, const std::string& shape_rule, const std::string& derivative) {
        return EntryDict(*Unwrap(tc::DefineOp(schema, shape_rule, derivative)));
      },
      py::arg("schema"), py::arg("shape_rule"), py::arg("derivative") = "",
      "Defines an op at run time (tensord.library.define), with its derivative in table ops (\"\" for none); "
      "returns its dict as op_table's. RuntimeError when the schema, the rule or the derivative is refused.");
  m.def(
      "load_artifact",
      [](const py::bytes& file) {
        std::string bytes = file;
        absl::StatusOr<tc::LoadedLibrary> loaded;
        {
          py::gil_scoped_release release;  // hashing a large artifact takes a while
          loaded = tc::LoadArtifact(bytes);
        }
        tc::LoadedLibrary lib = Unwrap(std::move(loaded));  // raises with the GIL held
        py::dict out;
        out["name"] = lib.name;
        out["content_hash"] = lib.content_hash;
        py::list ops;
        for (const tensord::OpEntry* e : lib.ops) ops.append(EntryDict(*e));
        out["ops"] = ops;
        return out;
      },
      py::arg("file"),
      "Loads a kernel artifact's bytes (tensord.library.load): defines its ops in this process; returns "
      "{name, content_hash, ops: [op_table dicts]}. RuntimeError for a broken artifact or a name clash.");
  m.def(
      "tensord_binary", []() { return Unwrap(tc::TensordBinaryPath()); },
      "The tensord binary ($TENSORD_BIN, the build tree's, or PATH's); RuntimeError when there is none.");
  m.def(
      "defined_ops",
      [](const std::string& name) {
        py::list out;
        for (const tensord::OpEntry* e : tc::DefinedOps().Overloads(name)) out.append(EntryDict(*e));
        return out;
      },
      py::arg("name"), "The overloads of `name` (\"mylib::scale\") defined at run time, as op_table's dicts.");
  m.def(
      "defined_op_names",
      []() {
        const tensord::ExtensionOps& ops = tc::DefinedOps();
        std::vector<std::string> names;
        for (size_t i = 0; i < ops.size(); ++i) {
          const tensord::OpEntry* e = ops.at_id(tensord::kFirstExtensionOpId + static_cast<uint32_t>(i));
          if (e != nullptr && std::find(names.begin(), names.end(), e->schema.name) == names.end()) {
            names.push_back(e->schema.name);
          }
        }
        return names;
      },
      "The names (\"mylib::scale\") of the ops defined at run time, each once, in definition order.");
}

}  // namespace tensord::python
