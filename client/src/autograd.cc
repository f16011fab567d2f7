// Client-side autograd: grad mode, the Tensor autograd methods, backward /
// grad requests and user-defined Function records. The graph itself lives in
// the daemon; here the client keeps a mirror (requires_grad, grad_fn) built
// with the same rules and sends the requests.
#include "tensord/client/autograd.h"

#include <atomic>
#include <limits>
#include <queue>

#include "absl/container/flat_hash_map.h"
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
      return RuntimeErr(absl::StrCat(what, ": tensors belong to different sessions (", s->label(), " and ",
                                     t->session()->label(), ")"));
    }
  }
  if (s != nullptr && s->closed()) {
    return RuntimeErr(absl::StrCat(what, ": ", s->label(),
                                   " is closed; its tensors can no longer be used"));
  }
  return s;
}

// Checks shared by backward() and grad(): defined roots, then the engine's
// checks (tensord::CheckBackwardRoots, which the daemon runs too).
absl::Status CheckRoots(absl::string_view what, const std::vector<Tensor>& roots,
                        const std::vector<std::optional<Tensor>>& grad_roots) {
  std::vector<BackwardRoot> checked(roots.size());
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    if (!r.defined()) return RuntimeErr(absl::StrCat(what, ": element ", i, " of tensors is undefined"));
    checked[i].meta = &r.impl()->meta;
    checked[i].requires_grad = r.requires_grad();
    if (i < grad_roots.size() && grad_roots[i].has_value() && grad_roots[i]->defined()) {
      checked[i].grad = &grad_roots[i]->impl()->meta;
    }
  }
  return CheckBackwardRoots(checked, grad_roots.size());
}

// The metadata of a new .grad for `t`: t's layout when it is dense (as
// PyTorch's AccumulateGrad keeps a parameter's strides), else contiguous.
// The daemon's engine gives a new .grad the same.
TensorMeta GradMetaLike(const TensorImpl& t) {
  return t.meta.is_non_overlapping_and_dense()
             ? TensorMeta{t.meta.sizes, t.meta.strides, 0, t.meta.dtype, t.meta.device}
             : TensorMeta::Contiguous(t.meta.sizes, t.meta.dtype, t.meta.device);
}

// A gradient for `t` on meta.
Tensor MetaGradLike(const TensorImpl& t) { return Tensor(std::make_shared<TensorImpl>(nullptr, 0, GradMetaLike(t))); }

// Whether the client can walk a daemon's graph (`order`, the nodes reachable
// from the roots) as the daemon's engine will: not when it reaches a
// user-defined Function (its backward runs in the client and may return
// None) or a gradient recorded by the daemon's engine (opaque).
bool Walkable(const std::vector<GradNode*>& order) {
  for (const GradNode* n : order) {
    if (n->function_id != 0 || n->opaque) return false;
  }
  return true;
}

// backward() / grad() of meta roots: the daemon's engine (RunBackward in
// server/runtime/src/engine.cc) run over the client's mirror of the graph,
// with no values: the same nodes in the same order (newest ready node first;
// with `inputs`, only nodes that lead to one), and in place of each formula
// the checks it would make on what it reads (tensord/meta/autograd_rules.h):
// saved tensors freed by an earlier backward without retain_graph, or
// modified in place since. Every gradient is assumed to flow (a meta tensor
// has no values that could stop one).
//
// On success, leaves reached (backward) and retained non-leaves get a meta
// .grad of their sizes and dtype (one already set stays, as accumulating
// into it keeps its metadata); the result says which `inputs` received a
// gradient. Nodes run before a failure stay released, as on the daemon.
//
// A daemon's backward or grad() (`reached` and `walkable` given): the same
// walk over the client's mirror of the daemon's graph, run before the request
// is sent. It raises what the daemon's engine would, marks the nodes the
// daemon releases, and fills `reached` with the tensors whose .grad the daemon
// sets or accumulates into instead of assigning them. When the graph is not
// Walkable, `*walkable` is false and nothing is checked or changed.
absl::StatusOr<std::vector<bool>> RunMetaEngine(const std::vector<Tensor>& roots, const std::vector<Tensor>& inputs,
                                                bool retain_graph, bool grad_mode,
                                                std::vector<std::shared_ptr<TensorImpl>>* reached = nullptr,
                                                bool* walkable = nullptr) {
  using EdgeT = std::pair<std::shared_ptr<GradNode>, int>;
  std::vector<EdgeT> root_edges;
  for (const Tensor& r : roots) root_edges.push_back(internal::GradEdge(r.impl()));
  std::vector<EdgeT> input_edges;
  for (const Tensor& t : inputs) input_edges.push_back(internal::GradEdge(t.impl()));

  // The graph reachable from the roots.
  std::vector<GradNode*> order;
  absl::flat_hash_map<GradNode*, std::shared_ptr<GradNode>> keep;
  {
    std::vector<GradNode*> stack;
    for (const EdgeT& e : root_edges) {
      if (e.first != nullptr && keep.emplace(e.first.get(), e.first).second) stack.push_back(e.first.get());
    }
    while (!stack.empty()) {
      GradNode* n = stack.back();
      stack.pop_back();
      order.push_back(n);
      for (const EdgeT& e : n->next_functions) {
        if (e.first != nullptr && keep.emplace(e.first.get(), e.first).second) stack.push_back(e.first.get());
      }
    }
  }
  if (walkable != nullptr) {
    *walkable = Walkable(order);
    if (!*walkable) return std::vector<bool>();
  }
  absl::flat_hash_set<GradNode*> targets;
  absl::flat_hash_map<GradNode*, std::vector<std::pair<int, size_t>>> captures;
  for (size_t i = 0; i < input_edges.size(); ++i) {
    targets.insert(input_edges[i].first.get());
    captures[input_edges[i].first.get()].emplace_back(input_edges[i].second, i);
  }
  absl::flat_hash_set<GradNode*> needed;
  if (inputs.empty()) {
    for (GradNode* n : order) needed.insert(n);
  } else {
    absl::flat_hash_map<GradNode*, int> state;  // 0 new, 1 visiting, 2 done
    for (GradNode* start : order) {
      if (state[start] == 2) continue;
      std::vector<std::pair<GradNode*, size_t>> st{{start, 0}};
      state[start] = 1;
      while (!st.empty()) {
        auto& [n, k] = st.back();
        if (k < n->next_functions.size()) {
          GradNode* c = n->next_functions[k++].first.get();
          if (c != nullptr && state[c] == 0) {
            state[c] = 1;
            st.emplace_back(c, 0);
          }
          continue;
        }
        bool need = targets.contains(n);
        for (const EdgeT& e : n->next_functions) need = need || (e.first != nullptr && needed.contains(e.first.get()));
        if (need) needed.insert(n);
        state[n] = 2;
        st.pop_back();
      }
    }
  }
  absl::flat_hash_map<GradNode*, int> deps;
  for (GradNode* n : order) {
    if (!needed.contains(n)) continue;
    for (const EdgeT& e : n->next_functions) {
      if (e.first != nullptr && needed.contains(e.first.get())) ++deps[e.first.get()];
    }
  }
  // Which outputs of each node received a gradient.
  absl::flat_hash_map<GradNode*, std::vector<bool>> buffers;
  auto add_to_buffer = [&](GradNode* n, int nr) {
    std::vector<bool>& b = buffers[n];
    if (static_cast<size_t>(nr) >= b.size()) b.resize(nr + 1, false);
    b[nr] = true;
  };
  for (const EdgeT& e : root_edges) {
    if (e.first != nullptr && needed.contains(e.first.get())) add_to_buffer(e.first.get(), e.second);
  }
  auto cmp = [](GradNode* a, GradNode* b) { return a->seq < b->seq; };  // newest first
  std::priority_queue<GradNode*, std::vector<GradNode*>, decltype(cmp)> ready(cmp);
  for (GradNode* n : order) {
    if (needed.contains(n) && deps[n] == 0) ready.push(n);
  }

  std::vector<bool> captured(inputs.size(), false);
  std::vector<std::shared_ptr<TensorImpl>> gets_grad;
  while (!ready.empty()) {
    GradNode* n = ready.top();
    ready.pop();
    std::vector<bool> grads = std::move(buffers[n]);
    buffers.erase(n);
    auto has = [&](int nr) { return nr >= 0 && static_cast<size_t>(nr) < grads.size() && grads[nr]; };
    for (const auto& [nr, weak] : n->retained) {
      std::shared_ptr<TensorImpl> t = weak.lock();
      if (t != nullptr && has(nr) && t->grad_fn.get() == n) gets_grad.push_back(std::move(t));
    }
    bool captured_only = false;
    if (auto it = captures.find(n); it != captures.end()) {
      for (auto [nr, idx] : it->second) {
        if (has(nr)) captured[idx] = true;
      }
      bool leads_on = false;
      for (const EdgeT& e : n->next_functions) leads_on = leads_on || (e.first != nullptr && needed.contains(e.first.get()));
      if (!leads_on && (grad_mode || !n->is_accumulate)) captured_only = true;
    }
    bool any = false;
    for (bool g : grads) any = any || g;
    const bool runs = any && !captured_only;
    if (runs) {
      if (n->is_accumulate) {
        // As the daemon's AccumulateGrad (and PyTorch's): no .grad for a
        // leaf that no longer requires grad; an error for one that took
        // part in an in-place op since (it has a grad_fn now).
        if (std::shared_ptr<TensorImpl> leaf = n->variable.lock()) {
          if (leaf->grad_fn != nullptr) return RuntimeErr("leaf variable has been moved into the graph interior");
          if (leaf->requires_grad) gets_grad.push_back(std::move(leaf));
        }
      } else {
        if (!n->no_derivative.empty()) {
          return NotImplementedErr(absl::StrCat(
              "the derivative for '", n->no_derivative,
              "' is not implemented: the op was defined at run time or loaded from a kernel artifact without one; "
              "declare one with it (library.define's derivative=, or the manifest's, docs/custom-ops.md), or wrap "
              "it in tensord.library.custom_op and give one with register_autograd"));
        }
        if (!n->backward_error.empty()) return RuntimeErr(n->backward_error);
        if (n->released && n->reads_saved) return SavedTensorsFreedError();
        for (const SavedMeta& s : n->saved_reads) {
          if (s.version_counter != nullptr && *s.version_counter != s.version) {
            std::string owner = s.grad_fn_name;
            uint32_t nr = s.output_nr;
            if (std::shared_ptr<const TensorImpl> now = s.tensor.lock(); now != nullptr) {
              owner = now->grad_fn != nullptr ? now->grad_fn->name : std::string();
              nr = now->grad_fn != nullptr ? static_cast<uint32_t>(now->output_nr) : 0;
            }
            return SavedTensorModifiedError(s.dtype, s.sizes, owner, nr, *s.version_counter, s.version);
          }
        }
      }
    }
    if (!retain_graph && !n->is_accumulate) n->released = true;
    for (size_t k = 0; k < n->next_functions.size(); ++k) {
      const EdgeT& e = n->next_functions[k];
      if (e.first == nullptr || !needed.contains(e.first.get())) continue;
      const bool gives = k >= n->edge_gives.size() || n->edge_gives[k];
      if (runs && !n->is_accumulate && gives) add_to_buffer(e.first.get(), e.second);
      if (--deps[e.first.get()] == 0) ready.push(e.first.get());
    }
  }
  // grad() changes no .grad the client sees (the daemon reports none).
  if (grad_mode) return captured;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (captured[i] && !inputs[i].is_leaf()) gets_grad.push_back(inputs[i].impl());
  }
  if (reached != nullptr) {
    *reached = std::move(gets_grad);
    return captured;
  }
  for (const std::shared_ptr<TensorImpl>& t : gets_grad) {
    if (t->grad == nullptr) t->grad = MetaGradLike(*t).impl();
  }
  return captured;
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

const std::shared_ptr<uint64_t>& VersionCounter(TensorImpl& t) {
  if (t.version_counter == nullptr) t.version_counter = std::make_shared<uint64_t>(0);
  return t.version_counter;
}

SavedMeta DescribeSaved(const std::shared_ptr<TensorImpl>& impl, bool track_version) {
  TensorImpl& t = *impl;
  SavedMeta m;
  m.tensor = impl;
  if (track_version) {
    m.version_counter = VersionCounter(t);
    m.version = *m.version_counter;
  }
  m.dtype = t.meta.dtype;
  m.sizes = t.meta.sizes;
  if (t.grad_fn != nullptr) {
    m.grad_fn_name = t.grad_fn->name;
    m.output_nr = static_cast<uint32_t>(t.output_nr);
  }
  return m;
}

std::pair<std::shared_ptr<GradNode>, int> GradEdge(const std::shared_ptr<TensorImpl>& t) {
  if (t == nullptr || !t->requires_grad) return {nullptr, 0};
  if (t->grad_fn != nullptr) return {t->grad_fn, t->output_nr};
  std::shared_ptr<GradNode> acc = t->grad_accumulator.lock();
  if (acc == nullptr) {
    acc = std::make_shared<GradNode>();
    acc->name = "AccumulateGrad";
    acc->variable = t;
    acc->is_accumulate = true;
    acc->seq = std::numeric_limits<uint64_t>::max();
    t->grad_accumulator = acc;
  }
  return {acc, 0};
}

uint64_t NextNodeSeq() {
  static std::atomic<uint64_t> seq{0};
  return seq.fetch_add(1, std::memory_order_relaxed) + 1;
}

std::shared_ptr<GradNode> EngineResultNode() {
  auto n = std::make_shared<GradNode>();
  n->name = "GradBackward";
  n->opaque = true;
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
  impl_->grad_fn->retained.emplace_back(impl_->output_nr, impl_);  // the client's walk sees it
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
    TD_ASSIGN_OR_RETURN(std::vector<bool> reached,
                        RunMetaEngine(roots, inputs, retain_graph.value_or(create_graph), /*grad_mode=*/false));
    (void)reached;  // an input no gradient reached keeps its .grad (None), as on the daemon
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
  if (s->predicts_backward()) {
    // The client's walk raises what the daemon's engine would (a freed graph,
    // a saved tensor modified in place) before anything is sent, and says
    // which .grad the daemon sets: then there is no round trip, unless a
    // .grad takes a layout only the daemon knows (a retain_grad() or non-leaf
    // input's takes the gradient's) or requires grad (create_graph).
    bool walkable = false;
    std::vector<std::shared_ptr<TensorImpl>> reached;
    TD_ASSIGN_OR_RETURN(std::vector<bool> unused, RunMetaEngine(roots, inputs, retain_graph.value_or(create_graph),
                                                                /*grad_mode=*/false, &reached, &walkable));
    (void)unused;
    bool predictable = walkable && !create_graph;
    for (const std::shared_ptr<TensorImpl>& t : reached) {
      if (t->grad_fn != nullptr || (t->grad != nullptr && t->grad->requires_grad) ||
          (t->grad_pending && t->grad_requires_grad)) {
        predictable = false;
      }
    }
    if (predictable) {
      std::vector<std::pair<std::shared_ptr<TensorImpl>, TensorMeta>> expect;
      for (std::shared_ptr<TensorImpl>& t : reached) {
        // A .grad already there is accumulated into in place: same metadata.
        if (t->grad == nullptr && !t->grad_pending) {
          TensorMeta m = GradMetaLike(*t);
          expect.emplace_back(std::move(t), std::move(m));
        }
      }
      return s->SendPredictedBackward(roots, grad_roots, inputs, retain_graph.value_or(false), std::move(expect),
                                      site);
    }
  }
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
    for (const auto& g : grad_outputs) {
      if (g.has_value() && g->defined() && !g->is_meta()) return RuntimeErr("grad: a gradient is not on meta");
    }
    // Meta: a meta gradient per input the graph reaches (shaped like it).
    TD_ASSIGN_OR_RETURN(std::vector<bool> reached,
                        RunMetaEngine(outputs, inputs, retain_graph.value_or(create_graph), /*grad_mode=*/true));
    std::vector<std::optional<Tensor>> out;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!reached[i]) {
        if (!allow_unused) {
          return RuntimeErr("One of the differentiated Tensors appears to not have been used in the graph. "
                            "Set allow_unused=True if this is the desired behavior.");
        }
        out.emplace_back();
        continue;
      }
      out.emplace_back(MetaGradLike(*inputs[i].impl()));
    }
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
  if (s->predicts_backward()) {
    // The client's walk: raises the engine's errors before sending, and marks
    // the nodes the daemon releases, so that a later predicted backward
    // through them fails here, as the daemon would.
    bool walkable = false;
    std::vector<std::shared_ptr<TensorImpl>> reached;
    TD_ASSIGN_OR_RETURN(std::vector<bool> unused, RunMetaEngine(outputs, inputs, retain_graph.value_or(create_graph),
                                                                /*grad_mode=*/true, &reached, &walkable));
    (void)unused;
  }
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
  node->seq = internal::NextNodeSeq();
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
  if (s == nullptr) {
    // Meta: the daemon's callback checks every saved tensor (None: nothing)
    // before the backward runs; the node keeps them for the meta engine.
    node->reads_saved = !rec.saved.empty();
    for (const auto& t : rec.saved) {
      SavedMeta m;
      if (t.has_value() && t->defined()) {
        m = internal::DescribeSaved(t->impl(), /*track_version=*/true);
        if (t->impl()->grad_fn == node) m.tensor.reset();  // an output: named by the node, as in the daemon
      }
      node->saved_reads.push_back(std::move(m));
    }
  }
  return true;
}

}  // namespace tensord::client
