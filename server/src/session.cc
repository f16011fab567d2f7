// A session's requests, executed in order: its lifecycle, the execution
// loop, op calls (decoded here, run by the runtime's dispatcher), ops
// defined at run time, releases, syncs and describes. Uploads and fetches
// are in session_data.cc, the autograd requests in session_autograd.cc.
#include "tensord/server/session.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tensord/meta/autograd_rules.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/op_table.h"
#include "tensord/meta/schema.h"
#include "tensord/runtime/log.h"
#include "tensord/wire/copy.h"
#include "tensord/wire/data_frame.h"
#include "tensord/wire/wire.h"

namespace tensord::server {

using runtime::Log;
using runtime::LogLevel;

void ToProto(const OpError& e, v1::Error* out) { wire::ToProto(e.status, e.op, e.call_id, e.call_site, out); }

absl::Status WithOrigin(const OpError& e) {
  v1::Error w;
  ToProto(e, &w);
  return wire::FromProto(w);
}

absl::Status Session::AsCause(const std::shared_ptr<OpError>& e) {
  e->carried = true;
  if (backward_cause_ == nullptr) backward_cause_ = e;
  return WithOrigin(*e);
}

Session::Session(uint64_t id, std::string token, std::string client_name, std::shared_ptr<MemoryAccount> memory,
                 const Backends* devices, runtime::ArtifactStore* artifacts)
    : id_(id),
      token_(std::move(token)),
      client_name_(std::move(client_name)),
      memory_(std::move(memory)),
      devices_(devices),
      artifact_store_(artifacts),
      handles_(memory_),
      dispatcher_(devices, memory_) {
  dispatcher_.SetExtensionOps(&extensions_);
  dispatcher_.SetArtifactKernels([this](uint32_t op_id, DeviceType device) -> const runtime::ArtifactKernel* {
    mu_.AssertHeld();  // the dispatcher runs only under the session's lock
    const uint32_t i = op_id - kFirstExtensionOpId;
    if (op_id < kFirstExtensionOpId || i >= artifact_ops_.size() || artifact_ops_[i].first == nullptr) return nullptr;
    const auto [lib, index] = artifact_ops_[i];
    if (device != DeviceType::kCPU || artifact_store_->policy().isolation != runtime::ArtifactPolicy::Isolation::kProcess) {
      return lib->kernel(index, device);
    }
    // Process isolation: the session's own kernel, which sends the call to
    // the session's worker.
    if (!lib->declares_kernel(index, DeviceType::kCPU)) return nullptr;
    if (artifact_worker_ == nullptr) {
      artifact_worker_ = std::make_unique<runtime::ArtifactWorker>(artifact_store_, memory_);
      artifact_worker_->set_cancelled([this] { return closing_.load(std::memory_order_relaxed); });
    }
    if (isolated_kernels_.size() <= i) isolated_kernels_.resize(i + 1);
    if (isolated_kernels_[i] == nullptr) {
      auto k = std::make_unique<runtime::ArtifactKernel>();
      k->op_name = lib->op_name(index);
      k->worker = artifact_worker_.get();
      k->artifact = lib;
      k->op_index = index;
      isolated_kernels_[i] = std::move(k);
    }
    return isolated_kernels_[i].get();
  });
  // A formula's or the engine's op on a tensor that failed earlier fails
  // with that tensor's error, remembered as the cause of the backward's.
  dispatcher_.set_failed_input([this](const std::shared_ptr<OpError>& e) {
    mu_.AssertHeld();  // the dispatcher runs only under the session's lock
    return AsCause(e);
  });
}

Session::~Session() { Close(); }

bool Session::closed() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

SessionStats Session::stats() const {
  absl::MutexLock lock(&mu_);
  SessionStats s;
  s.bytes_in_use = memory_->bytes_in_use();
  s.bookkeeping_bytes = memory_->bookkeeping_bytes();
  s.peak_bytes = memory_->peak_bytes();
  s.ops_executed = ops_executed();
  s.live_handles = handles_.size();
  s.pending_uploads = uploads_.size();
  return s;
}

SessionStats Session::Close() {
  closing_.store(true, std::memory_order_relaxed);  // the executing thread lets go of mu_ soon
  mu_.Lock();
  return CloseLocked();
}

std::optional<SessionStats> Session::TryClose() {
  closing_.store(true, std::memory_order_seq_cst);  // the executing thread lets go of mu_ soon
  if (!mu_.TryLock()) {
    // Held for a request (which may run for minutes): not waited for. Held
    // for a moment by anything else (statistics, an upload's placement):
    // waited for; a message that starts meanwhile runs none of its requests
    // once closing_ is set.
    if (executing_.load(std::memory_order_seq_cst)) return std::nullopt;
    mu_.Lock();
  }
  return CloseLocked();
}

SessionStats Session::CloseLocked() {
  absl::node_hash_map<uint64_t, Tensor> tensors;
  absl::node_hash_map<uint64_t, PendingUpload> uploads;
  SessionStats s;
  {  // mu_ is held, from the caller
    closed_ = true;
    {
      absl::MutexLock sl(&shm_mu_);
      shm_closed_ = true;
      shm_.clear();  // unmapped here, or when a copy in flight lets go
    }
    tensors = handles_.TakeAll();
    uploads.swap(uploads_);
    dropped_uploads_.clear();
    unreported_.clear();
    queue_.clear();
    // A .grad made with create_graph can reach, through its graph, the
    // identity holding it: drop such grads so the cycle frees.
    for (auto& [h, t] : tensors) {
      if (t.ag != nullptr) t.ag->grad.reset();
    }
    for (const std::weak_ptr<AutogradMeta>& w : grad_holders_) {
      if (auto ag = w.lock()) ag->grad.reset();
    }
    grad_holders_.clear();
    // The worker process ends with the session (killed and reaped here).
    isolated_kernels_.clear();
    artifact_worker_.reset();
    s.ops_executed = ops_executed();
    if (!uploads.empty()) {
      Log(LogLevel::kWarning, "session ", absl::Hex(id_), ": ", uploads.size(),
          " upload(s) never completed; discarded");
    }
  }
  mu_.Unlock();
  // Storages are freed here, outside the lock.
  tensors.clear();
  uploads.clear();
  s.bytes_in_use = memory_->bytes_in_use();
  s.bookkeeping_bytes = memory_->bookkeeping_bytes();
  s.peak_bytes = memory_->peak_bytes();
  return s;
}

bool Session::Execute(const v1::Request& request, const Writer& write, const Reader& read) {
  v1::ClientMessage m;
  *m.add_requests() = request;
  return ExecuteMessage(m, write, read);
}

bool Session::ExecuteMessage(const v1::ClientMessage& message, const Writer& write, const Reader& read,
                             const DataWriter& write_data) {
  absl::MutexLock lock(&mu_);
  if (closed_) return false;
  executing_.store(true, std::memory_order_seq_cst);
  absl::Cleanup done = [this] { executing_.store(false, std::memory_order_relaxed); };
  const Writer* old_write = write_;
  const Reader* old_read = read_;
  const DataWriter* old_write_data = write_data_;
  write_ = &write;
  read_ = read ? &read : nullptr;
  write_data_ = write_data ? &write_data : nullptr;
  current_ = &message;  // never nested: mu_ is held for the whole message
  current_next_ = 0;
  const bool ok = DrainLocked();
  write_ = old_write;
  read_ = old_read;
  write_data_ = old_write_data;
  current_ = nullptr;
  placed_bytes_ = 0;  // used by this message's upload, if at all
  if (!ok) queue_.clear();
  return ok && !closed_;
}

const v1::Request* Session::NextRequestLocked(v1::Request* owned) {
  if (current_ != nullptr && current_next_ < current_->requests_size()) return &current_->requests(current_next_++);
  if (queue_.empty()) return nullptr;
  *owned = std::move(queue_.front());
  queue_.pop_front();
  return owned;
}

bool Session::ExecuteGuardedLocked(const v1::Request& request) {
  try {
    return ExecuteLocked(request);
  } catch (const std::bad_alloc&) {
    RecordError(OutOfMemoryErr("the daemon ran out of memory while executing a request"), "", 0, "");
  } catch (const std::exception& e) {
    RecordError(InternalErr(absl::StrCat("internal error while executing a request: ", e.what())), "", 0, "");
  } catch (...) {
    RecordError(InternalErr("internal error while executing a request"), "", 0, "");
  }
  return true;
}

bool Session::DrainLocked() {
  v1::Request owned;
  while (const v1::Request* request = NextRequestLocked(&owned)) {
    // (seq_cst, with executing_'s store: TryClose either sees this message
    // executing or this message sees closing_)
    if (closed_ || closing_.load(std::memory_order_seq_cst)) return false;
    if (!ExecuteGuardedLocked(*request)) return false;
  }
  return true;
}

bool Session::ExecuteLocked(const v1::Request& request) {
  const Writer& write = *write_;
  switch (request.kind_case()) {
    case v1::Request::kCall:
      ExecuteCall(request.call());
      return true;
    case v1::Request::kUpload:
      ExecuteUpload(request.upload());
      return true;
    case v1::Request::kRelease:
      ExecuteRelease(request.release());
      return true;
    case v1::Request::kFetch:
      return ExecuteFetch(request.fetch(), write);
    case v1::Request::kSync:
      return ExecuteSync(request.sync(), write);
    case v1::Request::kDescribe:
      return ExecuteDescribe(request.describe(), write);
    case v1::Request::kSetRequiresGrad:
      ExecuteSetRequiresGrad(request.set_requires_grad());
      return true;
    case v1::Request::kRetainGrad:
      ExecuteRetainGrad(request.retain_grad());
      return true;
    case v1::Request::kSetGrad:
      ExecuteSetGrad(request.set_grad());
      return true;
    case v1::Request::kGetGrad:
      ExecuteGetGrad(request.get_grad());
      return true;
    case v1::Request::kBackward:
      return ExecuteBackward(request.backward());
    case v1::Request::kRecordFunction:
      ExecuteRecordFunction(request.record_function());
      return true;
    case v1::Request::kCallbackResult: {
      const uint64_t id = request.callback_result().callback_id();
      if (pending_callbacks_.empty()) {
        RecordError(RuntimeErr(absl::StrCat("CallbackResult for callback ", id,
                                            ": no backward callback is waiting for a result")),
                    "backward", 0, "");
      } else if (std::find(pending_callbacks_.begin(), pending_callbacks_.end(), id) == pending_callbacks_.end() ||
                 callback_results_.contains(id)) {
        RecordError(RuntimeErr(absl::StrCat("CallbackResult for callback ", id, ": the daemon waits for callback",
                                            pending_callbacks_.size() == 1 ? " " : "s ",
                                            absl::StrJoin(pending_callbacks_, ", "),
                                            callback_results_.contains(id) ? " (and already has this one)" : "")),
                    "backward", 0, "");
      } else {
        ArrivedResult& arrived = callback_results_[id];
        arrived.result = request.callback_result();
        for (uint64_t h : arrived.result.grads()) {
          const Tensor* t = h == 0 ? nullptr : handles_.Find(h);
          arrived.grads.push_back(t == nullptr ? std::nullopt : std::optional<Tensor>(*t));
        }
      }
      return true;
    }
    case v1::Request::kManualSeed:
      dispatcher_.ManualSeed(request.manual_seed().seed());
      return true;
    case v1::Request::kSetMathMode: {
      MathMode mode;
      mode.matmul_allow_tf32 = request.set_math_mode().matmul_allow_tf32();
      mode.conv_allow_tf32 = request.set_math_mode().conv_allow_tf32();
      dispatcher_.SetMathMode(mode);
      return true;
    }
    case v1::Request::kDefineOps:
      ExecuteDefineOps(request.define_ops());
      return true;
    case v1::Request::kMemoryStats:
      return ExecuteMemoryStats(request.memory_stats(), write);
    case v1::Request::KIND_NOT_SET:
      break;
  }
  RecordError(RuntimeErr("malformed request: no request kind (call, upload, release, fetch, sync, describe, "
                         "memory_stats, autograd...) is set"),
              "request", 0, "");
  return true;
}

std::shared_ptr<OpError> Session::RecordError(absl::Status status, std::string op, uint64_t call_id,
                                              std::string call_site) {
  auto e = std::make_shared<OpError>();
  e->status = std::move(status);
  e->op = std::move(op);
  e->call_id = call_id;
  e->call_site = std::move(call_site);
  if (e->call_site.size() > kMaxCallSiteBytes) e->call_site.resize(kMaxCallSiteBytes);  // the list below is capped in count only
  Log(LogLevel::kDebug, "session ", absl::Hex(id_), ": ", e->op.empty() ? "request" : e->op, " (call ", call_id,
      "): ", e->status.message());
  if (unreported_.size() < kMaxUnreportedErrors) {
    unreported_.push_back(e);
  } else {
    ++dropped_errors_;
  }
  return e;
}

absl::Status Session::CheckNewHandle(uint64_t handle) const {
  if (handle == 0) return RuntimeErr("handle 0 is reserved (it stands for None) and cannot name a tensor");
  if (handles_.contains(handle)) {
    return RuntimeErr(absl::StrCat("handle ", handle, " is already in use in this session (handles are never reused)"));
  }
  if (Uploading(handle)) {
    return RuntimeErr(absl::StrCat("handle ", handle, " is being uploaded"));
  }
  return absl::OkStatus();
}

absl::Status Session::UnknownHandle(absl::string_view what, uint64_t handle) const {
  return RuntimeErr(absl::StrCat(what, ": unknown tensor handle ", handle,
                                 " (never created in this session, or already released)"));
}

void Session::InsertFailed(uint64_t handle, const TensorMeta* meta, std::shared_ptr<OpError> error) {
  if (handle == 0 || Uploading(handle)) return;
  const std::shared_ptr<OpError> origin = error;
  if (absl::Status s = handles_.InsertFailed(handle, meta, std::move(error)); !s.ok()) {
    RecordError(std::move(s), origin != nullptr ? origin->op : std::string(), origin != nullptr ? origin->call_id : 0,
                origin != nullptr ? origin->call_site : std::string());
  }
}

std::shared_ptr<OpError> Session::AbandonUpload(uint64_t handle, absl::string_view interrupted_by) {
  if (uploads_.empty()) return nullptr;
  auto it = uploads_.find(handle);
  if (it == uploads_.end()) return nullptr;
  PendingUpload up = std::move(it->second);
  uploads_.erase(it);
  auto err = RecordError(RuntimeErr(absl::StrCat("upload of handle ", handle, " is incomplete: received ",
                                                 up.received, " of ", up.total_bytes, " bytes before ",
                                                 interrupted_by, " used the handle")),
                         "upload", up.call_id, up.call_site);
  InsertFailed(handle, &up.meta, err);
  return err;
}

// ------------------------------------------------------------------ op calls

void Session::ExecuteCall(const v1::OpCall& call) {
  const OpTable& table = OpTable::Get();
  const OpEntry* op = call.op_id() < table.size() ? &table.at(call.op_id()) : extensions_.at_id(call.op_id());
  std::string name_scratch;
  if (op == nullptr) name_scratch = absl::StrCat("op ", call.op_id());
  const std::string& op_name = op != nullptr ? FullName(*op, name_scratch) : name_scratch;
  // An interned call site is defined once (its text then travels no more)
  // and looked up only for an error.
  // The text is cut to kMaxCallSiteBytes, and what the table keeps is
  // charged to the session (its 65,536 entries could otherwise hold
  // gigabytes that no limit counts); a site over the limit is not kept.
  const uint32_t site_id = call.call_site_id();
  const absl::string_view site_text = absl::string_view(call.call_site()).substr(0, kMaxCallSiteBytes);
  if (site_id != 0 && !site_text.empty() && site_id <= wire::kMaxCallSiteIds && site_id <= call_sites_.size() + 1) {
    const bool append = site_id == call_sites_.size() + 1;
    // Counted by capacity, and a redefined site gets a string of its own
    // size: assigning a short text into a long one would keep the long one's
    // memory while its charge went down.
    std::string text(site_text);
    const int64_t old_bytes = append ? 0 : static_cast<int64_t>(call_sites_[site_id - 1].capacity());
    const int64_t new_bytes = static_cast<int64_t>(text.capacity()) + (append ? sizeof(std::string) : 0);
    if (new_bytes <= old_bytes || call_sites_charge_.Add(memory_, new_bytes - old_bytes, "a call site").ok()) {
      if (new_bytes < old_bytes) call_sites_charge_.Sub(old_bytes - new_bytes);
      if (append) {
        call_sites_.push_back(std::move(text));
      } else {
        call_sites_[site_id - 1].swap(text);  // (a move of a short text would keep the long one's buffer)
      }
    }
  }
  auto call_site = [&]() -> std::string {
    if (site_id == 0 || !call.call_site().empty()) return std::string(site_text);
    return site_id <= call_sites_.size() ? call_sites_[site_id - 1] : std::string();
  };
  const int n_out = call.outputs_size();
  // A return that is a written argument (an in-place op's self, the
  // moments of _fused_adam_): the client names it with handle 0 (no new
  // handle; the result is that argument).

  // Output handles first: a failure must be able to mark them. (Inlined
  // storage and a linear duplicate check for the usual few outputs: no heap
  // allocation per call.)
  absl::InlinedVector<bool, 4> out_ok(n_out, false);
  absl::Status handle_status;
  {
    absl::flat_hash_set<uint64_t> seen;  // only for many outputs (split, unbind)
    auto duplicate = [&](int i, uint64_t h) {
      if (n_out > 16) return !seen.insert(h).second;
      for (int j = 0; j < i; ++j) {
        if (call.outputs(j) == h) return true;
      }
      return false;
    };
    for (int i = 0; i < n_out; ++i) {
      const uint64_t h = call.outputs(i);
      if (h == 0 && op != nullptr && WrittenReturn(*op, i)) continue;
      if (h != 0 && Uploading(h)) AbandonUpload(h, op_name);
      absl::Status s = CheckNewHandle(h);
      if (s.ok() && duplicate(i, h)) s = RuntimeErr(absl::StrCat("handle ", h, " appears twice among the outputs"));
      if (!s.ok()) {
        if (handle_status.ok()) handle_status = RuntimeErr(absl::StrCat(op_name, ": output ", i, ": ", s.message()));
        continue;
      }
      out_ok[i] = true;
    }
  }
  std::vector<TensorMeta> metas;  // output metas known when the call failed
  auto mark_failed = [&](const std::shared_ptr<OpError>& err) {
    for (int i = 0; i < n_out; ++i) {
      if (!out_ok[i]) continue;
      InsertFailed(call.outputs(i), i < static_cast<int>(metas.size()) ? &metas[i] : nullptr, err);
    }
  };
  auto fail = [&](absl::Status s) {
    mark_failed(RecordError(std::move(s), op_name, call.call_id(), call_site()));
  };

  if (!handle_status.ok()) return fail(handle_status);
  if (op == nullptr) {
    return fail(RuntimeErr(absl::StrCat(
        "op id ", call.op_id(), " is out of range: this daemon's op table has ", table.size(), " ops (ids 0..",
        table.size() - 1, ") and this session ", extensions_.size(), " ops defined at run time (ids from ",
        kFirstExtensionOpId, ")",
        call.op_id() >= kFirstExtensionOpId && !define_failure_.empty()
            ? absl::StrCat(", since the definitions sent before failed: ", define_failure_)
            : "")));
  }
  if (!artifact_errors_.empty()) {
    if (auto it = artifact_errors_.find(op->id); it != artifact_errors_.end()) {
      return fail(RuntimeErr(absl::StrCat(op_name, ": ", it->second)));
    }
  }
  const FunctionSchema& schema = op->schema;
  const bool list_return = !schema.returns.empty() && schema.returns[0].type == ArgType::kTensorList;
  if (!list_return && static_cast<size_t>(n_out) != schema.returns.size()) {
    return fail(TypeErr(absl::StrCat(op_name, ": expected ", schema.returns.size(), " output handle",
                                     schema.returns.size() == 1 ? "" : "s", " (one per return), got ", n_out)));
  }
  if (static_cast<size_t>(call.args_size()) != schema.arguments.size()) {
    return fail(TypeErr(absl::StrCat(op_name, ": expected ", schema.arguments.size(),
                                     " arguments (defaults filled in by the client), got ", call.args_size())));
  }

  // Decode the arguments; tensors are resolved in this session's table only.
  std::vector<Tensor*>& inputs = call_inputs_;
  inputs.clear();
  std::shared_ptr<OpError> input_error;
  std::vector<uint64_t> interrupted;
  auto resolve = [&](uint64_t h) -> absl::StatusOr<const TensorMeta*> {
    Tensor* t = handles_.Find(h);
    if (t == nullptr) {
      if (Uploading(h)) {
        interrupted.push_back(h);
        return RuntimeErr(absl::StrCat(op_name, ": tensor handle ", h, " was used before its upload completed"));
      }
      return UnknownHandle(op_name, h);
    }
    if (t->failed() && input_error == nullptr) input_error = t->error;
    inputs.push_back(t);
    return &t->meta;
  };
  // Built once, and small enough (one pointer) for std::function's inline
  // storage: no heap allocation per argument.
  const std::function<absl::StatusOr<const TensorMeta*>(uint64_t)> lookup = [r = &resolve](uint64_t h) {
    return (*r)(h);
  };
  std::vector<Value>& args = call_args_;
  args.clear();
  for (size_t i = 0; i < schema.arguments.size(); ++i) {
    absl::StatusOr<Value> v = wire::DecodeValue(op_name, schema.arguments[i], call.args(static_cast<int>(i)), lookup);
    if (!v.ok()) {
      inputs.clear();
      for (uint64_t h : interrupted) AbandonUpload(h, op_name);
      return fail(v.status());
    }
    args.push_back(*std::move(v));
  }
  // A failed input fails the outputs with the original error, without running.
  if (input_error != nullptr) return mark_failed(input_error);

  std::vector<Tensor>& outs = call_outs_;
  // The outputs not moved into the table (and all of them on failure) are
  // released when the call returns, as a vector of Dispatch's would be.
  absl::Cleanup release_outs = [&outs] { outs.clear(); };
  const absl::Status dispatched = dispatcher_.DispatchInto(*op, op_name, args, inputs, call.record_grad(), &metas, outs);
  inputs.clear();
  args.clear();
  if (!dispatched.ok()) {
    outs.clear();  // before the error is recorded, as when Dispatch returned it
    return fail(dispatched);
  }
  if (list_return && outs.size() != static_cast<size_t>(n_out)) {
    // The client names one handle per view its meta function predicted.
    return fail(RuntimeErr(absl::StrCat(op_name, ": returns ", outs.size(), " tensors, but the call names ", n_out,
                                        " output handles")));
  }
  size_t kept = 0;
  int64_t kept_bytes = 0;
  for (int i = 0; i < n_out && i < static_cast<int>(outs.size()); ++i) {
    if (call.outputs(i) == 0) continue;
    ++kept;
    kept_bytes += HandleTable::EntryBytes(outs[i].meta);
  }
  if (absl::Status s = handles_.Charge(kept, kept_bytes, op_name); !s.ok()) {
    outs.clear();
    return fail(std::move(s));
  }
  for (int i = 0; i < n_out && i < static_cast<int>(outs.size()); ++i) {
    if (call.outputs(i) != 0) handles_.Insert(call.outputs(i), std::move(outs[i]));
  }
}

// ------------------------------------------------------- ops defined at run time

void Session::ExecuteDefineOps(const v1::DefineOps& d) {
  auto fail = [&](absl::Status s) {
    define_failure_ = std::string(s.message());
    RecordError(std::move(s), "library.define", 0, "");
  };
  if (d.first() != extensions_.size()) {
    return fail(RuntimeErr(absl::StrCat("library.define: the client sent ops from index ", d.first(),
                                        ", but this session holds ", extensions_.size(), " ops defined at run time")));
  }
  if (d.schemas_size() != d.shape_rules_size()) {
    return fail(RuntimeErr(absl::StrCat("library.define: ", d.schemas_size(), " schemas but ", d.shape_rules_size(),
                                        " shape rules")));
  }
  if (d.artifacts_size() != 0 && d.artifacts_size() != d.schemas_size()) {
    return fail(RuntimeErr(absl::StrCat("library.define: ", d.schemas_size(), " schemas but ", d.artifacts_size(),
                                        " artifact hashes")));
  }
  if (d.derivatives_size() != 0 && d.derivatives_size() != d.schemas_size()) {
    return fail(RuntimeErr(absl::StrCat("library.define: ", d.schemas_size(), " schemas but ", d.derivatives_size(),
                                        " derivatives")));
  }
  for (int i = 0; i < d.schemas_size(); ++i) {
    const std::string& artifact = d.artifacts_size() != 0 ? d.artifacts(i) : kNoText;
    const std::string& derivative = d.derivatives_size() != 0 ? d.derivatives(i) : kNoText;
    // An op from an artifact: the artifact loaded (once per session), and
    // the op's definition exactly its manifest's.
    // An artifact that cannot be bound fails the calls of its own ops
    // (artifact_errors_), not the session's other definitions.
    std::pair<const runtime::LoadedArtifact*, size_t> binding{nullptr, 0};
    std::string bind_error;
    if (!artifact.empty()) {
      absl::StatusOr<std::pair<const runtime::LoadedArtifact*, size_t>> b =
          BindArtifactOp(artifact, d.schemas(i), d.shape_rules(i), derivative);
      if (b.ok()) {
        binding = *b;
      } else {
        bind_error = std::string(b.status().message());
        Log(LogLevel::kInfo, "session ", absl::Hex(id_, absl::kZeroPad16), ": ", bind_error);
      }
    }
    // What the set keeps of the op (its entry, schema and names) is the
    // session's memory.
    const int64_t bytes =
        kExtensionOpBytes + 8 * static_cast<int64_t>(d.schemas(i).size() + d.shape_rules(i).size() + derivative.size());
    if (absl::Status s = extensions_charge_.Add(memory_, bytes, "library.define"); !s.ok()) return fail(std::move(s));
    absl::StatusOr<const OpEntry*> op = extensions_.Define(d.schemas(i), d.shape_rules(i), artifact, derivative);
    if (!op.ok()) {
      extensions_charge_.Sub(bytes);
      return fail(op.status());
    }
    artifact_ops_.push_back(binding);
    if (!bind_error.empty()) artifact_errors_[(*op)->id] = std::move(bind_error);
  }
  if (extensions_.digest() != d.digest()) {
    return fail(RuntimeErr(absl::StrCat("library.define: the daemon's ops defined at run time differ from the "
                                        "client's (digest ", absl::Hex(extensions_.digest()), ", the client's ",
                                        absl::Hex(d.digest()), ")")));
  }
}

absl::StatusOr<std::pair<const runtime::LoadedArtifact*, size_t>> Session::BindArtifactOp(
    const std::string& hash, const std::string& schema, const std::string& shape_rule, const std::string& derivative) {
  if (artifact_store_ == nullptr) {
    return RuntimeErr(absl::StrCat("library.load: this daemon takes no kernel artifacts (op ", schema, ")"));
  }
  auto it = artifacts_.find(hash);
  if (it == artifacts_.end()) {
    absl::StatusOr<std::shared_ptr<runtime::LoadedArtifact>> lib = artifact_store_->Load(hash);
    if (!lib.ok()) return RuntimeErr(absl::StrCat("library.load: ", lib.status().message()));
    it = artifacts_.emplace(hash, *std::move(lib)).first;
  }
  const runtime::LoadedArtifact& lib = *it->second;
  for (size_t k = 0; k < lib.definitions().size(); ++k) {
    if (lib.definitions()[k].schema != schema) continue;
    if (lib.definitions()[k].shape_rule != shape_rule) {
      return RuntimeErr(absl::StrCat("library.load: the client's shape rule for ", schema,
                                     " differs from the one in its artifact (sha256 ", hash.substr(0, 12), ")"));
    }
    if (lib.definitions()[k].derivative != derivative) {
      return RuntimeErr(absl::StrCat("library.load: the client's derivative for ", schema,
                                     " differs from the one in its artifact (sha256 ", hash.substr(0, 12), ")"));
    }
    return std::pair<const runtime::LoadedArtifact*, size_t>{&lib, k};
  }
  return RuntimeErr(absl::StrCat("library.load: artifact ", lib.manifest().library, " (sha256 ", hash.substr(0, 12),
                                 ") has no op ", schema));
}

// ------------------------------------------------------------------ releases

void Session::ExecuteRelease(const v1::Release& release) {
  for (uint64_t h : release.handles()) {
    if (!dropped_uploads_.empty()) dropped_uploads_.erase(h);
    if (Uploading(h)) {
      AbandonUpload(h, "a release");
      handles_.Erase(h);
      continue;
    }
    if (!handles_.Erase(h)) {
      RecordError(UnknownHandle("release", h), "release", 0, "");
    }
  }
}

// -------------------------------------------------------- fetch, sync, describe

bool Session::WriteRequestError(uint64_t request_id, const OpError& error, const Writer& write) {
  v1::ServerMessage msg;
  msg.mutable_error()->set_request_id(request_id);
  ToProto(error, msg.mutable_error()->mutable_error());
  shm_freed_->TakeInto(msg.mutable_error()->mutable_shm_freed());
  return write(msg);
}

namespace {

// An unreported error that a sync point still reports: not reported, not
// carried by a later error (a backward's), and not caused by one reported.
bool StillToReport(const OpError& e) {
  return !(e.reported || e.carried || (e.cause != nullptr && e.cause->reported));
}

}  // namespace

bool Session::HasUnreportedErrors() const {
  if (dropped_errors_ > 0) return true;
  for (const auto& e : unreported_) {
    if (StillToReport(*e)) return true;
  }
  return false;
}

void Session::TakeUnreportedErrors(google::protobuf::RepeatedPtrField<v1::Error>* out) {
  for (const auto& e : unreported_) {
    if (!StillToReport(*e)) continue;
    e->reported = true;
    ToProto(*e, out->Add());
  }
  if (dropped_errors_ > 0) {
    OpError more;
    more.status = RuntimeErr(absl::StrCat(dropped_errors_, " more errors occurred and were not recorded"));
    ToProto(more, out->Add());
    dropped_errors_ = 0;
  }
  unreported_.clear();
}

bool Session::ExecuteSync(const v1::Sync& sync, const Writer& write) {
  v1::ServerMessage msg;
  v1::Ack* ack = msg.mutable_ack();
  ack->set_request_id(sync.request_id());
  if (sync.peek()) {
    ack->set_errors_pending(HasUnreportedErrors());
  } else {
    // A sync point waits for the session's work on every device it used:
    // what a kernel found only as it ran there (a bad index recorded in a
    // GPU's error word) is raised here, with the op's name in its message.
    if (absl::Status s = dispatcher_.streams().SynchronizeAll(); !s.ok()) {
      RecordError(std::move(s), "synchronize", 0, "");
    }
    TakeUnreportedErrors(ack->mutable_errors());
  }
  AddReleasedFunctions(ack);
  return write(msg);
}

bool Session::ExecuteDescribe(const v1::Describe& describe, const Writer& write) {
  v1::ServerMessage msg;
  v1::Ack* ack = msg.mutable_ack();
  ack->set_request_id(describe.request_id());
  // A handle costs one byte to ask for and up to a kilobyte or two to
  // answer (a meta of 64 dims, a failed one's error with its call site): the
  // reply is built whole before it is written, so its size is bounded, not
  // the request's.
  size_t reply_bytes = 0;
  for (uint64_t h : describe.handles()) {
    if (reply_bytes > kMaxDescribeReplyBytes) {
      OpError e;
      e.status = RuntimeErr(absl::StrCat("describe: the reply for ", describe.handles_size(),
                                         " handles would be more than ", kMaxDescribeReplyBytes,
                                         " bytes; describe fewer at a time"));
      e.op = "describe";
      return WriteRequestError(describe.request_id(), e, write);
    }
    if (auto err = AbandonUpload(h, "a describe"); err != nullptr) {
      err->reported = true;
      return WriteRequestError(describe.request_id(), *err, write);
    }
    const Tensor* found = handles_.Find(h);
    if (found == nullptr) {
      OpError e;
      e.status = UnknownHandle("describe", h);
      e.op = "describe";
      return WriteRequestError(describe.request_id(), e, write);
    }
    const Tensor& t = *found;
    v1::TensorMetaProto* meta = ack->add_metas();
    wire::ToProto(t.meta, meta);
    ack->add_failed(t.failed());
    ack->add_storage_ids(t.storage != nullptr ? t.storage->id() : 0);
    reply_bytes += meta->ByteSizeLong() + 16;
    if (t.failed()) {
      // One error per failed handle, in order, even if a Sync reported it.
      t.error->reported = true;
      v1::Error* error = ack->add_errors();
      ToProto(*t.error, error);
      reply_bytes += error->ByteSizeLong();
    }
  }
  AddReleasedFunctions(ack);
  return write(msg);
}

}  // namespace tensord::server
