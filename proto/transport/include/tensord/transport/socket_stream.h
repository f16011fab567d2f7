// tensord/transport/socket_stream.h — the session stream over the daemon's
// side-channel socket ("<daemon socket>.shm", SOCK_SEQPACKET), for a client
// on the same host: the same ClientMessage and ServerMessage bytes as on the
// gRPC stream, carried in records, without gRPC's HTTP/2 framing and thread
// hand-offs. A round trip over it costs one socket wake-up each way, less
// when the receiver polls (see StreamReceiver); bench/RESULTS.md compares
// it with a bare gRPC ping-pong.
//
//   client                                   daemon
//   ShmFrame{kHelloStream, session_id, token} ->  checks peer uid and token
//                                     <-     ShmReply{code 0}
//   message records                   ->     executed in order, as on gRPC
//                                     <-     message records (replies)
//                                     <-     an end record (why it ended)
//
// A message is one or more records, each a RecordHeader then up to
// kStreamRecordBytes of the message's bytes; every record but the last has
// kRecordMore. An end record (kRecordEnd) carries an absl::StatusCode (int32)
// and a message: why the daemon ended the stream; the socket closes after it.
//
// The same stream also runs over TCP (StreamFraming::kByteStream), for a
// client that reached the daemon at HOST:PORT: the client opens a second
// connection to the same port, whose first bytes are the same
// ShmFrame{kHelloStream} (the daemon tells it from gRPC's HTTP/2 preface);
// the daemon checks the token only (a TCP peer has no user id to check);
// then each message is one record, a ByteStreamHeader (with the payload's
// length, as a byte stream has no record boundaries) and the message's bytes.
#ifndef TENSORD_TRANSPORT_SOCKET_STREAM_H_
#define TENSORD_TRANSPORT_SOCKET_STREAM_H_

#include <grpcpp/support/byte_buffer.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensord::wire {

inline constexpr uint32_t kStreamMagic = 0x31534454;  // "TDS1" little-endian
inline constexpr uint32_t kRecordMore = 1;  // the message continues in the next record
inline constexpr uint32_t kRecordEnd = 2;   // the stream's end; the payload says why

struct RecordHeader {
  uint32_t magic = kStreamMagic;
  uint32_t flags = 0;
};
static_assert(sizeof(RecordHeader) == 8, "RecordHeader is a wire format: its size is fixed");

// How a socket's records are delimited. kRecords: a SOCK_SEQPACKET Unix
// socket, one record per datagram (RecordHeader, then at most
// kStreamRecordBytes). kByteStream: a TCP (SOCK_STREAM) socket, one record
// per message (ByteStreamHeader, then `length` bytes), never kRecordMore.
enum class StreamFraming { kRecords, kByteStream };

struct ByteStreamHeader {
  uint32_t magic = kStreamMagic;
  uint32_t flags = 0;    // kRecordEnd or 0
  uint64_t length = 0;   // payload bytes after this header
};
static_assert(sizeof(ByteStreamHeader) == 16, "ByteStreamHeader is a wire format: its size is fixed");
// The longest end record's payload on a byte stream (a status code and its
// message, cut to 4 KiB by SendStreamEnd).
inline constexpr size_t kMaxEndRecordBytes = 4 + 4096;

// Payload bytes per record: well under the default socket buffer (208 KiB),
// which bounds one SOCK_SEQPACKET record. Where a socket's buffer is smaller,
// the sender's records are too (down to 1 KiB); receivers take any length up
// to this.
inline constexpr size_t kStreamRecordBytes = 64 << 10;

// Sends `bb` as one message (its slices gathered into records; the kernel
// copies them, so `bb` may be cleared once this returns). Blocks while the
// socket's buffer is full. Unavailable when the socket failed (the peer
// closed it or died). Safe to call from one thread at a time per socket.
absl::Status SendStreamMessage(int sock, const grpc::ByteBuffer& bb,
                               StreamFraming framing = StreamFraming::kRecords);

// Sends the end record with `why` (OK: the stream ended normally; its
// message is cut to 4 KiB).
absl::Status SendStreamEnd(int sock, const absl::Status& why, StreamFraming framing = StreamFraming::kRecords);

// A TCP address as a host (an IPv6 one without brackets) and a port.
struct HostPort {
  std::string host;
  int port = 0;
};

// Parses "HOST:PORT" or "[IPV6]:PORT" (an IPv6 host needs its brackets),
// with a port in 0..65535 (0: "any free port", for a listener). The one
// parser of both the daemon's --listen and the client's TCP stream target.
// InvalidArgument naming `text` and the expected form otherwise.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view text);

// "HOST:PORT", or "[HOST]:PORT" when the host is an IPv6 address (has a
// colon): the form ParseHostPort reads and gRPC targets take.
std::string FormatHostPort(absl::string_view host, int port);

// Opens the session stream over TCP to the daemon at `address` (HOST:PORT,
// [IPV6]:PORT, or ipv4:/ipv6:/dns: URIs of one such address, %-escapes
// decoded, as gRPC's ClientContext::peer names it): connects
// (within `timeout_ms` milliseconds), turns Nagle's algorithm off, says
// ShmFrame{kHelloStream, session_id, token} and waits (as long again) for
// the daemon's ShmReply. Returns the connected socket (blocking,
// close-on-exec, no receive timeout left; owned by the caller), or:
// InvalidArgument for an address this cannot parse or a token over
// kShmMaxTokenBytes, Unavailable when no connection could be made or the
// daemon did not answer in time, or the reply's error (a daemon that
// refused the hello).
// `prefer` (optional; as ClientContext::peer names an address, e.g.
// "ipv6:%5B::1%5D:7000") goes first when it is one of the addresses
// `address` resolves to: the one gRPC reached, where a name resolves to
// several (localhost to ::1 and 127.0.0.1) and only one is the daemon's.
// When it is not (gRPC went through a proxy), FailedPrecondition and
// nothing is contacted: the proxy may be the only way to the daemon, and
// the hello, which carries the session's token, goes to no one else.
absl::StatusOr<int> ConnectTcpStream(absl::string_view address, uint64_t session_id, absl::string_view token,
                                     int timeout_ms, absl::string_view prefer = {});

// How long a receiver polls the socket for the next record before it
// blocks (see StreamReceiver): 100 us. On a virtual machine a blocked
// thread's core halts, and waking it costs several microseconds each way,
// which polling saves a round trip whose reply comes within that time.
inline constexpr int64_t kDefaultStreamSpinNanos = 100'000;
// The longest polling time a setting may ask for: 1 s, in microseconds.
inline constexpr int64_t kMaxStreamSpinMicros = 1'000'000;

// Parses a polling time in whole microseconds, 0 to kMaxStreamSpinMicros
// ("100"): what the daemon's stream_spin_us setting and the client's
// $TENSORD_STREAM_SPIN_US hold. InvalidArgument quoting the text otherwise.
absl::StatusOr<int64_t> ParseStreamSpinMicros(absl::string_view text);

// Where the tail of a message goes instead of a StreamReceiver's buffer: the
// message's bytes from `offset` to its end are received into `dst` (which
// must have room for them); the bytes before `offset` stay in the buffer.
struct DataDestination {
  size_t offset = 0;
  char* dst = nullptr;
};
// Asked by StreamReceiver::Next (byte streams only) once a message of at
// least kMinPlacedMessageBytes has begun to arrive: `prefix` holds its first
// `prefix_len` bytes (kPlaceProbeBytes) and `total` is its length in bytes. Returns where the rest goes (an offset
// of at most `prefix_len`), or nullopt to receive the whole message into the
// buffer as usual. wire::ParseClientMessageHead and ParseServerMessageHead
// (data_frame.h) answer it for an upload's or a fetch's data.
using PlaceHook = absl::FunctionRef<std::optional<DataDestination>(const char* prefix, size_t prefix_len, size_t total)>;
// Messages shorter than this are received whole (the hook is not asked).
inline constexpr size_t kMinPlacedMessageBytes = 64 << 10;
// How many of a message's first bytes the hook sees: room for a data
// chunk's other fields (handle, meta, call site), which come first.
inline constexpr size_t kPlaceProbeBytes = 4096;

// Reassembles messages from records. One per socket, used by one thread at
// a time; the bytes of the message it returns stay valid until the next
// call to Next.
class StreamReceiver {
 public:
  // `max_message_bytes`: a longer message is an error (the peer is broken
  // or hostile), not an allocation. `spin_ns` (nanoseconds; 0 = never): how
  // long Next polls the socket without blocking before it blocks, as an
  // adaptive mutex spins before it sleeps. It polls only when the previous
  // wait ended within that time (a peer that pauses between messages costs
  // no polling), yields the core to any other runnable thread between polls,
  // and at most (cores - 1) threads of the process poll at once, counting
  // the cores it may run on (none on one core, or when pinned to one).
  // `framing`: as the socket's sender writes (kByteStream for TCP).
  explicit StreamReceiver(size_t max_message_bytes, int64_t spin_ns = kDefaultStreamSpinNanos,
                          StreamFraming framing = StreamFraming::kRecords)
      : max_bytes_(max_message_bytes), spin_ns_(spin_ns), framing_(framing) {}

  // The next message, as a byte buffer over this receiver's memory (no
  // copy). Returns true with a message; false at the end of the stream
  // (`end_status()` says why: what an end record said, or OK when the peer
  // closed the socket without one). InvalidArgument for a malformed record
  // or an over-long message, Unavailable when the socket failed; after an
  // error the stream is unusable.
  absl::StatusOr<bool> Next(int sock, grpc::ByteBuffer* bb);
  // Next, asking `place` where a large message's tail goes (see PlaceHook)
  // on a byte stream (records ignore it: theirs arrive in 64 KiB pieces).
  // When it answered with a destination, placed() is true and `bb` holds
  // only the message's bytes before the destination's offset.
  absl::StatusOr<bool> Next(int sock, grpc::ByteBuffer* bb, PlaceHook place);
  // Whether the last message Next returned had its tail received into a
  // PlaceHook's destination.
  bool placed() const { return placed_; }
  const absl::Status& end_status() const { return end_status_; }
  // True when the stream ended with an end record (the peer said why), false
  // when the socket just closed.
  bool ended_with_record() const { return ended_with_record_; }

  // The receive buffer grows to the longest message so far (and up to twice
  // that); it is freed after kShrinkAfterSmallMessages messages in a row of
  // at most kSmallMessageBytes, so that one large transfer does not pin
  // megabytes for the rest of the session.
  static constexpr size_t kSmallMessageBytes = 256 << 10;
  static constexpr int kShrinkAfterSmallMessages = 64;
  // The receive buffer's size in bytes now.
  size_t buffer_bytes() const { return capacity_; }
  // How many messages so far began to arrive while Next polled (rather than
  // blocked).
  int64_t polled_messages() const { return polled_messages_; }

 private:
  // Next for StreamFraming::kByteStream.
  absl::StatusOr<bool> NextFromByteStream(int sock, grpc::ByteBuffer* bb, const PlaceHook* place);
  // Frees a buffer grown by a large message after enough small ones.
  void MaybeShrink();
  // Makes buf_ hold at least `need` bytes, keeping its first `keep`.
  void Reserve(size_t need, size_t keep);

  size_t max_bytes_;
  int64_t spin_ns_;
  StreamFraming framing_;
  bool spin_next_ = true;
  int64_t polled_messages_ = 0;
  std::unique_ptr<char[]> buf_;
  size_t capacity_ = 0;
  int small_in_a_row_ = 0;
  absl::Status end_status_;
  bool ended_with_record_ = false;
  bool placed_ = false;
};

}  // namespace tensord::wire

#endif  // TENSORD_TRANSPORT_SOCKET_STREAM_H_
