// TensorMeta: contiguity, storage extent and validation of untrusted metadata.
#include "tensord/meta/tensor_meta.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "meta_common.h"
#include "tensord/meta/errors.h"

namespace tensord {

Shape ContiguousStrides(absl::Span<const int64_t> sizes) {
  Shape strides(sizes.size());
  int64_t acc = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = acc;
    acc *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

absl::StatusOr<int64_t> CheckedNumel(absl::Span<const int64_t> sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    if (s < 0) return RuntimeErr(absl::StrCat("negative dimension ", s, " in sizes ", ShapeToString(sizes)));
    if (__builtin_mul_overflow(n, s, &n)) {
      return RuntimeErr(absl::StrCat("sizes ", ShapeToString(sizes), " have more elements than int64 can count"));
    }
  }
  return n;
}

absl::StatusOr<int64_t> CheckedBytes(absl::string_view what, int64_t count, int64_t itemsize) {
  int64_t bytes = 0;
  if (count < 0 || itemsize < 0 || __builtin_mul_overflow(count, itemsize, &bytes)) {
    return RuntimeErr(absl::StrCat(what, " of ", count, " elements x ", itemsize, " bytes overflows int64"));
  }
  return bytes;
}

int64_t SaturatingBytes(int64_t count, int64_t itemsize) {
  int64_t bytes = 0;
  if (count < 0 || itemsize < 0 || __builtin_mul_overflow(count, itemsize, &bytes)) {
    return std::numeric_limits<int64_t>::max();
  }
  return bytes;
}

TensorMeta TensorMeta::Contiguous(Shape sizes, ScalarType dtype, Device device) {
  TensorMeta m;
  m.strides = ContiguousStrides(sizes);
  m.sizes = std::move(sizes);
  m.dtype = dtype;
  m.device = device;
  return m;
}

absl::StatusOr<TensorMeta> TensorMeta::Strided(absl::string_view what, Shape sizes, std::optional<Shape> strides,
                                                int64_t storage_offset, ScalarType dtype, Device device) {
  TD_RETURN_IF_ERROR(meta::CheckRank(what, sizes.size()));
  TD_RETURN_IF_ERROR(meta::CheckNonNegativeSizes(what, sizes));
  if (strides) {
    TD_RETURN_IF_ERROR(meta::CheckStrideCount(what, sizes, *strides));
    for (int64_t s : *strides) {
      if (s < 0) {
        return RuntimeErr(absl::StrCat(what, ": negative strides are not supported, got strides=",
                                       ShapeToString(*strides)));
      }
    }
  }
  if (storage_offset < 0) {
    return RuntimeErr(absl::StrCat(what, ": storage_offset must be non-negative, got ", storage_offset));
  }
  if (!strides) {
    // ContiguousStrides multiplies the sizes (0 counted as 1) with no check.
    TD_RETURN_IF_ERROR(meta::CheckNewSizes(what, sizes, dtype));
    strides = ContiguousStrides(sizes);
  }
  TensorMeta m;
  m.sizes = std::move(sizes);
  m.strides = *std::move(strides);
  m.storage_offset = storage_offset;
  m.dtype = dtype;
  m.device = device;
  if (!m.StorageBytesNeeded().ok()) {
    return RuntimeErr(absl::StrCat(what, ": Storage size calculation overflowed with sizes=", ShapeToString(m.sizes),
                                   " and strides=", ShapeToString(m.strides), " (storage_offset ", storage_offset,
                                   ")"));
  }
  TD_RETURN_IF_ERROR(m.Validate(what));
  return m;
}

int64_t TensorMeta::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

bool TensorMeta::is_contiguous() const {
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

bool TensorMeta::is_non_overlapping_and_dense() const {
  if (dim() == 1) return sizes[0] < 2 || strides[0] == 1;
  absl::InlinedVector<int64_t, 8> perm(sizes.size());  // no heap for up to 8 dims (run per op)
  std::iota(perm.begin(), perm.end(), 0);
  std::sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
    if (sizes[a] < 2) return false;
    if (sizes[b] < 2) return true;
    return strides[a] < strides[b];
  });
  int64_t require = 1;
  for (int64_t d : perm) {
    if (sizes[d] < 2) return true;
    if (strides[d] != require) return false;
    require *= sizes[d];
  }
  return true;
}

absl::StatusOr<int64_t> TensorMeta::StorageBytesNeeded() const {
  TD_ASSIGN_OR_RETURN(int64_t n, CheckedNumel(sizes));
  if (storage_offset < 0) return RuntimeErr(absl::StrCat("negative storage_offset ", storage_offset));
  int64_t extent = storage_offset;  // elements
  if (n > 0) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (strides[i] < 0) return RuntimeErr(absl::StrCat("negative stride ", strides[i], " at dimension ", i));
      int64_t reach = 0;
      if (__builtin_mul_overflow(sizes[i] - 1, strides[i], &reach) ||
          __builtin_add_overflow(extent, reach, &extent)) {
        return RuntimeErr(absl::StrCat("sizes ", ShapeToString(sizes), " with strides ", ShapeToString(strides),
                                       " overflow int64"));
      }
    }
    if (__builtin_add_overflow(extent, 1, &extent)) return RuntimeErr("storage extent overflows int64");
  }
  int64_t bytes = 0;
  if (__builtin_mul_overflow(extent, ItemSize(dtype), &bytes)) return RuntimeErr("storage bytes overflow int64");
  return bytes;
}

absl::StatusOr<int64_t> TensorMeta::DenseBytes(absl::string_view what) const {
  absl::StatusOr<int64_t> n = CheckedNumel(sizes);
  if (!n.ok()) return RuntimeErr(absl::StrCat(what, ": ", n.status().message()));
  return CheckedBytes(absl::StrCat(what, ": tensor"), *n, itemsize());
}

absl::Status TensorMeta::Validate(absl::string_view what) const {
  if (!IsValidScalarType(static_cast<int64_t>(dtype))) {
    return RuntimeErr(absl::StrCat(what, ": invalid dtype ", static_cast<int64_t>(dtype)));
  }
  if (!IsValidDeviceType(static_cast<int64_t>(device.type)) || device.index < 0) {
    return RuntimeErr(absl::StrCat(what, ": invalid device"));
  }
  if (sizes.size() > 64) return RuntimeErr(absl::StrCat(what, ": rank ", sizes.size(), " exceeds 64"));
  if (sizes.size() != strides.size()) {
    return RuntimeErr(absl::StrCat(what, ": ", sizes.size(), " sizes but ", strides.size(), " strides"));
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0) return RuntimeErr(absl::StrCat(what, ": negative size ", sizes[i], " at dimension ", i));
    if (strides[i] < 0) return RuntimeErr(absl::StrCat(what, ": negative stride ", strides[i], " at dimension ", i));
  }
  absl::StatusOr<int64_t> bytes = StorageBytesNeeded();
  if (!bytes.ok()) return RuntimeErr(absl::StrCat(what, ": ", bytes.status().message()));
  return absl::OkStatus();
}

bool TensorMeta::operator==(const TensorMeta& o) const {
  return sizes == o.sizes && strides == o.strides && storage_offset == o.storage_offset && dtype == o.dtype &&
         device == o.device;
}

std::string TensorMeta::ToString() const {
  return absl::StrCat("TensorMeta(sizes=", ShapeToString(sizes), ", strides=", ShapeToString(strides),
                      ", storage_offset=", storage_offset, ", dtype=", DtypeName(dtype),
                      ", device=", device.ToString(), ")");
}

std::string ShapeToString(absl::Span<const int64_t> s) { return absl::StrCat("[", absl::StrJoin(s, ", "), "]"); }

absl::StatusOr<int64_t> WrapDim(absl::string_view op, int64_t dim, int64_t rank) {
  const int64_t r = rank <= 0 ? 1 : rank;
  const int64_t lo = -r, hi = r - 1;
  if (dim < lo || dim > hi) {
    return IndexErr(absl::StrCat(op, ": Dimension out of range (expected to be in range of [", lo, ", ", hi,
                                 "], but got ", dim, ")"));
  }
  return dim < 0 ? dim + r : dim;
}

}  // namespace tensord
