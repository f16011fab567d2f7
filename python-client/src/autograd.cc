// Autograd in tensord._C: the Node class (the client's mirror of the daemon's
// graph), grad mode, backward and grad requests, and user-defined Functions,
// whose backward the daemon calls back into Python for.
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

// The Python handler for BackwardCallbacks (set by tensord.autograd at
// import). Leaked: it must outlive interpreter teardown order.
py::object* g_backward_handler = nullptr;

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

void BindAutogradNode(py::module_& m) {
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
}

void BindAutograd(py::module_& m) {
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
}

}  // namespace tensord::python
