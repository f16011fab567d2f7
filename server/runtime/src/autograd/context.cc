// Graph nodes, what recording needs of them, and the context derivative formulas run in.
#include "absl/strings/str_cat.h"
#include "tensord/meta/autograd_rules.h"
#include "tensord/meta/errors.h"
#include "tensord/runtime/autograd.h"

namespace tensord::runtime {

namespace {

// Moves out of `n` the nodes only `n` keeps alive (through its edges or the
// identities of the tensors it saved), so that they are destroyed by the
// caller's loop rather than recursively.
void Harvest(Node& n, std::vector<std::shared_ptr<Node>>& stack) {
  for (Edge& e : n.next) {
    if (e.fn != nullptr && e.fn.use_count() == 1) stack.push_back(std::move(e.fn));
  }
  n.next.clear();
  for (SavedTensor& s : n.saved_inputs) {
    std::shared_ptr<AutogradMeta>& ag = s.data.ag;
    if (ag != nullptr && ag.use_count() == 1 && ag->grad_fn != nullptr && ag->grad_fn.use_count() == 1) {
      stack.push_back(std::move(ag->grad_fn));
    }
  }
}

}  // namespace

bool InplaceNeedsOriginalSelf(const OpEntry& op) {
  // Derived from the op's saved-reads rule (meta/autograd_rules.h), which the
  // test suite checks against what each formula reads.
  return FormulaMayReadInput(op, 0);
}

bool AnyDifferentiableInputRequiresGrad(const OpEntry& op, absl::Span<const Value> args,
                                        const std::vector<Tensor*>& inputs) {
  const std::vector<bool>& diff = DifferentiableArgs(op);
  auto requires = [&](const TensorMeta* m) {
    if (m == nullptr) return false;
    for (const Tensor* t : inputs) {
      if (&t->meta == m) return t->requires_grad();
    }
    return false;
  };
  for (size_t i = 0; i < args.size() && i < diff.size(); ++i) {
    if (!diff[i]) continue;
    if (args[i].kind() == Value::Kind::kTensor && requires(args[i].tensor_ptr())) return true;
    if (args[i].kind() == Value::Kind::kTensorList) {
      for (const TensorMeta* m : args[i].tensor_list()) {
        if (requires(m)) return true;
      }
    }
  }
  return false;
}

bool Tensor::requires_grad() const { return ag != nullptr && ag->requires(); }

int64_t NodeInputBytes(const TensorMeta& meta) {
  // Its edge, metadata and presence bit, its saved tensor (a copy of the
  // metadata, the storage reference, the identity and grad_fn's name), its
  // argument and slot entries.
  return static_cast<int64_t>(sizeof(Edge) + sizeof(TensorMeta) + 1 + sizeof(SavedTensor) + sizeof(Value) +
                              sizeof(int) + 32) +
         2 * MetaHeapBytes(meta);
}

int64_t NodeOutputBytes(const TensorMeta& meta) {
  return static_cast<int64_t>(sizeof(TensorMeta) + 1 + sizeof(SavedTensor)) + 2 * MetaHeapBytes(meta);
}

int64_t NodeFixedBytes() { return static_cast<int64_t>(sizeof(Node)) + 128; }

Node::~Node() {
  live_.fetch_sub(1, std::memory_order_relaxed);
  if (kind == Kind::kFunction && released_sink != nullptr) released_sink->Add(function_id);
  // Long chains (a loop unrolled over many steps) would recurse once per node
  // when the last reference goes; unlink the chain iteratively instead.
  std::vector<std::shared_ptr<Node>> stack;
  Harvest(*this, stack);
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    Harvest(*n, stack);
  }
}

std::pair<std::string, uint32_t> SavedTensor::owner() const {
  const std::shared_ptr<AutogradMeta> now = live.lock();
  if (now == nullptr) return {grad_fn_name, output_nr};
  if (now->grad_fn == nullptr) return {std::string(), 0};
  return {now->grad_fn->name, now->output_nr};
}

absl::StatusOr<Tensor> SavedTensor::Unpack(const std::shared_ptr<Node>& self) const {
  const uint64_t now = data.storage != nullptr ? data.storage->version() : 0;
  if (now != version) {
    const auto [name, nr] = is_output ? std::make_pair(self->name, output_nr) : owner();
    return SavedTensorModifiedError(data.meta.dtype, data.meta.sizes, name, nr, now, version);
  }
  Tensor t = data;
  if (!is_output) {
    t.ag = identity();
    return t;
  }
  t.ag = std::make_shared<AutogradMeta>();
  if (output_differentiable) {
    t.ag->grad_fn = self;
    t.ag->output_nr = output_nr;
  }
  return t;
}

const OpEntry* RequireOp(absl::string_view full_name, absl::Status* error) {
  const OpEntry* op = OpTable::Get().Find(full_name);
  if (op == nullptr && error != nullptr && error->ok()) {
    *error = InternalErr(
        absl::StrCat("an autograd formula needs op '", full_name, "', which is not in this daemon's op table"));
  }
  return op;
}

void FormulaContext::Fail(absl::Status s) const {
  if (status_.ok() && !s.ok()) status_ = std::move(s);
}

const Tensor& FormulaContext::grad(size_t i) const {
  static const Tensor* kUndefined = new Tensor();
  return i < grads_.size() ? grads_[i] : *kUndefined;
}

int FormulaContext::ArgIndex(absl::string_view name) const {
  const int i = node_->op->schema.ArgIndex(name);
  if (i < 0 || static_cast<size_t>(i) >= node_->arg_slots.size() || static_cast<size_t>(i) >= node_->args.size()) {
    Fail(InternalErr(absl::StrCat("the formula of ", node_->op->full_name(), " reads argument '", name,
                                  "', which the schema lacks")));
    return -1;
  }
  return i;
}

const std::vector<int>& FormulaContext::slots(absl::string_view name) const {
  static const std::vector<int>* kNoSlots = new std::vector<int>();
  const int i = ArgIndex(name);
  return i < 0 ? *kNoSlots : node_->arg_slots[i];
}

bool FormulaContext::needs(absl::string_view name) const {
  for (int s : slots(name)) {
    if (s >= 0 && needs_slot(static_cast<size_t>(s))) return true;
  }
  return false;
}

const TensorMeta& FormulaContext::meta(absl::string_view name) const {
  static const TensorMeta* kNoMeta = new TensorMeta();
  const std::vector<int>& s = slots(name);
  if (s.size() != 1 || s[0] < 0 || static_cast<size_t>(s[0]) >= node_->input_metas.size()) {
    Fail(InternalErr(absl::StrCat("the formula of ", node_->op->full_name(), ": argument '", name,
                                  "' is not one tensor")));
    return *kNoMeta;
  }
  return node_->input_metas[s[0]];
}

const Value& FormulaContext::value(absl::string_view name) const {
  static const Value* kNone = new Value();
  const int i = ArgIndex(name);
  return i < 0 ? *kNone : node_->args[i];
}

void FormulaContext::RequireSaved() const {
  Note(SavedRead{SavedRead::Kind::kAnySaved, 0});
  if (node_->released && !node_->saved_inputs.empty()) Fail(SavedTensorsFreedError());
}

void FormulaContext::Note(SavedRead r) const {
  for (const SavedRead& o : reads_) {
    if (o == r) return;
  }
  reads_.push_back(r);
}

Tensor FormulaContext::Unpack(const SavedTensor& s) const {
  // On an error the result is undefined (no storage, no error) but keeps the
  // saved metadata, so a formula's shape arithmetic stays in range.
  Tensor failed;
  failed.meta = s.data.meta;
  if (node_->released) {
    Fail(SavedTensorsFreedError());
    return failed;
  }
  if (s.data.storage == nullptr) {
    Fail(InternalErr(absl::StrCat(node_->name, ": a saved tensor has no storage")));
    return failed;
  }
  absl::StatusOr<Tensor> t = s.Unpack(self_);
  if (!t.ok()) {
    Fail(t.status());
    return failed;
  }
  return *std::move(t);
}

Tensor FormulaContext::in(absl::string_view name) const {
  const std::vector<int>& s = slots(name);
  if (s.size() != 1 || s[0] < 0 || static_cast<size_t>(s[0]) >= node_->saved_inputs.size()) {
    Fail(InternalErr(absl::StrCat("the formula of ", node_->op->full_name(), ": argument '", name,
                                  "' is not one tensor")));
    return Tensor();
  }
  Note(SavedRead{SavedRead::Kind::kInput, s[0]});
  return Unpack(node_->saved_inputs[s[0]]);
}

Tensor FormulaContext::slot(size_t slot) const {
  if (slot >= node_->saved_inputs.size()) {
    Fail(InternalErr(absl::StrCat(node_->name, ": no input slot ", slot)));
    return Tensor();
  }
  Note(SavedRead{SavedRead::Kind::kInput, static_cast<int>(slot)});
  return Unpack(node_->saved_inputs[slot]);
}

Tensor FormulaContext::out(size_t i) const {
  if (i >= node_->saved_outputs.size()) {
    Fail(InternalErr(absl::StrCat(node_->name, ": no output ", i)));
    return Tensor();
  }
  Note(SavedRead{SavedRead::Kind::kOutput, static_cast<int>(i)});
  return Unpack(node_->saved_outputs[i]);
}

std::vector<Tensor> FormulaContext::call_all(absl::string_view full_name, std::vector<Arg> args) const {
  if (!status_.ok()) return {};  // an earlier step failed: its inputs may be undefined
  // An op defined at run time is the session's: the runner finds it, or says it is not defined.
  if (!IsExtensionOpName(full_name) && RequireOp(full_name, &status_) == nullptr) return {};
  absl::StatusOr<std::vector<Tensor>> r = run_(full_name, std::move(args));
  if (!r.ok()) {
    Fail(WithContext(r.status(), absl::StrCat("in the backward of ", node_->op->full_name(), " (", full_name, "): ")));
    return {};
  }
  return *std::move(r);
}

Tensor FormulaContext::call(absl::string_view full_name, std::vector<Arg> args) const {
  std::vector<Tensor> r = call_all(full_name, std::move(args));
  if (r.empty()) {
    if (status_.ok()) Fail(InternalErr(absl::StrCat(full_name, " returned no tensor")));
    return Tensor();
  }
  return std::move(r[0]);
}

}  // namespace tensord::runtime
