// Artifact kernels in a worker process: the daemon's side (ArtifactWorker)
// and the worker's (ArtifactWorkerMain), and the small protocol between
// them. See tensord/runtime/artifact_worker.h.
//
// The protocol, on a SOCK_SEQPACKET socketpair (one message per request
// and per reply, so no framing of our own):
//   daemon -> worker: a WireRequest header, with SCM_RIGHTS descriptors:
//     the arena's memfd first when the worker has not got it (a new worker,
//     or a grown arena), then, for kLoad, the object's sealed memfd. The
//     request's body is at the arena's start: for kLoad the artifact's
//     content hash and manifest (JSON), for kCall the arguments and the
//     outputs, tensors as descriptors of regions of the arena.
//   worker -> daemon: a WireReply header and at most kMaxReplyMessage bytes
//     of message.
#include "tensord/runtime/artifact_worker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tensord/artifact/artifact.h"
#include "tensord/meta/errors.h"
#include "tensord/runtime/artifacts.h"
#include "tensord/runtime/log.h"

extern char** environ;

namespace tensord::runtime {
namespace {

constexpr uint32_t kRequestMagic = 0x74645751;  // "tdWQ"
constexpr uint32_t kReplyMagic = 0x74645752;    // "tdWR"
enum RequestType : uint32_t { kLoad = 1, kCall = 2 };
// WireRequest::fds bits: which descriptors come with the request, in this order.
constexpr uint32_t kWithArena = 1;
constexpr uint32_t kWithObject = 2;

struct WireRequest {
  uint32_t magic;
  uint32_t type;
  uint32_t lib_id;         // the artifact's id in this worker (kLoad gives it)
  uint32_t op_index;       // kCall: the op in the artifact's manifest
  uint64_t body_bytes;     // the body, at the arena's start
  uint64_t arena_bytes;    // the arena's size
  int64_t scratch_limit;   // most scratch bytes one call may take; -1: no limit
  uint32_t fds;            // kWithArena | kWithObject
  uint32_t reserved;
};
static_assert(sizeof(WireRequest) == 48, "WireRequest's layout is the protocol");

struct WireReply {
  uint32_t magic;
  uint32_t ok;             // 1: the call (or load) succeeded
  int32_t kind;            // ErrorKind of a failure
  uint32_t message_bytes;  // bytes of message after the header
};
static_assert(sizeof(WireReply) == 16, "WireReply's layout is the protocol");

// A kernel's message is cut at 4 KiB (the ABI); this leaves room for the
// op's name and what RunArtifactKernel adds around it.
constexpr size_t kMaxReplyMessage = 8192;
// Tensors' regions in the arena start at multiples of this (the ABI's
// scratch alignment; a kernel may assume an aligned contiguous input).
constexpr uint64_t kAlign = 64;
// The arena grows in whole MiB: a session's calls of one size reuse it.
constexpr uint64_t kArenaGrain = 1 << 20;
// An arena past this size is given back after a call that used less than
// a quarter of it: one large call does not keep its memory charged to the
// session for the session's life, and calls of one size still reuse it.
constexpr uint64_t kKeepArenaBytes = 64 << 20;
// How often a waiting daemon looks at its session's cancellation.
constexpr int kPollSliceMs = 100;

uint64_t AlignUp(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

// ---- sending and receiving one message with descriptors

bool SendMessage(int sock, const void* buf, size_t n, const int* fds, size_t nfds) {
  iovec iov{const_cast<void*>(buf), n};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
  if (nfds > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
  }
  ssize_t r;
  do {
    r = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (r < 0 && errno == EINTR);
  return r == static_cast<ssize_t>(n);
}

// Receives one message into buf (n bytes): its size, 0 at end of stream,
// -1 on an error or a message longer than n. Descriptors go to fds (up to
// 2, in order; -1 where none came); more are closed.
ssize_t RecvMessage(int sock, void* buf, size_t n, int fds[2]) {
  fds[0] = fds[1] = -1;
  iovec iov{buf, n};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t r;
  do {
    r = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (r < 0 && errno == EINTR);
  size_t got = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); r >= 0 && c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (got < 2) {
        fds[got++] = fd;
      } else {
        ::close(fd);
      }
    }
  }
  if (r >= 0 && (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) r = -1;
  if (r < 0) {
    for (int i = 0; i < 2; ++i) {
      if (fds[i] >= 0) ::close(fds[i]);
      fds[i] = -1;
    }
  }
  return r;
}

// ---- the call's body: arguments and outputs

// Appends POD values to a byte string.
class Writer {
 public:
  template <typename T>
  void Put(const T& v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void PutBytes(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

// Reads what Writer wrote, each read checked against the end.
class Reader {
 public:
  Reader(const char* p, size_t n) : p_(p), n_(n) {}
  template <typename T>
  bool Get(T* v) {
    if (n_ - at_ < sizeof(T)) return false;
    std::memcpy(v, p_ + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  bool GetBytes(size_t n, const char** p) {
    if (n_ - at_ < n) return false;
    *p = p_ + at_;
    at_ += n;
    return true;
  }

 private:
  const char* p_;
  size_t n_;
  size_t at_ = 0;
};

// A tensor in the body: dtype, sizes, strides (elements) and where its
// region starts in the arena; its first element is the region's first byte.
void PutTensor(Writer& w, const TensorMeta& m, uint64_t region) {
  w.Put(static_cast<int32_t>(m.dtype));
  w.Put(static_cast<int32_t>(m.sizes.size()));
  w.Put(region);
  for (int64_t s : m.sizes) w.Put(s);
  for (int64_t s : m.strides) w.Put(s);
}

// The bytes [begin, end) of its storage that tensor `m` addresses.
absl::StatusOr<std::pair<int64_t, int64_t>> Extent(const TensorMeta& m) {
  TD_ASSIGN_OR_RETURN(int64_t end, m.StorageBytesNeeded());
  const int64_t begin = m.storage_offset * m.itemsize();
  return std::pair<int64_t, int64_t>{begin, std::max(begin, end)};
}

std::string SignalText(int sig) {
  const char* d = sigdescr_np(sig);
  return absl::StrCat("signal ", sig, d != nullptr ? absl::StrCat(" (", d, ")") : "");
}

absl::Status FromKind(int kind, absl::string_view message) {
  switch (static_cast<ErrorKind>(kind)) {
    case ErrorKind::kNotImplemented: return NotImplementedErr(message);
    case ErrorKind::kOutOfMemory: return OutOfMemoryErr(message);
    default: return RuntimeErr(message);
  }
}

}  // namespace

// ------------------------------------------------------------------ the daemon's side

ArtifactWorker::ArtifactWorker(const ArtifactStore* store, std::shared_ptr<MemoryAccount> memory)
    : store_(store), memory_(std::move(memory)) {}

ArtifactWorker::~ArtifactWorker() {
  Stop();
  ReleaseArena();
}

absl::Status ArtifactWorker::Start(absl::string_view op) {
  const std::string& binary = store_->policy().worker_binary;
  if (binary.empty()) return InternalErr(absl::StrCat(op, ": no worker binary is set for artifact isolation"));
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return RuntimeErr(absl::StrCat(op, ": cannot start the artifact worker: socketpair: ", std::strerror(errno)));
  }
  // The worker's end becomes its descriptor 3, the one descriptor the
  // daemon means it to have: every descriptor of the daemon's is opened
  // close-on-exec (and the worker closes any other at start). dup2 onto
  // itself would keep close-on-exec set, so an end that is 3 already moves.
  constexpr int kChildFd = 3;
  if (sv[1] == kChildFd) {
    const int moved = ::fcntl(sv[1], F_DUPFD_CLOEXEC, kChildFd + 1);
    ::close(sv[1]);
    sv[1] = moved;
    if (moved < 0) {
      ::close(sv[0]);
      return RuntimeErr(absl::StrCat(op, ": cannot start the artifact worker: fcntl: ", std::strerror(errno)));
    }
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, sv[1], kChildFd);
  // Its own process group (a terminal's ^C is the daemon's to handle), the
  // default action for every signal (so that a crash ends it with its
  // signal, which the daemon reports) and none blocked.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::string fd_arg = std::to_string(kChildFd);
  char name[] = "tensord";
  char cmd[] = "artifact-worker";
  char* argv[] = {name, cmd, fd_arg.data(), nullptr};
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, binary.c_str(), &actions, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(sv[1]);
  if (rc != 0) {
    ::close(sv[0]);
    return RuntimeErr(absl::StrCat(op, ": cannot start the artifact worker (", binary, "): ", std::strerror(rc)));
  }
  pid_ = pid;
  sock_ = sv[0];
  // Its end is seen here as well as the socket's hang-up: a kernel that
  // forked would leave its child holding the worker's end of the socket.
  // Without pidfds (Linux before 5.3) the socket and the time limit remain.
  // (The system call: glibc 2.36's <sys/pidfd.h> declares pidfd_open
  // without C linkage for C++.)
  pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  ++starts_;
  arena_sent_ = false;
  loaded_.clear();
  return absl::OkStatus();
}

std::string ArtifactWorker::Stop() {
  if (pid_ == 0) return "";
  // If it still runs, nothing of it is wanted any more: nor of any process
  // its kernels started (its process group, unless they left it).
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  pid_ = 0;
  ::close(sock_);
  sock_ = -1;
  if (pidfd_ >= 0) ::close(pidfd_);
  pidfd_ = -1;
  arena_sent_ = false;
  loaded_.clear();
  if (r < 0) return "an unknown end";
  if (WIFSIGNALED(status)) return SignalText(WTERMSIG(status));
  return absl::StrCat("exit status ", WEXITSTATUS(status));
}

void ArtifactWorker::ReleaseArena() {
  if (arena_ != nullptr) ::munmap(arena_, arena_bytes_);
  // Its pages are freed now (a hole punched: it cannot shrink), though the
  // worker still maps it until the next request brings the new arena.
  if (arena_fd_ >= 0) {
    (void)::fallocate(arena_fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(arena_bytes_));
  }
  if (arena_fd_ >= 0) ::close(arena_fd_);
  arena_charge_.Sub(arena_charge_.bytes());
  arena_ = nullptr;
  arena_fd_ = -1;
  arena_bytes_ = 0;
  arena_sent_ = false;
}

absl::Status ArtifactWorker::Reserve(uint64_t bytes, absl::string_view op) {
  if (bytes <= arena_bytes_) return absl::OkStatus();
  const uint64_t want = AlignUp(std::max<uint64_t>(bytes, kArenaGrain), kArenaGrain);
  // Charged before it is made: the arena doubles the call's tensors in memory.
  TD_RETURN_IF_ERROR(arena_charge_.Add(memory_, static_cast<int64_t>(want - arena_bytes_),
                                       absl::StrCat(op, " (the artifact worker's shared memory)")));
  // Sealed against shrinking once sized: the daemon copies from and to it,
  // and a file truncated under a mapping faults (SIGBUS) where it is read;
  // sealed, no process can shrink it (the worker's code could reach the
  // file through /proc as the daemon's user).
  const int fd = ::memfd_create("tensord-worker-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(want)) != 0 ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) != 0) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    arena_charge_.Sub(static_cast<int64_t>(want - arena_bytes_));
    return OutOfMemoryErr(absl::StrCat(op, ": cannot make ", want, " bytes of shared memory for the artifact worker: ",
                                       std::strerror(err)));
  }
  void* p = ::mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    ::close(fd);
    arena_charge_.Sub(static_cast<int64_t>(want - arena_bytes_));
    return OutOfMemoryErr(absl::StrCat(op, ": cannot map ", want, " bytes of shared memory for the artifact worker: ",
                                       std::strerror(err)));
  }
  if (arena_ != nullptr) ::munmap(arena_, arena_bytes_);
  if (arena_fd_ >= 0) ::close(arena_fd_);
  arena_ = static_cast<char*>(p);
  arena_fd_ = fd;
  arena_bytes_ = want;
  arena_sent_ = false;
  return absl::OkStatus();
}

absl::StatusOr<bool> ArtifactWorker::Exchange(const void* header, int object_fd, absl::string_view op,
                                              absl::string_view doing, int* kind, std::string* message) {
  int fds[2];
  size_t nfds = 0;
  WireRequest h;
  std::memcpy(&h, header, sizeof(h));
  if (!arena_sent_) {
    fds[nfds++] = arena_fd_;
    h.fds |= kWithArena;
  }
  if (object_fd >= 0) {
    fds[nfds++] = object_fd;
    h.fds |= kWithObject;
  }
  // The daemon's log says it too: an operator sees which op ends workers.
  auto died = [&](absl::string_view how) -> absl::Status {
    const pid_t pid = pid_;
    const std::string end = Stop();
    Log(LogLevel::kWarning, "artifact worker ", pid, ": ", op, ": ", how, end.empty() ? "" : absl::StrCat(": ", end));
    return RuntimeErr(absl::StrCat(op, ": ", how, end.empty() ? "" : absl::StrCat(": ", end),
                                   "; the session goes on, and its next call of an artifact kernel starts a new "
                                   "worker"));
  };
  if (!SendMessage(sock_, &h, sizeof(h), fds, nfds)) {
    return died("the artifact worker process ended before the call reached it");
  }
  arena_sent_ = true;
  const absl::Duration limit = store_->policy().call_timeout;
  const absl::Time deadline = absl::Now() + limit;
  for (;;) {
    if (cancelled_ != nullptr && cancelled_()) {
      Stop();
      return RuntimeErr(absl::StrCat(op, ": cancelled (the session is closing); its artifact worker was killed"));
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      Log(LogLevel::kWarning, "artifact worker ", pid_, ": ", op, ": ", doing, " ran past the time limit of ",
          absl::FormatDuration(limit), "; killed");
      Stop();
      return RuntimeErr(absl::StrCat(op, ": ", doing, " ran past the time limit of ", absl::FormatDuration(limit),
                                     " (--artifact-call-timeout), and its artifact worker process was killed; the "
                                     "session goes on, and its next call of an artifact kernel starts a new worker"));
    }
    pollfd p[2] = {{sock_, POLLIN, 0}, {pidfd_, POLLIN, 0}};
    const int ms = static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, kPollSliceMs));
    const int ready = ::poll(p, pidfd_ >= 0 ? 2 : 1, ms);
    if (ready < 0 && errno != EINTR) return died("waiting for the artifact worker failed");
    if (ready > 0 && p[0].revents != 0) break;  // a reply (or the socket's end): read it first
    if (ready > 0 && p[1].revents != 0) return died(absl::StrCat(doing, " ended its artifact worker process"));
  }
  // The reply: nothing in it is trusted. A message longer than the buffer,
  // a wrong magic or a size past what came is a broken worker.
  alignas(WireReply) char buf[sizeof(WireReply) + kMaxReplyMessage];
  int got_fds[2];
  const ssize_t n = RecvMessage(sock_, buf, sizeof(buf), got_fds);
  for (int fd : got_fds) {
    if (fd >= 0) ::close(fd);  // a worker sends none
  }
  if (n == 0) return died(absl::StrCat(doing, " ended its artifact worker process"));
  if (n < static_cast<ssize_t>(sizeof(WireReply))) return died("the artifact worker sent a malformed reply");
  WireReply r;
  std::memcpy(&r, buf, sizeof(r));
  if (r.magic != kReplyMagic || r.message_bytes > static_cast<size_t>(n) - sizeof(WireReply) || r.ok > 1) {
    return died("the artifact worker sent a malformed reply");
  }
  *kind = r.kind;
  message->assign(buf + sizeof(WireReply), r.message_bytes);
  return r.ok == 1;
}

absl::Status ArtifactWorker::Load(const LoadedArtifact& lib, absl::string_view op, uint32_t* id) {
  if (auto it = loaded_.find(lib.content_hash()); it != loaded_.end()) {
    *id = it->second;
    return absl::OkStatus();
  }
  TD_ASSIGN_OR_RETURN(ArtifactStore::ObjectFile object, store_->MakeObjectFile(lib.content_hash()));
  absl::Cleanup close_object = [fd = object.fd] { ::close(fd); };
  Writer w;
  const std::string json = ManifestToJson(object.manifest);
  w.Put(static_cast<uint64_t>(lib.content_hash().size()));
  w.PutBytes(lib.content_hash().data(), lib.content_hash().size());
  w.Put(static_cast<uint64_t>(json.size()));
  w.PutBytes(json.data(), json.size());
  TD_RETURN_IF_ERROR(Reserve(w.out().size(), op));
  std::memcpy(arena_, w.out().data(), w.out().size());
  const uint32_t new_id = static_cast<uint32_t>(loaded_.size());
  WireRequest h{};
  h.magic = kRequestMagic;
  h.type = kLoad;
  h.lib_id = new_id;
  h.body_bytes = w.out().size();
  h.arena_bytes = arena_bytes_;
  int kind = 0;
  std::string message;
  TD_ASSIGN_OR_RETURN(bool ok, Exchange(&h, object.fd, op, "loading the kernel's library", &kind, &message));
  if (!ok) return RuntimeErr(absl::StrCat(op, ": the artifact worker cannot load the kernel's library: ", message));
  loaded_.emplace(lib.content_hash(), new_id);
  *id = new_id;
  return absl::OkStatus();
}

absl::Status ArtifactWorker::Run(const ArtifactKernel& k, KernelContext& ctx) {
  const std::string& op = k.op_name;
  if (k.artifact == nullptr) return InternalErr(absl::StrCat(op, ": an isolated kernel without its artifact"));

  // The layout: the body first, then one region per distinct tensor. An
  // in-place op's output is its self input (the same meta at the same
  // base): one region, copied in and back.
  struct Region {
    const TensorMeta* meta;
    const char* base;    // the storage's base the dispatcher gave
    char* bytes_at;      // the daemon's bytes: the start of the tensor's extent
    uint64_t bytes;
    bool input = false;  // copied in
    bool output = false; // copied back
    uint64_t at = 0;     // offset in the arena
  };
  std::vector<Region> regions;
  auto region_of = [&](char* base, const TensorMeta* m, bool output) -> absl::StatusOr<size_t> {
    for (size_t i = 0; i < regions.size(); ++i) {
      if (regions[i].meta == m && regions[i].base == base) {
        (output ? regions[i].output : regions[i].input) = true;
        return i;
      }
    }
    if (base == nullptr && m->numel() > 0) return InternalErr(absl::StrCat(op, ": a tensor without its storage"));
    TD_ASSIGN_OR_RETURN(auto extent, Extent(*m));
    Region r;
    r.meta = m;
    r.base = base;
    r.bytes_at = base == nullptr ? nullptr : base + extent.first;
    r.bytes = static_cast<uint64_t>(extent.second - extent.first);
    (output ? r.output : r.input) = true;
    regions.push_back(r);
    return regions.size() - 1;
  };
  // Pass 1: regions, in order of appearance.
  std::vector<size_t> arg_region(ctx.args.size(), 0), out_region(ctx.outputs.size(), 0);
  std::vector<std::vector<size_t>> list_regions(ctx.args.size());  // per Tensor[] element (absent: unused)
  for (size_t i = 0; i < ctx.args.size(); ++i) {
    const Value& v = ctx.args[i];
    if (v.kind() == Value::Kind::kTensor) {
      TD_ASSIGN_OR_RETURN(arg_region[i], region_of(ctx.input_base(v.tensor_ptr()), v.tensor_ptr(), false));
    }
    if (v.kind() == Value::Kind::kTensorList) {
      for (const TensorMeta* m : v.tensor_list()) {
        size_t r = 0;
        if (m != nullptr) {
          TD_ASSIGN_OR_RETURN(r, region_of(ctx.input_base(m), m, false));
        }
        list_regions[i].push_back(r);
      }
    }
  }
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    TD_ASSIGN_OR_RETURN(out_region[i], region_of(ctx.outputs[i].base, ctx.outputs[i].meta, true));
  }
  // The body's size does not depend on the offsets: write it once with
  // zero offsets to size it, lay out the regions, then write it for real.
  auto body = [&](Writer& w) -> absl::Status {
    w.Put(static_cast<uint32_t>(ctx.args.size()));
    w.Put(static_cast<uint32_t>(ctx.outputs.size()));
    for (size_t i = 0; i < ctx.args.size(); ++i) {
      const Value& v = ctx.args[i];
      w.Put(static_cast<uint32_t>(v.kind()));
      switch (v.kind()) {
        case Value::Kind::kNone: break;
        case Value::Kind::kTensor: PutTensor(w, v.tensor(), regions[arg_region[i]].at); break;
        case Value::Kind::kInt: w.Put(v.to_int()); break;
        case Value::Kind::kFloat: w.Put(v.to_double()); break;
        case Value::Kind::kBool: w.Put(static_cast<uint8_t>(v.to_bool())); break;
        case Value::Kind::kScalar: {
          const Scalar s = v.scalar();
          w.Put(static_cast<uint32_t>(s.kind()));
          if (s.is_float()) {
            w.Put(s.to_double());
          } else {
            w.Put(s.to_int());
          }
          break;
        }
        case Value::Kind::kIntList:
          w.Put(static_cast<uint64_t>(v.int_list().size()));
          w.PutBytes(v.int_list().data(), v.int_list().size() * sizeof(int64_t));
          break;
        case Value::Kind::kFloatList:
          w.Put(static_cast<uint64_t>(v.float_list().size()));
          w.PutBytes(v.float_list().data(), v.float_list().size() * sizeof(double));
          break;
        case Value::Kind::kString:
          w.Put(static_cast<uint64_t>(v.str().size()));
          w.PutBytes(v.str().data(), v.str().size());
          break;
        case Value::Kind::kDtype: w.Put(static_cast<int32_t>(v.dtype())); break;
        case Value::Kind::kTensorList: {
          // Each element: present (1, then the tensor) or absent (0, a
          // Tensor?[]'s None).
          const TensorList& list = v.tensor_list();
          w.Put(static_cast<uint64_t>(list.size()));
          for (size_t j = 0; j < list.size(); ++j) {
            w.Put(static_cast<uint8_t>(list[j] != nullptr));
            if (list[j] != nullptr) PutTensor(w, *list[j], regions[list_regions[i][j]].at);
          }
          break;
        }
        // What the ABI cannot take fails as RunArtifactKernel fails it.
        case Value::Kind::kDevice:
          return NotImplementedErr(absl::StrCat(op, ": Device arguments cannot cross the kernel ABI"));
      }
    }
    for (size_t i = 0; i < ctx.outputs.size(); ++i) PutTensor(w, *ctx.outputs[i].meta, regions[out_region[i]].at);
    return absl::OkStatus();
  };
  Writer sizing;
  TD_RETURN_IF_ERROR(body(sizing));
  uint64_t total = AlignUp(sizing.out().size(), kAlign);
  for (Region& r : regions) {
    r.at = total;
    total = AlignUp(total + r.bytes, kAlign);
  }
  Writer w;
  TD_RETURN_IF_ERROR(body(w));
  // A call the ABI refuses (a Device argument) has failed above, before
  // any worker starts.
  if (pid_ == 0) TD_RETURN_IF_ERROR(Start(op));
  uint32_t lib_id = 0;
  TD_RETURN_IF_ERROR(Load(*k.artifact, op, &lib_id));  // its request uses the arena: before the call's
  TD_RETURN_IF_ERROR(Reserve(total, op));
  std::memcpy(arena_, w.out().data(), w.out().size());
  // Inputs (and an in-place op's self) are copied in; outputs are not:
  // the ABI says outputs are not zeroed, and the kernel writes them all.
  for (const Region& r : regions) {
    if (r.input && r.bytes > 0) std::memcpy(arena_ + r.at, r.bytes_at, r.bytes);
  }

  WireRequest h{};
  h.magic = kRequestMagic;
  h.type = kCall;
  h.lib_id = lib_id;
  h.op_index = static_cast<uint32_t>(k.op_index);
  h.body_bytes = w.out().size();
  h.arena_bytes = arena_bytes_;
  const int64_t limit = memory_->limit_bytes();
  h.scratch_limit =
      limit <= 0 ? -1 : std::max<int64_t>(0, limit - memory_->bytes_in_use() - memory_->bookkeeping_bytes());
  int kind = 0;
  std::string message;
  TD_ASSIGN_OR_RETURN(bool ok, Exchange(&h, -1, op, "the kernel", &kind, &message));
  if (!ok) {
    // The worker's RunArtifactKernel names the op already; a message that
    // does not (a broken worker's) gets it.
    if (!absl::StartsWith(message, absl::StrCat(op, ": "))) message = absl::StrCat(op, ": ", message);
    return FromKind(kind, message);
  }
  for (const Region& r : regions) {
    if (r.output && r.bytes > 0) std::memcpy(r.bytes_at, arena_ + r.at, r.bytes);
  }
  if (arena_bytes_ > kKeepArenaBytes && total < arena_bytes_ / 4) ReleaseArena();
  return absl::OkStatus();
}

// ------------------------------------------------------------------ the worker's side

namespace {

// Scratch for the worker's kernels: heap memory, at most the session's
// memory left at the call (the daemon cannot charge what the worker holds).
class WorkerScratch final : public ScratchAllocator {
 public:
  explicit WorkerScratch(int64_t limit) : left_(limit) {}
  absl::StatusOr<std::shared_ptr<char>> Allocate(int64_t bytes) override {
    if (left_ >= 0 && bytes > left_) return OutOfMemoryErr("scratch over the session's memory limit");
    void* p = std::aligned_alloc(64, static_cast<size_t>(AlignUp(static_cast<uint64_t>(std::max<int64_t>(bytes, 1)), 64)));
    if (p == nullptr) return OutOfMemoryErr("out of memory for scratch");
    if (left_ >= 0) left_ -= bytes;
    return std::shared_ptr<char>(static_cast<char*>(p), [](char* q) { std::free(q); });
  }

 private:
  int64_t left_;
};

struct WorkerState {
  int sock = -1;
  char* arena = nullptr;
  uint64_t arena_bytes = 0;
  // Loaded artifacts by id. Each keeps its object's descriptor open for the
  // worker's life, and the worker never unloads one: "/proc/self/fd/N", the
  // name the loader knows it by, then names one object only.
  std::vector<std::shared_ptr<LoadedArtifact>> libs;
};

bool Reply(int sock, bool ok, ErrorKind kind, absl::string_view message) {
  const size_t n = std::min(message.size(), kMaxReplyMessage);
  std::string buf(sizeof(WireReply) + n, '\0');
  WireReply r{kReplyMagic, ok ? 1u : 0u, static_cast<int32_t>(kind), static_cast<uint32_t>(n)};
  std::memcpy(buf.data(), &r, sizeof(r));
  std::memcpy(buf.data() + sizeof(r), message.data(), n);
  return SendMessage(sock, buf.data(), buf.size(), nullptr, 0);
}

absl::Status LoadInWorker(WorkerState& st, const WireRequest& h, int object_fd) {
  if (object_fd < 0) return InternalErr("a load without the object");
  if (h.lib_id != st.libs.size()) return InternalErr("loads out of order");
  Reader r(st.arena, h.body_bytes);
  uint64_t n = 0;
  const char* p = nullptr;
  if (!r.Get(&n) || !r.GetBytes(n, &p)) return InternalErr("a malformed load");
  const std::string hash(p, n);
  if (!r.Get(&n) || !r.GetBytes(n, &p)) return InternalErr("a malformed load");
  TD_ASSIGN_OR_RETURN(Manifest m, ManifestFromJson(absl::string_view(p, n)));
  TD_ASSIGN_OR_RETURN(std::shared_ptr<LoadedArtifact> lib,
                      ArtifactStore::OpenObject(m, hash, absl::StrCat("/proc/self/fd/", object_fd)));
  st.libs.push_back(std::move(lib));
  return absl::OkStatus();
}

absl::Status CallInWorker(WorkerState& st, const WireRequest& h) {
  if (h.lib_id >= st.libs.size()) return InternalErr("a call of an artifact never loaded");
  const LoadedArtifact& lib = *st.libs[h.lib_id];
  const ArtifactKernel* k = lib.kernel(h.op_index, DeviceType::kCPU);
  if (k == nullptr) return InternalErr("a call of an op without a CPU kernel");
  Reader r(st.arena, h.body_bytes);
  uint32_t nargs = 0, nouts = 0;
  if (!r.Get(&nargs) || !r.Get(&nouts)) return InternalErr("a malformed call");
  std::deque<TensorMeta> metas;  // stable addresses: Values point at them
  std::vector<std::pair<const TensorMeta*, char*>> bases;
  auto get_tensor = [&](const TensorMeta** out) -> absl::Status {
    int32_t dtype = 0, ndim = 0;
    uint64_t at = 0;
    if (!r.Get(&dtype) || !r.Get(&ndim) || !r.Get(&at) || ndim < 0 || ndim > 64) {
      return InternalErr("a malformed tensor");
    }
    TensorMeta m;
    m.dtype = static_cast<ScalarType>(dtype);
    m.device = kCPU;
    m.sizes.resize(ndim);
    m.strides.resize(ndim);
    for (auto& s : m.sizes) {
      if (!r.Get(&s)) return InternalErr("a malformed tensor");
    }
    for (auto& s : m.strides) {
      if (!r.Get(&s)) return InternalErr("a malformed tensor");
    }
    TD_ASSIGN_OR_RETURN(int64_t need, m.StorageBytesNeeded());
    if (at > st.arena_bytes || static_cast<uint64_t>(need) > st.arena_bytes - at) {
      return InternalErr("a tensor past the shared memory");
    }
    metas.push_back(std::move(m));
    bases.emplace_back(&metas.back(), st.arena + at);
    *out = &metas.back();
    return absl::OkStatus();
  };
  std::vector<Value> args;
  args.reserve(nargs);
  for (uint32_t i = 0; i < nargs; ++i) {
    uint32_t kind = 0;
    if (!r.Get(&kind)) return InternalErr("a malformed call");
    bool ok = true;
    switch (static_cast<Value::Kind>(kind)) {
      case Value::Kind::kNone: args.emplace_back(); break;
      case Value::Kind::kTensor: {
        const TensorMeta* m = nullptr;
        TD_RETURN_IF_ERROR(get_tensor(&m));
        args.emplace_back(m);
        break;
      }
      case Value::Kind::kTensorList: {
        uint64_t n = 0;
        ok = r.Get(&n) && n <= (uint64_t{1} << 24);
        TensorList list;
        for (uint64_t j = 0; ok && j < n; ++j) {
          uint8_t present = 0;
          ok = r.Get(&present);
          const TensorMeta* m = nullptr;
          if (ok && present != 0) TD_RETURN_IF_ERROR(get_tensor(&m));
          list.push_back(m);
        }
        args.emplace_back(std::move(list));
        break;
      }
      case Value::Kind::kInt: {
        int64_t v = 0;
        ok = r.Get(&v);
        args.emplace_back(v);
        break;
      }
      case Value::Kind::kFloat: {
        double v = 0;
        ok = r.Get(&v);
        args.emplace_back(v);
        break;
      }
      case Value::Kind::kBool: {
        uint8_t v = 0;
        ok = r.Get(&v);
        args.emplace_back(v != 0);
        break;
      }
      case Value::Kind::kScalar: {
        uint32_t sk = 0;
        ok = r.Get(&sk);
        if (static_cast<Scalar::Kind>(sk) == Scalar::Kind::kFloat) {
          double v = 0;
          ok = ok && r.Get(&v);
          args.emplace_back(Scalar::Float(v));
        } else {
          int64_t v = 0;
          ok = ok && r.Get(&v);
          args.emplace_back(static_cast<Scalar::Kind>(sk) == Scalar::Kind::kBool ? Scalar::Bool(v != 0)
                                                                                 : Scalar::Int(v));
        }
        break;
      }
      case Value::Kind::kIntList: {
        uint64_t n = 0;
        const char* p = nullptr;
        ok = r.Get(&n) && n <= (uint64_t{1} << 32) && r.GetBytes(n * sizeof(int64_t), &p);
        std::vector<int64_t> v(ok ? n : 0);
        if (ok && n > 0) std::memcpy(v.data(), p, n * sizeof(int64_t));
        args.emplace_back(v);
        break;
      }
      case Value::Kind::kFloatList: {
        uint64_t n = 0;
        const char* p = nullptr;
        ok = r.Get(&n) && n <= (uint64_t{1} << 32) && r.GetBytes(n * sizeof(double), &p);
        std::vector<double> v(ok ? n : 0);
        if (ok && n > 0) std::memcpy(v.data(), p, n * sizeof(double));
        args.emplace_back(std::move(v));
        break;
      }
      case Value::Kind::kString: {
        uint64_t n = 0;
        const char* p = nullptr;
        ok = r.Get(&n) && r.GetBytes(n, &p);
        args.emplace_back(ok ? std::string(p, n) : std::string());
        break;
      }
      case Value::Kind::kDtype: {
        int32_t v = 0;
        ok = r.Get(&v);
        args.emplace_back(static_cast<ScalarType>(v));
        break;
      }
      default: return InternalErr("an argument kind the worker does not take");
    }
    if (!ok) return InternalErr("a malformed call");
  }
  KernelContext ctx;
  ctx.device = kCPU;
  ctx.args = args;
  ctx.input_base = [&bases](const TensorMeta* m) -> char* {
    for (const auto& [meta, base] : bases) {
      if (meta == m) return base;
    }
    return nullptr;
  };
  for (uint32_t i = 0; i < nouts; ++i) {
    const TensorMeta* m = nullptr;
    TD_RETURN_IF_ERROR(get_tensor(&m));
    ctx.outputs.push_back(TensorRef{bases.back().second, m});
  }
  WorkerScratch scratch(h.scratch_limit);
  ScopedScratchAllocator scoped(&scratch);
  return RunArtifactKernel(*k, ctx);
}

}  // namespace

int ArtifactWorkerMain(int fd) {
  // Only the socket is meant to be open past stdio (the daemon's own
  // descriptors are close-on-exec; this covers any that are not).
  if (fd > 3) ::close_range(3, static_cast<unsigned>(fd - 1), 0);
  ::close_range(static_cast<unsigned>(fd + 1), ~0u, 0);
  // The daemon's end of the socket closes when the daemon dies, however it
  // dies: then the worker ends too, even in the middle of a kernel that
  // never returns. A thread that waits for that hang-up does it; not
  // PR_SET_PDEATHSIG, which fires when the *thread* that started the
  // worker ends (a session's thread may end while its session lives on).
  std::thread([fd] {
    for (;;) {
      pollfd p{fd, POLLRDHUP, 0};
      const int r = ::poll(&p, 1, -1);
      if (r > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)) != 0) ::_exit(0);
      if (r < 0 && errno != EINTR) ::_exit(1);
    }
  }).detach();
  ::prctl(PR_SET_NAME, "tensord-worker", 0, 0, 0);

  WorkerState st;
  st.sock = fd;
  for (;;) {
    WireRequest h{};
    int fds[2];
    const ssize_t n = RecvMessage(fd, &h, sizeof(h), fds);
    if (n == 0) return 0;  // the session ended
    if (n != static_cast<ssize_t>(sizeof(h)) || h.magic != kRequestMagic) return 1;
    int at = 0;
    if ((h.fds & kWithArena) != 0) {
      const int arena_fd = fds[at++];
      if (arena_fd < 0) return 1;
      void* p = ::mmap(nullptr, h.arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, arena_fd, 0);
      ::close(arena_fd);
      if (p == MAP_FAILED) return 1;
      if (st.arena != nullptr) ::munmap(st.arena, st.arena_bytes);
      st.arena = static_cast<char*>(p);
      st.arena_bytes = h.arena_bytes;
    }
    const int object_fd = (h.fds & kWithObject) != 0 ? fds[at++] : -1;
    if (st.arena == nullptr || h.arena_bytes != st.arena_bytes || h.body_bytes > st.arena_bytes) return 1;
    absl::Status s;
    if (h.type == kLoad) {
      s = LoadInWorker(st, h, object_fd);
      if (!s.ok() && object_fd >= 0) ::close(object_fd);  // kept open only with its object
    } else if (h.type == kCall) {
      s = CallInWorker(st, h);
    } else {
      return 1;
    }
    if (!Reply(fd, s.ok(), s.ok() ? ErrorKind::kRuntime : KindOf(s), s.message())) return 0;
  }
}

}  // namespace tensord::runtime
