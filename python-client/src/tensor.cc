// The Tensor class of tensord._C: its methods, its data as Python numbers,
// lists and NumPy arrays, indexing (tensor[key]) and tensors made from
// buffers.
#include <pybind11/numpy.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "binding.h"
#include "call_sites.h"
#include "convert.h"
#include "errors.h"
#include "tensord/meta/errors.h"

namespace tensord::python {
namespace {

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
  return CatchToPython([&]() -> PyObject* {
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
  });
}

}  // namespace

void BindTensor(py::module_& m) {
  py::class_<tc::Tensor> tensor_cls(m, "Tensor", py::dynamic_attr(), R"doc(A tensor: a handle to data in a tensord daemon, or a meta tensor.

Its metadata (shape, strides, dtype, device) is known locally at once; reading
values (numpy(), item(), tolist(), printing) is a sync point that waits for
the daemon. Create tensors with tensord.tensor, tensord.from_numpy or the
factories (tensord.zeros, tensord.randn, ...). ``Tensor(other)`` makes a new
Python object sharing ``other``'s handle and autograd state (what
``class Parameter(Tensor)`` builds on).)doc");
  SetTensorClass(tensor_cls);
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
}

void BindTensorFunctions(py::module_& m) {
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
}

}  // namespace tensord::python
