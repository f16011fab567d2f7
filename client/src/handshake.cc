// How a session comes to be: the checks before connecting (no daemon
// allowed, a child forked after gRPC ran), the handshake and OpenSession on
// gRPC, the choice of the session stream's transport (same-host stream and
// shared memory over a Unix socket, the TCP stream at HOST:PORT, else the
// gRPC stream and its attach), and the start of streaming (the seed, the
// flusher).
#include <grpcpp/grpcpp.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "embedded_daemon.h"
#include "session_impl.h"
#include "shm_pool.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/op_table.h"
#include "tensord/transport/shm.h"
#include "tensord/transport/socket_stream.h"
#include "tensord/v1/tensord.grpc.pb.h"
#include "tensord/wire/wire.h"
#include "transport.h"

namespace tensord::client {
namespace internal {

// How many forks this process is away from the one that loaded the client:
// a session opened before a fork belongs to the parent (its socket, its
// daemon, its threads), so the child must neither use it nor close it.
std::atomic<uint64_t> g_fork_generation{0};

void CountForksOnce() {
  static const bool registered = [] {
    ::pthread_atfork(nullptr, nullptr, [] { g_fork_generation.fetch_add(1, std::memory_order_relaxed); });
    return true;
  }();
  (void)registered;
}

absl::Status GrpcError(absl::string_view what, const std::string& address, const grpc::Status& s) {
  return RuntimeErr(absl::StrCat(what, " (tensord daemon at ", address, "): ", s.error_message(), " (gRPC code ",
                                 static_cast<int>(s.error_code()), ")"));
}

std::chrono::system_clock::time_point DeadlineIn(int ms) {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(ms);
}

}  // namespace internal

namespace {

constexpr char kClientVersion[] = "0.1.0";

// g_fork_generation + 1 when this process (or the one it was forked from)
// first opened a gRPC connection; 0: never. gRPC does not survive fork(): a
// child of a process whose gRPC threads (timers, pollers, event engine) ran
// has copies of their state without the threads, and a new connection there
// blocks forever (deadlines never fire) or crashes, depending on where those
// threads were at the fork. So such a child may not open sessions.
std::atomic<uint64_t> g_grpc_used_generation_plus1{0};

absl::Status CheckConnectAllowedAfterFork(absl::string_view what) {
  const uint64_t used = g_grpc_used_generation_plus1.load(std::memory_order_relaxed);
  if (used == 0 || used - 1 == internal::g_fork_generation.load(std::memory_order_relaxed)) {
    return absl::OkStatus();
  }
  return RuntimeErr(absl::StrCat(
      what, ": this process (", ::getpid(), ") was forked from one that had already connected to a tensord daemon, "
      "and gRPC cannot open connections in such a child (they hang or crash). Start child processes with the "
      "'spawn' or 'forkserver' method of multiprocessing, or fork before the parent's first tensor"));
}

// SessionOptions::transport.stream_spin_us in nanoseconds: the caller's, else
// $TENSORD_STREAM_SPIN_US, else wire's default. InvalidArgument for a value
// out of range (the daemon's rule, wire::ParseStreamSpinMicros).
absl::StatusOr<int64_t> StreamSpinNanos(const SessionOptions& options) {
  int64_t us = options.transport.stream_spin_us;
  if (us > wire::kMaxStreamSpinMicros || us < -1) {
    return absl::InvalidArgumentError(absl::StrCat("SessionOptions::transport.stream_spin_us is ", us,
                                                   ": give 0 to ", wire::kMaxStreamSpinMicros,
                                                   " microseconds, or -1 for the default"));
  }
  if (us >= 0) return us * 1000;
  const char* env = std::getenv("TENSORD_STREAM_SPIN_US");
  if (env == nullptr || *env == '\0') return wire::kDefaultStreamSpinNanos;
  absl::StatusOr<int64_t> parsed = wire::ParseStreamSpinMicros(env);
  if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat("TENSORD_STREAM_SPIN_US: ", parsed.status().message()));
  return *parsed * 1000;
}

// Whether environment variable `name` is "0": a feature that the options
// leave on is turned off for this process.
bool EnvSaysOff(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && absl::string_view(v) == "0";
}

// $TENSORD_NO_DAEMON (set by `tensord check`, which runs a script on meta
// tensors only): refuse to connect or spawn, so nothing can start a daemon.
absl::Status CheckDaemonAllowed(absl::string_view what) {
  const char* env = std::getenv("TENSORD_NO_DAEMON");
  if (env == nullptr || *env == '\0' || absl::string_view(env) == "0") return absl::OkStatus();
  return RuntimeErr(absl::StrCat(what, ": no daemon may be used here ($TENSORD_NO_DAEMON is set, as `tensord check` ",
                                 "does): only meta tensors work; something needed real data or a non-meta device"));
}

}  // namespace

int DaemonInfo::cuda_device_count() const {
  int n = 0;
  for (const DeviceInfo& d : device_info) n += d.device.is_cuda() ? 1 : 0;
  return n;
}

absl::Status DaemonInfo::DeviceUnavailable(absl::string_view op, const Device& device) const {
  std::string served;
  for (const std::string& d : devices) absl::StrAppend(&served, served.empty() ? "" : ", ", d);
  std::string why;
  if (device.is_cuda() && cuda_device_count() == 0) {
    why = cuda_unavailable_reason.empty() ? "; it has no CUDA device"
                                          : absl::StrCat("; it has no CUDA device: ", cuda_unavailable_reason);
  }
  return RuntimeErr(absl::StrCat(op, op.empty() ? "" : ": ", "device ", device.ToString(),
                                 " is not available: this daemon serves ", served.empty() ? "no device" : served,
                                 why));
}

absl::StatusOr<std::shared_ptr<Session>> Session::Connect(absl::string_view address, SessionOptions options) {
  TD_RETURN_IF_ERROR(CheckDaemonAllowed("connect"));
  TD_RETURN_IF_ERROR(CheckConnectAllowedAfterFork("connect"));
  if (address.empty()) return RuntimeErr("Connect: empty daemon address (expected unix:/path or host:port)");
  if (address.find(':') == absl::string_view::npos) {
    // gRPC would look a bare socket path up as a host name (port 443) and
    // fail with a DNS error that does not say what was meant.
    return RuntimeErr(absl::StrCat("Connect: '", address, "' is not a daemon address (expected unix:/path or host:port",
                                   address.find('/') != absl::string_view::npos
                                       ? absl::StrCat("; for this socket write unix:", address, ")")
                                       : ")"));
  }
  std::shared_ptr<Session> s(new Session(std::move(options), std::string(address)));
  TD_RETURN_IF_ERROR(s->Start());
  internal::RegisterSession(s);
  return s;
}

absl::StatusOr<std::shared_ptr<Session>> Session::SpawnEmbedded(SessionOptions options) {
  TD_RETURN_IF_ERROR(CheckDaemonAllowed("spawning an embedded daemon"));
  TD_RETURN_IF_ERROR(CheckConnectAllowedAfterFork("spawning an embedded daemon"));
  TD_ASSIGN_OR_RETURN(std::string binary, internal::FindDaemonBinary(options.daemon_binary));
  TD_ASSIGN_OR_RETURN(internal::EmbeddedDaemon d, internal::StartEmbeddedDaemon(binary, options.spawn_timeout_ms));
  std::shared_ptr<Session> s(new Session(std::move(options), d.address));
  s->impl_->daemon = d;
  absl::Status st = s->Start();
  if (!st.ok()) {
    internal::StopEmbeddedDaemon(s->impl_->daemon);
    return st;
  }
  internal::RegisterSession(s);
  return s;
}

absl::Status Session::Start() {
  Impl& im = *impl_;
  const absl::StatusOr<int64_t> spin_ns = StreamSpinNanos(options_);
  if (!spin_ns.ok()) return spin_ns.status();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  // No transparent retries: gRPC would keep every message sent on the
  // stream (up to 256 KiB of them) for a replay until the daemon's first
  // reply, holding on to an upload's borrowed bytes, which Upload waits for
  // (an upload of 64-256 KiB as the stream's first message never returned).
  // A session stream is never replayed anyway: its requests are not
  // idempotent.
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  uint64_t never = 0;
  g_grpc_used_generation_plus1.compare_exchange_strong(
      never, internal::g_fork_generation.load(std::memory_order_relaxed) + 1);
  im.channel = grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args);
  im.stub = v1::Tensord::NewStub(im.channel);

  const OpTable& table = OpTable::Get();
  {
    v1::HandshakeRequest req;
    req.set_protocol_version(wire::kProtocolVersion);
    req.set_client_version(kClientVersion);
    req.set_op_table_digest(table.digest());
    for (std::string& line : table.Describe()) req.add_op_table(std::move(line));
    v1::HandshakeResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(internal::DeadlineIn(options_.connect_timeout_ms));
    grpc::Status st = im.stub->Handshake(&ctx, req, &resp);
    if (!st.ok()) return internal::GrpcError("cannot connect: the handshake failed", address_, st);
    if (!resp.accepted()) {
      return RuntimeErr(absl::StrCat("the tensord daemon at ", address_, " refused this client: ", resp.refusal()));
    }
    if (resp.protocol_version() != wire::kProtocolVersion) {
      return RuntimeErr(absl::StrCat("the tensord daemon at ", address_, " speaks protocol version ",
                                     resp.protocol_version(), ", this client speaks ", wire::kProtocolVersion));
    }
    if (resp.op_table_digest() != table.digest()) {
      return RuntimeErr(absl::StrCat("the tensord daemon at ", address_, " has a different op table (digest ",
                                     absl::Hex(resp.op_table_digest()), ", this client has ",
                                     absl::Hex(table.digest()), "); rebuild the client and the daemon together"));
    }
  }
  {
    v1::OpenSessionRequest req;
    req.set_client_name(options_.client_name);
    req.set_op_table_digest(table.digest());
    v1::OpenSessionResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(internal::DeadlineIn(options_.connect_timeout_ms));
    grpc::Status st = im.stub->OpenSession(&ctx, req, &resp);
    if (!st.ok()) return internal::GrpcError("cannot open a session", address_, st);
    session_id_ = resp.session_id();
    im.session_id = session_id_;
    im.token = resp.token();
    // What the daemon runs on: told to session holders only.
    daemon_info_.server_version = resp.server_version();
    daemon_info_.session_memory_limit_bytes = resp.session_memory_limit_bytes();
    daemon_info_.cuda_driver_version = resp.cuda_driver_version();
    daemon_info_.cuda_runtime_version = resp.cuda_runtime_version();
    daemon_info_.cuda_unavailable_reason = resp.cuda_unavailable_reason();
    const auto bytes = [](uint64_t v) {
      return static_cast<int64_t>(std::min<uint64_t>(v, static_cast<uint64_t>(INT64_MAX)));
    };
    for (const v1::DeviceInfo& d : resp.devices()) {
      // A device this client cannot name (a later release's kind) cannot be
      // asked for either: it is left out.
      absl::StatusOr<Device> device = ParseDevice(d.name());
      if (!device.ok() || device->is_meta()) continue;
      DeviceInfo info;
      info.device = *device;
      info.description = d.description();
      info.total_memory_bytes = bytes(d.total_memory_bytes());
      info.free_memory_bytes = bytes(d.free_memory_bytes());
      info.capability_major = d.capability_major();
      info.capability_minor = d.capability_minor();
      daemon_info_.devices.push_back(device->ToString());
      daemon_info_.device_info.push_back(std::move(info));
    }
    // The address gRPC's resolver chose ("ipv4:127.0.0.1:7070",
    // "ipv6:[::1]:7070"): the TCP stream connects to the same daemon there.
    daemon_peer_ = ctx.peer();
  }
  predict_backward_ = options_.predict_backward && !EnvSaysOff("TENSORD_PREDICT_BACKWARD");
  const bool shm_allowed = options_.transport.shared_memory && !EnvSaysOff("TENSORD_SHM");
  const bool sock_allowed = options_.transport.same_host_stream && !EnvSaysOff("TENSORD_SAME_HOST_STREAM");
  // Same host over a Unix socket: the shared-memory side channel and the
  // same-host stream, if the daemon offers them (silently gRPC otherwise).
  if (absl::StartsWith(address_, "unix:")) {
    absl::string_view path = absl::string_view(address_).substr(5);
    if (absl::StartsWith(path, "//")) path.remove_prefix(2);
    const std::string channel = wire::ShmSocketPath(path);
    // The side channel gets the session's token: only a peer running as the
    // daemon's user may have it. That user is the owner of the socket gRPC
    // just reached the daemon on (the daemon made it; anyone may see its
    // owner). A socket that cannot be looked at: no side channel.
    struct stat st;
    const bool owner_known = ::stat(std::string(path).c_str(), &st) == 0;
    // Someone else listening at the channel's path is an attack or a badly
    // broken setup, not a reason to fall back quietly: connect fails, saying
    // so (the session's token never went there).
    const auto refused = [&](const absl::Status& why) {
      return RuntimeErr(absl::StrCat("the tensord daemon at ", address_, ": ", why.message()));
    };
    if (shm_allowed && owner_known) {
      absl::StatusOr<std::shared_ptr<internal::ShmPool>> pool =
          internal::ShmPool::Connect(channel, session_id_, im.token, st.st_uid, options_.transport.shm_pool_bytes);
      if (pool.ok()) im.shm = *std::move(pool);
      if (absl::IsPermissionDenied(pool.status())) return refused(pool.status());
    }
    if (sock_allowed && owner_known) {
      // The hello attaches the stream: no attach message follows.
      absl::StatusOr<std::unique_ptr<internal::Transport>> t =
          internal::ConnectSameHostTransport(channel, session_id_, im.token, st.st_uid, *spin_ns);
      if (absl::IsPermissionDenied(t.status())) return refused(t.status());
      if (t.ok()) im.transport = *std::move(t);
    }
  } else if (options_.transport.tcp_stream && !EnvSaysOff("TENSORD_TCP_STREAM")) {
    // Over TCP: the stream on a connection of its own to the same port (the
    // hello attaches it), gRPC when that fails.
    // Where gRPC connected first: a name may resolve to addresses gRPC's
    // resolver and getaddrinfo order differently (localhost to ::1 or to
    // 127.0.0.1), and only one of them may be the daemon's.
    const int timeout_ms = std::max(1, std::min(options_.connect_timeout_ms, 10000));
    // Through a proxy (gRPC's peer is not an address the name resolves to)
    // the stream stays on gRPC.
    absl::StatusOr<std::unique_ptr<internal::Transport>> t =
        internal::ConnectTcpTransport(address_, session_id_, im.token, timeout_ms, daemon_peer_, *spin_ns);
    if (t.ok()) im.transport = *std::move(t);
  }
  if (im.transport == nullptr) TD_RETURN_IF_ERROR(AttachGrpcStream());
  return StartStreaming();
}

absl::Status Session::AttachGrpcStream() {
  Impl& im = *impl_;
  im.transport = internal::StartGrpcTransport(im.channel);
  // The attach carries a sync, and connect waits for its reply: a daemon
  // whose gRPC threads are all held by other session streams refuses the
  // call (ResourceExhausted, naming the streams that hold none), and that
  // is then the connect's error rather than the first sync point's. One
  // round trip per connect, on the gRPC stream only; not counted in
  // stats().round_trips (the caller waits for nothing of its own).
  absl::StatusOr<Impl::Sent> sync;
  {
    absl::MutexLock l(&im.mu);
    v1::Attach* attach = im.pending->mutable_attach();
    attach->set_session_id(session_id_);
    attach->set_token(im.token);
    sync = im.SendForReplyLocked(
        [&](uint64_t id, internal::Waiter&) { im.pending->add_requests()->mutable_sync()->set_request_id(id); });
  }
  // A failed write: the flush's error says what the daemon said as it ended
  // the call (StreamLost).
  absl::Status attached = sync.ok() ? im.Wait(*sync) : sync.status();
  if (!attached.ok()) {
    Close().IgnoreError();
    return attached;
  }
  return absl::OkStatus();
}

absl::Status Session::StartStreaming() {
  Impl& im = *impl_;
  const std::optional<uint64_t> seed = internal::LastManualSeed();
  if (seed.has_value()) TD_RETURN_IF_ERROR(SendManualSeed(*seed));
  if (const MathMode math = internal::LastMathMode(); math != MathMode()) TD_RETURN_IF_ERROR(SendMathMode(math));
  int flush_us = options_.flush_interval_us;
  if (flush_us < 0) {  // not chosen by the caller: the environment's, else 2 ms
    const char* env = std::getenv("TENSORD_FLUSH_US");
    flush_us = env != nullptr && *env != '\0' ? std::atoi(env) : 2000;
  }
  if (flush_us > 0) {
    {
      absl::MutexLock l(&im.mu);
      im.flush_interval = std::chrono::microseconds(flush_us);
    }
    im.flusher = std::thread([&im] {
      pthread_setname_np(pthread_self(), "tensord-flush");  // shows in top -H and /proc/PID/task
      im.FlushLoop();
    });
  }
  return absl::OkStatus();
}

}  // namespace tensord::client
