// tensord/meta/autograd_rules.h — which inputs and outputs of an op take part
// in autograd. The client (to answer `requires_grad` and `grad_fn` without a
// round trip) and the daemon (to record the graph) apply the same rules, so
// both always agree.
//
// Follows PyTorch: an op's output requires grad when grad mode is on, the op
// is differentiable, some differentiable input requires grad, and the output
// has a floating dtype (integer and bool outputs, such as argmax or the
// indices of max.dim, never require grad).
#ifndef TENSORD_META_AUTOGRAD_RULES_H_
#define TENSORD_META_AUTOGRAD_RULES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "tensord/meta/dtype.h"
#include "tensord/meta/op_table.h"
#include "tensord/meta/tensor_meta.h"

namespace tensord {

// Floating dtypes (float16, bfloat16, float32, float64, float8_*) can carry
// gradients; bool and integer dtypes cannot ("only Tensors of floating point
// and complex dtype can require gradients", as PyTorch).
bool IsDifferentiableDtype(ScalarType dtype);

// Per schema argument of `op`: true when the argument is a tensor (or a
// tensor list) whose gradient the op's derivative formula gives. False for
// every argument of an op flagged kNotDifferentiable, for non-tensor
// arguments, and for integer/bool-only roles named index, indices, mask,
// condition and target.
const std::vector<bool>& DifferentiableArgs(const OpEntry& op);
// The rule DifferentiableArgs applies to each argument of a differentiable
// op: a tensor or tensor list not named for an integer/bool-only role.
bool IsDifferentiableArgument(const Argument& a);

// PyTorch's grad_fn class name for a node recording `op`: the base name in
// CamelCase plus "Backward0" ("add" -> "AddBackward0", "log_softmax" ->
// "LogSoftmaxBackward0"); in-place ops drop the trailing underscore.
std::string GradFnName(const OpEntry& op);

// ---- what a derivative formula reads of what the forward saved ----------
//
// A recorded node keeps the tensors its op saved for backward. When a
// formula reads one, two things can fail, as in PyTorch: the node's saved
// tensors were freed by an earlier backward without retain_graph ("Trying to
// backward through the graph a second time ..."), or the tensor was modified
// in place since it was saved (the version-counter error). Whether a backward
// fails therefore depends on *which* saved tensors each formula reads. Each
// op's record (tensord/meta/ops.inl) says that; the daemon's formulas
// (server/runtime/src/autograd/formulas*.cc) must read exactly that, which tests check
// (tests/server/autograd_test.cc, and the daemon checks every formula run
// against it when TENSORD_CHECK_SAVED_READS=1, as tests/python sets), and the
// client's meta-mode backward predicts the same errors from it.

// One read: input slot `index` (a node's tensor arguments flattened in schema
// order, one slot per tensor list element, None taking no slot), forward
// output `index`, or kAnySaved: the formula needs the saved tensors to still
// be there but reads none of them (PyTorch's `x * 2` saves the wrapped
// number 2), which fails only after the graph was freed.
struct SavedRead {
  enum class Kind : uint8_t { kInput, kOutput, kAnySaved };
  Kind kind = Kind::kInput;
  int index = 0;
  bool operator==(const SavedRead& o) const { return kind == o.kind && index == o.index; }
  bool operator!=(const SavedRead& o) const { return !(*this == o); }
  std::string ToString() const;  // "input 1", "output 0", "saved"
};

// One item of a saved-reads rule: read `kind`/`index` when argument `when`
// (a schema index; -1: always) gets a gradient, or with `nograd`, argument
// `index` never gets one. The built-in ops' rules are parsed from their
// records' text; a declared derivative (declared_derivative.h) makes its own.
struct SavedReadsItem {
  bool nograd = false;
  int when = -1;
  SavedRead::Kind kind = SavedRead::Kind::kInput;
  int index = 0;  // kInput: the schema argument; kOutput: the output number
};

// The saved tensors the formula of `op` reads, each once, in the order it
// first reads them, for a node whose argument i has the input slots
// arg_slots[i] (-1 for None) and where needs_slot(s) says whether input slot
// s gets a gradient (its edge is valid). Empty for ops whose rule reads
// nothing and for ops without a rule (HasSavedReadsRule is false).
std::vector<SavedRead> PredictSavedReads(const OpEntry& op, absl::Span<const std::vector<int>> arg_slots,
                                         absl::FunctionRef<bool(int slot)> needs_slot);
// False for a differentiable argument (schema index `arg`) the formula of
// `op` never gives a gradient (e.g. `self` of avg_pool2d_backward, whose value
// does not reach the result): no gradient flows on through it.
bool FormulaGivesGradient(const OpEntry& op, int arg);
// True when the formula of `op` reads no saved tensor and gives every
// differentiable argument a gradient (most view and shape ops): a fast path.
bool SavedReadsRuleIsEmpty(const OpEntry& op);
// Whether `op` has a saved-reads rule: every op with a derivative formula
// has one in its record (TD_OP), and no other op does.
bool HasSavedReadsRule(const OpEntry& op);

// PyTorch's error for reading a saved tensor after backward freed it.
absl::Status SavedTensorsFreedError();
// PyTorch's version-counter error for a saved tensor of `dtype` and `sizes`
// modified in place since it was saved: at version `now`, saved at
// `expected`. `grad_fn_name` (empty for a leaf) and `output_nr` name the
// node that produced it ("which is output 0 of ExpBackward0,").
absl::Status SavedTensorModifiedError(ScalarType dtype, absl::Span<const int64_t> sizes,
                                      absl::string_view grad_fn_name, uint32_t output_nr, uint64_t now,
                                      uint64_t expected);

// Whether the derivative formula of `op` may read argument `arg`'s saved
// value: its saved-reads row names the argument (or reads every saved
// tensor), or the op has no row. An in-place op whose row never reads self
// needs no copy of self as it was before the op (relu_ reads its result,
// add_ nothing), and the daemon records it without one.
bool FormulaMayReadInput(const OpEntry& op, int arg);

// One root of a backward() or autograd.grad() call, as the checks before
// the graph is walked see it: its metadata, whether it requires grad, and
// the gradient given for it (nullptr: none, to be implicitly created).
struct BackwardRoot {
  const TensorMeta* meta = nullptr;
  bool requires_grad = false;
  const TensorMeta* grad = nullptr;
};

// The checks PyTorch's engine makes on the roots of a backward, with its
// words (torch/csrc/autograd/python_engine.cpp and autograd/__init__.py):
// as many gradients as roots when any are given (`n_grads` > 0; "got 2
// tensors and 1 gradients"); every root requires grad ("element 1 of
// tensors does not require grad and does not have a grad_fn"); an implicit
// gradient only for a one-element root ("grad can be implicitly created only
// for scalar outputs"); a given gradient of the root's shape ("Mismatch in
// shape: grad_output[0] has a shape of torch.Size([2]) and output[0] has a
// shape of torch.Size([3]).") and on the root's device, unless it is 0-dim
// (then the caller moves it: "invalid gradient at index 0 - expected device
// privateuseone:0 but got cpu"). RuntimeError at the first failure, OK
// otherwise. The client's meta engine and the daemon both run it, so their
// errors cannot drift apart.
absl::Status CheckBackwardRoots(absl::Span<const BackwardRoot> roots, size_t n_grads);

}  // namespace tensord

#endif  // TENSORD_META_AUTOGRAD_RULES_H_
