// The shared-memory side channel's listener and connections.
#include "shm_channel.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "tensord/server/log.h"
#include "tensord/server/session.h"
#include "tensord/wire/shm.h"
#include "unix_socket.h"

namespace tensord::server {

absl::StatusOr<std::unique_ptr<ShmChannelServer>> ShmChannelServer::Start(const std::string& path,
                                                                           TensordService* service) {
  sockaddr_un sa;
  if (!FillSockaddr(path, &sa)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": too long for a Unix socket path"));
  }
  if (absl::Status s = PrepareUnixSocket(path, SOCK_SEQPACKET); !s.ok()) return s;
  std::unique_ptr<ShmChannelServer> c(new ShmChannelServer());
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
  if (::pipe2(c->wake_, O_CLOEXEC) != 0) {
    ::unlink(path.c_str());
    return absl::InternalError(absl::StrCat("pipe2(): ", std::strerror(errno)));
  }
  c->acceptor_ = std::thread([p = c.get()] { p->AcceptLoop(); });
  return c;
}

ShmChannelServer::~ShmChannelServer() {
  Stop();
  for (int fd : {listen_fd_, wake_[0], wake_[1]}) {
    if (fd >= 0) ::close(fd);
  }
}

void ShmChannelServer::Stop() {
  {
    absl::MutexLock l(&mu_);
    if (stopping_) return;
    stopping_ = true;
    for (int fd : conns_) ::shutdown(fd, SHUT_RDWR);  // wakes their threads
  }
  if (wake_[1] >= 0) {
    const char b = 1;
    while (::write(wake_[1], &b, 1) < 0 && errno == EINTR) {
    }
  }
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> threads;
  {
    absl::MutexLock l(&mu_);
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
  struct stat st;
  if (::lstat(path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(path_.c_str());
}

void ShmChannelServer::ReapFinished() {
  for (std::thread::id id : finished_) {
    auto it = std::find_if(threads_.begin(), threads_.end(), [&](const std::thread& t) { return t.get_id() == id; });
    if (it != threads_.end()) {
      it->join();  // it has returned from Serve: joins at once
      threads_.erase(it);
    }
  }
  finished_.clear();
}

void ShmChannelServer::AcceptLoop() {
  for (;;) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    const int r = ::poll(p, 2, -1);
    if (r < 0 && errno != EINTR) return;
    if (p[1].revents != 0) return;
    if (r <= 0 || (p[0].revents & POLLIN) == 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || (cred.uid != ::geteuid() && cred.uid != 0)) {
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
    if (pending_hellos_ >= kMaxPendingHellos) {
      // Logged for the first and then every 1,000th, so that a loop of
      // connections cannot flood the log either.
      if (refused_++ % 1000 == 0) {
        Log(LogLevel::kWarning, "shared-memory channel: closed a connection from pid ", cred.pid, ": ",
            kMaxPendingHellos, " connections are already waiting for their hello (", refused_,
            " closed so far)");
      }
      ::close(fd);
      continue;
    }
    ++pending_hellos_;
    conns_.push_back(fd);
    threads_.emplace_back([this, fd] { Serve(fd); });
  }
}

void ShmChannelServer::HelloDone() {
  absl::MutexLock l(&mu_);
  --pending_hellos_;
}

void ShmChannelServer::Serve(int fd) {
  std::weak_ptr<Session> weak;
  uint64_t session_id = 0;
  {
    // The hello, within a deadline (a silent peer must not hold a thread).
    timeval tv{kHelloTimeoutSeconds, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    wire::ShmFrame f;
    int extra = -1;
    absl::StatusOr<bool> got = wire::RecvShmFrame(fd, &f, &extra);
    HelloDone();  // a frame, the end or the deadline: no longer waiting for the hello
    if (extra >= 0) ::close(extra);
    absl::Status st;
    bool served_stream = false;
    if (!got.ok()) {
      st = got.status();
    } else if (!*got) {
      st = absl::CancelledError("closed before the hello");
    } else if (f.op == static_cast<uint32_t>(wire::ShmOp::kHelloStream) && f.token_size <= wire::kShmMaxTokenBytes) {
      // The session's stream: served on this thread until it ends.
      tv = timeval{0, 0};  // no deadline between messages
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      service_->ServeSocketStream(
          fd, f.session_id, absl::string_view(reinterpret_cast<const char*>(f.token), f.token_size));
      served_stream = true;
    } else if (f.op != static_cast<uint32_t>(wire::ShmOp::kHello) || f.token_size > wire::kShmMaxTokenBytes) {
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
      }
    }
    if (served_stream) {
      // ServeSocketStream answered the hello and ran the stream to its end.
    } else if (st.ok()) {
      tv = timeval{0, 0};  // no deadline between transfers
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      Log(LogLevel::kDebug, "session ", absl::Hex(session_id, absl::kZeroPad16), ": shared-memory channel attached");
    } else {
      Log(LogLevel::kWarning, "shared-memory channel: hello refused: ", st.message());
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
  conns_.erase(std::find(conns_.begin(), conns_.end(), fd));
  ::close(fd);
  finished_.push_back(std::this_thread::get_id());
}

}  // namespace tensord::server
