// tensord._C — the pybind11 binding of the C++ client (client/). Python
// objects are converted to argument Values here (int, float, bool, int lists,
// Tensors, dtype and device objects, strings, None) and every op goes
// through client::Call, which resolves overloads, binds, runs meta and
// streams. Nothing about op semantics is decided in this binding or in Python.
//
// Each file binds one part (binding.h declares their Bind functions):
// errors.cc, autograd.cc, tensor.cc, op_function.cc, dtypes_devices.cc,
// tensor_meta.cc and session.cc, with call_sites.cc and convert.cc beneath
// them. This file
// defines the module and calls the Bind functions in order.
#include "absl/synchronization/mutex.h"
#include "binding.h"

PYBIND11_MODULE(_C, m) {
  namespace tp = tensord::python;
  m.doc() = "tensord._C: the compiled binding of the tensord C++ client (use the tensord package instead).";
  // No lock-order graph on every Mutex acquisition of every op (the C++
  // test binaries keep abseil's deadlock detection on).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  tp::BindErrors(m);
  tp::BindAutogradNode(m);
  tp::BindTensor(m);
  tp::BindOpCalls(m);
  tp::BindTensorFunctions(m);
  tp::BindOpTable(m);
  tp::BindAutograd(m);
  tp::BindDtypesAndDevices(m);
  tp::BindTensorMetaLayout(m);
  tp::BindSession(m);
}
