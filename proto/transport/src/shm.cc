// The shared-memory side channel's frames (see tensord/transport/shm.h).
#include "tensord/transport/shm.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "datagram.h"

namespace tensord::wire {

std::string ShmSocketPath(absl::string_view unix_socket_path) {
  return absl::StrCat(unix_socket_path, kShmSocketSuffix);
}

namespace {

constexpr char kChannel[] = "shared-memory channel";

absl::Status Errno(absl::string_view what) { return internal::ErrnoStatus(kChannel, what); }

// Sends exactly one datagram, with `fd` attached when fd >= 0.
absl::Status SendAll(int sock, const void* buf, size_t n, int fd) {
  iovec iov{const_cast<void*>(buf), n};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  return internal::SendDatagram(sock, msg, n, kChannel);
}

// Receives one datagram into `buf` (n bytes); returns its size (0 at end of
// stream). Descriptors: the first into *fd (if fd != nullptr), others closed.
absl::StatusOr<size_t> RecvOne(int sock, void* buf, size_t n, int* fd) {
  if (fd != nullptr) *fd = -1;
  iovec iov{buf, n};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t r;
  // MSG_WAITALL: on a TCP socket (the stream's hello, socket_stream.h) the
  // whole frame, however it was split; a datagram socket ignores it.
  do {
    r = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL);
  } while (r < 0 && errno == EINTR);
  if (r < 0) return Errno("receive");
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int got;
      std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (fd != nullptr && *fd < 0) {
        *fd = got;
      } else {
        ::close(got);
      }
    }
  }
  if ((msg.msg_flags & MSG_TRUNC) != 0) {
    if (fd != nullptr && *fd >= 0) {
      ::close(*fd);
      *fd = -1;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("shared-memory channel: a frame longer than ", n, " bytes"));
  }
  return static_cast<size_t>(r);
}

}  // namespace

absl::StatusOr<int> ConnectShmChannel(const std::string& channel_path, ShmOp hello_op, uint64_t session_id,
                                      absl::string_view token, uid_t daemon_uid) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (channel_path.size() >= sizeof(sa.sun_path)) return absl::InvalidArgumentError("channel path too long");
  if (token.size() > kShmMaxTokenBytes) return absl::InvalidArgumentError("session token too long");
  std::memcpy(sa.sun_path, channel_path.data(), channel_path.size());
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket");
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to ", channel_path, ": ", why));
  }
  // Whoever listens at the path gets the session's token: it must be the
  // daemon. Anyone who could write to the socket's directory (or bind the
  // path before the daemon did) could listen there instead.
  ucred peer{};
  socklen_t len = sizeof(peer);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("cannot learn who listens at ", channel_path, ": ", why));
  }
  if (peer.uid != daemon_uid) {
    ::close(fd);
    return absl::PermissionDeniedError(absl::StrCat(
        "refusing the side channel ", channel_path, ": the process listening there (pid ", peer.pid,
        ") runs as uid ", peer.uid, ", but the daemon runs as uid ", daemon_uid,
        " (the owner of its socket); the session's token was not sent. Something else took the daemon's "
        "side-channel path: stop it and restart the daemon"));
  }
  timeval tv{10, 0};  // a daemon that does not answer must not hang the client
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ShmFrame hello;
  hello.op = static_cast<uint32_t>(hello_op);
  hello.session_id = session_id;
  hello.token_size = static_cast<uint32_t>(token.size());
  if (!token.empty()) std::memcpy(hello.token, token.data(), token.size());
  absl::Status st = SendShmFrame(fd, hello);
  if (st.ok()) st = RecvShmReply(fd);
  if (!st.ok()) {
    ::close(fd);
    return st;
  }
  return fd;
}

absl::Status SendShmFrame(int sock, const ShmFrame& frame, int fd) { return SendAll(sock, &frame, sizeof(frame), fd); }

absl::StatusOr<bool> RecvShmFrame(int sock, ShmFrame* frame, int* fd) {
  absl::StatusOr<size_t> n = RecvOne(sock, frame, sizeof(*frame), fd);
  if (!n.ok()) return n.status();
  if (*n == 0) return false;
  if (*n != sizeof(*frame) || frame->magic != kShmMagic) {
    if (*fd >= 0) {
      ::close(*fd);
      *fd = -1;
    }
    return absl::InvalidArgumentError(absl::StrCat("shared-memory channel: a frame of ", *n,
                                                   " bytes without the tensord magic (expected ", sizeof(*frame),
                                                   " bytes)"));
  }
  return true;
}

absl::Status SendShmReply(int sock, const absl::Status& status) {
  ShmReply r;
  r.code = static_cast<int32_t>(status.code());
  const absl::string_view m = status.message();
  // An OK status has an empty message whose data() may be null: memcpy must
  // not see it (undefined behaviour, caught by -fsanitize=undefined).
  if (!m.empty()) std::memcpy(r.message, m.data(), std::min(m.size(), sizeof(r.message) - 1));
  return SendAll(sock, &r, sizeof(r), -1);
}

absl::Status RecvShmReply(int sock) {
  ShmReply r;
  absl::StatusOr<size_t> n = RecvOne(sock, &r, sizeof(r), nullptr);
  if (!n.ok()) return n.status();
  if (*n == 0) return absl::UnavailableError("shared-memory channel: the daemon closed it");
  if (*n != sizeof(r) || r.magic != kShmMagic) {
    return absl::InternalError("shared-memory channel: a malformed reply from the daemon");
  }
  r.message[sizeof(r.message) - 1] = '\0';
  if (r.code == 0) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(r.code), r.message);
}

}  // namespace tensord::wire
