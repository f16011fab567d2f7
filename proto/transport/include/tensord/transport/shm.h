// tensord/transport/shm.h — the shared-memory side channel between a same-host
// client and the daemon: fixed binary frames on a SOCK_SEQPACKET Unix socket
// at "<daemon socket>.shm", carrying memfds with SCM_RIGHTS (gRPC cannot).
//
//   client                                   daemon
//   Hello{session_id, token}          ->     checks peer uid and token
//                                     <-     Reply{code 0}
//   Map{segment, size} + memfd        ->     checks seals and size, maps it
//                                     <-     Reply{code 0 or why not}
//   Unmap{segment}                    ->     <- Reply
//
// A second connection whose first frame is HelloStream{session_id, token}
// carries the session's stream itself (tensord/transport/socket_stream.h).
//
// Upload and Fetch (tensord.proto) then name a mapped segment by its id; an
// Upload with shm_adopt makes the segment the tensor's storage, and the
// daemon refuses to unmap it until a reply lists it in shm_freed. A
// segment is an anonymous memfd: it has no name in /dev/shm, so nothing is
// left behind when a client dies, and no other process can open it.
#ifndef TENSORD_TRANSPORT_SHM_H_
#define TENSORD_TRANSPORT_SHM_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensord::wire {

inline constexpr char kShmSocketSuffix[] = ".shm";
inline constexpr uint32_t kShmMagic = 0x314d4854;  // "THM1" little-endian
inline constexpr size_t kShmMaxTokenBytes = 32;

// kHelloStream: this connection carries the session's stream instead
// (tensord/transport/socket_stream.h); a session may have both connections.
enum class ShmOp : uint32_t { kHello = 1, kMap = 2, kUnmap = 3, kHelloStream = 4 };

// Client -> daemon. Unused fields are zero.
struct ShmFrame {
  uint32_t magic = kShmMagic;
  uint32_t op = 0;            // ShmOp
  uint64_t session_id = 0;    // kHello, kHelloStream
  uint32_t segment = 0;       // kMap, kUnmap: the client's id for it (not 0)
  uint32_t token_size = 0;    // kHello, kHelloStream
  uint64_t size = 0;          // kMap: the memfd's size in bytes
  unsigned char token[kShmMaxTokenBytes] = {};
};
static_assert(sizeof(ShmFrame) == 64, "ShmFrame is a wire format: its size is fixed");

// Daemon -> client: the answer to each frame.
struct ShmReply {
  uint32_t magic = kShmMagic;
  int32_t code = 0;           // an absl::StatusCode; 0 = OK
  char message[248] = {};     // NUL-terminated
};
static_assert(sizeof(ShmReply) == 256, "ShmReply is a wire format: its size is fixed");

// "<path>.shm" for a daemon listening on unix:<path>.
std::string ShmSocketPath(absl::string_view unix_socket_path);

// Connects to the side channel at `channel_path` and says `hello` (kHello
// or kHelloStream) for the session: the connected socket (close-on-exec,
// owned by the caller; a 10 s receive timeout set for the hello is left in
// place), or why the daemon offers no channel (Unavailable, InvalidArgument
// for a path or token too long) or refused the hello (its reply's error).
// The hello (and so the token) goes only to a peer running as `daemon_uid`
// (SO_PEERCRED): another is refused with PermissionDenied naming the path
// and both uids.
absl::StatusOr<int> ConnectShmChannel(const std::string& channel_path, ShmOp hello, uint64_t session_id,
                                      absl::string_view token, uid_t daemon_uid);

// Sends one frame, with `fd` attached when fd >= 0 (the caller keeps its fd).
absl::Status SendShmFrame(int sock, const ShmFrame& frame, int fd = -1);
// Receives one frame. Returns false at end of stream. `*fd` is the attached
// descriptor (close-on-exec, owned by the caller) or -1; any further
// descriptors are closed. A frame of the wrong size or magic is an error
// (its descriptor closed).
absl::StatusOr<bool> RecvShmFrame(int sock, ShmFrame* frame, int* fd);

absl::Status SendShmReply(int sock, const absl::Status& status);
// Waits for a reply: its status, or an error when the socket failed.
absl::Status RecvShmReply(int sock);

}  // namespace tensord::wire

#endif  // TENSORD_TRANSPORT_SHM_H_
