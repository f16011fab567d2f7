// tensord/wire/data_frame.h — the data chunks of the session stream (an
// Upload's or a FetchData's `data`) encoded as gRPC byte buffers whose data
// slice is the caller's memory, so that the sender copies nothing: protobuf
// would copy the bytes into the message's string and again into gRPC's
// buffer.
//
// The encoding is ordinary protobuf: the message's other fields, serialized
// by protobuf, followed by the `data` field (a field may come in any order),
// nested in the ClientMessage or ServerMessage that carries it. A peer parses
// it like any other message.
//
//   wire::BorrowedSlices borrowed;
//   grpc::ByteBuffer bb = wire::EncodeUploadChunk(upload_without_data, borrowed.Borrow(ptr, n));
//   stream->Write(bb);
//   borrowed.WaitUntilReleased();   // gRPC no longer reads `ptr`
#ifndef TENSORD_WIRE_DATA_FRAME_H_
#define TENSORD_WIRE_DATA_FRAME_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/functional/function_ref.h"

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#include "tensord/transport/socket_stream.h"  // DataDestination
#include "tensord/v1/tensord.pb.h"

namespace tensord::wire {

// Data of fewer bytes is not worth borrowing or placing: a message this
// small is serialized and parsed by protobuf as usual (the extra steps cost
// more than the copy they save, which shows in a round trip of one op).
inline constexpr size_t kMinBorrowedBytes = 64 << 10;

// Slices over memory the caller owns (no copy), counted until gRPC drops its
// last reference to each. gRPC lets go of a message's slices once it has
// written them to the socket, which a blocking Write waits for; waiting for
// the count makes that explicit, so the memory may be reused or freed after
// WaitUntilReleased. Not copyable; must outlive the slices (wait first).
class BorrowedSlices {
 public:
  BorrowedSlices() = default;
  BorrowedSlices(const BorrowedSlices&) = delete;
  BorrowedSlices& operator=(const BorrowedSlices&) = delete;
  ~BorrowedSlices() { WaitUntilReleased(); }

  // A slice over `n` bytes at `data`, which must stay valid and unchanged
  // until WaitUntilReleased returns.
  grpc::Slice Borrow(const void* data, size_t n);
  // Blocks until gRPC holds none of the borrowed slices.
  void WaitUntilReleased();

 private:
  static void Released(void* self);
  absl::Mutex mu_;
  int held_ ABSL_GUARDED_BY(mu_) = 0;
};

// ClientMessage{requests: [Request{upload: head + data}]}. `head` must have
// an empty `data` (it is the chunk's other fields).
grpc::ByteBuffer EncodeUploadChunk(const v1::Upload& head, grpc::Slice data);

// ServerMessage{data: head + data}. `head` must have an empty `data`.
grpc::ByteBuffer EncodeFetchChunk(const v1::FetchData& head, grpc::Slice data);

// Where a data chunk's bytes go: `data` (nullptr: into the message's
// `data`, as protobuf would put them), and the size in bytes of the whole
// transfer the chunk is a piece of (the tensor's, not the chunk's). Pieces
// of transfers of at least kNonTemporalCopyMinBytes are copied with
// non-temporal stores (tensord/wire/copy.h); a bare pointer is a piece of a
// small transfer.
struct Placement {
  Placement(char* data = nullptr, uint64_t transfer_bytes = 0)  // NOLINT: a bare pointer is a placement
      : data(data), transfer_bytes(transfer_bytes) {}
  char* data;
  uint64_t transfer_bytes;
};

// Parses a ServerMessage from `bb` into `msg` (cleared first), as protobuf
// would, except that a FetchData's `data` that comes last (as
// EncodeFetchChunk writes it) is copied straight from gRPC's buffer to
// `place(head, n)`: `head` is the parsed FetchData without its data and `n`
// the data's size; `place` says where the n bytes go (see Placement).
// Returns false when `bb` is not a valid ServerMessage. Buffers under
// kMinBorrowedBytes go straight to protobuf. `bb` is consumed.
bool ParseServerMessage(grpc::ByteBuffer* bb, v1::ServerMessage* msg,
                        absl::FunctionRef<Placement(const v1::FetchData& head, size_t n)> place);

// The same for a ClientMessage whose only request is an Upload with its
// `data` last (as EncodeUploadChunk writes it): `place(head, n)` says where
// the data goes.
bool ParseClientMessage(grpc::ByteBuffer* bb, v1::ClientMessage* msg,
                        absl::FunctionRef<Placement(const v1::Upload& head, size_t n)> place);

// At most how many bytes parsing `bb` as a message of `type` (with the full
// protobuf runtime, on an arena or not) can allocate beyond `bb`'s own size:
// every submessage's object and its slot in a repeated field, every string's
// object, every repeated scalar's slot (16 bytes: a varint of one byte
// becomes an 8-byte slot, and a repeated field doubles its capacity as it
// grows), unknown fields' records. Protobuf's
// own size limits make a 2-byte empty submessage cost some 30 times its
// encoding: a 64 MiB message of them about 2 GiB, which a daemon must count
// against its sender before it parses. Walks the encoding once without
// building anything (nesting as deep as protobuf's limit of 100). nullopt
// when `bb` is not a valid encoding of `type` as far as the walk can tell
// (a truncated field, a group, nesting past the limit): protobuf's parse
// would refuse it, or it is nothing a tensord peer sends. `bb` is not
// consumed.
std::optional<int64_t> DecodedExtraBytes(const grpc::ByteBuffer& bb, const google::protobuf::Descriptor* type);

// For a receiver that has only the first `prefix_len` bytes of a `total`-byte
// ClientMessage (a StreamReceiver's PlaceHook, socket_stream.h): when the
// message has EncodeUploadChunk's shape, is at least kMinBorrowedBytes long
// and the Upload's other fields all lie within the prefix, parses them into
// `msg` (cleared first; its one request's upload then has no data) and asks
// `place(head, n)` where the n data bytes go. Returns that destination and
// the data's offset in the message, for the receiver to put the rest there.
// nullopt when the message has another shape, its head runs past the
// prefix, a field does not parse or `place` gave no destination: `msg` is
// then unspecified, and the receiver reads the whole message for
// ParseClientMessage (which finds any error). Reads nothing past the prefix.
std::optional<DataDestination> ParseClientMessageHead(const char* prefix, size_t prefix_len, size_t total,
                                                      v1::ClientMessage* msg,
                                                      absl::FunctionRef<Placement(const v1::Upload& head, size_t n)> place);

// The same for a ServerMessage carrying a FetchData (EncodeFetchChunk's
// shape).
std::optional<DataDestination> ParseServerMessageHead(const char* prefix, size_t prefix_len, size_t total,
                                                      v1::ServerMessage* msg,
                                                      absl::FunctionRef<Placement(const v1::FetchData& head, size_t n)> place);

}  // namespace tensord::wire

#endif  // TENSORD_WIRE_DATA_FRAME_H_
