// Conversion between Python objects and the client's values in tensord._C:
// op arguments (tc::Arg) from Python objects, Python Tensor objects from C++
// Tensors.
#ifndef TENSORD_PYTHON_CLIENT_SRC_CONVERT_H_
#define TENSORD_PYTHON_CLIENT_SRC_CONVERT_H_

#include <optional>
#include <vector>

#include "binding.h"

namespace tensord::python {

// Records `cls`, the tensord._C.Tensor class BindTensor has just made, for
// TensorOf and TensorToPy: its type object, pybind11's type info and the
// layout of its instances. Throws py::error_already_set when an empty
// instance cannot be made.
void SetTensorClass(py::handle cls);

// The Tensor inside a Python object, or nullptr when it is not a (fully
// constructed) Tensor.
const tc::Tensor* TensorOf(py::handle o);

// The device of a tensord.device object (or any object whose str() names
// one); RuntimeError when its text is not a device.
Device DeviceOf(py::handle o);

// The op argument for a Python object: None, a bool, an int, a Tensor, a
// float, a str, a tensord.dtype or tensord.device, a list or tuple (of ints,
// of numbers, of Tensors, or of Tensors and None) or a NumPy scalar.
// TypeError for other objects and mixed sequences, RuntimeError for an int
// beyond int64.
tc::Arg ToArg(py::handle o);

// A new Python Tensor owning `t`. Throws py::error_already_set when Python
// cannot allocate it.
py::object TensorToPy(tc::Tensor&& t);

// The Python value of the op results `out`: the Tensor when there is one and
// `as_tuple` is false, else a tuple of Tensors.
py::object Wrap(std::vector<tc::Tensor> out, bool as_tuple = false);

// The Tensor `o` is, or nullopt for None; TypeError naming `what` for other
// objects.
std::optional<tc::Tensor> OptionalTensor(py::handle o, const char* what);

// `t` as a Python Tensor, or None when it is absent or undefined.
py::object OptionalToPy(const std::optional<tc::Tensor>& t);

}  // namespace tensord::python

#endif  // TENSORD_PYTHON_CLIENT_SRC_CONVERT_H_
