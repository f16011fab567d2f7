// Unix socket paths the daemon listens on (the gRPC sockets and the
// shared-memory side channel). Internal to server/; defined in daemon.cc.
#ifndef TENSORD_SERVER_SRC_UNIX_SOCKET_H_
#define TENSORD_SERVER_SRC_UNIX_SOCKET_H_

#include <sys/un.h>

#include <string>

#include "absl/status/status.h"

namespace tensord::server {

// Fills *sa with `path`; false when the path does not fit sun_path.
bool FillSockaddr(const std::string& path, sockaddr_un* sa);

// Before binding `path` as a socket of `type` (SOCK_STREAM, SOCK_SEQPACKET):
// a live socket is an error (AlreadyExists), a stale one (nobody accepts a
// connection of that type) is removed, anything that is not a socket is left
// alone and refused (FailedPrecondition).
absl::Status PrepareUnixSocket(const std::string& path, int type);

}  // namespace tensord::server

#endif  // TENSORD_SERVER_SRC_UNIX_SOCKET_H_
