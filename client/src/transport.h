// The session stream as the session code sees it: a Transport sends the
// session's ClientMessages to the daemon and reads its ServerMessages back,
// in order, whichever way they travel. Three carriers, each in its own file:
// the gRPC stream (grpc_transport.cc), the same-host stream over the
// daemon's side-channel socket (same_host_transport.cc) and the TCP stream
// on a connection of its own (tcp_transport.cc); the socket framing of the
// last two is tensord/transport/socket_stream.h. Internal to client/.
#ifndef TENSORD_CLIENT_SRC_TRANSPORT_H_
#define TENSORD_CLIENT_SRC_TRANSPORT_H_

#include <grpcpp/channel.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tensord/v1/tensord.pb.h"
#include "tensord/wire/data_frame.h"

namespace tensord::client::internal {

// Which carrier a Transport is.
enum class TransportKind { kGrpc, kSameHost, kTcp };

// Where the `n` data bytes of a FetchData chunk go as the chunk is read
// (`head`: the chunk without its data); see wire::Placement.
using PlaceFn = absl::FunctionRef<wire::Placement(const v1::FetchData& head, size_t n)>;

class Transport {
 public:
  virtual ~Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  virtual TransportKind kind() const = 0;

  // Serializes `m` and sends it (SendBytes). False when `m` does not
  // serialize or the stream failed. One sending thread at a time (the
  // session's writer lock, or before the stream is shared).
  bool Send(const v1::ClientMessage& m);

  // Sends one message's bytes. Its slices may be borrowed
  // (wire::BorrowedSlices): a socket stream has copied them when this
  // returns, gRPC may hold them a little longer. Blocks while the daemon
  // does not read. False when the stream failed (the daemon ended it, the
  // connection broke, Cancel). One sending thread at a time.
  virtual bool SendBytes(const grpc::ByteBuffer& bb) = 0;

  // Reads the next ServerMessage into `msg` (cleared first); a FetchData's
  // data goes where `place` says, which is asked while the chunk is read.
  // Blocks until a message comes. False at the end of the stream, with what
  // ended it in `*end`: the gRPC call's status, the daemon's end record on a
  // socket stream (Unavailable when the socket closed without one, or the
  // receive error), Internal when a message does not parse (the stream is
  // then cancelled). One reading thread at a time.
  virtual bool Read(v1::ServerMessage* msg, PlaceFn place, grpc::Status* end) = 0;

  // After a send failed: whether Read may be called now without waiting on
  // a daemon that hangs (it then returns what the daemon sent before, and
  // the stream's end).
  virtual bool ReadableAfterFailedSend() = 0;

  // Ends the stream now, from any thread: a blocked send fails and Read
  // returns false (a broken message, or Close giving up on the daemon).
  virtual void Cancel() = 0;

  // Tells the daemon that no more messages come (it then ends the stream).
  // Call with no send in flight.
  virtual void CloseWrites() = 0;

  // Frees the stream (the gRPC call, the socket) once its end was read or
  // given up on; kind() still answers. No Send, Read or CloseWrites after.
  virtual void Close() = 0;

 protected:
  Transport() = default;

 private:
  // Send's buffer for messages of kOneSliceBytes to kWriteBufferMaxBytes:
  // see Send.
  static constexpr size_t kOneSliceBytes = 64 << 10;
  static constexpr size_t kWriteBufferMaxBytes = 1 << 20;
  std::unique_ptr<uint8_t[]> write_buffer_;
  size_t write_buffer_bytes_ = 0;
};

// The gRPC stream (Tensord.Stream) on `channel`, opened now; the caller's
// first message attaches it to the session.
std::unique_ptr<Transport> StartGrpcTransport(const std::shared_ptr<grpc::Channel>& channel);

// The same-host stream: connects to the side channel at `channel_path`
// ("<daemon socket>.shm") and says HelloStream for the session
// (wire::ConnectShmChannel), which attaches the stream. `spin_ns`: how long
// a reading thread polls before it blocks (wire::StreamReceiver). The
// errors of wire::ConnectShmChannel: PermissionDenied when another user
// listens there, else why the daemon offers no stream.
absl::StatusOr<std::unique_ptr<Transport>> ConnectSameHostTransport(const std::string& channel_path,
                                                                    uint64_t session_id, absl::string_view token,
                                                                    uid_t daemon_uid, int64_t spin_ns);

// The TCP stream: a second connection to the daemon at `address` (its
// HOST:PORT, tried first at `prefer`, the address gRPC reached; within
// `timeout_ms`), whose hello attaches the stream (wire::ConnectTcpStream,
// whose errors it returns). `spin_ns` as above.
absl::StatusOr<std::unique_ptr<Transport>> ConnectTcpTransport(absl::string_view address, uint64_t session_id,
                                                               absl::string_view token, int timeout_ms,
                                                               absl::string_view prefer, int64_t spin_ns);

}  // namespace tensord::client::internal

#endif  // TENSORD_CLIENT_SRC_TRANSPORT_H_
