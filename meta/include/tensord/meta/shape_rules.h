// tensord/meta/shape_rules.h — the shared rules meta functions are made of:
// NumPy broadcasting, PyTorch's result_type (type promotion with 0-dim
// tensors and Python scalars), and the output layout of elementwise ops
// (PyTorch TensorIterator: outputs follow the inputs' stride permutation).
#ifndef TENSORD_META_SHAPE_RULES_H_
#define TENSORD_META_SHAPE_RULES_H_

#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tensord/meta/tensor_meta.h"
#include "tensord/meta/value.h"

namespace tensord {

// NumPy broadcasting of several shapes. Error text (as PyTorch):
// "add: The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1"
absl::StatusOr<Shape> BroadcastShapes(absl::string_view op, absl::Span<const Shape> shapes);

// Strides of `t` viewed as `sizes` after broadcasting (0 for new or
// expanded dims). `t`'s shape must broadcast to `sizes`.
Shape BroadcastStrides(const TensorMeta& t, absl::Span<const int64_t> sizes);

// One operand of type promotion: a tensor (its dim() decides whether it is
// 0-dim) or a Python scalar (a "wrapped number").
struct PromotionOperand {
  const TensorMeta* tensor = nullptr;
  const Scalar* scalar = nullptr;
};

// PyTorch's result_type: dimensioned tensors take priority over 0-dim
// tensors, which take priority over Python scalars, but a lower-priority
// operand of a higher category (bool < integral < floating) raises the
// category (int tensor + 2.5 -> float32 (default dtype); int8 tensor + int64
// 0-dim tensor -> int8; float16 tensor + float64 0-dim -> float16).
absl::StatusOr<ScalarType> ResultType(absl::string_view op, absl::Span<const PromotionOperand> operands);

// Sizes and strides of a fresh elementwise output of shape `sizes` computed
// from `inputs`, following PyTorch: if all inputs (of the output's shape) are
// non-overlapping and dense with the same permutation, the output takes that
// permutation; ties and broadcast dims resolve as TensorIterator does.
// `inputs` are in PyTorch's operand order (the first one that orders two dims
// decides); a Python scalar is passed as a 0-dim tensor (it takes no part in
// the order but disables the same-shape shortcut, as in PyTorch).
Shape ElementwiseOutputStrides(absl::Span<const int64_t> sizes, absl::Span<const TensorMeta* const> inputs);

// Strides that keep `t`'s memory format for a same-shape fresh tensor
// (PyTorch's empty_like with preserve_format): t's strides when t is
// non-overlapping and dense, else dense strides in t's stride order
// (at::infer_dense_strides; an expanded or plain sliced tensor gets
// contiguous strides).
Shape PreserveFormatStrides(const TensorMeta& t);

// Reduction dims: dim=None or [] means all dims; wraps negatives; errors on
// repeats ("sum: dim 1 appears multiple times in the list of dims").
absl::StatusOr<std::vector<bool>> ReductionMask(absl::string_view op, const Value& dim, int64_t rank);

// Output shape for a reduction: reduced dims removed, or kept as 1 when keepdim.
Shape ReducedShape(absl::Span<const int64_t> sizes, const std::vector<bool>& mask, bool keepdim);

// diagonal(t, offset, dim1, dim2) as a view of t (PyTorch's at::diagonal):
// dims dim1 and dim2 (wrapped) are removed and the diagonal is appended with
// stride stride(dim1) + stride(dim2); an empty diagonal keeps t's
// storage_offset. IndexError for a dim out of range; RuntimeError naming `op`
// for dim1 == dim2.
absl::StatusOr<TensorMeta> DiagonalView(absl::string_view op, const TensorMeta& t, int64_t offset, int64_t dim1,
                                        int64_t dim2);

}  // namespace tensord

#endif  // TENSORD_META_SHAPE_RULES_H_
