// The client's autograd for op calls: which inputs a call records, the node
// it makes and what that node's backward will read, as the daemon records
// the same call.
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "autograd_internal.h"
#include "ops_internal.h"
#include "tensord/client/autograd.h"
#include "tensord/meta/autograd_rules.h"
#include "tensord/meta/declared_derivative.h"
#include "tensord/meta/errors.h"

namespace tensord::client::internal {

namespace {

const Tensor* TensorFor(const TensorMeta* m, const std::vector<Tensor>& tensors) {
  if (m == nullptr) return nullptr;
  for (const Tensor& t : tensors) {
    if (&t.impl()->meta == m) return &t;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<CallRoles> Roles(const OpEntry& op, const std::vector<Value>& values, const std::vector<Tensor>& tensors,
                                const std::vector<int>& alias_of) {
  CallRoles r;
  const std::vector<bool>& diff = DifferentiableArgs(op);
  for (size_t i = 0; i < values.size() && i < diff.size(); ++i) {
    if (!diff[i]) continue;
    const Value& v = values[i];
    if (v.kind() == Value::Kind::kTensor) {
      r.diff_inputs.push_back(TensorFor(&v.tensor(), tensors));
    } else if (v.kind() == Value::Kind::kTensorList) {
      for (const TensorMeta* m : v.tensor_list()) r.diff_inputs.push_back(TensorFor(m, tensors));
    }
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const Value& v = values[i];
    if (v.kind() == Value::Kind::kTensor) {
      if (const Tensor* t = TensorFor(&v.tensor(), tensors)) r.slots.emplace_back(static_cast<int>(i), t);
    } else if (v.kind() == Value::Kind::kTensorList) {
      for (const TensorMeta* m : v.tensor_list()) r.slots.emplace_back(static_cast<int>(i), TensorFor(m, tensors));
    }
  }
  r.written.assign(op.return_aliases.size(), nullptr);
  for (size_t i = 0; i < op.return_aliases.size(); ++i) {
    const int a = op.return_aliases[i];
    if (a < 0 || !op.schema.arguments[a].is_write) continue;
    const Tensor* self = values[a].kind() == Value::Kind::kTensor ? TensorFor(&values[a].tensor(), tensors) : nullptr;
    if (self == nullptr) return InternalErr(absl::StrCat(op.full_name(), ": the written argument is not a tensor"));
    r.written[i] = self;
  }
  r.alias_base.assign(alias_of.size(), nullptr);
  for (size_t i = 0; i < alias_of.size(); ++i) {
    const int a = alias_of[i];
    if (a < 0 || static_cast<size_t>(a) >= values.size() || values[a].kind() != Value::Kind::kTensor) continue;
    r.alias_base[i] = TensorFor(&values[a].tensor(), tensors);
  }
  return r;
}

absl::StatusOr<AutogradPlan> PlanAutograd(const OpEntry& op, const CallRoles& roles) {
  AutogradPlan p;
  bool any_requires_grad = false;
  for (const Tensor* t : roles.diff_inputs) any_requires_grad |= t != nullptr && t->requires_grad();
  p.record = IsGradEnabled() && !op.has(kNotDifferentiable) && any_requires_grad;
  for (size_t i = 0; i < roles.written.size(); ++i) {
    const Tensor* self = roles.written[i];
    if (self == nullptr) continue;
    if (IsGradEnabled() && self->requires_grad() && self->is_leaf()) {
      return RuntimeErr("a leaf Variable that requires grad is being used in an in-place operation.");
    }
    if (p.record && self->impl()->is_view) {
      return NotImplementedErr(absl::StrCat(
          op.full_name(), ": an in-place operation on a view is not supported while recording gradients (tensord's "
                          "autograd does not rebase views); clone() the view first, or run it under no_grad()"));
    }
    if (p.write_results.empty()) p.write_results.resize(op.schema.returns.size());
    p.write_results[i] = *self;
  }
  if (p.record) {
    for (const Tensor* t : roles.diff_inputs) {
      p.edges.push_back(t != nullptr ? internal::GradEdge(t->impl()) : std::make_pair(nullptr, 0));
    }
  }
  return p;
}

void ShareStorageIds(const CallRoles& roles, std::vector<Tensor>& outs) {
  for (size_t i = 0; i < outs.size() && i < roles.alias_base.size(); ++i) {
    const Tensor* base = roles.alias_base[i];
    if (base != nullptr && base->impl() != outs[i].impl()) {
      outs[i].impl()->storage_id = base->impl()->storage_id;
      outs[i].impl()->storage_bytes = base->impl()->storage_bytes;
      outs[i].impl()->version_counter = internal::VersionCounter(*base->impl());
    }
  }
}

// A meta call recorded for autograd: what its node's backward will read
// (tensord/meta/autograd_rules.h), with the version of each tensor now, after
// an in-place op's write, as the daemon's node saves it. An in-place op's
// `self` as it was before the op is a snapshot (the daemon saves a copy).
void PlanMetaSavedReads(const OpEntry& op, const CallRoles& roles, const std::vector<Tensor>& outs,
                        AutogradPlan& p) {
  if (SavedReadsRuleIsEmpty(op)) return;  // reads nothing; every edge gets a gradient
  const std::vector<bool>& diff = DifferentiableArgs(op);
  std::vector<std::vector<int>> arg_slots(op.schema.arguments.size());
  absl::InlinedVector<const Tensor*, 4> slot_tensor;
  absl::InlinedVector<bool, 4> slot_needs;
  for (const auto& [a, t] : roles.slots) {
    if (t == nullptr) {
      arg_slots[a].push_back(-1);
      continue;
    }
    arg_slots[a].push_back(static_cast<int>(slot_tensor.size()));
    slot_tensor.push_back(t);
    slot_needs.push_back(static_cast<size_t>(a) < diff.size() && diff[a] && t->requires_grad());
  }
  // The node's edges are the differentiable arguments' tensors, in order.
  for (const auto& [a, t] : roles.slots) {
    if (static_cast<size_t>(a) < diff.size() && diff[a]) p.edge_gives.push_back(FormulaGivesGradient(op, a));
  }
  if (op.declared_derivative != nullptr) {
    // A line that runs and reads an optional tensor given as None: the
    // daemon's backward fails there (declared_formula.cc), and so does this one.
    auto any_slot = [&](int a, bool need) {
      for (int s : arg_slots[a]) {
        if (s >= 0 && (!need || slot_needs[s])) return true;
      }
      return false;
    };
    for (const SavedReadsItem& it : op.declared_derivative->reads_rule()) {
      if (it.nograd || it.kind != SavedRead::Kind::kInput || any_slot(it.index, false)) continue;
      if (it.when >= 0 && !any_slot(it.when, true)) continue;
      p.backward_error = absl::StrCat(op.full_name(), ": the derivative reads argument '",
                                      op.schema.arguments[it.index].name, "', which is None in this call");
      break;
    }
  }
  const std::vector<SavedRead> reads = PredictSavedReads(op, arg_slots, [&](int s) { return slot_needs[s]; });
  p.reads_saved = !reads.empty();
  for (const SavedRead& r : reads) {
    SavedMeta m;
    if (r.kind == SavedRead::Kind::kInput) {
      // An in-place op's self is saved as it was before: no version to track.
      m = internal::DescribeSaved(slot_tensor[r.index]->impl(), !(op.is_inplace() && r.index == 0));
      // Another argument sharing self's storage (x.mul_(x)) is saved as it
      // was before the write: the version before this op's bump, as the
      // daemon's node records it, so that reading it fails at backward().
      if (op.is_inplace() && r.index != 0 && !slot_tensor.empty() && m.version_counter != nullptr &&
          m.version_counter == slot_tensor[0]->impl()->version_counter && m.version > 0) {
        --m.version;
      }
    } else if (r.kind == SavedRead::Kind::kOutput) {
      if (static_cast<size_t>(r.index) >= outs.size()) continue;
      m = internal::DescribeSaved(outs[r.index].impl(), /*track_version=*/true);
      m.grad_fn_name = GradFnName(op);  // the output's grad_fn is set later
      m.tensor.reset();                 // named by this node, as in the daemon
      m.output_nr = static_cast<uint32_t>(r.index);
    } else {
      continue;  // kAnySaved: only reads_saved
    }
    p.saved_reads.push_back(std::move(m));
  }
}

void ApplyAutograd(const OpEntry& op, AutogradPlan& p, const std::vector<int>& alias_of, std::vector<Tensor>& outs) {
  std::shared_ptr<GradNode> node;
  if (p.record) {
    node = std::make_shared<GradNode>();
    node->name = GradFnName(op);
    node->next_functions = std::move(p.edges);
    node->seq = internal::NextNodeSeq();
    node->saved_reads = std::move(p.saved_reads);
    node->reads_saved = p.reads_saved;
    node->edge_gives = std::move(p.edge_gives);
    if (op.id >= kFirstExtensionOpId && op.declared_derivative == nullptr) node->no_derivative = op.full_name();
    node->backward_error = std::move(p.backward_error);
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    TensorImpl& im = *outs[i].impl();
    const bool rg = p.record && IsDifferentiableDtype(im.meta.dtype);
    const bool written = i < p.write_results.size() && p.write_results[i].has_value();
    if (written) {
      if (rg) {
        im.requires_grad = true;
        im.grad_fn = node;
        im.output_nr = static_cast<int>(i);
        if (im.retains_grad) node->retained.emplace_back(static_cast<int>(i), outs[i].impl());
      }
      continue;
    }
    im.requires_grad = rg;
    im.grad_fn = rg ? node : nullptr;
    im.output_nr = rg ? static_cast<int>(i) : 0;
    im.is_view = i < alias_of.size() && alias_of[i] >= 0 && !op.has(kNotDifferentiable);
  }
}

}  // namespace tensord::client::internal
