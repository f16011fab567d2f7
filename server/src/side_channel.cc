// The side channels' listeners and connections (see side_channel.h).
#include "side_channel.h"

#include <fcntl.h>
#include <malloc.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>

#include <grpcpp/server.h>
#include <grpcpp/server_posix.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tensord/runtime/log.h"
#include "tensord/server/session.h"
#include "tensord/transport/shm.h"
#include "tensord/transport/socket_stream.h"
#include "unix_socket.h"

namespace tensord::server {

using runtime::Log;
using runtime::LogLevel;
namespace {

// "ADDRESS:PORT" of a TCP socket's peer ("?" when unknown).
std::string PeerName(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0 ||
      ::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof(host), port, sizeof(port),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "?";
  }
  int p = 0;
  return absl::SimpleAtoi(port, &p) ? wire::FormatHostPort(host, p) : "?";
}

// What a TCP socket's peer is counted as (PeerGroup; "?" when unknown).
std::string PeerAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return PeerGroup(reinterpret_cast<const sockaddr*>(&ss));
}

}  // namespace

std::string PeerGroup(const sockaddr* addr) {
  char text[INET6_ADDRSTRLEN];
  if (addr->sa_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(addr);
    return ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text)) != nullptr ? std::string(text) : "?";
  }
  if (addr->sa_family != AF_INET6) return "?";
  in6_addr a = reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(&a)) {
    // A dual-stack socket's IPv4 client: the same peer as on an IPv4 socket.
    in_addr v4;
    std::memcpy(&v4, &a.s6_addr[12], sizeof(v4));
    return ::inet_ntop(AF_INET, &v4, text, sizeof(text)) != nullptr ? std::string(text) : "?";
  }
  if (IN6_IS_ADDR_LOOPBACK(&a)) return "::1";
  std::memset(&a.s6_addr[8], 0, 8);
  return ::inet_ntop(AF_INET6, &a, text, sizeof(text)) != nullptr ? absl::StrCat(text, "/64") : "?";
}

absl::StatusOr<std::unique_ptr<SideChannelServer>> SideChannelServer::Start(const std::string& path,
                                                                           TensordService* service) {
  sockaddr_un sa;
  if (!FillSockaddr(path, &sa)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": too long for a Unix socket path"));
  }
  if (absl::Status s = PrepareUnixSocket(path, SOCK_SEQPACKET); !s.ok()) return s;
  std::unique_ptr<SideChannelServer> c(new SideChannelServer());
  c->kind_ = Kind::kShm;
  c->path_ = path;
  c->service_ = service;
  c->listen_fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (c->listen_fd_ < 0) return absl::InternalError(absl::StrCat("socket(): ", std::strerror(errno)));
  if (::bind(c->listen_fd_, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot bind ", path, ": ", std::strerror(errno)));
  }
  // Owner only, before anyone can connect (connect needs listen).
  if (::chmod(path.c_str(), 0600) != 0 || ::listen(c->listen_fd_, 64) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(path.c_str());
    return absl::UnavailableError(absl::StrCat("cannot listen on ", path, ": ", why));
  }
  if (::pipe2(c->wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    ::unlink(path.c_str());
    return absl::InternalError(absl::StrCat("pipe2(): ", std::strerror(errno)));
  }
  c->StartAccepting();
  return c;
}

absl::StatusOr<std::vector<int>> SideChannelServer::ListenTcp(const std::string& host, int port, int* bound_port) {
  const std::string where = wire::FormatHostPort(host, port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string service = absl::StrCat(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0) {
    return absl::UnavailableError(gai_strerror(rc));
  }
  std::vector<int> fds;
  std::string why;
  int chosen = port;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // restart while old connections linger
    // Port 0: the port chosen for the first address, for the others too.
    if (chosen != 0) {
      if (ai->ai_family == AF_INET) reinterpret_cast<sockaddr_in*>(ai->ai_addr)->sin_port = htons(chosen);
      if (ai->ai_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(ai->ai_addr)->sin6_port = htons(chosen);
    }
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, 1024) != 0) {
      if (why.empty()) {
        why = std::strerror(errno);
        if (errno == EADDRINUSE) why += " (is another daemon running?)";
      }
      ::close(fd);
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (chosen == 0 && ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
      chosen = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                        : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    }
    fds.push_back(fd);
  }
  ::freeaddrinfo(res);
  if (fds.empty()) {
    return absl::UnavailableError(why.empty() ? absl::StrCat("no usable address for ", where) : why);
  }
  *bound_port = chosen;
  return fds;
}

std::unique_ptr<SideChannelServer> SideChannelServer::StartTcp(int listen_fd, TensordService* service,
                                                               grpc::Server* grpc_server) {
  std::unique_ptr<SideChannelServer> c(new SideChannelServer());
  c->kind_ = Kind::kTcp;
  c->service_ = service;
  c->grpc_server_ = grpc_server;
  c->listen_fd_ = listen_fd;
  if (::pipe2(c->wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    // Without the pipe Stop could not wake the acceptor: serve nothing
    // (the port then refuses every connection) rather than hang at exit.
    Log(LogLevel::kError, "tcp port: pipe2(): ", std::strerror(errno), "; not accepting connections");
    return c;
  }
  c->StartAccepting();
  return c;
}

std::unique_ptr<SideChannelServer> SideChannelServer::StartUnixGrpc(int listen_fd, TensordService* service,
                                                                    grpc::Server* grpc_server) {
  std::unique_ptr<SideChannelServer> c(new SideChannelServer());
  c->kind_ = Kind::kUnixGrpc;
  c->service_ = service;
  c->grpc_server_ = grpc_server;
  c->listen_fd_ = listen_fd;
  if (::pipe2(c->wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    Log(LogLevel::kError, "unix socket: pipe2(): ", std::strerror(errno), "; not accepting connections");
    return c;
  }
  c->StartAccepting();
  return c;
}

void SideChannelServer::StartAccepting() {
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

SideChannelServer::~SideChannelServer() {
  Stop();
  for (int fd : {listen_fd_, wake_[0], wake_[1]}) {
    if (fd >= 0) ::close(fd);
  }
}

void SideChannelServer::Stop() {
  {
    absl::MutexLock l(&mu_);
    if (stopping_) return;
    stopping_ = true;
    for (int fd : conns_) ::shutdown(fd, SHUT_RDWR);  // wakes their threads
  }
  Wake(kWakeToStop);
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> threads;
  {
    absl::MutexLock l(&mu_);
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
  struct stat st;
  if (!path_.empty() && ::lstat(path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(path_.c_str());
}

void SideChannelServer::Wake(char why) {
  if (wake_[1] < 0) return;
  // Non-blocking: a full pipe already holds a wake-up for the acceptor.
  while (::write(wake_[1], &why, 1) < 0 && errno == EINTR) {
  }
}

bool SideChannelServer::Woken() {
  char buf[256];
  bool stop = false;
  ssize_t n;
  while ((n = ::read(wake_[0], buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR)) {
    for (ssize_t i = 0; i < n; ++i) stop = stop || buf[i] == kWakeToStop;
  }
  bool idle = false;
  {
    absl::MutexLock l(&mu_);
    if (stop || stopping_) return true;
    ReapFinished();
    idle = trim_when_idle_ && threads_.empty();
    if (idle) {
      trim_when_idle_ = false;
      ++trims_;
    }
  }
  // The last connection's thread is gone, and with it what it freed on
  // its way out (after its session closed and the service trimmed): glibc
  // gives those arenas' free pages back too, so that the daemon shrinks to
  // where it started when its clients leave. Only after a session's stream
  // or channel ended: a trim walks the whole heap, too slow to do for every
  // gRPC connection or probe of the port.
  if (idle) malloc_trim(0);
  return false;
}

void SideChannelServer::ReapFinished() {
  for (std::thread::id id : finished_) {
    auto it = std::find_if(threads_.begin(), threads_.end(), [&](const std::thread& t) { return t.get_id() == id; });
    if (it != threads_.end()) {
      it->join();  // it has returned from Serve: joins at once
      threads_.erase(it);
    }
  }
  finished_.clear();
}

void SideChannelServer::AcceptLoop() {
  for (;;) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    const int r = ::poll(p, 2, -1);
    if (r < 0 && errno != EINTR) return;
    if (p[1].revents != 0 && Woken()) return;
    if (r <= 0 || (p[0].revents & POLLIN) == 0) continue;
    // gRPC's event engine wants its sockets non-blocking: a Unix gRPC
    // connection goes to it at once.
    const int fd = ::accept4(listen_fd_, nullptr, nullptr,
                             SOCK_CLOEXEC | (kind_ == Kind::kUnixGrpc ? SOCK_NONBLOCK : 0));
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors or memory: the connection stays queued and the
        // socket readable, so retrying at once would spin. Say so (the
        // first time and every 1,000th) and retry in 100 ms (Stop still
        // wakes the wait).
        if (accept_failures_++ % 1000 == 0) {
          Log(LogLevel::kError, Label(), ": cannot accept: ", std::strerror(errno), " (", accept_failures_,
              " so far; raise the daemon's open-file limit, e.g. LimitNOFILE= under systemd)");
        }
        pollfd w{wake_[0], POLLIN, 0};
        if (::poll(&w, 1, 100) > 0 && Woken()) return;
      }
      continue;
    }
    ucred cred{};
    socklen_t len = sizeof(cred);
    std::string peer;
    if (tcp()) {
      // TCP: small messages go out at once, for gRPC's connections as for
      // ours (gRPC sets the same on the connections it accepts itself).
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      peer = PeerAddress(fd);
    } else if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      Log(LogLevel::kWarning, Label(), ": cannot learn a connection's peer (", std::strerror(errno), "); closed it");
      ::close(fd);
      continue;
    } else if (kind_ == Kind::kUnixGrpc) {
      // Anyone the socket file's permissions let in: their calls are
      // counted by their user (sessions per peer).
      bool stop;
      {
        absl::MutexLock l(&mu_);
        stop = stopping_;
      }
      if (stop) {
        ::close(fd);
        return;
      }
      if (service_ != nullptr && !service_->AdmitConnection(fd, absl::StrCat("uid ", cred.uid))) {
        ::close(fd);
        continue;
      }
      grpc::AddInsecureChannelFromFd(grpc_server_, fd);
      continue;
    } else if (cred.uid != ::geteuid() && cred.uid != 0) {
      Log(LogLevel::kWarning, "shared-memory channel: refused a connection from uid ", cred.uid, " (pid ", cred.pid,
          "): not the daemon's user");
      ::close(fd);
      continue;
    }
    absl::MutexLock l(&mu_);
    ReapFinished();
    if (stopping_) {
      ::close(fd);
      return;
    }
    if (!tcp() && pending_.size() >= static_cast<size_t>(kMaxPendingHellos)) {
      // The side channel's peers are the daemon's user: the new one goes.
      // Logged for the first and then every 1,000th, so that a loop of
      // connections cannot flood the log either.
      if (refused_++ % 1000 == 0) {
        Log(LogLevel::kWarning, Label(), ": ", kMaxPendingHellos,
            " connections are already waiting for their first frame; closed the new one (", refused_, " so far)");
      }
      ::close(fd);
      continue;
    }
    if (tcp()) EvictForNewPending(peer);
    pending_.push_back(Pending{fd, peer});
    conns_.push_back(fd);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kHelloTimeoutSeconds);
    try {
      threads_.emplace_back([this, fd, deadline] { Serve(fd, deadline); });
    } catch (const std::exception& e) {
      // Out of threads (or memory): this connection is closed and the
      // daemon goes on serving the others; the next accept waits a little,
      // as when out of descriptors.
      pending_.pop_back();
      conns_.pop_back();
      ::close(fd);
      if (thread_failures_++ % 1000 == 0) {
        Log(LogLevel::kWarning, Label(),
            ": cannot start a thread for a connection (", e.what(), "); closed it (", thread_failures_, " so far)");
      }
      mu_.Unlock();
      pollfd w{wake_[0], POLLIN, 0};
      const bool stop = ::poll(&w, 1, 100) > 0 && Woken();
      mu_.Lock();
      if (stop) return;
    }
  }
}

void SideChannelServer::EvictForNewPending(const std::string& peer) {
  // Anyone may connect to a TCP port: a connection that waited goes (its
  // thread sees the socket shut and leaves), so that idle or half-open
  // connections cannot keep new clients out. Which one: this peer's oldest
  // when it has its share waiting already, else (all pending full) the
  // oldest of the peer with the most waiting. One address flooding the port
  // pushes out only its own connections; a slow client from another
  // address keeps its place.
  size_t mine = 0;
  absl::flat_hash_map<absl::string_view, size_t> per_peer;
  for (const Pending& p : pending_) {
    if (p.peer == peer) ++mine;
    ++per_peer[p.peer];
  }
  std::string victim;
  if (mine >= static_cast<size_t>(kMaxPendingPerPeer)) {
    victim = peer;
  } else if (pending_.size() >= static_cast<size_t>(kMaxPendingHellos)) {
    size_t most = 0;
    for (const auto& [who, n] : per_peer) {
      if (n > most) {
        most = n;
        victim = std::string(who);
      }
    }
  } else {
    return;
  }
  auto it = std::find_if(pending_.begin(), pending_.end(), [&](const Pending& p) { return p.peer == victim; });
  if (it == pending_.end()) return;
  // Logged for the first and then every 1,000th, so that a loop of
  // connections cannot flood the log either.
  if (refused_++ % 1000 == 0) {
    Log(LogLevel::kWarning, "tcp port: ", mine >= static_cast<size_t>(kMaxPendingPerPeer)
                                              ? absl::StrCat(mine, " connections from ", peer)
                                              : absl::StrCat(pending_.size(), " connections"),
        " are already waiting for their first frame; closed the one from ", victim, " that waited longest (",
        refused_, " so far)");
  }
  ::shutdown(it->fd, SHUT_RDWR);
  pending_.erase(it);
}

void SideChannelServer::HelloDone(int fd) {
  absl::MutexLock l(&mu_);
  HelloDoneLocked(fd);
}

void SideChannelServer::HelloDoneLocked(int fd) {
  auto it = std::find_if(pending_.begin(), pending_.end(), [fd](const Pending& p) { return p.fd == fd; });
  if (it != pending_.end()) pending_.erase(it);  // else pushed out by a newer one (TCP)
}

void SideChannelServer::LogRefusedHello(absl::string_view who, const absl::Status& why) {
  uint64_t n;
  {
    absl::MutexLock l(&mu_);
    n = ++refused_hellos_;
  }
  // The first and then every 1,000th: peers that send junk in a loop
  // cannot flood the log.
  if (n % 1000 == 1) {
    Log(LogLevel::kWarning, who, ": hello refused: ", why.message(), n > 1 ? absl::StrCat(" (", n, " refused so far)") : "");
  }
}

void SideChannelServer::Forget(int fd) {
  conns_.erase(std::find(conns_.begin(), conns_.end(), fd));
  Finished();
}

void SideChannelServer::Finished() {
  // Joined by the acceptor, woken for it: a finished thread's stack stays
  // mapped (and partly resident) until it is joined.
  finished_.push_back(std::this_thread::get_id());
  Wake(kWakeToReap);
}

SideChannelServer::FirstBytes SideChannelServer::Sniff(int fd, std::chrono::steady_clock::time_point deadline) {
  // The first bytes, peeked (they stay for whoever reads next). A ShmFrame
  // begins with tensord's magic: ours as soon as 4 bytes show it. gRPC's
  // connection begins with HTTP/2's 24-byte preface and the client's first
  // SETTINGS frame: handed over only once the preface and that frame's
  // header came, which gRPC's own listener also waits for (within its
  // handshake deadline) before it takes a connection on. Anything else is
  // closed without a word.
  static constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  static constexpr size_t kPrefaceBytes = sizeof(kPreface) - 1;  // 24
  static constexpr size_t kNeed = kPrefaceBytes + 9;             // and a frame header
  static constexpr uint8_t kSettingsFrame = 0x4;
  char first[kNeed];
  int backoff_ms = 1;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return FirstBytes::kNone;  // too slow
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno != EINTR) return FirstBytes::kNone;
    if (r <= 0) continue;
    const ssize_t n = ::recv(fd, first, sizeof(first), MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return FirstBytes::kNone;  // closed or failed
    const size_t got = n > 0 ? static_cast<size_t>(n) : 0;
    const uint32_t magic = wire::kShmMagic;  // as a ShmFrame carries it (little-endian)
    if (std::memcmp(first, &magic, std::min(got, sizeof(magic))) == 0) {
      if (got >= sizeof(magic)) return FirstBytes::kTensord;
    } else if (std::memcmp(first, kPreface, std::min(got, kPrefaceBytes)) != 0) {
      return FirstBytes::kNone;
    }
    if (got == kNeed) {
      if (static_cast<uint8_t>(first[kPrefaceBytes + 3]) != kSettingsFrame) return FirstBytes::kNone;
      break;
    }
    // A start that may yet become one: poll says "readable" at once while
    // bytes wait, so wait a little (longer each time) unless the peer has
    // closed its end.
    if ((p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) return FirstBytes::kNone;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(backoff_ms, left.count())));
    backoff_ms = std::min(backoff_ms * 2, 64);
  }
  // gRPC's event engine wants a non-blocking socket; from here on it owns it.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return FirstBytes::kNone;
  // A peer that holds its share of gRPC connections gets no more (the
  // caller closes this one).
  if (service_ != nullptr && !service_->AdmitConnection(fd, PeerAddress(fd))) return FirstBytes::kNone;
  {
    absl::MutexLock l(&mu_);
    if (stopping_) return FirstBytes::kNone;  // the gRPC server may be shutting down: closed by Serve
    conns_.erase(std::find(conns_.begin(), conns_.end(), fd));
    // No longer pending either, in the same step: eviction must never shut
    // down a descriptor that gRPC owns (or, once gRPC closed it, whatever
    // reused its number).
    HelloDoneLocked(fd);
  }
  // gRPC names the connection "fd:N" (what its logs, and ours, show as the peer).
  Log(LogLevel::kInfo, "tcp port: gRPC connection fd:", fd, " from ", PeerName(fd));
  grpc::AddInsecureChannelFromFd(grpc_server_, fd);
  return FirstBytes::kGrpc;
}

void SideChannelServer::Serve(int fd, std::chrono::steady_clock::time_point deadline) {
  std::weak_ptr<Session> weak;
  uint64_t session_id = 0;
  bool served_session = false;  // a stream or shared-memory channel: worth a trim once idle
  const bool tcp = this->tcp();
  if (tcp) {
    const FirstBytes first = Sniff(fd, deadline);
    if (first != FirstBytes::kTensord) {
      HelloDone(fd);
      absl::MutexLock l(&mu_);
      if (first == FirstBytes::kGrpc) {
        Finished();  // the fd is gRPC's now
      } else {
        Forget(fd);
        ::close(fd);
      }
      return;
    }
  }
  {
    // The hello, within what is left of the deadline (a silent peer must
    // not hold a thread).
    const int64_t left_us = std::max<int64_t>(
        1000, std::chrono::duration_cast<std::chrono::microseconds>(deadline - std::chrono::steady_clock::now()).count());
    timeval tv{static_cast<time_t>(left_us / 1000000), static_cast<suseconds_t>(left_us % 1000000)};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    wire::ShmFrame f;
    int extra = -1;
    absl::StatusOr<bool> got = wire::RecvShmFrame(fd, &f, &extra);
    HelloDone(fd);  // a frame, the end or the deadline: no longer waiting for the hello
    if (extra >= 0) ::close(extra);
    absl::Status st;
    bool served_stream = false;
    if (!got.ok()) {
      st = got.status();
    } else if (!*got) {
      st = absl::CancelledError("closed before the hello");
    } else if (f.token_size > wire::kShmMaxTokenBytes) {
      st = absl::InvalidArgumentError(absl::StrCat("a hello's token is at most ", wire::kShmMaxTokenBytes,
                                                   " bytes, this one says ", f.token_size));
    } else if (f.op == static_cast<uint32_t>(wire::ShmOp::kHelloStream)) {
      // The session's stream: served on this thread until it ends.
      tv = timeval{0, 0};  // no deadline between messages
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      service_->ServeSocketStream(fd, f.session_id,
                                  absl::string_view(reinterpret_cast<const char*>(f.token), f.token_size),
                                  tcp ? wire::StreamFraming::kByteStream : wire::StreamFraming::kRecords);
      served_stream = true;
      served_session = true;
    } else if (tcp) {
      st = absl::InvalidArgumentError(
          "a TCP connection carries gRPC or a session stream only (shared memory needs the daemon's Unix socket)");
    } else if (f.op != static_cast<uint32_t>(wire::ShmOp::kHello)) {
      st = absl::InvalidArgumentError("the first frame must be a hello with a session id and token");
    } else {
      absl::StatusOr<std::shared_ptr<Session>> s = service_->FindSession(
          f.session_id, absl::string_view(reinterpret_cast<const char*>(f.token), f.token_size));
      if (!s.ok()) {
        st = s.status();
      } else if (!(*s)->ClaimShmChannel()) {
        st = absl::FailedPreconditionError("the session already has a shared-memory channel (or is closed)");
      } else {
        weak = *s;
        session_id = f.session_id;
        served_session = true;
      }
    }
    if (served_stream) {
      // ServeSocketStream answered the hello and ran the stream to its end.
    } else if (st.ok()) {
      tv = timeval{0, 0};  // no deadline between transfers
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      Log(LogLevel::kDebug, "session ", absl::Hex(session_id, absl::kZeroPad16), ": shared-memory channel attached");
    } else {
      LogRefusedHello(tcp ? absl::StrCat("tcp port: connection from ", PeerName(fd)) : "shared-memory channel", st);
    }
    if (served_stream || !wire::SendShmReply(fd, st).ok() || !st.ok()) weak.reset();
  }
  while (!weak.expired()) {
    wire::ShmFrame f;
    int memfd = -1;
    absl::StatusOr<bool> got = wire::RecvShmFrame(fd, &f, &memfd);
    if (got.ok() && !*got) break;  // the client closed it
    absl::Status st;
    std::shared_ptr<Session> s = weak.lock();
    if (!got.ok()) {
      st = got.status();
      if (!absl::IsInvalidArgument(st)) break;  // the socket failed, not the frame
    } else if (s == nullptr || s->closed()) {
      st = absl::FailedPreconditionError("the session is closed");
    } else if (f.op == static_cast<uint32_t>(wire::ShmOp::kMap)) {
      st = s->MapShmSegment(f.segment, f.size, memfd);
    } else if (f.op == static_cast<uint32_t>(wire::ShmOp::kUnmap)) {
      st = s->UnmapShmSegment(f.segment);
    } else {
      st = absl::InvalidArgumentError(absl::StrCat("unknown shared-memory channel op ", f.op));
    }
    if (memfd >= 0) ::close(memfd);  // mapped (or refused): the mapping keeps the memory
    if (!wire::SendShmReply(fd, st).ok()) break;
  }
  absl::MutexLock l(&mu_);
  trim_when_idle_ = trim_when_idle_ || served_session;
  Forget(fd);
  ::close(fd);
}

}  // namespace tensord::server
