// A session stream on a socket of its own (tensord/transport/socket_stream.h),
// the part the same-host stream (same_host_transport.cc: SOCK_SEQPACKET
// records) and the TCP stream (tcp_transport.cc: a byte stream) share.
// Internal to client/.
#ifndef TENSORD_CLIENT_SRC_SOCKET_TRANSPORT_H_
#define TENSORD_CLIENT_SRC_SOCKET_TRANSPORT_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "tensord/transport/socket_stream.h"
#include "transport.h"

namespace tensord::client::internal {

class SocketTransport : public Transport {
 public:
  // Closes the socket if Close did not.
  ~SocketTransport() override;

  bool SendBytes(const grpc::ByteBuffer& bb) override;
  bool Read(v1::ServerMessage* msg, PlaceFn place, grpc::Status* end) override;
  bool ReadableAfterFailedSend() override;
  void Cancel() override;
  void CloseWrites() override;
  void Close() override;

 protected:
  // Takes `sock` (connected, its hello answered), framed as `framing`;
  // `spin_ns` as wire::StreamReceiver's.
  SocketTransport(int sock, wire::StreamFraming framing, int64_t spin_ns);

  // Receives the next message's bytes into `bb` (receiver_.Next, with the
  // carrier's framing). A carrier that receives a large fetch chunk's data
  // straight into the fetch's buffer (where `place` says) parses `msg` as it
  // does so, and says so in receiver_.placed().
  virtual absl::StatusOr<bool> Receive(grpc::ByteBuffer* bb, v1::ServerMessage* msg, PlaceFn place) = 0;

  int sock_;
  wire::StreamReceiver receiver_;  // by the reading thread

 private:
  // Cancel may come from any thread, Close's included: the close of the
  // socket and a shutdown of it never interleave, so a Cancel after Close
  // cannot shut down another file that took the same descriptor number.
  absl::Mutex close_mu_;
  bool closed_ ABSL_GUARDED_BY(close_mu_) = false;
  wire::StreamFraming framing_;
  grpc::ByteBuffer read_bytes_;  // by the reading thread
};

}  // namespace tensord::client::internal

#endif  // TENSORD_CLIENT_SRC_SOCKET_TRANSPORT_H_
