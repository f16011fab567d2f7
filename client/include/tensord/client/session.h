// tensord/client/session.h — a client's session with a tensord daemon: the
// handshake, the session's bidirectional stream, the batch of pending
// requests, sync points, releases and counters; and the embedded daemon a
// client spawns when it has no address.
//
//   auto s = *Session::Connect("unix:/run/tensord.sock");   // or SpawnEmbedded()
//   SessionGuard use(s);                // factories on this thread use `s`
//   Tensor x = *Zeros({3});  ...;  s->Synchronize();
//
// Thread-safety: every method may be called from any thread.
#ifndef TENSORD_CLIENT_SESSION_H_
#define TENSORD_CLIENT_SESSION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tensord/client/tensor.h"
#include "tensord/client/transport_options.h"
#include "tensord/meta/device.h"
#include "tensord/meta/math_mode.h"
#include "tensord/meta/op_table.h"
#include "tensord/meta/tensor_meta.h"
#include "tensord/meta/value.h"

namespace tensord::client {

struct SessionOptions {
  // Requests per message: the pending batch is sent when it holds this many
  // (or at a sync point).
  int batch_limit = 128;
  // A pending batch that is not full is also sent once its first request is
  // this old (microseconds), by a background flusher when no other call
  // comes: the daemon starts on a burst of ops while the client computes or
  // waits, instead of at the next sync point. 0 turns the time flush off
  // (full batches and sync points only); -1 (the default) takes
  // $TENSORD_FLUSH_US when set, else 2000. The first batch opened after a
  // wait for the daemon returned (it has nothing of this session's to run)
  // is sent once it is 50 us old instead, if that is shorter, by the next
  // call that finds it so. Without a further call it waits for the flusher
  // (up to flush_interval_us, as any batch): waking the flusher for it
  // would cost every round trip a thread wake-up.
  int flush_interval_us = -1;
  // How long Connect waits for the handshake and an embedded daemon for its
  // ready line.
  int connect_timeout_ms = 10000;
  int spawn_timeout_ms = 30000;
  std::string client_name = "tensord-client";
  // backward() without a round trip: when the client can tell from its mirror
  // of the graph which .grad the daemon will set (no user-defined Function,
  // no retain_grad() tensor, leaf inputs only, no create_graph), it streams
  // the backward like an op and goes on; a daemon-side failure is reported at
  // the next sync point. False, or $TENSORD_PREDICT_BACKWARD=0, waits for
  // every backward.
  bool predict_backward = true;
  // Embedded daemon: the binary (empty: $TENSORD_BIN, else the build's bin/
  // directory, else `tensord` on PATH).
  std::string daemon_binary;
  // How messages and tensors travel (upload sizes, shared memory, the
  // same-host and TCP streams): see tensord/client/transport_options.h.
  TransportOptions transport;
};

// Client counters (PyTorch users compare them with the op count to see how
// much a sync point cost).
struct Stats {
  int64_t ops_issued = 0;     // op calls streamed to the daemon
  int64_t uploads = 0;        // tensors uploaded from host data
  int64_t messages_sent = 0;  // ClientMessages written on the stream
  int64_t timed_flushes = 0;  // of which sent because the batch's first request was flush_interval_us old
  int64_t round_trips = 0;    // blocking waits for the daemon
  int64_t predicted_backwards = 0;  // backward() calls streamed without waiting (predict_backward)
  int64_t releases = 0;       // handles released
  int64_t shm_uploads = 0;    // uploads through shared memory
  int64_t shm_fetches = 0;    // fetches through shared memory
  int64_t shm_adopted_uploads = 0;   // of shm_uploads, those whose segment the daemon adopted (no daemon copy)
  int64_t shm_segments_created = 0;  // shared-memory segments made (the rest of the transfers reused them)
  int64_t artifact_bytes_sent = 0;   // bytes of kernel artifacts uploaded (none for one the daemon had)
};

// A session's memory on one device, as the daemon counts it, in bytes
// (Session::GetMemoryStats; PyTorch's torch.cuda.memory_stats of a device).
struct MemoryStats {
  // This session's storages on the device now, by their sizes as asked
  // (before the allocator rounds them up): memory_allocated.
  int64_t allocated_bytes = 0;
  // The most allocated_bytes has been since the session opened or since the
  // last reset of the device's peak: max_memory_allocated.
  int64_t peak_allocated_bytes = 0;
  // What the device's allocator holds for all the daemon's sessions: their
  // live storages, the rounding of those, and freed blocks it keeps for
  // reuse: memory_reserved.
  int64_t reserved_bytes = 0;
  // The device's memory (the machine's physical memory for the cpu).
  int64_t total_bytes = 0;
};

// One device the daemon serves, as it described it when the session opened
// (what PyTorch's torch.cuda.get_device_properties gives, for every kind).
struct DeviceInfo {
  Device device;                   // cpu, cuda:0, privateuseone:0
  std::string description;         // "16 cores", "NVIDIA H100 80GB HBM3"
  int64_t total_memory_bytes = 0;  // the machine's physical memory for the cpu
  // Free when the session opened, as the device saw it (other processes'
  // use included); 0 from a daemon that does not say.
  int64_t free_memory_bytes = 0;
  // Compute capability, 9.0 for an H100; 0.0 for a kind without one (the cpu).
  int capability_major = 0;
  int capability_minor = 0;
};

// What the daemon said about itself when it opened the session.
struct DaemonInfo {
  std::string server_version;
  std::vector<std::string> devices;        // "cpu", "cuda:0": the names of device_info's
  std::vector<DeviceInfo> device_info;     // the same devices, in the daemon's order (the cpu first)
  uint64_t session_memory_limit_bytes = 0;
  // The CUDA versions the daemon runs with, "13.0": its NVIDIA driver's
  // (empty without a driver) and the runtime it was built with (empty in a
  // build without CUDA).
  std::string cuda_driver_version;
  std::string cuda_runtime_version;
  // Why it serves no cuda device ("no NVIDIA driver is loaded (...)", "this
  // daemon was built without CUDA (...)"); empty when it serves one.
  std::string cuda_unavailable_reason;

  // Whether the daemon serves `device` (meta never: meta tensors live in the client).
  bool Serves(const Device& device) const {
    for (const DeviceInfo& d : device_info) {
      if (d.device == device) return true;
    }
    return false;
  }
  // How many cuda devices it serves (cuda:0 .. cuda:N-1).
  int cuda_device_count() const;
  // The RuntimeError for a tensor that `op` would make on `device`, which the
  // daemon does not serve: "zeros: device cuda:0 is not available: this
  // daemon serves cpu; it has no CUDA device: no NVIDIA driver is loaded (...)".
  absl::Status DeviceUnavailable(absl::string_view op, const Device& device) const;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  // Connects to a running daemon: "unix:/path/to.sock" or "host:port".
  // Handshakes (protocol version and op-table digest; a mismatch is refused
  // with the daemon's explanation of what differs), opens a session and
  // attaches its stream. RuntimeError when the daemon is unreachable; on
  // the gRPC stream (transport.same_host_stream or tcp_stream off, or
  // refused), ResourceExhausted when the daemon's gRPC threads for session
  // streams are all taken (tensord serve --grpc-threads).
  static absl::StatusOr<std::shared_ptr<Session>> Connect(absl::string_view address, SessionOptions options = {});
  // Starts a private daemon (`tensord serve --listen unix:<tmp dir>/sock`),
  // waits for its "tensord: listening on ..." line and connects. The daemon
  // is stopped (SIGTERM, then waited for) when the session closes or the
  // process exits.
  static absl::StatusOr<std::shared_ptr<Session>> SpawnEmbedded(SessionOptions options = {});

  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Ends the session: the daemon frees everything it owned. Idempotent.
  // Later calls on this session's tensors fail with RuntimeError. On the
  // same-host and TCP streams it returns within about 15 s even when the
  // daemon has stopped reading (stopped, hung): another thread's send that
  // blocks is ended after 5 s (that call fails), the CloseSession call
  // waits 5 s at most and the stream's end 3 s; the Status then says the
  // close failed. On the gRPC stream a write blocked that way is not ended
  // by cancelling the call (gRPC 1.51), and Close waits for it.
  absl::Status Close();
  bool closed() const;

  // Waits until the daemon has executed every request sent so far. Returns
  // the first error not reported before (naming the failed op, its call id
  // and call site).
  absl::Status Synchronize();

  Stats stats() const;
  uint64_t session_id() const { return session_id_; }
  // "tensord session 00000000075bcd15": the id as error messages and the
  // daemon's log lines print it (16 hex digits).
  std::string label() const { return Label(session_id_); }
  static std::string Label(uint64_t session_id);
  const std::string& address() const { return address_; }
  const DaemonInfo& daemon_info() const { return daemon_info_; }
  // Process id of the embedded daemon, or 0 when connected to an external one.
  int daemon_pid() const;

  // ---- used by Tensor and ops (not needed by applications) ---------------
  // Appends a call of `op` with bound `args` to the pending batch; outputs get
  // fresh handles and the metas in `outputs` (moved from). `tensor_args`
  // maps each tensor Value (by meta pointer) to its Tensor; all must belong
  // to this session.
  // `record_grad` is sent as OpCall.record_grad. `write_results`, when not
  // empty, has one entry per output: an aliased-write return (`Tensor(a!)`)
  // is sent as handle 0 and the given Tensor (the written argument) is
  // returned for it. RuntimeError, with nothing sent, when an output is on
  // a device the daemon does not serve (DaemonInfo::DeviceUnavailable).
  absl::StatusOr<std::vector<Tensor>> EnqueueCall(const OpEntry& op, absl::Span<const Value> args,
                                                  absl::Span<const Tensor> tensor_args,
                                                  absl::Span<TensorMeta> outputs, const CallSite& site,
                                                  bool record_grad = false,
                                                  const std::vector<std::optional<Tensor>>& write_results = {});
  // A call of a data-dependent op: streams it with a Describe of its outputs
  // and waits for their metadata (one round trip).
  absl::StatusOr<std::vector<Tensor>> CallDataDependent(const OpEntry& op, absl::Span<const Value> args,
                                                        absl::Span<const Tensor> tensor_args, const CallSite& site,
                                                        bool record_grad = false);

  // ---- autograd requests (see tensord/client/autograd.h) -----------------
  absl::Status SendSetRequiresGrad(uint64_t handle, bool requires_grad, const CallSite& site);
  absl::Status SendRetainGrad(uint64_t handle);
  // grad = 0: None.
  absl::Status SendSetGrad(uint64_t handle, uint64_t grad);
  // GetGrad: a new tensor of `meta` bound to the current .grad of `handle`.
  absl::StatusOr<Tensor> BindGrad(uint64_t handle, const TensorMeta& meta);
  absl::Status SendManualSeed(uint64_t seed);
  // SetMathMode: the session's numerics switches for the ops issued after it.
  absl::Status SendMathMode(const MathMode& mode);
  absl::Status SendRecordFunction(uint64_t function_id, const std::string& name,
                                  const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs,
                                  const std::vector<bool>& non_differentiable, const std::vector<uint64_t>& dirty,
                                  bool materialize_grads, const std::vector<uint64_t>& saved,
                                  const CallSite& site);
  // One Backward request, waited for while running Function callbacks. With
  // `accumulate`, the .grad caches of the tensors whose .grad changed are
  // invalidated and an empty vector is returned; without, one result per
  // input (nullopt when unused).
  absl::StatusOr<std::vector<std::optional<Tensor>>> RunBackward(
      const std::vector<Tensor>& roots, const std::vector<std::optional<Tensor>>& grad_roots,
      const std::vector<Tensor>& inputs, bool retain_graph, bool create_graph, bool accumulate, bool allow_unused,
      const CallSite& site);
  // A predicted backward (SessionOptions::predict_backward): streamed, not
  // waited for. `expect` holds the tensors whose .grad the daemon will set,
  // with its metadata, by the client's walk of the graph; they get a pending
  // .grad of that metadata now. The batch is sent, so the daemon starts on
  // the forward and backward while the caller goes on.
  absl::Status SendPredictedBackward(const std::vector<Tensor>& roots,
                                     const std::vector<std::optional<Tensor>>& grad_roots,
                                     const std::vector<Tensor>& inputs, bool retain_graph,
                                     std::vector<std::pair<std::shared_ptr<TensorImpl>, TensorMeta>> expect,
                                     const CallSite& site);
  bool predicts_backward() const;
  // Tensors whose .grad the daemon may set (leaves that require grad,
  // retain_grad() tensors, backward inputs): their handle maps to their impl
  // so a backward's Ack can invalidate the cached .grad.
  void RegisterGradTarget(const std::shared_ptr<TensorImpl>& impl);
  // Uploads `nbytes` at `data` as a new contiguous tensor of `meta`.
  // RuntimeError, with nothing sent, when the daemon does not serve
  // meta.device (DaemonInfo::DeviceUnavailable, named "tensor").
  absl::StatusOr<Tensor> Upload(const void* data, size_t nbytes, const TensorMeta& meta, const CallSite& site);
  // `expected_bytes` (the tensor's size as the client predicts it) lets a
  // large fetch go through shared memory; 0 streams it.
  absl::StatusOr<HostData> Fetch(uint64_t handle, uint64_t expected_bytes = 0);
  // Whether the shared-memory side channel is in use.
  bool uses_shared_memory() const;
  // Whether the session stream runs over the daemon's side-channel socket
  // (SessionOptions::transport.same_host_stream) rather than gRPC.
  bool uses_same_host_stream() const;
  // Whether the session stream runs over its own TCP connection
  // (SessionOptions::transport.tcp_stream) rather than gRPC.
  bool uses_tcp_stream() const;
  // The daemon's metadata for `handle` (error if it failed); when
  // `storage_id` is given, the daemon's id of the storage it views (equal ids
  // = the same storage; 0 when it has none).
  absl::StatusOr<TensorMeta> Describe(uint64_t handle, uint64_t* storage_id = nullptr);
  // This session's memory statistics on `device` (see MemoryStats), once
  // the daemon has executed every request sent before (one round trip;
  // tensors released before the call no longer count). With `reset_peak`,
  // the device's peak then becomes its bytes in use (PyTorch's
  // reset_peak_memory_stats); the result has the peak before the reset.
  // With `empty_cache`, the device's allocator first gives back the freed
  // blocks it keeps for reuse (PyTorch's empty_cache; the daemon's cache,
  // shared by its sessions), and reserved_bytes is what it holds after. Not
  // a sync point for errors: errors of earlier ops stay for the next one.
  // RuntimeError for a device the daemon does not serve (meta included),
  // naming the ones it does; RuntimeError when the session is closed.
  absl::StatusOr<MemoryStats> GetMemoryStats(const Device& device, bool reset_peak = false,
                                             bool empty_cache = false);
  // A kernel artifact built by the daemon from sources given as text, with
  // its own toolchain (tensord.cpp_extension's build_on="daemon"): the
  // artifact file's bytes, which the daemon also keeps (loading them sends
  // nothing back). Blocks for the build (at most the daemon's build time
  // limit, 5 minutes). Errors (RuntimeError): the daemon's refusal (builds
  // need --artifacts any), the build's error with the compiler's output, its
  // time limit; the gRPC failure.
  struct ArtifactBuild {
    std::string name;                                         // the library's name
    std::vector<std::pair<std::string, std::string>> sources; // (base name, text)
    std::vector<std::string> cuda_archs, extra_cflags, extra_cuda_cflags, extra_ldflags;
  };
  absl::StatusOr<std::string> BuildArtifactOnDaemon(const ArtifactBuild& build);
  // Queues a handle for release with the next message (called from
  // ~TensorImpl on any thread). `bytes`: the size of the storage the tensor
  // views (a view counts its base's, though releasing it frees nothing
  // while another tensor views that storage):
  // once 64 KiB or more wait, they go before the next request that
  // allocates, however small, so that the session's memory limit no longer
  // counts them.
  void QueueRelease(uint64_t handle, int64_t bytes = 0);

 private:
  struct Impl;
  Session(SessionOptions options, std::string address);
  // Runs one BackwardCallback (the registered handler) and sends its
  // CallbackResult.
  void RunCallback(const void* callback_message);
  absl::Status Start();
  // Start's steps: the gRPC stream and its attach message (when the session
  // has no same-host stream); then the seed and the flusher thread.
  absl::Status AttachGrpcStream();
  absl::Status StartStreaming();

  SessionOptions options_;
  bool predict_backward_ = true;  // options_.predict_backward and $TENSORD_PREDICT_BACKWARD
  std::string address_;
  std::string daemon_peer_;  // the daemon's address as gRPC reached it (ClientContext::peer)
  uint64_t session_id_ = 0;
  DaemonInfo daemon_info_;
  std::unique_ptr<Impl> impl_;
};

// ---- numerics switches ---------------------------------------------------
// tensord.backends.cuda.matmul.allow_tf32 and friends (tensord/meta/
// math_mode.h): the process's switches, sent to the current session (the
// thread's or the default one, if any) and to every session opened later
// while they differ from the defaults. Errors: the current session's, when
// it is unusable.
absl::Status SetMathMode(const MathMode& mode);
// The switches last set (the defaults before any SetMathMode).
MathMode GetMathMode();

// ---- the current session -----------------------------------------------
// Factories use, in order: the innermost SessionGuard on this thread, the
// default session, or a new default session (from $TENSORD_ADDRESS, else an
// embedded daemon) created on first use.
absl::StatusOr<std::shared_ptr<Session>> CurrentSession();
// The default session if one exists (never creates one).
std::shared_ptr<Session> DefaultSessionIfAny();
// The session CurrentSession() would use if one is open: this thread's
// innermost SessionGuard's, else the default one; nullptr when neither is
// open (never creates one).
std::shared_ptr<Session> CurrentSessionIfAny();
void SetDefaultSession(std::shared_ptr<Session> session);

class SessionGuard {
 public:
  explicit SessionGuard(std::shared_ptr<Session> session);
  ~SessionGuard();
  SessionGuard(const SessionGuard&) = delete;
  SessionGuard& operator=(const SessionGuard&) = delete;

 private:
  std::shared_ptr<Session> previous_;
};
// Non-RAII form (for bindings): replaces this thread's current session and
// returns the previous one.
std::shared_ptr<Session> ExchangeThreadSession(std::shared_ptr<Session> session);

// Closes every open session (and stops embedded daemons). Registered with
// atexit when the first session is created; bindings may call it earlier.
void ShutdownAll();

// Counters of ops that ran in meta mode (no session), process-wide.
int64_t MetaOpsRun();

}  // namespace tensord::client

#endif  // TENSORD_CLIENT_SESSION_H_
