// tensord/server/session.h — one client session in the daemon: its handle
// table, its memory account, its random generator, and the dispatcher that
// executes the requests of its stream in order (op calls, uploads, releases,
// fetches, syncs, describes).
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

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "tensord/kernels/registry.h"
#include "tensord/meta/tensor_meta.h"
#include "tensord/server/allocator.h"
#include "tensord/v1/tensord.pb.h"

namespace tensord::server {

// Fetch data travels in chunks of at most this many bytes.
inline constexpr int64_t kMaxChunkBytes = 1 << 20;
// At most this many errors wait for the next Sync; later ones are counted.
inline constexpr size_t kMaxUnreportedErrors = 1024;

// The error of a failed op (or upload or request), with what issued it.
// Shared by every tensor the failure reaches.
struct OpError {
  absl::Status status;
  std::string op;          // "add.Tensor", "upload", "release", ...
  uint64_t call_id = 0;
  std::string call_site;
  bool reported = false;   // sent to the client already (guarded by the session's mutex)

  void ToProto(v1::Error* out) const;
};

// A tensor in the daemon: metadata, the storage it views, or the error that
// prevented it from being computed.
struct Tensor {
  TensorMeta meta;
  std::shared_ptr<Storage> storage;   // null when failed
  std::shared_ptr<OpError> error;     // non-null when failed

  bool failed() const { return error != nullptr; }
};

struct SessionStats {
  int64_t bytes_in_use = 0;
  int64_t peak_bytes = 0;
  uint64_t ops_executed = 0;
  size_t live_handles = 0;
  size_t pending_uploads = 0;
};

class Session {
 public:
  // Receives the daemon's answers (FetchData chunks, Acks, RequestErrors);
  // returns false when the stream is gone.
  using Writer = std::function<bool(const v1::ServerMessage&)>;

  // `kernels` must outlive the session.
  Session(uint64_t id, std::string token, std::string client_name, std::shared_ptr<MemoryAccount> memory,
          const KernelRegistry* kernels);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  uint64_t id() const { return id_; }
  const std::string& token() const { return token_; }
  const std::string& client_name() const { return client_name_; }

  // Executes one request. Returns false when `write` failed (the stream is
  // gone) or the session is closed; errors of the request itself are
  // reported to the client, never returned.
  bool Execute(const v1::Request& request, const Writer& write);

  // Frees every tensor and discards unfinished uploads. Idempotent; later
  // Execute calls return false. Returns the final statistics.
  SessionStats Close();
  bool closed() const;

  SessionStats stats() const;
  // Memory account (bytes in use return to 0 once the session is closed).
  const MemoryAccount& memory() const { return *memory_; }

 private:
  struct PendingUpload {
    TensorMeta meta;
    std::shared_ptr<Storage> storage;
    uint64_t total_bytes = 0;
    uint64_t received = 0;
    uint64_t call_id = 0;
  };

  bool ExecuteLocked(const v1::Request& request, const Writer& write) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExecuteCall(const v1::OpCall& call) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExecuteUpload(const v1::Upload& upload) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExecuteRelease(const v1::Release& release) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ExecuteFetch(const v1::Fetch& fetch, const Writer& write) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ExecuteSync(const v1::Sync& sync, const Writer& write) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ExecuteDescribe(const v1::Describe& describe, const Writer& write) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Creates an error and queues it for the next Sync.
  std::shared_ptr<OpError> RecordError(absl::Status status, std::string op, uint64_t call_id,
                                       std::string call_site) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK when `handle` may name a new tensor: non-zero, not in the table, not
  // being uploaded.
  absl::Status CheckNewHandle(uint64_t handle) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An upload of `handle` in progress that another request interrupts is
  // truncated: the handle becomes a failed tensor and the error is queued.
  // Returns the truncation error, or nullptr when no upload was in progress.
  std::shared_ptr<OpError> AbandonUpload(uint64_t handle, absl::string_view interrupted_by)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Inserts a failed tensor under `handle` when the handle is free.
  void InsertFailed(uint64_t handle, const TensorMeta* meta, std::shared_ptr<OpError> error)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The "unknown handle" error, saying whether an upload was in progress.
  absl::Status UnknownHandle(absl::string_view what, uint64_t handle) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool WriteRequestError(uint64_t request_id, const OpError& error, const Writer& write);

  const uint64_t id_;
  const std::string token_;
  const std::string client_name_;
  const std::shared_ptr<MemoryAccount> memory_;
  const KernelRegistry* const kernels_;

  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  // node_hash_map: metas stay put while an op holds pointers to its inputs.
  absl::node_hash_map<uint64_t, Tensor> tensors_ ABSL_GUARDED_BY(mu_);
  absl::node_hash_map<uint64_t, PendingUpload> uploads_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<OpError>> unreported_ ABSL_GUARDED_BY(mu_);
  uint64_t dropped_errors_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t ops_executed_ ABSL_GUARDED_BY(mu_) = 0;
  Generator generator_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tensord::server

#endif  // TENSORD_SERVER_SESSION_H_
