// The TCP stream: connected at HOST:PORT, the session's messages over a
// second TCP connection to the daemon's port (one length-prefixed record
// each) instead of gRPC.
#include <memory>

#include "socket_transport.h"
#include "tensord/transport/socket_stream.h"

namespace tensord::client::internal {
namespace {

class TcpTransport final : public SocketTransport {
 public:
  TcpTransport(int sock, int64_t spin_ns) : SocketTransport(sock, wire::StreamFraming::kByteStream, spin_ns) {}

  TransportKind kind() const override { return TransportKind::kTcp; }

 protected:
  // A large fetch chunk's data goes from the socket straight into the
  // waiting fetch's buffer (one copy, the kernel's): `msg` is then parsed
  // here, from the message's first bytes.
  absl::StatusOr<bool> Receive(grpc::ByteBuffer* bb, v1::ServerMessage* msg, PlaceFn place) override {
    const auto place_head = [&](const char* prefix, size_t prefix_len, size_t total) {
      return wire::ParseServerMessageHead(prefix, prefix_len, total, msg, place);
    };
    return receiver_.Next(sock_, bb, place_head);
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> ConnectTcpTransport(absl::string_view address, uint64_t session_id,
                                                               absl::string_view token, int timeout_ms,
                                                               absl::string_view prefer, int64_t spin_ns) {
  absl::StatusOr<int> fd = wire::ConnectTcpStream(address, session_id, token, timeout_ms, prefer);
  if (!fd.ok()) return fd.status();
  return std::make_unique<TcpTransport>(*fd, spin_ns);
}

}  // namespace tensord::client::internal
