// A session's handle table and its requests, executed in order: op calls
// (decoded here, run by the runtime's dispatcher), uploads, releases,
// fetches, syncs and describes.
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
namespace {

// Uploads whose later chunks are being dropped (their first chunk failed):
// at most this many are remembered; past that, a later chunk is refused on
// its own (the error list is bounded too).
constexpr size_t kMaxDroppedUploads = 4096;

void DropRestOfUpload(absl::flat_hash_set<uint64_t>& dropped, uint64_t handle) {
  if (dropped.size() < kMaxDroppedUploads) dropped.insert(handle);
}

// Reads a tensor's elements in row-major order, whatever its strides, so that
// a Fetch can stream them as contiguous chunks without a second full copy.
// Used for non-contiguous tensors: a contiguous one is copied or sent straight
// from its storage.
class StridedReader {
 public:
  StridedReader(const char* storage, const TensorMeta& m)
      : base_(storage + m.storage_offset * m.itemsize()),
        itemsize_(m.itemsize()),
        sizes_(m.sizes),
        idx_(m.sizes.size(), 0) {
    // Byte strides; a dim of size <= 1 never advances, so its stride (which a
    // peer may have set to anything) is irrelevant and taken as 0.
    byte_strides_.resize(m.sizes.size());
    for (size_t d = 0; d < m.sizes.size(); ++d) {
      byte_strides_[d] = m.sizes[d] <= 1 ? 0 : m.strides[d] * itemsize_;
    }
  }

  // Copies the next `n` elements into `dst`.
  void Read(int64_t n, char* dst) {
    if (n <= 0) return;
    const size_t rank = sizes_.size();
    if (rank == 0) {
      std::memcpy(dst, base_, static_cast<size_t>(itemsize_));
      return;
    }
    const size_t last = rank - 1;
    while (n > 0) {
      const int64_t run = std::min(n, sizes_[last] - idx_[last]);
      const char* src = base_ + offset_;
      if (byte_strides_[last] == itemsize_) {
        std::memcpy(dst, src, static_cast<size_t>(run * itemsize_));
      } else {
        for (int64_t k = 0; k < run; ++k) {
          std::memcpy(dst + k * itemsize_, src + k * byte_strides_[last], static_cast<size_t>(itemsize_));
        }
      }
      dst += run * itemsize_;
      n -= run;
      idx_[last] += run;
      offset_ += run * byte_strides_[last];
      if (idx_[last] < sizes_[last]) continue;
      // Carry into the outer dims.
      offset_ -= idx_[last] * byte_strides_[last];
      idx_[last] = 0;
      for (size_t d = last; d-- > 0;) {
        ++idx_[d];
        offset_ += byte_strides_[d];
        if (idx_[d] < sizes_[d]) break;
        offset_ -= idx_[d] * byte_strides_[d];
        idx_[d] = 0;
      }
    }
  }

 private:
  const char* base_;
  const int64_t itemsize_;
  const Shape sizes_;
  Shape byte_strides_;
  Shape idx_;
  int64_t offset_ = 0;  // bytes from base_
};

}  // namespace


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
                 const Backends* devices)
    : id_(id),
      token_(std::move(token)),
      client_name_(std::move(client_name)),
      memory_(std::move(memory)),
      devices_(devices),
      handles_(memory_),
      dispatcher_(devices, memory_) {
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

wire::Placement Session::PlaceUploadData(const v1::Upload& head, size_t n, std::shared_ptr<Storage>* keep) {
  absl::MutexLock lock(&mu_);
  placed_bytes_ = 0;
  if (closed_ || current_ != nullptr || !queue_.empty() || n == 0) return nullptr;
  if (head.shm_segment() != 0 || head.shm_adopt()) return nullptr;
  auto it = uploads_.find(head.handle());
  if (it == uploads_.end()) {
    // A first chunk (a whole upload of up to a chunk's size, often): the
    // upload starts now, as ExecuteUpload would start it, so that its data
    // too goes straight into the storage. Anything ExecuteUpload would
    // refuse is left to it (the data then goes in the message, and it
    // reports the error).
    TensorMeta m;
    uint64_t expected = 0;
    bool report_meta = false;
    if (!head.has_meta() || !CheckNewHandle(head.handle()).ok() ||
        !CheckFirstChunk(head, n, "upload", &m, &expected, &report_meta).ok()) {
      return nullptr;
    }
    // Nor one that would not fit from offset 0: declined before anything
    // starts, so that ExecuteUpload finds no upload and reports it.
    if (head.offset() != 0 || n > expected) return nullptr;
    if (!StartUploadLocked(head, m, expected).ok()) return nullptr;
    it = uploads_.find(head.handle());
  } else if (head.has_meta()) {
    return nullptr;  // a later chunk with meta: ExecuteUpload checks it first
  }
  PendingUpload& up = it->second;
  if (head.offset() != up.received || n > up.total_bytes - up.received) return nullptr;
  placed_bytes_ = n;
  placed_handle_ = head.handle();
  *keep = up.storage;
  return wire::Placement(up.storage->data() + up.received, up.total_bytes);
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
    return fail(RuntimeErr(absl::StrCat("op id ", call.op_id(), " is out of range: this daemon's op table has ",
                                        table.size(), " ops (ids 0..", table.size() - 1, ") and this session ",
                                        extensions_.size(), " ops defined at run time (ids from ",
                                        kFirstExtensionOpId, ")")));
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
  auto fail = [&](absl::Status s) { RecordError(std::move(s), "library.define", 0, ""); };
  if (d.first() != extensions_.size()) {
    return fail(RuntimeErr(absl::StrCat("library.define: the client sent ops from index ", d.first(),
                                        ", but this session holds ", extensions_.size(), " ops defined at run time")));
  }
  if (d.schemas_size() != d.shape_rules_size()) {
    return fail(RuntimeErr(absl::StrCat("library.define: ", d.schemas_size(), " schemas but ", d.shape_rules_size(),
                                        " shape rules")));
  }
  for (int i = 0; i < d.schemas_size(); ++i) {
    // What the set keeps of the op (its entry, schema and names) is the
    // session's memory.
    const int64_t bytes = kExtensionOpBytes + 8 * static_cast<int64_t>(d.schemas(i).size() + d.shape_rules(i).size());
    if (absl::Status s = extensions_charge_.Add(memory_, bytes, "library.define"); !s.ok()) return fail(std::move(s));
    absl::StatusOr<const OpEntry*> op = extensions_.Define(d.schemas(i), d.shape_rules(i));
    if (!op.ok()) {
      extensions_charge_.Sub(bytes);
      return fail(op.status());
    }
  }
  if (extensions_.digest() != d.digest()) {
    return fail(RuntimeErr(absl::StrCat("library.define: the daemon's ops defined at run time differ from the "
                                        "client's (digest ", absl::Hex(extensions_.digest()), ", the client's ",
                                        absl::Hex(d.digest()), ")")));
  }
}

// ------------------------------------------------------------------- uploads

absl::Status Session::CheckFirstChunk(const v1::Upload& u, uint64_t data_bytes, absl::string_view what,
                                      TensorMeta* m, uint64_t* expected, bool* report_meta) {
  *report_meta = false;
  if (!u.has_meta()) return RuntimeErr(absl::StrCat(what, ": the first chunk carries no meta"));
  absl::StatusOr<TensorMeta> meta = wire::FromProto(u.meta(), what);
  if (!meta.ok()) return meta.status();
  *m = *std::move(meta);
  if (m->device.is_meta() || devices_->Find(m->device) == nullptr) {
    return RuntimeErr(absl::StrCat(what, ": device must be one this daemon serves, got ", m->device.ToString()));
  }
  if (!m->is_contiguous() || m->storage_offset != 0) {
    return RuntimeErr(absl::StrCat(what, ": uploads must be contiguous with storage_offset 0, got sizes ",
                                   ShapeToString(m->sizes), ", strides ", ShapeToString(m->strides),
                                   ", storage_offset ", m->storage_offset));
  }
  // Canonical strides (a size-1 dim's stride may be anything in a contiguous tensor).
  m->strides = ContiguousStrides(m->sizes);
  // Validated metadata bounds this today (contiguous, so its storage extent
  // is its numel); checked all the same, as every byte count from a peer is.
  absl::StatusOr<int64_t> dense = m->DenseBytes(what);
  if (!dense.ok()) return dense.status();
  *expected = static_cast<uint64_t>(*dense);
  *report_meta = true;
  uint64_t total = u.total_bytes();
  if (total == 0 && u.last()) total = data_bytes;  // a one-message upload may omit total_bytes
  if (total != *expected) {
    return RuntimeErr(absl::StrCat(what, ": total_bytes is ", total, " but sizes ", ShapeToString(m->sizes), " of ",
                                   DtypeName(m->dtype), " need ", *expected, " bytes"));
  }
  return absl::OkStatus();
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

absl::Status Session::StartUploadLocked(const v1::Upload& u, const TensorMeta& meta, uint64_t expected) {
  // Each one in progress costs its bookkeeping besides its (charged) bytes.
  if (uploads_.size() >= kMaxPendingUploads) {
    return absl::ResourceExhaustedError(absl::StrCat("upload of handle ", u.handle(), ": ", uploads_.size(),
                                                     " uploads are already in progress in this session (the limit); "
                                                     "send the last chunk of one first"));
  }
  // Not zero-filled: the chunks overwrite every byte, and the storage is
  // published only once all of them arrived. Always host memory: a tensor
  // for another device moves there with the last chunk.
  absl::StatusOr<std::shared_ptr<Storage>> st =
      memory_->Allocate(devices_->cpu()->allocator(), static_cast<int64_t>(expected), "upload", /*zero_fill=*/false);
  if (!st.ok()) return st.status();
  PendingUpload up;
  up.meta = meta;
  up.storage = *std::move(st);
  up.total_bytes = expected;
  up.call_id = u.call_id();
  up.call_site = u.call_site().substr(0, kMaxCallSiteBytes);
  uploads_.emplace(u.handle(), std::move(up));
  return absl::OkStatus();
}

void Session::ExecuteUpload(const v1::Upload& u) {
  const uint64_t h = u.handle();
  bool first_chunk = false;
  // The site the first chunk named (later chunks name none; their failures
  // may erase the upload before reporting).
  std::string later_site;
  auto site = [&]() -> const std::string& { return u.call_site().empty() ? later_site : u.call_site(); };
  auto fail = [&](absl::Status s, const TensorMeta* meta) {
    auto err = RecordError(std::move(s), "upload", u.call_id(), site());
    InsertFailed(h, meta, err);
    // The rest of the upload is already on its way: its chunks are dropped
    // (the one error says what went wrong), not each refused again.
    if (first_chunk && !u.last()) DropRestOfUpload(dropped_uploads_, h);
  };
  const std::string what = absl::StrCat("upload of handle ", h);

  auto it = uploads_.find(h);
  if (it != uploads_.end() && u.call_site().empty()) later_site = it->second.call_site;
  if (it == uploads_.end()) {
    if (!dropped_uploads_.empty() && !u.has_meta() && dropped_uploads_.contains(h)) {
      if (u.last()) dropped_uploads_.erase(h);
      return;
    }
    // The first chunk.
    first_chunk = true;
    if (absl::Status s = CheckNewHandle(h); !s.ok()) {
      RecordError(RuntimeErr(absl::StrCat(what, ": ", s.message())), "upload", u.call_id(), site());
      if (!u.last()) DropRestOfUpload(dropped_uploads_, h);
      return;
    }
    TensorMeta m;
    uint64_t expected = 0;
    bool report_meta = false;
    if (absl::Status s = CheckFirstChunk(u, u.data().size(), what, &m, &expected, &report_meta); !s.ok()) {
      return fail(std::move(s), report_meta ? &m : nullptr);
    }
    if (u.shm_adopt()) {
      // One message whose storage is the client's segment: no copy here.
      if (!m.device.is_cpu()) {
        return fail(RuntimeErr(absl::StrCat(what, ": only a cpu tensor can adopt a shared-memory segment, not one "
                                            "on ", m.device.ToString())),
                    &m);
      }
      if (u.shm_segment() == 0 || !u.last() || !u.data().empty() || u.offset() != 0) {
        return fail(RuntimeErr(absl::StrCat(what, ": an adopting upload must be one message (last set, offset 0) "
                                            "naming a shared-memory segment and carrying no data")),
                    &m);
      }
      absl::StatusOr<std::shared_ptr<Storage>> st = AdoptShmRange(what, u.shm_segment(), u.shm_offset(), expected);
      if (!st.ok()) return fail(st.status(), &m);
      if (absl::Status s = handles_.Charge(1, HandleTable::EntryBytes(m), what); !s.ok()) return fail(std::move(s), &m);
      Tensor t;
      t.meta = std::move(m);
      t.storage = *std::move(st);
      t.ag = std::make_shared<AutogradMeta>();
      handles_.Insert(h, std::move(t));
      return;
    }
    if (absl::Status s = StartUploadLocked(u, m, expected); !s.ok()) return fail(std::move(s), &m);
    it = uploads_.find(h);
  } else if (u.shm_adopt()) {
    TensorMeta m = it->second.meta;
    uploads_.erase(it);
    return fail(RuntimeErr(absl::StrCat(what, ": only a first (and only) chunk can adopt a shared-memory segment")), &m);
  } else if (u.has_meta() && !(placed_bytes_ > 0 && placed_handle_ == h && it->second.received == 0)) {
    // Later chunks need no meta; if one comes, it must be the same. (A
    // first chunk placed by PlaceUploadData started its upload there, and
    // its meta was checked then.)
    absl::StatusOr<TensorMeta> meta = wire::FromProto(u.meta(), what);
    if (!meta.ok() || meta->sizes != it->second.meta.sizes || meta->dtype != it->second.meta.dtype) {
      TensorMeta m = it->second.meta;
      uploads_.erase(it);
      return fail(RuntimeErr(absl::StrCat(what, ": a later chunk carries a different meta than the first")), &m);
    }
  }

  PendingUpload& up = it->second;
  const char* src = u.data().data();
  uint64_t size = u.data().size();
  bool placed = false;  // the bytes are in the storage already (PlaceUploadData)
  if (placed_bytes_ > 0 && placed_handle_ == h && u.data().empty() && u.shm_segment() == 0) {
    size = placed_bytes_;
    placed = true;
  }
  placed_bytes_ = 0;
  std::shared_ptr<ShmMapping> shm;  // held while copying
  if (u.shm_segment() != 0) {
    // The rest of the bytes are in a shared-memory segment of this session.
    if (!u.data().empty()) {
      TensorMeta m = up.meta;
      uploads_.erase(it);
      return fail(RuntimeErr(absl::StrCat(what, ": a chunk carries both data and a shared-memory segment")), &m);
    }
    size = up.total_bytes - up.received;
    absl::StatusOr<std::shared_ptr<ShmMapping>> r = ShmRange(what, u.shm_segment(), u.shm_offset(), size);
    if (!r.ok()) {
      TensorMeta m = up.meta;
      uploads_.erase(it);
      return fail(r.status(), &m);
    }
    shm = *std::move(r);
    src = shm->data + u.shm_offset();
  }
  if (u.offset() != up.received) {
    TensorMeta m = up.meta;
    const uint64_t received = up.received;
    uploads_.erase(it);
    return fail(RuntimeErr(absl::StrCat(what, ": chunk at offset ", u.offset(), ", expected offset ", received,
                                        " (chunks must arrive in order, without gaps)")),
                &m);
  }
  if (size > up.total_bytes - up.received) {
    TensorMeta m = up.meta;
    const uint64_t total = up.total_bytes;
    uploads_.erase(it);
    return fail(RuntimeErr(absl::StrCat(what, ": chunk of ", size, " bytes at offset ", u.offset(),
                                        " reaches past total_bytes ", total)),
                &m);
  }
  if (size > 0 && !placed) {
    if (shm != nullptr) {
      // The rest of the transfer at once, from the segment: on several cores when large.
      wire::CopyTransfer(up.storage->data() + up.received, src, size, wire::MaxCopyThreads());
    } else {
      wire::CopyTransferPiece(up.storage->data() + up.received, src, size, up.total_bytes);
    }
  }
  up.received += size;
  if (!u.last()) return;
  if (up.received != up.total_bytes) {
    TensorMeta m = up.meta;
    const uint64_t received = up.received, total = up.total_bytes;
    uploads_.erase(it);
    return fail(RuntimeErr(absl::StrCat(what, ": the last chunk arrived after ", received, " of ", total, " bytes")),
                &m);
  }
  if (!up.meta.device.is_cpu()) {
    // The chunks arrive in host memory; a tensor for another device moves
    // there once it is whole, through the devices' copies.
    const Backend* to = devices_->Find(up.meta.device);
    absl::StatusOr<std::shared_ptr<Storage>> moved =
        to == nullptr ? absl::StatusOr<std::shared_ptr<Storage>>(DeviceUnavailable(what, up.meta.device, *devices_))
                      : memory_->Allocate(to->allocator(), static_cast<int64_t>(up.total_bytes), what, false);
    absl::Status s = moved.status();
    if (s.ok()) {
      s = CopyBetween(dispatcher_.streams(), *devices_->cpu(), up.storage->data(), *to, (*moved)->data(),
                      up.total_bytes, *memory_, what);
    }
    if (!s.ok()) {
      TensorMeta m = up.meta;
      uploads_.erase(it);
      return fail(std::move(s), &m);
    }
    up.storage = *std::move(moved);
  }
  if (absl::Status s = handles_.Charge(1, HandleTable::EntryBytes(up.meta), what); !s.ok()) {
    TensorMeta m = up.meta;
    uploads_.erase(it);
    return fail(std::move(s), &m);
  }
  Tensor t;
  t.meta = std::move(up.meta);
  t.storage = std::move(up.storage);
  t.ag = std::make_shared<AutogradMeta>();
  uploads_.erase(it);
  handles_.Insert(h, std::move(t));
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

absl::StatusOr<char*> Session::HostBase(const Tensor& t, absl::string_view what, std::shared_ptr<Storage>* keep) {
  const Backend* from = devices_->Find(t.storage->device());
  if (from == nullptr) return DeviceUnavailable(what, t.storage->device(), *devices_);
  if (from->host_addressable()) return t.storage->data();
  // Strides are >= 0: the lowest byte addressed is at the storage offset.
  const int64_t begin = t.meta.storage_offset * t.meta.itemsize();
  TD_ASSIGN_OR_RETURN(int64_t end, t.meta.StorageBytesNeeded());
  if (end < begin) end = begin;  // an empty tensor addresses nothing
  TD_ASSIGN_OR_RETURN(*keep, memory_->Allocate(devices_->cpu()->allocator(), end - begin, what, false));
  TD_RETURN_IF_ERROR(CopyBetween(dispatcher_.streams(), *from, t.storage->data() + begin, *devices_->cpu(),
                                 (*keep)->data(), static_cast<size_t>(end - begin), *memory_, what));
  return reinterpret_cast<char*>(reinterpret_cast<uintptr_t>((*keep)->data()) - static_cast<uintptr_t>(begin));
}

bool Session::ExecuteFetch(const v1::Fetch& fetch, const Writer& write) {
  const uint64_t h = fetch.handle();
  if (auto err = AbandonUpload(h, "a fetch"); err != nullptr) {
    err->reported = true;
    return WriteRequestError(fetch.request_id(), *err, write);
  }
  auto fail = [&](absl::Status status) {
    OpError e;
    e.status = std::move(status);
    e.op = "fetch";
    return WriteRequestError(fetch.request_id(), e, write);
  };
  const Tensor* found = handles_.Find(h);
  if (found == nullptr) return fail(UnknownHandle("fetch", h));
  const Tensor& t = *found;
  if (t.failed()) {
    t.error->reported = true;
    return WriteRequestError(fetch.request_id(), *t.error, write);
  }
  const TensorMeta& m = t.meta;
  const int64_t numel = m.numel();
  const int64_t itemsize = m.itemsize();
  // Checked: an expanded view's element count can be far beyond what its
  // storage holds, and a wrapped total would pass the segment's capacity
  // check below and the copy would write past the mapping.
  absl::StatusOr<int64_t> dense = m.DenseBytes("fetch");
  if (!dense.ok()) return fail(dense.status());
  const int64_t total = *dense;
  // A device whose memory the daemon cannot read gives the bytes the
  // tensor addresses to host memory first.
  std::shared_ptr<Storage> staged;
  absl::StatusOr<char*> host_base = HostBase(t, "fetch", &staged);
  if (!host_base.ok()) return fail(host_base.status());
  char* const base = *host_base;
  // The first (or only) data message also says the tensor's metadata, its
  // size and the errors not reported yet.
  auto first_data = [&](v1::ServerMessage* msg) {
    v1::FetchData* d = msg->mutable_data();
    d->set_request_id(fetch.request_id());
    wire::ToProto(TensorMeta::Contiguous(m.sizes, m.dtype, m.device), d->mutable_meta());
    d->set_total_bytes(static_cast<uint64_t>(total));
    TakeUnreportedErrors(d->mutable_errors());
    shm_freed_->TakeInto(d->mutable_shm_freed());
    return d;
  };
  if (fetch.shm_segment() != 0 && static_cast<uint64_t>(total) <= fetch.shm_capacity()) {
    // Into the client's shared-memory segment: one copy, one message.
    absl::StatusOr<std::shared_ptr<ShmMapping>> shm =
        ShmRange(absl::StrCat("fetch of handle ", h), fetch.shm_segment(), fetch.shm_offset(), total);
    if (!shm.ok()) return fail(shm.status());
    char* dst = (*shm)->data + fetch.shm_offset();
    if (m.is_contiguous()) {
      wire::CopyTransfer(dst, base + m.storage_offset * itemsize, static_cast<size_t>(total),
                         wire::MaxCopyThreads());  // on several cores when large
    } else {
      StridedReader(base, m).Read(numel, dst);
    }
    v1::ServerMessage msg;
    v1::FetchData* d = first_data(&msg);
    d->set_shm_segment(fetch.shm_segment());
    d->set_last(true);
    return write(msg);
  }
  // Whole elements per chunk (every itemsize divides the chunk size).
  const int64_t per_chunk = kMaxChunkBytes / itemsize;
  // A strided tensor's reader (a contiguous one is sent from its storage)
  // and its chunk, reused.
  std::optional<StridedReader> reader;
  std::string gathered;
  int64_t done = 0;  // elements
  bool first = true;
  do {
    const int64_t n = std::min(per_chunk, numel - done);
    const size_t bytes = static_cast<size_t>(n * itemsize);
    // The session's reply, cleared: its FetchData and data string are
    // reused rather than allocated and freed for every fetch.
    v1::ServerMessage& msg = fetch_reply_;
    msg.mutable_data()->Clear();
    v1::FetchData* d = first ? first_data(&msg) : msg.mutable_data();
    d->set_request_id(fetch.request_id());
    d->set_offset(static_cast<uint64_t>(done * itemsize));
    const char* src;
    if (m.is_contiguous()) {
      src = base + (m.storage_offset + done) * itemsize;
    } else {
      gathered.resize(bytes);
      if (!reader.has_value()) reader.emplace(base, m);
      reader->Read(n, gathered.data());
      src = gathered.data();
    }
    done += n;
    d->set_last(done == numel);
    first = false;
    if (write_data_ != nullptr && bytes >= wire::kMinBorrowedBytes) {
      // The transport sends the bytes from here, without a copy.
      if (!(*write_data_)(*d, src, bytes)) return false;
    } else {
      d->set_data(src, bytes);
      const bool written = write(msg);
      // A large chunk's string is not kept (when no DataWriter took it).
      if (d->data().capacity() > kMaxKeptReplyBytes) msg.clear_kind();
      if (!written) return false;
    }
  } while (done < numel);
  return true;
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
