// tensord/server/session.h — one client session in the daemon: its handle
// table and its memory account, and the requests of its stream, executed in
// order (op calls, run by the runtime's Dispatcher; uploads, releases,
// fetches, syncs, describes, memory statistics; and the autograd requests: the graph is
// recorded as ops run and backward runs in the daemon, see autograd.h).
//
// Every field of every request is treated as hostile: handles are looked up
// in this session's table only (another session's ids are simply unknown),
// metadata is validated against overflow and against the storage it
// addresses, and nothing a client sends can crash or abort the daemon. An op
// that fails marks its outputs failed; later ops on them fail with the
// original error without running, and the error is reported at the next Sync
// and at any Fetch of an affected tensor.
#ifndef TENSORD_SERVER_SESSION_H_
#define TENSORD_SERVER_SESSION_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "tensord/kernels/registry.h"
#include "tensord/runtime/artifact_worker.h"
#include "tensord/runtime/artifacts.h"
#include "tensord/runtime/autograd.h"
#include "tensord/runtime/backend.h"
#include "tensord/runtime/dispatcher.h"
#include "tensord/runtime/handles.h"
#include "tensord/runtime/memory.h"
#include "tensord/meta/op_registry.h"
#include "tensord/meta/tensor_meta.h"
#include "tensord/v1/tensord.pb.h"
#include "tensord/wire/data_frame.h"

namespace tensord::server {

// The runtime's names the daemon's sessions use throughout.
using runtime::AutogradMeta;
using runtime::Backend;
using runtime::Backends;
using runtime::CopyBetween;
using runtime::DeviceUnavailable;
using runtime::Edge;
using runtime::FindFormula;
using runtime::FormatBytes;
using runtime::FullName;
using runtime::HandleTable;
using runtime::LeafMovesIntoTheGraph;
using runtime::InplaceNeedsOriginalSelf;
using runtime::MemoryAccount;
using runtime::MemoryCharge;
using runtime::Node;
using runtime::NodeFixedBytes;
using runtime::NodeInputBytes;
using runtime::NodeOutputBytes;
using runtime::OpError;
using runtime::ReleasedFunctions;
using runtime::RequireOp;
using runtime::SavedTensor;
using runtime::SaveIdentity;
using runtime::Storage;
using runtime::Tensor;
using runtime::WrittenReturn;

// Fetch data travels in chunks of at most this many bytes: large, but with
// room left under gRPC's default 4 MiB receive limit (for the first chunk's
// metadata and errors), so that clients with default settings can read them.
inline constexpr int64_t kMaxChunkBytes = 3 << 20;
// At most this many errors wait for the next Sync; later ones are counted.
inline constexpr size_t kMaxUnreportedErrors = 1024;
// A call site (OpCall.call_site: "file.py:12 in f") is kept to at most
// this many bytes; longer ones are cut.
inline constexpr size_t kMaxCallSiteBytes = 1024;
// Uploads in progress at once in one session (a client sends one chunked
// upload after another; the same-host client a few adopting ones).
inline constexpr size_t kMaxPendingUploads = 1024;
// A Describe whose reply would pass this many bytes (encoded) is refused:
// the reply is built whole in memory, and each handle of a one-byte-per-
// handle request may take a kilobyte or two to answer.
inline constexpr size_t kMaxDescribeReplyBytes = 4 << 20;

// The error as the wire carries it (the kind, the message and the origin).
void ToProto(const OpError& e, v1::Error* out);
// The status with its origin in front, as the client prints it
// ("index.Tensor (call 4 at train.py:3): index 5 is out of bounds ..."):
// what a later request (a backward, say) reports when this failed tensor
// is the reason it cannot run, so that the message names the line that
// failed first, not only the later one.
absl::Status WithOrigin(const OpError& e);

struct SessionStats {
  int64_t bytes_in_use = 0;
  int64_t peak_bytes = 0;
  int64_t bookkeeping_bytes = 0;  // charged for failed handles and call sites (under the same limit)
  uint64_t ops_executed = 0;
  size_t live_handles = 0;
  size_t pending_uploads = 0;
};

class Session {
 public:
  // Receives the daemon's answers (FetchData chunks, Acks, RequestErrors);
  // returns false when the stream is gone.
  using Writer = std::function<bool(const v1::ServerMessage&)>;

  // Sends one FetchData chunk: `head` (every field but `data`) and the `n`
  // bytes at `data`, which stay valid and unchanged until this returns (so
  // a transport may send them without copying). Returns false when the
  // stream is gone. Without one, and for chunks under
  // wire::kMinBorrowedBytes, the bytes are copied into a ServerMessage for
  // the Writer.
  using DataWriter = std::function<bool(const v1::FetchData& head, const char* data, size_t n)>;

  // `devices` (the backends the session's ops run on: allocators and
  // kernels) must outlive the session, and so must `artifacts` (the
  // daemon's kernel artifacts; nullptr: ops from artifacts are refused).
  Session(uint64_t id, std::string token, std::string client_name, std::shared_ptr<MemoryAccount> memory,
          const Backends* devices, runtime::ArtifactStore* artifacts = nullptr);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  uint64_t id() const { return id_; }
  const std::string& token() const { return token_; }
  // The session's memory account, for a MemoryCharge of the daemon's on
  // its behalf (memory() is the read-only view).
  const std::shared_ptr<MemoryAccount>& memory_account() const { return memory_; }
  const std::string& client_name() const { return client_name_; }

  // Reads the next client message of the stream; returns false when the
  // stream ended. The autograd engine reads through it while it waits for a
  // BackwardCallback's result.
  using Reader = std::function<bool(v1::ClientMessage*)>;

  // Executes one request. Returns false when `write` failed (the stream is
  // gone) or the session is closed; errors of the request itself are
  // reported to the client, never returned. Without a reader, a backward
  // that reaches a Python function fails (there is no stream to call back on).
  bool Execute(const v1::Request& request, const Writer& write, const Reader& read = nullptr);

  // Executes the requests of one client message in order. A backward among
  // them may read further messages through `read` (to get a callback's
  // result); requests that follow the result in such a message run after the
  // backward finishes, before this returns. Returns false when the stream is
  // gone or the session closed. The requests run in place (never copied);
  // `message` must stay alive and unchanged until this returns.
  bool ExecuteMessage(const v1::ClientMessage& message, const Writer& write, const Reader& read,
                      const DataWriter& write_data = nullptr);

  // Where the `n` data bytes of an upload chunk `head` (parsed without its
  // data) may be copied before the message carrying it runs: straight into
  // the storage of the handle's unfinished upload, when the chunk continues
  // it exactly (the offset received so far, no meta, no shared-memory
  // segment, within total_bytes) and nothing else waits to run first; or,
  // for a first chunk that ExecuteUpload would accept, into the storage of
  // the upload it starts here (its meta checked, its storage allocated). The
  // next ExecuteMessage (of that one-request message) then counts them as
  // received, with the upload's total_bytes as the transfer's size. A null
  // placement: the data goes in the message as usual. `*keep`
  // holds the storage while the caller copies (the session may close
  // meanwhile). Not to be called while a message runs.
  wire::Placement PlaceUploadData(const v1::Upload& head, size_t n, std::shared_ptr<Storage>* keep)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Frees every tensor and discards unfinished uploads. Idempotent; later
  // Execute calls return false. Returns the final statistics.
  SessionStats Close() ABSL_LOCKS_EXCLUDED(mu_);
  // The same when no request is running (it would wait for the request to
  // end); nullopt, having done nothing but ask the running request's
  // thread to stop after it, when one is.
  std::optional<SessionStats> TryClose() ABSL_LOCKS_EXCLUDED(mu_);
  bool closed() const;

  SessionStats stats() const;
  // Whether a request runs now (its thread holds the session), without
  // waiting for it.
  bool running() const { return executing_.load(std::memory_order_relaxed); }
  // Ops executed so far, without waiting for a running request.
  uint64_t ops_executed() const { return dispatcher_.ops_executed(); }
  // Memory account (bytes in use return to 0 once the session is closed).
  const MemoryAccount& memory() const { return *memory_; }

  // ---- shared memory (the side channel of tensord/transport/shm.h) --------
  // Claims the session's one side channel; false when it already has one.
  bool ClaimShmChannel();
  // Maps the client's memfd `fd` as segment `id` of `size` bytes (the caller
  // keeps `fd`). Refused (InvalidArgument, FailedPrecondition or
  // ResourceExhausted, with the numbers) unless: id is not 0 and not mapped
  // yet; the session has fewer than kMaxShmSegments segments and at most
  // kMaxShmBytes in them; `fd` is a memfd sealed against shrinking (so the
  // mapping can never fault past its end) whose size is exactly `size` > 0.
  absl::Status MapShmSegment(uint32_t id, uint64_t size, int fd);
  // Refused (FailedPrecondition) while the segment backs a tensor's storage
  // (an adopting upload): it is unmapped when that storage is freed.
  absl::Status UnmapShmSegment(uint32_t id);
  // Segments mapped now (tests).
  size_t shm_segments() const;

  static constexpr size_t kMaxShmSegments = 64;
  static constexpr uint64_t kMaxShmBytes = uint64_t{64} << 30;

 private:
  // A mapped segment; unmapped when the last user lets go (the session's
  // table, a copy in flight, or the storage that adopted it).
  struct ShmMapping {
    char* data = nullptr;
    uint64_t size = 0;
    uint32_t id = 0;
    // Backs a storage now (set under shm_mu_; cleared by the storage's
    // release, on any thread, possibly after the session is gone).
    std::atomic<bool> adopted{false};
    ~ShmMapping();
  };
  // Ids of adopted segments whose storage was freed, for the next reply's
  // shm_freed. Thread-safe; outlives the session while a storage holds it.
  // Each id is listed once: a client that never waits for a reply grows it
  // by one entry per distinct segment it adopted, not per upload.
  class ShmFreedList {
   public:
    void Add(uint32_t id) {
      absl::MutexLock l(&mu_);
      if (std::find(ids_.begin(), ids_.end(), id) == ids_.end()) ids_.push_back(id);
      any_.store(true, std::memory_order_release);
    }
    // Every reply asks; most find none, without taking the lock. An id
    // added while this runs goes with the next reply.
    void TakeInto(google::protobuf::RepeatedField<uint32_t>* out) {
      if (!any_.load(std::memory_order_acquire)) return;
      absl::MutexLock l(&mu_);
      for (uint32_t id : ids_) out->Add(id);
      ids_.clear();
      any_.store(false, std::memory_order_relaxed);
    }

   private:
    absl::Mutex mu_;
    std::vector<uint32_t> ids_ ABSL_GUARDED_BY(mu_);
    std::atomic<bool> any_{false};  // ids_ is not empty (set under mu_)
  };
  // The segment `id` and the `nbytes` at `offset` in it, checked; the error
  // names `what` and the numbers. A segment adopted as a storage is refused.
  absl::StatusOr<std::shared_ptr<ShmMapping>> ShmRange(absl::string_view what, uint32_t id, uint64_t offset,
                                                       uint64_t nbytes) const;
  // A storage over `nbytes` at `offset` of segment `id` (Upload.shm_adopt):
  // the segment is marked adopted until the storage is freed, then its id
  // goes to shm_freed_. Errors name `what` and the numbers.
  absl::StatusOr<std::shared_ptr<Storage>> AdoptShmRange(absl::string_view what, uint32_t id, uint64_t offset,
                                                         uint64_t nbytes);

  struct PendingUpload {
    TensorMeta meta;
    std::shared_ptr<Storage> storage;
    uint64_t total_bytes = 0;
    uint64_t received = 0;
    uint64_t call_id = 0;
    std::string call_site;  // the first chunk's, named in errors of later ones
  };

  bool ExecuteLocked(const v1::Request& request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The next request to execute: the current message's next one, else the
  // oldest of queue_ (moved into *owned); nullptr when there is none.
  const v1::Request* NextRequestLocked(v1::Request* owned) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Executes one request, turning an exception into a recorded error.
  bool ExecuteGuardedLocked(const v1::Request& request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs requests until there is none left (or the stream is gone).
  bool DrainLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExecuteCall(const v1::OpCall& call) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds the client's ops defined at run time to the session's extension
  // set (v1::DefineOps); errors are the session's.
  void ExecuteDefineOps(const v1::DefineOps& d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The artifact (content hash `hash`, loaded for the session if it is not
  // yet) and the index in its manifest of the op whose canonical definition
  // is `schema` with `shape_rule` and `derivative`. RuntimeError when the
  // daemon takes no artifacts, has not got this one, or the artifact has no
  // such op (or another rule or derivative for it).
  absl::StatusOr<std::pair<const runtime::LoadedArtifact*, size_t>> BindArtifactOp(const std::string& hash,
                                                                                   const std::string& schema,
                                                                                   const std::string& shape_rule,
                                                                                   const std::string& derivative)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  inline static const std::string kNoText;  // "": no artifact, no derivative

  // Autograd requests.
  void ExecuteSetRequiresGrad(const v1::SetRequiresGrad& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExecuteRetainGrad(const v1::RetainGrad& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExecuteSetGrad(const v1::SetGrad& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Remembers an identity whose .grad may hold a graph (grad_holders_),
  // dropping dead and repeated entries as the list grows.
  void HoldGradLocked(const std::shared_ptr<AutogradMeta>& ag) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExecuteGetGrad(const v1::GetGrad& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExecuteRecordFunction(const v1::RecordFunction& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ExecuteBackward(const v1::Backward& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A predicted backward (Backward.predicted): runs it, checks the client's
  // prediction, answers nothing; errors become the session's.
  bool ExecutePredictedBackward(const v1::Backward& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs the runtime's engine on the request's handles; fills `ack`'s
  // autograd fields. Returns the backward's error.
  absl::Status RunBackward(const v1::Backward& r, v1::Ack* ack, bool* stream_ok) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Calls a Python function node back: unpacks its saved tensors (version
  // checked; `self` is the node, the grad_fn of saved outputs), binds them
  // and the grads, writes the callback, executes the client's requests until
  // the matching CallbackResult.
  absl::StatusOr<std::vector<Tensor>> CallBack(Node& node, const std::shared_ptr<Node>& self,
                                              const std::vector<Tensor>& grads, bool create_graph,
                                              bool* stream_ok) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The gradient edge of a tensor (grad_fn or its leaf's AccumulateGrad).
  Edge GradientEdge(const Tensor& t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds the function ids of destroyed function nodes, and the adopted
  // shared-memory segments freed since the last reply, to `ack`.
  void AddReleasedFunctions(v1::Ack* ack);
  void ExecuteUpload(const v1::Upload& upload) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A first chunk's meta and total_bytes (`data_bytes`: the bytes it
  // carries), checked: the meta with canonical strides in `*m`, its size in
  // `*expected`; `*report_meta` says whether an error should report `*m`.
  absl::Status CheckFirstChunk(const v1::Upload& u, uint64_t data_bytes, absl::string_view what, TensorMeta* m,
                               uint64_t* expected, bool* report_meta);
  // Allocates the storage of an upload that `u` (a checked first chunk)
  // starts and registers it (error: the allocation's, e.g. the session's
  // memory limit).
  absl::Status StartUploadLocked(const v1::Upload& u, const TensorMeta& meta, uint64_t expected)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExecuteRelease(const v1::Release& release) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ExecuteFetch(const v1::Fetch& fetch, const Writer& write) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Where the host can read `t`'s bytes: its storage's base when the daemon
  // addresses the device's memory directly (the CPU); else the bytes `t`
  // addresses, copied to a host storage kept in `*keep` (charged to the
  // session), with the base set back by the offset so that the tensor's own
  // offset and strides address the copy. `what` names the request in errors.
  absl::StatusOr<char*> HostBase(const Tensor& t, absl::string_view what, std::shared_ptr<Storage>* keep)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ExecuteSync(const v1::Sync& sync, const Writer& write) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the errors not reported yet (and a count of dropped ones) into
  // `out`, marking them reported: Sync acks and every fetch's first chunk.
  void TakeUnreportedErrors(google::protobuf::RepeatedPtrField<v1::Error>* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether TakeUnreportedErrors would move anything (Sync.peek).
  bool HasUnreportedErrors() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ExecuteDescribe(const v1::Describe& describe, const Writer& write) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers the session's memory statistics on one device (session_memory.cc);
  // a device not served is a RequestError. Reports no errors of earlier ops.
  bool ExecuteMemoryStats(const v1::MemoryStats& request, const Writer& write) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // e->WithOrigin(), for the error of a backward that the failed tensor
  // holding `e` made fail: marks `e` carried, and remembers it as the cause
  // (the first one) for the backward's own error (backward_cause_).
  absl::Status AsCause(const std::shared_ptr<OpError>& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Creates an error and queues it for the next Sync.
  std::shared_ptr<OpError> RecordError(absl::Status status, std::string op, uint64_t call_id,
                                       std::string call_site) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `handle` has an upload in progress (a session uploading nothing
  // answers without hashing: ops, releases and fetches ask for every handle).
  bool Uploading(uint64_t handle) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !uploads_.empty() && uploads_.contains(handle);
  }
  // OK when `handle` may name a new tensor: non-zero, not in the table, not
  // being uploaded.
  absl::Status CheckNewHandle(uint64_t handle) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An upload of `handle` in progress that another request interrupts is
  // truncated: the handle becomes a failed tensor and the error is queued.
  // Returns the truncation error, or nullptr when no upload was in progress.
  std::shared_ptr<OpError> AbandonUpload(uint64_t handle, absl::string_view interrupted_by)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Inserts a failed tensor under `handle` when the handle is free and not
  // being uploaded (HandleTable::InsertFailed); a handle not kept (over the
  // limit) queues the error that says so.
  void InsertFailed(uint64_t handle, const TensorMeta* meta, std::shared_ptr<OpError> error)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The "unknown handle" error, saying whether an upload was in progress.
  absl::Status UnknownHandle(absl::string_view what, uint64_t handle) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool WriteRequestError(uint64_t request_id, const OpError& error, const Writer& write);

  const uint64_t id_;
  const std::string token_;
  const std::string client_name_;
  const std::shared_ptr<MemoryAccount> memory_;
  const Backends* const devices_;

  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  // Close's work, with mu_ held by the caller; lets go of it.
  SessionStats CloseLocked() ABSL_UNLOCK_FUNCTION(mu_);
  // Set by Close before it waits for mu_: the thread executing a message
  // (which holds mu_ for the whole message, or a whole backward) stops at
  // the next request or node instead of running the rest of its queue.
  std::atomic<bool> closing_{false};
  // Set while a message's requests run (mu_ held): TryClose does not wait
  // for them, and waits for anything else that holds mu_ (briefly).
  std::atomic<bool> executing_{false};
  // Shared-memory segments: mapped by the side channel's thread, read by
  // the executing thread (which holds a reference while it copies).
  mutable absl::Mutex shm_mu_ ABSL_ACQUIRED_AFTER(mu_);
  bool shm_claimed_ ABSL_GUARDED_BY(shm_mu_) = false;
  bool shm_closed_ ABSL_GUARDED_BY(shm_mu_) = false;
  uint64_t shm_bytes_ ABSL_GUARDED_BY(shm_mu_) = 0;
  absl::flat_hash_map<uint32_t, std::shared_ptr<ShmMapping>> shm_ ABSL_GUARDED_BY(shm_mu_);
  const std::shared_ptr<ShmFreedList> shm_freed_ = std::make_shared<ShmFreedList>();
  // Ops the client defined at run time (DefineOps): before the handles and
  // the dispatcher, which refer to its entries, so that it outlives them.
  ExtensionOps extensions_;
  MemoryCharge extensions_charge_ ABSL_GUARDED_BY(mu_);
  // The kernel artifacts the session's ops come from, loaded while the
  // session lives: before the dispatcher, which calls their kernels, so
  // that they are unloaded only after it is gone. `artifact_ops_`: per op
  // of extensions_, its artifact and index in the artifact's manifest
  // (nullptr for an op without kernels).
  runtime::ArtifactStore* const artifact_store_;
  absl::flat_hash_map<std::string, std::shared_ptr<runtime::LoadedArtifact>> artifacts_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<const runtime::LoadedArtifact*, size_t>> artifact_ops_ ABSL_GUARDED_BY(mu_);
  // Under --artifact-isolation process: the session's worker process for
  // its artifacts' CPU kernels (made at the first such call, ended when
  // the session closes), and per op of extensions_ the kernel that sends
  // its calls there (made at its first call).
  std::unique_ptr<runtime::ArtifactWorker> artifact_worker_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<runtime::ArtifactKernel>> isolated_kernels_ ABSL_GUARDED_BY(mu_);
  // Why the last DefineOps failed ("" when none did): the error of a later
  // call to an op it did not define says so.
  std::string define_failure_ ABSL_GUARDED_BY(mu_);
  // Ops (by id) whose artifact could not be bound (BindArtifactOp's error):
  // a call to one fails with it.
  absl::flat_hash_map<uint32_t, std::string> artifact_errors_ ABSL_GUARDED_BY(mu_);
  // What an extension op costs beyond 8 bytes per byte of its texts (its
  // schema is kept as text and parsed: names, defaults, the entry's maps).
  static constexpr int64_t kExtensionOpBytes = 1024;
  // The session's tensors by handle (their entries charged to memory_).
  runtime::HandleTable handles_ ABSL_GUARDED_BY(mu_);
  absl::node_hash_map<uint64_t, PendingUpload> uploads_ ABSL_GUARDED_BY(mu_);
  // Handles whose upload failed at its first chunk (the error reported):
  // their later chunks are dropped without another error, until the last
  // one or the handle's release.
  absl::flat_hash_set<uint64_t> dropped_uploads_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<OpError>> unreported_ ABSL_GUARDED_BY(mu_);
  // The first failed tensor's error that the running backward carries (AsCause).
  std::shared_ptr<OpError> backward_cause_ ABSL_GUARDED_BY(mu_);
  uint64_t dropped_errors_ ABSL_GUARDED_BY(mu_) = 0;
  // Runs the session's ops (its meta cache, random generator and graph
  // nodes' numbering with it); called under mu_ only, but for
  // ops_executed(), which any thread may read.
  runtime::Dispatcher dispatcher_;
  // ExecuteCall's decoded arguments and input tensors, kept between calls so
  // that an op allocates no vectors for them (ExecuteCall never nests).
  std::vector<Value> call_args_ ABSL_GUARDED_BY(mu_);
  std::vector<Tensor*> call_inputs_ ABSL_GUARDED_BY(mu_);
  std::vector<Tensor> call_outs_ ABSL_GUARDED_BY(mu_);  // empty between calls
  // ExecuteFetch's reply, reused (cleared for each message); a data string
  // over kMaxKeptReplyBytes is dropped after its write.
  v1::ServerMessage fetch_reply_ ABSL_GUARDED_BY(mu_);
  static constexpr size_t kMaxKeptReplyBytes = 64 << 10;
  // The call sites the client interned (OpCall.call_site_id k is [k - 1]).
  std::vector<std::string> call_sites_ ABSL_GUARDED_BY(mu_);
  MemoryCharge call_sites_charge_ ABSL_GUARDED_BY(mu_);  // their bytes, charged to the session

  // The stream's writer and reader while a message executes; the message
  // being executed (requests run in place, never copied) and its next
  // request; requests of messages read during a backward, not yet executed
  // (they run after the current message's).
  const Writer* write_ ABSL_GUARDED_BY(mu_) = nullptr;
  const Reader* read_ ABSL_GUARDED_BY(mu_) = nullptr;
  const DataWriter* write_data_ ABSL_GUARDED_BY(mu_) = nullptr;  // null: chunks go through write_
  // PlaceUploadData put this many bytes of the next message's upload chunk
  // (of `placed_handle_`) into its storage already.
  uint64_t placed_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t placed_handle_ ABSL_GUARDED_BY(mu_) = 0;
  const v1::ClientMessage* current_ ABSL_GUARDED_BY(mu_) = nullptr;
  int current_next_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<v1::Request> queue_ ABSL_GUARDED_BY(mu_);
  // Autograd: the callbacks waiting for a result (innermost last), and
  // identities whose .grad may hold a graph (their grads are dropped at
  // Close to break cycles).
  uint64_t next_callback_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<uint64_t> pending_callbacks_ ABSL_GUARDED_BY(mu_);
  // Results that arrived for pending callbacks, by callback id. Any pending
  // callback may be answered first: two client threads running backward in
  // one session nest their callbacks here in whatever order they answer.
  // The tensors a result's grads name are taken when it arrives: the client
  // releases those handles right after answering, which runs before an outer
  // backward whose result came early takes it.
  struct ArrivedResult {
    v1::CallbackResult result;
    std::vector<std::optional<Tensor>> grads;  // by index in result.grads(); nullopt: 0 or unknown
  };
  absl::flat_hash_map<uint64_t, ArrivedResult> callback_results_ ABSL_GUARDED_BY(mu_);
  std::vector<std::weak_ptr<AutogradMeta>> grad_holders_ ABSL_GUARDED_BY(mu_);
  size_t grad_holders_pruned_ ABSL_GUARDED_BY(mu_) = 0;  // its size after the last HoldGradLocked pruning
  const std::shared_ptr<ReleasedFunctions> released_functions_ = std::make_shared<ReleasedFunctions>();
};

}  // namespace tensord::server

#endif  // TENSORD_SERVER_SESSION_H_
