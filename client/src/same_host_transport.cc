// The same-host stream: the session's messages over the daemon's
// side-channel socket ("<daemon socket>.shm", SOCK_SEQPACKET records)
// instead of gRPC, for a client on the daemon's host.
#include <sys/socket.h>
#include <sys/time.h>

#include <memory>

#include "socket_transport.h"
#include "tensord/transport/shm.h"

namespace tensord::client::internal {
namespace {

class SameHostTransport final : public SocketTransport {
 public:
  SameHostTransport(int sock, int64_t spin_ns) : SocketTransport(sock, wire::StreamFraming::kRecords, spin_ns) {}

  TransportKind kind() const override { return TransportKind::kSameHost; }

 protected:
  // A message's records (wire::kStreamRecordBytes at most each) are
  // gathered in the receiver's buffer; `place` is asked when Read parses it.
  absl::StatusOr<bool> Receive(grpc::ByteBuffer* bb, v1::ServerMessage* msg, PlaceFn place) override {
    return receiver_.Next(sock_, bb);
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> ConnectSameHostTransport(const std::string& channel_path,
                                                                    uint64_t session_id, absl::string_view token,
                                                                    uid_t daemon_uid, int64_t spin_ns) {
  absl::StatusOr<int> fd =
      wire::ConnectShmChannel(channel_path, wire::ShmOp::kHelloStream, session_id, token, daemon_uid);
  if (!fd.ok()) return fd.status();
  timeval no_timeout{0, 0};  // a sync point may wait for a long op
  ::setsockopt(*fd, SOL_SOCKET, SO_RCVTIMEO, &no_timeout, sizeof(no_timeout));
  return std::make_unique<SameHostTransport>(*fd, spin_ns);
}

}  // namespace tensord::client::internal
