// tensord/server/daemon.h — the daemon process around the service: options
// (command line and config file), listening on Unix sockets and TCP ports
// (refusing a taken port or a live socket instead of hanging), the standard
// health service, and shutdown that removes the socket files.
//
//   DaemonOptions o;  o.listen = {"unix:/tmp/td.sock", "127.0.0.1:0"};
//   absl::StatusOr<std::unique_ptr<Daemon>> d = Daemon::Start(o);
//   (*d)->addresses();   // {"unix:/tmp/td.sock", "127.0.0.1:45123"}
//   (*d)->Shutdown();
#ifndef TENSORD_SERVER_DAEMON_H_
#define TENSORD_SERVER_DAEMON_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "tensord/runtime/artifacts.h"
#include "tensord/runtime/log.h"
#include "tensord/server/service.h"

namespace tensord::server {

// The daemon's log is the runtime's (backends write to it too).
using runtime::LogLevel;

class SideChannelServer;  // server/src/side_channel.h
class HealthService;      // server/src/health.h

// Largest gRPC message the daemon accepts or sends (batches of op calls and
// upload chunks; fetch data is chunked at 3 MiB).
inline constexpr int kMaxMessageBytes = 64 << 20;

struct DaemonOptions {
  // "unix:PATH", "unix:///abs/path", "HOST:PORT", "[::1]:PORT"; port 0 picks one.
  std::vector<std::string> listen;
  // Bytes one session may hold: -1 = DefaultSessionMemoryLimit(); 0 = unlimited.
  int64_t session_memory_limit_bytes = -1;
  // Bytes one session may hold on each CUDA device (0 = no limit of its own:
  // session_memory_limit_bytes, which counts every device together, still holds).
  int64_t cuda_session_memory_limit_bytes = 0;
  // Cap of the cache of freed large CPU blocks: -1 = min(1 GiB, physical / 8), 0 = off.
  int64_t cpu_cache_limit_bytes = -1;
  // Debugging: fill storages handed out unzeroed with this byte (0..255; -1 = off).
  int uninitialized_fill = -1;
  LogLevel log_level = LogLevel::kInfo;
  // Also serve the test device, privateuseone:0 (host memory that behaves
  // as a device of its own: backends/test_device/), beside the CPU.
  bool test_device = false;
  // Test-only: the test device's N-th kernel launch fails as a GPU fault
  // does (backends::TestDeviceFault; 0 = never).
  int64_t test_device_fault_at_launch = 0;
  // Called once when a device failed for good (runtime::ReportDeviceFailure:
  // a GPU fault), after the health service says NOT_SERVING and sessions'
  // next messages are refused with the failure. Runs on the thread that saw
  // the fault and must return at once: `tensord serve` wakes its main thread
  // there, which ends every session and exits with kExitDeviceFailure.
  std::function<void(const std::string& why)> on_device_failure;
  // Same-host and TCP streams: how long a session's thread polls its socket for the
  // next message before it blocks (see wire::StreamReceiver); zero: never.
  absl::Duration stream_spin = absl::Nanoseconds(wire::kDefaultStreamSpinNanos);
  // Grace period for in-flight requests at shutdown.
  absl::Duration shutdown_grace = absl::Milliseconds(100);
  // The gRPC server's thread cap (its ResourceQuota). A session stream on
  // gRPC holds one thread while it lasts (the synchronous API); at most
  // grpc_threads - kReservedGrpcThreads of them run at once (more are refused
  // with ResourceExhausted), so that the reserved threads keep health checks
  // (grpc.health.v1.Health/Check) and opening and closing sessions
  // answering. At least kReservedGrpcThreads + 8; Start refuses less.
  int grpc_threads = 256;
  // A session that no stream attaches to within this time is closed, and a
  // gRPC Stream call that sends no attach within it is cancelled
  // (ServiceOptions::attach_timeout).
  absl::Duration attach_timeout = absl::Seconds(60);
  // Most sessions open at once from one peer: a TCP client's address (IPv6:
  // its /64), a Unix socket client's uid (ServiceOptions::max_sessions_per_peer;
  // 0 = none).
  int max_sessions_per_peer = 64;
  // A gRPC connection with no call in flight for this long is closed
  // (gRPC's GOAWAY; a client's channel reconnects at its next call), so
  // that idle connections do not hold the daemon's descriptors. One peer
  // may hold at most 2 * max_sessions_per_peer gRPC connections at once
  // (none when that is 0): a client keeps one per session at most (its
  // channels share a connection to one address).
  absl::Duration idle_connection_timeout = absl::Minutes(5);
  // Which kernel artifacts the daemon runs (`--artifacts`, the allow-list
  // and keys): by default those allowed by hash or signature, of which
  // there are none. The embedded daemon runs with kAny: its one user loads
  // their own code.
  runtime::ArtifactPolicy artifacts;
};

// The exit status of `tensord serve` after a device failed (a GPU fault
// leaves the process's CUDA context unusable): EX_TEMPFAIL of sysexits.h,
// distinct from 0 (a clean stop), 1 (a failure to start or a second signal)
// and 2 (a usage error), so that a supervisor restarts the daemon
// (deploy/tensord.service: Restart=on-failure) and its logs tell why.
inline constexpr int kExitDeviceFailure = 75;

// gRPC threads that session streams never take (DaemonOptions::grpc_threads).
inline constexpr int kReservedGrpcThreads = 16;
// The most DaemonOptions::grpc_threads may be (ParseGrpcThreads).
inline constexpr int kMaxGrpcThreads = 65536;

// Parses a gRPC thread cap (DaemonOptions::grpc_threads): a whole number from
// kReservedGrpcThreads + 8 to kMaxGrpcThreads. InvalidArgument otherwise,
// naming the range.
absl::StatusOr<int> ParseGrpcThreads(absl::string_view text);

// Parses a per-peer session limit (DaemonOptions::max_sessions_per_peer): a
// whole number from 0 (no limit per peer) to 1024 (the daemon's limit).
// InvalidArgument otherwise, naming the range.
absl::StatusOr<int> ParseMaxSessionsPerPeer(absl::string_view text);

// Parses a byte count: "1048576", "512K", "64MiB", "2G" (K, M, G, T and
// KiB..TiB are powers of 1024), "4GB" (KB, MB, GB, TB are powers of 1000);
// units in any case, spaces allowed around them. InvalidArgument otherwise
// or past INT64_MAX.
absl::StatusOr<int64_t> ParseByteSize(absl::string_view text);

// The session memory limit a daemon gets unless told otherwise: half of
// the memory it may use (the machine's physical memory, or its cgroup's
// memory.max when lower, as in a container), so that no one session can take
// the daemon's memory from the others or from the daemon itself.
int64_t DefaultSessionMemoryLimit();

// Applies a config file of `key = value` lines (# comments, blank lines):
// listen (repeatable, or comma-separated), session_memory_limit_bytes,
// cuda_session_memory_limit_bytes, cpu_cache_limit_bytes, log_level, stream_spin_us, grpc_threads, max_sessions_per_peer. Unknown keys and
// bad values are errors naming the line.
absl::Status ApplyConfigFile(const std::string& path, DaemonOptions* options);

class Daemon {
 public:
  // Binds every address and starts serving. Errors (with a clear message,
  // never a hang): no address, a malformed address, a TCP port in use, a Unix
  // socket path that a live daemon answers on or that is not a socket.
  // A stale socket file (nobody answers) is removed and reused.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(const DaemonOptions& options);
  ~Daemon();

  // The addresses actually listened on, in the order given; a TCP port 0 is
  // replaced by the port chosen.
  const std::vector<std::string>& addresses() const { return addresses_; }
  TensordService& service() { return *service_; }
  // Each TCP port's acceptor, then each Unix socket's side channel, then
  // each Unix socket's gRPC acceptor (for tests: side_channel.h).
  const std::vector<std::unique_ptr<SideChannelServer>>& side_channels() const { return side_channels_; }

  // Closes every session, stops the server (waiting up to the grace period
  // for in-flight calls) and removes the Unix socket files. Idempotent.
  void Shutdown();

 private:
  Daemon() = default;

  DaemonOptions options_;
  std::unique_ptr<TensordService> service_;
  std::shared_ptr<HealthService> health_;  // grpc.health.v1, registered with server_ (and held by the failure handler)
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::string> addresses_;
  std::vector<std::string> socket_paths_;  // to remove at shutdown
  // The shared-memory side channel beside each Unix socket ("<path>.shm"),
  // and the acceptor of each TCP port's listening socket (gRPC and TCP
  // streams: side_channel.h).
  std::vector<std::unique_ptr<SideChannelServer>> side_channels_;
  bool shut_down_ = false;
  bool handles_device_failures_ = false;  // Start installed the process's device-failure handler
};

}  // namespace tensord::server

#endif  // TENSORD_SERVER_DAEMON_H_
