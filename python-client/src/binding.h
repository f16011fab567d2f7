// The internal header of tensord._C, the pybind11 binding of the C++ client
// (client/): what every file of the binding shares (pybind11, the client, the
// namespace aliases, the conversion of tensord::Shape, the classes the
// package registers) and the Bind function of each file. module.cc calls the
// Bind functions in the order declared here: pybind11 writes a function's
// signature when the function is defined, naming only the classes registered
// by then, so a class comes before the functions that take or give it.
#ifndef TENSORD_PYTHON_CLIENT_SRC_BINDING_H_
#define TENSORD_PYTHON_CLIENT_SRC_BINDING_H_

#include <Python.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>

#include "tensord/client/client.h"

namespace py = pybind11;
namespace tc = tensord::client;

// Sizes, strides and int lists (tensord::Shape, an absl::InlinedVector) go to
// and from Python as lists of ints, as pybind11/stl.h converts std::vector.
namespace pybind11::detail {
template <>
struct type_caster<tensord::Shape> : list_caster<tensord::Shape, int64_t> {};
}  // namespace pybind11::detail

namespace tensord::python {

// Python classes the package registers at import (tensord.dtype,
// tensord.device), and the package directory (frames inside it are skipped
// when naming a call site).
struct PyTypes {
  py::object dtype_cls;
  py::object device_cls;
  std::string package_dir;
};
// The module's one PyTypes, filled by tensord._C._register_types; null
// classes and an empty directory until the package has called it.
PyTypes& Types();

// Each Bind function defines its names on the module `m`; a Python error
// while defining them is thrown as py::error_already_set.

// errors.cc: OutOfMemoryError (tensord.OutOfMemoryError).
void BindErrors(py::module_& m);
// autograd.cc: the Node class (a tensor's grad_fn).
void BindAutogradNode(py::module_& m);
// tensor.cc: the Tensor class; TensorOf and TensorToPy work from here on.
void BindTensor(py::module_& m);
// op_function.cc: call, call_method, call_any and the OpFunction type.
void BindOpCalls(py::module_& m);
// tensor.cc: index(tensor, key) and from_buffer.
void BindTensorFunctions(py::module_& m);
// op_function.cc: op_table and op_table_digest.
void BindOpTable(py::module_& m);
// autograd.cc: grad mode, _backward, _grad, user-defined Functions
// (_record_function, _set_backward_handler, _take_released_functions) and
// manual_seed.
void BindAutograd(py::module_& m);
// dtypes_devices.cc: the dtype table, dtype and device parsing, the default
// device stack and _register_types.
void BindDtypesAndDevices(py::module_& m);
// tensor_meta.cc: _tensor_meta_layout, the layout math of tensord.TensorMeta
// (meta/'s, with no session).
void BindTensorMetaLayout(py::module_& m);
// session.cc: the Session class, connecting and the default session, the
// meta cache and the metadata and storage introspection calls.
void BindSession(py::module_& m);

}  // namespace tensord::python

#endif  // TENSORD_PYTHON_CLIENT_SRC_BINDING_H_
