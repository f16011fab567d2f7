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
struct CallSite {
  std::string text;

  static CallSite Current(const char* file = __builtin_FILE(), int line = __builtin_LINE());
  static CallSite Of(std::string text) { return CallSite{std::move(text)}; }
};

// The shared state behind Tensor copies. `session` is null for meta tensors
// (which have no handle: `handle` is 0). Destroying a non-meta impl queues
// its handle for release on the session (a no-op once the session closed).
struct TensorImpl {
  TensorImpl(std::shared_ptr<Session> s, uint64_t h, TensorMeta m)
      : session(std::move(s)), handle(h), meta(std::move(m)) {}
  ~TensorImpl();
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;

  std::shared_ptr<Session> session;
  uint64_t handle = 0;
  TensorMeta meta;
};

// A tensor's data copied to the host: `bytes` holds the elements in the
// contiguous (row-major) layout described by `meta` (meta.strides are
// contiguous; meta.device says where the data came from).
struct HostData {
  TensorMeta meta;
  std::string bytes;

  int64_t numel() const { return meta.numel(); }
  // Element `flat` (row-major) as a Scalar: bool, int (integral dtypes) or
  // float (floating dtypes, float16/bfloat16/float8 decoded exactly).
  // OutOfRange (IndexError) when flat is outside [0, numel).
  absl::StatusOr<Scalar> At(int64_t flat) const;
  // All elements converted to double (row-major).
  std::vector<double> ToDoubles() const;
  template <typename T>
  const T* data() const { return reinterpret_cast<const T*>(bytes.data()); }
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

  // "tensor(handle=3, sizes=[2, 3], dtype=float32, device=cpu)"
  std::string ToString() const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

}  // namespace tensord::client

#endif  // TENSORD_CLIENT_TENSOR_H_
