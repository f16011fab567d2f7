// The session's autograd requests (SetRequiresGrad, RetainGrad, SetGrad,
// GetGrad, RecordFunction, Backward): their handles looked up, the runtime's
// engine run on them (runtime/engine.h), the client called back for
// user-defined functions, and the answers written.
#include <algorithm>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tensord/meta/autograd_rules.h"
#include "tensord/meta/errors.h"
#include "tensord/runtime/engine.h"
#include "tensord/runtime/log.h"
#include "tensord/server/session.h"
#include "tensord/wire/wire.h"

namespace tensord::server {

using runtime::Log;
using runtime::LogLevel;

void Session::AddReleasedFunctions(v1::Ack* ack) {
  for (uint64_t id : released_functions_->Take()) ack->add_released_functions(id);
  shm_freed_->TakeInto(ack->mutable_shm_freed());  // as cheap, and on the same replies
}

// ---------------------------------------------------------- autograd requests

void Session::ExecuteSetRequiresGrad(const v1::SetRequiresGrad& r) {
  for (uint64_t h : r.handles()) {
    Tensor* t = handles_.Find(h);
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
  Tensor* t = handles_.Find(r.handle());
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
  Tensor* t = handles_.Find(r.handle());
  if (t == nullptr) {
    RecordError(UnknownHandle("grad setter", r.handle()), "grad", 0, "");
    return;
  }
  if (t->ag == nullptr) t->ag = std::make_shared<AutogradMeta>();
  if (r.grad() == 0) {
    t->ag->grad.reset();
    return;
  }
  Tensor* g = handles_.Find(r.grad());
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
  Tensor* t = handles_.Find(r.handle());
  std::shared_ptr<OpError> err;
  if (t == nullptr) {
    err = RecordError(UnknownHandle("grad", r.handle()), "grad", 0, "");
  } else if (t->ag == nullptr || t->ag->grad == nullptr) {
    err = RecordError(RuntimeErr(absl::StrCat("grad: tensor handle ", r.handle(), " has no .grad (it is None)")),
                      "grad", 0, "");
  } else if (absl::Status s = handles_.Charge(1, HandleTable::EntryBytes(t->ag->grad->meta), "grad"); !s.ok()) {
    err = RecordError(std::move(s), "grad", 0, "");
  } else {
    Tensor grad = *t->ag->grad;
    grad.charge.reset();  // its entry is charged above
    handles_.Insert(r.output(), std::move(grad));
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
    Tensor* t = handles_.Find(h);
    if (t == nullptr) return fail(UnknownHandle(what, h));
    ins.push_back(t);
  }
  std::vector<Tensor*> outs;
  for (uint64_t h : r.outputs()) {
    Tensor* t = handles_.Find(h);
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
    Tensor* t = handles_.Find(h);
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
    Tensor* t = handles_.Find(r.expect_grad_changed(i));
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
  const bool grad_mode = !r.accumulate();
  if (grad_mode && r.roots_size() > 0 && r.inputs_size() > 0) {
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

  // The plan: the request's handles looked up in this session's table.
  runtime::BackwardPlan plan;
  plan.accumulate = r.accumulate();
  plan.create_graph = r.create_graph();
  plan.retain_graph = r.retain_graph();
  plan.allow_unused = r.allow_unused();
  plan.root_grads_given = static_cast<size_t>(r.grad_roots_size());
  for (int i = 0; i < r.roots_size(); ++i) {
    Tensor* t = handles_.Find(r.roots(i));
    if (t == nullptr) return UnknownHandle("backward", r.roots(i));
    plan.roots.push_back(*t);
    Tensor g;
    if (const uint64_t gh = i < r.grad_roots_size() ? r.grad_roots(i) : 0; gh != 0) {
      Tensor* gt = handles_.Find(gh);
      if (gt == nullptr) return UnknownHandle("backward", gh);
      g = *gt;
    }
    plan.root_grads.push_back(std::move(g));
  }
  for (int i = 0; i < r.inputs_size(); ++i) {
    Tensor* t = handles_.Find(r.inputs(i));
    if (t == nullptr) return UnknownHandle(grad_mode ? "grad" : "backward", r.inputs(i));
    plan.inputs.push_back(*t);
  }

  // What the engine asks of the session (a local class: it may call the
  // session's private members, as this function does).
  class Hooks final : public runtime::BackwardHooks {
   public:
    Hooks(Session* s, const v1::Backward& r, bool* stream_ok) : s_(s), r_(r), stream_ok_(stream_ok) {}
    absl::StatusOr<std::vector<Tensor>> CallFunction(Node& node, const std::shared_ptr<Node>& self,
                                                    const std::vector<Tensor>& grads, bool create_graph) override {
      s_->mu_.AssertHeld();  // the engine runs on the request's thread, under the session's lock
      if (r_.predicted()) {
        return RuntimeErr(absl::StrCat("backward: ", node.name, " is a user-defined Function, whose backward "
                                       "runs in the client: this backward cannot be predicted"));
      }
      return s_->CallBack(node, self, grads, create_graph, stream_ok_);
    }
    bool Cancelled() override { return s_->closing_.load(std::memory_order_relaxed); }
    void HoldGrad(const std::shared_ptr<AutogradMeta>& ag) override {
      s_->mu_.AssertHeld();
      s_->HoldGradLocked(ag);
    }

   private:
    Session* const s_;
    const v1::Backward& r_;
    bool* const stream_ok_;
  };
  Hooks hooks(this, r, stream_ok);
  runtime::BackwardResult result;
  TD_RETURN_IF_ERROR(runtime::RunBackward(dispatcher_, plan, hooks, &result));

  if (grad_mode) {
    // Each captured gradient becomes a table entry under the client's
    // output handle.
    size_t defined = 0;
    int64_t bytes = 0;
    for (const Tensor& g : result.captured) {
      if (!g.defined()) continue;
      ++defined;
      bytes += HandleTable::EntryBytes(g.meta);
    }
    TD_RETURN_IF_ERROR(handles_.Charge(defined, bytes, "autograd.grad"));
    for (size_t i = 0; i < result.captured.size(); ++i) {
      if (!result.captured[i].defined()) {
        ack->add_defined(false);
        continue;
      }
      Tensor g = std::move(result.captured[i]);
      if (g.ag == nullptr) g.ag = std::make_shared<AutogradMeta>();
      ack->add_defined(true);
      wire::ToProto(g.meta, ack->add_metas());
      ack->add_grad_requires_grad(g.requires_grad());
      handles_.Insert(r.outputs(static_cast<int>(i)), std::move(g));
    }
    return absl::OkStatus();
  }
  // The handles whose .grad changed, in handle order, with the new metas.
  if (!result.changed.empty()) {
    absl::flat_hash_set<const AutogradMeta*> changed;
    for (const std::shared_ptr<AutogradMeta>& ag : result.changed) changed.insert(ag.get());
    std::vector<uint64_t> handles;
    for (const auto& [h, t] : handles_.entries()) {
      if (t.ag != nullptr && changed.contains(t.ag.get())) handles.push_back(h);
    }
    std::sort(handles.begin(), handles.end());
    for (uint64_t h : handles) {
      const Tensor& t = *handles_.Find(h);
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
  // Daemon handles skip those a client took for an upload in progress.
  const std::function<bool(uint64_t)> uploading = [this](uint64_t h) {
    mu_.AssertHeld();
    return Uploading(h);
  };
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
    const uint64_t h = handles_.NewDaemonHandle(uploading);
    cb->add_grads(h);
    wire::ToProto(g.meta, cb->add_metas());
    cb->add_requires_grad(g.requires_grad());
    // Each grad and saved tensor the client is handed is a charged entry.
    TD_RETURN_IF_ERROR(handles_.Charge(1, HandleTable::EntryBytes(g.meta), node.name));
    handles_.Insert(h, std::move(g));
  }
  for (Tensor& t : unpacked) {
    if (!t.defined()) {
      cb->add_saved(0);
      continue;
    }
    if (t.ag == nullptr) t.ag = std::make_shared<AutogradMeta>();
    const uint64_t h = handles_.NewDaemonHandle(uploading);
    cb->add_saved(h);
    wire::ToProto(t.meta, cb->add_saved_metas());
    cb->add_saved_requires_grad(t.requires_grad());
    TD_RETURN_IF_ERROR(handles_.Charge(1, HandleTable::EntryBytes(t.meta), node.name));
    handles_.Insert(h, std::move(t));
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

void Session::HoldGradLocked(const std::shared_ptr<AutogradMeta>& ag) {
  grad_holders_.push_back(ag);
  // Amortized: the list stays within twice its live, distinct entries
  // however often a client sets the same .grad.
  if (grad_holders_.size() < 2 * grad_holders_pruned_ + 64) return;
  absl::flat_hash_set<const AutogradMeta*> seen;
  grad_holders_.erase(std::remove_if(grad_holders_.begin(), grad_holders_.end(),
                                     [&seen](const std::weak_ptr<AutogradMeta>& w) {
                                       std::shared_ptr<AutogradMeta> p = w.lock();
                                       return p == nullptr || !seen.insert(p.get()).second;
                                     }),
                      grad_holders_.end());
  grad_holders_pruned_ = grad_holders_.size();
}

}  // namespace tensord::server
