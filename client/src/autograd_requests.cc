// The autograd requests: requires_grad, retain_grad and .grad bindings,
// seeds and user-defined Function records streamed in the batch; backward
// and autograd.grad (RunBackward, a round trip that runs the daemon's
// BackwardCallbacks while it waits), and the predicted backward, streamed
// without a wait.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "autograd_internal.h"
#include "session_impl.h"
#include "tensord/client/autograd.h"
#include "tensord/meta/errors.h"
#include "tensord/wire/wire.h"

namespace tensord::client {
namespace {

// Function ids whose daemon node is gone (Ack.released_functions of every
// session), until TakeReleasedFunctions.
struct ReleasedFunctions {
  absl::Mutex mu;
  std::vector<uint64_t> ids ABSL_GUARDED_BY(mu);
};
ReleasedFunctions& Released() {
  static ReleasedFunctions* r = new ReleasedFunctions();
  return *r;
}

// The process-wide BackwardCallback handler.
struct HandlerSlot {
  absl::Mutex mu;
  BackwardCallbackHandler handler ABSL_GUARDED_BY(mu);
};
HandlerSlot& Handler() {
  static HandlerSlot* h = new HandlerSlot();
  return *h;
}

std::shared_ptr<TensorImpl> MakeEngineTensor(std::shared_ptr<Session> s, uint64_t handle, TensorMeta meta,
                                             bool requires_grad) {
  auto impl = std::make_shared<TensorImpl>(std::move(s), handle, std::move(meta));
  impl->requires_grad = requires_grad;
  if (requires_grad) impl->grad_fn = internal::EngineResultNode();
  return impl;
}

}  // namespace

namespace internal {

void NoteReleasedFunctions(const google::protobuf::RepeatedField<uint64_t>& ids) {
  ReleasedFunctions& r = Released();
  absl::MutexLock rl(&r.mu);
  r.ids.insert(r.ids.end(), ids.begin(), ids.end());
}

}  // namespace internal

absl::Status Session::SendSetRequiresGrad(uint64_t handle, bool requires_grad, const CallSite& site) {
  Impl& im = *impl_;
  absl::MutexLock l(&im.mu);
  TD_RETURN_IF_ERROR(im.Usable());
  v1::SetRequiresGrad* r = im.pending->add_requests()->mutable_set_requires_grad();
  r->add_handles(handle);
  r->set_requires_grad(requires_grad);
  r->set_call_id(im.next_call_id++);
  r->set_call_site(site.Text());
  return im.MaybeFlushLocked();
}

absl::Status Session::SendRetainGrad(uint64_t handle) {
  Impl& im = *impl_;
  absl::MutexLock l(&im.mu);
  TD_RETURN_IF_ERROR(im.Usable());
  im.pending->add_requests()->mutable_retain_grad()->set_handle(handle);
  return im.MaybeFlushLocked();
}

absl::Status Session::SendSetGrad(uint64_t handle, uint64_t grad) {
  Impl& im = *impl_;
  absl::MutexLock l(&im.mu);
  TD_RETURN_IF_ERROR(im.Usable());
  v1::SetGrad* r = im.pending->add_requests()->mutable_set_grad();
  r->set_handle(handle);
  r->set_grad(grad);
  return im.MaybeFlushLocked();
}

absl::StatusOr<Tensor> Session::BindGrad(uint64_t handle, const TensorMeta& meta) {
  Impl& im = *impl_;
  uint64_t out = 0;
  {
    absl::MutexLock l(&im.mu);
    TD_RETURN_IF_ERROR(im.Usable());
    out = im.next_handle++;
    v1::GetGrad* r = im.pending->add_requests()->mutable_get_grad();
    r->set_handle(handle);
    r->set_output(out);
    TD_RETURN_IF_ERROR(im.MaybeFlushLocked());
  }
  return Tensor(std::make_shared<TensorImpl>(shared_from_this(), out, meta));
}

absl::Status Session::SendManualSeed(uint64_t seed) {
  Impl& im = *impl_;
  absl::MutexLock l(&im.mu);
  TD_RETURN_IF_ERROR(im.Usable());
  im.pending->add_requests()->mutable_manual_seed()->set_seed(seed);
  return im.MaybeFlushLocked();
}

absl::Status Session::SendMathMode(const MathMode& mode) {
  Impl& im = *impl_;
  absl::MutexLock l(&im.mu);
  TD_RETURN_IF_ERROR(im.Usable());
  v1::SetMathMode* r = im.pending->add_requests()->mutable_set_math_mode();
  r->set_matmul_allow_tf32(mode.matmul_allow_tf32);
  r->set_conv_allow_tf32(mode.conv_allow_tf32);
  return im.MaybeFlushLocked();
}

absl::Status Session::SendRecordFunction(uint64_t function_id, const std::string& name,
                                         const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs,
                                         const std::vector<bool>& non_differentiable,
                                         const std::vector<uint64_t>& dirty, bool materialize_grads,
                                         const std::vector<uint64_t>& saved, const CallSite& site) {
  Impl& im = *impl_;
  absl::MutexLock l(&im.mu);
  TD_RETURN_IF_ERROR(im.Usable());
  v1::RecordFunction* r = im.pending->add_requests()->mutable_record_function();
  r->set_call_id(im.next_call_id++);
  r->set_function_id(function_id);
  r->set_name(name);
  r->mutable_inputs()->Add(inputs.begin(), inputs.end());
  r->mutable_outputs()->Add(outputs.begin(), outputs.end());
  for (bool b : non_differentiable) r->add_non_differentiable(b);
  r->mutable_dirty()->Add(dirty.begin(), dirty.end());
  r->set_materialize_grads(materialize_grads);
  r->mutable_saved()->Add(saved.begin(), saved.end());
  r->set_call_site(site.Text());
  return im.MaybeFlushLocked();
}

void Session::RegisterGradTarget(const std::shared_ptr<TensorImpl>& impl) {
  if (impl == nullptr || impl->handle == 0) return;
  absl::MutexLock gl(&impl_->grad_mu);
  impl_->grad_targets[impl->handle] = impl;
  impl_->any_grad_targets.store(true, std::memory_order_release);
}

void Session::RunCallback(const void* callback_message) {
  const v1::BackwardCallback& cb = *static_cast<const v1::BackwardCallback*>(callback_message);
  BackwardCallbackRequest req;
  req.callback_id = cb.callback_id();
  req.function_id = cb.function_id();
  req.create_graph = cb.create_graph();
  // Grads and saved tensors arrive the same way: one handle per slot (0 for
  // None), metas and requires_grad flags for the non-zero ones, in order.
  auto decode = [&](const auto& handles, const auto& metas, const auto& requires_grad, absl::string_view what,
                    std::vector<std::optional<Tensor>>* out) -> absl::Status {
    int k = 0;
    for (uint64_t h : handles) {
      if (h == 0) {
        out->emplace_back(std::nullopt);
        continue;
      }
      if (k >= metas.size()) {
        return InternalErr(absl::StrCat("the daemon's backward callback ", cb.callback_id(), " has ", metas.size(),
                                        " metas for more ", what, "s"));
      }
      TD_ASSIGN_OR_RETURN(TensorMeta m, wire::FromProto(metas[k], absl::StrCat("backward callback ", what)));
      const bool rg = k < requires_grad.size() && requires_grad[k];
      out->emplace_back(Tensor(MakeEngineTensor(shared_from_this(), h, std::move(m), rg)));
      ++k;
    }
    return absl::OkStatus();
  };
  absl::Status bad = decode(cb.grads(), cb.metas(), cb.requires_grad(), "gradient", &req.grads);
  if (bad.ok()) bad = decode(cb.saved(), cb.saved_metas(), cb.saved_requires_grad(), "saved tensor", &req.saved);
  BackwardCallbackHandler handler;
  {
    HandlerSlot& slot = Handler();
    absl::MutexLock l(&slot.mu);
    handler = slot.handler;
  }
  absl::StatusOr<std::vector<std::optional<Tensor>>> r;
  if (!bad.ok()) {
    r = bad;
  } else if (!handler) {
    r = RuntimeErr(absl::StrCat("the daemon asked for the backward of function ", cb.function_id(),
                                " but no backward callback handler is registered in this client"));
  } else {
    const bool previous = IsGradEnabled();
    SetGradEnabled(cb.create_graph());
    r = handler(req);
    SetGradEnabled(previous);
  }
  v1::Request out;
  v1::CallbackResult* cr = out.mutable_callback_result();
  cr->set_callback_id(cb.callback_id());
  if (r.ok()) {
    for (const std::optional<Tensor>& g : *r) {
      if (!g.has_value() || !g->defined()) {
        cr->add_grads(0);
      } else if (g->is_meta() || g->session().get() != this) {
        r = RuntimeErr(absl::StrCat("the backward of function ", cb.function_id(),
                                    " returned a gradient that is not a tensor of this session (",
                                    g->ToString(), ")"));
        break;
      } else {
        cr->add_grads(g->handle());
      }
    }
  }
  if (!r.ok()) {
    cr->clear_grads();
    wire::ToProto(r.status(), "", 0, "", cr->mutable_error());
  }
  Impl& im = *impl_;
  absl::MutexLock l(&im.mu);
  if (!im.Usable().ok()) return;
  *im.pending->add_requests() = std::move(out);
  im.FlushLocked().IgnoreError();  // a lost stream fails the waiting backward
  // `r` (holding the returned gradients) is destroyed after the flush: their
  // releases travel in a later message, after the daemon took them.
}

namespace {

// A Backward's roots and their given gradients (0: ones).
void AddRoots(const std::vector<Tensor>& roots, const std::vector<std::optional<Tensor>>& grad_roots,
              v1::Backward* b) {
  for (size_t i = 0; i < roots.size(); ++i) {
    b->add_roots(roots[i].handle());
    const bool given = i < grad_roots.size() && grad_roots[i].has_value() && grad_roots[i]->defined();
    b->add_grad_roots(given ? grad_roots[i]->handle() : 0);
  }
}

// The daemon holds a new .grad of `meta` for `impl`: the cached one is
// dropped and the next .grad access binds it (Tensor::Grad).
void MarkGradPending(TensorImpl& impl, TensorMeta meta, bool requires_grad) {
  impl.grad.reset();
  impl.grad_pending = true;
  impl.grad_meta = std::move(meta);
  impl.grad_requires_grad = requires_grad;
}

}  // namespace

absl::StatusOr<std::vector<std::optional<Tensor>>> Session::RunBackward(
    const std::vector<Tensor>& roots, const std::vector<std::optional<Tensor>>& grad_roots,
    const std::vector<Tensor>& inputs, bool retain_graph, bool create_graph, bool accumulate, bool allow_unused,
    const CallSite& site) {
  Impl& im = *impl_;
  Impl::Sent backward;
  std::vector<uint64_t> out_handles;
  {
    absl::MutexLock l(&im.mu);
    TD_RETURN_IF_ERROR(im.Usable());
    ++im.stats.round_trips;
    TD_ASSIGN_OR_RETURN(backward, im.SendForReplyLocked([&](uint64_t id, internal::Waiter&) {
      v1::Backward* b = im.pending->add_requests()->mutable_backward();
      b->set_request_id(id);
      AddRoots(roots, grad_roots, b);
      for (const Tensor& t : inputs) {
        b->add_inputs(t.handle());
        if (!accumulate) {
          out_handles.push_back(im.next_handle++);
          b->add_outputs(out_handles.back());
        }
      }
      b->set_retain_graph(retain_graph);
      b->set_create_graph(create_graph);
      b->set_accumulate(accumulate);
      b->set_allow_unused(allow_unused);
      b->set_call_site(site.Text());
    }));
  }
  while (std::optional<v1::BackwardCallback> cb = im.WaitOrCallback(backward)) RunCallback(&*cb);
  im.Forget(backward);
  TD_RETURN_IF_ERROR(backward.waiter->status);
  const v1::Ack& ack = backward.waiter->ack;
  if (ack.errors_size() > 0) {
    absl::Status first = wire::FromProto(ack.errors(0));
    if (ack.errors_size() > 1) {
      first = MakeError(KindOf(first), absl::StrCat(first.message(), " (and ", ack.errors_size() - 1, " more error",
                                                    ack.errors_size() > 2 ? "s" : "", ")"));
    }
    return first;
  }
  std::vector<std::optional<Tensor>> results;
  if (accumulate) {
    for (int i = 0; i < ack.grad_changed_size(); ++i) {
      if (i >= ack.grad_metas_size()) return InternalErr("the daemon's backward Ack lacks grad metas");
      TD_ASSIGN_OR_RETURN(TensorMeta m, wire::FromProto(ack.grad_metas(i), "grad"));
      std::shared_ptr<TensorImpl> impl;
      {
        absl::MutexLock gl(&im.grad_mu);
        auto it = im.grad_targets.find(ack.grad_changed(i));
        if (it != im.grad_targets.end()) impl = it->second.lock();
      }
      if (impl == nullptr) continue;
      MarkGradPending(*impl, std::move(m), i < ack.grad_requires_grad_size() && ack.grad_requires_grad(i));
    }
    return results;
  }
  int k = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const bool defined = static_cast<int>(i) < ack.defined_size() && ack.defined(static_cast<int>(i));
    if (!defined) {
      results.emplace_back(std::nullopt);
      continue;
    }
    if (k >= ack.metas_size()) return InternalErr("the daemon's grad Ack lacks metas");
    TD_ASSIGN_OR_RETURN(TensorMeta m, wire::FromProto(ack.metas(k), "grad"));
    const bool rg = k < ack.grad_requires_grad_size() && ack.grad_requires_grad(k);
    results.emplace_back(Tensor(MakeEngineTensor(shared_from_this(), out_handles[i], std::move(m), rg)));
    ++k;
  }
  return results;
}

absl::Status Session::SendPredictedBackward(const std::vector<Tensor>& roots,
                                            const std::vector<std::optional<Tensor>>& grad_roots,
                                            const std::vector<Tensor>& inputs, bool retain_graph,
                                            std::vector<std::pair<std::shared_ptr<TensorImpl>, TensorMeta>> expect,
                                            const CallSite& site) {
  Impl& im = *impl_;
  std::sort(expect.begin(), expect.end(), [](const auto& a, const auto& b) { return a.first->handle < b.first->handle; });
  {
    absl::MutexLock l(&im.mu);
    TD_RETURN_IF_ERROR(im.Usable());
    // Released leaves leave the daemon before its walk, so that it sets a
    // .grad only where the client still holds the tensor, as predicted.
    im.AppendReleasesLocked();
    v1::Backward* b = im.pending->add_requests()->mutable_backward();
    AddRoots(roots, grad_roots, b);
    for (const Tensor& t : inputs) b->add_inputs(t.handle());
    b->set_retain_graph(retain_graph);
    b->set_accumulate(true);
    b->set_allow_unused(true);
    b->set_call_site(site.Text());
    b->set_predicted(true);
    for (const auto& [impl, meta] : expect) {
      b->add_expect_grad_changed(impl->handle);
      wire::ToProto(meta, b->add_expect_grad_metas());
    }
    ++im.stats.predicted_backwards;
    TD_RETURN_IF_ERROR(im.FlushLocked());
  }
  for (auto& [impl, meta] : expect) MarkGradPending(*impl, std::move(meta), /*requires_grad=*/false);
  return absl::OkStatus();
}

bool Session::predicts_backward() const { return predict_backward_; }

void SetBackwardCallbackHandler(BackwardCallbackHandler handler) {
  HandlerSlot& slot = Handler();
  absl::MutexLock l(&slot.mu);
  slot.handler = std::move(handler);
}

std::vector<uint64_t> TakeReleasedFunctions() {
  ReleasedFunctions& r = Released();
  absl::MutexLock l(&r.mu);
  std::vector<uint64_t> out;
  out.swap(r.ids);
  return out;
}

}  // namespace tensord::client
