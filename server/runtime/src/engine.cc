// The autograd engine: a backward pass over the recorded graph, as
// PyTorch's engine runs it (the newest node first once every gradient for
// it is in), with ops run by the Dispatcher and the client's functions
// reached through BackwardHooks.
#include "tensord/runtime/engine.h"

#include <cstdlib>
#include <queue>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tensord/meta/autograd_rules.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/op_table.h"

namespace tensord::runtime {

namespace {

// TENSORD_CHECK_SAVED_READS=1 (the tests set it): every formula run is
// compared with the saved-reads rule of its op's record (tensord/meta/ops.inl,
// read through tensord/meta/autograd_rules.h), which the client's meta-mode
// backward relies on.
bool CheckSavedReads() {
  static const bool on = [] {
    const char* v = std::getenv("TENSORD_CHECK_SAVED_READS");
    return v != nullptr && v[0] != '\0' && std::string(v) != "0";
  }();
  return on;
}

// InternalErr naming the op and both lists when the formula of `n` read other
// saved tensors than its record's saved-reads rule predicts.
absl::Status CompareSavedReads(const Node& n, const std::vector<SavedRead>& actual) {
  const std::vector<SavedRead> predicted = PredictSavedReads(
      *n.op, n.arg_slots, [&](int s) { return s >= 0 && static_cast<size_t>(s) < n.next.size() && n.next[s].valid(); });
  if (predicted == actual) return absl::OkStatus();
  auto str = [](const std::vector<SavedRead>& v) {
    std::vector<std::string> parts;
    for (const SavedRead& r : v) parts.push_back(r.ToString());
    return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
  };
  std::vector<std::string> needs;
  for (size_t i = 0; i < n.next.size(); ++i) needs.push_back(n.next[i].valid() ? "1" : "0");
  return InternalErr(absl::StrCat("the derivative formula of ", n.op->full_name(), " read the saved tensors ",
                                  str(actual), " but the saved-reads rule of its record (tensord/meta/ops.inl) predicts ",
                                  str(predicted), " (input slots needing a gradient: ", absl::StrJoin(needs, ""),
                                  ")"));
}

}  // namespace

absl::Status RunBackward(Dispatcher& dispatcher, const BackwardPlan& plan, BackwardHooks& hooks, BackwardResult* result) {
  const bool create_graph = plan.create_graph;
  const bool retain_graph = plan.retain_graph || create_graph;
  const bool grad_mode = !plan.accumulate;
  result->captured.clear();
  result->changed.clear();
  // Whether op `name` has a kernel on `device` (a test's table may lack one).
  auto has_kernel = [&](absl::string_view name, const Device& device) {
    const OpEntry* op = OpTable::Get().Find(name);
    const Backend* on = dispatcher.devices().Find(device);
    return op != nullptr && on != nullptr && on->FindKernel(op->id) != nullptr;
  };
  auto run = [&](absl::string_view name, std::vector<Arg> args, bool record) -> absl::StatusOr<Tensor> {
    TD_ASSIGN_OR_RETURN(std::vector<Tensor> o, dispatcher.RunOp(name, std::move(args), record));
    if (o.empty()) return InternalErr(absl::StrCat(name, " returned no tensor"));
    return std::move(o[0]);
  };

  if (plan.roots.empty()) return RuntimeErr("grad requires non-empty inputs: no tensors to differentiate were given");
  if (grad_mode && plan.inputs.empty()) return RuntimeErr("grad requires non-empty inputs.");
  if (plan.root_grads.size() != plan.roots.size()) {
    return InternalErr(absl::StrCat("backward: ", plan.root_grads.size(), " gradient slots for ", plan.roots.size(),
                                    " roots"));
  }
  for (const Tensor& t : plan.roots) {
    if (t.failed()) return dispatcher.FailedInput(t.error);
  }
  for (const Tensor& t : plan.root_grads) {
    if (t.failed()) return dispatcher.FailedInput(t.error);
  }
  for (const Tensor& t : plan.inputs) {
    if (t.failed()) return dispatcher.FailedInput(t.error);
  }

  // Roots and their gradients: first the engine's checks (the client's
  // meta engine runs the same, tensord::CheckBackwardRoots), then implicit
  // gradients made, and given ones moved to the root's device (0-dim ones;
  // the checks refuse others) and cast to its dtype.
  const std::vector<Tensor>& roots = plan.roots;
  std::vector<BackwardRoot> checked;
  for (size_t i = 0; i < roots.size(); ++i) {
    checked.push_back(BackwardRoot{&roots[i].meta, roots[i].requires_grad(),
                                   plan.root_grads[i].defined() ? &plan.root_grads[i].meta : nullptr});
  }
  TD_RETURN_IF_ERROR(CheckBackwardRoots(checked, plan.root_grads_given));
  std::vector<Edge> root_edges;
  std::vector<Tensor> root_grads;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    Tensor g = plan.root_grads[i];
    if (!g.defined()) {
      TD_ASSIGN_OR_RETURN(g, run("ones_like", {root}, false));
    } else {
      if (g.meta.device != root.meta.device) {
        TD_ASSIGN_OR_RETURN(g, run("to.device", {g, root.meta.device}, create_graph));
      }
      if (g.meta.dtype != root.meta.dtype) {
        TD_ASSIGN_OR_RETURN(g, run("to.dtype", {g, root.meta.dtype}, create_graph));
      }
    }
    root_edges.push_back(dispatcher.GradientEdge(root));
    root_grads.push_back(std::move(g));
  }

  // Inputs: where gradients are captured (grad) or the only ones accumulated.
  const std::vector<Tensor>& input_tensors = plan.inputs;
  std::vector<Edge> input_edges;
  for (const Tensor& t : input_tensors) {
    if (!t.requires_grad()) return RuntimeErr("One of the differentiated Tensors does not require grad");
    input_edges.push_back(dispatcher.GradientEdge(t));
  }
  const bool pruned = !input_tensors.empty();

  // The graph reachable from the roots (every node once).
  std::vector<Node*> order;
  absl::flat_hash_map<Node*, std::shared_ptr<Node>> keep;  // holds every node while the pass runs
  {
    std::vector<Node*> stack;
    for (const Edge& e : root_edges) {
      if (e.valid() && keep.emplace(e.fn.get(), e.fn).second) stack.push_back(e.fn.get());
    }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      order.push_back(n);
      for (const Edge& e : n->next) {
        if (e.valid() && keep.emplace(e.fn.get(), e.fn).second) stack.push_back(e.fn.get());
      }
    }
  }
  // Which nodes must run: all, or (with inputs) those leading to an input.
  absl::flat_hash_set<Node*> targets;
  absl::flat_hash_map<Node*, std::vector<std::pair<uint32_t, size_t>>> captures;  // node -> (input_nr, input index)
  for (size_t i = 0; i < input_edges.size(); ++i) {
    targets.insert(input_edges[i].fn.get());
    captures[input_edges[i].fn.get()].emplace_back(input_edges[i].input_nr, i);
  }
  absl::flat_hash_set<Node*> needed;
  if (!pruned) {
    for (Node* n : order) needed.insert(n);
  } else {
    // Fixed point over the (acyclic) graph: a node is needed when it is a
    // target or one of its next nodes is needed.
    absl::flat_hash_map<Node*, int> state;  // 0 new, 1 visiting, 2 done
    for (Node* start : order) {
      if (state[start] == 2) continue;
      std::vector<std::pair<Node*, size_t>> st{{start, 0}};
      state[start] = 1;
      while (!st.empty()) {
        auto& [n, k] = st.back();
        if (k < n->next.size()) {
          Node* c = n->next[k++].fn.get();
          if (c != nullptr && state[c] == 0) {
            state[c] = 1;
            st.emplace_back(c, 0);
          }
          continue;
        }
        bool need = targets.contains(n);
        for (const Edge& e : n->next) need = need || (e.valid() && needed.contains(e.fn.get()));
        if (need) needed.insert(n);
        state[n] = 2;
        st.pop_back();
      }
    }
  }
  absl::flat_hash_map<Node*, int> deps;
  for (Node* n : order) {
    if (!needed.contains(n)) continue;
    for (const Edge& e : n->next) {
      if (e.valid() && needed.contains(e.fn.get())) ++deps[e.fn.get()];
    }
  }

  // Gradient buffers per node input (= the forward's outputs).
  absl::flat_hash_map<Node*, std::vector<Tensor>> buffers;
  auto add_to_buffer = [&](Node* n, uint32_t nr, Tensor g) -> absl::Status {
    std::vector<Tensor>& b = buffers[n];
    if (b.size() < n->output_metas.size()) b.resize(n->output_metas.size());
    if (nr >= b.size()) return InternalErr(absl::StrCat("gradient for input ", nr, " of ", n->name));
    if (!b[nr].defined()) {
      b[nr] = std::move(g);
    } else {
      TD_ASSIGN_OR_RETURN(b[nr], run("add.Tensor", {b[nr], g}, create_graph));
    }
    return absl::OkStatus();
  };
  for (size_t i = 0; i < root_edges.size(); ++i) {
    if (!root_edges[i].valid() || !needed.contains(root_edges[i].fn.get())) continue;
    TD_RETURN_IF_ERROR(add_to_buffer(root_edges[i].fn.get(), root_edges[i].input_nr, root_grads[i]));
  }

  auto cmp = [](Node* a, Node* b) { return a->seq < b->seq; };  // newest (largest seq) first
  std::priority_queue<Node*, std::vector<Node*>, decltype(cmp)> ready(cmp);
  for (Node* n : order) {
    if (needed.contains(n) && deps[n] == 0) ready.push(n);
  }

  std::vector<Tensor> captured(input_edges.size());
  absl::flat_hash_map<AutogradMeta*, std::shared_ptr<AutogradMeta>> changed;  // each identity once
  auto mark_changed = [&](const std::shared_ptr<AutogradMeta>& ag) {
    changed[ag.get()] = ag;
    if (create_graph) hooks.HoldGrad(ag);
  };
  // Sets or accumulates `ag`'s .grad (leaves: layout of the leaf; retained
  // non-leaves: a clone).
  auto accumulate = [&](const std::shared_ptr<AutogradMeta>& ag, const TensorMeta& like,
                        const Tensor& g) -> absl::Status {
    if (ag->grad == nullptr || !ag->grad->defined()) {
      Tensor fresh;
      TensorMeta m = like;
      m.dtype = g.meta.dtype;
      m.storage_offset = 0;
      if (!m.is_non_overlapping_and_dense()) m.strides = ContiguousStrides(m.sizes);
      TD_ASSIGN_OR_RETURN(int64_t need, m.StorageBytesNeeded());
      // As PyTorch's AccumulateGrad: without create_graph, a gradient that
      // nothing else refers to (no handle, saved tensor or other buffer shares
      // its storage) and that already has the layout .grad needs becomes
      // .grad itself, with no allocation and no copy.
      if (!create_graph && !g.failed() && g.storage != nullptr && g.storage.use_count() == 1 && !g.requires_grad() &&
          g.meta == m && g.storage->nbytes() == need) {
        fresh.meta = g.meta;
        fresh.storage = g.storage;
        fresh.ag = std::make_shared<AutogradMeta>();
        ag->grad = std::make_shared<Tensor>(std::move(fresh));
        mark_changed(ag);
        return absl::OkStatus();
      }
      if (has_kernel("copy_", m.device)) {
        const Backend* on = dispatcher.devices().Find(m.device);
        if (on == nullptr) return InternalErr(absl::StrCat("backward: no backend serves ", m.device.ToString()));
        TD_ASSIGN_OR_RETURN(fresh.storage, dispatcher.Allocate(*on, need, "backward"));
        fresh.meta = std::move(m);
        fresh.ag = std::make_shared<AutogradMeta>();
        TD_ASSIGN_OR_RETURN(fresh, run("copy_", {fresh, g}, create_graph));
      } else {
        TD_ASSIGN_OR_RETURN(fresh, run("clone", {g}, create_graph));
      }
      ag->grad = std::make_shared<Tensor>(std::move(fresh));
      mark_changed(ag);
      return absl::OkStatus();
    }
    Tensor& cur = *ag->grad;
    if (cur.failed()) return dispatcher.FailedInput(cur.error);
    // Without create_graph, into the .grad already there (as PyTorch's
    // AccumulateGrad under no grad mode), even when it requires grad (left by
    // an earlier create_graph backward): the same tensor, its history kept.
    if (!create_graph && has_kernel("add_.Tensor", cur.meta.device)) {
      TD_ASSIGN_OR_RETURN(Tensor unused, run("add_.Tensor", {cur, g}, false));
      (void)unused;
      return absl::OkStatus();
    }
    TD_ASSIGN_OR_RETURN(Tensor sum, run("add.Tensor", {cur, g}, create_graph));
    ag->grad = std::make_shared<Tensor>(std::move(sum));
    mark_changed(ag);
    return absl::OkStatus();
  };

  // Shape, device and dtype of a gradient for input slot `i` of `n`:
  // broadcast dims summed away, moved to the input's device (the ops that
  // cross devices, to.device and copy_, pass the gradient through as it
  // comes, as PyTorch's ToCopyBackward moves it back), cast to the input's
  // dtype.
  auto fit = [&](Node* n, size_t i, Tensor g) -> absl::StatusOr<Tensor> {
    const TensorMeta& want = n->input_metas[i];
    if (g.meta.sizes != want.sizes) {
      const int64_t gd = g.meta.dim(), wd = want.dim();
      bool ok = gd >= wd;
      Shape lead, keep_dims;
      for (int64_t d = 0; ok && d < gd; ++d) {
        if (d < gd - wd) {
          lead.push_back(d);
          continue;
        }
        const int64_t ws = want.sizes[d - (gd - wd)];
        if (ws == g.meta.sizes[d]) continue;
        if (ws == 1) {
          keep_dims.push_back(d);
        } else {
          ok = false;
        }
      }
      if (!ok) {
        return RuntimeErr(absl::StrCat("Function ", n->name, " returned an invalid gradient at index ", i, " - got ",
                                       ShapeToString(g.meta.sizes), " but expected shape compatible with ",
                                       ShapeToString(want.sizes)));
      }
      if (!keep_dims.empty()) {
        TD_ASSIGN_OR_RETURN(g, run("sum", {g, keep_dims, true}, create_graph));
      }
      if (!lead.empty()) {
        TD_ASSIGN_OR_RETURN(g, run("sum", {g, lead, false}, create_graph));
      }
      if (g.meta.sizes != want.sizes) {
        TD_ASSIGN_OR_RETURN(g, run("view", {g, want.sizes}, create_graph));
      }
    }
    if (g.meta.device != want.device) {
      TD_ASSIGN_OR_RETURN(g, run("to.device", {g, want.device}, create_graph));
    }
    if (g.meta.dtype != want.dtype && IsDifferentiableDtype(want.dtype)) {
      TD_ASSIGN_OR_RETURN(g, run("to.dtype", {g, want.dtype}, create_graph));
    }
    return g;
  };

  while (!ready.empty()) {
    if (hooks.Cancelled()) {
      return RuntimeErr("backward: the session is closing");
    }
    Node* n = ready.top();
    ready.pop();
    std::shared_ptr<Node> self = keep[n];
    std::vector<Tensor> grads = std::move(buffers[n]);
    buffers.erase(n);
    grads.resize(n->output_metas.size());

    // Hooks: retained grads of non-leaf outputs.
    for (auto& [nr, weak] : n->retained) {
      std::shared_ptr<AutogradMeta> ag = weak.lock();
      if (ag == nullptr || nr >= grads.size() || !grads[nr].defined() || ag->grad_fn.get() != n) continue;
      if (ag->grad == nullptr) {
        TD_ASSIGN_OR_RETURN(Tensor c, run("clone", {grads[nr]}, create_graph));
        ag->grad = std::make_shared<Tensor>(std::move(c));
      } else {
        TD_ASSIGN_OR_RETURN(Tensor c, run("add.Tensor", {*ag->grad, grads[nr]}, create_graph));
        ag->grad = std::make_shared<Tensor>(std::move(c));
      }
      mark_changed(ag);
    }
    bool captured_only = false;
    if (auto it = captures.find(n); it != captures.end()) {
      for (auto [nr, idx] : it->second) {
        if (nr < grads.size() && grads[nr].defined()) {
          if (!captured[idx].defined()) {
            captured[idx] = grads[nr];
          } else {
            TD_ASSIGN_OR_RETURN(captured[idx], run("add.Tensor", {captured[idx], grads[nr]}, create_graph));
          }
        }
      }
      // A node where gradients are only captured runs only when it leads
      // on to another input (grad(): a leaf's gradient is returned, not
      // accumulated; backward(inputs=) does accumulate into a leaf).
      bool leads_on = false;
      for (const Edge& e : n->next) leads_on = leads_on || (e.valid() && needed.contains(e.fn.get()));
      if (!leads_on && (grad_mode || n->kind != Node::Kind::kAccumulate)) captured_only = true;
    }
    bool any = false;
    for (const Tensor& g : grads) any = any || g.defined();

    std::vector<Tensor> in_grads;
    if (any && !captured_only) {
      switch (n->kind) {
        case Node::Kind::kAccumulate:
          // As PyTorch's AccumulateGrad: a leaf that took part in an
          // in-place op since is no leaf any more (an error), and one that no
          // longer requires grad (requires_grad_(False) after forward) gets
          // no .grad.
          if (n->leaf_moved || (n->leaf != nullptr && n->leaf->grad_fn != nullptr)) {
            return RuntimeErr("leaf variable has been moved into the graph interior");
          }
          if (n->leaf != nullptr && n->leaf->requires_grad) {
            TD_RETURN_IF_ERROR(accumulate(n->leaf, n->leaf_meta, grads[0]));
          }
          break;
        case Node::Kind::kOp: {
          FormulaFn f = n->op != nullptr ? FindFormula(*n->op) : nullptr;
          if (f == nullptr) {
            return NotImplementedErr(absl::StrCat("the derivative for '",
                                                  n->op != nullptr ? n->op->full_name() : n->name,
                                                  "' is not implemented"));
          }
          OpRunnerFn runner = [&dispatcher, create_graph](absl::string_view name, std::vector<Arg> args) {
            return dispatcher.RunOp(name, std::move(args), create_graph);
          };
          FormulaContext ctx(n, self, grads, std::move(runner));
          ctx.set_extension_ops(dispatcher.extension_ops());
          in_grads = f(ctx);
          TD_RETURN_IF_ERROR(ctx.status());  // a freed or modified saved tensor, a failed op
          if (CheckSavedReads()) TD_RETURN_IF_ERROR(CompareSavedReads(*n, ctx.reads()));
          if (in_grads.size() != n->next.size()) {
            return InternalErr(absl::StrCat(n->name, ": the formula returned ", in_grads.size(),
                                            " gradients for ", n->next.size(), " inputs"));
          }
          break;
        }
        case Node::Kind::kFunction: {
          TD_ASSIGN_OR_RETURN(in_grads, hooks.CallFunction(*n, self, grads, create_graph));
          break;
        }
      }
    }
    if (!retain_graph && n->kind != Node::Kind::kAccumulate) {  // kFunction: its ctx's saved tensors
      n->released = true;
      for (SavedTensor& s : n->saved_inputs) {
        s.data.storage.reset();
        s.data.ag.reset();
        s.live.reset();
      }
      for (SavedTensor& s : n->saved_outputs) s.data.storage.reset();
    }
    for (size_t i = 0; i < n->next.size(); ++i) {
      const Edge& e = n->next[i];
      if (!e.valid() || !needed.contains(e.fn.get())) continue;
      if (i < in_grads.size() && in_grads[i].defined()) {
        TD_ASSIGN_OR_RETURN(Tensor g, fit(n, i, std::move(in_grads[i])));
        TD_RETURN_IF_ERROR(add_to_buffer(e.fn.get(), e.input_nr, std::move(g)));
      }
      if (--deps[e.fn.get()] == 0) ready.push(e.fn.get());
    }
  }

  if (grad_mode) {
    for (const Tensor& g : captured) {
      if (!g.defined() && !plan.allow_unused) {
        return RuntimeErr("One of the differentiated Tensors appears to not have been used in the graph. "
                          "Set allow_unused=True if this is the desired behavior.");
      }
    }
    result->captured = std::move(captured);
    return absl::OkStatus();
  }
  // backward(inputs=) on non-leaf inputs: their .grad accumulates too.
  for (size_t i = 0; i < captured.size(); ++i) {
    const Tensor& t = input_tensors[i];
    if (captured[i].defined() && t.ag != nullptr && !t.ag->is_leaf()) {
      TD_RETURN_IF_ERROR(accumulate(t.ag, t.meta, captured[i]));
    }
  }
  result->changed.reserve(changed.size());
  for (auto& [ptr, ag] : changed) result->changed.push_back(std::move(ag));
  return absl::OkStatus();
}

}  // namespace tensord::runtime
