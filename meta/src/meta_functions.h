// Internal: the meta functions the op table (ops.cc) points at. Each takes
// the call's arguments bound in schema order (kinds already validated) and
// returns the outputs' metadata and aliasing. Shared helpers (broadcasting,
// promotion, elementwise output layout) live in meta/include/tensord/meta/.
#ifndef TENSORD_META_SRC_META_FUNCTIONS_H_
#define TENSORD_META_SRC_META_FUNCTIONS_H_

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tensord/meta/op_table.h"

namespace tensord::meta {

absl::StatusOr<MetaResult> AmaxAmin(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Arange(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> ArangeStart(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> ArgMaxMin(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> BinaryArith(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> BinaryArithScalar(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> BinaryBitwise(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> BinaryBitwiseScalar(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> BinaryCompare(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> BinaryCompareScalar(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> BinarySub(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> BinarySubScalar(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> BinaryTrueDiv(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> BinaryTrueDivScalar(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Bmm(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Cat(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Clamp(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> ClampBound(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> ClampTensor(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Clone(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Contiguous(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> DataDependent(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Empty(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> EmptyLike(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Expand(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Eye(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Flatten(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Full(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Gather(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Index(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> IndexSelect(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> MaskedFill(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Matmul(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> MaxMinAll(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> MaxMinDim(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Mm(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Narrow(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Diagonal(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Permute(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> PowScalarSelf(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Reshape(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Select(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Slice(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Squeeze(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> SqueezeDim(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Stack(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> SumMean(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> T(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> ToDevice(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> ToDtype(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Topk(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Transpose(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> UnaryBool(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> UnaryFloat(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> UnaryIntegral(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> UnaryNeg(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> UnarySame(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Unsqueeze(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> View(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Where(absl::string_view op, absl::Span<const Value> args);

absl::StatusOr<MetaResult> Addcmul(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> CopyInPlace(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Detach(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> FillInPlace(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Gelu(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> IndexAdd(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> IndexPut(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> MaskedScatter(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> RandomInPlace(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> ScatterAdd(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> SelectBackward(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> SliceBackward(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> DiagonalBackward(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Softmax(absl::string_view op, absl::Span<const Value> args);

// ---- one block per op family ----------------------------------------------------
// Pointwise ops (meta_elementwise.cc): exp2/expm1/log2/log1p
// (int -> float32), silu, square (pow(self, 2)), relu_, div with
// rounding_mode, fmod, atan2, bitwise shifts and lerp.
absl::StatusOr<MetaResult> UnaryFloatMath(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Silu(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Square(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> ReluInPlace(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> DivMode(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> DivModeScalar(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Fmod(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> FmodScalar(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Atan2(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> BitwiseShift(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> BitwiseShiftScalar(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Lerp(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> FloorDivide(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> FloorDivideScalar(absl::string_view op, absl::Span<const Value> args);
// Reductions and scans (meta_reductions.cc): nansum, prod / prod.dim_int,
// var/std (every overload), norm.* and linalg_vector_norm, logsumexp,
// all/any (+ .dim), cumsum/cumprod.
absl::StatusOr<MetaResult> AllAny(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> CumScan(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Logsumexp(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Nansum(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Norm(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Prod(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> VarStd(absl::string_view op, absl::Span<const Value> args);
// Shape ops (meta_shape.cc): split, chunk, unbind, flip, roll, repeat,
// tril/triu, constant_pad_nd, scatter.
absl::StatusOr<MetaResult> Split(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> SplitWithSizes(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Chunk(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Unbind(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Flip(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Roll(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Repeat(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> TrilTriu(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> ConstantPadNd(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> ScatterSrc(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> ScatterValue(absl::string_view op, absl::Span<const Value> args);
// addmm(self, mat1, mat2, *, beta, alpha): self broadcasts to [n, m];
// all three share one dtype (PyTorch's "self and mat2 must have the same dtype").
absl::StatusOr<MetaResult> Addmm(absl::string_view op, absl::Span<const Value> args);
// baddbmm(self, batch1, batch2, *, beta, alpha): [b, n, k] @ [b, k, m]; the
// result has the batches' dtype, self (any dtype) broadcasts to [b, n, m].
absl::StatusOr<MetaResult> Baddbmm(absl::string_view op, absl::Span<const Value> args);
// dot(self, tensor): two 1-D tensors of one dtype and length -> 0-dim.
absl::StatusOr<MetaResult> Dot(absl::string_view op, absl::Span<const Value> args);
// outer(self, vec2): [n] x [m] -> [n, m] with mul's promotion.
absl::StatusOr<MetaResult> Outer(absl::string_view op, absl::Span<const Value> args);
// linear(input, weight, bias=None): input [*, k] @ weight.t() (+ bias), as
// PyTorch 1.13's at::linear decomposes it.
absl::StatusOr<MetaResult> Linear(absl::string_view op, absl::Span<const Value> args);
// nn family (meta_nn.cc): conv2d and its backward, max/avg pooling and their backwards.
absl::StatusOr<MetaResult> Conv2d(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> ConvolutionBackward(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> MaxPool2dWithIndices(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> MaxPool2dWithIndicesBackward(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> AvgPool2d(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> AvgPool2dBackward(absl::string_view op, absl::Span<const Value> args);
// Factories (meta_factories.cc): linspace, randint, empty_strided.
absl::StatusOr<MetaResult> Linspace(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> Randint(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> RandintLow(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> EmptyStrided(absl::string_view op, absl::Span<const Value> args);

// ---- in-place ops -----------------------------------------------------------
// The meta of an in-place op `op_` (self is argument 0) from its out-of-place
// op's meta function `base`, with PyTorch's in-place checks, in PyTorch's
// order: self must not have internal overlap (a dim of size > 1 with stride
// 0: "unsupported operation: more than one element of the written-to tensor
// refers to a single memory location. Please clone() the tensor before
// performing the operation."), then `base` runs (its errors come through,
// named `op`), then the result's shape must be self's ("output with shape [3]
// doesn't match the broadcast shape [2, 3]"), its device self's, and its dtype
// castable to self's (PyTorch's canCast: "result type Float can't be cast to
// the desired output type Long"). Gives self's meta, aliasing argument 0.
// _fused_adam_: self, grad, exp_avg and exp_avg_sq of one sizes, dtype
// (float32/float64), device and dense layout; returns self, exp_avg and
// exp_avg_sq (written in place).
absl::StatusOr<MetaResult> FusedAdam(absl::string_view op, absl::Span<const Value> args);
absl::StatusOr<MetaResult> InPlaceResult(absl::string_view op, absl::Span<const Value> args, MetaFn base);

// InPlaceResult as a MetaFn for the op table: InPlace<BinaryArith> is add_'s.
template <MetaFn kBase>
absl::StatusOr<MetaResult> InPlace(absl::string_view op, absl::Span<const Value> args) {
  return InPlaceResult(op, args, kBase);
}

}  // namespace tensord::meta

#endif  // TENSORD_META_SRC_META_FUNCTIONS_H_
