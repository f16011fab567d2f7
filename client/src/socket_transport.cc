// The socket streams' common part (see socket_transport.h).
#include "socket_transport.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace tensord::client::internal {

SocketTransport::SocketTransport(int sock, wire::StreamFraming framing, int64_t spin_ns)
    : sock_(sock), receiver_(size_t{64} << 20, spin_ns, framing), framing_(framing) {}

SocketTransport::~SocketTransport() { Close(); }

bool SocketTransport::SendBytes(const grpc::ByteBuffer& bb) {
  return wire::SendStreamMessage(sock_, bb, framing_).ok();
}

bool SocketTransport::Read(v1::ServerMessage* msg, PlaceFn place, grpc::Status* end) {
  absl::StatusOr<bool> got = Receive(&read_bytes_, msg, place);
  if (got.ok() && *got) {
    if (receiver_.placed() || wire::ParseServerMessage(&read_bytes_, msg, place)) return true;
    Cancel();
    *end = grpc::Status(grpc::StatusCode::INTERNAL, "the daemon sent a message that does not parse");
    return false;
  }
  absl::Status why = !got.ok()                         ? got.status()
                     : receiver_.ended_with_record() ? receiver_.end_status()
                                                     : absl::UnavailableError(
                                                           "the daemon closed the stream's socket without saying why (it "
                                                           "may have shut down, or closed the session)");
  *end = grpc::Status(static_cast<grpc::StatusCode>(why.code()), std::string(why.message()));
  return false;
}

// The daemon shut the socket: what it sent before (replies, and the end
// record saying why, e.g. that it is shutting down) can still be read, and
// the socket's end follows it. Only if something comes within a second: a
// daemon that hangs must not hang the send's error.
bool SocketTransport::ReadableAfterFailedSend() {
  pollfd p{sock_, POLLIN, 0};
  return ::poll(&p, 1, 1000) > 0;
}

void SocketTransport::Cancel() {
  absl::MutexLock l(&close_mu_);
  if (!closed_) ::shutdown(sock_, SHUT_RDWR);
}

void SocketTransport::CloseWrites() { ::shutdown(sock_, SHUT_WR); }  // the daemon reads the end

void SocketTransport::Close() {
  absl::MutexLock l(&close_mu_);
  if (!closed_ && sock_ >= 0) ::close(sock_);
  closed_ = true;
}

}  // namespace tensord::client::internal
