// tensord/runtime/autograd.h — the daemon's autograd graph: a tensor's
// autograd identity, graph nodes, saved tensors, and the derivative formulas
// registered against the op table.
//
// Ownership follows PyTorch: a tensor holds its grad_fn node strongly; a node
// holds the nodes of its inputs (its next edges) and the tensors it saved.
// A node saves its own outputs without their grad_fn (re-attached when
// unpacked), so no node keeps itself alive. Releasing the last handle of a
// tensor frees the part of the graph only it reached.
#ifndef TENSORD_RUNTIME_AUTOGRAD_H_
#define TENSORD_RUNTIME_AUTOGRAD_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "tensord/meta/autograd_rules.h"
#include "tensord/meta/op_registry.h"
#include "tensord/meta/op_table.h"
#include "tensord/meta/tensor_meta.h"
#include "tensord/meta/value.h"
#include "tensord/runtime/memory.h"

namespace tensord::runtime {

struct AutogradMeta;
class Node;

// The error of a failed op (or upload or request), with what issued it.
// Shared by every tensor the failure reaches. (The daemon's sessions turn
// it into the wire's Error, and into the status with its origin in front.)
struct OpError {
  absl::Status status;
  std::string op;          // "add.Tensor", "upload", "release", ...
  uint64_t call_id = 0;
  std::string call_site;
  bool reported = false;   // sent to the client already (guarded by the session's mutex)
  // Its text goes to the client inside a later error (a backward's that it
  // made fail): not raised again on its own at a sync point. Reading the
  // failed tensor still raises it. Guarded by the session's mutex.
  bool carried = false;
  // For such a later error: the failed tensor's error it carries. Once that
  // one is reported on its own (the failed tensor was read), this one is
  // not raised at a sync point either: the same failure, raised once.
  std::shared_ptr<const OpError> cause;
};

// Heap bytes of a meta's sizes and strides where they do not fit inline (a
// Shape keeps 5 dims in place; 64 dims take a kilobyte more): what each
// copy of the meta costs beyond sizeof(TensorMeta). Counted by size, so
// that the same meta always gives the same number (a charge given back
// must equal the one taken).
inline int64_t MetaHeapBytes(const TensorMeta& m) {
  const auto heap = [](const Shape& s) {
    return s.size() > Shape().capacity() ? static_cast<int64_t>(s.size() * sizeof(int64_t)) : int64_t{0};
  };
  return heap(m.sizes) + heap(m.strides);
}

// A tensor in the daemon: metadata, the storage it views (or the error that
// prevented it from being computed), and its autograd identity. Copies share
// storage and identity (two handles bound to one tensor, as GetGrad makes).
// A default-constructed Tensor is "undefined" (None, or no gradient).
struct Tensor {
  TensorMeta meta;
  std::shared_ptr<Storage> storage;   // null when failed or undefined
  std::shared_ptr<OpError> error;     // non-null when failed
  std::shared_ptr<AutogradMeta> ag;   // autograd identity (null: a leaf that does not require grad)
  // A failed handle's table entry and error, charged to the session while
  // the entry lives (a failed call's outputs hold no storage to count).
  std::shared_ptr<void> charge;

  bool failed() const { return error != nullptr; }
  bool defined() const { return storage != nullptr || error != nullptr; }
  bool requires_grad() const;
};

// Where a gradient flows: input `input_nr` of node `fn` (null fn: nowhere).
struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t input_nr = 0;
  bool valid() const { return fn != nullptr; }
};

// Autograd identity of a tensor (shared by its handles, not by its views).
struct AutogradMeta {
  bool requires_grad = false;        // leaves only; non-leaves require grad through grad_fn
  std::shared_ptr<Node> grad_fn;     // null for leaves
  uint32_t output_nr = 0;
  std::shared_ptr<Tensor> grad;      // .grad; null = None
  bool retains_grad = false;
  bool is_view = false;              // produced by a view op (shares its base's storage)
  std::weak_ptr<Node> accumulator;   // leaves: their AccumulateGrad node, while it lives

  bool is_leaf() const { return grad_fn == nullptr; }
  bool requires() const { return requires_grad || grad_fn != nullptr; }
};

// A tensor a node keeps for its backward: the data as of the forward call and
// the storage version then. Outputs of the node itself are kept without
// identity (no cycle) and get the node back as grad_fn when unpacked.
struct SavedTensor {
  Tensor data;                 // ag null for own outputs; else a snapshot of the identity's history
  // The saved tensor's own identity (not for own outputs), not kept alive by
  // the node: an in-place op can rebase it (a leaf too, after
  // requires_grad_(False)), and a strong reference would then close a cycle
  // through its new grad_fn.
  std::weak_ptr<AutogradMeta> live;
  uint64_t version = 0;
  bool is_output = false;
  bool output_differentiable = false;
  uint32_t output_nr = 0;
  std::string grad_fn_name;    // for the version error ("ExpBackward0"), empty for leaves

  // The identity to unpack with (not for own outputs): a saved leaf's own
  // while it lives and is still a leaf (its gradient reaches its .grad, and
  // a later requires_grad_() shows, as PyTorch's saved original does), else
  // the snapshot.
  std::shared_ptr<AutogradMeta> identity() const {
    if (data.ag != nullptr && data.ag->is_leaf()) {
      std::shared_ptr<AutogradMeta> now = live.lock();
      if (now != nullptr && now->is_leaf()) return now;
    }
    return data.ag;
  }
  // For the error of a saved input modified in place: the node whose output
  // it is now ("MulBackward0" after y.mul_(2), as PyTorch names its saved
  // original's grad_fn; empty for a leaf) and the output number, while its
  // identity lives, else as of the save.
  std::pair<std::string, uint32_t> owner() const;

  // The saved tensor as the node `self` (which saved it) unpacks it for its
  // backward: PyTorch's version error if an in-place op changed it since
  // the save (naming owner(), or `self` for an own output); else the data
  // with identity(), or for an own output a fresh identity whose grad_fn is
  // `self` (when differentiable). The caller checks that the node's saved
  // tensors were not freed and that `data` is defined.
  absl::StatusOr<Tensor> Unpack(const std::shared_ptr<Node>& self) const;
};

// Where destroyed Python-function nodes report their function ids (drained
// into the next Ack's released_functions). Thread-safe.
class ReleasedFunctions {
 public:
  void Add(uint64_t id) {
    absl::MutexLock l(&mu_);
    ids_.push_back(id);
  }
  std::vector<uint64_t> Take() {
    absl::MutexLock l(&mu_);
    std::vector<uint64_t> out;
    out.swap(ids_);
    return out;
  }

 private:
  absl::Mutex mu_;
  std::vector<uint64_t> ids_ ABSL_GUARDED_BY(mu_);
};

// One node of the graph: the backward of one recorded op call
// (kOp), the gradient sink of a leaf (kAccumulate), or a user-defined
// autograd.Function whose backward runs in the client (kFunction).
class Node {
 public:
  enum class Kind { kOp, kAccumulate, kFunction };
  Node(Kind kind, uint64_t seq, std::string name) : kind(kind), seq(seq), name(std::move(name)) {
    live_.fetch_add(1, std::memory_order_relaxed);
  }
  ~Node();
  // Nodes alive in this process, over all sessions: back to its level
  // before a session once the session is closed (a reference cycle would
  // keep its graph alive for ever).
  static int64_t Live() { return live_.load(std::memory_order_relaxed); }
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const Kind kind;
  const uint64_t seq;          // creation order; the engine runs newest first
  const std::string name;      // "MulBackward0", "AccumulateGrad", the Function's name

  // One edge per input slot (kOp: the op's tensor arguments flattened in
  // schema order, list elements included; kFunction: the forward's inputs).
  std::vector<Edge> next;
  // Per input slot: the input's metadata (gradient shapes and dtypes are
  // checked and reduced against it); for absent inputs a default meta.
  std::vector<TensorMeta> input_metas;
  std::vector<bool> input_present;
  // Per forward output: metadata (zeros for missing gradients) and whether it
  // is differentiable.
  std::vector<TensorMeta> output_metas;
  std::vector<bool> output_differentiable;

  // kOp: the op, its arguments (tensor values point at saved[...].data.meta)
  // and the saved tensors: the inputs (slot order) then the outputs.
  const OpEntry* op = nullptr;
  std::vector<Value> args;
  std::vector<std::vector<int>> arg_slots;  // per argument: its input slots (-1: None in a list)
  std::vector<SavedTensor> saved_inputs;    // per input slot
  std::vector<SavedTensor> saved_outputs;   // per output
  bool released = false;                    // saved tensors freed by a backward without retain_graph

  // Non-leaf tensors whose .grad is kept (retain_grad): output number and identity.
  std::vector<std::pair<uint32_t, std::weak_ptr<AutogradMeta>>> retained;

  // kAccumulate: the leaf (strong: the leaf's identity outlives its handles
  // while a graph needs it) and its metadata; once an in-place op has made
  // the leaf an interior tensor, `leaf` is null and `leaf_moved` set (the
  // node only refuses from then on, and must not keep the identity: its new
  // grad_fn may reach this node).
  std::shared_ptr<AutogradMeta> leaf;
  TensorMeta leaf_meta;
  bool leaf_moved = false;

  // kFunction (its ctx.save_for_backward tensors are kept in saved_inputs,
  // in ctx order, an undefined entry for None; version-checked and unpacked
  // by Session::CallBack, freed like a kOp node's).
  uint64_t function_id = 0;
  bool materialize_grads = true;
  std::shared_ptr<ReleasedFunctions> released_sink;

  // What the node holds, charged to its session while it lives: a call over
  // a list of a million handles (one byte each on the wire) would otherwise
  // keep a million metadata copies that no limit counts (NodeInputBytes,
  // NodeOutputBytes, NodeFixedBytes).
  MemoryCharge charge;

 private:
  static inline std::atomic<int64_t> live_{0};
};

// Bytes a node's per-slot records take beyond sizeof(Node): one input slot
// of `meta` (its edge, its metadata, its saved tensor), one output of
// `meta`, and a fixed part (the node itself, its allocation and name).
int64_t NodeInputBytes(const TensorMeta& meta);
int64_t NodeOutputBytes(const TensorMeta& meta);
int64_t NodeFixedBytes();

// True when the derivative of in-place `op` reads self's value from before
// the op (so recording it saves a clone of self first).
bool InplaceNeedsOriginalSelf(const OpEntry& op);
// True when some differentiable argument of `op` (autograd_rules.h) is a
// tensor of `inputs` that requires grad. `args` point at `inputs`' metas.
bool AnyDifferentiableInputRequiresGrad(const OpEntry& op, absl::Span<const Value> args,
                                        const std::vector<Tensor*>& inputs);

// One argument of an op call made by the daemon itself (the engine and the
// derivative formulas): a tensor, a list of tensors (undefined ones are
// None), or any other Value.
struct Arg {
  enum class Kind { kValue, kTensor, kTensorList };
  Kind kind = Kind::kValue;
  Value value;
  Tensor tensor;
  std::vector<Tensor> list;

  Arg(const Tensor& t) : kind(Kind::kTensor), tensor(t) {}                 // NOLINT
  Arg(std::vector<Tensor> l) : kind(Kind::kTensorList), list(std::move(l)) {}  // NOLINT
  template <typename T, typename = std::enable_if_t<!std::is_same_v<std::decay_t<T>, Tensor> &&
                                                    !std::is_same_v<std::decay_t<T>, std::vector<Tensor>> &&
                                                    !std::is_same_v<std::decay_t<T>, Arg>>>
  Arg(T&& v) : value(Value(std::forward<T>(v))) {}  // NOLINT
};

// Runs one op of the table on daemon tensors: arguments in schema order
// (trailing ones may be omitted and take the schema's defaults). Records the
// call for autograd when the runner was made with recording on.
using OpRunnerFn = std::function<absl::StatusOr<std::vector<Tensor>>(absl::string_view full_name, std::vector<Arg>)>;

// What a derivative formula sees: the incoming gradients (one per forward
// output, undefined when none flowed), the saved arguments, and a way to run
// ops (recorded when the backward has create_graph).
//
// Errors are sticky statuses, not exceptions: the first failure (a freed or
// modified saved tensor, an op that fails, a formula bug) is kept in status();
// from then on every call() returns an undefined Tensor without running
// anything, so a formula stays straight-line code and the engine fails the
// backward with status() after the formula returns. Tensors handed out after
// an error keep their saved metadata (sizes, dtype) so shape arithmetic in a
// formula stays in range.
class FormulaContext {
 public:
  FormulaContext(Node* node, std::shared_ptr<Node> self, std::vector<Tensor> grads, OpRunnerFn run)
      : node_(node), self_(std::move(self)), grads_(std::move(grads)), run_(std::move(run)) {}

  // The first error recorded (OK when none); the formula's gradients are
  // meaningless unless this is OK.
  const absl::Status& status() const { return status_; }
  bool ok() const { return status_.ok(); }
  // Records `s` unless an error is already recorded (the first one wins).
  void Fail(absl::Status s) const;

  // Gradient of forward output `i` (undefined when none flowed to it).
  const Tensor& grad(size_t i = 0) const;
  // The argument named `name`. When the node's saved tensors were freed or
  // the tensor was modified in place since it was saved, records the
  // PyTorch-worded RuntimeError and returns an undefined Tensor that keeps the
  // saved metadata.
  Tensor in(absl::string_view name) const;
  // Input slot `slot` (tensor lists: one slot per element); errors as in().
  Tensor slot(size_t slot) const;
  // Metadata of an argument tensor or input slot (never freed, never checked;
  // a default meta plus a recorded InternalErr when `name` is not one tensor).
  const TensorMeta& meta(absl::string_view name) const;
  const TensorMeta& slot_meta(size_t slot) const { return node_->input_metas[slot]; }
  // Metadata of forward output `i` (never freed, never checked; `i` must
  // be below the number of outputs).
  const TensorMeta& out_meta(size_t i) const { return node_->output_metas[i]; }
  size_t num_slots() const { return node_->next.size(); }
  // The input slots of argument `name` (one for a tensor, n for a list; empty
  // plus a recorded InternalErr when the schema lacks `name`).
  const std::vector<int>& slots(absl::string_view name) const;
  // Whether a gradient is needed for the argument (any of its slots has an edge).
  bool needs(absl::string_view name) const;
  bool needs_slot(size_t slot) const { return slot < node_->next.size() && node_->next[slot].valid(); }
  // Records in()'s "backward through the graph a second time" error when the
  // node's saved tensors were freed. For formulas that read no saved tensor
  // where PyTorch's node saves one: `x * 2` and `x / 2` from Python are
  // mul.Tensor / div.Tensor on a wrapped number there, which saves it.
  void RequireSaved() const;
  // Forward output `i`, with this node as grad_fn; errors as in().
  Tensor out(size_t i = 0) const;
  // A non-tensor argument (None plus a recorded InternalErr when the schema
  // lacks `name`).
  const Value& value(absl::string_view name) const;
  const OpEntry& op() const { return *node_->op; }
  // The saved tensors the formula read (in(), slot(), out(); RequireSaved as
  // kAnySaved), each once, in first-read order: what
  // tensord::PredictSavedReads must predict for this node.
  const std::vector<SavedRead>& reads() const { return reads_; }

  // The session's ops defined at run time (what a declared derivative may
  // call by name), or nullptr for none.
  const ExtensionOps* extension_ops() const { return extension_ops_; }
  void set_extension_ops(const ExtensionOps* ops) { extension_ops_ = ops; }

  // Runs an op and returns its first / all outputs. When an error is already
  // recorded, runs nothing and returns an undefined Tensor / no tensors; when
  // the op fails, records its status (with the formula named) and returns the same.
  // `full_name` is a built-in op's, or one defined at run time ("mylib::f").
  Tensor call(absl::string_view full_name, std::vector<Arg> args) const;
  std::vector<Tensor> call_all(absl::string_view full_name, std::vector<Arg> args) const;

 private:
  int ArgIndex(absl::string_view name) const;  // -1 (and a recorded error) when absent
  Tensor Unpack(const SavedTensor& s) const;
  void Note(SavedRead r) const;

  Node* node_;
  std::shared_ptr<Node> self_;
  std::vector<Tensor> grads_;
  OpRunnerFn run_;
  const ExtensionOps* extension_ops_ = nullptr;
  mutable absl::Status status_;
  mutable std::vector<SavedRead> reads_;
};

// A derivative formula: returns one gradient per input slot (undefined where
// none). Gradients need not have the input's shape or dtype when they
// broadcast to it: the engine sums over broadcast dims and casts. A formula
// reports failure through ctx.status() (the gradients are then ignored).
using FormulaFn = std::vector<Tensor> (*)(FormulaContext& ctx);

// The formula its record (tensord/meta/ops.inl) names for `op`; for an op
// defined at run time with a declared derivative, the one that runs it
// (declared_derivative.h); else nullptr: for a TD_OP_ND op, an op defined
// at run time without one, and an op of another table.
FormulaFn FindFormula(const OpEntry& op);

// The op `full_name` of the table, or nullptr when the table lacks it; then an
// InternalErr naming `full_name` is stored in *error unless *error already
// holds an error (error may be null).
const OpEntry* RequireOp(absl::string_view full_name, absl::Status* error);

}  // namespace tensord::runtime

#endif  // TENSORD_RUNTIME_AUTOGRAD_H_
