// Client-side autograd: grad mode, the Tensor autograd methods, backward /
// grad requests and user-defined Function records. The graph itself lives in
// the daemon; here the client keeps a mirror (requires_grad, grad_fn) built
// with the same rules and sends the requests.
#include "tensord/client/autograd.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "autograd_internal.h"
#include "tensord/client/session.h"
#include "tensord/meta/autograd_rules.h"
#include "tensord/meta/errors.h"

namespace tensord::client {
namespace {

thread_local bool t_grad_enabled = true;

// The session of the non-meta tensors among `ts`, or nullptr when all are
// meta. RuntimeError for tensors of two sessions or a closed session.
absl::StatusOr<std::shared_ptr<Session>> SessionOf(absl::string_view what, const std::vector<const Tensor*>& ts) {
  std::shared_ptr<Session> s;
  for (const Tensor* t : ts) {
    if (t == nullptr || !t->defined() || t->is_meta()) continue;
    if (s == nullptr) {
      s = t->session();
    } else if (t->session() != s) {
      return RuntimeErr(absl::StrCat(what, ": tensors belong to different sessions (session ", s->session_id(),
                                     " and session ", t->session()->session_id(), ")"));
    }
  }
  if (s != nullptr && s->closed()) {
    return RuntimeErr(absl::StrCat(what, ": tensord session ", s->session_id(),
                                   " is closed; its tensors can no longer be used"));
  }
  return s;
}

// Checks shared by backward() and grad(): every root requires grad, implicit
// grads only for one-element roots, given grads match the roots' shapes.
absl::Status CheckRoots(absl::string_view what, const std::vector<Tensor>& roots,
                        const std::vector<std::optional<Tensor>>& grad_roots) {
  if (!grad_roots.empty() && grad_roots.size() != roots.size()) {
    return RuntimeErr(absl::StrCat(what, ": got ", grad_roots.size(), " gradients for ", roots.size(), " tensors"));
  }
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    if (!r.defined()) return RuntimeErr(absl::StrCat(what, ": element ", i, " of tensors is undefined"));
    if (!r.requires_grad()) {
      return RuntimeErr(absl::StrCat("element ", i, " of tensors does not require grad and does not have a grad_fn"));
    }
    const bool given = i < grad_roots.size() && grad_roots[i].has_value() && grad_roots[i]->defined();
    if (!given) {
      if (r.numel() != 1) return RuntimeErr("grad can be implicitly created only for scalar outputs");
      continue;
    }
    const Tensor& g = *grad_roots[i];
    if (g.sizes() != r.sizes()) {
      return RuntimeErr(absl::StrCat("Mismatch in shape: grad_output[", i, "] has a shape of ",
                                     ShapeToString(g.sizes()), " and output[", i, "] has a shape of ",
                                     ShapeToString(r.sizes()), "."));
    }
  }
  return absl::OkStatus();
}

// A gradient for `t` on meta: t's layout when it is dense (as PyTorch's
// AccumulateGrad keeps a parameter's strides), else contiguous.
Tensor MetaGradLike(const TensorImpl& t) {
  TensorMeta m = t.meta.is_non_overlapping_and_dense()
                     ? TensorMeta{t.meta.sizes, t.meta.strides, 0, t.meta.dtype, t.meta.device}
                     : TensorMeta::Contiguous(t.meta.sizes, t.meta.dtype, t.meta.device);
  return Tensor(std::make_shared<TensorImpl>(nullptr, 0, std::move(m)));
}

// backward() of meta roots: no values to compute, but the shapes are known,
// so every leaf the graph reaches that requires grad (or, with `inputs`,
// each input) gets a meta .grad of its own sizes and dtype, as PyTorch's
// meta device does. A .grad already set stays (accumulating keeps its meta).
void MetaBackward(const std::vector<Tensor>& roots, const std::vector<Tensor>& inputs) {
  auto give = [](const std::shared_ptr<TensorImpl>& leaf) {
    if (leaf != nullptr && leaf->requires_grad && leaf->grad == nullptr && !leaf->grad_pending) {
      leaf->grad = MetaGradLike(*leaf).impl();
    }
  };
  if (!inputs.empty()) {
    for (const Tensor& t : inputs) give(t.impl());
    return;
  }
  std::vector<std::shared_ptr<GradNode>> stack;
  absl::flat_hash_set<const GradNode*> seen;
  for (const Tensor& r : roots) {
    if (r.impl()->grad_fn == nullptr) {
      give(r.impl());  // a leaf root
    } else if (seen.insert(r.impl()->grad_fn.get()).second) {
      stack.push_back(r.impl()->grad_fn);
    }
  }
  while (!stack.empty()) {
    std::shared_ptr<GradNode> n = std::move(stack.back());
    stack.pop_back();
    give(n->variable.lock());
    for (const auto& [next, nr] : n->next_functions) {
      (void)nr;
      if (next != nullptr && seen.insert(next.get()).second) stack.push_back(next);
    }
  }
}

bool AllMeta(const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts) {
    if (!t.defined() || !t.is_meta()) return false;
  }
  return !ts.empty();
}

absl::Status NoMeta(absl::string_view what, const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts) {
    if (t.defined() && t.is_meta()) {
      return NotImplementedErr(absl::StrCat(what, ": cannot run on meta tensors: a meta tensor has no data, so its "
                                                  "gradients cannot be computed (create the tensors on a real device)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

namespace internal {

std::pair<std::shared_ptr<GradNode>, int> GradEdge(const std::shared_ptr<TensorImpl>& t) {
  if (t == nullptr || !t->requires_grad) return {nullptr, 0};
  if (t->grad_fn != nullptr) return {t->grad_fn, t->output_nr};
  std::shared_ptr<GradNode> acc = t->grad_accumulator.lock();
  if (acc == nullptr) {
    acc = std::make_shared<GradNode>();
    acc->name = "AccumulateGrad";
    acc->variable = t;
    t->grad_accumulator = acc;
  }
  return {acc, 0};
}

std::shared_ptr<GradNode> EngineResultNode() {
  auto n = std::make_shared<GradNode>();
  n->name = "GradBackward";
  return n;
}

}  // namespace internal

// ---------------------------------------------------------------- grad mode

bool IsGradEnabled() { return t_grad_enabled; }
void SetGradEnabled(bool enabled) { t_grad_enabled = enabled; }

// ---------------------------------------------------------------- Tensor

absl::Status Tensor::SetRequiresGrad(bool requires_grad, CallSite site) {
  if (!defined()) return RuntimeErr("requires_grad_: the tensor is undefined");
  if (!is_leaf()) {
    if (requires_grad) return absl::OkStatus();  // already requires grad
    return RuntimeErr(
        "you can only change requires_grad flags of leaf variables. If you want to use a computed variable in a "
        "subgraph that doesn't require differentiation use var_no_grad = var.detach().");
  }
  if (requires_grad && !IsDifferentiableDtype(dtype())) {
    return RuntimeErr(absl::StrCat("only Tensors of floating point and complex dtype can require gradients (got ",
                                   DtypeName(dtype()), ")"));
  }
  if (impl_->requires_grad == requires_grad) return absl::OkStatus();
  impl_->requires_grad = requires_grad;
  if (is_meta() || session() == nullptr) return absl::OkStatus();
  TD_RETURN_IF_ERROR(session()->SendSetRequiresGrad(handle(), requires_grad, site));
  if (requires_grad) session()->RegisterGradTarget(impl_);
  return absl::OkStatus();
}

absl::Status Tensor::RetainGrad(CallSite site) {
  (void)site;
  if (!defined()) return RuntimeErr("retain_grad: the tensor is undefined");
  if (!requires_grad()) return RuntimeErr("can't retain_grad on Tensor that has requires_grad=False");
  if (is_leaf() || impl_->retains_grad) return absl::OkStatus();
  impl_->retains_grad = true;
  if (is_meta() || session() == nullptr) return absl::OkStatus();
  TD_RETURN_IF_ERROR(session()->SendRetainGrad(handle()));
  session()->RegisterGradTarget(impl_);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<Tensor>> Tensor::Grad() const {
  if (!defined()) return RuntimeErr("grad: the tensor is undefined");
  if (impl_->grad != nullptr) return std::optional<Tensor>(Tensor(impl_->grad));
  if (!impl_->grad_pending || session() == nullptr) return std::optional<Tensor>();
  TD_ASSIGN_OR_RETURN(Tensor g, session()->BindGrad(handle(), impl_->grad_meta));
  g.impl()->requires_grad = impl_->grad_requires_grad;
  if (impl_->grad_requires_grad) g.impl()->grad_fn = internal::EngineResultNode();
  impl_->grad = g.impl();
  impl_->grad_pending = false;
  return std::optional<Tensor>(std::move(g));
}

absl::Status Tensor::SetGrad(const std::optional<Tensor>& grad) {
  if (!defined()) return RuntimeErr("grad: the tensor is undefined");
  const bool none = !grad.has_value() || !grad->defined();
  if (!none) {
    const Tensor& g = *grad;
    if (g.dtype() != dtype()) return RuntimeErr("assigned grad has data of a different type");
    if (g.device() != device()) return RuntimeErr("assigned grad has data located on a different device");
    if (g.sizes() != sizes()) return RuntimeErr("assigned grad has data of a different size");
    if (!is_meta() && g.session() != session()) {
      return RuntimeErr("assigned grad belongs to another tensord session");
    }
  }
  impl_->grad = none ? nullptr : grad->impl();
  impl_->grad_pending = false;
  if (is_meta() || session() == nullptr) return absl::OkStatus();
  TD_RETURN_IF_ERROR(session()->SendSetGrad(handle(), none ? 0 : grad->handle()));
  session()->RegisterGradTarget(impl_);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- backward

absl::Status Backward(const std::vector<Tensor>& roots, const std::vector<std::optional<Tensor>>& grad_roots,
                      std::optional<bool> retain_graph, bool create_graph, const std::vector<Tensor>& inputs,
                      CallSite site) {
  if (roots.empty()) return absl::OkStatus();
  TD_RETURN_IF_ERROR(CheckRoots("backward", roots, grad_roots));
  if (AllMeta(roots)) {
    for (const auto& g : grad_roots) {
      if (g.has_value() && g->defined() && !g->is_meta()) return RuntimeErr("backward: a gradient is not on meta");
    }
    MetaBackward(roots, inputs);
    return absl::OkStatus();
  }
  TD_RETURN_IF_ERROR(NoMeta("backward", roots));
  std::vector<const Tensor*> all;
  for (const Tensor& t : roots) all.push_back(&t);
  for (const auto& g : grad_roots) all.push_back(g.has_value() ? &*g : nullptr);
  for (const Tensor& t : inputs) {
    if (!t.defined()) return RuntimeErr("backward: an input is undefined");
    all.push_back(&t);
  }
  TD_ASSIGN_OR_RETURN(std::shared_ptr<Session> s, SessionOf("backward", all));
  if (s == nullptr) return NotImplementedErr("backward: cannot run on meta tensors");
  for (const Tensor& t : inputs) s->RegisterGradTarget(t.impl());
  TD_ASSIGN_OR_RETURN(auto unused, s->RunBackward(roots, grad_roots, inputs, retain_graph.value_or(create_graph),
                                                  create_graph, /*accumulate=*/true, /*allow_unused=*/true, site));
  (void)unused;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::optional<Tensor>>> Grad(const std::vector<Tensor>& outputs,
                                                        const std::vector<Tensor>& inputs,
                                                        const std::vector<std::optional<Tensor>>& grad_outputs,
                                                        std::optional<bool> retain_graph, bool create_graph,
                                                        bool allow_unused, CallSite site) {
  if (inputs.empty()) return RuntimeErr("grad requires non-empty inputs.");
  if (outputs.empty()) return RuntimeErr("grad requires non-empty outputs.");
  TD_RETURN_IF_ERROR(CheckRoots("grad", outputs, grad_outputs));
  for (const Tensor& t : inputs) {
    if (!t.defined()) return RuntimeErr("grad: an input is undefined");
    if (!t.requires_grad()) return RuntimeErr("One of the differentiated Tensors does not require grad");
  }
  if (AllMeta(outputs) && AllMeta(inputs)) {
    // Meta: one meta gradient per input, shaped like it (whether the graph
    // reaches an input is not checked: allow_unused is not needed on meta).
    std::vector<std::optional<Tensor>> out;
    for (const Tensor& t : inputs) out.emplace_back(MetaGradLike(*t.impl()));
    return out;
  }
  TD_RETURN_IF_ERROR(NoMeta("grad", outputs));
  TD_RETURN_IF_ERROR(NoMeta("grad", inputs));
  std::vector<const Tensor*> all;
  for (const Tensor& t : outputs) all.push_back(&t);
  for (const Tensor& t : inputs) all.push_back(&t);
  for (const auto& g : grad_outputs) all.push_back(g.has_value() ? &*g : nullptr);
  TD_ASSIGN_OR_RETURN(std::shared_ptr<Session> s, SessionOf("grad", all));
  if (s == nullptr) return NotImplementedErr("grad: cannot run on meta tensors");
  return s->RunBackward(outputs, grad_outputs, inputs, retain_graph.value_or(create_graph), create_graph,
                        /*accumulate=*/false, allow_unused, site);
}

// ---------------------------------------------------------------- Function

absl::StatusOr<bool> RecordFunction(const FunctionRecord& rec, CallSite site) {
  bool any_rg = false;
  std::vector<const Tensor*> all;
  for (const auto& in : rec.inputs) {
    if (!in.has_value() || !in->defined()) continue;
    all.push_back(&*in);
    any_rg |= in->requires_grad();
  }
  for (const Tensor& t : rec.outputs) all.push_back(&t);
  for (const auto& t : rec.saved) {
    if (t.has_value() && t->defined()) all.push_back(&*t);
  }
  if (!IsGradEnabled() || !any_rg) return false;
  if (!rec.non_differentiable.empty() && rec.non_differentiable.size() != rec.outputs.size()) {
    return InternalErr("RecordFunction: non_differentiable must have one flag per output");
  }
  for (const Tensor& d : rec.dirty) {
    bool is_input = false;
    for (const auto& in : rec.inputs) is_input |= in.has_value() && in->impl() == d.impl();
    bool is_output = false;
    for (const Tensor& o : rec.outputs) is_output |= o.impl() == d.impl();
    if (!is_input || !is_output) {
      return RuntimeErr(absl::StrCat(rec.name, ": mark_dirty() was given a tensor that is not both an input and an "
                                               "output of forward (an in-place modified input must be returned)"));
    }
    if (d.requires_grad() && d.is_leaf()) {
      return RuntimeErr("a leaf Variable that requires grad has been used in an in-place operation.");
    }
  }
  TD_ASSIGN_OR_RETURN(std::shared_ptr<Session> s, SessionOf(rec.name, all));
  auto node = std::make_shared<GradNode>();
  node->name = rec.name;
  node->function_id = rec.function_id;
  for (const auto& in : rec.inputs) {
    if (in.has_value() && in->defined()) node->next_functions.push_back(internal::GradEdge(in->impl()));
  }
  if (s != nullptr) {
    std::vector<uint64_t> inputs, outputs, dirty, saved;
    for (const auto& in : rec.inputs) inputs.push_back(in.has_value() && in->defined() ? in->handle() : 0);
    for (const Tensor& t : rec.outputs) outputs.push_back(t.handle());
    for (const Tensor& t : rec.dirty) dirty.push_back(t.handle());
    for (const auto& t : rec.saved) saved.push_back(t.has_value() && t->defined() ? t->handle() : 0);
    std::vector<bool> nd = rec.non_differentiable;
    nd.resize(rec.outputs.size(), false);
    TD_RETURN_IF_ERROR(
        s->SendRecordFunction(rec.function_id, rec.name, inputs, outputs, nd, dirty, rec.materialize_grads, saved,
                             site));
  }
  for (size_t j = 0; j < rec.outputs.size(); ++j) {
    TensorImpl& im = *rec.outputs[j].impl();
    const bool nd = j < rec.non_differentiable.size() && rec.non_differentiable[j];
    const bool rg = !nd && IsDifferentiableDtype(im.meta.dtype);
    im.requires_grad = rg;
    im.grad_fn = rg ? node : nullptr;
    im.output_nr = rg ? static_cast<int>(j) : 0;
  }
  return true;
}

}  // namespace tensord::client
