// Fuzz target: the daemon's side channel as a same-host client reaches it. A
// real TensordService and SideChannelServer listen on a temporary Unix
// socket; each input opens a session, connects to "<socket>.shm" and sends
// its datagrams there: the hello (the daemon's hello parser), then either
// shared-memory frames (Map, with a sealed memfd attached, and Unmap) or
// stream records carrying ClientMessages (TensordService::ServeSocketStream,
// the session's stream loop), reading the daemon's answers as it goes.
//
// Input: datagrams, each a little-endian 16-bit length and that many bytes.
// A 64-byte datagram that starts with the ShmFrame magic is a frame: a
// session_id of 1 there becomes the open session's id (and its token is
// filled in), and a Map frame gets a memfd of its size (at most 1 MiB).
// Every input must leave the daemon answering: after it, a second session
// opens and closes, and the connection must close within 10 s of the
// client's end.
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "../../server/src/side_channel.h"
#include "tensord/meta/op_table.h"
#include "tensord/runtime/log.h"
#include "tensord/server/service.h"
#include "tensord/transport/shm.h"

namespace {

namespace wire = tensord::wire;
namespace v1 = tensord::v1;
using tensord::server::SideChannelServer;
using tensord::server::TensordService;

struct Daemon {
  std::unique_ptr<TensordService> service;
  std::unique_ptr<SideChannelServer> channel;
  std::string path;
};

Daemon& D() {
  static Daemon* d = [] {
    auto* d = new Daemon;
    tensord::runtime::SetLogLevel(tensord::runtime::LogLevel::kError);
    tensord::server::ServiceOptions o;
    o.session_memory_limit_bytes = 64 << 20;
    o.stream_spin = absl::ZeroDuration();
    o.cpu_allocator.cache_limit_bytes = 0;
    absl::StatusOr<std::unique_ptr<TensordService>> s = TensordService::Create(o);
    if (!s.ok()) abort();
    d->service = *std::move(s);
    char dir[] = "/tmp/tensord-fuzz-XXXXXX";
    if (!::mkdtemp(dir)) abort();
    d->path = std::string(dir) + "/d.sock" + wire::kShmSocketSuffix;
    absl::StatusOr<std::unique_ptr<SideChannelServer>> c = SideChannelServer::Start(d->path, d->service.get());
    if (!c.ok()) {
      fprintf(stderr, "stream_fuzz: %s\n", std::string(c.status().message()).c_str());
      abort();
    }
    d->channel = *std::move(c);
    // Leave nothing in /tmp (the server itself lives until the process ends).
    std::atexit([] {
      ::unlink(D().path.c_str());
      ::rmdir(D().path.substr(0, D().path.rfind('/')).c_str());
    });
    return d;
  }();
  return *d;
}

bool OpenSession(uint64_t* id, std::string* token) {
  grpc::ServerContext ctx;
  v1::OpenSessionRequest req;
  req.set_op_table_digest(tensord::OpTable::Get().digest());
  req.set_client_name("fuzz");
  v1::OpenSessionResponse resp;
  if (!D().service->OpenSession(&ctx, &req, &resp).ok()) return false;
  *id = resp.session_id();
  *token = resp.token();
  return true;
}

void CloseSession(uint64_t id, const std::string& token) {
  grpc::ServerContext ctx;
  v1::CloseSessionRequest req;
  req.set_session_id(id);
  req.set_token(token);
  v1::CloseSessionResponse resp;
  (void)D().service->CloseSession(&ctx, &req, &resp);
}

int Connect() {
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  strncpy(sa.sun_path, D().path.c_str(), sizeof(sa.sun_path) - 1);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    perror("stream_fuzz: connect");
    abort();
  }
  return fd;
}

// A client reads at most this much of the daemon's answers (a fetch of a
// huge expanded view streams all of its bytes), then goes away.
constexpr size_t kMaxReplyBytes = 8 << 20;
size_t reply_bytes = 0;

// Reads whatever the daemon has sent; false once it closed the connection
// (or sent more than the client reads).
bool Drain(int fd, int timeout_ms) {
  static char buf[1 << 16];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, timeout_ms);
    if (r == 0) return true;
    if (r < 0) return errno == EINTR;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    reply_bytes += static_cast<size_t>(n);
    if (reply_bytes > kMaxReplyBytes) return false;
    timeout_ms = 0;
  }
}

int Memfd(uint64_t size) {
  if (size > (1 << 20)) size = 1 << 20;
  int fd = ::memfd_create("tensord-fuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(size)) != 0 ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
    abort();
  }
  return fd;
}

// Sends one datagram (with `attach` as SCM_RIGHTS when >= 0), reading the
// daemon's answers while the socket is full. False when the daemon closed it.
bool Send(int sock, const void* data, size_t n, int attach) {
  iovec iov{const_cast<void*>(data), n};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (attach >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &attach, sizeof(int));
  }
  for (int tries = 0; tries < 1000; ++tries) {
    if (::sendmsg(sock, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0) return true;
    if (errno != EAGAIN && errno != EINTR) return false;  // closed, or a datagram too long
    if (!Drain(sock, 10)) return false;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  D();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (256 << 10)) return 0;
  uint64_t id = 0;
  std::string token;
  if (!OpenSession(&id, &token)) abort();
  const int sock = Connect();
  reply_bytes = 0;
  bool first = true;
  bool stream = false;  // a HelloStream was sent: the connection carries the session's stream
  const uint8_t* p = data;
  const uint8_t* end = data + size;
  bool open = true;
  while (open && end - p >= 2) {
    size_t len = p[0] | (size_t{p[1]} << 8);
    p += 2;
    if (len > static_cast<size_t>(end - p)) len = end - p;
    int attach = -1;
    std::string bytes(reinterpret_cast<const char*>(p), len);
    p += len;
    wire::ShmFrame f;
    if (len == sizeof(f) && memcmp(bytes.data(), &wire::kShmMagic, sizeof(wire::kShmMagic)) == 0) {
      memcpy(&f, bytes.data(), sizeof(f));
      if (f.session_id == 1) {
        f.session_id = id;
        f.token_size = static_cast<uint32_t>(token.size());
        memcpy(f.token, token.data(), token.size());
      }
      if (f.op == static_cast<uint32_t>(wire::ShmOp::kMap)) attach = Memfd(f.size);
      if (first && f.op == static_cast<uint32_t>(wire::ShmOp::kHelloStream) && f.session_id == id) stream = true;
      memcpy(bytes.data(), &f, sizeof(f));
    }
    first = false;
    open = Send(sock, bytes.data(), bytes.size(), attach);
    if (attach >= 0) ::close(attach);
    if (open) open = Drain(sock, 0);
  }
  ::shutdown(sock, SHUT_WR);
  // The daemon ends the connection once the client has (a stream's end
  // record first); one that stays open is stuck.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (open && reply_bytes <= kMaxReplyBytes) {
    open = Drain(sock, 100);
    if (open && std::chrono::steady_clock::now() > deadline) {
      fprintf(stderr, "stream_fuzz: the daemon did not end the connection within 10 s of the client's end\n");
      abort();
    }
  }
  ::close(sock);
  // Whatever ended the connection, the session's stream (if it had one)
  // ends and closes the session; a session the channel alone attached to
  // stays open until closed.
  if (stream) {
    while (D().service->FindSession(id, token).ok()) {
      if (std::chrono::steady_clock::now() > deadline + std::chrono::seconds(10)) {
        fprintf(stderr, "stream_fuzz: the session's stream did not end within 10 s of the client's going away\n");
        abort();
      }
      ::usleep(1000);
    }
  }
  CloseSession(id, token);
  // Another session still opens and closes.
  uint64_t id2;
  std::string token2;
  if (!OpenSession(&id2, &token2)) abort();
  CloseSession(id2, token2);
  return 0;
}
