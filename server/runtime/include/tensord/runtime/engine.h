// tensord/runtime/engine.h — the autograd engine: one backward pass over the
// graph the Dispatcher recorded, from a plan (roots, their gradients, the
// inputs, the flags of backward() or autograd.grad()) to the gradients it
// captured or the .grad identities it changed. Ops run through the
// Dispatcher (the op runner); what only the caller can do — call a client's
// Python function back, notice that the session is closing — it asks
// through BackwardHooks. Requests, handles and replies stay with the caller.
//
//   BackwardPlan plan;  plan.roots = {loss};
//   BackwardResult out;
//   absl::Status s = RunBackward(dispatcher, plan, hooks, &out);   // out.changed: new .grads
#ifndef TENSORD_RUNTIME_ENGINE_H_
#define TENSORD_RUNTIME_ENGINE_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensord/runtime/autograd.h"
#include "tensord/runtime/dispatcher.h"

namespace tensord::runtime {

// What one backward pass does, with PyTorch's meanings.
struct BackwardPlan {
  // The tensors differentiated (backward's `tensors`, grad's `outputs`): at
  // least one.
  std::vector<Tensor> roots;
  // Per root, the gradient given (grad_tensors / grad_outputs), undefined
  // where none was (then ones_like(root), which only a scalar root may take).
  std::vector<Tensor> root_grads;
  // How many gradients the caller listed (CheckBackwardRoots compares it
  // with the number of roots: PyTorch's "got N tensors and M gradients").
  size_t root_grads_given = 0;
  // grad(): where gradients are captured, one result each. backward(inputs=):
  // the only tensors whose .grad accumulates. Empty: every leaf's does.
  std::vector<Tensor> inputs;
  bool accumulate = true;  // backward() (into .grad) rather than autograd.grad()
  bool create_graph = false;  // the backward's own ops are recorded
  bool retain_graph = false;  // the saved tensors stay (create_graph implies it)
  bool allow_unused = false;  // grad(): an input no gradient reaches gives undefined, not an error
};

// What a backward pass gave.
struct BackwardResult {
  // grad(): one per plan input, undefined where no gradient reached it
  // (allowed only with allow_unused).
  std::vector<Tensor> captured;
  // backward(): each identity whose .grad was set or replaced (not only
  // added into in place), once, in no particular order.
  std::vector<std::shared_ptr<AutogradMeta>> changed;
};

// What the engine asks of its caller. Called on the engine's thread.
class BackwardHooks {
 public:
  virtual ~BackwardHooks() = default;
  // Runs the backward of a user-defined Function node (kFunction: its code
  // lives in the client): given the gradients of its outputs (undefined
  // where none flowed), returns one gradient per input slot of `node`
  // (undefined where none). `self` owns `node`.
  virtual absl::StatusOr<std::vector<Tensor>> CallFunction(Node& node, const std::shared_ptr<Node>& self,
                                                          const std::vector<Tensor>& grads, bool create_graph) = 0;
  // True when the pass should stop before its next node (the session closes).
  virtual bool Cancelled() = 0;
  // A .grad made with create_graph holds a graph that may reach `ag`
  // itself: the caller keeps `ag` to break that cycle when it closes.
  virtual void HoldGrad(const std::shared_ptr<AutogradMeta>& ag) = 0;
};

// Runs the backward pass `plan` with the ops of `dispatcher`, in PyTorch's order (the
// newest node first, each once all gradients for it are in), summing
// gradients per node input, reducing broadcast dims and casting to each
// input's dtype. Errors, in PyTorch's words where PyTorch has them: the
// roots' checks (meta's CheckBackwardRoots), "One of the differentiated
// Tensors does not require grad", an unused input without allow_unused, a
// saved tensor freed or modified in place, "leaf variable has been moved
// into the graph interior", a missing derivative (NotImplementedError), an
// op's or a hook's error, "the session is closing". On error `result` holds
// nothing meaningful; .grad tensors set before it keep their values.
absl::Status RunBackward(Dispatcher& dispatcher, const BackwardPlan& plan, BackwardHooks& hooks, BackwardResult* result);

}  // namespace tensord::runtime

#endif  // TENSORD_RUNTIME_ENGINE_H_
