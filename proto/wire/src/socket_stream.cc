// The session stream over the side-channel socket (see
// tensord/wire/socket_stream.h).
#include "tensord/wire/socket_stream.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <sched.h>
#include <unistd.h>

#include <grpcpp/support/slice.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "datagram.h"
#include "tensord/wire/cpus.h"

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

}  // namespace

absl::StatusOr<int64_t> ParseStreamSpinMicros(absl::string_view text) {
  int64_t us = -1;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &us) || us < 0 || us > kMaxStreamSpinMicros) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a polling time in microseconds (a whole number from 0 to ",
                                                   kMaxStreamSpinMicros, ")"));
  }
  return us;
}

absl::Status SendStreamMessage(int sock, const grpc::ByteBuffer& bb) {
  std::vector<grpc::Slice> slices;
  (void)bb.Dump(&slices);  // an empty buffer has no slices: one empty record
  size_t total = 0;
  for (const grpc::Slice& s : slices) total += s.size();
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

absl::Status SendStreamEnd(int sock, const absl::Status& why) {
  RecordHeader head;
  head.flags = kRecordEnd;
  const int32_t code = static_cast<int32_t>(why.code());
  const absl::string_view m = why.message().substr(0, 4096);
  iovec iov[3] = {{&head, sizeof(head)}, {const_cast<int32_t*>(&code), sizeof(code)},
                  {const_cast<char*>(m.data()), m.size()}};
  return SendRecord(sock, iov, m.empty() ? 2 : 3, sizeof(head) + sizeof(code) + m.size());
}

absl::StatusOr<bool> StreamReceiver::Next(int sock, grpc::ByteBuffer* bb) {
  // The previous message (the caller is done with it) was one more small
  // one: after enough of them, a buffer grown by a large one goes.
  if (small_in_a_row_ >= kShrinkAfterSmallMessages && capacity_ > 2 * kSmallMessageBytes) {
    buf_.reset();
    capacity_ = 0;
  }
  size_t size = 0;  // message bytes gathered so far
  // Spin for this message only when the last wait was short enough to have
  // ended within the spin (as an adaptive mutex does): a session that pauses
  // between messages costs no polling.
  const auto wait_start = spin_ns_ > 0 ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  bool first = true;
  for (;;) {
    // Room for one more record's payload after the header, which lands just
    // before it (and is moved out of the way).
    const size_t need = size + sizeof(RecordHeader) + kStreamRecordBytes;
    if (need > capacity_) {
      const size_t cap = std::max(need, capacity_ * 2);
      std::unique_ptr<char[]> grown(new char[cap]);
      if (size > 0) std::memcpy(grown.get(), buf_.get(), size);
      buf_ = std::move(grown);
      capacity_ = cap;
    }
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

}  // namespace tensord::wire
