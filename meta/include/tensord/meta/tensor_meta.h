// tensord/meta/tensor_meta.h — the metadata of one tensor without its data:
// sizes, strides (in elements), storage_offset (in elements), dtype, device.
//
// It is what meta functions compute, what the client keeps for every handle,
// and what the daemon checks against the storage it allocates.
//
//   TensorMeta m = TensorMeta::Contiguous({2, 3}, ScalarType::kFloat32, kCPU);
//   m.strides == {3, 1}; m.numel() == 6; m.StorageBytesNeeded() == 24
#ifndef TENSORD_META_TENSOR_META_H_
#define TENSORD_META_TENSOR_META_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tensord/meta/device.h"
#include "tensord/meta/dtype.h"

namespace tensord {

// Sizes, strides and other int lists (dims, an op's int[] argument). Up to
// five entries are held inline, as PyTorch's DimVector holds them: a tensor
// of rank 5 or less costs no heap allocation for its metadata, which every
// op's result needs on both sides of the wire. Converts to absl::Span<const
// int64_t>; build one from a std::vector with Shape(v.begin(), v.end()).
using Shape = absl::InlinedVector<int64_t, 5>;

// Row-major (C-contiguous) strides for `sizes`; size-0 and size-1 dims get
// the strides PyTorch gives them (the product of the sizes to their right,
// counting 0-sized dims as 1).
Shape ContiguousStrides(absl::Span<const int64_t> sizes);

// Product of sizes; InvalidArgument if negative or if the product overflows
// int64.
absl::StatusOr<int64_t> CheckedNumel(absl::Span<const int64_t> sizes);

// `count` elements of `itemsize` bytes, in bytes; InvalidArgument when the
// product overflows int64 (or either is negative), the message naming them:
// "{what} of 4611686018427387904 elements x 4 bytes overflows int64". The one
// place a request path multiplies an element count by a byte size: an
// expanded view may count far more elements than its storage holds bytes,
// so a count that fits int64 can still wrap once multiplied.
absl::StatusOr<int64_t> CheckedBytes(absl::string_view what, int64_t count, int64_t itemsize);

// The same, saturating at INT64_MAX instead of failing (for estimates that
// only steer a heuristic, e.g. how much memory a result may take).
int64_t SaturatingBytes(int64_t count, int64_t itemsize);

struct TensorMeta {
  Shape sizes;
  Shape strides;
  int64_t storage_offset = 0;
  ScalarType dtype = ScalarType::kFloat32;
  Device device = kCPU;

  static TensorMeta Contiguous(Shape sizes, ScalarType dtype, Device device);

  // A layout a user describes field by field (Python's tensord.TensorMeta
  // takes these five): no `strides` means ContiguousStrides(sizes). Checked
  // in this order, with PyTorch's words where PyTorch has them; every error
  // is a RuntimeError whose message starts "{what}: ":
  //   more than 64 dims  "tensors with more than 64 dimensions are not supported (got 65)"
  //   a negative size    "Trying to create tensor with negative dimension -1: [2, -1]"
  //   strides given:     "dimensionality of sizes (2) must match dimensionality of strides (1)",
  //                      "negative strides are not supported, got strides=[1, -1]"
  //   a negative offset  "storage_offset must be non-negative, got -1"
  //   no strides, and the contiguous strides times the item size overflow int64 (the
  //   check empty() makes): "Storage size calculation overflowed with sizes=[...]"
  //   StorageBytesNeeded() overflows int64 (the element count included):
  //     "Storage size calculation overflowed with sizes=[...] and strides=[...] (storage_offset 0)"
  // `dtype` and `device` must be valid values (IsValidScalarType, a parsed
  // Device): they are checked by Validate, which the result passes. Validate
  // words its errors for metadata a peer sent; this is for a user's layout.
  static absl::StatusOr<TensorMeta> Strided(absl::string_view what, Shape sizes, std::optional<Shape> strides,
                                            int64_t storage_offset, ScalarType dtype, Device device);

  int64_t dim() const { return static_cast<int64_t>(sizes.size()); }
  int64_t numel() const;  // product of sizes (1 for a 0-dim tensor)
  int64_t itemsize() const { return ItemSize(dtype); }
  // PyTorch's is_contiguous(): strides of size-1 dims are ignored.
  bool is_contiguous() const;
  // True when the elements occupy exactly numel() consecutive slots in some
  // order (a permutation of a contiguous tensor), ignoring offset.
  bool is_non_overlapping_and_dense() const;

  // Bytes the storage must hold for this view: (storage_offset + 1 +
  // sum((size-1)*stride)) * itemsize, or storage_offset*itemsize when numel is
  // 0. InvalidArgument on negative sizes/strides/offset or overflow.
  absl::StatusOr<int64_t> StorageBytesNeeded() const;

  // numel() * itemsize(): the bytes of the elements packed densely (what a
  // fetch sends, what a contiguous copy needs). May overflow where
  // StorageBytesNeeded does not (an expanded view, whose stride-0 dims
  // address one element many times): then InvalidArgument,
  // "{what}: tensor of N elements x K bytes overflows int64".
  absl::StatusOr<int64_t> DenseBytes(absl::string_view what) const;

  // Checks the invariants a hostile peer could break: rank <= 64, sizes >= 0,
  // strides >= 0, offset >= 0, matching ranks, valid dtype/device, and no
  // int64 overflow in StorageBytesNeeded. `what` names the tensor in errors.
  absl::Status Validate(absl::string_view what) const;

  bool operator==(const TensorMeta& o) const;
  bool operator!=(const TensorMeta& o) const { return !(*this == o); }

  // "TensorMeta(sizes=[2, 3], strides=[3, 1], storage_offset=0, dtype=float32, device=cpu)"
  std::string ToString() const;
};

// "[2, 3]"
std::string ShapeToString(absl::Span<const int64_t> s);

// Wraps a possibly negative dim into [0, rank). `rank` 0 accepts -1 and 0 as
// PyTorch does. Error text follows PyTorch: "{op}: Dimension out of range
// (expected to be in range of [-2, 1], but got 2)".
absl::StatusOr<int64_t> WrapDim(absl::string_view op, int64_t dim, int64_t rank);

}  // namespace tensord

#endif  // TENSORD_META_TENSOR_META_H_
