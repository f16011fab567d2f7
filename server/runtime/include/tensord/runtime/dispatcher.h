// tensord/runtime/dispatcher.h — runs one op on daemon tensors: validate the
// arguments, run (or recall) the meta function, allocate the outputs or alias
// an input's storage, call the kernel of the device the outputs live on, and
// record the call for autograd. One Dispatcher per session: it holds what a
// session's ops share (its memory account, its streams, its meta cache, a
// random generator per device, its node counter); the session keeps the
// handle table and the requests.
//
//   runtime::Dispatcher d(&backends, account);
//   absl::StatusOr<std::vector<Tensor>> out = d.RunOp("add.Tensor", {a, b}, /*record=*/true);
//
// Not thread-safe: one caller at a time (a session calls it under its lock).
#ifndef TENSORD_RUNTIME_DISPATCHER_H_
#define TENSORD_RUNTIME_DISPATCHER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tensord/kernels/registry.h"
#include "tensord/meta/op_table.h"
#include "tensord/runtime/autograd.h"
#include "tensord/runtime/backend.h"
#include "tensord/runtime/memory.h"
#include "tensord/runtime/meta_cache.h"

namespace tensord::runtime {

struct ArtifactKernel;  // tensord/runtime/artifacts.h

// The kernel of a session's op loaded from an artifact (op ids from
// kFirstExtensionOpId) on a device kind (kCPU or kCUDA), or nullptr.
using ArtifactKernelLookup = std::function<const ArtifactKernel*(uint32_t op_id, DeviceType device)>;

class Dispatcher {
 public:
  // `devices` (the backends ops run on) must outlive the dispatcher; every
  // allocation is charged to `memory`. Each device's random generator is
  // seeded from the OS's random source, so that no one but the session can
  // predict it.
  Dispatcher(const Backends* devices, std::shared_ptr<MemoryAccount> memory);
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // Runs `op`. `args` are bound in schema order; their tensor values point
  // at the metas of `inputs`' elements, which stay put during the call.
  // In-place ops (first argument `Tensor(a!)`) write self's storage and
  // return self (the same identity), bumping its version counter. With
  // `record`, the call is recorded for autograd when a differentiable input
  // requires grad (an in-place op on a leaf that requires grad, or on a view
  // of one, is refused first, in PyTorch's words). Returns one tensor per
  // schema return (per view for a list return). Errors: the argument
  // checks', the meta function's, the allocation's (OutOfMemory over the
  // account's limit), the kernel's, "device ... is not available" for a
  // device no backend serves; an input that failed earlier gives its error.
  // On failure, `metas_on_failure` (when given) receives the output metas
  // computed before the failure.
  absl::StatusOr<std::vector<Tensor>> Dispatch(const OpEntry& op, const std::vector<Value>& args,
                                              const std::vector<Tensor*>& inputs, bool record,
                                              std::vector<TensorMeta>* metas_on_failure);
  // Dispatch into `outs` (cleared first; on failure it holds what was made
  // before the failure), with the op's name (FullName) made by the caller:
  // a caller that keeps `outs` between calls allocates no vector per op.
  absl::Status DispatchInto(const OpEntry& op, const std::string& op_name, const std::vector<Value>& args,
                            const std::vector<Tensor*>& inputs, bool record,
                            std::vector<TensorMeta>* metas_on_failure, std::vector<Tensor>& outs);
  // Dispatch with daemon-made arguments, by the op's full name ("add.Tensor");
  // trailing arguments take the schema's defaults. The autograd engine's and
  // the formulas' entry point. An input that failed earlier gives
  // failed_input(its error) (see set_failed_input); an op missing from the
  // table, or arguments that do not fit its schema, are InternalErr.
  absl::StatusOr<std::vector<Tensor>> RunOp(absl::string_view full_name, std::vector<Arg> args, bool record);

  // What RunOp (and the autograd engine) returns for an input that failed
  // earlier with `e`: by default e's status. A session sets a function that
  // also remembers the error as the cause of what fails now.
  void set_failed_input(std::function<absl::Status(const std::shared_ptr<OpError>&)> f) {
    failed_input_ = std::move(f);
  }
  absl::Status FailedInput(const std::shared_ptr<OpError>& e) {
    return failed_input_ != nullptr ? failed_input_(e) : e->status;
  }

  // The gradient edge of `t`: its grad_fn, or its leaf's AccumulateGrad
  // node (made on first use, shared after); none when it needs no grad.
  Edge GradientEdge(const Tensor& t);
  // The sequence number of the next node of the graph (the engine runs the
  // newest first).
  uint64_t NextNodeSeq() { return ++next_seq_; }

  const Backends& devices() const { return *devices_; }
  MemoryAccount& memory() const { return *memory_; }
  // `nbytes` on `on` for this session (MemoryAccount::Allocate), once the
  // session's stream there exists: the device's allocator then zeroes the
  // block on that stream and keeps what the session frees for its reuse.
  // Errors: the stream's, then MemoryAccount::Allocate's.
  absl::StatusOr<std::shared_ptr<Storage>> Allocate(const Backend& on, int64_t nbytes, absl::string_view op,
                                                    bool zero_fill = true);
  // The session's streams (kernels run on them; the data plane copies on them).
  SessionStreams& streams() { return streams_; }
  // The session's generator for `device` (made on first use), as PyTorch
  // keeps one per device: drawing on one device does not move another's.
  Generator& generator(const Device& device);
  // tensord.manual_seed: seeds every device's generator with `seed`, and
  // those made later too.
  void ManualSeed(uint64_t seed);
  // The session's numerics switches (tensord.backends flags), handed to
  // every kernel from the next call on.
  void SetMathMode(const MathMode& mode) { math_mode_ = mode; }
  const MathMode& math_mode() const { return math_mode_; }
  // Where the session's ops from kernel artifacts find their kernels; the
  // session keeps those artifacts loaded while the dispatcher may call them.
  void SetArtifactKernels(ArtifactKernelLookup lookup) { artifact_kernels_ = std::move(lookup); }
  // The session's ops defined at run time, which RunOp finds by name (a
  // declared derivative calls them); `ops` outlives the dispatcher.
  void SetExtensionOps(const ExtensionOps* ops) { extension_ops_ = ops; }
  const ExtensionOps* extension_ops() const { return extension_ops_; }
  // Ops run so far; may be read from any thread while an op runs.
  uint64_t ops_executed() const { return ops_executed_.load(std::memory_order_relaxed); }

 private:
  // Records a node for a finished call (Dispatch's autograd half).
  absl::Status RecordNode(const OpEntry& op, const std::vector<Value>& args, const std::vector<Tensor*>& inputs,
                          std::vector<Tensor>& outs, const Tensor* self_before);

  const Backends* const devices_;
  const std::shared_ptr<MemoryAccount> memory_;
  SessionStreams streams_;
  MetaCache meta_cache_;  // results of the meta functions, by call metadata
  std::vector<std::pair<Device, std::unique_ptr<Generator>>> generators_;  // a few devices: a list
  std::optional<uint64_t> manual_seed_;
  MathMode math_mode_;
  std::atomic<uint64_t> ops_executed_{0};  // written by the one caller, read by anyone
  uint64_t next_seq_ = 0;
  std::function<absl::Status(const std::shared_ptr<OpError>&)> failed_input_;
  ArtifactKernelLookup artifact_kernels_;
  const ExtensionOps* extension_ops_ = nullptr;
};

// NotImplementedError for an op that names device `d` which no backend of
// `served` serves, listing what is served (meta: only in the client).
absl::Status DeviceUnavailable(absl::string_view op, const Device& d, const Backends& served);

// The op's "name.overload" (what errors and the allocator's labels name),
// built once per op of the process-wide table rather than on every call; an
// entry of another table (tests build their own) is named in `scratch`.
const std::string& FullName(const OpEntry& op, std::string& scratch);

// Whether return `i` of `op` is one of its written arguments (`Tensor(a!)`).
bool WrittenReturn(const OpEntry& op, size_t i);

// What a node keeps of a saved tensor's identity `ag`: a snapshot of its
// history now (requires_grad, grad_fn, output_nr) and a weak reference to
// the identity itself (SavedTensor::live), so that no cycle forms when an
// in-place op later rebases the identity onto a node that reaches this one.
void SaveIdentity(const std::shared_ptr<AutogradMeta>& ag, SavedTensor* s);

// Called before an in-place op (or a custom Function's dirty output) gives
// `ag` a grad_fn: a leaf's AccumulateGrad node lets the identity go.
void LeafMovesIntoTheGraph(AutogradMeta& ag);

}  // namespace tensord::runtime

#endif  // TENSORD_RUNTIME_DISPATCHER_H_
