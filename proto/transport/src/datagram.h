// Sending datagrams on the side channel's SOCK_SEQPACKET sockets, shared by
// its frames (shm.cc) and the same-host stream's records (socket_stream.cc).
// Internal to proto/transport.
#ifndef TENSORD_TRANSPORT_SRC_DATAGRAM_H_
#define TENSORD_TRANSPORT_SRC_DATAGRAM_H_

#include <sys/socket.h>

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tensord::wire::internal {

// Unavailable: "<channel>: <what>: <strerror(errno)>".
absl::Status ErrnoStatus(absl::string_view channel, absl::string_view what);

// Sends `msg` (`bytes` bytes in all) as one datagram: all of it or an error
// naming `channel`: OutOfRange when the datagram is longer than the socket's
// send buffer allows (EMSGSIZE; nothing was sent), else Unavailable. Retries
// on EINTR; a closed peer is an error, not SIGPIPE.
absl::Status SendDatagram(int sock, const msghdr& msg, size_t bytes, absl::string_view channel);

}  // namespace tensord::wire::internal

#endif  // TENSORD_TRANSPORT_SRC_DATAGRAM_H_
