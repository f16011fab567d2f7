// tensord/client/tensor.h — a client-side Tensor: a handle to a tensor that
// lives in a tensord daemon (or a meta tensor that lives nowhere), together
// with its metadata, which the client always knows without asking.
//
//   Tensor t = *tensord::client::Zeros({3, 4});      // handle, no round trip
//   t.sizes() == {3, 4};  t.dtype() == ScalarType::kFloat32
//   HostData d = *t.Fetch();                          // a sync point
//
// Copies of a Tensor share one handle; when the last copy goes, the handle is
// queued for release and piggy-backed on the session's next message.
#ifndef TENSORD_CLIENT_TENSOR_H_
#define TENSORD_CLIENT_TENSOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "tensord/meta/tensor_meta.h"
#include "tensord/meta/value.h"

namespace tensord::client {

class Session;

// Where the user issued an op ("knn.py:30"), echoed by the daemon in the
// errors it reports. C++ callers get it from default arguments:
//   Call("add", {a, b});   // CallSite::Current() names the caller's file:line
//
// The text is built only when needed (a call that reaches the daemon, or an
// error that names it): pure meta calls never pay for it. `Text()` gives it.
struct CallSite {
  // A deferred producer of the text, owned by the caller of the op and alive
  // for the duration of that call (e.g. the Python binding, which names the
  // innermost frame outside the package). `Materialize` is called just before
  // the call leaves for the daemon, possibly several times (once per op a
  // composition issues), on the calling thread; the Python binding also
  // releases the GIL there, since what follows may block.
  class Source {
   public:
    virtual std::string Materialize() = 0;

   protected:
    ~Source() = default;
  };

  std::string text;          // set by Of(), or by Resolve()
  const char* file = nullptr;  // Current(): the text is "<basename of file>:<line>"
  int line = 0;
  Source* source = nullptr;  // not owned; cleared by Resolve()

  static CallSite Current(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    CallSite s;
    s.file = file;
    s.line = line;
    return s;
  }
  static CallSite Of(std::string text) {
    CallSite s;
    s.text = std::move(text);
    return s;
  }
  static CallSite Deferred(Source* source) {
    CallSite s;
    s.source = source;
    return s;
  }
  // Builds the text now (from the source or file:line) and drops the source.
  void Resolve();
  // The text ("knn.py:30"); builds it from file:line when Resolve was not
  // called (never calls a Source: those are resolved by the op call itself).
  std::string Text() const;
};

struct TensorImpl;

// Meta mode: a tensor a node saved for backward, as far as the checks of a
// backward need it (tensord/meta/autograd_rules.h): the version counter of its
// storage and the version then (a null counter never changes: a snapshot, or
// None), and what the version error names.
struct SavedMeta {
  std::shared_ptr<const uint64_t> version_counter;
  uint64_t version = 0;
  ScalarType dtype = ScalarType::kFloat32;
  Shape sizes;
  std::string grad_fn_name;  // the node that produced it ("" for a leaf)
  uint32_t output_nr = 0;
  // A saved input itself, while it lives: the version error names the node
  // whose output it is then (after y.add_(1): AddBackward0), as PyTorch does
  // for its saved originals and as the daemon does. Empty for own outputs.
  std::weak_ptr<const TensorImpl> tensor;
};

// A node of the client's mirror of the autograd graph (the graph itself lives
// in the daemon). Built by the client from the same rules as the daemon
// (tensord/meta/autograd_rules.h), so `grad_fn` answers without a round trip.
// Nodes are held by the tensors they produced and by later nodes; a node
// never holds its own outputs.
struct GradNode {
  // PyTorch's class name: "AddBackward0" for a recorded op, "ExpBackward" for
  // a user-defined autograd.Function `Exp`, "AccumulateGrad" for a leaf.
  std::string name;
  // One edge per differentiable tensor input (schema order; tensor lists
  // flattened): the input's grad_fn and output number, the leaf's
  // AccumulateGrad node, or {nullptr, 0} when the input needs no gradient.
  std::vector<std::pair<std::shared_ptr<GradNode>, int>> next_functions;
  // AccumulateGrad: the leaf it accumulates into (weak: the leaf owns the
  // edge to this node, not the other way round).
  std::weak_ptr<TensorImpl> variable;
  // A user-defined Function's node: its client-side id (0 otherwise).
  uint64_t function_id = 0;
  // Creation order, as the daemon's: its engine runs the newest ready node
  // first (AccumulateGrad nodes: the largest value, ahead of all).
  uint64_t seq = 0;
  bool is_accumulate = false;
  // A gradient computed with create_graph: the daemon's engine recorded its
  // graph, which the client does not mirror (its backward waits for the daemon).
  bool opaque = false;

  // ---- meta mode: the client runs backward on meta graphs itself ---------
  // The saved tensors this node's backward reads, in order (the op's
  // saved-reads rule, or a Function's saved tensors), and whether it reads
  // any (then it fails once `released`, as a node whose saved tensors a
  // backward without retain_graph freed).
  std::vector<SavedMeta> saved_reads;
  bool reads_saved = false;
  bool released = false;
  // Per next_functions edge: false when the formula gives that input no
  // gradient (FormulaGivesGradient); empty: every edge gets one.
  std::vector<bool> edge_gives;
  // Non-leaf outputs that retain_grad(): output number and tensor.
  std::vector<std::pair<int, std::weak_ptr<TensorImpl>>> retained;
  // The full name of an op with no derivative formula (one defined at run
  // time), whose backward is then NotImplementedError, as the daemon's.
  std::string no_derivative;
  // The RuntimeError the daemon's backward of this call raises whatever
  // the saved tensors hold (a declared derivative that reads an optional
  // tensor argument given as None); "" for none.
  std::string backward_error;
};

// The shared state behind Tensor copies. `session` is null for meta tensors
// (which have no handle: `handle` is 0). Destroying a non-meta impl queues
// its handle for release on the session (a no-op once the session closed).
//
// Autograd fields mirror the daemon's view of the tensor; they are updated
// by the thread that calls ops or backward on the tensor (as PyTorch, a
// tensor's autograd metadata is not meant to be changed from two threads at
// once).
struct TensorImpl {
  TensorImpl(std::shared_ptr<Session> s, uint64_t h, TensorMeta m)
      : session(std::move(s)),
        handle(h),
        meta(std::move(m)),
        storage_id(NextStorageId()),
        storage_bytes(SaturatingBytes(meta.numel(), meta.itemsize())) {}
  ~TensorImpl();
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;

  std::shared_ptr<Session> session;
  uint64_t handle = 0;
  TensorMeta meta;
  // Which storage this tensor views, as the client predicts it: a fresh id
  // per new tensor, the input's id for an output that aliases it (a view).
  uint64_t storage_id;
  // The bytes of that storage as the client knows them: its own data for a
  // new tensor, the base's for a view (a view of one row of a large tensor
  // may be what keeps it alive). Sizes the release (Session::QueueRelease).
  int64_t storage_bytes;
  static uint64_t NextStorageId();
  // Meta tensors: the version counter of the storage (shared by views, +1 per
  // in-place op), made on first need; autograd checks saved tensors with it.
  std::shared_ptr<uint64_t> version_counter;

  // ---- autograd -----------------------------------------------------------
  bool requires_grad = false;
  std::shared_ptr<GradNode> grad_fn;  // nullptr: a leaf
  int output_nr = 0;                  // which output of grad_fn this is
  bool retains_grad = false;          // retain_grad() on a non-leaf
  bool is_view = false;               // a differentiable view of another tensor
  std::weak_ptr<GradNode> grad_accumulator;  // a leaf's AccumulateGrad node, while referenced
  // .grad: `grad` is the client tensor bound to the daemon's .grad (an
  // alias); when the daemon reports a new .grad (after backward) it is
  // dropped and `grad_pending` says the daemon holds one with `grad_meta`,
  // bound to a new handle on the next access.
  std::shared_ptr<TensorImpl> grad;
  bool grad_pending = false;
  TensorMeta grad_meta;
  bool grad_requires_grad = false;
};

// A tensor's data copied to the host: `bytes` holds the elements in the
// contiguous (row-major) layout described by `meta` (meta.strides are
// contiguous; meta.device says where the data came from).
struct HostData {
  TensorMeta meta;
  // The bytes: in `bytes`, or (a fetch: the buffer the stream's chunks were
  // copied into, or a shared-memory segment) the first `mapped_size` bytes
  // at `mapped`. Use byte_data()/byte_size().
  std::string bytes;
  std::shared_ptr<const char> mapped;
  size_t mapped_size = 0;

  const char* byte_data() const { return mapped ? mapped.get() : bytes.data(); }
  size_t byte_size() const { return mapped ? mapped_size : bytes.size(); }

  int64_t numel() const { return meta.numel(); }
  // Element `flat` (row-major) as a Scalar: bool, int (integral dtypes) or
  // float (floating dtypes, float16/bfloat16/float8 decoded exactly).
  // OutOfRange (IndexError) when flat is outside [0, numel).
  absl::StatusOr<Scalar> At(int64_t flat) const;
  // All elements converted to double (row-major).
  std::vector<double> ToDoubles() const;
  template <typename T>
  const T* data() const { return reinterpret_cast<const T*>(byte_data()); }
};

// Decoders for the dtypes C++ has no native type for (exact conversions).
float HalfToFloat(uint16_t bits);
float BFloat16ToFloat(uint16_t bits);
float Float8E4M3FNToFloat(uint8_t bits);
float Float8E5M2ToFloat(uint8_t bits);

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  // Metadata; the Tensor must be defined().
  const TensorMeta& meta() const { return impl_->meta; }
  const Shape& sizes() const { return impl_->meta.sizes; }
  const Shape& strides() const { return impl_->meta.strides; }
  int64_t storage_offset() const { return impl_->meta.storage_offset; }
  ScalarType dtype() const { return impl_->meta.dtype; }
  Device device() const { return impl_->meta.device; }
  int64_t dim() const { return impl_->meta.dim(); }
  int64_t numel() const { return impl_->meta.numel(); }
  bool is_meta() const { return impl_->meta.device.is_meta(); }
  bool is_contiguous() const { return impl_->meta.is_contiguous(); }
  // Size/stride of one dim; negative dims wrap. IndexError when out of range.
  absl::StatusOr<int64_t> size(int64_t dim) const;
  absl::StatusOr<int64_t> stride(int64_t dim) const;

  // The daemon session holding the tensor (nullptr for meta tensors) and the
  // tensor's handle in it (0 for meta tensors).
  const std::shared_ptr<Session>& session() const { return impl_->session; }
  uint64_t handle() const { return impl_->handle; }
  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }

  // ---- sync points (each waits for the daemon once) ----------------------
  // Copies the data to the host. Errors: NotImplementedError on meta tensors
  // (a meta tensor has no data); the op's original error, naming the op, its
  // call id and call site, when the op that produced the tensor failed.
  absl::StatusOr<HostData> Fetch() const;
  // The value of a one-element tensor. RuntimeError when numel() != 1
  // ("a Tensor with 6 elements cannot be converted to Scalar", as PyTorch),
  // NotImplementedError on meta (its value depends on data).
  absl::StatusOr<Scalar> Item() const;
  // The metadata the daemon holds for this handle (tests compare it with the
  // client's prediction). Fails with the op's error if the tensor failed.
  absl::StatusOr<TensorMeta> DaemonMeta() const;
  // The daemon's id of the storage this tensor views (a sync point): equal
  // ids mean the same storage. NotImplemented for meta tensors.
  absl::StatusOr<uint64_t> DaemonStorageId() const;
  // The client's prediction of the same: tensors from one op's view output
  // and its input share a storage_id (from the meta function's aliasing);
  // every fresh output gets a new one. Works on meta tensors too.
  uint64_t storage_id() const { return impl_->storage_id; }

  // "tensor(handle=3, sizes=[2, 3], dtype=float32, device=cpu)"
  std::string ToString() const;

  // ---- autograd (see tensord/client/autograd.h) --------------------------
  bool requires_grad() const { return impl_->requires_grad; }
  // PyTorch's rule: a tensor that does not require grad, or one that
  // requires grad and was not produced by a recorded op, is a leaf.
  bool is_leaf() const { return !impl_->requires_grad || impl_->grad_fn == nullptr; }
  const std::shared_ptr<GradNode>& grad_fn() const { return impl_->grad_fn; }
  int output_nr() const { return impl_->output_nr; }
  bool retains_grad() const { return impl_->retains_grad; }
  // tensor.requires_grad_(flag). RuntimeError for a non-leaf asked for False
  // ("you can only change requires_grad flags of leaf variables. ...") and
  // for a non-floating dtype asked for True ("only Tensors of floating point
  // and complex dtype can require gradients"). On meta tensors only the
  // local flag changes.
  absl::Status SetRequiresGrad(bool requires_grad, CallSite site = CallSite::Current());
  // tensor.retain_grad(): a non-leaf keeps its .grad after backward (a no-op
  // on leaves). RuntimeError when the tensor does not require grad.
  absl::Status RetainGrad(CallSite site = CallSite::Current());
  // The current .grad (nullopt: None). No round trip: a .grad the daemon
  // reported after backward is bound to a new handle (GetGrad) and cached, so
  // two calls give the same TensorImpl until the next backward replaces it.
  absl::StatusOr<std::optional<Tensor>> Grad() const;
  // tensor.grad = g (nullopt: None). RuntimeError when g has other sizes,
  // another dtype or device, or belongs to another session.
  absl::Status SetGrad(const std::optional<Tensor>& grad);

 private:
  std::shared_ptr<TensorImpl> impl_;
};

}  // namespace tensord::client

#endif  // TENSORD_CLIENT_TENSOR_H_
