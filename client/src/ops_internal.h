// Internal: what the pieces of an op call share. ops.cc runs a call (Call,
// Produce) from the others: binding against the op table (op_binding.cc),
// autograd's plan and records (op_autograd.cc), the per-thread meta cache
// (meta_cache.cc); indexing.cc and ops_helpers.cc build calls with Args.
#ifndef TENSORD_CLIENT_SRC_OPS_INTERNAL_H_
#define TENSORD_CLIENT_SRC_OPS_INTERNAL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "tensord/client/ops.h"
#include "tensord/client/session.h"
#include "tensord/client/tensor.h"
#include "tensord/meta/op_table.h"

namespace tensord::client::internal {

// The argument list of an internal call, each Arg built in place: a braced
// list would construct every Arg and then copy it (and with it every
// Tensor's reference) into the vector.
template <typename... A>
std::vector<Arg> Args(A&&... a) {
  std::vector<Arg> v;
  v.reserve(sizeof...(A));
  (v.emplace_back(std::forward<A>(a)), ...);
  return v;
}

// ---- binding (op_binding.cc)

// The Values of a call plus the Tensors they point into (kept alive for the
// duration of the call; Value tensor pointers are &impl->meta).
struct Converted {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> kwargs;
  std::vector<Tensor> tensors;
  // The call's arguments as given (alive for the whole call): their kinds
  // ("Tensor", "int", ...) are named only in error messages.
  const std::vector<Arg>* args = nullptr;
  const Kwargs* given_kwargs = nullptr;
};

struct Bound {
  const OpEntry* op = nullptr;
  std::vector<Value> values;
};

// The call's arguments as Values (`args` and `kwargs` must outlive the
// result). TypeError for an undefined Tensor or a None in a list of Tensors;
// internal error for a tensor passed as a raw Value.
absl::StatusOr<Converted> Convert(absl::string_view name, std::vector<Arg>& args, Kwargs& kwargs);

// The overload of `name` the converted call binds to, and its bound values
// (consumes c.positional and c.kwargs). TypeError for an unknown op, an op
// not callable in `mode`, or arguments no overload takes (naming every
// overload and why it did not bind).
absl::StatusOr<Bound> Resolve(absl::string_view name, Converted& c, CallMode mode);

// ---- autograd (op_autograd.cc)

// What autograd does with one call: whether it is recorded (grad mode on, the
// op differentiable, some differentiable input requires grad — the daemon
// applies the same rule), the new node's edges, and for in-place ops the
// Tensor each aliased-write return gives back.
struct AutogradPlan {
  bool record = false;
  std::vector<std::pair<std::shared_ptr<GradNode>, int>> edges;
  std::vector<std::optional<Tensor>> write_results;  // per output; empty when none
  // Meta calls: what the node's backward will read (GradNode::saved_reads),
  // and per edge whether its formula gives that input a gradient.
  std::vector<SavedMeta> saved_reads;
  bool reads_saved = false;
  std::vector<bool> edge_gives;
  // What the node's backward raises before reading anything (GradNode::backward_error).
  std::string backward_error;
};

// The input tensors of a bound call that autograd and aliasing look at, as
// pointers to the call's Tensors: computed from the bound values (Roles), or
// from a cached call's positions in the flat list of the call's tensors.
struct CallRoles {
  // Differentiable tensor inputs in schema order (tensor lists flattened);
  // nullptr for a None item of a Tensor?[] list.
  absl::InlinedVector<const Tensor*, 4> diff_inputs;
  // Per schema return (op.return_aliases): the written argument an in-place
  // return gives back, else nullptr.
  absl::InlinedVector<const Tensor*, 2> written;
  // Per output: the argument tensor the output views (MetaResult::alias_of),
  // else nullptr.
  absl::InlinedVector<const Tensor*, 2> alias_base;
  // Every tensor argument in schema order, as the daemon's node numbers its
  // input slots: (argument index, tensor), tensor lists flattened, nullptr for
  // a None item of a list (a None Tensor? argument has no entry).
  absl::InlinedVector<std::pair<int, const Tensor*>, 4> slots;
};

// The roles of a bound call's tensors (pointers into `tensors`, which must
// outlive the result); `alias_of` is MetaResult::alias_of. Internal error
// when an in-place op's written argument is not a tensor.
absl::StatusOr<CallRoles> Roles(const OpEntry& op, const std::vector<Value>& values, const std::vector<Tensor>& tensors,
                                const std::vector<int>& alias_of);

// The call's AutogradPlan before it runs. RuntimeError for an in-place op on
// a leaf that requires grad; NotImplementedError for an in-place op on a
// view while recording.
absl::StatusOr<AutogradPlan> PlanAutograd(const OpEntry& op, const CallRoles& roles);

// An output that aliases an argument (a view) views that argument's storage:
// it takes the argument tensor's storage_id (and on meta its version counter).
void ShareStorageIds(const CallRoles& roles, std::vector<Tensor>& outs);

// A recorded call's saved reads into `p` (what its node's backward will
// read, as the daemon's node saves it), after the outputs `outs` exist.
void PlanMetaSavedReads(const OpEntry& op, const CallRoles& roles, const std::vector<Tensor>& outs,
                        AutogradPlan& p);

// Sets the outputs' requires_grad / grad_fn / is_view after the call; an
// in-place op's self is rebased onto the new node when the call is recorded.
// Moves the node's parts out of `p`.
void ApplyAutograd(const OpEntry& op, AutogradPlan& p, const std::vector<int>& alias_of, std::vector<Tensor>& outs);

// ---- running a call (ops.cc)

// The session the call's non-meta tensors belong to, else the current one.
// RuntimeError when they belong to different sessions or theirs is closed.
absl::StatusOr<std::shared_ptr<Session>> SessionFor(const OpEntry& op, absl::Span<const Tensor> tensors);

// Meta tensors for `metas` (moved from); an output with a write result (an
// in-place op's self) is that tensor.
std::vector<Tensor> MakeMetaTensors(absl::Span<TensorMeta> metas,
                                    const std::vector<std::optional<Tensor>>& write_results = {});

// The end of every call whose outputs' metadata is known, a miss or a meta
// cache hit: autograd's plan, the output tensors (made here on meta, else
// streamed to the daemon with the bound `values`), views' storage ids, then
// autograd's records. `outputs` is moved from. Errors: PlanAutograd's,
// SessionFor's, and the session's when streaming.
absl::StatusOr<std::vector<Tensor>> Produce(const OpEntry& op, const CallRoles& roles,
                                            const std::vector<int>& alias_of, absl::Span<TensorMeta> outputs,
                                            bool on_meta, absl::Span<const Value> values,
                                            absl::Span<const Tensor> tensors, CallSite& site);

// ---- the meta cache (meta_cache.cc)

// A cacheable call's key, kept on a miss to store the call's result under.
struct MetaCacheKey {
  std::vector<uint64_t> words;
  size_t ntensors = 0;  // the tensors the key counts (Converted::tensors has as many)
};

// Answers a repeated call from this thread's meta cache: its outputs (or
// Produce's error) on a hit. nullopt when the cache is off, the call cannot
// be cached, or on a miss, which sets *key for RememberMetaCall. The key
// also holds what the call's result depends on beyond its arguments:
// `force_meta` (ForceMetaDevice) and `default_device` (the innermost
// DeviceGuard's device, nullptr outside any), which Call reads where they
// are kept.
std::optional<absl::StatusOr<std::vector<Tensor>>> CallFromMetaCache(absl::string_view name,
                                                                     const std::vector<Arg>& args,
                                                                     const Kwargs& kwargs, CallMode mode,
                                                                     bool force_meta, const Device* default_device,
                                                                     CallSite& site, std::optional<MetaCacheKey>* key);

// Stores a successful call under `key`. `tensors` is the call's flat tensor
// list (Converted::tensors), which the roles point into. `values` (the bound
// arguments) is given for a call that goes to a daemon.
void RememberMetaCall(MetaCacheKey key, const OpEntry& op, const MetaResult& r, const CallRoles& roles,
                      const std::vector<Tensor>& tensors, const std::vector<Value>* values = nullptr);

}  // namespace tensord::client::internal

#endif  // TENSORD_CLIENT_SRC_OPS_INTERNAL_H_
