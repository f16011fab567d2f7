// Internal: starting and stopping the private daemon a client spawns when it
// has no address (Session::SpawnEmbedded).
#ifndef TENSORD_CLIENT_SRC_EMBEDDED_DAEMON_H_
#define TENSORD_CLIENT_SRC_EMBEDDED_DAEMON_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace tensord::client::internal {

// The child as its reaper thread sees it (the thread that forked it waits
// for it, so the child's PR_SET_PDEATHSIG is tied to a thread that lives as
// long as the child, not to whichever thread asked for the spawn).
struct ChildState;

struct EmbeddedDaemon {
  std::shared_ptr<ChildState> child;
  pid_t pid = 0;
  std::string dir;      // private temporary directory (socket and logs)
  std::string address;  // "unix:<dir>/sock", as the ready line reported it
};

// Resolves the daemon binary: `explicit_path`, else $TENSORD_BIN, else the
// build's bin/tensord, else `tensord` on PATH. NotFound-style RuntimeError
// naming what was tried.
absl::StatusOr<std::string> FindDaemonBinary(const std::string& explicit_path);

// Starts `<binary> serve --listen unix:<private dir>/sock` with stdout and
// stderr in files of the private directory, and waits (up to timeout_ms) for
// the line "tensord: listening on <address>". On failure the child is
// stopped and the error carries the tail of its stderr.
absl::StatusOr<EmbeddedDaemon> StartEmbeddedDaemon(const std::string& binary, int timeout_ms);

// SIGTERM, wait up to 5 s, then SIGKILL; removes the private directory.
void StopEmbeddedDaemon(EmbeddedDaemon& d);

// For a session stream that failed: when `address` is an embedded daemon of
// this process that has ended (waiting up to 500 ms for its reaper to see
// it), how it ended ("the embedded daemon (pid 123) was ended by signal 11
// (Segmentation fault)"); else "".
std::string EmbeddedDaemonEndNote(const std::string& address);

}  // namespace tensord::client::internal

#endif  // TENSORD_CLIENT_SRC_EMBEDDED_DAEMON_H_
