// tensord/client/autograd.h — the client side of autograd. The graph lives in
// the daemon; the client predicts `requires_grad`/`grad_fn` locally with the
// daemon's rules (tensord/meta/autograd_rules.h), marks op calls for recording
// (grad mode), and runs backward as one blocking request. When the daemon's
// engine reaches a user-defined Function, it calls back to the client over the
// session stream; the waiting thread runs the registered handler.
//
//   Tensor w = *Randn({3});  w.SetRequiresGrad(true);
//   Tensor loss = *Sum(*Mul(w, w));
//   Backward({loss});                        // w.Grad() == 2 * w
//   { NoGradGuard g;  ... }                  // ops are not recorded
#ifndef TENSORD_CLIENT_AUTOGRAD_H_
#define TENSORD_CLIENT_AUTOGRAD_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensord/client/tensor.h"

namespace tensord::client {

// ---- grad mode (thread-local, on by default) --------------------------------
bool IsGradEnabled();
void SetGradEnabled(bool enabled);
// While alive, ops on this thread are not recorded (PyTorch's no_grad()).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(IsGradEnabled()) { SetGradEnabled(false); }
  ~NoGradGuard() { SetGradEnabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};
// While alive, ops on this thread are recorded (enable_grad() inside no_grad()).
class EnableGradGuard {
 public:
  EnableGradGuard() : previous_(IsGradEnabled()) { SetGradEnabled(true); }
  ~EnableGradGuard() { SetGradEnabled(previous_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

// ---- backward -------------------------------------------------------------
// tensor.backward() / autograd.backward(roots, grad_roots): differentiates the
// roots (grad_roots: one per root, nullopt = ones, allowed only for a root of
// one element) and accumulates into the .grad of the leaves (of `inputs` only,
// when not empty). retain_graph defaults to create_graph. Blocks until the
// daemon has run the whole graph, running Python/C++ Function backwards
// through the registered handler on this thread meanwhile.
// Errors: RuntimeError "element 0 of tensors does not require grad and does
// not have a grad_fn", "grad can be implicitly created only for scalar
// outputs" (raised locally), and whatever the daemon's engine reports (a
// freed graph, a modified saved tensor, a failing Function backward).
absl::Status Backward(const std::vector<Tensor>& roots, const std::vector<std::optional<Tensor>>& grad_roots = {},
                      std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
                      const std::vector<Tensor>& inputs = {}, CallSite site = CallSite::Current());

// autograd.grad(outputs, inputs, grad_outputs): the gradients of the outputs
// with respect to `inputs`, one per input (nullopt: unused, only with
// allow_unused). Nothing is accumulated into .grad. With create_graph the
// results require grad (double backward).
absl::StatusOr<std::vector<std::optional<Tensor>>> Grad(const std::vector<Tensor>& outputs,
                                                        const std::vector<Tensor>& inputs,
                                                        const std::vector<std::optional<Tensor>>& grad_outputs = {},
                                                        std::optional<bool> retain_graph = std::nullopt,
                                                        bool create_graph = false, bool allow_unused = false,
                                                        CallSite site = CallSite::Current());

// ---- user-defined functions -------------------------------------------------
// A Function applied: its forward ran as ordinary ops under no-grad, giving
// `outputs`. Creates the daemon node (when grad mode is on and some tensor
// input requires grad) and sets the outputs' requires_grad/grad_fn
// ("<name>"); dirty inputs (modified in place; each must also be an output)
// are rebased onto the node. Returns whether a node was recorded.
// RuntimeError for a dirty leaf that requires grad.
struct FunctionRecord {
  uint64_t function_id = 0;
  std::string name;                              // "ExpBackward"
  std::vector<std::optional<Tensor>> inputs;     // forward arguments; nullopt: not a tensor
  std::vector<Tensor> outputs;                   // tensor outputs in order
  std::vector<bool> non_differentiable;          // per output
  std::vector<Tensor> dirty;                     // inputs modified in place
  bool materialize_grads = true;
  // ctx.save_for_backward's tensors in order (nullopt: None). The daemon keeps
  // them in the node (version-checked, freed by a backward without
  // retain_graph) and hands them back in the BackwardCallbackRequest.
  std::vector<std::optional<Tensor>> saved;
};
absl::StatusOr<bool> RecordFunction(const FunctionRecord& record, CallSite site = CallSite::Current());

// What the daemon sends when its engine reaches a Function's node.
struct BackwardCallbackRequest {
  uint64_t callback_id = 0;
  uint64_t function_id = 0;
  // One per forward output: the incoming gradient (bound to a daemon-named
  // handle; released like any tensor) or nullopt (only without
  // materialize_grads).
  std::vector<std::optional<Tensor>> grads;
  bool create_graph = false;
  // One per saved tensor of the function (FunctionRecord::saved order): the
  // daemon's unpacked saved tensor bound to a daemon-named handle (an output
  // of the function has it as grad_fn, for double backward), or nullopt for
  // None.
  std::vector<std::optional<Tensor>> saved;
};
// Returns one gradient per forward input (nullopt: None), or an error that
// fails the backward.
using BackwardCallbackHandler =
    std::function<absl::StatusOr<std::vector<std::optional<Tensor>>>(const BackwardCallbackRequest&)>;
// Process-wide; the Python package registers one at import. Runs on the
// thread that waits in Backward/Grad; it may issue any ops.
void SetBackwardCallbackHandler(BackwardCallbackHandler handler);

// Function ids whose daemon node is gone (from every session), since the last
// call: the caller may drop their saved context.
std::vector<uint64_t> TakeReleasedFunctions();

// ---- random numbers -----------------------------------------------------------
// tensord.manual_seed(seed): reseeds the current session's generator (the
// thread's or the default session, if one exists) and every session opened
// later in this process.
absl::Status ManualSeed(uint64_t seed);

}  // namespace tensord::client

#endif  // TENSORD_CLIENT_AUTOGRAD_H_
