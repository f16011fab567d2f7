// Broadcasting, PyTorch's result_type, TensorIterator's output layout and the
// reduction helpers. Each function reproduces the PyTorch 1.13 algorithm named
// in its comment; the expected values in tests/meta come from running torch.
#include "tensord/meta/shape_rules.h"

#include <algorithm>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "meta_common.h"
#include "tensord/meta/errors.h"

namespace tensord {
namespace {

// at::infer_size for two shapes; "a" is the shape so far, "b" the next one.
absl::Status InferSizePair(absl::string_view op, const Shape& a, const Shape& b, Shape* out) {
  const int64_t dims_a = static_cast<int64_t>(a.size());
  const int64_t dims_b = static_cast<int64_t>(b.size());
  const int64_t ndim = std::max(dims_a, dims_b);
  Shape result(ndim);
  for (int64_t i = ndim - 1; i >= 0; --i) {
    const int64_t offset = ndim - 1 - i;
    const int64_t dim_a = dims_a - 1 - offset;
    const int64_t dim_b = dims_b - 1 - offset;
    const int64_t size_a = dim_a >= 0 ? a[dim_a] : 1;
    const int64_t size_b = dim_b >= 0 ? b[dim_b] : 1;
    if (size_a != size_b && size_a != 1 && size_b != 1) {
      // PyTorch's words, then the two shapes (which PyTorch leaves out) so a
      // report such as `tensord check`'s says what was broadcast.
      return RuntimeErr(absl::StrCat(op, ": The size of tensor a (", size_a, ") must match the size of tensor b (",
                                     size_b, ") at non-singleton dimension ", i, " (shapes ", ShapeToString(a),
                                     " and ", ShapeToString(b), ")"));
    }
    result[i] = size_a == 1 ? size_b : size_a;
  }
  *out = std::move(result);
  return absl::OkStatus();
}

// promote_skip_undefined with errors prefixed by the op.
absl::StatusOr<std::optional<ScalarType>> PromoteSkipUndefined(absl::string_view op, std::optional<ScalarType> a,
                                                               std::optional<ScalarType> b) {
  if (!a) return b;
  if (!b) return a;
  absl::StatusOr<ScalarType> r = PromoteTypes(*a, *b);
  if (!r.ok()) return MakeError(KindOf(r.status()), absl::StrCat(op, ": ", r.status().message()));
  return std::optional<ScalarType>(*r);
}

// at::native::combine_categories (no complex dtypes here).
absl::StatusOr<std::optional<ScalarType>> CombineCategories(absl::string_view op, std::optional<ScalarType> higher,
                                                            std::optional<ScalarType> lower) {
  if (higher && IsFloating(*higher)) return higher;
  if ((higher && *higher == ScalarType::kBool) || (lower && IsFloating(*lower))) {
    return PromoteSkipUndefined(op, higher, lower);
  }
  if (higher) return higher;
  return lower;
}

// TensorIterator::reorder_dimensions' comparison: 1 if dim0 should come after
// dim1, -1 if before, 0 if ambiguous. `strides[k]` are operand k's strides
// after broadcasting (0 for broadcast dims).
int ShouldSwap(const std::vector<Shape>& strides, absl::Span<const int64_t> sizes, int64_t dim0, int64_t dim1) {
  for (const Shape& s : strides) {
    const int64_t s0 = s[dim0];
    const int64_t s1 = s[dim1];
    if (s0 == 0 || s1 == 0) continue;
    if (s0 < s1) return -1;
    if (s0 > s1) return 1;
    // Equal strides: the dim with the smaller size goes first.
    if (sizes[dim0] > sizes[dim1]) return 1;
  }
  return 0;
}

// The insertion sort TensorIterator (and infer_dense_strides) use. perm[0]
// is the fastest-moving dim.
Shape SortDims(const std::vector<Shape>& strides, absl::Span<const int64_t> sizes) {
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  Shape perm(ndim);
  for (int64_t i = 0; i < ndim; ++i) perm[i] = ndim - 1 - i;
  for (int64_t i = 1; i < ndim; ++i) {
    int64_t dim1 = i;
    for (int64_t dim0 = i - 1; dim0 >= 0; --dim0) {
      const int c = ShouldSwap(strides, sizes, perm[dim0], perm[dim1]);
      if (c > 0) {
        std::swap(perm[dim0], perm[dim1]);
        dim1 = dim0;
      } else if (c < 0) {
        break;
      }
    }
  }
  return perm;
}

}  // namespace

absl::StatusOr<Shape> BroadcastShapes(absl::string_view op, absl::Span<const Shape> shapes) {
  Shape result;
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (i == 0) {
      result = shapes[0];
      continue;
    }
    TD_RETURN_IF_ERROR(InferSizePair(op, result, shapes[i], &result));
  }
  return result;
}

Shape BroadcastStrides(const TensorMeta& t, absl::Span<const int64_t> sizes) {
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  const int64_t offset = ndim - t.dim();
  Shape strides(ndim, 0);
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (offset + i < 0) continue;  // t has more dims than `sizes`: caller bug, keep going safely
    strides[offset + i] = (t.sizes[i] == 1 && sizes[offset + i] != 1) ? 0 : t.strides[i];
  }
  return strides;
}

absl::StatusOr<ScalarType> ResultType(absl::string_view op, absl::Span<const PromotionOperand> operands) {
  // at::native::ResultTypeState: dimensioned tensors, 0-dim tensors and
  // wrapped numbers (Python scalars) are promoted separately, then combined
  // so that a lower-priority operand can only raise the category.
  std::optional<ScalarType> dim_result, zero_result, wrapped_result;
  for (const PromotionOperand& o : operands) {
    if (o.tensor != nullptr) {
      std::optional<ScalarType>& slot = o.tensor->dim() > 0 ? dim_result : zero_result;
      TD_ASSIGN_OR_RETURN(slot, PromoteSkipUndefined(op, slot, o.tensor->dtype));
    } else if (o.scalar != nullptr) {
      // bool -> bool, int -> int64, float -> the default dtype (float32).
      TD_ASSIGN_OR_RETURN(wrapped_result, PromoteSkipUndefined(op, wrapped_result, o.scalar->dtype()));
    }
  }
  TD_ASSIGN_OR_RETURN(std::optional<ScalarType> lower, CombineCategories(op, zero_result, wrapped_result));
  TD_ASSIGN_OR_RETURN(std::optional<ScalarType> result, CombineCategories(op, dim_result, lower));
  if (!result) return InternalErr(absl::StrCat(op, ": result_type of no operands"));
  return *result;
}

Shape ElementwiseOutputStrides(absl::Span<const int64_t> sizes, absl::Span<const TensorMeta* const> inputs) {
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  if (ndim == 0) return {};

  // TensorIteratorBase::compute_fast_setup_type: every operand of the output's
  // shape (and no mix of 0-dim and dimensioned operands).
  bool all_same_shape = true;
  for (const TensorMeta* t : inputs) {
    if (t->dim() != ndim || !std::equal(t->sizes.begin(), t->sizes.end(), sizes.begin())) all_same_shape = false;
  }
  if (all_same_shape && !inputs.empty()) {
    bool contiguous = true, channels_last = true, dense = true;
    for (const TensorMeta* t : inputs) {
      contiguous &= t->is_contiguous();
      channels_last &= meta::IsChannelsLastContiguous(*t);
      dense &= meta::IsNonOverlappingAndDense(*t);
    }
    if (contiguous) return ContiguousStrides(sizes);
    if (channels_last) return meta::StridesForFormat(sizes, meta::MemoryFormat::kChannelsLast);
    if (dense) {
      bool same_strides = true;
      for (const TensorMeta* t : inputs) same_strides &= t->strides == inputs.back()->strides;
      if (same_strides) return inputs.back()->strides;
    }
  }

  // compute_strides + reorder_dimensions + allocate_or_resize_outputs.
  std::vector<Shape> strides;
  strides.reserve(inputs.size());
  for (const TensorMeta* t : inputs) strides.push_back(BroadcastStrides(*t, sizes));
  const Shape perm = SortDims(strides, sizes);
  bool inverted = true;
  for (int64_t j = 0; j < ndim; ++j) inverted &= perm[j] == ndim - 1 - j;
  if (inverted) return ContiguousStrides(sizes);
  // compatible_stride: sizes multiply as they are (no max(size, 1)).
  Shape out(ndim);
  int64_t next = 1;
  for (int64_t j = 0; j < ndim; ++j) {
    out[perm[j]] = next;
    next *= sizes[perm[j]];
  }
  return out;
}

Shape PreserveFormatStrides(const TensorMeta& t) {
  if (meta::IsNonOverlappingAndDense(t)) return t.strides;
  // at::infer_dense_strides: keep the permutation of t's strides (0 strides
  // compare as ambiguous), laying the elements out densely.
  const int64_t ndim = t.dim();
  if (ndim == 0) return {};
  if (ndim == 1) return {1};
  std::vector<Shape> strides = {t.strides};
  // infer_dense_strides' comparison treats any 0 stride as ambiguous, which is
  // what ShouldSwap does for a single operand.
  const Shape perm = SortDims(strides, t.sizes);
  Shape out(ndim);
  int64_t cur = 1;
  for (int64_t j = 0; j < ndim; ++j) {
    out[perm[j]] = cur;
    if (t.sizes[perm[j]] > 1) cur *= t.sizes[perm[j]];
  }
  return out;
}

absl::StatusOr<std::vector<bool>> ReductionMask(absl::string_view op, const Value& dim, int64_t rank) {
  Shape dims;
  if (dim.kind() == Value::Kind::kIntList) {
    dims = dim.int_list();
  } else if (dim.kind() == Value::Kind::kInt) {
    dims = {dim.to_int()};
  } else if (!dim.is_none()) {
    return TypeErr(absl::StrCat(op, ": dim expected an int, a list of ints or None, got ", ValueKindName(dim.kind())));
  }
  std::vector<bool> mask(rank, dims.empty());
  absl::flat_hash_set<int64_t> seen;
  for (int64_t d : dims) {
    TD_ASSIGN_OR_RETURN(int64_t w, WrapDim(op, d, rank));
    if (!seen.insert(w).second) {
      return RuntimeErr(absl::StrCat(op, ": dim ", w, " appears multiple times in the list of dims"));
    }
    if (w < rank) mask[w] = true;
  }
  return mask;
}

Shape ReducedShape(absl::Span<const int64_t> sizes, const std::vector<bool>& mask, bool keepdim) {
  Shape out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const bool reduced = i < mask.size() && mask[i];
    if (!reduced) {
      out.push_back(sizes[i]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

absl::StatusOr<TensorMeta> DiagonalView(absl::string_view op, const TensorMeta& t, int64_t offset, int64_t dim1,
                                        int64_t dim2) {
  TD_ASSIGN_OR_RETURN(int64_t d1, WrapDim(op, dim1, t.dim()));
  TD_ASSIGN_OR_RETURN(int64_t d2, WrapDim(op, dim2, t.dim()));
  if (d1 == d2) return RuntimeErr(absl::StrCat(op, ": diagonal dimensions cannot be identical ", dim1, ", ", dim2));
  const int64_t n1 = t.sizes[d1], n2 = t.sizes[d2];
  const int64_t off = std::clamp<int64_t>(offset, -n1, n2);  // no overflow for |offset| near INT64_MAX
  const int64_t diag_size = std::max<int64_t>(off >= 0 ? std::min(n1, n2 - off) : std::min(n1 + off, n2), 0);
  TensorMeta v = t;
  if (diag_size > 0) v.storage_offset += off >= 0 ? off * t.strides[d2] : -off * t.strides[d1];
  v.sizes.clear();
  v.strides.clear();
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d == d1 || d == d2) continue;
    v.sizes.push_back(t.sizes[d]);
    v.strides.push_back(t.strides[d]);
  }
  v.sizes.push_back(diag_size);
  v.strides.push_back(t.strides[d1] + t.strides[d2]);
  return v;
}

}  // namespace tensord
