// Meta functions of the ops nn and the derivative formulas need: softmax /
// log_softmax, detach, scatter_add, index_add, masked_scatter, and the
// select/slice backward helpers (zeros of the input's sizes with the
// gradient written into the selected part). index_put lives in
// meta_misc.cc, next to the advanced-indexing rules it shares with index.
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "meta_common.h"
#include "meta_functions.h"
#include "tensord/meta/shape_rules.h"

namespace tensord::meta {
namespace {

// 0-dim tensors count as 1-dim of size 1 (PyTorch's ensure_nonempty_*).
int64_t NonemptyDim(const TensorMeta& t) { return t.dim() == 0 ? 1 : t.dim(); }
int64_t NonemptySize(const TensorMeta& t, int64_t d) { return t.dim() == 0 ? 1 : t.sizes[d]; }

// `grad` must broadcast to `part` (the select/slice of the input it fills):
// PyTorch copies it in with copy_.
absl::Status CheckGradFits(absl::string_view op, const TensorMeta& grad, const TensorMeta& part) {
  const Shape shapes[] = {part.sizes, grad.sizes};
  TD_ASSIGN_OR_RETURN(Shape sizes, BroadcastShapes(op, shapes));
  if (sizes != part.sizes) {
    return RuntimeErr(absl::StrCat(op, ": grad_output of shape ", ShapeToString(grad.sizes),
                                   " does not fit the selected part of shape ", ShapeToString(part.sizes)));
  }
  return absl::OkStatus();
}

}  // namespace

// softmax.int / log_softmax.int (self, dim, dtype=None): self is first
// converted to dtype when given; the compute dtype must be floating (not
// float8). Output contiguous, self's sizes.
absl::StatusOr<MetaResult> Softmax(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(int64_t dim, IntArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(std::optional<ScalarType> dtype, OptDtypeArg(op, args, 2));
  TD_RETURN_IF_ERROR(WrapDim(op, dim, self->dim()).status());
  const ScalarType target = dtype.value_or(self->dtype);
  if (!IsFloating(target) || IsFloat8(target)) return NotImplementedForDtype(op, target);
  TD_RETURN_IF_ERROR(CheckNewSizes(op, self->sizes, target));
  return OneOutput(TensorMeta::Contiguous(self->sizes, target, self->device));
}

// detach(self): a view of self (same metadata) that autograd does not track.
absl::StatusOr<MetaResult> Detach(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  return OneOutput(*self, 0);
}

// scatter_add(self, dim, index, src): a contiguous copy of self with
// out[index[i][j]][j] += src[i][j] (dim 0). PyTorch's scatter checks: int64
// index, equal self/src dtypes, index no larger than src anywhere nor than
// self outside `dim`. Out-of-range index values fail in the kernel.
absl::StatusOr<MetaResult> ScatterAdd(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(int64_t dim, IntArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(const TensorMeta* index, TensorArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(const TensorMeta* src, TensorArg(op, args, 3));
  const TensorMeta* tensors[] = {self, index, src};
  TD_ASSIGN_OR_RETURN(Device device, CommonDevice(op, tensors, /*allow_cpu_scalars=*/false));
  TD_ASSIGN_OR_RETURN(int64_t d, WrapDim(op, dim, self->dim()));
  if (index->dtype != ScalarType::kInt64) {
    return RuntimeErr(absl::StrCat(op, "(): Expected dtype int64 for index, got ", DtypeName(index->dtype)));
  }
  if (self->dtype != src->dtype) {
    return RuntimeErr(absl::StrCat(op, "(): Expected self.dtype to be equal to src.dtype (got ", DtypeName(self->dtype),
                                   " and ", DtypeName(src->dtype), ")"));
  }
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, self->dtype));
  if (index->numel() != 0) {
    if (NonemptyDim(*index) != NonemptyDim(*self)) {
      return RuntimeErr(absl::StrCat(op, ": Index tensor must have the same number of dimensions as self tensor (",
                                     index->dim(), " != ", self->dim(), ")"));
    }
    if (NonemptyDim(*index) != NonemptyDim(*src)) {
      return RuntimeErr(absl::StrCat(op, ": Index tensor must have the same number of dimensions as src tensor (",
                                     index->dim(), " != ", src->dim(), ")"));
    }
    for (int64_t i = 0; i < NonemptyDim(*self); ++i) {
      const int64_t n = NonemptySize(*index, i);
      if (n > NonemptySize(*src, i) || (i != d && n > NonemptySize(*self, i))) {
        return RuntimeErr(absl::StrCat(op, ": Expected index ", ShapeToString(index->sizes), " to be smaller than self ",
                                       ShapeToString(self->sizes), " apart from dimension ", d,
                                       " and to be smaller size than src ", ShapeToString(src->sizes)));
      }
    }
  }
  return OneOutput(TensorMeta::Contiguous(self->sizes, self->dtype, device));
}

// index_add(self, dim, index, source, alpha=1): a contiguous copy of self with
// out.select(dim, index[i]) += alpha * source.select(dim, i). index: a vector
// (or scalar) of int32/int64 with one entry per source.size(dim); source has
// self's dtype and self's sizes outside `dim`. Out-of-range index values fail
// in the kernel.
absl::StatusOr<MetaResult> IndexAdd(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(int64_t dim, IntArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(const TensorMeta* index, TensorArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(const TensorMeta* source, TensorArg(op, args, 3));
  TD_ASSIGN_OR_RETURN(Scalar alpha, ScalarArg(op, args, 4));
  (void)alpha;  // converted to the compute dtype unchecked, as PyTorch does
  const TensorMeta* tensors[] = {self, index, source};
  TD_ASSIGN_OR_RETURN(Device device, CommonDevice(op, tensors, /*allow_cpu_scalars=*/false));
  TD_ASSIGN_OR_RETURN(int64_t d, WrapDim(op, dim, self->dim()));
  if (index->dim() > 1) {
    return IndexErr(absl::StrCat(op, "(): Index is supposed to be a vector, but got dim: ", index->dim(),
                                 " with type: ", DtypeC10Name(index->dtype), " and size: ",
                                 ShapeToString(index->sizes)));
  }
  if (index->dtype != ScalarType::kInt64 && index->dtype != ScalarType::kInt32) {
    return RuntimeErr(absl::StrCat(op, "(): Expected dtype int32/int64 for index but got: ",
                                   DtypeC10Name(index->dtype)));
  }
  if (self->dtype != source->dtype) {
    return RuntimeErr(absl::StrCat(op, "(): self (", DtypeC10Name(self->dtype), ") and source (",
                                   DtypeC10Name(source->dtype), ") must have the same scalar type"));
  }
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, self->dtype));
  if (NonemptyDim(*source) != NonemptyDim(*self)) {
    return RuntimeErr(absl::StrCat(op, "(): source must have the same number of dimensions as self (got ",
                                   source->dim(), " and ", self->dim(), ")"));
  }
  const int64_t n = index->numel();
  if (n != NonemptySize(*source, d)) {
    return RuntimeErr(absl::StrCat(op, "(): Number of indices (", n, ") should be equal to source.size(dim): (",
                                   NonemptySize(*source, d), "), for dim: ", d));
  }
  for (int64_t i = 0; i < NonemptyDim(*self); ++i) {
    if (i != d && NonemptySize(*source, i) != NonemptySize(*self, i)) {
      return RuntimeErr(absl::StrCat(op, "(): source of shape ", ShapeToString(source->sizes),
                                     " does not match self of shape ", ShapeToString(self->sizes), " at dimension ",
                                     i, " (only dimension ", d, " may differ)"));
    }
  }
  return OneOutput(TensorMeta::Contiguous(self->sizes, self->dtype, device));
}

// masked_scatter(self, mask, source): self and mask broadcast together; a
// contiguous result where the i-th true element of the mask (row-major) takes
// source's i-th element (row-major). Mask bool (or the deprecated uint8);
// source of self's dtype with at least as many elements as the mask has true
// values (checked by the kernel).
absl::StatusOr<MetaResult> MaskedScatter(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(const TensorMeta* mask, TensorArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(const TensorMeta* source, TensorArg(op, args, 2));
  const TensorMeta* tensors[] = {self, mask, source};
  TD_ASSIGN_OR_RETURN(Device device, CommonDevice(op, tensors, /*allow_cpu_scalars=*/false));
  if (mask->dtype != ScalarType::kBool && mask->dtype != ScalarType::kUInt8) {
    return RuntimeErr(absl::StrCat(op, ": masked_scatter_ only supports boolean masks, but got mask with dtype ",
                                   DtypeName(mask->dtype)));
  }
  if (self->dtype != source->dtype) {
    return RuntimeErr(absl::StrCat(op, ": expected self and source to have same dtypes but got ",
                                   DtypeC10Name(self->dtype), " and ", DtypeC10Name(source->dtype)));
  }
  const Shape shapes[] = {mask->sizes, self->sizes};
  TD_ASSIGN_OR_RETURN(Shape sizes, BroadcastShapes(op, shapes));
  TD_RETURN_IF_ERROR(CheckNewSizes(op, sizes, self->dtype));
  return OneOutput(TensorMeta::Contiguous(std::move(sizes), self->dtype, device));
}

// select_backward(grad_output, input_sizes, dim, index): zeros of input_sizes
// (contiguous, grad's dtype) with grad_output copied into select(dim, index).
absl::StatusOr<MetaResult> SelectBackward(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* grad, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, IntListArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(int64_t dim, IntArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(int64_t index, IntArg(op, args, 3));
  TD_RETURN_IF_ERROR(CheckNewSizes(op, sizes, grad->dtype));
  TensorMeta in = TensorMeta::Contiguous(Shape(sizes.begin(), sizes.end()), grad->dtype, grad->device);
  const Value sargs[] = {Value(&in), Value(dim), Value(index)};
  TD_ASSIGN_OR_RETURN(MetaResult part, Select(op, sargs));
  TD_RETURN_IF_ERROR(CheckGradFits(op, *grad, part.outputs[0]));
  return OneOutput(std::move(in));
}

// slice_backward(grad_output, input_sizes, dim, start, end, step): zeros of
// input_sizes with grad_output copied into slice(dim, start, end, step)
// (start/end clamped as slice does).
absl::StatusOr<MetaResult> SliceBackward(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* grad, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, IntListArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(int64_t dim, IntArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(int64_t start, IntArg(op, args, 3));
  TD_ASSIGN_OR_RETURN(int64_t end, IntArg(op, args, 4));
  TD_ASSIGN_OR_RETURN(int64_t step, IntArg(op, args, 5));
  TD_RETURN_IF_ERROR(CheckNewSizes(op, sizes, grad->dtype));
  TensorMeta in = TensorMeta::Contiguous(Shape(sizes.begin(), sizes.end()), grad->dtype, grad->device);
  const Value sargs[] = {Value(&in), Value(dim), Value(start), Value(end), Value(step)};
  TD_ASSIGN_OR_RETURN(MetaResult part, Slice(op, sargs));
  TD_RETURN_IF_ERROR(CheckGradFits(op, *grad, part.outputs[0]));
  return OneOutput(std::move(in));
}

}  // namespace tensord::meta
