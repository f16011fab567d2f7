// tensord/runtime/artifacts.h — kernel artifacts in the daemon: the
// operator's policy on what may run, the checks made before any of an
// artifact's code runs, the dlopen, and the kernel calls through the plain-C
// ABI (kernels/abi/tensord_kernel.h).
//
//   ArtifactStore store(policy, devices);
//   absl::StatusOr<std::string> hash = store.Add(file_bytes, "alice");  // policy + every check but the load
//   absl::StatusOr<std::shared_ptr<LoadedArtifact>> lib = store.Load(*hash);  // dlopen (or the loaded one)
//   const ArtifactKernel* k = (*lib)->kernel(op_index, DeviceType::kCPU);    // nullptr: none for that device
//   RunArtifactKernel(*k, ctx);   // a KernelContext the dispatcher filled
//
// Under `--artifact-isolation process` (ArtifactPolicy::isolation) a
// session's calls of CPU kernels go to its ArtifactWorker
// (tensord/runtime/artifact_worker.h), a process of its own that loads the
// object with this file's loader (ArtifactStore::OpenObject); the daemon
// then loads an artifact's object itself only for its CUDA kernels.
//
// Lifetime: the store keeps every accepted artifact's bytes (so a second
// load sends none) and a weak reference to its loaded object; sessions hold
// the shared_ptr. When the last session that uses an artifact lets go, the
// object is dlclose'd: nothing of it can run after, since only sessions'
// dispatchers call its kernels and the ABI gives a kernel no way to leave a
// callback or deleter behind (the daemon owns every buffer).
#ifndef TENSORD_RUNTIME_ARTIFACTS_H_
#define TENSORD_RUNTIME_ARTIFACTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tensord/artifact/artifact.h"
#include "tensord/kernels/registry.h"
#include "tensord/meta/op_registry.h"
#include "tensord_kernel.h"

namespace tensord::runtime {

// Which artifacts a daemon accepts (`tensord serve --artifacts`).
struct ArtifactPolicy {
  enum class Mode {
    kOff,      // none: every upload is refused
    kTrusted,  // those whose content hash is allowed, or signed by a listed key
    kAny,      // any that passes the checks (the embedded daemon: its user runs its own code)
  };
  Mode mode = Mode::kTrusted;
  absl::flat_hash_set<std::string> allowed_hashes;  // lower-case hex SHA-256 content hashes
  // Ed25519 public keys (raw 32 bytes each) with their names for messages.
  std::vector<std::pair<std::string, std::string>> keys;
  uint64_t max_bytes = 256ull << 20;  // per artifact file
  uint64_t max_total_bytes = 1ull << 30;  // every accepted artifact's bytes together

  // Where artifacts' CPU kernels run (`--artifact-isolation`): in the
  // daemon's process (kNone), or in a worker process per session (kProcess:
  // a crash, an abort or a call past `call_timeout` there ends only the
  // worker, and the call fails naming its op). CUDA kernels run in the
  // daemon's process either way: a faulting kernel takes the process's CUDA
  // context with it wherever it runs, and the daemon's rule for a faulting
  // GPU applies.
  enum class Isolation { kNone, kProcess };
  Isolation isolation = Isolation::kNone;
  // Longest one kernel call may run under kProcess (`--artifact-call-timeout`).
  absl::Duration call_timeout = absl::Seconds(60);
  // The tensord binary a worker runs as `tensord artifact-worker FD`
  // (empty: the service sets /proc/self/exe, the daemon's own image).
  std::string worker_binary;

  // "off", "trusted" or "any"; InvalidArgument otherwise.
  static absl::StatusOr<Mode> ParseMode(absl::string_view text);
  static absl::string_view ModeName(Mode m);
  // "none" or "process"; InvalidArgument otherwise.
  static absl::StatusOr<Isolation> ParseIsolation(absl::string_view text);
  static absl::string_view IsolationName(Isolation i);
  // Reads an allow-list file: one hex SHA-256 per line ('#' starts a
  // comment, blank lines skipped). InvalidArgument naming the file and line.
  absl::Status AddAllowList(const std::string& path);
  // Reads an Ed25519 public key in PEM (`openssl pkey -pubout`).
  // InvalidArgument naming the file when it is not one.
  absl::Status AddKey(const std::string& path);
};

class ArtifactWorker;  // tensord/runtime/artifact_worker.h
class LoadedArtifact;

// One op's kernel on one device, resolved in a loaded object; or, under
// process isolation, a session's handle on it in its worker process.
struct ArtifactKernel {
  TdKernelFn fn = nullptr;
  std::string op_name;  // "mylib::f"
  // Set (with fn null) on a session's own kernel under process isolation:
  // RunArtifactKernel sends the call to `worker`, which runs op `op_index`
  // of `artifact` in its process. The session keeps all three alive.
  ArtifactWorker* worker = nullptr;
  const LoadedArtifact* artifact = nullptr;
  size_t op_index = 0;
};

// An artifact's object, loaded. Destroying it dlcloses the object.
class LoadedArtifact {
 public:
  ~LoadedArtifact();
  LoadedArtifact(const LoadedArtifact&) = delete;
  LoadedArtifact& operator=(const LoadedArtifact&) = delete;

  const Manifest& manifest() const { return manifest_; }
  const std::string& content_hash() const { return hash_; }
  // The kernel of the manifest's op `op_index` on `device` (CPU or CUDA);
  // nullptr when the artifact has none there.
  const ArtifactKernel* kernel(size_t op_index, DeviceType device) const;
  // Whether the manifest declares a kernel of op `op_index` on `device`
  // (true also where the daemon has not loaded the object: under process
  // isolation a CPU kernel runs in a worker).
  bool declares_kernel(size_t op_index, DeviceType device) const;
  // The op's full name ("mylib::f"); "" past the manifest's ops.
  std::string op_name(size_t op_index) const;
  // Whether the daemon's process loaded the object (kernel() finds nothing
  // otherwise).
  bool object_loaded() const { return handle_ != nullptr; }
  // The manifest's ops as ExtensionOps defines them (canonical schema text
  // and shape rule), in the manifest's order: what a client sends in
  // DefineOps for them.
  const std::vector<ExtensionOpDef>& definitions() const { return defs_; }

 private:
  friend class ArtifactStore;
  LoadedArtifact() = default;
  Manifest manifest_;
  std::string hash_;
  void* handle_ = nullptr;
  std::vector<ArtifactKernel> cpu_, cuda_;  // per op; fn null where absent
  std::vector<ExtensionOpDef> defs_;
};

// The daemon's artifacts. Thread-safe.
class ArtifactStore {
 public:
  // `cuda_capabilities`: {major, minor} of each CUDA device the daemon
  // serves (empty without one), against which CUDA code is checked.
  ArtifactStore(ArtifactPolicy policy, std::vector<std::pair<int, int>> cuda_capabilities);
  ~ArtifactStore();
  ArtifactStore(const ArtifactStore&) = delete;
  ArtifactStore& operator=(const ArtifactStore&) = delete;

  const ArtifactPolicy& policy() const { return policy_; }

  // Whether an artifact with content hash `hash` was accepted before.
  bool Has(absl::string_view hash) const ABSL_LOCKS_EXCLUDED(mu_);

  // Accepts `file` (an artifact's bytes) from `who` (the peer, named in the
  // log line of an accepted artifact):
  // parses it (ParseArtifact), applies the policy, then makes every check
  // that needs none of its code to run (CheckBeforeLoad). Returns its content
  // hash. Errors name the artifact's library and the rule that refused it:
  // PermissionDenied for the policy ("artifact mylib (sha256 ab12...) is
  // refused: this daemon runs --artifacts trusted and the artifact is neither
  // in its allow-list nor signed by one of its 2 keys"), ResourceExhausted
  // for the size limits, RuntimeError for a broken or unrunnable artifact.
  absl::StatusOr<std::string> Add(absl::string_view file, absl::string_view who) ABSL_LOCKS_EXCLUDED(mu_);

  // The loaded object of accepted artifact `hash`: the one already loaded,
  // or dlopen'ed now (RTLD_NOW | RTLD_LOCAL, from a sealed in-memory file),
  // after which its query function must describe exactly the manifest's
  // library and ops, and every symbol must resolve. NotFound when `hash`
  // was never accepted; RuntimeError for a load or query mismatch.
  // Under process isolation the object is loaded only when the artifact
  // has CUDA kernels and the daemon a GPU (they run in the daemon's
  // process); otherwise the result carries the manifest and definitions
  // only (object_loaded() false), and no code of the artifact runs here.
  absl::StatusOr<std::shared_ptr<LoadedArtifact>> Load(absl::string_view hash) ABSL_LOCKS_EXCLUDED(mu_);

  // A sealed in-memory file holding accepted artifact `hash`'s object, for
  // a worker process to load with OpenObject: the caller owns (and closes)
  // `fd`. NotFound when `hash` was never accepted; InternalErr when the
  // file cannot be made.
  struct ObjectFile {
    int fd = -1;
    Manifest manifest;
  };
  absl::StatusOr<ObjectFile> MakeObjectFile(absl::string_view hash) const ABSL_LOCKS_EXCLUDED(mu_);

  // The load itself, shared by Load and the worker process: dlopen of
  // `path` (a name of the object's sealed in-memory file that the process
  // never used for another object: the loader knows an object by the name
  // it was opened under) with RTLD_NOW | RTLD_LOCAL, then the query
  // function must describe exactly `m`'s library and ops, and every kernel
  // symbol must resolve. RuntimeError naming the artifact otherwise.
  static absl::StatusOr<std::shared_ptr<LoadedArtifact>> OpenObject(const Manifest& m, absl::string_view hash,
                                                                    const std::string& path);

  // The checks before any code of the artifact runs, on an artifact the
  // policy accepted: kernel ABI version range, target triple, the object's
  // ELF read again (the manifest must agree with it), no RPATH/RUNPATH, every
  // needed library found by the daemon's loader by name, every strong
  // undefined symbol (at its version) resolvable there, CUDA code runnable
  // on the daemon's devices when the artifact has CUDA kernels, each op's
  // schema and shape rule valid, symbols exported. Public for tests.
  absl::Status CheckBeforeLoad(const Artifact& a) const;

  // Artifacts accepted, and how many are loaded now.
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t loaded() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    Artifact artifact;
    std::weak_ptr<LoadedArtifact> loaded;
  };
  const ArtifactPolicy policy_;
  const std::vector<std::pair<int, int>> cuda_capabilities_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t total_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Where each load's link to its in-memory file is made (see Load); made
  // at the first load, removed with the store.
  std::string link_dir_ ABSL_GUARDED_BY(mu_);
  uint64_t loads_ ABSL_GUARDED_BY(mu_) = 0;
};

// Runs artifact kernel `k` on the call `ctx` describes (inputs and outputs
// as the dispatcher prepared them): builds DLPack views and the ABI's
// environment, with scratch memory from the calling thread's scratch
// allocator, and calls the kernel. A non-zero status gives RuntimeError
// "<op>: <the kernel's message>" (or "...returned status N without a
// message"); a C++ exception that escapes the kernel is caught here and
// reported the same way. The caller keeps `k`'s artifact loaded throughout.
// A kernel with a worker (process isolation) runs there instead
// (ArtifactWorker::Run, which fails the call naming the op when the worker
// dies or runs past its time limit).
absl::Status RunArtifactKernel(const ArtifactKernel& k, KernelContext& ctx);

}  // namespace tensord::runtime

#endif  // TENSORD_RUNTIME_ARTIFACTS_H_
