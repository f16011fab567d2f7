// tensord/server/service.h — the tensord.v1.Tensord gRPC service (synchronous
// API): handshake, session open/close, and the per-session bidirectional
// stream whose requests the session executes in order on the stream's
// handler thread. A same-host client's stream may instead run over the side
// channel's socket (ServeSocketStream, tensord/transport/socket_stream.h), with
// the same messages and the same loop. Sessions run concurrently with each
// other.
//
//   auto service = TensordService::Create({.session_memory_limit_bytes = 1 << 30});
//   builder.RegisterService(service->get());
#ifndef TENSORD_SERVER_SERVICE_H_
#define TENSORD_SERVER_SERVICE_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "tensord/backends/cpu/cpu_backend.h"
#include "tensord/runtime/backend.h"
#include "tensord/runtime/artifacts.h"
#include "tensord/server/session.h"
#include "tensord/transport/socket_stream.h"
#include "tensord/v1/tensord.grpc.pb.h"
#include "tensord/wire/data_frame.h"

namespace tensord::server {

// The release this daemon reports (handshake, --version).
absl::string_view DaemonVersion();

struct ServiceOptions {
  // Per-session limit on bytes of tensor storage; 0 = unlimited.
  int64_t session_memory_limit_bytes = 0;
  // At most this many open sessions; more are refused (ResourceExhausted).
  size_t max_sessions = 1024;
  // At most this many open sessions per peer (a TCP client's address, or
  // its /64 for IPv6; a Unix socket client's uid), so that one peer cannot fill the table for
  // everyone; more are refused (ResourceExhausted). 0 = no limit per peer.
  size_t max_sessions_per_peer = 64;
  // At most this many gRPC connections open at once per peer, counted over
  // the connections the daemon accepts itself and hands to gRPC
  // (AdmitConnection); a new one past it is closed at once. 0 = no limit.
  // Each descriptor held is one the daemon cannot give another client.
  size_t max_connections_per_peer = 128;
  // At most this many session streams on gRPC at once; more are refused
  // (ResourceExhausted). Each holds one of the gRPC server's threads while it
  // lasts (the synchronous API), so the daemon sets this below the server's
  // thread cap: the threads left over keep health checks and opening and
  // closing sessions answering (DaemonOptions::grpc_threads). Same-host and
  // TCP streams hold no gRPC thread and are not counted.
  size_t max_grpc_streams = 240;
  // A session that no stream attaches to within this time is closed, and a
  // Stream call whose first message (attach) has not come within it is
  // cancelled (it holds a gRPC thread and a max_grpc_streams slot). Both are
  // checked on a timer (every attach_timeout / 4, at most every 5 s), when a
  // session opens and when a Stream call is refused.
  absl::Duration attach_timeout = absl::Seconds(60);
  // The daemon-wide cache of freed large CPU blocks (cap, idle trim, debug
  // fill): see CpuAllocatorOptions. It is also emptied when a session closes.
  backends::CpuAllocatorOptions cpu_allocator;
  // Also serve the test device (privateuseone:0) after the CPU.
  bool test_device = false;
  // Test-only: the test device's simulated fault (backends::TestDeviceFault).
  int64_t test_device_fault_at_launch = 0;
  // Per-session limit on bytes of storage on each CUDA device (0 = none of
  // its own; session_memory_limit_bytes still counts every device together).
  int64_t cuda_session_memory_limit_bytes = 0;
  // Same-host and TCP streams: how long a session's thread polls its socket for the
  // next message before it blocks (wire::StreamReceiver's spin); zero: never.
  absl::Duration stream_spin = absl::Nanoseconds(wire::kDefaultStreamSpinNanos);
  // Which kernel artifacts the daemon accepts (`tensord serve --artifacts`);
  // by default none but those allowed by hash or signature, of which
  // there are none.
  runtime::ArtifactPolicy artifacts;
};

// What a daemon says of CUDA to a session that opens (OpenSessionResponse's
// cuda_* fields).
struct CudaReport {
  std::string driver_version;      // "13.0"; empty without an NVIDIA driver
  std::string runtime_version;     // "13.0"; empty in a build without CUDA
  // Why the daemon serves no cuda device, as a phrase ("no NVIDIA driver is
  // loaded (...)"); empty when it serves one.
  std::string unavailable_reason;
};

// Asks the CUDA runtime (in a build with CUDA; a build without it answers
// at once) which GPUs this machine has, and says what a daemon serving the
// devices `served` reports of CUDA. With `log`, also logs the GPUs found,
// or why there are none, at info level. Never fails.
CudaReport DescribeCuda(const Backends& served, bool log);

// The device part of an OpenSessionResponse: one DeviceInfo per device of
// `served`, in order (free memory as of now), and `cuda`.
void FillDeviceReport(const Backends& served, const CudaReport& cuda, v1::OpenSessionResponse* out);

// What a daemon started here with `options` would report of its devices
// (FillDeviceReport), without starting one: `tensord devices` with no
// daemon address. Builds the backends a daemon would (Internal error only
// on a build bug) and logs nothing.
absl::Status DescribeLocalDevices(const ServiceOptions& options, v1::OpenSessionResponse* out);

class TensordService final : public v1::Tensord::Service {
 public:
  // Builds the backends (the CPU's, with its kernels); fails only on a build
  // bug (a kernel registered for an op the table lacks).
  static absl::StatusOr<std::unique_ptr<TensordService>> Create(const ServiceOptions& options);
  ~TensordService() override;

  grpc::Status Handshake(grpc::ServerContext* context, const v1::HandshakeRequest* request,
                         v1::HandshakeResponse* response) override;
  grpc::Status OpenSession(grpc::ServerContext* context, const v1::OpenSessionRequest* request,
                           v1::OpenSessionResponse* response) override;
  grpc::Status FindArtifact(grpc::ServerContext* context, const v1::FindArtifactRequest* request,
                            v1::FindArtifactResponse* response) override;
  grpc::Status UploadArtifact(grpc::ServerContext* context, grpc::ServerReader<v1::ArtifactChunk>* reader,
                              v1::UploadArtifactResponse* response) override;
  grpc::Status BuildArtifact(grpc::ServerContext* context, const v1::BuildArtifactRequest* request,
                             v1::BuildArtifactResponse* response) override;
  grpc::Status CloseSession(grpc::ServerContext* context, const v1::CloseSessionRequest* request,
                            v1::CloseSessionResponse* response) override;
  // The session stream. It reads and writes byte buffers rather than
  // messages (the constructor installs this handler in place of the
  // generated one), so that fetched data goes from the storage to the socket
  // without being copied into messages, and uploaded data from gRPC's buffer
  // into the storage (Session::PlaceUploadData); the peer sees the same
  // protobuf messages. (The generated message-typed Stream stays
  // declared, never installed: the using-declaration says so to the
  // compiler.)
  using v1::Tensord::Service::Stream;
  grpc::Status Stream(grpc::ServerContext* context,
                      grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream);

  // The session stream over the side-channel socket `sock` for a same-host
  // client, or over a TCP connection to the daemon's port (`framing`
  // kByteStream) (tensord/transport/socket_stream.h), whose hello named `session_id`
  // and `token`: answers the hello (a ShmReply: NotFound for an unknown id
  // or a wrong token alike, FailedPrecondition when the session has a
  // stream already), then
  // executes the session's messages in order, as Stream does, until the
  // client ends the stream, the socket fails or the session is closed; then
  // sends the end record (why it ended) and closes the session. The caller
  // closes `sock` after this returns. Runs on the side channel's thread for
  // the connection.
  void ServeSocketStream(int sock, uint64_t session_id, absl::string_view token,
                         wire::StreamFraming framing = wire::StreamFraming::kRecords);

  // Refuses new sessions, cancels every attached stream and closes every
  // session. Called before the gRPC server shuts down. A same-host or TCP
  // stream's client gets an end record saying the daemon is shutting down
  // (Unavailable) unless its stream is still busy after kShutdownGrace; a
  // gRPC stream's client gets the same reason as a StreamEnd message unless
  // its stream cannot take it within kShutdownGrace (a client that does not
  // read), before the stream is cancelled.
  void BeginShutdown();
  static constexpr absl::Duration kShutdownGrace = absl::Milliseconds(500);

  // The session `session_id` when `token` is its token (the shared-memory
  // side channel's hello): NotFound otherwise, the same for an unknown id
  // and a wrong token.
  absl::StatusOr<std::shared_ptr<Session>> FindSession(uint64_t session_id, absl::string_view token) const;

  // Admits the connection `fd` that the daemon accepted and is about to hand
  // to gRPC (AddInsecureChannelFromFd; gRPC then names its calls' peer
  // "fd:N"), from `peer`: "uid N" for a Unix socket, the address (IPv6: its
  // /64) for TCP. Sessions are counted per peer (max_sessions_per_peer), and
  // so are the gRPC connections still open: false when `peer` already holds
  // max_connections_per_peer of them (the caller closes `fd`). A connection
  // counts until gRPC closes its descriptor, which is noticed by the socket's
  // inode no longer being at that number. Called before the connection is
  // handed over, so that a descriptor number reused by a new connection is
  // noted anew first.
  bool AdmitConnection(int fd, std::string peer) ABSL_LOCKS_EXCLUDED(peers_mu_);

  // Introspection (tests, logs).
  size_t live_sessions() const;
  // Sessions closed while a request of theirs ran, whose close waits for it.
  size_t closing_sessions() const;
  // Bytes of tensor storage held by all sessions together.
  int64_t bytes_in_use() const;
  // The cache of freed large CPU blocks (cached bytes are in no session's count).
  backends::CpuAllocator::CacheStats cpu_cache_stats() const { return cpu_->cpu_allocator().cache_stats(); }
  // The devices served, the CPU first.
  const Backends& backends() const { return backends_; }
  // Statistics of an open session; nullopt when unknown or closed.
  std::optional<SessionStats> session_stats(uint64_t session_id) const;
  // Whether a request of the session runs now (nullopt: no such session).
  std::optional<bool> session_running(uint64_t session_id) const;
  const ServiceOptions& options() const { return options_; }

 private:
  // An attached gRPC stream: its context (to cancel it) and its writes, one
  // at a time as gRPC's synchronous API requires (the stream's replies, and
  // BeginShutdown's StreamEnd message). `stream` is null once the handler
  // is done with the stream.
  struct GrpcStream {
    explicit GrpcStream(grpc::ServerContext* c) : context(c) {}
    grpc::ServerContext* const context;
    absl::Mutex mu;
    grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream ABSL_GUARDED_BY(mu) = nullptr;
  };
  struct Entry {
    std::shared_ptr<Session> session;
    std::shared_ptr<GrpcStream> grpc;  // the attached gRPC stream
    int socket = -1;                   // or the attached same-host or TCP stream's socket
    bool attached = false;
    absl::Time opened;
    std::string peer;  // who opened it (PeerOf)
  };

  TensordService(const ServiceOptions& options, Backends backends, backends::CpuBackend* cpu, CudaReport cuda);

  // Marks the session attached to a stream (a gRPC stream, or the same-host
  // or TCP stream's `sock`): NotFound (an unknown id or a wrong token: one
  // answer for both), FailedPrecondition (attached already) or Unavailable
  // (shutting down).
  absl::StatusOr<std::shared_ptr<Session>> Attach(uint64_t id, absl::string_view token,
                                                  std::shared_ptr<GrpcStream> grpc, int sock)
      ABSL_LOCKS_EXCLUDED(mu_);
  // How a session stream ended.
  // kOverLimit: a message would take more memory to decode than the
  // session's limit leaves (RunStream's `refusal` says how much).
  // kDeviceFailed: a device failed (runtime::ReportDeviceFailure) before
  // the session's next message ran.
  enum class StreamEnd { kClient, kLost, kMalformed, kOverLimit, kDeviceFailed };
  // Where an upload's data goes (Session::PlaceUploadData's answer).
  using PlaceUpload = absl::FunctionRef<wire::Placement(const v1::Upload& head, size_t n)>;
  // Reads the next message's bytes: 1 when it did, 0 when the client ended
  // the stream, -1 when the stream was lost, -2 when what came is not a
  // message (a malformed record). With `m` and `place` (not null), a reader
  // that can receive a large upload's data straight to where `place` says
  // (the TCP stream) may do so: it then parses the message into `*m` itself
  // and returns 2.
  using ReadBytes = std::function<int(grpc::ByteBuffer*, v1::ClientMessage* m, const PlaceUpload* place)>;
  // Executes `first` (when not null), then every message `read_bytes`
  // gives, in order, until the stream or the session ends. kOverLimit sets
  // `*refusal` (ResourceExhausted naming the bytes and the limit).
  StreamEnd RunStream(uint64_t id, const std::shared_ptr<Session>& session, const v1::ClientMessage* first,
                      const ReadBytes& read_bytes, const Session::Writer& write, const Session::DataWriter& write_data,
                      absl::Status* refusal);
  // Detaches the ended stream and closes the session (unless it was closed
  // already); what the stream's end says to the client (`refusal` for
  // kOverLimit).
  absl::Status EndStream(uint64_t id, const std::shared_ptr<Session>& session, StreamEnd end,
                         const absl::Status& refusal = absl::OkStatus()) ABSL_LOCKS_EXCLUDED(mu_);

  // Removes the session from the table (cancelling its stream) and closes it,
  // or, while a request of it runs, hands it to the closer thread to close
  // when the request ends (it counts against the limits until then).
  // Returns its final statistics (those so far, when handed over), or
  // nullopt when it was not in the table (or, with only_unattached, when a
  // stream has attached to it: the reaper chose it under one lock and
  // removes it under another, and a client that attached in between keeps
  // its session).
  std::optional<SessionStats> Remove(uint64_t session_id, absl::string_view why, bool only_unattached = false);
  // Closes sessions that no stream attached to in time.
  void ReapUnattached() ABSL_LOCKS_EXCLUDED(mu_);
  // Serves the unary call `name` through `method` from its request's bytes:
  // a request over `max_bytes`, or one that would take more than
  // `max_extra_bytes` beyond its bytes once parsed (wire::DecodedExtraBytes),
  // is refused (ResourceExhausted, with the numbers) before it is parsed.
  template <typename Request, typename Response>
  void BoundUnary(grpc::Status (TensordService::*method)(grpc::ServerContext*, const Request*, Response*),
                  const char* name, size_t max_bytes, int64_t max_extra_bytes);
  // The open session `session_id` (no token asked: introspection), or null.
  std::shared_ptr<Session> SessionById(uint64_t session_id) const ABSL_LOCKS_EXCLUDED(mu_);
  // The reaper thread: ReapUnattached on a timer until shutdown.
  void ReapLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // The peer a call comes from, as sessions are counted: a connection the
  // daemon accepted itself is named by AdmitConnection; a TCP address
  // gRPC accepted loses its port; anything else is gRPC's peer string.
  std::string PeerOf(const grpc::ServerContext& context) const ABSL_LOCKS_EXCLUDED(peers_mu_);

  const ServiceOptions options_;
  const Backends backends_;
  backends::CpuBackend* const cpu_;  // backends_'s CPU
  const CudaReport cuda_;             // told to every session that opens
  // The daemon's kernel artifacts: before the sessions, which use it.
  std::unique_ptr<runtime::ArtifactStore> artifacts_;
  // Builds for clients (BuildArtifact) run one at a time, with a cache of
  // their artifacts by source hash in a directory of the service's own
  // (made at the first build, removed with the service).
  absl::Mutex build_mu_;
  std::string build_cache_dir_ ABSL_GUARDED_BY(build_mu_);

  mutable absl::Mutex mu_;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  int socket_streams_ ABSL_GUARDED_BY(mu_) = 0;  // ServeSocketStream calls between attach and end record
  std::atomic<size_t> grpc_streams_{0};            // Stream calls running now (max_grpc_streams)
  // Stream calls waiting for their first message, and since when (the
  // handler removes its own entry before it returns).
  absl::flat_hash_map<grpc::ServerContext*, absl::Time> unattached_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Entry> sessions_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, size_t> sessions_per_peer_ ABSL_GUARDED_BY(mu_);
  mutable absl::Mutex peers_mu_;
  // A connection handed to gRPC: its peer, and its socket's identity (a
  // socket's inode is unique while it is open), which tells whether the
  // descriptor is still that connection's.
  struct Connection {
    std::string peer;
    dev_t dev = 0;
    ino_t inode = 0;
  };
  // Whether `c` is still open at descriptor `fd`.
  static bool StillOpen(int fd, const Connection& c);
  absl::flat_hash_map<int, Connection> fd_peers_ ABSL_GUARDED_BY(peers_mu_);
  uint64_t refused_connections_ ABSL_GUARDED_BY(peers_mu_) = 0;
  std::thread reaper_;  // ReapLoop

  // Sessions taken out of the table while a request of theirs ran, for the
  // closer thread to close once it ends (Remove).
  struct Closing {
    std::shared_ptr<Session> session;
    uint64_t id = 0;
    std::string peer;
    std::string why;
  };
  std::deque<Closing> to_close_ ABSL_GUARDED_BY(mu_);
  // Sessions out of the table and not yet closed: counted against the
  // daemon's limit (and, in sessions_per_peer_, their peer's).
  size_t closing_ ABSL_GUARDED_BY(mu_) = 0;
  bool closer_stop_ ABSL_GUARDED_BY(mu_) = false;  // set by the destructor
  std::thread closer_;                              // CloseLoop
  bool CloserHasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Closes the sessions handed over by Remove, in order, until told to stop
  // with none left.
  void CloseLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // What follows a session's Close: its peer's count, the cache trim, the
  // log line.
  void Closed(uint64_t session_id, const std::string& peer, absl::string_view why, const SessionStats& stats)
      ABSL_LOCKS_EXCLUDED(mu_);
};

}  // namespace tensord::server

#endif  // TENSORD_SERVER_SERVICE_H_
