// Fuzz target: the framing of the side channel and of the TCP stream
// (proto/transport/src/shm.cc and socket_stream.cc, proto/wire/src/
// data_frame.cc), fed through a real socketpair as a peer would send it:
//   mode 0: side-channel frames (RecvShmFrame) on SOCK_SEQPACKET;
//   mode 1: stream records (StreamReceiver, kRecords) on SOCK_SEQPACKET,
//           each message then measured (DecodedExtraBytes) and parsed as a
//           ClientMessage and a ServerMessage with their data placed
//           (ParseClientMessage, ParseServerMessage);
//   mode 2: a TCP-style byte stream (StreamReceiver, kByteStream) with the
//           upload placement hook (ParseClientMessageHead) the daemon uses;
//   mode 3: the message-head parsers on the raw bytes.
// Input: a mode byte, then for the SOCK_SEQPACKET modes datagrams, each a
// little-endian 16-bit length and that many bytes; for mode 2 the bytes.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "tensord/transport/shm.h"
#include "tensord/transport/socket_stream.h"
#include "tensord/v1/tensord.pb.h"
#include "tensord/wire/data_frame.h"

namespace {

namespace wire = tensord::wire;
namespace v1 = tensord::v1;

// A receiver never takes a message longer than this (the daemon's own cap
// is larger; the point is the framing, not the allocation).
constexpr size_t kMaxMessageBytes = 1 << 20;
// Destinations the placement hooks hand out are at most this long.
constexpr size_t kMaxPlaced = 1 << 20;

struct Pair {
  int fd[2] = {-1, -1};
  explicit Pair(int type) {
    if (::socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, fd) != 0) abort();
  }
  ~Pair() {
    for (int f : fd) if (f >= 0) ::close(f);
  }
  void CloseSender() {
    ::close(fd[0]);
    fd[0] = -1;
  }
};

// Sends the input's datagrams without blocking (the receiver reads after the
// sender is done: what does not fit in the socket's buffer is dropped).
void SendDatagrams(int sock, const uint8_t* p, const uint8_t* end) {
  while (end - p >= 2) {
    size_t len = p[0] | (size_t{p[1]} << 8);
    p += 2;
    if (len > static_cast<size_t>(end - p)) len = end - p;
    if (::send(sock, p, len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) return;
    p += len;
  }
}

// A placement into `buf` for `n` bytes, or none when n is too large.
wire::Placement Place(std::vector<char>* buf, size_t n) {
  if (n > kMaxPlaced) return wire::Placement();
  buf->assign(n, 0);
  return wire::Placement(buf->data(), n);
}

void ParseBoth(const grpc::ByteBuffer& bb) {
  // The daemon measures what a message would take before it parses it.
  (void)wire::DecodedExtraBytes(bb, v1::ClientMessage::descriptor());
  (void)wire::DecodedExtraBytes(bb, v1::HandshakeRequest::descriptor());
  std::vector<char> placed;
  grpc::ByteBuffer a = bb;
  v1::ClientMessage cm;
  (void)wire::ParseClientMessage(&a, &cm, [&](const v1::Upload&, size_t n) { return Place(&placed, n); });
  grpc::ByteBuffer b = bb;
  v1::ServerMessage sm;
  (void)wire::ParseServerMessage(&b, &sm, [&](const v1::FetchData&, size_t n) { return Place(&placed, n); });
}

void Frames(const uint8_t* p, const uint8_t* end) {
  Pair pair(SOCK_SEQPACKET);
  SendDatagrams(pair.fd[0], p, end);
  pair.CloseSender();
  for (;;) {
    wire::ShmFrame frame;
    int fd = -1;
    absl::StatusOr<bool> got = wire::RecvShmFrame(pair.fd[1], &frame, &fd);
    if (fd >= 0) ::close(fd);
    if (!got.ok() || !*got) break;
  }
}

void Records(const uint8_t* p, const uint8_t* end) {
  Pair pair(SOCK_SEQPACKET);
  SendDatagrams(pair.fd[0], p, end);
  pair.CloseSender();
  wire::StreamReceiver rx(kMaxMessageBytes, /*spin_ns=*/0, wire::StreamFraming::kRecords);
  for (;;) {
    grpc::ByteBuffer bb;
    absl::StatusOr<bool> got = rx.Next(pair.fd[1], &bb);
    if (!got.ok() || !*got) break;
    ParseBoth(bb);
  }
}

void ByteStream(const uint8_t* p, const uint8_t* end) {
  Pair pair(SOCK_STREAM);
  const int big = 1 << 20;
  ::setsockopt(pair.fd[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
  ::setsockopt(pair.fd[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
  while (p < end) {
    const ssize_t n = ::send(pair.fd[0], p, end - p, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n <= 0) break;
    p += n;
  }
  pair.CloseSender();
  wire::StreamReceiver rx(kMaxMessageBytes, /*spin_ns=*/0, wire::StreamFraming::kByteStream);
  std::vector<char> placed;
  for (;;) {
    grpc::ByteBuffer bb;
    v1::ClientMessage head;
    absl::StatusOr<bool> got = rx.Next(pair.fd[1], &bb, [&](const char* prefix, size_t prefix_len, size_t total) {
      return wire::ParseClientMessageHead(prefix, prefix_len, total, &head,
                                          [&](const v1::Upload&, size_t n) { return Place(&placed, n); });
    });
    if (!got.ok() || !*got) break;
    if (!rx.placed()) ParseBoth(bb);
  }
}

void Heads(const uint8_t* p, const uint8_t* end) {
  if (end - p < 4) return;
  // The first four bytes say how much longer than the prefix the message is.
  const size_t extra = p[0] | (size_t{p[1]} << 8) | (size_t{p[2]} << 16) | (size_t{p[3]} << 24);
  p += 4;
  const size_t n = end - p;
  const size_t prefix_len = n < wire::kPlaceProbeBytes ? n : wire::kPlaceProbeBytes;
  const char* prefix = reinterpret_cast<const char*>(p);
  std::vector<char> placed;
  v1::ClientMessage cm;
  std::optional<wire::DataDestination> d = wire::ParseClientMessageHead(
      prefix, prefix_len, n + extra, &cm, [&](const v1::Upload&, size_t k) { return Place(&placed, k); });
  if (d && d->offset > prefix_len) abort();  // the hook's contract: within the prefix
  v1::ServerMessage sm;
  d = wire::ParseServerMessageHead(prefix, prefix_len, n + extra, &sm,
                                   [&](const v1::FetchData&, size_t k) { return Place(&placed, k); });
  if (d && d->offset > prefix_len) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > (256 << 10)) return 0;
  const uint8_t* end = data + size;
  switch (data[0] % 4) {
    case 0: Frames(data + 1, end); break;
    case 1: Records(data + 1, end); break;
    case 2: ByteStream(data + 1, end); break;
    case 3: Heads(data + 1, end); break;
  }
  return 0;
}
