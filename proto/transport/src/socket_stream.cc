// The session stream over the side-channel socket (see
// tensord/transport/socket_stream.h).
#include "tensord/transport/socket_stream.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sched.h>
#include <unistd.h>

#include <grpcpp/support/slice.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "datagram.h"
#include "tensord/transport/cpus.h"
#include "tensord/transport/shm.h"

namespace tensord::wire {
namespace {

constexpr char kChannel[] = "same-host stream";

absl::Status Errno(absl::string_view what) { return internal::ErrnoStatus(kChannel, what); }

// Sends one record (a datagram: all of it or nothing).
absl::Status SendRecord(int sock, iovec* iov, size_t iovcnt, size_t bytes) {
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = iovcnt;
  return internal::SendDatagram(sock, msg, bytes, kChannel);
}

// At most this many slices' pieces in one record (a message's slices are
// few: protobuf's bytes and, for a data chunk, the borrowed data).
constexpr size_t kMaxIov = 64;
// The shortest record SendStreamMessage falls back to.
constexpr size_t kMinRecordBytes = 1024;

// How many threads of this process spin in Next now, and at most how many
// may: one fewer than the cores it can keep busy (none on one core, where a
// spinning thread only delays the peer it waits for): the online cores, or
// fewer when the process is pinned (taskset, a cpuset) or under a cgroup CPU
// quota (UsableCores, read once).
std::atomic<int> g_spinners{0};
int MaxSpinners() { return UsableCores() - 1; }

// Receives one record into `msg`: when `spin_ns` > 0 and a spinner slot is
// free, polls the socket without blocking for up to `spin_ns` (yielding the
// core to any other runnable thread between polls), then blocks. `*polled`:
// whether the record came while polling.
ssize_t ReceiveRecord(int sock, msghdr* msg, int64_t spin_ns, bool* polled) {
  *polled = false;
  ssize_t r;
  if (spin_ns > 0) {
    int now = g_spinners.load(std::memory_order_relaxed);
    if (now < MaxSpinners() && g_spinners.compare_exchange_strong(now, now + 1, std::memory_order_relaxed)) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(spin_ns);
      bool done;  // a record came, or an error other than "nothing yet"
      for (;;) {
        r = ::recvmsg(sock, msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        done = r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
        if (done || std::chrono::steady_clock::now() >= deadline) break;
        ::sched_yield();
      }
      g_spinners.fetch_sub(1, std::memory_order_relaxed);
      if (done) {
        *polled = r > 0;
        return r;
      }
    }
  }
  do {
    r = ::recvmsg(sock, msg, MSG_CMSG_CLOEXEC);
  } while (r < 0 && errno == EINTR);
  return r;
}

constexpr char kTcpChannel[] = "tcp stream";
// A TCP-stream message's buffer first grows to this much; past it, to at
// most twice the bytes received.
constexpr size_t kFirstReceiveStepBytes = size_t{1} << 20;

// Sends every byte of `iov` on a byte stream, however the kernel splits it.
absl::Status SendAllBytes(int sock, std::vector<iovec> iov) {
  size_t i = 0;
  while (i < iov.size()) {
    msghdr msg{};
    msg.msg_iov = iov.data() + i;
    msg.msg_iovlen = std::min<size_t>(iov.size() - i, IOV_MAX);
    const ssize_t r = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EINTR) continue;
      return internal::ErrnoStatus(kTcpChannel, "send");
    }
    size_t done = static_cast<size_t>(r);
    while (i < iov.size() && done >= iov[i].iov_len) done -= iov[i++].iov_len;
    if (i < iov.size()) {
      iov[i].iov_base = static_cast<char*>(iov[i].iov_base) + done;
      iov[i].iov_len -= done;
    }
  }
  return absl::OkStatus();
}

// Receives exactly `n` bytes into `p`, blocking. Returns how many came
// before the end of the stream (n when all did).
absl::StatusOr<size_t> RecvAllBytes(int sock, char* p, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::recv(sock, p + got, n - got, MSG_WAITALL);
    if (r < 0) {
      if (errno == EINTR) continue;
      return internal::ErrnoStatus(kTcpChannel, "receive");
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

}  // namespace

absl::StatusOr<int64_t> ParseStreamSpinMicros(absl::string_view text) {
  int64_t us = -1;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &us) || us < 0 || us > kMaxStreamSpinMicros) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a polling time in microseconds (a whole number from 0 to ",
                                                   kMaxStreamSpinMicros, ")"));
  }
  return us;
}

absl::Status SendStreamMessage(int sock, const grpc::ByteBuffer& bb, StreamFraming framing) {
  std::vector<grpc::Slice> slices;
  (void)bb.Dump(&slices);  // an empty buffer has no slices: one empty record
  size_t total = 0;
  for (const grpc::Slice& s : slices) total += s.size();
  if (framing == StreamFraming::kByteStream) {
    // One record: the header and every slice in as few sends as the kernel takes.
    ByteStreamHeader bh;
    bh.length = total;
    std::vector<iovec> iov;
    iov.reserve(slices.size() + 1);
    iov.push_back({&bh, sizeof(bh)});
    for (const grpc::Slice& s : slices) {
      if (s.size() > 0) iov.push_back({const_cast<uint8_t*>(s.begin()), s.size()});
    }
    return SendAllBytes(sock, std::move(iov));
  }
  RecordHeader head;
  iovec iov[kMaxIov + 1];
  iov[0].iov_base = &head;
  iov[0].iov_len = sizeof(head);
  size_t si = 0, off = 0, sent = 0;  // the next byte to send: slices[si] at off
  // Records carry up to kStreamRecordBytes, fewer on a host whose socket
  // buffers are too small for that (sysctl net.core.wmem_default): a record
  // the socket refuses as too long is sent again in halves.
  size_t limit = kStreamRecordBytes;
  do {
    const size_t si0 = si, off0 = off;
    size_t n = 1, bytes = 0;
    while (si < slices.size() && bytes < limit && n <= kMaxIov) {
      const size_t take = std::min(slices[si].size() - off, limit - bytes);
      if (take > 0) {
        iov[n].iov_base = const_cast<uint8_t*>(slices[si].begin() + off);
        iov[n].iov_len = take;
        ++n;
        bytes += take;
        off += take;
      }
      if (off == slices[si].size()) {
        ++si;
        off = 0;
      }
    }
    head.flags = sent + bytes < total ? kRecordMore : 0;
    absl::Status st = SendRecord(sock, iov, n, sizeof(head) + bytes);
    if (absl::IsOutOfRange(st) && limit > kMinRecordBytes) {
      limit /= 2;
      si = si0;
      off = off0;
      continue;  // the same bytes again, in a shorter record
    }
    if (!st.ok()) return st;
    sent += bytes;
  } while (sent < total);
  return absl::OkStatus();
}

absl::Status SendStreamEnd(int sock, const absl::Status& why, StreamFraming framing) {
  RecordHeader head;
  head.flags = kRecordEnd;
  const int32_t code = static_cast<int32_t>(why.code());
  const absl::string_view m = why.message().substr(0, kMaxEndRecordBytes - sizeof(code));
  if (framing == StreamFraming::kByteStream) {
    ByteStreamHeader bh;
    bh.flags = kRecordEnd;
    bh.length = sizeof(code) + m.size();
    std::vector<iovec> iov = {{&bh, sizeof(bh)}, {const_cast<int32_t*>(&code), sizeof(code)}};
    if (!m.empty()) iov.push_back({const_cast<char*>(m.data()), m.size()});
    return SendAllBytes(sock, std::move(iov));
  }
  iovec iov[3] = {{&head, sizeof(head)}, {const_cast<int32_t*>(&code), sizeof(code)},
                  {const_cast<char*>(m.data()), m.size()}};
  return SendRecord(sock, iov, m.empty() ? 2 : 3, sizeof(head) + sizeof(code) + m.size());
}

void StreamReceiver::MaybeShrink() {
  // The previous message (the caller is done with it) was one more small
  // one: after enough of them, a buffer grown by a large one goes.
  if (small_in_a_row_ >= kShrinkAfterSmallMessages && capacity_ > 2 * kSmallMessageBytes) {
    buf_.reset();
    capacity_ = 0;
  }
}

absl::StatusOr<bool> StreamReceiver::Next(int sock, grpc::ByteBuffer* bb, PlaceHook place) {
  if (framing_ != StreamFraming::kByteStream) return Next(sock, bb);
  placed_ = false;
  MaybeShrink();
  return NextFromByteStream(sock, bb, &place);
}

absl::StatusOr<bool> StreamReceiver::Next(int sock, grpc::ByteBuffer* bb) {
  placed_ = false;
  MaybeShrink();
  if (framing_ == StreamFraming::kByteStream) return NextFromByteStream(sock, bb, nullptr);
  size_t size = 0;  // message bytes gathered so far
  // Spin for this message only when the last wait was short enough to have
  // ended within the spin (as an adaptive mutex does): a session that pauses
  // between messages costs no polling.
  const auto wait_start = spin_ns_ > 0 ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  bool first = true;
  for (;;) {
    // Room for one more record's payload after the header, which lands just
    // before it (and is moved out of the way).
    Reserve(size + sizeof(RecordHeader) + kStreamRecordBytes, size);
    RecordHeader head;
    iovec iov[2] = {{&head, sizeof(head)}, {buf_.get() + size, kStreamRecordBytes}};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    bool polled = false;
    const ssize_t r = ReceiveRecord(sock, &msg, spin_next_ ? spin_ns_ : 0, &polled);
    if (r < 0) return Errno("receive");
    if (first && spin_ns_ > 0) {
      spin_next_ = std::chrono::steady_clock::now() - wait_start <= std::chrono::nanoseconds(spin_ns_);
      if (polled) ++polled_messages_;
    }
    first = false;
    if (r == 0) {
      if (size > 0) return absl::UnavailableError("same-host stream: the socket closed inside a message");
      end_status_ = absl::OkStatus();
      return false;
    }
    if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 || static_cast<size_t>(r) < sizeof(head) ||
        head.magic != kStreamMagic) {
      return absl::InvalidArgumentError(absl::StrCat("same-host stream: a malformed record of ", r, " bytes"));
    }
    const size_t payload = static_cast<size_t>(r) - sizeof(head);
    if ((head.flags & kRecordEnd) != 0) {
      int32_t code = 0;
      if (payload < sizeof(code) || size > 0) {
        return absl::InvalidArgumentError("same-host stream: a malformed end record");
      }
      const char* p = buf_.get() + size;
      std::memcpy(&code, p, sizeof(code));
      end_status_ = absl::Status(static_cast<absl::StatusCode>(code), std::string(p + sizeof(code), payload - sizeof(code)));
      ended_with_record_ = true;
      return false;
    }
    size += payload;
    if (size > max_bytes_) {
      return absl::InvalidArgumentError(
          absl::StrCat("same-host stream: a message longer than ", max_bytes_, " bytes"));
    }
    if ((head.flags & kRecordMore) == 0) break;
  }
  small_in_a_row_ = size <= kSmallMessageBytes ? small_in_a_row_ + 1 : 0;
  // A slice over our buffer: no copy, no reference count (it is ours until
  // the next call).
  grpc::Slice s(buf_.get(), size, grpc::Slice::STATIC_SLICE);
  *bb = grpc::ByteBuffer(&s, 1);
  return true;
}

void StreamReceiver::Reserve(size_t need, size_t keep) {
  if (need <= capacity_) return;
  const size_t cap = std::max(need, capacity_ * 2);
  std::unique_ptr<char[]> grown(new char[cap]);
  if (keep > 0) std::memcpy(grown.get(), buf_.get(), keep);
  buf_ = std::move(grown);
  capacity_ = cap;
}

absl::StatusOr<bool> StreamReceiver::NextFromByteStream(int sock, grpc::ByteBuffer* bb, const PlaceHook* place) {
  // The header: its first bytes polled for as on a record socket (when the
  // last wait was short), the rest of it waited for.
  ByteStreamHeader head;
  iovec iov{&head, sizeof(head)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  const auto wait_start = spin_ns_ > 0 ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  bool polled = false;
  const ssize_t r = ReceiveRecord(sock, &msg, spin_next_ ? spin_ns_ : 0, &polled);
  if (r < 0) return internal::ErrnoStatus(kTcpChannel, "receive");
  if (spin_ns_ > 0) {
    spin_next_ = std::chrono::steady_clock::now() - wait_start <= std::chrono::nanoseconds(spin_ns_);
    if (polled) ++polled_messages_;
  }
  if (r == 0) {
    end_status_ = absl::OkStatus();
    return false;
  }
  size_t got = static_cast<size_t>(r);
  if (got < sizeof(head)) {
    absl::StatusOr<size_t> more = RecvAllBytes(sock, reinterpret_cast<char*>(&head) + got, sizeof(head) - got);
    if (!more.ok()) return more.status();
    got += *more;
    if (got < sizeof(head)) return absl::UnavailableError("tcp stream: the socket closed inside a record header");
  }
  if (head.magic != kStreamMagic || (head.flags & ~kRecordEnd) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("tcp stream: a malformed record header (magic ",
                                                   absl::Hex(head.magic), ", flags ", head.flags, ")"));
  }
  const bool end = (head.flags & kRecordEnd) != 0;
  if (end && (head.length < sizeof(int32_t) || head.length > kMaxEndRecordBytes)) {
    return absl::InvalidArgumentError(absl::StrCat("tcp stream: a malformed end record of ", head.length, " bytes"));
  }
  if (head.length > max_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat("tcp stream: a message of ", head.length,
                                                   " bytes, longer than the limit of ", max_bytes_, " bytes"));
  }
  const size_t size = static_cast<size_t>(head.length);
  size_t have = 0;  // of the message's bytes, in buf_ already
  if (place != nullptr && !end && size >= kMinPlacedMessageBytes) {
    // Its first bytes, for the hook to say where the rest goes: straight
    // into a tensor's storage or a fetch's buffer is one copy (the
    // kernel's) instead of two.
    static_assert(kPlaceProbeBytes <= kMinPlacedMessageBytes, "the probe is a prefix of the message");
    have = kPlaceProbeBytes;
    Reserve(have, 0);
    absl::StatusOr<size_t> probe = RecvAllBytes(sock, buf_.get(), have);
    if (!probe.ok()) return probe.status();
    if (*probe < have) return absl::UnavailableError("tcp stream: the socket closed inside a message");
    const std::optional<DataDestination> to = (*place)(buf_.get(), have, size);
    if (to.has_value() && to->dst != nullptr && to->offset <= have) {
      std::memcpy(to->dst, buf_.get() + to->offset, have - to->offset);
      absl::StatusOr<size_t> rest = RecvAllBytes(sock, to->dst + (have - to->offset), size - have);
      if (!rest.ok()) return rest.status();
      if (*rest < size - have) return absl::UnavailableError("tcp stream: the socket closed inside a message");
      placed_ = true;
      small_in_a_row_ = 0;
      grpc::Slice s(buf_.get(), to->offset, grpc::Slice::STATIC_SLICE);
      *bb = grpc::ByteBuffer(&s, 1);
      return true;
    }
  }
  // The announced length is only the peer's claim: the buffer grows as the
  // bytes arrive (to at most twice what came, from a first step of
  // kFirstReceiveStepBytes), so a peer that announces a large message and
  // sends little makes the receiver hold little.
  Reserve(4096, have);
  while (have < size) {
    const size_t step_end = std::min(size, std::max({have * 2, kFirstReceiveStepBytes, capacity_}));
    Reserve(step_end, have);
    absl::StatusOr<size_t> body = RecvAllBytes(sock, buf_.get() + have, step_end - have);
    if (!body.ok()) return body.status();
    if (*body < step_end - have) return absl::UnavailableError("tcp stream: the socket closed inside a message");
    have = step_end;
  }
  if (end) {
    int32_t code = 0;
    std::memcpy(&code, buf_.get(), sizeof(code));
    end_status_ = absl::Status(static_cast<absl::StatusCode>(code),
                               std::string(buf_.get() + sizeof(code), size - sizeof(code)));
    ended_with_record_ = true;
    return false;
  }
  small_in_a_row_ = size <= kSmallMessageBytes ? small_in_a_row_ + 1 : 0;
  grpc::Slice s(buf_.get(), size, grpc::Slice::STATIC_SLICE);
  *bb = grpc::ByteBuffer(&s, 1);
  return true;
}

namespace {

// The value of hex digit `c`, or -1.
int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The HOST:PORT of a gRPC target naming one TCP address: itself, or what
// follows ipv4:, ipv6: or dns: (with or without an authority), with URI
// escapes decoded (gRPC names a peer "ipv6:%5B::1%5D:7070"). Empty for
// anything else (unix:, lists of addresses, a broken escape).
std::string TcpTargetAddress(absl::string_view target) {
  bool uri = false;
  for (absl::string_view scheme : {"ipv4:", "ipv6:", "dns:"}) {
    if (absl::ConsumePrefix(&target, scheme)) {
      uri = true;
      if (absl::ConsumePrefix(&target, "//")) {
        const size_t slash = target.find('/');
        if (slash == absl::string_view::npos) return {};
        target.remove_prefix(slash + 1);
      }
      break;
    }
  }
  if (target.find(',') != absl::string_view::npos || target.find('/') != absl::string_view::npos) return {};
  std::string out;
  for (size_t i = 0; i < target.size(); ++i) {
    int hi, lo;
    if (uri && target[i] == '%') {
      if (i + 2 >= target.size() || (hi = HexDigit(target[i + 1])) < 0 || (lo = HexDigit(target[i + 2])) < 0) {
        return {};
      }
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      out.push_back(target[i]);
    }
  }
  return out;
}

// Connects `fd` (non-blocking) to `addr` within `timeout_ms`.
absl::Status ConnectWithin(int fd, const sockaddr* addr, socklen_t len, int timeout_ms) {
  if (::connect(fd, addr, len) == 0) return absl::OkStatus();
  if (errno != EINPROGRESS) return internal::ErrnoStatus(kTcpChannel, "connect");
  pollfd p{fd, POLLOUT, 0};
  int r;
  do {
    r = ::poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return absl::UnavailableError(absl::StrCat("tcp stream: connect: no answer within ", timeout_ms, " ms"));
  if (r < 0) return internal::ErrnoStatus(kTcpChannel, "poll");
  int err = 0;
  socklen_t elen = sizeof(err);
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0) return internal::ErrnoStatus(kTcpChannel, "connect");
  if (err != 0) {
    errno = err;
    return internal::ErrnoStatus(kTcpChannel, "connect");
  }
  return absl::OkStatus();
}

// A TCP socket address as (port, 16 address bytes), an IPv4 address as its
// IPv4-mapped IPv6 one; port 0 for anything else.
std::pair<uint16_t, in6_addr> AddressKey(const sockaddr* sa, socklen_t n) {
  std::pair<uint16_t, in6_addr> k{0, in6_addr{}};
  if (sa->sa_family == AF_INET && n >= sizeof(sockaddr_in)) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(sa);
    k.first = v4->sin_port;
    k.second.s6_addr[10] = k.second.s6_addr[11] = 0xff;
    std::memcpy(&k.second.s6_addr[12], &v4->sin_addr, 4);
  } else if (sa->sa_family == AF_INET6 && n >= sizeof(sockaddr_in6)) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(sa);
    k.first = v6->sin6_port;
    k.second = v6->sin6_addr;
  }
  return k;
}

bool SameAddress(const addrinfo* a, const addrinfo* b) {
  const auto ka = AddressKey(a->ai_addr, a->ai_addrlen);
  const auto kb = AddressKey(b->ai_addr, b->ai_addrlen);
  return ka.first != 0 && ka.first == kb.first && std::memcmp(&ka.second, &kb.second, sizeof(in6_addr)) == 0;
}

// Whether `ai` is a loopback address (127.0.0.0/8, ::1, or IPv4-mapped).
bool IsLoopback(const addrinfo* ai) {
  const auto k = AddressKey(ai->ai_addr, ai->ai_addrlen);
  const uint8_t* b = k.second.s6_addr;
  static constexpr uint8_t kV6Loopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  const bool mapped = std::all_of(b, b + 10, [](uint8_t x) { return x == 0; }) && b[10] == 0xff && b[11] == 0xff;
  return k.first != 0 && ((mapped && b[12] == 127) || std::memcmp(b, kV6Loopback, 16) == 0);
}

}  // namespace

absl::StatusOr<HostPort> ParseHostPort(absl::string_view text) {
  absl::string_view host, port;
  absl::string_view rest = text;
  if (absl::ConsumePrefix(&rest, "[")) {
    const size_t close = rest.find(']');
    if (close == absl::string_view::npos || close + 1 >= rest.size() || rest[close + 1] != ':') {
      return absl::InvalidArgumentError(absl::StrCat("'", text, "': expected [IPV6]:PORT (e.g. [::1]:7070)"));
    }
    host = rest.substr(0, close);
    port = rest.substr(close + 2);
  } else {
    const size_t colon = rest.rfind(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("'", text, "': expected HOST:PORT (e.g. 127.0.0.1:7070)"));
    }
    if (rest.find(':') != colon) {
      const absl::string_view head = rest.substr(0, colon);
      const bool ipv6_like = std::all_of(head.begin(), head.end(), [](char c) {
        return absl::ascii_isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
      });
      return absl::InvalidArgumentError(absl::StrCat(
          "'", text, "': ",
          ipv6_like ? "an IPv6 host needs brackets, as in [::1]:7070" : "expected HOST:PORT (e.g. 127.0.0.1:7070)"));
    }
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  HostPort hp;
  if (std::any_of(host.begin(), host.end(), [](char c) { return absl::ascii_isspace(static_cast<unsigned char>(c)); })) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "': expected HOST:PORT without spaces (e.g. 127.0.0.1:7070)"));
  }
  if (host.empty() || !absl::SimpleAtoi(port, &hp.port) || hp.port < 0 || hp.port > 65535 ||
      !absl::ascii_isdigit(static_cast<unsigned char>(port.front())) ||
      !absl::ascii_isdigit(static_cast<unsigned char>(port.back()))) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "': expected HOST:PORT with a port in 0..65535 (e.g. 127.0.0.1:7070)"));
  }
  hp.host = std::string(host);
  return hp;
}

std::string FormatHostPort(absl::string_view host, int port) {
  if (host.find(':') != absl::string_view::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<int> ConnectTcpStream(absl::string_view address, uint64_t session_id, absl::string_view token,
                                     int timeout_ms, absl::string_view prefer) {
  absl::StatusOr<HostPort> hp = ParseHostPort(TcpTargetAddress(address));
  if (!hp.ok() || hp->port == 0) {
    return absl::InvalidArgumentError(absl::StrCat("tcp stream: '", address, "' is not one HOST:PORT"));
  }
  const std::string& host = hp->host;
  const std::string port = absl::StrCat(hp->port);
  if (token.size() > kShmMaxTokenBytes) return absl::InvalidArgumentError("tcp stream: session token too long");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return absl::UnavailableError(absl::StrCat("tcp stream: cannot resolve ", host, ": ", gai_strerror(rc)));
  }
  absl::Status why = absl::UnavailableError(absl::StrCat("tcp stream: no address for ", address));
  std::vector<const addrinfo*> order;
  // The preferred address (numeric, as gRPC names its peer) goes first.
  addrinfo* peer = nullptr;
  absl::StatusOr<HostPort> peer_hp = ParseHostPort(TcpTargetAddress(prefer));
  if (!prefer.empty() && peer_hp.ok()) {
    addrinfo numeric{};
    numeric.ai_family = AF_UNSPEC;
    numeric.ai_socktype = SOCK_STREAM;
    numeric.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    if (::getaddrinfo(peer_hp->host.c_str(), absl::StrCat(peer_hp->port).c_str(), &numeric, &peer) != 0) peer = nullptr;
  }
  if (peer != nullptr) {
    bool resolved = false;
    for (const addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) resolved = resolved || SameAddress(ai, peer);
    // gRPC's resolver may give localhost both loopbacks where getaddrinfo
    // gives one (RFC 6761 names it loopback whatever /etc/hosts says).
    const bool local = (absl::EqualsIgnoreCase(host, "localhost") || absl::EndsWithIgnoreCase(host, ".localhost")) &&
                       IsLoopback(peer) && peer_hp->port == hp->port;
    if (!resolved && !local) {
      ::freeaddrinfo(peer);
      ::freeaddrinfo(res);
      return absl::FailedPreconditionError(absl::StrCat("tcp stream: gRPC reached the daemon at ", prefer, ", which ",
                                                        host, " does not resolve to (a proxy?)"));
    }
    order.push_back(peer);
  }
  for (const addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    if (peer == nullptr || !SameAddress(ai, peer)) order.push_back(ai);
  }
  int fd = -1;
  for (size_t i = 0; i < order.size() && fd < 0; ++i) {
    const addrinfo* ai = order[i];
    const int s = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (s < 0) continue;
    why = ConnectWithin(s, ai->ai_addr, ai->ai_addrlen, timeout_ms);
    if (why.ok()) {
      fd = s;
    } else {
      ::close(s);
    }
  }
  ::freeaddrinfo(res);
  if (peer != nullptr) ::freeaddrinfo(peer);
  if (fd < 0) return why;
  const int flags = ::fcntl(fd, F_GETFL);
  const int one = 1;
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};  // a daemon that does not answer must not hang us
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 ||
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0) {
    absl::Status st = internal::ErrnoStatus(kTcpChannel, "setting the socket up");
    ::close(fd);
    return st;
  }
  ShmFrame hello;
  hello.op = static_cast<uint32_t>(ShmOp::kHelloStream);
  hello.session_id = session_id;
  hello.token_size = static_cast<uint32_t>(token.size());
  if (!token.empty()) std::memcpy(hello.token, token.data(), token.size());
  absl::Status st = SendShmFrame(fd, hello);
  if (st.ok()) st = RecvShmReply(fd);
  timeval none{0, 0};  // a sync point may wait for a long op
  if (st.ok() && (::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none)) != 0 ||
                  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof(none)) != 0)) {
    st = internal::ErrnoStatus(kTcpChannel, "setting the socket up");
  }
  if (!st.ok()) {
    ::close(fd);
    return st;
  }
  return fd;
}

}  // namespace tensord::wire
