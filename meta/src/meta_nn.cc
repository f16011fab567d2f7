// Meta functions of the ops nn and the derivative formulas need: softmax /
// log_softmax, detach, scatter_add, index_add, masked_scatter, and the
// select/slice backward helpers (zeros of the input's sizes with the
// gradient written into the selected part). index_put lives in
// meta_misc.cc, next to the advanced-indexing rules it shares with index.
#include <algorithm>
#include <array>
#include <cstdint>
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
  TD_ASSIGN_OR_RETURN(Shape sizes, IntListArg(op, args, 1));
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
  TD_ASSIGN_OR_RETURN(Shape sizes, IntListArg(op, args, 1));
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

// diagonal_backward(grad_output, input_sizes, offset, dim1, dim2): zeros of
// input_sizes with grad_output copied onto diagonal(offset, dim1, dim2).
absl::StatusOr<MetaResult> DiagonalBackward(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* grad, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(Shape sizes, IntListArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(int64_t offset, IntArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(int64_t dim1, IntArg(op, args, 3));
  TD_ASSIGN_OR_RETURN(int64_t dim2, IntArg(op, args, 4));
  TD_RETURN_IF_ERROR(CheckNewSizes(op, sizes, grad->dtype));
  TensorMeta in = TensorMeta::Contiguous(Shape(sizes.begin(), sizes.end()), grad->dtype, grad->device);
  TD_ASSIGN_OR_RETURN(TensorMeta part, DiagonalView(op, in, offset, dim1, dim2));
  TD_RETURN_IF_ERROR(CheckGradFits(op, *grad, part));
  return OneOutput(std::move(in));
}

}  // namespace tensord::meta

// ==== convolution and pooling (nn family) =====================================
namespace tensord::meta {
namespace {

// x / y rounded towards -inf (PyTorch's div_rtn).
__int128 DivRtn(__int128 x, __int128 y) {
  __int128 q = x / y;
  const __int128 r = x % y;
  if (r != 0 && ((r < 0) != (y < 0))) --q;
  return q;
}

// An int[2] argument as (h, w): one value is used for both; `empty_ok` (a
// pooling stride) gives `fallback` for []. Any other length: `msg`.
absl::StatusOr<std::array<int64_t, 2>> PairArg(absl::string_view op, absl::Span<const Value> args, size_t i,
                                               bool empty_ok, std::array<int64_t, 2> fallback, absl::string_view msg) {
  TD_ASSIGN_OR_RETURN(Shape v, IntListArg(op, args, i));
  if (v.size() == 1) return std::array<int64_t, 2>{v[0], v[0]};
  if (v.size() == 2) return std::array<int64_t, 2>{v[0], v[1]};
  if (v.empty() && empty_ok) return fallback;
  return RuntimeErr(absl::StrCat(op, ": ", msg));
}

// conv2d's int[2] parameters (PyTorch's expand_param_if_needed wording).
absl::StatusOr<std::array<int64_t, 2>> ConvParam(absl::string_view op, absl::Span<const Value> args, size_t i,
                                                 absl::string_view name) {
  TD_ASSIGN_OR_RETURN(Shape v, IntListArg(op, args, i));
  if (v.size() == 1) return std::array<int64_t, 2>{v[0], v[0]};
  if (v.size() == 2) return std::array<int64_t, 2>{v[0], v[1]};
  return RuntimeErr(absl::StrCat(op, ": expected ", name,
                                 " to be a single integer value or a list of 2 values to match the convolution "
                                 "dimensions, but got ",
                                 name, "=", ShapeToString(Shape(v.begin(), v.end()))));
}

// PyTorch's pooling_output_shape (1.13): floor (or ceil) of the window count,
// the last window starting inside the input (or its left padding).
absl::StatusOr<int64_t> PoolOutSize(absl::string_view op, int64_t in, int64_t k, int64_t pad, int64_t stride,
                                    int64_t dilation, bool ceil_mode) {
  if (stride == 0) return RuntimeErr(absl::StrCat(op, ": stride should not be zero"));
  if (pad < 0) return RuntimeErr(absl::StrCat(op, ": pad must be non-negative, but got pad: ", pad));
  if (pad > k / 2) {
    return RuntimeErr(
        absl::StrCat(op, ": pad should be at most half of kernel size, but got pad=", pad, " and kernel_size=", k));
  }
  const __int128 s = stride;
  __int128 out =
      DivRtn(static_cast<__int128>(in) + 2 * static_cast<__int128>(pad) -
                 static_cast<__int128>(dilation) * (static_cast<__int128>(k) - 1) - 1 + (ceil_mode ? s - 1 : 0),
             s) +
      1;
  if (ceil_mode && (out - 1) * s >= static_cast<__int128>(in) + pad) --out;
  if (out > INT64_MAX || out < INT64_MIN) {
    return RuntimeErr(absl::StrCat(op, ": pooling output size overflows for input size ", in, ", kernel_size ", k,
                                   ", stride ", stride, ", dilation ", dilation));
  }
  return static_cast<int64_t>(out);
}

struct Pool2d {
  std::array<int64_t, 2> k, s, p, d;
  bool ceil_mode = false;
  int64_t oh = 0, ow = 0;
  MemoryFormat format = MemoryFormat::kContiguous;
};

// PyTorch's pool2d_shape_check (1.13), after the output sizes are known.
absl::Status Pool2dShapeCheck(absl::string_view op, const TensorMeta& in, const Pool2d& q) {
  if (q.k[0] <= 0 || q.k[1] <= 0) {
    return RuntimeErr(
        absl::StrCat(op, ": kernel size should be greater than zero, but got kH: ", q.k[0], " kW: ", q.k[1]));
  }
  if (q.s[0] <= 0 || q.s[1] <= 0) {
    return RuntimeErr(absl::StrCat(op, ": stride should be greater than zero, but got dH: ", q.s[0], " dW: ", q.s[1]));
  }
  if (q.d[0] <= 0 || q.d[1] <= 0) {
    return RuntimeErr(absl::StrCat(op, ": dilation should be greater than zero, but got dilationH: ", q.d[0],
                                   " dilationW: ", q.d[1]));
  }
  const int64_t nd = in.dim();
  const bool valid_dims = in.sizes[nd - 3] != 0 && in.sizes[nd - 2] != 0;
  if (q.format == MemoryFormat::kChannelsLast) {
    if (!(nd == 4 && valid_dims && in.sizes[3] != 0)) {
      return RuntimeErr(absl::StrCat(op,
                                     ": Expected 4D (batch mode) tensor expected for input with channels_last "
                                     "layout with optional 0 dim batch size for input, but got: ",
                                     ShapeToString(in.sizes)));
    }
  } else if (!((nd == 3 && in.sizes[0] != 0 && valid_dims) || (nd == 4 && valid_dims && in.sizes[3] != 0))) {
    return RuntimeErr(absl::StrCat(op,
                                   ": Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for "
                                   "input, but got:",
                                   ShapeToString(in.sizes)));
  }
  if (q.k[1] / 2 < q.p[1] || q.k[0] / 2 < q.p[0]) {
    return RuntimeErr(absl::StrCat(op, ": pad should be smaller than or equal to half of kernel size, but got padW = ",
                                   q.p[1], ", padH = ", q.p[0], ", kW = ", q.k[1], ", kH = ", q.k[0]));
  }
  if (q.oh < 1 || q.ow < 1) {
    return RuntimeErr(absl::StrCat(op, ": Given input size: (", in.sizes[nd - 3], "x", in.sizes[nd - 2], "x",
                                   in.sizes[nd - 1], "). Calculated output size: (", in.sizes[nd - 3], "x", q.oh, "x",
                                   q.ow, "). Output size is too small"));
  }
  return absl::OkStatus();
}

// Only float32 and float64 run (the CPU kernels' dtypes; PyTorch also runs
// bfloat16 and, for some ops, integers: refused here rather than run wrongly).
absl::Status CheckNnDtype(absl::string_view op, ScalarType t) {
  if (t != ScalarType::kFloat32 && t != ScalarType::kFloat64) return NotImplementedForDtype(op, t);
  return absl::OkStatus();
}

// A fresh output of `sizes` in `format` (4-D: channels-last strides when asked).
TensorMeta FreshIn(Shape sizes, MemoryFormat format, ScalarType dtype, Device device) {
  Shape strides = StridesForFormat(sizes, sizes.size() == 4 ? format : MemoryFormat::kContiguous);
  return MakeMeta(std::move(sizes), std::move(strides), 0, dtype, device);
}

// The parameters, output sizes and checks of max_pool2d_with_indices (args
// 0..5 of its schema, also the first ones of its backward minus grad_output).
absl::StatusOr<Pool2d> MaxPoolParams(absl::string_view op, const TensorMeta& self, absl::Span<const Value> a) {
  Pool2d q;
  TD_ASSIGN_OR_RETURN(q.k,
                      PairArg(op, a, 1, false, {}, "kernel_size must either be a single int, or a tuple of two ints"));
  TD_ASSIGN_OR_RETURN(
      q.s, PairArg(op, a, 2, true, q.k, "stride must either be omitted, a single int, or a tuple of two ints"));
  TD_ASSIGN_OR_RETURN(q.p,
                      PairArg(op, a, 3, false, {}, "padding must be either be a single int, or a tuple of two ints"));
  TD_ASSIGN_OR_RETURN(q.d,
                      PairArg(op, a, 4, false, {}, "dilation must be either a single int, or a tuple of two ints"));
  TD_ASSIGN_OR_RETURN(q.ceil_mode, BoolArg(op, a, 5));
  q.format = SuggestMemoryFormat(self);
  if (q.format == MemoryFormat::kChannelsLast && self.dim() != 4) {
    return RuntimeErr(
        absl::StrCat(op, ": non-empty 4D (batch mode) tensor expected for input with channels_last layout"));
  }
  if (self.dim() != 3 && self.dim() != 4) {
    return RuntimeErr(absl::StrCat(op, ": non-empty 3D or 4D (batch mode) tensor expected for input, but got ",
                                   ShapeToString(self.sizes)));
  }
  const int64_t nd = self.dim();
  TD_ASSIGN_OR_RETURN(q.oh, PoolOutSize(op, self.sizes[nd - 2], q.k[0], q.p[0], q.s[0], q.d[0], q.ceil_mode));
  TD_ASSIGN_OR_RETURN(q.ow, PoolOutSize(op, self.sizes[nd - 1], q.k[1], q.p[1], q.s[1], q.d[1], q.ceil_mode));
  TD_RETURN_IF_ERROR(Pool2dShapeCheck(op, self, q));
  TD_RETURN_IF_ERROR(CheckNnDtype(op, self.dtype));
  return q;
}

// The same for avg_pool2d (args 0..3 + ceil_mode at 4; dilation 1).
absl::StatusOr<Pool2d> AvgPoolParams(absl::string_view op, const TensorMeta& self, absl::Span<const Value> a,
                                     size_t divisor_arg) {
  Pool2d q;
  TD_ASSIGN_OR_RETURN(q.k,
                      PairArg(op, a, 1, false, {}, "kernel_size must either be a single int, or a tuple of two ints"));
  TD_ASSIGN_OR_RETURN(
      q.s, PairArg(op, a, 2, true, q.k, "stride must either be omitted, a single int, or a tuple of two ints"));
  TD_ASSIGN_OR_RETURN(q.p, PairArg(op, a, 3, false, {}, "padding must either be a single int, or a tuple of two ints"));
  q.d = {1, 1};
  TD_ASSIGN_OR_RETURN(q.ceil_mode, BoolArg(op, a, 4));
  TD_ASSIGN_OR_RETURN(std::optional<int64_t> divisor, OptIntArg(op, a, divisor_arg));
  if (divisor.has_value() && *divisor == 0) return RuntimeErr(absl::StrCat(op, ": divisor must be not zero"));
  const int64_t nd = self.dim();
  if (nd < 3) {  // PyTorch reads input.size(-3) first
    const int64_t r = std::max<int64_t>(nd, 1);
    return IndexErr(
        absl::StrCat(op, ": Dimension out of range (expected to be in range of [", -r, ", ", r - 1, "], but got -3)"));
  }
  TD_ASSIGN_OR_RETURN(q.oh, PoolOutSize(op, self.sizes[nd - 2], q.k[0], q.p[0], q.s[0], 1, q.ceil_mode));
  TD_ASSIGN_OR_RETURN(q.ow, PoolOutSize(op, self.sizes[nd - 1], q.k[1], q.p[1], q.s[1], 1, q.ceil_mode));
  q.format = SuggestMemoryFormat(self);
  TD_RETURN_IF_ERROR(Pool2dShapeCheck(op, self, q));
  TD_RETURN_IF_ERROR(CheckNnDtype(op, self.dtype));
  return q;
}

Shape PoolOutShape(const TensorMeta& self, const Pool2d& q) {
  Shape s = self.sizes;
  s[s.size() - 2] = q.oh;
  s[s.size() - 1] = q.ow;
  return s;
}

// grad_output of a pooling backward must have the forward output's sizes and
// the input's dtype and device.
absl::Status CheckPoolGrad(absl::string_view op, const TensorMeta& grad, const TensorMeta& self, const Shape& expect) {
  if (grad.sizes != expect) {
    return RuntimeErr(absl::StrCat(op, ": expected grad_output of size ", ShapeToString(expect),
                                   " (the forward output's size), but got ", ShapeToString(grad.sizes)));
  }
  if (grad.dtype != self.dtype) {
    return RuntimeErr(absl::StrCat(op, ": expected grad_output of dtype ", DtypeName(self.dtype), " (self's), but got ",
                                   DtypeName(grad.dtype)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MetaResult> Conv2d(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* input, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(const TensorMeta* weight, TensorArg(op, args, 1));
  const TensorMeta* bias = nullptr;
  if (!args[2].is_none()) {
    TD_ASSIGN_OR_RETURN(bias, TensorArg(op, args, 2));
  }
  if (input->dim() != 3 && input->dim() != 4) {
    return RuntimeErr(absl::StrCat(op,
                                   ": Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: ",
                                   ShapeToString(input->sizes)));
  }
  const bool batched = input->dim() == 4;
  // The unbatched input is computed as a batch of one (PyTorch's batchify).
  TensorMeta in4 = *input;
  if (!batched) {
    in4.sizes.insert(in4.sizes.begin(), 1);
    in4.strides.insert(in4.strides.begin(), input->sizes.empty() ? 1 : input->sizes[0] * input->strides[0]);
  }
  TD_ASSIGN_OR_RETURN(int64_t groups, IntArg(op, args, 6));
  if (weight->dim() != 4) {
    return RuntimeErr(absl::StrCat(op, ": Expected 4-dimensional weight for 4-dimensional input ",
                                   ShapeToString(in4.sizes), ", but got weight of size ", ShapeToString(weight->sizes),
                                   " (only 2-D convolution is supported)"));
  }
  if (groups <= 0) return RuntimeErr(absl::StrCat(op, ": non-positive groups is not supported"));
  TD_ASSIGN_OR_RETURN(auto stride, ConvParam(op, args, 3, "stride"));
  TD_ASSIGN_OR_RETURN(auto padding, ConvParam(op, args, 4, "padding"));
  TD_ASSIGN_OR_RETURN(auto dilation, ConvParam(op, args, 5, "dilation"));
  if (padding[0] < 0 || padding[1] < 0) return RuntimeErr(absl::StrCat(op, ": negative padding is not supported"));
  if (stride[0] <= 0 || stride[1] <= 0) return RuntimeErr(absl::StrCat(op, ": non-positive stride is not supported"));
  if (dilation[0] <= 0 || dilation[1] <= 0) {
    return RuntimeErr(absl::StrCat(op, ": non-positive dilation is not supported"));
  }
  const Shape& ws = weight->sizes;
  if (ws[0] < groups) {
    return RuntimeErr(absl::StrCat(op, ": Given groups=", groups, ", expected weight to be at least ", groups,
                                   " at dimension 0, but got weight of size ", ShapeToString(ws), " instead"));
  }
  if (ws[0] % groups != 0) {
    return RuntimeErr(absl::StrCat(op, ": Given groups=", groups, ", expected weight to be divisible by ", groups,
                                   " at dimension 0, but got weight of size ", ShapeToString(ws), " instead"));
  }
  const __int128 want_c = static_cast<__int128>(ws[1]) * groups;
  if (in4.sizes[1] != want_c) {
    return RuntimeErr(absl::StrCat(op, ": Given groups=", groups, ", weight of size ", ShapeToString(ws),
                                   ", expected input", ShapeToString(in4.sizes), " to have ",
                                   static_cast<int64_t>(std::min<__int128>(want_c, INT64_MAX)), " channels, but got ",
                                   in4.sizes[1], " channels instead"));
  }
  if (bias != nullptr && !(bias->dim() == 1 && bias->sizes[0] == ws[0])) {
    return RuntimeErr(absl::StrCat(op, ": Given weight of size ", ShapeToString(ws),
                                   ", expected bias to be 1-dimensional with ", ws[0],
                                   " elements, but got bias of size ", ShapeToString(bias->sizes), " instead"));
  }
  __int128 padded[2], kern[2];
  bool fits = true;
  for (int i = 0; i < 2; ++i) {
    padded[i] = static_cast<__int128>(in4.sizes[2 + i]) + 2 * static_cast<__int128>(padding[i]);
    kern[i] = static_cast<__int128>(dilation[i]) * (ws[2 + i] - 1) + 1;
    if (padded[i] < kern[i]) fits = false;
    if (padded[i] > INT64_MAX || kern[i] > INT64_MAX) {
      return RuntimeErr(absl::StrCat(op, ": padding ", padding[i], " or dilation ", dilation[i],
                                     " overflows the padded input or kernel size"));
    }
  }
  if (!fits) {
    return RuntimeErr(absl::StrCat(op, ": Calculated padded input size per channel: (", static_cast<int64_t>(padded[0]),
                                   " x ", static_cast<int64_t>(padded[1]), "). Kernel size: (",
                                   static_cast<int64_t>(kern[0]), " x ", static_cast<int64_t>(kern[1]),
                                   "). Kernel size can't be greater than actual input size"));
  }
  const TensorMeta* tensors[] = {input, weight, bias};
  TD_ASSIGN_OR_RETURN(Device device, CommonDevice(op, tensors, /*allow_cpu_scalars=*/false));
  if (input->dtype != weight->dtype || (bias != nullptr && bias->dtype != input->dtype)) {
    const ScalarType other = input->dtype != weight->dtype ? weight->dtype : bias->dtype;
    return RuntimeErr(absl::StrCat(op, ": expected scalar type ", DtypeC10Name(input->dtype), " but found ",
                                   DtypeC10Name(other), " (input, weight and bias must have the same dtype)"));
  }
  TD_RETURN_IF_ERROR(CheckNnDtype(op, input->dtype));
  Shape out{in4.sizes[0], ws[0], static_cast<int64_t>((padded[0] - kern[0]) / stride[0] + 1),
            static_cast<int64_t>((padded[1] - kern[1]) / stride[1] + 1)};
  // PyTorch 1.13 CPU: channels-last output when the input or the weight
  // suggests channels-last, else contiguous.
  const bool cl = SuggestMemoryFormat(in4) == MemoryFormat::kChannelsLast ||
                  SuggestMemoryFormat(*weight) == MemoryFormat::kChannelsLast;
  TD_RETURN_IF_ERROR(CheckNewSizes(op, out, input->dtype));
  TensorMeta o = FreshIn(out, cl ? MemoryFormat::kChannelsLast : MemoryFormat::kContiguous, input->dtype, device);
  if (!batched) {
    o.sizes.erase(o.sizes.begin());
    o.strides.erase(o.strides.begin());
  }
  return OneOutput(std::move(o));
}

absl::StatusOr<MetaResult> ConvolutionBackward(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* grad, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(const TensorMeta* input, TensorArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(const TensorMeta* weight, TensorArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(bool transposed, BoolArg(op, args, 7));
  if (transposed) {
    return NotImplementedErr(absl::StrCat(op, ": transposed convolution is not supported (only 2-D, non-transposed)"));
  }
  if (input->dim() != 4 || weight->dim() != 4) {
    return NotImplementedErr(absl::StrCat(op,
                                          ": only 2-D convolution (4-D input and weight) is supported, but got input ",
                                          ShapeToString(input->sizes), " and weight ", ShapeToString(weight->sizes)));
  }
  TD_ASSIGN_OR_RETURN(Shape output_padding, IntListArg(op, args, 8));
  for (int64_t p : output_padding) {
    if (p != 0) return NotImplementedErr(absl::StrCat(op, ": output_padding is only for transposed convolution"));
  }
  // The forward's checks and output sizes.
  const Value fargs[] = {Value(input), Value(weight), Value(), args[4], args[5], args[6], args[9]};
  TD_ASSIGN_OR_RETURN(MetaResult fwd, Conv2d(op, fargs));
  if (grad->sizes != fwd.outputs[0].sizes) {
    return RuntimeErr(absl::StrCat(op, ": expected grad_output of size ", ShapeToString(fwd.outputs[0].sizes),
                                   " (the convolution's output), but got ", ShapeToString(grad->sizes)));
  }
  if (grad->dtype != input->dtype) {
    return RuntimeErr(absl::StrCat(op, ": expected scalar type ", DtypeC10Name(input->dtype), " but found ",
                                   DtypeC10Name(grad->dtype), " (grad_output)"));
  }
  if (!args[3].is_none()) {
    TD_ASSIGN_OR_RETURN(Shape bias_sizes, IntListArg(op, args, 3));
    if (bias_sizes.size() != 1 || bias_sizes[0] != weight->sizes[0]) {
      return RuntimeErr(absl::StrCat(op, ": expected bias_sizes [", weight->sizes[0], "], but got ",
                                     ShapeToString(Shape(bias_sizes.begin(), bias_sizes.end()))));
    }
  }
  const bool cl = SuggestMemoryFormat(*input) == MemoryFormat::kChannelsLast ||
                  SuggestMemoryFormat(*weight) == MemoryFormat::kChannelsLast;
  const MemoryFormat f = cl ? MemoryFormat::kChannelsLast : MemoryFormat::kContiguous;
  MetaResult r;
  r.outputs.push_back(FreshIn(input->sizes, f, input->dtype, fwd.outputs[0].device));
  r.outputs.push_back(FreshIn(weight->sizes, f, input->dtype, fwd.outputs[0].device));
  r.outputs.push_back(TensorMeta::Contiguous(Shape{weight->sizes[0]}, input->dtype, fwd.outputs[0].device));
  r.alias_of = {-1, -1, -1};
  return r;
}

absl::StatusOr<MetaResult> MaxPool2dWithIndices(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(Pool2d q, MaxPoolParams(op, *self, args));
  Shape out = PoolOutShape(*self, q);
  TD_RETURN_IF_ERROR(CheckNewSizes(op, out, self->dtype));
  return TwoOutputs(FreshIn(out, q.format, self->dtype, self->device),
                    FreshIn(out, q.format, ScalarType::kInt64, self->device));
}

// max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride,
// padding, dilation, ceil_mode, indices): self's sizes and suggested layout.
absl::StatusOr<MetaResult> MaxPool2dWithIndicesBackward(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* grad, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(const TensorMeta* indices, TensorArg(op, args, 7));
  TD_ASSIGN_OR_RETURN(Pool2d q, MaxPoolParams(op, *self, args.subspan(1)));
  const Shape expect = PoolOutShape(*self, q);
  TD_RETURN_IF_ERROR(CheckPoolGrad(op, *grad, *self, expect));
  if (indices->sizes != expect || indices->dtype != ScalarType::kInt64) {
    return RuntimeErr(absl::StrCat(op, ": expected indices of dtype int64 and size ", ShapeToString(expect),
                                   ", but got ", DtypeName(indices->dtype), " ", ShapeToString(indices->sizes)));
  }
  const TensorMeta* tensors[] = {grad, self, indices};
  TD_ASSIGN_OR_RETURN(Device device, CommonDevice(op, tensors, false));
  return OneOutput(FreshIn(self->sizes, q.format, self->dtype, device));
}

absl::StatusOr<MetaResult> AvgPool2d(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(Pool2d q, AvgPoolParams(op, *self, args, 6));
  Shape out = PoolOutShape(*self, q);
  TD_RETURN_IF_ERROR(CheckNewSizes(op, out, self->dtype));
  return OneOutput(FreshIn(out, q.format, self->dtype, self->device));
}

// avg_pool2d_backward(grad_output, self, kernel_size, stride, padding,
// ceil_mode, count_include_pad, divisor_override): self's sizes and layout.
absl::StatusOr<MetaResult> AvgPool2dBackward(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* grad, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(Pool2d q, AvgPoolParams(op, *self, args.subspan(1), 6));
  TD_RETURN_IF_ERROR(CheckPoolGrad(op, *grad, *self, PoolOutShape(*self, q)));
  const TensorMeta* tensors[] = {grad, self};
  TD_ASSIGN_OR_RETURN(Device device, CommonDevice(op, tensors, false));
  return OneOutput(FreshIn(self->sizes, q.format, self->dtype, device));
}

}  // namespace tensord::meta
