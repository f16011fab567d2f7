// tensord/client/ops.h — calling ops from the op table (meta/src/ops.cc).
// Every call binds its arguments against the op's overloads, runs the meta
// function locally (shape and dtype errors are raised here, at the call site),
// and then either returns meta tensors (no daemon involved) or streams the call
// to the session and returns handles at once.
//
//   Tensor a = *Call1("randn", {Shape{8, 4}});
//   Tensor b = *Call1("sum", {a}, {{"dim", 0}}, CallMode::kMethod);
//   Tensor c = *Matmul(a, *T(a));                 // typed helpers for common ops
#ifndef TENSORD_CLIENT_OPS_H_
#define TENSORD_CLIENT_OPS_H_

#include <cstdint>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tensord/client/tensor.h"
#include "tensord/meta/device.h"
#include "tensord/meta/dtype.h"
#include "tensord/meta/op_registry.h"
#include "tensord/meta/value.h"

namespace tensord::client {

// One argument of an op call as a user writes it: a Tensor, a list of
// (optional) Tensors, or any plain Value (int, float, bool, Scalar, int list,
// string, dtype, device, None).
class Arg {
 public:
  Arg() = default;  // None
  Arg(const Tensor& t) : tensors_{t}, kind_(kTensor) {}                       // NOLINT
  Arg(std::vector<Tensor> ts) : kind_(kTensorList) {  // NOLINT
    tensors_.reserve(ts.size());
    for (auto& t : ts) tensors_.emplace_back(std::move(t));
  }
  // A Tensor?[] argument (index.Tensor's indices); nullopt items are None.
  struct OptionalTensors {
    std::vector<std::optional<Tensor>> items;
  };
  Arg(OptionalTensors ts)  // NOLINT
      : tensors_(std::make_move_iterator(ts.items.begin()), std::make_move_iterator(ts.items.end())),
        kind_(kOptionalTensorList) {}
  Arg(Value v) : value_(std::move(v)) {}                                      // NOLINT
  Arg(std::nullopt_t) {}                                                      // NOLINT
  Arg(Scalar s) : value_(s) {}                                                // NOLINT
  Arg(bool b) : value_(b) {}                                                  // NOLINT
  Arg(double d) : value_(d) {}                                                // NOLINT
  Arg(float d) : value_(static_cast<double>(d)) {}                            // NOLINT
  template <typename I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  Arg(I i) : value_(static_cast<int64_t>(i)) {}                               // NOLINT
  Arg(const Shape& l) : value_(l) {}                                          // NOLINT
  Arg(const std::vector<int64_t>& l) : value_(l) {}                           // NOLINT
  Arg(std::initializer_list<int64_t> l) : value_(Shape(l)) {}                 // NOLINT
  Arg(const char* s) : value_(std::string(s)) {}                              // NOLINT
  Arg(std::string s) : value_(std::move(s)) {}                                // NOLINT
  Arg(ScalarType t) : value_(t) {}                                            // NOLINT
  Arg(Device d) : value_(d) {}                                                // NOLINT

  enum Kind { kValue, kTensor, kTensorList, kOptionalTensorList };
  Kind kind() const { return kind_; }
  const Value& value() const { return value_; }
  // The Tensor (kTensor: one item) or the list items; empty for kValue.
  using TensorItems = absl::InlinedVector<std::optional<Tensor>, 1>;  // no heap for a single Tensor
  const TensorItems& tensors() const { return tensors_; }

 private:
  Value value_;
  TensorItems tensors_;
  Kind kind_ = kValue;
};

using Kwargs = std::vector<std::pair<std::string, Arg>>;

// Which overloads a call may pick: Python/C++ functions (kFunction flag),
// Tensor methods (kMethod flag; args[0] is bound to the argument named
// "self", wherever the schema puts it), or any overload (internal calls).
enum class CallMode { kFunction, kMethod, kAny };

// Calls op `name` — a base name ("add": its overloads are tried in table
// order, the first that binds and validates wins, so a Python number picks a
// Scalar overload) or a full name ("add.Scalar"). Returns one Tensor per
// schema return.
//
// Argument binding follows PyTorch's parser: keywords by name, defaults
// filled, int -> int[N], strings -> device/dtype, and a method/function whose
// only positional argument is an int list accepts varargs ints
// (`zeros(3, 4)`, `x.view(2, -1)`).
//
// Factories without device= use the innermost DeviceGuard's device (else
// cpu). When every output is on meta, no session is involved. Otherwise the
// call goes to the session of the tensor inputs (or the current/default
// session for factories, spawning an embedded daemon on first use).
//
// Errors: TypeError when no overload accepts the arguments; the meta
// function's error (RuntimeError, IndexError, NotImplementedError) for shape
// and dtype problems; RuntimeError for tensors of different sessions or a
// closed session. Kernel failures surface later, at a sync point.
absl::StatusOr<std::vector<Tensor>> Call(absl::string_view name, std::vector<Arg> args, Kwargs kwargs = {},
                                         CallMode mode = CallMode::kAny, CallSite site = CallSite::Current());
// Same, for ops with exactly one return.
absl::StatusOr<Tensor> Call1(absl::string_view name, std::vector<Arg> args, Kwargs kwargs = {},
                             CallMode mode = CallMode::kAny, CallSite site = CallSite::Current());

// ---- ops defined at run time ----------------------------------------------
// Defines op `schema` ("mylib::scale(Tensor x, Scalar s) -> Tensor") with
// `shape_rule` ("like:mul.Scalar": that built-in op's meta function; or
// "rule:<text>": a declarative shape rule, tensord/meta/declared_rule.h) for
// this process (tensord.library.define): Call finds it by its full name,
// on meta tensors with no daemon, and each session is sent the process's
// definitions before its first call to one. `derivative`: the op's
// derivative in table ops (tensord/meta/declared_derivative.h), or "" for
// none. Errors: ExtensionOps::Define's (RuntimeError naming the schema and
// what is wrong).
absl::StatusOr<const OpEntry*> DefineOp(absl::string_view schema, absl::string_view shape_rule,
                                        absl::string_view derivative = {});
// The process's ops defined at run time.
const ExtensionOps& DefinedOps();

// ---- kernel artifacts ------------------------------------------------------
// A library loaded from a kernel artifact (tensord.library.load).
struct LoadedLibrary {
  std::string name;          // the library's namespace ("mylib")
  std::string content_hash;  // the artifact's (tensord/artifact/artifact.h)
  std::vector<const OpEntry*> ops;  // the manifest's ops, in its order
};
// Loads the artifact whose file holds `file`: checks the container and the
// payload's hash (ParseArtifact), then defines the manifest's ops in this
// process as DefineOp does, each tied to the artifact's content hash, so
// that Call finds them by name, on meta tensors with no daemon. A session
// makes sure its daemon has the artifact (asking by hash; sending the
// bytes only when it has not) before it sends the first of its ops; the
// daemon checks and loads it then. Loading the same artifact again gives
// the same ops (a copy with more signatures is what sessions send from then
// on). Errors (RuntimeError): ParseArtifact's; a manifest op that
// does not define (ExtensionOps::Define's message); an op name that another
// artifact or library.define took already in this process ("mylib::f is
// already defined by artifact 1a2b3c4d5e6f").
absl::StatusOr<LoadedLibrary> LoadArtifact(absl::string_view file);
// The bytes of a loaded artifact by content hash; nullptr when none.
std::shared_ptr<const std::string> LoadedArtifactBytes(absl::string_view content_hash);
// The tensord binary (its build-kernel command builds artifacts): $TENSORD_BIN,
// the build tree's, or the first on PATH, as for an embedded daemon.
// RuntimeError listing what was tried when there is none.
absl::StatusOr<std::string> TensordBinaryPath();

// ---- the meta cache ------------------------------------------------------
// Call remembers, per thread, the result of each call whose outputs are all
// on meta, keyed by everything that decides it: the op name and mode, each
// argument's kind and value (a tensor's dtype, device, sizes, strides,
// storage_offset, and which other argument is the same tensor), keyword
// names, the innermost DeviceGuard and ForceMetaDevice. Repeating such a call
// skips overload resolution, binding and the meta function; requires_grad,
// grad mode and the rest of autograd are applied to every call as usual.
// Errors are never cached. At most `capacity` entries; a full cache is
// emptied. The results are identical with the cache on or off.
struct MetaCacheInfo {
  bool enabled = true;
  int64_t hits = 0;      // calls answered from the cache (this thread)
  int64_t misses = 0;    // cacheable calls that ran the meta function
  int64_t size = 0;      // entries held
  int64_t capacity = 0;  // entries held at most
};
MetaCacheInfo GetMetaCacheInfo();
// Turns this thread's cache on or off (on by default); entries are kept.
void SetMetaCacheEnabled(bool enabled);
// Drops this thread's entries and zeroes its counters.
void ClearMetaCache();

// ---- devices -----------------------------------------------------------
// While alive, factories called on this thread without device= create their
// tensors on `device` (PyTorch's `with torch.device("meta"):`). Nests.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
};
void PushDefaultDevice(Device device);
void PopDefaultDevice();
// The innermost DeviceGuard's device on this thread, or nullopt.
std::optional<Device> DefaultDevice();
// From now on, in every thread, every op's device= argument is meta (a
// factory without one too), whatever the DeviceGuards say: what `tensord
// check` runs under. Cannot be undone.
void ForceMetaDevice();
bool MetaDeviceForced();

// ---- host data ----------------------------------------------------------
// A tensor holding a copy of `nbytes` bytes at `data`, read as a contiguous
// tensor of `sizes` and `dtype`. `device` nullopt means the DeviceGuard's
// device, else cpu; meta gives a meta tensor (the data is not read). Data up
// to 64 KiB travels inline in the session's next message; more goes through
// shared memory on the daemon's host, else in chunks of
// SessionOptions::transport.chunk_bytes (4 MiB). RuntimeError when nbytes !=
// numel * itemsize; the daemon's errors (OutOfMemory over the session's
// limit, naming `site`) come at the next sync point.
absl::StatusOr<Tensor> FromBlob(const void* data, size_t nbytes, Shape sizes, ScalarType dtype,
                                std::optional<Device> device = std::nullopt, CallSite site = CallSite::Current());
// Convenience: float32 / int64 vectors.
absl::StatusOr<Tensor> FromVector(const std::vector<float>& v, Shape sizes, std::optional<Device> device = std::nullopt,
                                  CallSite site = CallSite::Current());
absl::StatusOr<Tensor> FromVector(const std::vector<int64_t>& v, Shape sizes,
                                  std::optional<Device> device = std::nullopt, CallSite site = CallSite::Current());

// ---- indexing (PyTorch's x[...]) -----------------------------------------
struct Slice {
  std::optional<int64_t> start, stop, step;
};
struct NoneIndex {};
struct EllipsisIndex {};
// One item of an index expression: an int (select), a Slice, None (new axis),
// Ellipsis, a bool (True: new axis; False: new empty axis), or a Tensor
// (integer: advanced indexing via index.Tensor; bool: a mask, via
// masked_select or nonzero, which are data-dependent and raise
// NotImplementedError on meta).
using TensorIndex = std::variant<int64_t, Slice, NoneIndex, EllipsisIndex, bool, Tensor>;

// x[indices...]. IndexError for too many indices ("too many indices for
// tensor of dimension 2") and the meta functions' errors for out-of-range
// ints and slices.
absl::StatusOr<Tensor> Index(const Tensor& self, absl::Span<const TensorIndex> indices,
                             CallSite site = CallSite::Current());

// ---- typed helpers over Call (all follow the op table's schemas) ----------
absl::StatusOr<Tensor> Zeros(Shape sizes, ScalarType dtype = kDefaultFloat, std::optional<Device> device = std::nullopt,
                             CallSite site = CallSite::Current());
absl::StatusOr<Tensor> Ones(Shape sizes, ScalarType dtype = kDefaultFloat, std::optional<Device> device = std::nullopt,
                            CallSite site = CallSite::Current());
absl::StatusOr<Tensor> Randn(Shape sizes, ScalarType dtype = kDefaultFloat, std::optional<Device> device = std::nullopt,
                             CallSite site = CallSite::Current());
absl::StatusOr<Tensor> Arange(Scalar end, std::optional<ScalarType> dtype = std::nullopt,
                              std::optional<Device> device = std::nullopt, CallSite site = CallSite::Current());
absl::StatusOr<Tensor> Add(const Tensor& a, const Tensor& b, CallSite site = CallSite::Current());
absl::StatusOr<Tensor> Mul(const Tensor& a, const Tensor& b, CallSite site = CallSite::Current());
absl::StatusOr<Tensor> Matmul(const Tensor& a, const Tensor& b, CallSite site = CallSite::Current());
absl::StatusOr<Tensor> T(const Tensor& a, CallSite site = CallSite::Current());
absl::StatusOr<Tensor> Sum(const Tensor& a, std::optional<std::vector<int64_t>> dim = std::nullopt,
                           bool keepdim = false, CallSite site = CallSite::Current());
absl::StatusOr<Tensor> Reshape(const Tensor& a, Shape shape, CallSite site = CallSite::Current());
absl::StatusOr<Tensor> To(const Tensor& a, ScalarType dtype, CallSite site = CallSite::Current());
absl::StatusOr<Tensor> To(const Tensor& a, Device device, CallSite site = CallSite::Current());

// a // b: the table op floor_divide (PyTorch's semantics: rounds toward
// negative infinity; the result dtype is the promotion of a and b; integer
// division by zero fails the op with "ZeroDivisionError").
absl::StatusOr<Tensor> FloorDivide(const Tensor& a, const Arg& b, CallSite site = CallSite::Current());

}  // namespace tensord::client

#endif  // TENSORD_CLIENT_OPS_H_
