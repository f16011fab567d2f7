// Datagrams on the side channel's sockets (see datagram.h).
#include "datagram.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tensord::wire::internal {

absl::Status ErrnoStatus(absl::string_view channel, absl::string_view what) {
  return absl::UnavailableError(absl::StrCat(channel, ": ", what, ": ", std::strerror(errno)));
}

absl::Status SendDatagram(int sock, const msghdr& msg, size_t bytes, absl::string_view channel) {
  for (;;) {
    const ssize_t r = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (r == static_cast<ssize_t>(bytes)) return absl::OkStatus();
    if (r < 0 && errno == EINTR) continue;
    if (r >= 0) return absl::UnavailableError(absl::StrCat(channel, ": short send"));
    if (errno == EMSGSIZE) {
      return absl::OutOfRangeError(absl::StrCat(channel, ": a datagram of ", bytes,
                                                " bytes is longer than the socket's buffer"));
    }
    return ErrnoStatus(channel, "send");
  }
}

}  // namespace tensord::wire::internal
