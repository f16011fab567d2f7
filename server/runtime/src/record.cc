// The dispatcher's autograd half: the node a recorded call leaves in the
// graph (its saved inputs and outputs, its edges, its charge), and the
// gradient edges of tensors.
#include <limits>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tensord/meta/autograd_rules.h"
#include "tensord/meta/errors.h"
#include "tensord/runtime/dispatcher.h"

namespace tensord::runtime {

// Holding the live identity made a cycle whenever an in-place op later
// rebased it onto a node that reaches this one (x.mul_(x.view(3)): the
// view's node saved x, whose grad_fn became mul_'s node, which saved the
// view; w * w, then w.requires_grad_(False) and w.mul_(z) for a leaf), and
// the graph was never freed.
void SaveIdentity(const std::shared_ptr<AutogradMeta>& ag, SavedTensor* s) {
  if (ag == nullptr) return;
  auto snap = std::make_shared<AutogradMeta>();
  snap->requires_grad = ag->requires_grad;
  snap->grad_fn = ag->grad_fn;
  snap->output_nr = ag->output_nr;
  s->data.ag = std::move(snap);
  s->live = ag;
}

// The AccumulateGrad node refuses from now on, as PyTorch's does ("leaf
// variable has been moved into the graph interior"); else the new grad_fn,
// which may reach that node, would close a cycle through it.
void LeafMovesIntoTheGraph(AutogradMeta& ag) {
  if (!ag.is_leaf()) return;
  if (std::shared_ptr<Node> acc = ag.accumulator.lock(); acc != nullptr) {
    acc->leaf.reset();
    acc->leaf_moved = true;
  }
  ag.accumulator.reset();
}

Edge Dispatcher::GradientEdge(const Tensor& t) {
  if (t.ag == nullptr) return {};
  if (t.ag->grad_fn != nullptr) return {t.ag->grad_fn, t.ag->output_nr};
  if (!t.ag->requires_grad) return {};
  std::shared_ptr<Node> acc = t.ag->accumulator.lock();
  if (acc == nullptr) {
    acc = std::make_shared<Node>(Node::Kind::kAccumulate, std::numeric_limits<uint64_t>::max(), "AccumulateGrad");
    acc->leaf = t.ag;
    acc->leaf_meta = t.meta;
    acc->output_metas = {t.meta};
    acc->output_differentiable = {true};
    t.ag->accumulator = acc;
  }
  return {acc, 0};
}

absl::Status Dispatcher::RecordNode(const OpEntry& op, const std::vector<Value>& args, const std::vector<Tensor*>& inputs,
                                 std::vector<Tensor>& outs, const Tensor* self_before) {
  if (!AnyDifferentiableInputRequiresGrad(op, args, inputs)) return absl::OkStatus();
  const std::vector<bool>& diff = DifferentiableArgs(op);
  const bool inplace = op.is_inplace();
  auto find = [&](const TensorMeta* m) -> Tensor* {
    for (Tensor* t : inputs) {
      if (&t->meta == m) return t;
    }
    return nullptr;
  };
  // An in-place op's self (written by the op, its version already bumped).
  const Tensor* self_t = inplace && !args.empty() && args[0].kind() == Value::Kind::kTensor
                             ? find(args[0].tensor_ptr())
                             : nullptr;
  auto node = std::make_shared<Node>(Node::Kind::kOp, ++next_seq_, GradFnName(op));
  // Charged before the node is filled (a list naming one tensor a million
  // times would make it hold a million copies of its metadata): over the
  // session's limit the op fails and nothing of the node stays.
  int64_t bytes = NodeFixedBytes();
  for (const Value& v : args) {
    if (v.kind() == Value::Kind::kTensor && v.tensor_ptr() != nullptr) bytes += NodeInputBytes(*v.tensor_ptr());
    if (v.kind() == Value::Kind::kTensorList) {
      for (const TensorMeta* m : v.tensor_list()) bytes += m != nullptr ? NodeInputBytes(*m) : 0;
    }
  }
  for (const Tensor& t : outs) bytes += NodeOutputBytes(t.meta);
  TD_RETURN_IF_ERROR(node->charge.Add(memory_, bytes, absl::StrCat(node->name, " (the autograd graph's node)")));
  node->op = &op;
  size_t n_slots = 0;
  for (const Value& v : args) {
    if (v.kind() == Value::Kind::kTensor) ++n_slots;
    if (v.kind() == Value::Kind::kTensorList) n_slots += v.tensor_list().size();
  }
  node->saved_inputs.reserve(n_slots);
  node->next.reserve(n_slots);
  node->input_metas.reserve(n_slots);
  node->input_present.reserve(n_slots);
  node->output_metas.reserve(outs.size());
  node->output_differentiable.reserve(outs.size());
  node->saved_outputs.reserve(outs.size());
  node->arg_slots.resize(args.size());
  node->args = args;
  for (size_t i = 0; i < args.size(); ++i) {
    auto add_slot = [&](const TensorMeta* m) -> int {
      if (m == nullptr) return -1;
      Tensor* t = find(m);
      if (t == nullptr) return -1;
      const Tensor& src = (self_before != nullptr && i == 0) ? *self_before : *t;
      SavedTensor s;
      s.data.meta = src.meta;
      s.data.storage = src.storage;
      SaveIdentity(src.ag, &s);
      s.version = src.storage != nullptr ? src.storage->version() : 0;
      // Another argument of an in-place op that shares self's storage
      // (x.mul_(x), x.mul_(x.detach()), x.add_(x[0]) with a read rule) is
      // saved as it was before the write, as PyTorch saves it: its version
      // is the one before the op's bump, so that a backward reading it fails
      // with "modified by an inplace operation" instead of reading the
      // written values (a wrong gradient).
      if (self_t != nullptr && i != 0 && src.storage != nullptr && src.storage == self_t->storage &&
          s.version > 0) {
        --s.version;
      }
      if (src.ag != nullptr && src.ag->grad_fn != nullptr) {
        s.grad_fn_name = src.ag->grad_fn->name;
        s.output_nr = src.ag->output_nr;
      }
      node->saved_inputs.push_back(std::move(s));
      node->next.push_back(i < diff.size() && diff[i] && t->requires_grad() ? GradientEdge(*t) : Edge{});
      node->input_metas.push_back(t->meta);
      node->input_present.push_back(true);
      return static_cast<int>(node->saved_inputs.size() - 1);
    };
    if (args[i].kind() == Value::Kind::kTensor) {
      const int s = add_slot(args[i].tensor_ptr());
      node->arg_slots[i] = {s};
      if (s >= 0) node->args[i] = Value(&node->saved_inputs[s].data.meta);
    } else if (args[i].kind() == Value::Kind::kTensorList) {
      TensorList l;
      for (const TensorMeta* m : args[i].tensor_list()) {
        const int s = add_slot(m);
        node->arg_slots[i].push_back(s);
        l.push_back(s >= 0 ? &node->saved_inputs[s].data.meta : nullptr);
      }
      node->args[i] = Value(std::move(l));
    }
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    const bool d = IsDifferentiableDtype(outs[i].meta.dtype);
    node->output_metas.push_back(outs[i].meta);
    node->output_differentiable.push_back(d);
    SavedTensor s;
    s.data.meta = outs[i].meta;
    s.data.storage = outs[i].storage;
    s.version = outs[i].storage != nullptr ? outs[i].storage->version() : 0;
    s.is_output = true;
    s.output_differentiable = d;
    s.output_nr = static_cast<uint32_t>(i);
    node->saved_outputs.push_back(std::move(s));
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!node->output_differentiable[i] || outs[i].ag == nullptr) continue;
    AutogradMeta& ag = *outs[i].ag;
    LeafMovesIntoTheGraph(ag);
    ag.grad_fn = node;
    ag.output_nr = static_cast<uint32_t>(i);
    ag.requires_grad = false;
    if (ag.retains_grad) node->retained.emplace_back(static_cast<uint32_t>(i), outs[i].ag);
  }
  return absl::OkStatus();
}

}  // namespace tensord::runtime
