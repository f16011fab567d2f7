// The session's autograd half: recording nodes as ops run, the autograd
// requests (SetRequiresGrad, RetainGrad, SetGrad, GetGrad, RecordFunction,
// Backward) and the engine that runs a backward pass, calling the client back
// for user-defined functions.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <limits>
#include <queue>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tensord/meta/autograd_rules.h"
#include "tensord/meta/errors.h"
#include "tensord/runtime/log.h"
#include "tensord/server/session.h"
#include "tensord/wire/wire.h"

namespace tensord::server {

using runtime::Log;
using runtime::LogLevel;

namespace {

constexpr uint64_t kDaemonHandleBit = uint64_t{1} << 63;


// TENSORD_CHECK_SAVED_READS=1 (the tests set it): every formula run is
// compared with the saved-reads table (tensord/meta/autograd_rules.h), which
// the client's meta-mode backward relies on.
bool CheckSavedReads() {
  static const bool on = [] {
    const char* v = std::getenv("TENSORD_CHECK_SAVED_READS");
    return v != nullptr && v[0] != '\0' && std::string(v) != "0";
  }();
  return on;
}

// InternalErr naming the op and both lists when the formula of `n` read other
// saved tensors than the table predicts.
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
                                  str(actual), " but the saved-reads table (meta/src/autograd_rules.cc) predicts ",
                                  str(predicted), " (input slots needing a gradient: ", absl::StrJoin(needs, ""),
                                  ")"));
}

}  // namespace

Tensor* Session::FindTensor(uint64_t handle) {
  auto it = tensors_.find(handle);
  return it == tensors_.end() ? nullptr : &it->second;
}

void Session::AddReleasedFunctions(v1::Ack* ack) {
  for (uint64_t id : released_functions_->Take()) ack->add_released_functions(id);
  shm_freed_->TakeInto(ack->mutable_shm_freed());  // as cheap, and on the same replies
}

// ---------------------------------------------------------- autograd requests

void Session::ExecuteSetRequiresGrad(const v1::SetRequiresGrad& r) {
  for (uint64_t h : r.handles()) {
    Tensor* t = FindTensor(h);
    if (t == nullptr) {
      RecordError(UnknownHandle("requires_grad_", h), "requires_grad_", r.call_id(), r.call_site());
      continue;
    }
    if (t->failed()) continue;  // the tensor's own error is reported already
    if (t->ag == nullptr) t->ag = std::make_shared<AutogradMeta>();
    if (!t->ag->is_leaf()) {
      if (r.requires_grad()) continue;  // a non-leaf requires grad already: nothing to change
      RecordError(RuntimeErr(absl::StrCat(
                      "you can only change requires_grad flags of leaf variables. If you want to use a computed "
                      "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach(). "
                      "(handle ",
                      h, ")")),
                  "requires_grad_", r.call_id(), r.call_site());
      continue;
    }
    if (r.requires_grad() && !IsDifferentiableDtype(t->meta.dtype)) {
      RecordError(RuntimeErr(absl::StrCat("only Tensors of floating point and complex dtype can require gradients "
                                          "(handle ",
                                          h, " has dtype ", DtypeName(t->meta.dtype), ")")),
                  "requires_grad_", r.call_id(), r.call_site());
      continue;
    }
    t->ag->requires_grad = r.requires_grad();
  }
}

void Session::ExecuteRetainGrad(const v1::RetainGrad& r) {
  Tensor* t = FindTensor(r.handle());
  if (t == nullptr) {
    RecordError(UnknownHandle("retain_grad", r.handle()), "retain_grad", 0, "");
    return;
  }
  if (t->failed()) return;
  if (!t->requires_grad()) {
    RecordError(RuntimeErr("can't retain_grad on Tensor that has requires_grad=False"), "retain_grad", 0, "");
    return;
  }
  if (t->ag->is_leaf() || t->ag->retains_grad) return;  // leaves keep their .grad anyway
  t->ag->retains_grad = true;
  t->ag->grad_fn->retained.emplace_back(t->ag->output_nr, t->ag);
}

void Session::ExecuteSetGrad(const v1::SetGrad& r) {
  Tensor* t = FindTensor(r.handle());
  if (t == nullptr) {
    RecordError(UnknownHandle("grad setter", r.handle()), "grad", 0, "");
    return;
  }
  if (t->ag == nullptr) t->ag = std::make_shared<AutogradMeta>();
  if (r.grad() == 0) {
    t->ag->grad.reset();
    return;
  }
  Tensor* g = FindTensor(r.grad());
  if (g == nullptr) {
    RecordError(UnknownHandle("grad setter", r.grad()), "grad", 0, "");
    return;
  }
  if (g->failed()) {
    RecordError(AsCause(g->error), "grad", 0, "");
    return;
  }
  if (g->meta.dtype != t->meta.dtype) {
    RecordError(RuntimeErr(absl::StrCat("assigned grad has data of a different type (", DtypeName(g->meta.dtype),
                                        " for a tensor of ", DtypeName(t->meta.dtype), ")")),
                "grad", 0, "");
    return;
  }
  if (g->meta.sizes != t->meta.sizes) {
    RecordError(RuntimeErr(absl::StrCat("assigned grad has data of a different size (", ShapeToString(g->meta.sizes),
                                        " for a tensor of ", ShapeToString(t->meta.sizes), ")")),
                "grad", 0, "");
    return;
  }
  if (g->ag == nullptr) g->ag = std::make_shared<AutogradMeta>();
  t->ag->grad = std::make_shared<Tensor>(*g);
  if (g->requires_grad()) HoldGradLocked(t->ag);
}

void Session::ExecuteGetGrad(const v1::GetGrad& r) {
  if (absl::Status s = CheckNewHandle(r.output()); !s.ok()) {
    RecordError(RuntimeErr(absl::StrCat("grad: output handle: ", s.message())), "grad", 0, "");
    return;
  }
  Tensor* t = FindTensor(r.handle());
  std::shared_ptr<OpError> err;
  if (t == nullptr) {
    err = RecordError(UnknownHandle("grad", r.handle()), "grad", 0, "");
  } else if (t->ag == nullptr || t->ag->grad == nullptr) {
    err = RecordError(RuntimeErr(absl::StrCat("grad: tensor handle ", r.handle(), " has no .grad (it is None)")),
                      "grad", 0, "");
  } else if (absl::Status s = ChargeEntriesLocked(1, EntryBytes(t->ag->grad->meta), "grad"); !s.ok()) {
    err = RecordError(std::move(s), "grad", 0, "");
  } else {
    Tensor grad = *t->ag->grad;
    grad.charge.reset();  // its entry is charged above
    tensors_.emplace(r.output(), std::move(grad));
    return;
  }
  InsertFailed(r.output(), nullptr, err);
}

void Session::ExecuteRecordFunction(const v1::RecordFunction& r) {
  const std::string what = absl::StrCat(r.name().empty() ? "Function" : r.name(), " (function ", r.function_id(), ")");
  auto fail = [&](absl::Status s) {
    released_functions_->Add(r.function_id());
    RecordError(std::move(s), what, r.call_id(), r.call_site());
  };
  std::vector<Tensor*> ins;
  for (uint64_t h : r.inputs()) {
    if (h == 0) {
      ins.push_back(nullptr);
      continue;
    }
    Tensor* t = FindTensor(h);
    if (t == nullptr) return fail(UnknownHandle(what, h));
    ins.push_back(t);
  }
  std::vector<Tensor*> outs;
  for (uint64_t h : r.outputs()) {
    Tensor* t = FindTensor(h);
    if (t == nullptr) return fail(UnknownHandle(what, h));
    if (t->failed()) return fail(AsCause(t->error));
    if (t->ag == nullptr) t->ag = std::make_shared<AutogradMeta>();
    outs.push_back(t);
  }
  if (r.non_differentiable_size() != 0 && r.non_differentiable_size() != r.outputs_size()) {
    return fail(RuntimeErr(absl::StrCat(what, ": non_differentiable has ", r.non_differentiable_size(),
                                        " entries for ", r.outputs_size(), " outputs")));
  }
  // ctx.save_for_backward's tensors (nullptr: None).
  std::vector<Tensor*> saved;
  for (uint64_t h : r.saved()) {
    if (h == 0) {
      saved.push_back(nullptr);
      continue;
    }
    Tensor* t = FindTensor(h);
    if (t == nullptr) return fail(UnknownHandle(absl::StrCat(what, " saved tensor"), h));
    if (t->failed()) return fail(AsCause(t->error));
    saved.push_back(t);
  }
  bool any = false;
  for (Tensor* t : ins) any = any || (t != nullptr && t->requires_grad());
  if (!any) {
    released_functions_->Add(r.function_id());  // no node: the client may drop the ctx now
    return;
  }
  absl::flat_hash_set<uint64_t> dirty(r.dirty().begin(), r.dirty().end());
  auto node = std::make_shared<Node>(Node::Kind::kFunction, dispatcher_.NextNodeSeq(),
                                     r.name().empty() ? "FunctionBackward" : r.name());
  // Charged before anything points at the node (or it reports its function
  // released), as an op's.
  int64_t bytes = NodeFixedBytes() + static_cast<int64_t>(r.name().size());
  for (const Tensor* t : ins) bytes += NodeInputBytes(t != nullptr ? t->meta : TensorMeta());
  for (const Tensor* t : outs) bytes += NodeOutputBytes(t->meta);
  for (const Tensor* t : saved) bytes += NodeOutputBytes(t != nullptr ? t->meta : TensorMeta());
  if (absl::Status s = node->charge.Add(memory_, bytes, absl::StrCat(what, "'s autograd graph node")); !s.ok()) {
    return fail(std::move(s));
  }
  node->function_id = r.function_id();
  node->materialize_grads = r.materialize_grads();
  node->released_sink = released_functions_;
  for (size_t i = 0; i < ins.size(); ++i) {
    Tensor* t = ins[i];
    node->next.push_back(t != nullptr && t->requires_grad() ? dispatcher_.GradientEdge(*t) : Edge{});
    node->input_metas.push_back(t != nullptr ? t->meta : TensorMeta());
    node->input_present.push_back(t != nullptr);
  }
  for (int i = 0; i < r.outputs_size(); ++i) {
    Tensor* t = outs[i];
    const bool nd = r.non_differentiable_size() > 0 && r.non_differentiable(i);
    const bool d = !nd && IsDifferentiableDtype(t->meta.dtype);
    node->output_metas.push_back(t->meta);
    node->output_differentiable.push_back(d);
    if (!d) {
      // A non-differentiable output of a function does not require grad.
      if (!dirty.contains(r.outputs(i))) {
        t->ag = std::make_shared<AutogradMeta>();
      }
      continue;
    }
    if (t->ag->is_leaf() && t->ag->requires_grad && !dirty.contains(r.outputs(i))) {
      // An input returned as is: PyTorch returns a view of it; here it keeps its identity.
      continue;
    }
    LeafMovesIntoTheGraph(*t->ag);
    t->ag->grad_fn = node;
    t->ag->output_nr = static_cast<uint32_t>(i);
    t->ag->requires_grad = false;
    if (t->ag->retains_grad) node->retained.emplace_back(static_cast<uint32_t>(i), t->ag);
  }
  // The saved tensors live in saved_inputs (in ctx order; an undefined entry
  // is None). An output of this node is kept without its identity (no
  // cycle) and gets the node back as grad_fn when unpacked, like a built-in
  // node's saved outputs.
  node->saved_inputs.reserve(saved.size());
  for (Tensor* t : saved) {
    SavedTensor s;
    if (t != nullptr) {
      s.data.meta = t->meta;
      s.data.storage = t->storage;
      s.version = t->storage != nullptr ? t->storage->version() : 0;
      if (t->ag != nullptr && t->ag->grad_fn == node) {
        s.is_output = true;
        s.output_differentiable = true;
        s.output_nr = t->ag->output_nr;
      } else {
        SaveIdentity(t->ag, &s);
        if (t->ag != nullptr && t->ag->grad_fn != nullptr) {
          s.grad_fn_name = t->ag->grad_fn->name;
          s.output_nr = t->ag->output_nr;
        }
      }
    }
    node->saved_inputs.push_back(std::move(s));
  }
}

// ------------------------------------------------------------------ backward

bool Session::ExecutePredictedBackward(const v1::Backward& r) {
  v1::Ack ack;  // filled as for an answered backward, then compared, never sent
  bool stream_ok = true;
  absl::Status s = r.accumulate() ? RunBackward(r, &ack, &stream_ok)
                                  : RuntimeErr("backward: only backward() (accumulate) can be predicted, not grad()");
  if (!stream_ok) return false;
  if (s.ok()) {
    // The client already gave these .grad tensors their metadata: a
    // difference is a bug in its walk, which must not pass silently.
    std::string diff;
    if (ack.grad_changed_size() != r.expect_grad_changed_size() ||
        r.expect_grad_metas_size() != r.expect_grad_changed_size()) {
      diff = absl::StrCat(ack.grad_changed_size(), " tensors got a new .grad, the client expected ",
                          r.expect_grad_changed_size());
    }
    for (int i = 0; diff.empty() && i < ack.grad_changed_size(); ++i) {
      if (ack.grad_changed(i) != r.expect_grad_changed(i)) {
        diff = absl::StrCat("handle ", ack.grad_changed(i), " got a new .grad, the client expected handle ",
                            r.expect_grad_changed(i));
      } else {
        absl::StatusOr<TensorMeta> got = wire::FromProto(ack.grad_metas(i), "grad");
        absl::StatusOr<TensorMeta> want = wire::FromProto(r.expect_grad_metas(i), "expected grad");
        if (!want.ok()) {
          diff = std::string(want.status().message());
        } else if (!got.ok() || !(*got == *want)) {
          diff = absl::StrCat("the new .grad of handle ", ack.grad_changed(i), " is ",
                              got.ok() ? got->ToString() : "unreadable", ", the client expected ", want->ToString());
        }
      }
    }
    if (diff.empty()) return true;
    s = InternalErr(absl::StrCat("backward: the client's prediction of the gradients differs from the daemon's: ",
                                 diff, " (please report this; the .grad tensors hold this error)"));
  }
  // The error is the session's, reported at the next sync point; each .grad
  // the client expects holds it too, so that what uses it fails with it.
  std::shared_ptr<OpError> err = RecordError(std::move(s), "backward", 0, r.call_site());
  err->cause = std::exchange(backward_cause_, nullptr);
  for (int i = 0; i < r.expect_grad_changed_size() && i < r.expect_grad_metas_size(); ++i) {
    Tensor* t = FindTensor(r.expect_grad_changed(i));
    if (t == nullptr || t->ag == nullptr) continue;
    auto failed = std::make_shared<Tensor>();
    absl::StatusOr<TensorMeta> m = wire::FromProto(r.expect_grad_metas(i), "grad");
    if (m.ok()) failed->meta = *std::move(m);
    failed->error = err;
    failed->ag = std::make_shared<AutogradMeta>();
    t->ag->grad = std::move(failed);
  }
  return true;
}

bool Session::ExecuteBackward(const v1::Backward& r) {
  if (r.predicted()) return ExecutePredictedBackward(r);
  v1::ServerMessage msg;
  v1::Ack* ack = msg.mutable_ack();
  ack->set_request_id(r.request_id());
  bool stream_ok = true;
  absl::Status s = RunBackward(r, ack, &stream_ok);
  if (!stream_ok) return false;
  if (!s.ok()) {
    // Nothing of a failed backward is reported as done; outputs fail.
    ack->clear_grad_changed();
    ack->clear_grad_metas();
    ack->clear_grad_requires_grad();
    ack->clear_defined();
    ack->clear_metas();
    OpError e;
    e.status = s;
    e.op = r.accumulate() ? "backward" : "grad";
    e.call_site = r.call_site();
    ToProto(e, ack->add_errors());
    auto shared = std::make_shared<OpError>(e);
    shared->reported = true;
    for (uint64_t h : r.outputs()) {
      if (CheckNewHandle(h).ok()) InsertFailed(h, nullptr, shared);
    }
  }
  AddReleasedFunctions(ack);
  return (*write_)(msg);
}

absl::Status Session::RunBackward(const v1::Backward& r, v1::Ack* ack, bool* stream_ok) {
  backward_cause_ = nullptr;
  const bool create_graph = r.create_graph();
  const bool retain_graph = r.retain_graph() || create_graph;
  const bool grad_mode = !r.accumulate();
  // Whether op `name` has a kernel on `device` (a test's table may lack one).
  auto has_kernel = [&](absl::string_view name, const Device& device) {
    const OpEntry* op = OpTable::Get().Find(name);
    const Backend* on = devices_->Find(device);
    return op != nullptr && on != nullptr && on->FindKernel(op->id) != nullptr;
  };
  auto run = [&](absl::string_view name, std::vector<Arg> args, bool record) -> absl::StatusOr<Tensor> {
    TD_ASSIGN_OR_RETURN(std::vector<Tensor> o, dispatcher_.RunOp(name, std::move(args), record));
    if (o.empty()) return InternalErr(absl::StrCat(name, " returned no tensor"));
    return std::move(o[0]);
  };

  if (r.roots_size() == 0) return RuntimeErr("grad requires non-empty inputs: no tensors to differentiate were given");
  if (grad_mode && r.inputs_size() == 0) return RuntimeErr("grad requires non-empty inputs.");
  if (grad_mode) {
    absl::flat_hash_set<uint64_t> seen;
    for (uint64_t h : r.outputs()) {
      if (absl::Status s = CheckNewHandle(h); !s.ok() || !seen.insert(h).second) {
        return RuntimeErr(absl::StrCat("grad: output handle ", h, " is not a fresh handle"));
      }
    }
    if (r.outputs_size() != r.inputs_size()) {
      return RuntimeErr(absl::StrCat("grad: ", r.inputs_size(), " inputs but ", r.outputs_size(), " output handles"));
    }
  }

  // Roots and their gradients: first the engine's checks (the client's
  // meta engine runs the same, tensord::CheckBackwardRoots), then implicit
  // gradients made and given ones cast to the root's dtype.
  std::vector<Tensor> roots;
  std::vector<Tensor> given;  // per root; undefined: implicit
  std::vector<BackwardRoot> checked;
  for (int i = 0; i < r.roots_size(); ++i) {
    Tensor* t = FindTensor(r.roots(i));
    if (t == nullptr) return UnknownHandle("backward", r.roots(i));
    if (t->failed()) return AsCause(t->error);
    roots.push_back(*t);
    Tensor g;
    if (const uint64_t gh = i < r.grad_roots_size() ? r.grad_roots(i) : 0; gh != 0) {
      Tensor* gt = FindTensor(gh);
      if (gt == nullptr) return UnknownHandle("backward", gh);
      if (gt->failed()) return AsCause(gt->error);
      g = *gt;
    }
    given.push_back(std::move(g));
  }
  for (size_t i = 0; i < roots.size(); ++i) {
    checked.push_back(BackwardRoot{&roots[i].meta, roots[i].requires_grad(),
                                   given[i].defined() ? &given[i].meta : nullptr});
  }
  TD_RETURN_IF_ERROR(CheckBackwardRoots(checked, static_cast<size_t>(r.grad_roots_size())));
  std::vector<Edge> root_edges;
  std::vector<Tensor> root_grads;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    Tensor g = std::move(given[i]);
    if (!g.defined()) {
      TD_ASSIGN_OR_RETURN(g, run("ones_like", {root}, false));
    } else if (g.meta.dtype != root.meta.dtype) {
      TD_ASSIGN_OR_RETURN(g, run("to.dtype", {g, root.meta.dtype}, create_graph));
    }
    root_edges.push_back(dispatcher_.GradientEdge(root));
    root_grads.push_back(std::move(g));
  }

  // Inputs: where gradients are captured (grad) or the only ones accumulated.
  struct Capture {
    Node* node;
    uint32_t nr;
  };
  std::vector<Tensor> input_tensors;
  std::vector<Edge> input_edges;
  for (int i = 0; i < r.inputs_size(); ++i) {
    Tensor* t = FindTensor(r.inputs(i));
    if (t == nullptr) return UnknownHandle(grad_mode ? "grad" : "backward", r.inputs(i));
    if (t->failed()) return AsCause(t->error);
    if (!t->requires_grad()) return RuntimeErr("One of the differentiated Tensors does not require grad");
    input_tensors.push_back(*t);
    input_edges.push_back(dispatcher_.GradientEdge(*t));
  }
  const bool pruned = r.inputs_size() > 0;

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
  absl::flat_hash_set<AutogradMeta*> changed;
  absl::flat_hash_map<AutogradMeta*, std::shared_ptr<AutogradMeta>> changed_keep;
  auto mark_changed = [&](const std::shared_ptr<AutogradMeta>& ag) {
    changed.insert(ag.get());
    changed_keep[ag.get()] = ag;
    if (create_graph) HoldGradLocked(ag);
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
        const Backend* on = devices_->Find(m.device);
        if (on == nullptr) return InternalErr(absl::StrCat("backward: no backend serves ", m.device.ToString()));
        TD_ASSIGN_OR_RETURN(fresh.storage, memory_->Allocate(on->allocator(), need, "backward"));
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
    if (cur.failed()) return AsCause(cur.error);
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

  // Shape and dtype of a gradient for input slot `i` of `n`: broadcast dims
  // summed away, cast to the input's dtype.
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
    if (g.meta.dtype != want.dtype && IsDifferentiableDtype(want.dtype)) {
      TD_ASSIGN_OR_RETURN(g, run("to.dtype", {g, want.dtype}, create_graph));
    }
    return g;
  };

  while (!ready.empty()) {
    if (closing_.load(std::memory_order_relaxed)) {
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
          OpRunnerFn runner = [this, create_graph](absl::string_view name, std::vector<Arg> args) {
            return dispatcher_.RunOp(name, std::move(args), create_graph);
          };
          FormulaContext ctx(n, self, grads, std::move(runner));
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
          if (r.predicted()) {
            return RuntimeErr(absl::StrCat("backward: ", n->name, " is a user-defined Function, whose backward "
                                           "runs in the client: this backward cannot be predicted"));
          }
          TD_ASSIGN_OR_RETURN(in_grads, CallBack(*n, self, grads, create_graph, stream_ok));
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
    for (size_t i = 0; i < captured.size(); ++i) {
      if (!captured[i].defined()) {
        if (!r.allow_unused()) {
          return RuntimeErr("One of the differentiated Tensors appears to not have been used in the graph. "
                            "Set allow_unused=True if this is the desired behavior.");
        }
      }
    }
    size_t defined = 0;
    int64_t bytes = 0;
    for (const Tensor& g : captured) {
      if (!g.defined()) continue;
      ++defined;
      bytes += EntryBytes(g.meta);
    }
    TD_RETURN_IF_ERROR(ChargeEntriesLocked(defined, bytes, "autograd.grad"));
    for (size_t i = 0; i < captured.size(); ++i) {
      if (!captured[i].defined()) {
        ack->add_defined(false);
        continue;
      }
      Tensor g = captured[i];
      if (g.ag == nullptr) g.ag = std::make_shared<AutogradMeta>();
      ack->add_defined(true);
      wire::ToProto(g.meta, ack->add_metas());
      ack->add_grad_requires_grad(g.requires_grad());
      tensors_.emplace(r.outputs(static_cast<int>(i)), std::move(g));
    }
    return absl::OkStatus();
  }
  // backward(inputs=) on non-leaf inputs: their .grad accumulates too.
  for (size_t i = 0; i < captured.size(); ++i) {
    const Tensor& t = input_tensors[i];
    if (captured[i].defined() && t.ag != nullptr && !t.ag->is_leaf()) {
      TD_RETURN_IF_ERROR(accumulate(t.ag, t.meta, captured[i]));
    }
  }
  if (!changed.empty()) {
    std::vector<uint64_t> handles;
    for (const auto& [h, t] : tensors_) {
      if (t.ag != nullptr && changed.contains(t.ag.get())) handles.push_back(h);
    }
    std::sort(handles.begin(), handles.end());
    for (uint64_t h : handles) {
      const Tensor& t = tensors_.at(h);
      ack->add_grad_changed(h);
      wire::ToProto(t.ag->grad->meta, ack->add_grad_metas());
      ack->add_grad_requires_grad(t.ag->grad->requires_grad());
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> Session::CallBack(Node& node, const std::shared_ptr<Node>& self,
                                                     const std::vector<Tensor>& grads, bool create_graph,
                                                     bool* stream_ok) {
  if (read_ == nullptr) {
    return InternalErr(absl::StrCat(node.name, ": no stream to call the client back on"));
  }
  // Unpack ctx's saved tensors first: a freed graph or a saved tensor
  // modified in place since forward fails the backward before the client runs.
  std::vector<Tensor> unpacked;
  if (node.released && !node.saved_inputs.empty()) return SavedTensorsFreedError();
  for (const SavedTensor& s : node.saved_inputs) {
    if (!s.data.defined()) {
      unpacked.emplace_back();  // None
      continue;
    }
    TD_ASSIGN_OR_RETURN(Tensor t, s.Unpack(self));  // a Function's saved outputs are differentiable
    unpacked.push_back(std::move(t));
  }
  v1::ServerMessage msg;
  v1::BackwardCallback* cb = msg.mutable_callback();
  const uint64_t id = ++next_callback_id_;
  cb->set_callback_id(id);
  cb->set_function_id(node.function_id);
  cb->set_create_graph(create_graph);
  for (size_t i = 0; i < node.output_metas.size(); ++i) {
    Tensor g = i < grads.size() ? grads[i] : Tensor();
    if (!g.defined() && node.materialize_grads) {
      TensorMeta m = node.output_metas[i];
      TD_ASSIGN_OR_RETURN(std::vector<Tensor> z, dispatcher_.RunOp("zeros", {m.sizes, m.dtype}, false));
      g = z[0];
    }
    if (!g.defined()) {
      cb->add_grads(0);
      continue;
    }
    if (g.ag == nullptr) g.ag = std::make_shared<AutogradMeta>();
    uint64_t h = kDaemonHandleBit | ++next_daemon_handle_;
    // A hostile client may have taken a daemon-style handle: skip it.
    while (tensors_.contains(h) || uploads_.contains(h)) h = kDaemonHandleBit | ++next_daemon_handle_;
    cb->add_grads(h);
    wire::ToProto(g.meta, cb->add_metas());
    cb->add_requires_grad(g.requires_grad());
    // Each grad and saved tensor the client is handed is a charged entry.
    TD_RETURN_IF_ERROR(ChargeEntriesLocked(1, EntryBytes(g.meta), node.name));
    tensors_.emplace(h, std::move(g));
  }
  for (Tensor& t : unpacked) {
    if (!t.defined()) {
      cb->add_saved(0);
      continue;
    }
    if (t.ag == nullptr) t.ag = std::make_shared<AutogradMeta>();
    uint64_t h = kDaemonHandleBit | ++next_daemon_handle_;
    while (tensors_.contains(h) || uploads_.contains(h)) h = kDaemonHandleBit | ++next_daemon_handle_;
    cb->add_saved(h);
    wire::ToProto(t.meta, cb->add_saved_metas());
    cb->add_saved_requires_grad(t.requires_grad());
    TD_RETURN_IF_ERROR(ChargeEntriesLocked(1, EntryBytes(t.meta), node.name));
    tensors_.emplace(h, std::move(t));
  }
  if (!(*write_)(msg)) {
    *stream_ok = false;
    return RuntimeErr("the stream ended during backward");
  }
  pending_callbacks_.push_back(id);
  // Execute the client's requests until the result arrives (a nested
  // backward's pump may receive it first and leave it in callback_results_).
  auto remove_pending = [this, id] {
    pending_callbacks_.erase(std::find(pending_callbacks_.begin(), pending_callbacks_.end(), id));
  };
  auto fail_stream = [&] {
    *stream_ok = false;
    remove_pending();
    callback_results_.erase(id);
    return RuntimeErr("the stream ended during backward");
  };
  v1::Request owned;
  while (!callback_results_.contains(id)) {
    // The rest of the current message first, then what was read since.
    const v1::Request* req = NextRequestLocked(&owned);
    if (req == nullptr) {
      v1::ClientMessage m;
      if (closed_ || !(*read_)(&m)) return fail_stream();
      for (v1::Request& r : *m.mutable_requests()) queue_.push_back(std::move(r));
      continue;
    }
    if (!ExecuteGuardedLocked(*req)) return fail_stream();
  }
  remove_pending();
  auto node_result = callback_results_.extract(id);
  std::unique_ptr<v1::CallbackResult> result =
      std::make_unique<v1::CallbackResult>(std::move(node_result.mapped().result));
  const std::vector<std::optional<Tensor>> result_grads = std::move(node_result.mapped().grads);

  if (result->has_error() && (!result->error().message().empty() || !result->error().kind().empty())) {
    return wire::FromProto(result->error());
  }
  if (static_cast<size_t>(result->grads_size()) != node.next.size()) {
    return RuntimeErr(absl::StrCat("function ", node.name, " returned an incorrect number of gradients (expected ",
                                   node.next.size(), ", got ", result->grads_size(), ")"));
  }
  std::vector<Tensor> out(node.next.size());
  for (int i = 0; i < result->grads_size(); ++i) {
    const uint64_t h = result->grads(i);
    if (h == 0 || !node.input_present[i]) continue;
    const Tensor* t = result_grads[i].has_value() ? &*result_grads[i] : nullptr;
    if (t == nullptr) return UnknownHandle(absl::StrCat(node.name, " backward result"), h);
    if (t->failed()) return AsCause(t->error);
    if (t->meta.sizes != node.input_metas[i].sizes) {
      // Broadcastable gradients are reduced by the engine; others fail there.
      const TensorMeta& want = node.input_metas[i];
      if (t->meta.dim() < want.dim()) {
        return RuntimeErr(absl::StrCat("Function ", node.name, " returned an invalid gradient at index ", i,
                                       " - got ", ShapeToString(t->meta.sizes),
                                       " but expected shape compatible with ", ShapeToString(want.sizes)));
      }
    }
    out[i] = *t;
  }
  return out;
}

}  // namespace tensord::server
