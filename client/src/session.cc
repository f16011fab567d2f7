// Session: the process's sessions (the default one, this thread's, the
// ones ShutdownAll closes), and a session's life past its start: op calls
// streamed in the batch, the round trips that wait for metadata or for
// everything sent (Describe, Synchronize, GetMemoryStats), its counters and
// Close. How the
// work is shared among the session's files: session_impl.h.
#include "tensord/client/session.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "embedded_daemon.h"
#include "fetch_buffers.h"
#include "session_impl.h"
#include "tensord/client/ops.h"
#include "tensord/meta/errors.h"
#include "tensord/wire/wire.h"
#include "transport.h"

namespace tensord::client {

// ---------------------------------------------------------------- globals

namespace {

// The seed of the last ManualSeed, for sessions opened later.
struct SeedSlot {
  absl::Mutex mu;
  std::optional<uint64_t> seed ABSL_GUARDED_BY(mu);
};
SeedSlot& Seed() {
  static SeedSlot* s = new SeedSlot();
  return *s;
}

// The switches of the last SetMathMode, for sessions opened later.
struct MathModeSlot {
  absl::Mutex mu;
  MathMode mode ABSL_GUARDED_BY(mu);
};
MathModeSlot& Math() {
  static MathModeSlot* s = new MathModeSlot();
  return *s;
}

struct Globals {
  absl::Mutex mu;
  std::shared_ptr<Session> default_session ABSL_GUARDED_BY(mu);
  std::vector<std::weak_ptr<Session>> all ABSL_GUARDED_BY(mu);
  bool atexit_registered ABSL_GUARDED_BY(mu) = false;
};

Globals& G() {
  static Globals* g = new Globals();  // never destroyed: used from atexit
  return *g;
}

thread_local std::shared_ptr<Session> t_session;
std::atomic<int64_t> g_meta_ops{0};

// Chunks of an artifact upload: well under the daemon's message limit.
constexpr size_t kArtifactChunkBytes = 4 << 20;

// Makes sure the session's daemon holds artifact `hash`: asks it, and
// uploads the process's copy when it has not got it (a daemon keeps what it
// accepted for every session, so a second load sends no bytes). Errors: the
// daemon's refusal (its policy, its limits, an artifact that cannot run
// there), as a RuntimeError saying why, or the RPC's failure.
struct DaemonRef {
  v1::Tensord::Stub* stub;
  uint64_t session_id;
  const std::string& token;
  const std::string& address;
  absl::flat_hash_set<std::string>& artifacts_on_daemon;
  int64_t& bytes_sent;  // Stats::artifact_bytes_sent
};

absl::Status EnsureArtifactOnDaemon(DaemonRef im, const std::string& hash) {
  if (im.artifacts_on_daemon.contains(hash)) return absl::OkStatus();
  {
    v1::FindArtifactRequest req;
    req.set_session_id(im.session_id);
    req.set_token(im.token);
    req.set_content_hash(hash);
    v1::FindArtifactResponse resp;
    grpc::ClientContext ctx;
    grpc::Status st = im.stub->FindArtifact(&ctx, req, &resp);
    if (!st.ok()) return internal::GrpcError("library.load: asking for the artifact", im.address, st);
    if (resp.present()) {
      im.artifacts_on_daemon.insert(hash);
      return absl::OkStatus();
    }
  }
  std::shared_ptr<const std::string> bytes = LoadedArtifactBytes(hash);
  if (bytes == nullptr) return InternalErr(absl::StrCat("library.load: artifact ", hash, " is not loaded here"));
  grpc::ClientContext ctx;
  v1::UploadArtifactResponse resp;
  std::unique_ptr<grpc::ClientWriter<v1::ArtifactChunk>> w = im.stub->UploadArtifact(&ctx, &resp);
  size_t at = 0;
  do {
    v1::ArtifactChunk c;
    if (at == 0) {
      c.set_session_id(im.session_id);
      c.set_token(im.token);
      c.set_total_bytes(bytes->size());
    }
    const size_t n = std::min(kArtifactChunkBytes, bytes->size() - at);
    c.set_data(bytes->data() + at, n);
    at += n;
    if (!w->Write(c)) break;  // the daemon answered early (a refusal): Finish says why
  } while (at < bytes->size());
  w->WritesDone();
  grpc::Status st = w->Finish();
  if (!st.ok()) {
    if (st.error_code() == grpc::StatusCode::UNAVAILABLE || st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      return internal::GrpcError("library.load: uploading the artifact", im.address, st);
    }
    return RuntimeErr(absl::StrCat("library.load: the daemon refused the artifact: ", st.error_message()));
  }
  if (resp.content_hash() != hash) {
    return RuntimeErr(absl::StrCat("library.load: the daemon names the uploaded artifact ", resp.content_hash(),
                                   ", not ", hash));
  }
  im.artifacts_on_daemon.insert(hash);
  im.bytes_sent += static_cast<int64_t>(bytes->size());
  return absl::OkStatus();
}

}  // namespace

namespace internal {

void RegisterSession(const std::shared_ptr<Session>& s) {
  Globals& g = G();
  absl::MutexLock l(&g.mu);
  g.all.erase(std::remove_if(g.all.begin(), g.all.end(), [](const std::weak_ptr<Session>& w) { return w.expired(); }),
              g.all.end());
  g.all.push_back(s);
  if (!g.atexit_registered) {
    g.atexit_registered = true;
    std::atexit([] { ShutdownAll(); });
  }
}

std::optional<uint64_t> LastManualSeed() {
  SeedSlot& ss = Seed();
  absl::MutexLock l(&ss.mu);
  return ss.seed;
}

MathMode LastMathMode() {
  MathModeSlot& ms = Math();
  absl::MutexLock l(&ms.mu);
  return ms.mode;
}

}  // namespace internal

void CountMetaOp() { g_meta_ops.fetch_add(1, std::memory_order_relaxed); }
int64_t MetaOpsRun() { return g_meta_ops.load(); }

void ShutdownAll() {
  std::vector<std::shared_ptr<Session>> live;
  {
    Globals& g = G();
    absl::MutexLock l(&g.mu);
    for (auto& w : g.all) {
      if (auto s = w.lock()) live.push_back(std::move(s));
    }
    g.all.clear();
  }
  for (auto& s : live) s->Close().IgnoreError();
}

std::shared_ptr<Session> DefaultSessionIfAny() {
  Globals& g = G();
  absl::MutexLock l(&g.mu);
  return g.default_session;
}

void SetDefaultSession(std::shared_ptr<Session> session) {
  Globals& g = G();
  absl::MutexLock l(&g.mu);
  g.default_session = std::move(session);
}

std::shared_ptr<Session> CurrentSessionIfAny() {
  if (t_session != nullptr && !t_session->closed()) return t_session;
  std::shared_ptr<Session> d = DefaultSessionIfAny();
  return d != nullptr && !d->closed() ? d : nullptr;
}

absl::StatusOr<std::shared_ptr<Session>> CurrentSession() {
  if (std::shared_ptr<Session> s = CurrentSessionIfAny()) return s;
  // Create one (outside the lock: Connect/SpawnEmbedded take it to register).
  static absl::Mutex create_mu(absl::kConstInit);
  absl::MutexLock create(&create_mu);  // one creation at a time
  if (std::shared_ptr<Session> d = DefaultSessionIfAny(); d != nullptr && !d->closed()) return d;
  absl::StatusOr<std::shared_ptr<Session>> s;
  if (const char* addr = std::getenv("TENSORD_ADDRESS"); addr != nullptr && *addr != '\0') {
    s = Session::Connect(addr);
  } else {
    s = Session::SpawnEmbedded();
  }
  if (!s.ok()) return s.status();
  SetDefaultSession(*s);
  return *s;
}

std::shared_ptr<Session> ExchangeThreadSession(std::shared_ptr<Session> session) {
  std::shared_ptr<Session> prev = std::move(t_session);
  t_session = std::move(session);
  return prev;
}

SessionGuard::SessionGuard(std::shared_ptr<Session> session) : previous_(ExchangeThreadSession(std::move(session))) {}
SessionGuard::~SessionGuard() { ExchangeThreadSession(std::move(previous_)); }

absl::Status ManualSeed(uint64_t seed) {
  {
    SeedSlot& ss = Seed();
    absl::MutexLock l(&ss.mu);
    ss.seed = seed;
  }
  std::shared_ptr<Session> s = CurrentSessionIfAny();
  if (s == nullptr) return absl::OkStatus();
  return s->SendManualSeed(seed);
}

absl::Status SetMathMode(const MathMode& mode) {
  {
    MathModeSlot& ms = Math();
    absl::MutexLock l(&ms.mu);
    ms.mode = mode;
  }
  std::shared_ptr<Session> s = CurrentSessionIfAny();
  if (s == nullptr) return absl::OkStatus();
  return s->SendMathMode(mode);
}

MathMode GetMathMode() { return internal::LastMathMode(); }

// ---------------------------------------------------------------- Session

Session::Session(SessionOptions options, std::string address)
    : options_(std::move(options)), address_(std::move(address)), impl_(std::make_unique<Impl>()) {
  internal::CountForksOnce();
  impl_->address = address_;
  impl_->batch_limit = options_.batch_limit > 0 ? options_.batch_limit : 1;
}

Session::~Session() {
  if (impl_ != nullptr && impl_->Inherited()) {
    // A fork's copy of the parent's session: its threads do not exist here
    // and its socket and daemon are the parent's. Left as it is (a copy of
    // the parent's memory), not torn down.
    (void)impl_.release();
    return;
  }
  Close().IgnoreError();
}

bool Session::closed() const { return impl_->closed.load(); }

int Session::daemon_pid() const { return impl_->daemon.pid; }

// How long Close waits for a thread that is sending before it ends the
// stream under it.
constexpr absl::Duration kCloseWaitsForWriters = absl::Seconds(5);

absl::Status Session::Close() {
  Impl& im = *impl_;
  if (im.Inherited()) {  // the parent's (see ~Session): closing it here would end the parent's stream
    im.closed.store(true);
    return absl::OkStatus();
  }
  {
    // A thread that holds mu while it sends (an upload's chunks) blocks for
    // as long as the daemon does not read: a daemon that is stopped or hung,
    // a network that stalls. Close waits for it kCloseWaitsForWriters at
    // most, then ends the stream under it (its send fails and it lets go).
    const absl::Time give_up = absl::Now() + kCloseWaitsForWriters;
    while (!im.mu.TryLock()) {
      if (absl::Now() >= give_up) {
        if (im.transport != nullptr) im.transport->Cancel();
        im.mu.Lock();
        break;
      }
      absl::SleepFor(absl::Milliseconds(1));
    }
    const bool already = im.closed.exchange(true);
    im.mu.Unlock();
    if (already) return absl::OkStatus();
  }
  im.StopFlusher();
  // CloseSession first (the stream is still attached), then end the stream.
  // A daemon that already dropped the session (NOT_FOUND) or went away
  // (UNAVAILABLE) has nothing left to free.
  absl::Status result;
  if (im.stub != nullptr && session_id_ != 0) {
    v1::CloseSessionRequest req;
    req.set_session_id(session_id_);
    req.set_token(im.token);
    v1::CloseSessionResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(internal::DeadlineIn(5000));
    grpc::Status st = im.stub->CloseSession(&ctx, req, &resp);
    if (!st.ok() && st.error_code() != grpc::StatusCode::UNAVAILABLE &&
        st.error_code() != grpc::StatusCode::NOT_FOUND) {
      result = internal::GrpcError("closing the session failed", address_, st);
    }
  }
  {
    absl::MutexLock l(&im.mu);
    if (im.transport != nullptr) im.transport->CloseWrites();
  }
  if (im.transport != nullptr) {
    // Read to the end of the stream (the daemon ends it after CloseSession
    // or WritesDone) so that Finish runs; cancel a stream that lingers.
    absl::MutexLock wl(&im.wmu);
    im.DrainLocked(absl::Seconds(3));
  }
  {
    // Fail any wait still in flight (another thread may block on it).
    absl::MutexLock wl(&im.wmu);
    for (auto& [id, w] : im.waiters) {
      if (!w->done) {
        w->done = true;
        w->status = RuntimeErr(absl::StrCat(Label(session_id_), " is closed"));
      }
    }
  }
  {
    absl::MutexLock l(&im.mu);
    if (im.transport != nullptr) im.transport->Close();
    im.stub.reset();
    im.channel.reset();
  }
  internal::TrimFetchBufferCache();  // freed fetch buffers go back to the system, as the daemon's cache does
  if (im.shm != nullptr) im.shm->Close();  // lent segments stay mapped until released
  internal::StopEmbeddedDaemon(im.daemon);
  {
    absl::MutexLock rl(&im.release_mu);
    im.releases.clear();
  }
  return result;
}

absl::StatusOr<std::string> Session::BuildArtifactOnDaemon(const ArtifactBuild& build) {
  Impl& im = *impl_;
  v1::BuildArtifactRequest req;
  {
    absl::MutexLock l(&im.mu);
    TD_RETURN_IF_ERROR(im.Usable());
    req.set_session_id(im.session_id);
    req.set_token(im.token);
  }
  req.set_name(build.name);
  for (const auto& [name, text] : build.sources) {
    v1::SourceFile* f = req.add_sources();
    f->set_name(name);
    f->set_text(text);
  }
  for (const std::string& a : build.cuda_archs) req.add_cuda_archs(a);
  for (const std::string& a : build.extra_cflags) req.add_extra_cflags(a);
  for (const std::string& a : build.extra_cuda_cflags) req.add_extra_cuda_cflags(a);
  for (const std::string& a : build.extra_ldflags) req.add_extra_ldflags(a);
  v1::BuildArtifactResponse resp;
  grpc::ClientContext ctx;
  // Outside the session's lock: the session's ops go on while it builds.
  grpc::Status st = im.stub->BuildArtifact(&ctx, req, &resp);
  if (!st.ok()) {
    if (st.error_code() == grpc::StatusCode::UNAVAILABLE) {
      return internal::GrpcError("cpp_extension: building on the daemon", im.address, st);
    }
    return RuntimeErr(absl::StrCat("cpp_extension: the daemon's build of ", build.name, " failed: ", st.error_message()));
  }
  absl::MutexLock l(&im.mu);
  im.artifacts_on_daemon.insert(resp.content_hash());
  return std::move(*resp.mutable_artifact());
}

Stats Session::stats() const {
  absl::MutexLock l(&impl_->mu);
  Stats s = impl_->stats;
  if (impl_->shm != nullptr) s.shm_segments_created = impl_->shm->segments_created();
  return s;
}

absl::StatusOr<std::vector<Tensor>> Session::EnqueueCall(const OpEntry& op, absl::Span<const Value> args,
                                                         absl::Span<const Tensor> tensor_args,
                                                         absl::Span<TensorMeta> outputs, const CallSite& site,
                                                         bool record_grad,
                                                         const std::vector<std::optional<Tensor>>& write_results) {
  // An output on a device the daemon lacks (a factory's or to()'s device=;
  // inputs are on devices it serves) fails at the call, before anything is
  // streamed, naming the device, those served and why there is no CUDA.
  for (const TensorMeta& m : outputs) {
    if (!daemon_info_.Serves(m.device)) return daemon_info_.DeviceUnavailable(op.full_name(), m.device);
  }
  bool unknown_tensor = false;
  auto handle_of = [&](const TensorMeta* m) -> uint64_t {
    if (m == nullptr) return 0;
    for (const Tensor& t : tensor_args) {
      if (&t.meta() == m) return t.handle();
    }
    unknown_tensor = true;
    return 0;
  };
  auto written = [&](size_t i) { return i < write_results.size() && write_results[i].has_value(); };
  // The site's text (resolved by the op's caller), or a C++ file:line site
  // (Produce leaves those unresolved), looked up by file and line first.
  const bool line_site = site.text.empty() && site.file != nullptr;

  Impl& im = *impl_;
  absl::InlinedVector<uint64_t, 2> handles(outputs.size());
  {
    absl::MutexLock l(&im.mu);
    TD_RETURN_IF_ERROR(im.Usable());
    int64_t output_bytes = 0;
    for (const TensorMeta& m : outputs) {
      // An estimate (expanded views count more than they hold): saturated, not wrapped.
      const int64_t b = SaturatingBytes(m.numel(), m.itemsize());
      if (__builtin_add_overflow(output_bytes, b, &output_bytes)) output_bytes = std::numeric_limits<int64_t>::max();
    }
    im.ReleaseBeforeLocked(output_bytes);
    if (op.id >= kFirstExtensionOpId && op.id - kFirstExtensionOpId >= im.defined_ops_sent) {
      // An op defined at run time that the session has not been sent: the
      // process's definitions it lacks go first, in the same stream.
      std::vector<ExtensionOpDef> defs = DefinedOps().Defs(im.defined_ops_sent);
      bool any_artifact = false;
      // An artifact the daemon refuses fails only its own ops: they are
      // sent without it (ops with no kernel), and a call to one raises the
      // refusal. The process may hold libraries this daemon does not allow.
      absl::flat_hash_map<std::string, absl::Status> refusals;
      for (size_t k = 0; k < defs.size(); ++k) {
        ExtensionOpDef& def = defs[k];
        if (def.artifact.empty()) continue;
        auto r = refusals.find(def.artifact);
        if (r == refusals.end()) {
          r = refusals.emplace(def.artifact, EnsureArtifactOnDaemon(
                                                 DaemonRef{im.stub.get(), im.session_id, im.token, im.address,
                                                           im.artifacts_on_daemon, im.stats.artifact_bytes_sent},
                                                 def.artifact))
                  .first;
        }
        if (!r->second.ok()) {
          im.refused_ops[kFirstExtensionOpId + static_cast<uint32_t>(im.defined_ops_sent + k)] = r->second;
          def.artifact.clear();
        }
        any_artifact = any_artifact || !def.artifact.empty();
      }
      bool any_derivative = false;
      for (const ExtensionOpDef& def : defs) any_derivative = any_derivative || !def.derivative.empty();
      v1::DefineOps* d = im.pending->add_requests()->mutable_define_ops();
      d->set_first(static_cast<uint32_t>(im.defined_ops_sent));
      for (ExtensionOpDef& def : defs) {
        im.defined_digest = ExtensionOps::DigestAfter(im.defined_digest, def);
        d->add_schemas(std::move(def.schema));
        d->add_shape_rules(std::move(def.shape_rule));
        if (any_artifact) d->add_artifacts(std::move(def.artifact));
        if (any_derivative) d->add_derivatives(std::move(def.derivative));
      }
      d->set_digest(im.defined_digest);
      im.defined_ops_sent += defs.size();
    }
    if (!im.refused_ops.empty()) {
      if (auto it = im.refused_ops.find(op.id); it != im.refused_ops.end()) {
        return RuntimeErr(absl::StrCat(op.full_name(), ": ", it->second.message()));
      }
    }
    // Built in place on the batch's arena.
    v1::OpCall* call = im.pending->add_requests()->mutable_call();
    for (const Value& v : args) {
      absl::Status st = wire::EncodeValue(v, handle_of, call->add_args());
      if (!st.ok() || unknown_tensor) {
        im.pending->mutable_requests()->RemoveLast();
        TD_RETURN_IF_ERROR(st);
        TD_INTERNAL_CHECK(!unknown_tensor, op.full_name(), ": a tensor argument without a handle");
      }
    }
    call->set_op_id(op.id);
    // Interned: each site's text travels once per stream, then its id.
    Impl::LineSite* line = nullptr;
    if (line_site) {
      // At most kMaxCallSiteIds entries (a program's lines are few, but
      // libraries loaded again and again bring new file pointers).
      const std::pair<const char*, int> key(site.file, site.line);
      if (auto it = im.line_site_ids.find(key); it != im.line_site_ids.end()) {
        line = &it->second;
      } else if (im.line_site_ids.size() < wire::kMaxCallSiteIds) {
        line = &im.line_site_ids[key];
      }
      if (line != nullptr && line->id != 0 && line->file != site.file) line->id = 0;  // another file, same address
    }
    if (line != nullptr && line->id != 0) {
      call->set_call_site_id(line->id);
    } else {
      std::string built_site;
      const std::string& site_text = line_site ? (built_site = site.Text()) : site.text;
      if (auto it = im.call_site_ids.find(site_text); it != im.call_site_ids.end()) {
        call->set_call_site_id(it->second);
        if (line != nullptr) *line = Impl::LineSite{site.file, it->second};
      } else {
        call->set_call_site(site_text);
        if (im.call_site_ids.size() < wire::kMaxCallSiteIds) {
          const uint32_t id = static_cast<uint32_t>(im.call_site_ids.size()) + 1;
          im.call_site_ids.emplace(site_text, id);
          call->set_call_site_id(id);
          if (line != nullptr) *line = Impl::LineSite{site.file, id};
        }
      }
    }
    call->set_record_grad(record_grad);
    call->set_call_id(im.next_call_id++);
    for (size_t i = 0; i < handles.size(); ++i) {
      handles[i] = written(i) ? 0 : im.next_handle++;
      call->add_outputs(handles[i]);
    }
    ++im.stats.ops_issued;
    TD_RETURN_IF_ERROR(im.MaybeFlushLocked());
  }
  std::vector<Tensor> result;
  result.reserve(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (written(i)) {
      result.push_back(*write_results[i]);
    } else {
      result.emplace_back(std::make_shared<TensorImpl>(shared_from_this(), handles[i], std::move(outputs[i])));
    }
  }
  return result;
}

absl::StatusOr<std::vector<Tensor>> Session::CallDataDependent(const OpEntry& op, absl::Span<const Value> args,
                                                               absl::Span<const Tensor> tensor_args,
                                                               const CallSite& site, bool record_grad) {
  // Stream the call with placeholder metas, then ask for the real ones.
  std::vector<TensorMeta> placeholders(op.schema.returns.size());
  for (TensorMeta& m : placeholders) m.device = tensor_args.empty() ? kCPU : tensor_args[0].device();
  TD_ASSIGN_OR_RETURN(std::vector<Tensor> outs,
                      EnqueueCall(op, args, tensor_args, absl::MakeSpan(placeholders), site, record_grad));
  Impl& im = *impl_;
  Impl::Sent describe;
  {
    absl::MutexLock l(&im.mu);
    TD_RETURN_IF_ERROR(im.Usable());
    ++im.stats.round_trips;
    TD_ASSIGN_OR_RETURN(describe, im.SendForReplyLocked([&](uint64_t id, internal::Waiter&) {
      v1::Describe* d = im.pending->add_requests()->mutable_describe();
      d->set_request_id(id);
      for (const Tensor& t : outs) d->add_handles(t.handle());
    }));
  }
  TD_RETURN_IF_ERROR(im.Wait(describe));
  const v1::Ack& ack = describe.waiter->ack;
  for (int i = 0; i < static_cast<int>(outs.size()); ++i) {
    if (i < ack.failed_size() && ack.failed(i)) {
      // The daemon holds the op's error; a fetch of the output returns it.
      absl::StatusOr<HostData> f = Fetch(outs[i].handle());
      if (!f.ok()) return f.status();
      return RuntimeErr(absl::StrCat(op.full_name(), " failed in the daemon (call at ", site.Text(), ")"));
    }
  }
  if (ack.metas_size() != static_cast<int>(outs.size())) {
    return InternalErr(absl::StrCat(op.full_name(), ": the daemon described ", ack.metas_size(), " outputs, expected ",
                                    outs.size()));
  }
  std::vector<Tensor> result;
  for (int i = 0; i < ack.metas_size(); ++i) {
    TD_ASSIGN_OR_RETURN(TensorMeta m, wire::FromProto(ack.metas(i), absl::StrCat(op.full_name(), " output")));
    outs[i].impl()->meta = std::move(m);
    result.push_back(outs[i]);
  }
  return result;
}

bool Session::uses_same_host_stream() const {
  return impl_->transport != nullptr && impl_->transport->kind() == internal::TransportKind::kSameHost;
}
bool Session::uses_tcp_stream() const {
  return impl_->transport != nullptr && impl_->transport->kind() == internal::TransportKind::kTcp;
}

absl::StatusOr<TensorMeta> Session::Describe(uint64_t handle, uint64_t* storage_id) {
  Impl& im = *impl_;
  Impl::Sent describe;
  {
    absl::MutexLock l(&im.mu);
    TD_RETURN_IF_ERROR(im.Usable());
    ++im.stats.round_trips;
    TD_ASSIGN_OR_RETURN(describe, im.SendForReplyLocked([&](uint64_t id, internal::Waiter&) {
      v1::Describe* d = im.pending->add_requests()->mutable_describe();
      d->set_request_id(id);
      d->add_handles(handle);
    }));
  }
  TD_RETURN_IF_ERROR(im.Wait(describe));
  const internal::Waiter* w = describe.waiter.get();
  if (w->ack.failed_size() > 0 && w->ack.failed(0)) {
    absl::StatusOr<HostData> f = Fetch(handle);
    if (!f.ok()) return f.status();
    return RuntimeErr(absl::StrCat("tensor handle ", handle, " failed in the daemon"));
  }
  if (w->ack.metas_size() != 1) {
    return InternalErr(absl::StrCat("the daemon described ", w->ack.metas_size(), " tensors, expected 1"));
  }
  if (storage_id != nullptr) *storage_id = w->ack.storage_ids_size() == 1 ? w->ack.storage_ids(0) : 0;
  return wire::FromProto(w->ack.metas(0), absl::StrCat("handle ", handle));
}

absl::StatusOr<MemoryStats> Session::GetMemoryStats(const Device& device, bool reset_peak, bool empty_cache) {
  // A device the daemon lacks is refused here, with why there is no CUDA;
  // meta goes to the daemon, which refuses it with the devices it serves.
  if (!device.is_meta() && !daemon_info_.Serves(device)) return daemon_info_.DeviceUnavailable("memory_stats", device);
  Impl& im = *impl_;
  Impl::Sent sent;
  {
    absl::MutexLock l(&im.mu);
    TD_RETURN_IF_ERROR(im.Usable());
    // Tensors released so far no longer count, as in PyTorch, where `del t`
    // frees at once.
    im.AppendReleasesLocked();
    ++im.stats.round_trips;
    TD_ASSIGN_OR_RETURN(sent, im.SendForReplyLocked([&](uint64_t id, internal::Waiter&) {
      v1::MemoryStats* r = im.pending->add_requests()->mutable_memory_stats();
      r->set_request_id(id);
      r->set_device_type(static_cast<int32_t>(device.type));
      r->set_device_index(device.index);
      r->set_reset_peak(reset_peak);
      r->set_empty_cache(empty_cache);
    }));
  }
  TD_RETURN_IF_ERROR(im.Wait(sent));
  const v1::Ack& ack = sent.waiter->ack;
  auto bytes = [](uint64_t v) {
    return static_cast<int64_t>(std::min<uint64_t>(v, static_cast<uint64_t>(std::numeric_limits<int64_t>::max())));
  };
  MemoryStats stats;
  stats.allocated_bytes = bytes(ack.allocated_bytes());
  stats.peak_allocated_bytes = bytes(ack.peak_allocated_bytes());
  stats.reserved_bytes = bytes(ack.reserved_bytes());
  stats.total_bytes = bytes(ack.total_memory_bytes());
  return stats;
}

absl::Status Session::Synchronize() {
  Impl& im = *impl_;
  Impl::Sent sync;
  bool peeked = false;
  {
    absl::MutexLock l(&im.mu);
    TD_RETURN_IF_ERROR(im.Usable());
    // Releases queued so far go before the sync, so that its reply already
    // lists the shared-memory segments their storages adopted as free.
    im.AppendReleasesLocked();
    ++im.stats.round_trips;
    if (im.upload_sync.has_value() && im.pending->requests_size() == 0) {
      // Nothing went out since an adopting upload and its sync: that sync's
      // reply says what a new one would, unless errors wait (below).
      sync = *std::move(im.upload_sync);
      im.upload_sync.reset();
      peeked = true;
    } else {
      TD_ASSIGN_OR_RETURN(sync, im.SendForReplyLocked([&](uint64_t id, internal::Waiter&) {
        im.pending->add_requests()->mutable_sync()->set_request_id(id);
      }));
    }
  }
  TD_RETURN_IF_ERROR(im.Wait(sync));
  const internal::Waiter* w = sync.waiter.get();
  // Errors wait in the daemon: a sync of its own reports them.
  if (peeked && w->ack.errors_pending()) return Synchronize();
  return im.TakeErrors({w->ack.errors().begin(), w->ack.errors().end()});
}

std::string Session::Label(uint64_t session_id) {
  return absl::StrCat("tensord session ", absl::Hex(session_id, absl::kZeroPad16));
}

}  // namespace tensord::client
