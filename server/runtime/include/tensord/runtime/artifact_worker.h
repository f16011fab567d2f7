// tensord/runtime/artifact_worker.h — CPU kernels of artifacts in a worker
// process (`tensord serve --artifact-isolation process`): a segfault, an
// abort or an endless loop in uploaded code ends the worker, and the call
// fails naming its op, while the session and the daemon go on.
//
//   ArtifactWorker w(&store, account);        // one per session; starts nothing
//   ArtifactKernel k = ...;  k.worker = &w;   // the session's own kernel (artifacts.h)
//   RunArtifactKernel(k, ctx);                // starts the worker at the first call
//
// The worker is the tensord binary itself, started (posix_spawn) as
// `tensord artifact-worker FD` with FD one end of a socketpair; it runs
// ArtifactWorkerMain. The daemon sends it each artifact's object as a sealed
// memfd (it loads it with ArtifactStore::OpenObject, as the store would),
// and each call as a small message; the call's tensors travel in a shared
// memfd mapped in both processes (the arena): inputs are copied in, outputs
// copied back. The daemon trusts nothing the worker sends: the reply's
// sizes are checked, and the bytes copied back are the ones the daemon laid
// out itself.
#ifndef TENSORD_RUNTIME_ARTIFACT_WORKER_H_
#define TENSORD_RUNTIME_ARTIFACT_WORKER_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tensord/kernels/registry.h"
#include "tensord/runtime/memory.h"

namespace tensord::runtime {

class ArtifactStore;
class LoadedArtifact;
struct ArtifactKernel;

// One session's worker process. Not thread-safe: one call at a time (the
// session's dispatcher calls it under the session's lock).
class ArtifactWorker {
 public:
  // `store` (the artifacts' objects and the policy: the worker binary and
  // the per-call time limit) must outlive the worker. The shared memory of
  // the calls is charged to `memory` (the session's account).
  ArtifactWorker(const ArtifactStore* store, std::shared_ptr<MemoryAccount> memory);
  // Ends the worker process (SIGKILL) and reaps it.
  ~ArtifactWorker();
  ArtifactWorker(const ArtifactWorker&) = delete;
  ArtifactWorker& operator=(const ArtifactWorker&) = delete;

  // While `cancelled()` is true a call in progress stops waiting: the
  // worker is killed and the call fails (a closing session's).
  void set_cancelled(std::function<bool()> cancelled) { cancelled_ = std::move(cancelled); }

  // Runs kernel `k` (k.artifact's op k.op_index on the CPU) in the worker,
  // started first when none runs, on the call `ctx` describes (as
  // RunArtifactKernel does in the daemon's process). Errors, each naming
  // k.op_name: the kernel's own (as in-process); RuntimeError when the
  // worker died during the call (the signal or exit status said), ran past
  // the time limit (then it is killed), or could not be started or load
  // the object; OutOfMemory (MemoryError) when the call's shared memory
  // would pass the session's limit. After a failure of the worker the next
  // call starts a new one.
  absl::Status Run(const ArtifactKernel& k, KernelContext& ctx);

  // The worker's process id, 0 when none runs; how many were started.
  pid_t pid() const { return pid_; }
  int starts() const { return starts_; }

 private:
  absl::Status Start(absl::string_view op);
  // Kills (SIGKILL) and reaps the worker; "" or what its end was, for
  // messages ("signal 11 (Segmentation fault)", "exit status 3").
  std::string Stop();
  // Makes the arena at least `bytes` long (a new memfd when it grows),
  // charged to the session; OutOfMemory over its limit.
  absl::Status Reserve(uint64_t bytes, absl::string_view op);
  // Unmaps and uncharges the arena (the next call makes a new one).
  void ReleaseArena();
  // Sends request header `header` (a WireRequest; with the arena's
  // descriptor when the worker has not got it yet, and `object_fd` when
  // >= 0), then waits for the reply, at most the time limit. The reply's
  // message goes to `*message`, its ErrorKind to `*kind`; returns whether
  // the worker said OK, or the error of a worker that died, hung or broke
  // the protocol while `doing` ("the kernel") ran (then it is stopped).
  absl::StatusOr<bool> Exchange(const void* header, int object_fd, absl::string_view op, absl::string_view doing,
                                int* kind, std::string* message);
  absl::Status Load(const LoadedArtifact& lib, absl::string_view op, uint32_t* id);

  const ArtifactStore* const store_;
  const std::shared_ptr<MemoryAccount> memory_;
  std::function<bool()> cancelled_;
  pid_t pid_ = 0;
  int sock_ = -1;
  int pidfd_ = -1;  // readable once the worker has ended (-1: none)
  int starts_ = 0;
  // The arena: a memfd mapped here and in the worker.
  int arena_fd_ = -1;
  char* arena_ = nullptr;
  uint64_t arena_bytes_ = 0;
  bool arena_sent_ = false;  // the current worker has the arena's descriptor
  MemoryCharge arena_charge_;
  // Artifacts the current worker loaded: content hash -> the id it knows them by.
  absl::flat_hash_map<std::string, uint32_t> loaded_;
};

// The worker's side: `tensord artifact-worker FD` runs this with FD its end
// of the socketpair, and exits with what it returns: 0 when the daemon
// closed the socket (the session ended), 1 on a protocol error.
int ArtifactWorkerMain(int fd);

}  // namespace tensord::runtime

#endif  // TENSORD_RUNTIME_ARTIFACT_WORKER_H_
