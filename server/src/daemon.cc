// The daemon around the service: options, listening, shutdown.
#include "tensord/server/daemon.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "grpcpp/resource_quota.h"
#include "health.h"
#include "side_channel.h"
#include "tensord/transport/shm.h"
#include "tensord/transport/socket_stream.h"
#include "unix_socket.h"

namespace tensord::server {
namespace {

struct ListenAddress {
  bool is_unix = false;
  std::string path;       // unix
  std::string host;       // tcp, without brackets
  int port = 0;           // tcp
};

absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view text) {
  ListenAddress a;
  if (absl::StartsWith(text, "unix:")) {
    absl::string_view path = text.substr(5);
    if (absl::StartsWith(path, "//")) path.remove_prefix(2);  // unix:///abs/path
    if (path.empty()) return absl::InvalidArgumentError(absl::StrCat("'", text, "': empty Unix socket path"));
    if (path.find('\0') != absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("'", text, "': NUL byte in the socket path"));
    }
    if (path.size() >= sizeof(sockaddr_un{}.sun_path)) {
      return absl::InvalidArgumentError(absl::StrCat("'", text, "': the socket path is ", path.size(),
                                                     " bytes long; Unix sockets allow at most ",
                                                     sizeof(sockaddr_un{}.sun_path) - 1));
    }
    a.is_unix = true;
    a.path = std::string(path);
    return a;
  }
  absl::StatusOr<wire::HostPort> hp = wire::ParseHostPort(text);
  if (!hp.ok()) {
    if (text.find(':') == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", text, "': expected unix:PATH or HOST:PORT (e.g. 127.0.0.1:7070)"));
    }
    return hp.status();
  }
  a.host = std::move(hp->host);
  a.port = hp->port;
  return a;
}

// The directory a Unix socket's path lies in.
std::string SocketDirectory(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

// A listening Unix stream socket at `path` (close-on-exec), or why not, as
// the OS says it.
absl::StatusOr<int> ListenUnix(const std::string& path) {
  sockaddr_un sa;
  if (!FillSockaddr(path, &sa)) return absl::InvalidArgumentError("path too long");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket(): ", std::strerror(errno)));
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) != 0) {
    std::string why = std::strerror(errno);
    if (errno == ENOENT) {
      absl::StrAppend(&why, " (the directory ", SocketDirectory(path), " does not exist; create it first)");
    }
    ::close(fd);
    return absl::UnavailableError(why);
  }
  if (::listen(fd, 1024) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    ::unlink(path.c_str());
    return absl::UnavailableError(why);
  }
  return fd;
}

}  // namespace

bool FillSockaddr(const std::string& path, sockaddr_un* sa) {
  std::memset(sa, 0, sizeof(*sa));
  sa->sun_family = AF_UNIX;
  if (path.size() >= sizeof(sa->sun_path)) return false;
  std::memcpy(sa->sun_path, path.data(), path.size());
  return true;
}

absl::Status PrepareUnixSocket(const std::string& path, int type) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat("cannot inspect ", path, ": ", std::strerror(errno)));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " exists and is not a socket; refusing to replace it (move it away, or listen on another path)"));
  }
  sockaddr_un sa;
  if (!FillSockaddr(path, &sa)) return absl::InvalidArgumentError(absl::StrCat(path, ": path too long"));
  // Whether anything accepts connections there, of our type or any other: a
  // listener of another type is as live as one of ours. Clients hand the
  // side channel their session's token, so a path something else listens
  // on must not be taken over (the client would still reach that listener
  // until the file is gone) nor left to it.
  int err = 0;
  bool stale = true;
  const int types[] = {type, SOCK_STREAM, SOCK_SEQPACKET, SOCK_DGRAM};
  for (const int t : types) {
    if (t != type && err != EPROTOTYPE) break;  // refused for our type: nobody listens
    const int fd = ::socket(AF_UNIX, t | SOCK_CLOEXEC, 0);
    if (fd < 0) return absl::InternalError(absl::StrCat("socket(): ", std::strerror(errno)));
    const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa));
    const int e = errno;
    ::close(fd);
    if (rc == 0) {
      return absl::AlreadyExistsError(absl::StrCat(
          "socket ", path, " is in use: something (another tensord, or another program) accepts connections on "
          "it; stop it, or give this daemon another --listen path"));
    }
    if (t == type) err = e;
    if (e != ECONNREFUSED && e != EPROTOTYPE) {
      stale = false;
      err = e;
      break;
    }
  }
  // Nobody listens (connect() is refused for every type): a stale file from
  // a daemon that did not shut down cleanly.
  if (stale) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot remove the stale socket ", path, ": ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat("cannot check whether ", path, " is in use: ", std::strerror(err),
                                                    "; refusing to replace it"));
}


absl::StatusOr<int64_t> ParseByteSize(absl::string_view text) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  size_t digits = 0;
  while (digits < t.size() && absl::ascii_isdigit(static_cast<unsigned char>(t[digits]))) ++digits;
  int64_t n = 0;
  if (digits == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not a byte count (e.g. 1073741824, 512MiB, 2G, 4GB)"));
  }
  if (!absl::SimpleAtoi(t.substr(0, digits), &n)) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is too large"));
  }
  const std::string unit = absl::AsciiStrToLower(absl::StripAsciiWhitespace(t.substr(digits)));
  if (!unit.empty() && (unit[0] == '.' || unit[0] == ',')) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "': a byte count is a whole number (write 1.5G as 1536M)"));
  }
  const bool hex = t.substr(0, digits) == "0" && unit.size() > 1 && unit[0] == 'x' && absl::ascii_isxdigit(unit[1]);
  const bool exponent = unit.size() > 1 && unit[0] == 'e' && (absl::ascii_isdigit(unit[1]) || unit[1] == '+' ||
                                                              unit[1] == '-');
  if (hex || exponent) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "': a byte count is a decimal integer with an optional unit (no hex, no exponent)"));
  }
  // K, M, G, T and KiB...TiB are powers of 1024 (as systemd's and ulimit's
  // sizes); KB, MB, GB, TB are powers of 1000 (SI, as disk sizes).
  static constexpr std::pair<absl::string_view, int64_t> kUnits[] = {
      {"", 1},           {"b", 1},
      {"k", 1LL << 10},  {"kib", 1LL << 10}, {"kb", 1000LL},
      {"m", 1LL << 20},  {"mib", 1LL << 20}, {"mb", 1000LL * 1000},
      {"g", 1LL << 30},  {"gib", 1LL << 30}, {"gb", 1000LL * 1000 * 1000},
      {"t", 1LL << 40},  {"tib", 1LL << 40}, {"tb", 1000LL * 1000 * 1000 * 1000},
  };
  int64_t scale = 0;
  for (const auto& [name, factor] : kUnits) {
    if (unit == name) scale = factor;
  }
  if (scale == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", text, "': unknown unit '", unit, "' (expected K, M, G, T or KiB..TiB, powers of 1024; KB..TB, of 1000)"));
  }
  if (n > INT64_MAX / scale) return absl::InvalidArgumentError(absl::StrCat("'", text, "' is too large"));
  return n * scale;
}

absl::StatusOr<int> ParseGrpcThreads(absl::string_view text) {
  int n = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &n) || n < kReservedGrpcThreads + 8 ||
      n > kMaxGrpcThreads) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a gRPC thread count from ",
                                                   kReservedGrpcThreads + 8, " to ", kMaxGrpcThreads, " (",
                                                   kReservedGrpcThreads, " of them never serve session streams)"));
  }
  return n;
}

int64_t DefaultSessionMemoryLimit() {
  int64_t usable = INT64_MAX;
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0 && pages <= INT64_MAX / page_size) usable = static_cast<int64_t>(pages) * page_size;
  // cgroup v2 (a container, a systemd unit's MemoryMax=): "max" or a byte count.
  std::ifstream cgroup("/sys/fs/cgroup/memory.max");
  std::string line;
  int64_t cap = 0;
  if (std::getline(cgroup, line) && absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &cap) && cap > 0) {
    usable = std::min(usable, cap);
  }
  if (usable == INT64_MAX) return int64_t{16} << 30;  // nothing known: a limit all the same
  return std::max<int64_t>(usable / 2, int64_t{64} << 20);
}

absl::StatusOr<int> ParseMaxSessionsPerPeer(absl::string_view text) {
  int n = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &n) || n < 0 || n > 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", text, "' is not a session count from 0 (no limit per peer) to 1024 (the daemon's limit)"));
  }
  return n;
}

absl::Status ApplyConfigFile(const std::string& path, DaemonOptions* options) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read config file ", path, ": ", std::strerror(errno)));
  std::string line;
  int lineno = 0;
  std::vector<std::string> listen;
  while (std::getline(in, line)) {
    ++lineno;
    absl::string_view l = line;
    // A '#' at the start or after a space or tab starts a comment, to the
    // end of the line ("cpu_cache_limit_bytes = 1GiB  # daemon-wide").
    for (size_t i = 0; i < l.size(); ++i) {
      if (l[i] == '#' && (i == 0 || l[i - 1] == ' ' || l[i - 1] == '\t')) {
        l = l.substr(0, i);
        break;
      }
    }
    l = absl::StripAsciiWhitespace(l);
    if (l.empty()) continue;
    const size_t eq = l.find('=');
    auto where = [&] { return absl::StrCat(path, ":", lineno, ": "); };
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(where(), "expected 'key = value', got '", l, "'"));
    }
    const std::string key = absl::AsciiStrToLower(absl::StripAsciiWhitespace(l.substr(0, eq)));
    const absl::string_view value = absl::StripAsciiWhitespace(l.substr(eq + 1));
    if (key == "listen") {
      for (absl::string_view a : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
        listen.emplace_back(absl::StripAsciiWhitespace(a));
      }
    } else if (key == "session_memory_limit_bytes") {
      absl::StatusOr<int64_t> n = ParseByteSize(value);
      if (!n.ok()) return absl::InvalidArgumentError(absl::StrCat(where(), n.status().message()));
      options->session_memory_limit_bytes = *n;
    } else if (key == "cuda_session_memory_limit_bytes") {
      absl::StatusOr<int64_t> n = ParseByteSize(value);
      if (!n.ok()) return absl::InvalidArgumentError(absl::StrCat(where(), n.status().message()));
      options->cuda_session_memory_limit_bytes = *n;
    } else if (key == "cpu_cache_limit_bytes") {
      absl::StatusOr<int64_t> n = ParseByteSize(value);
      if (!n.ok()) return absl::InvalidArgumentError(absl::StrCat(where(), n.status().message()));
      options->cpu_cache_limit_bytes = *n;
    } else if (key == "stream_spin_us") {
      absl::StatusOr<int64_t> us = wire::ParseStreamSpinMicros(value);
      if (!us.ok()) return absl::InvalidArgumentError(absl::StrCat(where(), us.status().message()));
      options->stream_spin = absl::Microseconds(*us);
    } else if (key == "grpc_threads") {
      absl::StatusOr<int> n = ParseGrpcThreads(value);
      if (!n.ok()) return absl::InvalidArgumentError(absl::StrCat(where(), n.status().message()));
      options->grpc_threads = *n;
    } else if (key == "max_sessions_per_peer") {
      absl::StatusOr<int> n = ParseMaxSessionsPerPeer(value);
      if (!n.ok()) return absl::InvalidArgumentError(absl::StrCat(where(), n.status().message()));
      options->max_sessions_per_peer = *n;
    } else if (key == "log_level") {
      absl::StatusOr<LogLevel> lv = runtime::ParseLogLevel(value);
      if (!lv.ok()) return absl::InvalidArgumentError(absl::StrCat(where(), lv.status().message()));
      options->log_level = *lv;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          where(), "unknown key '", key,
          "' (expected listen, session_memory_limit_bytes, cuda_session_memory_limit_bytes, cpu_cache_limit_bytes, "
          "log_level, stream_spin_us, grpc_threads or max_sessions_per_peer)"));
    }
  }
  if (!listen.empty()) options->listen = std::move(listen);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const DaemonOptions& options) {
  if (options.listen.empty()) {
    return absl::InvalidArgumentError("no address to listen on (give --listen unix:PATH or --listen HOST:PORT)");
  }
  if (options.grpc_threads < kReservedGrpcThreads + 8) {
    return absl::InvalidArgumentError(absl::StrCat("grpc_threads ", options.grpc_threads, " is below ",
                                                   kReservedGrpcThreads + 8, " (", kReservedGrpcThreads,
                                                   " reserved for health checks and opening and closing sessions, "
                                                   "at least 8 for session streams)"));
  }
  std::vector<ListenAddress> addrs;
  for (const std::string& text : options.listen) {
    absl::StatusOr<ListenAddress> a = ParseListenAddress(text);
    if (!a.ok()) return a.status();
    addrs.push_back(*std::move(a));
  }
  for (const ListenAddress& a : addrs) {
    if (!a.is_unix) continue;
    if (absl::Status s = PrepareUnixSocket(a.path, SOCK_STREAM); !s.ok()) return s;
    // Its shared-memory side channel too: clients send it their session's
    // token, so the daemon must own it or not start.
    if (absl::Status s = PrepareUnixSocket(wire::ShmSocketPath(a.path), SOCK_SEQPACKET); !s.ok()) return s;
  }
  // Every address is the daemon's own listening socket: it accepts the
  // connections and hands gRPC's to the server (side_channel.h), so that it
  // knows who each one comes from (sessions are counted per peer: a TCP
  // client's address, a Unix client's uid, which gRPC's own listeners do
  // not tell) and so that tensord's TCP streams share the TCP port. Bound
  // first, so that a port in use or a path that cannot be bound fails here
  // with the OS's reason.
  std::vector<std::vector<int>> fds(addrs.size());
  std::vector<int> ports(addrs.size(), 0);
  const auto close_all = [&] {
    for (size_t i = 0; i < addrs.size(); ++i) {
      for (int fd : fds[i]) ::close(fd);
      if (addrs[i].is_unix && !fds[i].empty()) ::unlink(addrs[i].path.c_str());  // ours
      fds[i].clear();
    }
  };
  for (size_t i = 0; i < addrs.size(); ++i) {
    if (addrs[i].is_unix) {
      absl::StatusOr<int> fd = ListenUnix(addrs[i].path);
      if (!fd.ok()) {
        close_all();
        return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen[i], ": ", fd.status().message()));
      }
      fds[i].push_back(*fd);
      continue;
    }
    absl::StatusOr<std::vector<int>> tcp = SideChannelServer::ListenTcp(addrs[i].host, addrs[i].port, &ports[i]);
    if (!tcp.ok()) {
      close_all();
      return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen[i], ": ", tcp.status().message()));
    }
    fds[i] = *std::move(tcp);
  }

  std::unique_ptr<Daemon> d(new Daemon());
  d->options_ = options;
  if (d->options_.session_memory_limit_bytes < 0) d->options_.session_memory_limit_bytes = DefaultSessionMemoryLimit();
  ServiceOptions so;
  so.session_memory_limit_bytes = d->options_.session_memory_limit_bytes;
  so.cpu_allocator.cache_limit_bytes = options.cpu_cache_limit_bytes;
  so.cpu_allocator.uninitialized_fill = options.uninitialized_fill;
  so.stream_spin = options.stream_spin;
  so.test_device = options.test_device;
  so.artifacts = options.artifacts;
  so.test_device_fault_at_launch = options.test_device_fault_at_launch;
  so.cuda_session_memory_limit_bytes = options.cuda_session_memory_limit_bytes;
  so.max_grpc_streams = static_cast<size_t>(options.grpc_threads - kReservedGrpcThreads);
  so.attach_timeout = options.attach_timeout;
  so.max_sessions_per_peer = static_cast<size_t>(options.max_sessions_per_peer);
  so.max_connections_per_peer = 2 * so.max_sessions_per_peer;
  absl::StatusOr<std::unique_ptr<TensordService>> service = TensordService::Create(so);
  if (!service.ok()) {
    close_all();
    return service.status();
  }
  d->service_ = *std::move(service);

  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  builder.AddChannelArgument(
      GRPC_ARG_MAX_CONNECTION_IDLE_MS,
      static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(options.idle_connection_timeout), 1,
                                           std::numeric_limits<int>::max())));
  grpc::ResourceQuota quota("tensord");
  quota.SetMaxThreads(options.grpc_threads);
  builder.SetResourceQuota(quota);
  builder.RegisterService(d->service_.get());
  d->health_ = std::make_shared<HealthService>();
  builder.RegisterService(d->health_.get());
  d->server_ = builder.BuildAndStart();
  if (d->server_ == nullptr) {
    close_all();
    return absl::UnavailableError(absl::StrCat("cannot start the gRPC server for ", absl::StrJoin(options.listen, ", ")));
  }
  // The acceptors of the Unix gRPC sockets go last (side_channels()).
  std::vector<std::unique_ptr<SideChannelServer>> unix_acceptors;
  for (size_t i = 0; i < addrs.size(); ++i) {
    if (addrs[i].is_unix) {
      d->addresses_.push_back(absl::StrCat("unix:", addrs[i].path));
      d->socket_paths_.push_back(addrs[i].path);
      unix_acceptors.push_back(SideChannelServer::StartUnixGrpc(fds[i][0], d->service_.get(), d->server_.get()));
    } else {
      d->addresses_.push_back(wire::FormatHostPort(addrs[i].host, ports[i]));
      for (int fd : fds[i]) {
        d->side_channels_.push_back(SideChannelServer::StartTcp(fd, d->service_.get(), d->server_.get()));
      }
    }
    fds[i].clear();  // the acceptors' now
  }
  // Same-host clients of a Unix socket get the shared-memory side channel.
  // The daemon must own its path (checked above; bind fails if something
  // took it since): a client that found another listener there would hand
  // it its token, so the daemon does not start without it (its destructor
  // then stops what started and removes its sockets).
  for (const std::string& path : d->socket_paths_) {
    absl::StatusOr<std::unique_ptr<SideChannelServer>> c =
        SideChannelServer::Start(wire::ShmSocketPath(path), d->service_.get());
    if (!c.ok()) {
      return absl::UnavailableError(absl::StrCat("cannot serve the shared-memory channel beside ", path, ": ",
                                                 c.status().message()));
    }
    d->side_channels_.push_back(*std::move(c));
  }
  for (auto& a : unix_acceptors) d->side_channels_.push_back(std::move(a));
  // A device that fails for good (a GPU fault): NOT_SERVING at once, and the
  // service refuses every session's next message and new sessions with the
  // failure (it asks runtime::DeviceFailed); the caller's hook ends the
  // process. Nothing here waits: it runs inside the call that saw the fault.
  runtime::SetDeviceFailureHandler(
      [health = d->health_, hook = options.on_device_failure](const Device& device, const std::string& why) {
        health->Shutdown();
        if (hook) hook(absl::StrCat(device.ToString(), " failed (", why, ")"));
      });
  d->handles_device_failures_ = true;
  Log(LogLevel::kInfo, "tensord ", DaemonVersion(), " listening on ", absl::StrJoin(d->addresses_, ", "),
      d->options_.session_memory_limit_bytes > 0
          ? absl::StrCat("; session memory limit ", FormatBytes(d->options_.session_memory_limit_bytes))
          : std::string("; no session memory limit"),
      "; cpu cache up to ", FormatBytes(d->service_->cpu_cache_stats().limit_bytes),
      "; same-host and tcp streams poll ", absl::ToInt64Microseconds(options.stream_spin), " us before sleeping",
      options.cuda_session_memory_limit_bytes > 0
          ? absl::StrCat("; per-session limit on each cuda device ",
                         FormatBytes(options.cuda_session_memory_limit_bytes))
          : std::string(),
      options.test_device ? "; serving the test device privateuseone:0" : "",
      options.test_device_fault_at_launch > 0
          ? absl::StrCat(" (a simulated fault at its kernel launch ", options.test_device_fault_at_launch, ")")
          : std::string());
  return d;
}

Daemon::~Daemon() { Shutdown(); }

void Daemon::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (health_) health_->Shutdown();
  // Sessions first, so that each is closed (and logged) as "daemon shutting
  // down"; then the side channels and TCP acceptors, whose streams have
  // ended with their sessions.
  if (service_) service_->BeginShutdown();
  for (auto& c : side_channels_) c->Stop();
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(absl::ToInt64Milliseconds(options_.shutdown_grace)));
    server_->Wait();
  }
  for (const std::string& path : socket_paths_) {
    struct stat st;
    if (::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(path.c_str());
  }
  if (handles_device_failures_) runtime::SetDeviceFailureHandler(nullptr);
  Log(LogLevel::kInfo, "tensord stopped");
}

}  // namespace tensord::server
