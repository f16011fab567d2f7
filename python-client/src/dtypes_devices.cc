// tensord._C's dtypes and devices: the dtype table, parsing dtype and device
// names, the default device stack, and the Python classes the package
// registers.
#include <optional>
#include <string>
#include <utility>

#include "binding.h"
#include "convert.h"
#include "errors.h"

namespace tensord::python {

PyTypes& Types() {
  static PyTypes* t = new PyTypes();  // leaked: outlives interpreter teardown order
  return *t;
}

void BindDtypesAndDevices(py::module_& m) {
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
        const char* type = d.is_cpu() ? "cpu" : d.is_cuda() ? "cuda" : d.is_privateuseone() ? "privateuseone" : "meta";
        return py::make_tuple(type, d.indexed() ? py::object(py::int_(d.index)) : py::object(py::none()));
      },
      "Parses 'cpu', 'meta', 'cuda', 'cuda:N', 'privateuseone[:N]' into (type, index or None).");
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
}

}  // namespace tensord::python
