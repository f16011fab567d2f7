// The state of a Session (Session::Impl) and what its files share. A
// session's duties, one file each: the batcher (batcher.cc: the pending
// batch, the flush rules, the background flusher, queued releases and the
// sending half of a round trip), the reply reader (reply_reader.cc: the
// pump that waiting threads run, and what each reply completes), the
// handshake (handshake.cc: connecting, opening the session, choosing its
// transport), the data plane (data_plane.cc: uploads, fetches, shared
// memory) and the autograd requests (autograd_requests.cc); session.cc holds
// the rest of Session (ops, sync points, Close) and the process's sessions.
// The session stream itself is a Transport (transport.h). Internal to
// client/.
#ifndef TENSORD_CLIENT_SRC_SESSION_IMPL_H_
#define TENSORD_CLIENT_SRC_SESSION_IMPL_H_

#include <google/protobuf/arena.h>
#include <google/protobuf/repeated_field.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "embedded_daemon.h"
#include "shm_pool.h"
#include "tensord/client/session.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/op_registry.h"
#include "tensord/v1/tensord.grpc.pb.h"
#include "tensord/wire/data_frame.h"
#include "transport.h"

namespace tensord::client {
namespace internal {

// How many forks this process is away from the one that loaded the client
// (handshake.cc; counted once CountForksOnce ran).
extern std::atomic<uint64_t> g_fork_generation;
// Counts forks in g_fork_generation (pthread_atfork), once per process.
void CountForksOnce();

// "<what> (tensord daemon at <address>): <gRPC's message> (gRPC code N)",
// a RuntimeError.
absl::Status GrpcError(absl::string_view what, const std::string& address, const grpc::Status& s);
// The gRPC deadline `ms` milliseconds from now.
std::chrono::system_clock::time_point DeadlineIn(int ms);

// Adds `s` to the process's open sessions, which ShutdownAll closes (at
// exit, too). session.cc.
void RegisterSession(const std::shared_ptr<Session>& s);
// The seed of the last ManualSeed (nullopt: none yet), for sessions opened
// later. session.cc.
std::optional<uint64_t> LastManualSeed();
// The switches of the last SetMathMode (the defaults before one). session.cc.
MathMode LastMathMode();
// Function ids whose daemon node is gone (an Ack's released_functions), kept
// until TakeReleasedFunctions. autograd_requests.cc.
void NoteReleasedFunctions(const google::protobuf::RepeatedField<uint64_t>& ids);

// One blocking request: completed by whichever thread reads its reply.
struct Waiter {
  bool done = false;
  absl::Status status;
  // Fetch
  bool have_meta = false;
  TensorMeta meta;
  uint64_t total_bytes = 0;
  // Streamed data: `received` of total_bytes bytes so far, in `buffer`
  // (allocated with the first chunk, not zero-filled).
  std::shared_ptr<char> buffer;
  uint64_t received = 0;
  std::vector<v1::Error> earlier_errors;  // FetchData.errors of the first chunk
  uint32_t shm_requested = 0;  // the segment offered to the daemon (0: none)
  uint32_t shm_segment = 0;    // the daemon put the data there
  // Sync / Describe / MemoryStats
  v1::Ack ack;
};

// Batches of up to batch_limit small requests fit in the first block or two.
// The first block (`initial_block`, kBatchArenaBytes) belongs to the session
// and stays across resets: a batch that fits costs no malloc and free of it.
constexpr size_t kBatchArenaBytes = 64 << 10;
// The arena's options for a batch, whose first block is `initial_block`
// (kBatchArenaBytes).
google::protobuf::ArenaOptions ArenaOptionsForBatches(char* initial_block);

}  // namespace internal

struct Session::Impl {
  using Waiter = internal::Waiter;

  // A request sent for its reply: its id and the waiter the reply completes.
  struct Sent {
    uint64_t id = 0;
    std::shared_ptr<Waiter> waiter;
  };

  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Tensord::Stub> stub;
  // The session stream: the gRPC stream, or the same-host or TCP stream
  // beside it (transport.h). Set by Start before the stream is used; closed
  // by Close, and kept (its kind still answers).
  std::unique_ptr<internal::Transport> transport;
  std::string token;
  internal::EmbeddedDaemon daemon;
  std::atomic<bool> closed{false};
  // g_fork_generation when the session was made, and that process's pid.
  uint64_t fork_generation = internal::g_fork_generation.load(std::memory_order_relaxed);
  pid_t owner_pid = ::getpid();
  bool Inherited() const {
    return fork_generation != internal::g_fork_generation.load(std::memory_order_relaxed);
  }

  // Writer side: the pending batch, ids and counters.
  absl::Mutex mu;
  // The batch is built on an arena that is reset after each flush: a
  // streamed op costs bump allocations, not a malloc and a free for each
  // of its messages and strings.
  std::unique_ptr<char[]> arena_block{new char[internal::kBatchArenaBytes]};  // declared first: outlives `arena`
  google::protobuf::Arena arena ABSL_GUARDED_BY(mu){internal::ArenaOptionsForBatches(arena_block.get())};
  v1::ClientMessage* pending ABSL_GUARDED_BY(mu) = google::protobuf::Arena::CreateMessage<v1::ClientMessage>(&arena);
  uint64_t next_handle ABSL_GUARDED_BY(mu) = 1;
  uint64_t next_call_id ABSL_GUARDED_BY(mu) = 1;
  uint64_t next_request_id ABSL_GUARDED_BY(mu) = 1;
  // Call sites interned on this stream (OpCall.call_site_id), by text.
  absl::flat_hash_map<std::string, uint32_t> call_site_ids ABSL_GUARDED_BY(mu);
  // The same ids for C++ call sites (CallSite::Current()) by file pointer
  // and line, so a repeated call builds no text: the file's name is kept
  // and compared too (a pointer may be reused by a library loaded later).
  struct LineSite {
    std::string file;
    uint32_t id = 0;
  };
  absl::flat_hash_map<std::pair<const char*, int>, LineSite> line_site_ids ABSL_GUARDED_BY(mu);
  // How many of the process's ops defined at run time (DefinedOps) the
  // session was sent (v1::DefineOps goes before the first call needing more).
  size_t defined_ops_sent ABSL_GUARDED_BY(mu) = 0;
  // Kernel artifacts (by content hash) the daemon is known to hold: asked
  // for, or uploaded, before the first DefineOps that names one.
  absl::flat_hash_set<std::string> artifacts_on_daemon ABSL_GUARDED_BY(mu);
  // The digest of the ops defined at run time as sent to this session
  // (ExtensionOps::DigestAfter over them): an op from an artifact the
  // daemon refused goes without it (no kernel), so the set sent is not
  // always the process's.
  uint64_t defined_digest ABSL_GUARDED_BY(mu) = ExtensionOps::kEmptyDigest;
  // Ops (by id) whose artifact this session's daemon refused, with why: a
  // call to one fails with that, and nothing else is held back.
  absl::flat_hash_map<uint32_t, absl::Status> refused_ops ABSL_GUARDED_BY(mu);
  Stats stats ABSL_GUARDED_BY(mu);
  absl::Status write_error ABSL_GUARDED_BY(mu);
  // Requests per message (SessionOptions::batch_limit, at least 1).
  int batch_limit = 128;
  // The time flush: when the pending batch got its first request.
  std::chrono::steady_clock::time_point batch_started ABSL_GUARDED_BY(mu);
  bool batch_open ABSL_GUARDED_BY(mu) = false;
  // When a batch last opened (the flusher goes idle kFlusherIdleAfter later).
  std::chrono::steady_clock::time_point last_batch_open ABSL_GUARDED_BY(mu);
  static constexpr std::chrono::milliseconds kFlusherIdleAfter{100};
  std::chrono::microseconds flush_interval{0};
  // The open batch's interval: flush_interval, or kIdleFlushInterval when
  // the batch opened while the daemon had nothing of this session's to run.
  std::chrono::microseconds batch_interval ABSL_GUARDED_BY(mu){0};
  static constexpr std::chrono::microseconds kIdleFlushInterval{50};
  // Set when a wait for the daemon returned (everything sent before it is
  // done), cleared when the next batch goes out.
  std::atomic<bool> daemon_idle{false};
  // The sync request (a peek: Sync.peek) that went out with the last
  // adopting upload (Session::Upload), as long as nothing was sent after
  // it: Synchronize then waits for its reply instead of sending another
  // request, unless the reply says errors wait to be reported.
  std::optional<Sent> upload_sync ABSL_GUARDED_BY(mu);

  // The flusher thread sleeps on flush_cv (with mu). While batches keep
  // opening it wakes every flush_interval by itself and sends a batch that
  // is due; after kFlusherIdleAfter without a batch opening it sleeps until
  // signalled (flusher_idle), and only opening a batch then signals it. So a
  // round trip every few microseconds costs no wake-up of this thread (a
  // futex wake and a context switch that would compete with the daemon for
  // a core), and an idle session no timer either.
  absl::CondVar flush_cv;
  bool flush_stop ABSL_GUARDED_BY(mu) = false;
  bool flusher_idle ABSL_GUARDED_BY(mu) = false;
  std::thread flusher;

  // Releases queued by ~TensorImpl (any thread).
  absl::Mutex release_mu;
  std::vector<uint64_t> releases ABSL_GUARDED_BY(release_mu);
  // The bytes of the tensors in `releases` (written under release_mu, read
  // without it by ReleaseBeforeLocked: a stale value only moves the
  // releases one request later or earlier).
  std::atomic<int64_t> release_bytes{0};

  // Reader side: waits in flight and what the stream's end said. There is no
  // reader thread: the daemon only writes replies to requests a client thread
  // waits for, so a waiting thread reads the stream itself (one at a time,
  // `reading`), completing every waiter a message is for, until its own
  // request is done; then the next waiting thread takes over. This saves the
  // thread handoff (a futex wake and a context switch) on every round trip.
  absl::Mutex wmu;
  bool reading ABSL_GUARDED_BY(wmu) = false;
  v1::ServerMessage read_buf;  // used by the reading thread only
  uint64_t placed = 0;          // the same: bytes of read_buf's FetchData that PlaceData took
  std::shared_ptr<char> placed_buffer;  // the same: the buffer they went to, alive until the message is handled
  absl::flat_hash_map<uint64_t, std::shared_ptr<Waiter>> waiters ABSL_GUARDED_BY(wmu);
  std::deque<v1::BackwardCallback> callbacks ABSL_GUARDED_BY(wmu);
  std::vector<v1::Error> unclaimed_errors ABSL_GUARDED_BY(wmu);
  bool reader_done ABSL_GUARDED_BY(wmu) = false;
  absl::Status stream_status ABSL_GUARDED_BY(wmu);
  // Why the daemon ended the gRPC stream (a StreamEnd message; a socket
  // stream's end record gives it instead): what the stream's end reports.
  absl::Status daemon_ended ABSL_GUARDED_BY(wmu);

  // Tensors whose .grad the daemon may change, by handle.
  absl::Mutex grad_mu;
  absl::flat_hash_map<uint64_t, std::weak_ptr<TensorImpl>> grad_targets ABSL_GUARDED_BY(grad_mu);
  // Set once the first tensor is registered: until then a release skips
  // grad_mu (a session without autograd never takes it). A registration
  // happens before its tensor's release (the impl is alive while it is
  // registered), so a release of a registered handle always sees it set.
  std::atomic<bool> any_grad_targets{false};

  std::string address;
  uint64_t session_id = 0;
  // The shared-memory side channel (null: everything goes through the stream).
  std::shared_ptr<internal::ShmPool> shm;

  // OK while the session may send: not a fork's copy of the parent's, not
  // closed, and no send failed (else that send's error).
  absl::Status Usable() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (Inherited()) {
      return RuntimeErr(absl::StrCat(Session::Label(session_id), " belongs to process ", owner_pid,
                                     "; this process (", ::getpid(),
                                     ") was forked from it and cannot use it: start child processes with the "
                                     "'spawn' or 'forkserver' method of multiprocessing"));
    }
    if (closed.load()) return RuntimeErr(absl::StrCat(Session::Label(session_id), " is closed"));
    if (!write_error.ok()) return write_error;
    return absl::OkStatus();
  }

  // ---- the batcher (batcher.cc) ------------------------------------------

  // Appends the queued releases to the batch. Every request that names a
  // released handle is in the batch already (or sent): the handle's last
  // reference went after it was issued.
  void AppendReleasesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Queued releases go before a request that allocates at least
  // kReleaseFirstBytes, or before any request that allocates once the
  // tensors queued hold that much, so that what they free no longer counts
  // against the session's memory limit when the daemon allocates for it
  // (a large tensor deleted near the limit, then a small op). Otherwise
  // they wait for the batch's end (one Release request for many handles).
  static constexpr int64_t kReleaseFirstBytes = int64_t{64} << 10;
  void ReleaseBeforeLocked(int64_t allocates_bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Sends the pending batch (with queued releases) as one message. The
  // caller sends something after the last adopting upload's sync (the batch,
  // or messages of its own once the batch is out, as a streamed upload's
  // chunks), so that sync no longer covers everything sent: given up here
  // even when the batch is empty.
  absl::Status FlushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Called after a request was appended: sends the batch when it holds
  // batch_limit requests or its first request is batch_interval old; a
  // batch's first request starts that clock (and wakes an idle flusher).
  // The flush's error, if one was sent.
  absl::Status MaybeFlushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // The flusher thread: sends a batch that stayed open flush_interval without
  // another call to send it (errors stay in write_error for the next call).
  void FlushLoop();

  // Ends the flusher thread and joins it (Close).
  void StopFlusher();

  // Gives up waiting for upload_sync (a message goes out after it). Nothing
  // is lost: a peek's reply carries no errors (they stay in the daemon for
  // the next sync point), and one read later finds no waiter.
  void DropUploadSyncLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Registers a waiter for a new request id (call with mu held, before the
  // request is flushed).
  std::shared_ptr<Waiter> AddWaiterLocked(uint64_t* id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // The sending half of every round trip: registers a waiter for a new
  // request id, has `add(id, waiter)` append the request that names the id
  // to the pending batch, and flushes the batch (the request goes out now,
  // with whatever was pending). Returns what to wait for (Wait,
  // WaitOrCallback); when the flush fails, the waiter is forgotten and the
  // flush's error returned.
  absl::StatusOr<Sent> SendForReplyLocked(absl::FunctionRef<void(uint64_t id, Waiter& w)> add)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // ---- the reply reader (reply_reader.cc) --------------------------------

  // Why a send failed: what the daemon said as it ended the stream (read
  // now, when the transport can give it without waiting), else a
  // RuntimeError saying the connection to the daemon was lost.
  absl::Status StreamLost();

  // Drops the waiter of `sent` (its reply, if one comes, completes nothing).
  void Forget(const Sent& sent) ABSL_LOCKS_EXCLUDED(wmu);

  // Reads server messages until `done(arg)` holds or the stream ends; when
  // another thread is reading, waits for it instead (it completes our waiter
  // too, or hands the reading over when its own request is done). wmu is
  // released while blocked in Read. Defined in reply_reader.cc, its only
  // user.
  template <typename T>
  void PumpLocked(bool (*done)(T*), T* arg) ABSL_EXCLUSIVE_LOCKS_REQUIRED(wmu);

  // Blocks until the reply to `sent` came (or the stream ended); then its
  // waiter is forgotten. Returns the reply's status.
  absl::Status Wait(const Sent& sent);

  // Blocks until the reply to `sent` came or a BackwardCallback arrives;
  // returns the callback (to be run by the caller without locks), or
  // nullopt once the reply came. The waiter stays (Forget it).
  std::optional<v1::BackwardCallback> WaitOrCallback(const Sent& sent);

  // Reads (or waits for the reading thread) until the daemon ends the stream,
  // at most `timeout`; then cancels it. Used by Close after CloseWrites.
  void DrainLocked(absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(wmu);

  // The stream ended (Read returned false; `st` is what ended it): fail
  // every wait still in flight.
  void EndOfStreamLocked(grpc::Status st) ABSL_EXCLUSIVE_LOCKS_REQUIRED(wmu);

  // Where the `n` data bytes of a FetchData chunk go (called by the reading
  // thread while it parses the chunk, before HandleMessageLocked): into the
  // waiting fetch's buffer at the chunk's offset, when the chunk fits it;
  // else nullptr (the bytes stay in the message, and HandleMessageLocked
  // reports what is wrong).
  wire::Placement PlaceData(const v1::FetchData& d, size_t n) ABSL_LOCKS_EXCLUDED(wmu);

  // Completes the waiter `msg` answers. Fetch data is in the waiter's buffer
  // (PlaceData) or moved out of `msg`.
  void HandleMessageLocked(v1::ServerMessage* mutable_msg) ABSL_EXCLUSIVE_LOCKS_REQUIRED(wmu);

  // The errors no waiter claimed, then `reported` (a sync's or a fetch's
  // earlier errors), as one status: the first, with a count of the others.
  absl::Status TakeErrors(std::vector<v1::Error> reported);
};

}  // namespace tensord::client

#endif  // TENSORD_CLIENT_SRC_SESSION_IMPL_H_
