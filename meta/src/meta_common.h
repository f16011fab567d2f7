// Internal: helpers shared by the meta functions (meta_*.cc) — argument
// access that reports a Status instead of throwing, result builders, device
// agreement, dtype support checks, PyTorch's memory-format predicates and the
// view algorithms (infer_size, computeStride) that view/reshape/flatten/stack/
// index all need. Not a public header: nothing outside meta/src includes it.
#ifndef TENSORD_META_SRC_META_COMMON_H_
#define TENSORD_META_SRC_META_COMMON_H_

#include <cstdint>
#include <optional>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tensord/meta/dtype.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/op_table.h"
#include "tensord/meta/tensor_meta.h"
#include "tensord/meta/value.h"

namespace tensord::meta {

// ---- arguments (already bound in schema order; kinds normally validated) ----
// Each accessor re-checks the kind so that a caller that skipped ValidateArgs
// gets a TypeError rather than std::bad_variant_access.
absl::Status ExpectArgCount(absl::string_view op, absl::Span<const Value> args, size_t n);
absl::StatusOr<const TensorMeta*> TensorArg(absl::string_view op, absl::Span<const Value> args, size_t i);
absl::StatusOr<int64_t> IntArg(absl::string_view op, absl::Span<const Value> args, size_t i);
absl::StatusOr<std::optional<int64_t>> OptIntArg(absl::string_view op, absl::Span<const Value> args, size_t i);
absl::StatusOr<bool> BoolArg(absl::string_view op, absl::Span<const Value> args, size_t i);
absl::StatusOr<Scalar> ScalarArg(absl::string_view op, absl::Span<const Value> args, size_t i);
absl::StatusOr<std::optional<Scalar>> OptScalarArg(absl::string_view op, absl::Span<const Value> args, size_t i);
// int[] (a single int is accepted as a one-element list).
absl::StatusOr<Shape> IntListArg(absl::string_view op, absl::Span<const Value> args, size_t i);
absl::StatusOr<std::optional<ScalarType>> OptDtypeArg(absl::string_view op, absl::Span<const Value> args, size_t i);
absl::StatusOr<std::optional<Device>> OptDeviceArg(absl::string_view op, absl::Span<const Value> args, size_t i);
// Tensor[] (no None entries allowed) / Tensor?[] (None entries come back as nullptr).
absl::StatusOr<std::vector<const TensorMeta*>> TensorListArg(absl::string_view op, absl::Span<const Value> args,
                                                             size_t i, bool allow_none);

// ---- results ----
TensorMeta MakeMeta(Shape sizes, Shape strides, int64_t storage_offset, ScalarType dtype, Device device);
MetaResult OneOutput(TensorMeta out, int alias_of = -1);
MetaResult TwoOutputs(TensorMeta a, TensorMeta b);

// The most dimensions a tensor may have (TensorMeta::Validate's limit).
inline constexpr int64_t kMaxRank = 64;
// "<op>: tensors with more than 64 dimensions are not supported (got 65)".
absl::Status CheckRank(absl::string_view op, size_t rank);

// Every size >= 0, else PyTorch's text for the first negative one:
// "<op>: Trying to create tensor with negative dimension -1: [2, -1]".
absl::Status CheckNonNegativeSizes(absl::string_view op, absl::Span<const int64_t> sizes);
// As many strides as sizes, else PyTorch's text: "<op>: dimensionality of
// sizes (2) must match dimensionality of strides (1)".
absl::Status CheckStrideCount(absl::string_view op, absl::Span<const int64_t> sizes,
                              absl::Span<const int64_t> strides);

// A fresh tensor of `sizes`: rank <= kMaxRank, every size >= 0, and its
// contiguous strides (0 counted as 1) times the item size fit in int64 (PyTorch's text: "Trying to
// create tensor with negative dimension -1: [2, -1]") and the byte count fits
// in int64 ("Storage size calculation overflowed with sizes=[...]").
absl::Status CheckNewSizes(absl::string_view op, absl::Span<const int64_t> sizes, ScalarType dtype);

// The device an op on `tensors` runs on: the first non-CPU device, else cpu.
// Any other tensor on a different device is PyTorch's error ("Expected all
// tensors to be on the same device, but found at least two devices, meta and
// cpu!"), except — when `allow_cpu_scalars` (TensorIterator ops) — 0-dim cpu
// tensors. nullptr entries are skipped.
absl::StatusOr<Device> CommonDevice(absl::string_view op, absl::Span<const TensorMeta* const> tensors,
                                    bool allow_cpu_scalars);

// '<op>: "<op>" not implemented for '<Name>'' (PyTorch's wording for a dtype
// a kernel does not cover).
absl::Status NotImplementedForDtype(absl::string_view op, ScalarType t);
// float8 tensors only store data: no arithmetic, comparison, reduction or
// matmul runs on them (as in PyTorch). Error as NotImplementedForDtype.
absl::Status CheckComputeDtype(absl::string_view op, ScalarType t);

// PyTorch's checked conversion of a fill value to `dtype` (full, full_like,
// masked_fill, where/clamp with Python scalars): "<op>: value cannot be
// converted to type int8_t without overflow". Nothing is checked for bool.
absl::Status CheckFillValue(absl::string_view op, const Scalar& value, ScalarType dtype);

// ---- PyTorch's layout predicates (TensorImpl flags) ----
bool IsChannelsLastContiguous(const TensorMeta& t);  // 4-D only
// PyTorch's is_non_overlapping_and_dense(): contiguous, channels-last
// contiguous or a dense permutation.
bool IsNonOverlappingAndDense(const TensorMeta& t);
enum class MemoryFormat { kContiguous, kChannelsLast, kChannelsLast3d };
// PyTorch's Tensor::suggest_memory_format().
MemoryFormat SuggestMemoryFormat(const TensorMeta& t);
// Strides of a fresh tensor of `sizes` in `format` (channels-last strides for
// 4-D / 5-D, contiguous otherwise).
Shape StridesForFormat(absl::Span<const int64_t> sizes, MemoryFormat format);

// ---- view algorithms ----
// PyTorch's infer_size: resolves one -1 in `shape` against `numel`. Errors
// (prefixed "<op>: "): "only one dimension can be inferred", "invalid shape
// dimension -2", "shape '[3, 5]' is invalid for input of size 12", "cannot
// reshape tensor of 0 elements into shape [-1, 0] because ...".
absl::StatusOr<Shape> InferSize(absl::string_view op, absl::Span<const int64_t> shape, int64_t numel);
// PyTorch's computeStride: strides that let `old` (sizes/strides) be viewed
// as `new_sizes` without a copy, or nullopt when no such strides exist.
std::optional<Shape> ComputeViewStrides(absl::Span<const int64_t> old_sizes, absl::Span<const int64_t> old_strides,
                                        absl::Span<const int64_t> new_sizes);
// The metadata `.to(dtype)` / `.to(device)` gives when it copies (preserve
// format).
TensorMeta PreserveFormatCopy(const TensorMeta& t, ScalarType dtype, Device device);

// A dtype as PyTorch prints a caffe2::TypeMeta in messages ("float",
// "long int", "c10::Half"): lerp's dtype check, random_'s bound checks.
absl::string_view TypeMetaName(ScalarType t);

}  // namespace tensord::meta

#endif  // TENSORD_META_SRC_META_COMMON_H_
