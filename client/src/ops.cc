// Op calls: a call bound against the op table (op_binding.cc), its meta
// function run locally, then meta tensors or a call streamed to the session,
// with autograd's records (op_autograd.cc); a repeated call is answered by
// the meta cache (meta_cache.cc). Also the default device of factories.
#include "tensord/client/ops.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "autograd_internal.h"
#include "ops_internal.h"
#include "tensord/client/session.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/op_table.h"
#include "tensord/meta/schema.h"

namespace tensord::client {

void CountMetaOp();  // session.cc

namespace internal {

absl::StatusOr<std::shared_ptr<Session>> SessionFor(const OpEntry& op, absl::Span<const Tensor> tensors) {
  std::shared_ptr<Session> s;
  for (const Tensor& t : tensors) {
    if (t.is_meta()) continue;
    if (s == nullptr) {
      s = t.session();
    } else if (t.session() != s) {
      return RuntimeErr(absl::StrCat(op.full_name(), ": tensors belong to different sessions (",
                                     s->label(), " and ", t.session()->label(),
                                     "); a tensor can only be used in the session that created it"));
    }
  }
  if (s != nullptr) {
    if (s->closed()) {
      return RuntimeErr(absl::StrCat(op.full_name(), ": ", s->label(),
                                     " is closed; its tensors can no longer be used"));
    }
    return s;
  }
  return CurrentSession();
}

std::vector<Tensor> MakeMetaTensors(absl::Span<TensorMeta> metas,
                                    const std::vector<std::optional<Tensor>>& write_results) {
  std::vector<Tensor> out;
  out.reserve(metas.size());
  for (size_t i = 0; i < metas.size(); ++i) {
    if (i < write_results.size() && write_results[i].has_value()) {
      out.push_back(*write_results[i]);  // an in-place op returns self
    } else {
      out.emplace_back(std::make_shared<TensorImpl>(nullptr, 0, std::move(metas[i])));
    }
  }
  CountMetaOp();
  return out;
}

absl::StatusOr<std::vector<Tensor>> Produce(const OpEntry& op, const CallRoles& roles,
                                            const std::vector<int>& alias_of, absl::Span<TensorMeta> outputs,
                                            bool on_meta, absl::Span<const Value> values,
                                            absl::Span<const Tensor> tensors, CallSite& site) {
  // A conversion that changes nothing (`to` to the same dtype and device
  // without copy=True, `contiguous` of a contiguous tensor) gives back `self`
  // itself, as PyTorch's: no call, no node, a leaf stays that leaf.
  // The name is compared last: most calls are no view of their self.
  if (alias_of.size() == 1 && alias_of[0] == 0 && outputs.size() == 1 && roles.alias_base.size() == 1 &&
      roles.alias_base[0] != nullptr && (op.name() == "to" || op.name() == "contiguous") &&
      outputs[0] == roles.alias_base[0]->impl()->meta) {
    return std::vector<Tensor>{*roles.alias_base[0]};
  }
  TD_ASSIGN_OR_RETURN(AutogradPlan plan, PlanAutograd(op, roles));
  std::vector<Tensor> outs;
  if (on_meta) {
    outs = MakeMetaTensors(outputs, plan.write_results);
  } else {
    // The call leaves for the daemon (may block): a deferred site (Python)
    // is named now. A C++ file:line site is left as it is: the session
    // interns it by file and line without building its text.
    if (site.source != nullptr) site.Resolve();
    TD_ASSIGN_OR_RETURN(std::shared_ptr<Session> s, SessionFor(op, tensors));
    TD_ASSIGN_OR_RETURN(outs, s->EnqueueCall(op, values, tensors, outputs, site, plan.record,
                                             plan.write_results));
  }
  // Meta and daemon graphs alike: the client's walk of backward (meta, and
  // a daemon's predicted backward) checks what each node reads.
  for (const Tensor* w : roles.written) {
    if (w != nullptr) ++*internal::VersionCounter(*w->impl());  // an in-place write, as the daemon's storage version
  }
  if (plan.record) PlanMetaSavedReads(op, roles, outs, plan);
  ShareStorageIds(roles, outs);
  ApplyAutograd(op, plan, alias_of, outs);
  return outs;
}

}  // namespace internal

using internal::ApplyAutograd;
using internal::AutogradPlan;
using internal::Bound;
using internal::CallRoles;
using internal::Convert;
using internal::Converted;
using internal::PlanAutograd;
using internal::PlanMetaSavedReads;
using internal::Produce;
using internal::Resolve;
using internal::Roles;
using internal::SessionFor;

namespace {

thread_local std::vector<Device> t_device_stack;
std::atomic<bool> g_force_meta{false};  // ForceMetaDevice (tensord check)

// A real tensor on `device` with `t`'s sizes, dtype and (when t is dense)
// strides: empty() of the sizes in memory order, permuted back.
absl::StatusOr<Tensor> Placeholder(const Tensor& t, Device device, const CallSite& site) {
  Shape perm(t.dim());
  std::iota(perm.begin(), perm.end(), 0);
  if (t.meta().is_non_overlapping_and_dense()) {
    std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return t.strides()[a] > t.strides()[b]; });
  }
  Shape sizes;
  for (int64_t p : perm) sizes.push_back(t.sizes()[p]);
  TD_ASSIGN_OR_RETURN(Tensor e, Call1("empty", {sizes}, {{"dtype", t.dtype()}, {"device", device}},
                                      CallMode::kFunction, site));
  Shape pos(t.dim());
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) {
    pos[perm[i]] = static_cast<int64_t>(i);
    identity &= perm[i] == static_cast<int64_t>(i);
  }
  if (identity) return e;
  return Call1("permute", {e, pos}, {}, CallMode::kAny, site);
}

absl::StatusOr<Arg> MaterializeMeta(const Arg& a, Device device, const CallSite& site) {
  if (a.kind() == Arg::kTensor && a.tensors()[0].has_value() && a.tensors()[0]->defined() &&
      a.tensors()[0]->is_meta()) {
    TD_ASSIGN_OR_RETURN(Tensor p, Placeholder(*a.tensors()[0], device, site));
    return Arg(p);
  }
  return a;
}

// Runs the meta function of a resolved call (no streaming). Used by Call
// and by compositions that need a prediction.
absl::StatusOr<MetaResult> PredictMeta(const Bound& b) { return OpTable::Get().RunMeta(*b.op, b.values); }

}  // namespace

// ---------------------------------------------------------------- devices

void ForceMetaDevice() { g_force_meta.store(true, std::memory_order_relaxed); }
bool MetaDeviceForced() { return g_force_meta.load(std::memory_order_relaxed); }

DeviceGuard::DeviceGuard(Device device) { PushDefaultDevice(device); }
DeviceGuard::~DeviceGuard() { PopDefaultDevice(); }
void PushDefaultDevice(Device device) { t_device_stack.push_back(device); }
void PopDefaultDevice() {
  if (!t_device_stack.empty()) t_device_stack.pop_back();
}
std::optional<Device> DefaultDevice() {
  if (t_device_stack.empty()) return std::nullopt;
  return t_device_stack.back();
}

// ---------------------------------------------------------------- Call

absl::StatusOr<std::vector<Tensor>> Call(absl::string_view name, std::vector<Arg> args, Kwargs kwargs, CallMode mode,
                                         CallSite site) {
  // A repeated call is answered from the meta cache (and, for daemon
  // tensors, streamed); otherwise the key (when the call can be cached) is
  // kept to store the result.
  std::optional<internal::MetaCacheKey> cache_key;
  const std::vector<Device>& device_stack = t_device_stack;
  if (std::optional<absl::StatusOr<std::vector<Tensor>>> hit = internal::CallFromMetaCache(
          name, args, kwargs, mode, g_force_meta.load(std::memory_order_relaxed),
          device_stack.empty() ? nullptr : &device_stack.back(), site, &cache_key)) {
    return *std::move(hit);
  }
  TD_ASSIGN_OR_RETURN(Converted c, Convert(name, args, kwargs));
  TD_ASSIGN_OR_RETURN(Bound b, Resolve(name, c, mode));
  const OpEntry& op = *b.op;

  // Factories without device= follow the innermost DeviceGuard; under
  // ForceMetaDevice every device= argument (factories, *_like, to) is meta.
  if (const int d = op.schema.ArgIndex("device"); d >= 0) {
    if (g_force_meta.load(std::memory_order_relaxed)) {
      if (!b.values[d].is_none() || op.has(kFactory)) b.values[d] = Value(kMetaDevice);
    } else if (op.has(kFactory) && b.values[d].is_none()) {
      if (std::optional<Device> dev = DefaultDevice()) b.values[d] = Value(*dev);
    }
  }
  bool any_meta_input = false, any_real_input = false;
  for (const Tensor& t : c.tensors) (t.is_meta() ? any_meta_input : any_real_input) = true;

  if (op.has(kDataDependent) && any_real_input && !any_meta_input) {
    // Output shapes depend on values: validate, then let the daemon say.
    TD_RETURN_IF_ERROR(ValidateArgs(op.schema, b.values));
    TD_ASSIGN_OR_RETURN(CallRoles roles, Roles(op, b.values, c.tensors, {}));
    TD_ASSIGN_OR_RETURN(AutogradPlan plan, PlanAutograd(op, roles));
    site.Resolve();  // the call leaves for the daemon (may block)
    TD_ASSIGN_OR_RETURN(std::shared_ptr<Session> s, SessionFor(op, c.tensors));
    TD_ASSIGN_OR_RETURN(std::vector<Tensor> outs, s->CallDataDependent(op, b.values, c.tensors, site, plan.record));
    if (plan.record) PlanMetaSavedReads(op, roles, outs, plan);
    ApplyAutograd(op, plan, {}, outs);
    return outs;
  }

  TD_ASSIGN_OR_RETURN(MetaResult r, PredictMeta(b));
  const bool all_meta_outputs =
      std::all_of(r.outputs.begin(), r.outputs.end(), [](const TensorMeta& m) { return m.device.is_meta(); });
  if (all_meta_outputs) {
    TD_ASSIGN_OR_RETURN(CallRoles roles, Roles(op, b.values, c.tensors, r.alias_of));
    if (cache_key.has_value()) internal::RememberMetaCall(std::move(*cache_key), op, r, roles, c.tensors);
    return Produce(op, roles, r.alias_of, absl::MakeSpan(r.outputs), /*on_meta=*/true, {}, {}, site);
  }
  if (any_meta_input) {
    const TensorMeta& real = *std::find_if(r.outputs.begin(), r.outputs.end(),
                                           [](const TensorMeta& m) { return !m.device.is_meta(); });
    if (!op.has(kFactory) && op.schema.ArgIndex("device") >= 0) {
      // A *_like op reads only its input's metadata (empty_like(t,
      // device="cpu") of a meta t): the daemon gets a real placeholder with
      // the same sizes, strides and dtype, made without data.
      site.Resolve();
      for (Arg& a : args) {
        TD_ASSIGN_OR_RETURN(a, MaterializeMeta(a, real.device, site));
      }
      for (auto& kv : kwargs) {
        TD_ASSIGN_OR_RETURN(kv.second, MaterializeMeta(kv.second, real.device, site));
      }
      return Call(name, std::move(args), std::move(kwargs), mode, std::move(site));
    }
    return TwoDevicesError(op.full_name(), kMetaDevice, real.device);
  }
  TD_ASSIGN_OR_RETURN(CallRoles roles, Roles(op, b.values, c.tensors, r.alias_of));
  if (cache_key.has_value()) {
    internal::RememberMetaCall(std::move(*cache_key), op, r, roles, c.tensors, &b.values);
  }
  return Produce(op, roles, r.alias_of, absl::MakeSpan(r.outputs), /*on_meta=*/false, b.values, c.tensors, site);
}

absl::StatusOr<Tensor> Call1(absl::string_view name, std::vector<Arg> args, Kwargs kwargs, CallMode mode,
                             CallSite site) {
  TD_ASSIGN_OR_RETURN(std::vector<Tensor> out, Call(name, std::move(args), std::move(kwargs), mode, std::move(site)));
  if (out.size() != 1) {
    return InternalErr(absl::StrCat(name, " returned ", out.size(), " tensors; Call1 expects exactly one"));
  }
  return std::move(out[0]);
}

}  // namespace tensord::client
