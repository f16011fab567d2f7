// Meta functions of elementwise ops: unary, binary (with Python-scalar
// operands), comparisons, bitwise ops, where, clamp and masked_fill.
//
// Output dtype follows PyTorch's result_type; output sizes follow
// broadcasting; output strides follow PyTorch's TensorIterator on CPU,
// including its habit of first copying inputs whose dtype differs from the
// common dtype (`.to()` keeps dense layouts but re-densifies expanded or
// sliced inputs, which changes which input decides the output's layout).
#include <optional>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "meta_common.h"
#include "meta_functions.h"
#include "tensord/meta/shape_rules.h"

namespace tensord::meta {
namespace {

// The 0-dim cpu tensor PyTorch wraps a Python scalar in.
TensorMeta WrappedScalar(const Scalar& s) { return MakeMeta({}, {}, 0, s.dtype(), kCPU); }

// A TensorIterator op over `inputs` (in PyTorch's operand order). When
// `promote_to` is set, inputs of another dtype are first copied to it, as
// TensorIterator does on CPU. The output is a fresh tensor of `out_dtype`.
absl::StatusOr<TensorMeta> IteratorOutput(absl::string_view op, absl::Span<const TensorMeta* const> inputs,
                                          std::optional<ScalarType> promote_to, ScalarType out_dtype,
                                          Device device) {
  // Operands of one shape (the common case) broadcast to that shape.
  bool same_sizes = !inputs.empty();
  for (const TensorMeta* t : inputs) same_sizes &= t->sizes == inputs[0]->sizes;
  Shape sizes;
  if (same_sizes) {
    sizes = inputs[0]->sizes;
  } else {
    std::vector<Shape> shapes;
    shapes.reserve(inputs.size());
    for (const TensorMeta* t : inputs) shapes.push_back(t->sizes);
    TD_ASSIGN_OR_RETURN(sizes, BroadcastShapes(op, shapes));
  }
  TD_RETURN_IF_ERROR(CheckNewSizes(op, sizes, out_dtype));

  std::vector<TensorMeta> converted;
  if (promote_to) converted.reserve(inputs.size());  // &converted.back() must stay valid
  absl::InlinedVector<const TensorMeta*, 4> operands;
  for (const TensorMeta* t : inputs) {
    if (promote_to && t->dtype != *promote_to) {
      converted.push_back(PreserveFormatCopy(*t, *promote_to, t->device));
      operands.push_back(&converted.back());
    } else {
      operands.push_back(t);
    }
  }
  Shape strides = ElementwiseOutputStrides(sizes, operands);
  return MakeMeta(std::move(sizes), std::move(strides), 0, out_dtype, device);
}

// A same-device unary TensorIterator op.
absl::StatusOr<MetaResult> UnaryResult(absl::string_view op, const TensorMeta& self, std::optional<ScalarType> promote_to,
                                       ScalarType out_dtype) {
  const TensorMeta* in[] = {&self};
  TD_ASSIGN_OR_RETURN(TensorMeta out, IteratorOutput(op, in, promote_to, out_dtype, self.device));
  return OneOutput(std::move(out));
}

// The tensor operand of a `Tensor op Scalar` call plus its wrapped scalar.
struct TensorAndScalar {
  const TensorMeta* self;
  Scalar other;
  TensorMeta wrapped;
};

absl::StatusOr<TensorAndScalar> ReadTensorScalar(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(Scalar other, ScalarArg(op, args, 1));
  return TensorAndScalar{self, other, WrappedScalar(other)};
}

// PyTorch's alpha_check for add/sub/rsub.
absl::Status AlphaCheck(absl::string_view op, ScalarType dtype, const Scalar& alpha) {
  if (alpha.is_bool() && dtype != ScalarType::kBool) {
    return RuntimeErr(absl::StrCat(op, ": Boolean alpha only supported for Boolean results."));
  }
  if (!IsFloating(dtype) && alpha.is_float()) {
    return RuntimeErr(absl::StrCat(op, ": For integral input tensors, argument alpha must not be a floating point number."));
  }
  return absl::OkStatus();
}

// PyTorch's sub_check.
absl::Status SubCheck(absl::string_view op, ScalarType a, ScalarType b) {
  if (a == ScalarType::kBool && b == ScalarType::kBool) {
    return RuntimeErr(absl::StrCat(op, ": Subtraction, the `-` operator, with two bool tensors is not supported. "
                                       "Use the `^` or `logical_xor()` operator instead."));
  }
  if (a == ScalarType::kBool || b == ScalarType::kBool) {
    return RuntimeErr(absl::StrCat(op, ": Subtraction, the `-` operator, with a bool tensor is not supported. "
                                       "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead."));
  }
  return absl::OkStatus();
}

// Kernels that PyTorch does not provide for a result dtype.
absl::Status CheckArithDtype(absl::string_view op, ScalarType dtype) {
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, dtype));
  if (dtype == ScalarType::kBool && (op == "remainder" || op == "pow")) return NotImplementedForDtype(op, dtype);
  return absl::OkStatus();
}

// The shared body of binary ops: `other` is a tensor, or the wrapped scalar.
// `kind` selects the result dtype rule.
enum class BinaryKind { kArith, kSub, kTrueDiv, kCompare, kBitwise };

absl::StatusOr<MetaResult> Binary(absl::string_view op, const TensorMeta& self, const TensorMeta& other,
                                  const Scalar* other_scalar, std::optional<Scalar> alpha, BinaryKind kind) {
  const TensorMeta* tensors[] = {&self, other_scalar ? nullptr : &other};
  TD_ASSIGN_OR_RETURN(Device device, CommonDevice(op, tensors, /*allow_cpu_scalars=*/true));
  if (kind == BinaryKind::kSub) TD_RETURN_IF_ERROR(SubCheck(op, self.dtype, other.dtype));

  PromotionOperand operands[2] = {{&self, nullptr}, {other_scalar ? nullptr : &other, other_scalar}};
  TD_ASSIGN_OR_RETURN(ScalarType common, ResultType(op, operands));
  ScalarType out = common;
  switch (kind) {
    case BinaryKind::kArith:
    case BinaryKind::kSub:
      TD_RETURN_IF_ERROR(CheckArithDtype(op, common));
      break;
    case BinaryKind::kTrueDiv:
      // Integer inputs are promoted to the default float dtype.
      if (IsIntegral(common, /*include_bool=*/true)) common = kDefaultFloat;
      out = common;
      TD_RETURN_IF_ERROR(CheckComputeDtype(op, common));
      break;
    case BinaryKind::kCompare:
      TD_RETURN_IF_ERROR(CheckComputeDtype(op, common));
      out = ScalarType::kBool;
      break;
    case BinaryKind::kBitwise:
      if (!IsIntegral(common, /*include_bool=*/true)) return NotImplementedForDtype(op, common);
      break;
  }
  if (alpha) TD_RETURN_IF_ERROR(AlphaCheck(op, common, *alpha));

  const TensorMeta* inputs[] = {&self, &other};
  TD_ASSIGN_OR_RETURN(TensorMeta result, IteratorOutput(op, inputs, common, out, device));
  return OneOutput(std::move(result));
}

absl::StatusOr<std::optional<Scalar>> AlphaArg(absl::string_view op, absl::Span<const Value> args) {
  if (args.size() < 3) return std::optional<Scalar>();
  return OptScalarArg(op, args, 2);
}

absl::StatusOr<MetaResult> BinaryTensorTensor(absl::string_view op, absl::Span<const Value> args, BinaryKind kind) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(const TensorMeta* other, TensorArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(std::optional<Scalar> alpha, AlphaArg(op, args));
  return Binary(op, *self, *other, nullptr, alpha, kind);
}

absl::StatusOr<MetaResult> BinaryTensorScalar(absl::string_view op, absl::Span<const Value> args, BinaryKind kind) {
  TD_ASSIGN_OR_RETURN(TensorAndScalar ts, ReadTensorScalar(op, args));
  TD_ASSIGN_OR_RETURN(std::optional<Scalar> alpha, AlphaArg(op, args));
  return Binary(op, *ts.self, ts.wrapped, &ts.other, alpha, kind);
}

// isinf/isfinite of a floating tensor, as PyTorch composes them:
// isinf = abs(self) == inf; isfinite = (self == self) * (abs(self) != inf).
absl::StatusOr<TensorMeta> AbsCompareInf(absl::string_view op, const TensorMeta& self) {
  const TensorMeta* in[] = {&self};
  TD_ASSIGN_OR_RETURN(TensorMeta abs, IteratorOutput(op, in, std::nullopt, self.dtype, self.device));
  const TensorMeta inf = WrappedScalar(Scalar::Float(0.0));
  const TensorMeta* cmp[] = {&abs, &inf};
  return IteratorOutput(op, cmp, self.dtype, ScalarType::kBool, self.device);
}

}  // namespace

// ---- unary -----------------------------------------------------------------

absl::StatusOr<MetaResult> UnarySame(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, self->dtype));
  if (self->dtype == ScalarType::kBool) {
    if (op == "relu") return RuntimeErr("relu: Boolean inputs not supported for relu");
    if (op != "sign") return NotImplementedForDtype(op, self->dtype);
  }
  return UnaryResult(op, *self, std::nullopt, self->dtype);
}

absl::StatusOr<MetaResult> UnaryNeg(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, self->dtype));
  if (self->dtype == ScalarType::kBool) {
    return RuntimeErr(absl::StrCat(op, ": Negation, the `-` operator, on a bool tensor is not supported. "
                                       "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead."));
  }
  return UnaryResult(op, *self, std::nullopt, self->dtype);
}

absl::StatusOr<MetaResult> UnaryFloat(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, self->dtype));
  const ScalarType out = IsFloating(self->dtype) ? self->dtype : kDefaultFloat;
  return UnaryResult(op, *self, out, out);
}

absl::StatusOr<MetaResult> UnaryBool(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, self->dtype));
  if ((op == "isinf" || op == "isfinite") && IsIntegral(self->dtype, /*include_bool=*/true)) {
    // PyTorch answers zeros_like / ones_like(self, bool) for integers.
    return OneOutput(PreserveFormatCopy(*self, ScalarType::kBool, self->device));
  }
  if (op == "isinf") {
    TD_ASSIGN_OR_RETURN(TensorMeta out, AbsCompareInf(op, *self));
    return OneOutput(std::move(out));
  }
  if (op == "isfinite") {
    const TensorMeta* eq_in[] = {self, self};
    TD_ASSIGN_OR_RETURN(TensorMeta not_nan, IteratorOutput(op, eq_in, std::nullopt, ScalarType::kBool, self->device));
    TD_ASSIGN_OR_RETURN(TensorMeta not_inf, AbsCompareInf(op, *self));
    const TensorMeta* mul_in[] = {&not_nan, &not_inf};
    TD_ASSIGN_OR_RETURN(TensorMeta out, IteratorOutput(op, mul_in, std::nullopt, ScalarType::kBool, self->device));
    return OneOutput(std::move(out));
  }
  if (op == "isnan") {
    // self != self
    const TensorMeta* in[] = {self, self};
    TD_ASSIGN_OR_RETURN(TensorMeta out, IteratorOutput(op, in, std::nullopt, ScalarType::kBool, self->device));
    return OneOutput(std::move(out));
  }
  return UnaryResult(op, *self, std::nullopt, ScalarType::kBool);
}

absl::StatusOr<MetaResult> UnaryIntegral(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  if (!IsIntegral(self->dtype, /*include_bool=*/true)) return NotImplementedForDtype(op, self->dtype);
  return UnaryResult(op, *self, std::nullopt, self->dtype);
}

// ---- binary ----------------------------------------------------------------

absl::StatusOr<MetaResult> BinaryArith(absl::string_view op, absl::Span<const Value> args) {
  return BinaryTensorTensor(op, args, BinaryKind::kArith);
}

absl::StatusOr<MetaResult> BinaryArithScalar(absl::string_view op, absl::Span<const Value> args) {
  if (op != "pow") return BinaryTensorScalar(op, args, BinaryKind::kArith);
  // pow.Tensor_Scalar is a unary op on self converted to the common dtype.
  TD_ASSIGN_OR_RETURN(TensorAndScalar ts, ReadTensorScalar(op, args));
  if (IsIntegral(ts.self->dtype, /*include_bool=*/true) && !ts.other.is_float() && ts.other.to_int() < 0) {
    return RuntimeErr(absl::StrCat(op, ": Integers to negative integer powers are not allowed."));
  }
  PromotionOperand operands[2] = {{ts.self, nullptr}, {nullptr, &ts.other}};
  TD_ASSIGN_OR_RETURN(ScalarType common, ResultType(op, operands));
  TD_RETURN_IF_ERROR(CheckArithDtype(op, common));
  return UnaryResult(op, *ts.self, common, common);
}

absl::StatusOr<MetaResult> BinarySub(absl::string_view op, absl::Span<const Value> args) {
  return BinaryTensorTensor(op, args, BinaryKind::kSub);
}

absl::StatusOr<MetaResult> BinarySubScalar(absl::string_view op, absl::Span<const Value> args) {
  return BinaryTensorScalar(op, args, BinaryKind::kSub);
}

absl::StatusOr<MetaResult> BinaryTrueDiv(absl::string_view op, absl::Span<const Value> args) {
  return BinaryTensorTensor(op, args, BinaryKind::kTrueDiv);
}

absl::StatusOr<MetaResult> BinaryTrueDivScalar(absl::string_view op, absl::Span<const Value> args) {
  return BinaryTensorScalar(op, args, BinaryKind::kTrueDiv);
}

absl::StatusOr<MetaResult> BinaryCompare(absl::string_view op, absl::Span<const Value> args) {
  return BinaryTensorTensor(op, args, BinaryKind::kCompare);
}

absl::StatusOr<MetaResult> BinaryCompareScalar(absl::string_view op, absl::Span<const Value> args) {
  return BinaryTensorScalar(op, args, BinaryKind::kCompare);
}

absl::StatusOr<MetaResult> BinaryBitwise(absl::string_view op, absl::Span<const Value> args) {
  return BinaryTensorTensor(op, args, BinaryKind::kBitwise);
}

absl::StatusOr<MetaResult> BinaryBitwiseScalar(absl::string_view op, absl::Span<const Value> args) {
  return BinaryTensorScalar(op, args, BinaryKind::kBitwise);
}

absl::StatusOr<MetaResult> PowScalarSelf(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(Scalar base, ScalarArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(const TensorMeta* exponent, TensorArg(op, args, 1));
  PromotionOperand operands[2] = {{nullptr, &base}, {exponent, nullptr}};
  TD_ASSIGN_OR_RETURN(ScalarType dtype, ResultType(op, operands));
  TD_RETURN_IF_ERROR(CheckArithDtype(op, dtype));
  // PyTorch allocates this output directly: contiguous, exponent's sizes.
  return OneOutput(TensorMeta::Contiguous(exponent->sizes, dtype, exponent->device));
}

// ---- where, clamp, masked_fill -------------------------------------------

absl::StatusOr<MetaResult> Where(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* cond, TensorArg(op, args, 0));
  TD_RETURN_IF_ERROR(ExpectArgCount(op, args, 3));
  const bool self_is_tensor = args[1].is_tensor();
  const bool other_is_tensor = args[2].is_tensor();
  const TensorMeta* self = nullptr;
  const TensorMeta* other = nullptr;
  std::optional<Scalar> self_scalar, other_scalar;
  if (self_is_tensor) {
    TD_ASSIGN_OR_RETURN(self, TensorArg(op, args, 1));
  } else {
    TD_ASSIGN_OR_RETURN(self_scalar, ScalarArg(op, args, 1));
  }
  if (other_is_tensor) {
    TD_ASSIGN_OR_RETURN(other, TensorArg(op, args, 2));
  } else {
    TD_ASSIGN_OR_RETURN(other_scalar, ScalarArg(op, args, 2));
  }
  const TensorMeta* tensors[] = {cond, self, other};
  TD_ASSIGN_OR_RETURN(Device device, CommonDevice(op, tensors, /*allow_cpu_scalars=*/true));

  // result_type(self, other); Python scalars are wrapped numbers.
  PromotionOperand operands[2] = {{self, self_scalar ? &*self_scalar : nullptr},
                                  {other, other_scalar ? &*other_scalar : nullptr}};
  TD_ASSIGN_OR_RETURN(ScalarType dtype, ResultType(op, operands));
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, dtype));

  // Scalars become 0-dim tensors of the result dtype (a checked conversion);
  // tensors of another dtype are copied with .to(dtype).
  std::vector<TensorMeta> storage;
  storage.reserve(3);
  auto operand = [&](const TensorMeta* t, const std::optional<Scalar>& s) -> absl::StatusOr<const TensorMeta*> {
    if (t == nullptr) {
      TD_RETURN_IF_ERROR(CheckFillValue(op, *s, dtype));
      storage.push_back(MakeMeta({}, {}, 0, dtype, device));
      return &storage.back();
    }
    if (t->dtype == dtype) return t;
    storage.push_back(PreserveFormatCopy(*t, dtype, t->device));
    return &storage.back();
  };
  TD_ASSIGN_OR_RETURN(const TensorMeta* self_c, operand(self, self_scalar));
  TD_ASSIGN_OR_RETURN(const TensorMeta* other_c, operand(other, other_scalar));

  const TensorMeta* cond_c = cond;
  if (cond->dtype == ScalarType::kUInt8) {
    // Deprecated in PyTorch but accepted: converted to bool first.
    storage.push_back(PreserveFormatCopy(*cond, ScalarType::kBool, cond->device));
    cond_c = &storage.back();
  } else if (cond->dtype != ScalarType::kBool) {
    return RuntimeErr(absl::StrCat("where expected condition to be a boolean tensor, but got a tensor with dtype ",
                                   DtypeC10Name(cond->dtype)));
  }
  const TensorMeta* inputs[] = {cond_c, self_c, other_c};
  TD_ASSIGN_OR_RETURN(TensorMeta out, IteratorOutput(op, inputs, std::nullopt, dtype, device));
  return OneOutput(std::move(out));
}

absl::StatusOr<MetaResult> Clamp(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(std::optional<Scalar> min, OptScalarArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(std::optional<Scalar> max, OptScalarArg(op, args, 2));
  if (!min && !max) return RuntimeErr(absl::StrCat(op, ": At least one of 'min' or 'max' must not be None"));
  ScalarType dtype = self->dtype;
  if (!IsFloating(dtype)) {
    std::vector<PromotionOperand> operands = {{self, nullptr}};
    if (min) operands.push_back({nullptr, &*min});
    if (max) operands.push_back({nullptr, &*max});
    TD_ASSIGN_OR_RETURN(dtype, ResultType(op, operands));
  }
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, dtype));
  if (dtype == ScalarType::kBool) return NotImplementedForDtype(op, dtype);
  if (min) TD_RETURN_IF_ERROR(CheckFillValue(op, *min, dtype));
  if (max) TD_RETURN_IF_ERROR(CheckFillValue(op, *max, dtype));
  // A unary op on self.to(dtype).
  return UnaryResult(op, *self, dtype, dtype);
}

// clamp_min / clamp_max (Scalar): clamp with one bound.
absl::StatusOr<MetaResult> ClampBound(absl::string_view op, absl::Span<const Value> args) {
  TD_RETURN_IF_ERROR(ExpectArgCount(op, args, 2));
  const bool is_min = absl::StartsWith(op, "clamp_min");
  const Value none;
  const Value as_clamp[] = {args[0], is_min ? args[1] : none, is_min ? none : args[1]};
  return Clamp(op, as_clamp);
}

// clamp.Tensor(self, min=None, max=None) and clamp_min.Tensor / clamp_max.Tensor:
// PyTorch's TensorIterator over self and the given bounds, inputs promoted to
// their common dtype (tensor operands, 0-dim ones only raising the category).
absl::StatusOr<MetaResult> ClampTensor(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  const TensorMeta* lo = nullptr;
  const TensorMeta* hi = nullptr;
  if (absl::StartsWith(op, "clamp_min") || absl::StartsWith(op, "clamp_max")) {
    TD_RETURN_IF_ERROR(ExpectArgCount(op, args, 2));
    TD_ASSIGN_OR_RETURN(const TensorMeta* bound, TensorArg(op, args, 1));
    (absl::StartsWith(op, "clamp_min") ? lo : hi) = bound;
  } else {
    TD_RETURN_IF_ERROR(ExpectArgCount(op, args, 3));
    if (!args[1].is_none()) {
      TD_ASSIGN_OR_RETURN(lo, TensorArg(op, args, 1));
    }
    if (!args[2].is_none()) {
      TD_ASSIGN_OR_RETURN(hi, TensorArg(op, args, 2));
    }
    if (lo == nullptr && hi == nullptr) {
      return RuntimeErr(absl::StrCat(op, ": At least one of 'min' or 'max' must not be None"));
    }
  }
  absl::InlinedVector<const TensorMeta*, 3> inputs = {self};
  if (lo != nullptr) inputs.push_back(lo);
  if (hi != nullptr) inputs.push_back(hi);
  TD_ASSIGN_OR_RETURN(Device device, CommonDevice(op, inputs, /*allow_cpu_scalars=*/true));
  absl::InlinedVector<PromotionOperand, 3> operands;
  for (const TensorMeta* t : inputs) operands.push_back({t, nullptr});
  TD_ASSIGN_OR_RETURN(ScalarType dtype, ResultType(op, operands));
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, dtype));
  // PyTorch's clamp kernel with both bounds has no bool version; one bound
  // (clamp_min / clamp_max) does.
  if (dtype == ScalarType::kBool && lo != nullptr && hi != nullptr) return NotImplementedForDtype(op, dtype);
  TD_ASSIGN_OR_RETURN(TensorMeta out, IteratorOutput(op, inputs, dtype, dtype, device));
  return OneOutput(std::move(out));
}

absl::StatusOr<MetaResult> MaskedFill(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(const TensorMeta* mask, TensorArg(op, args, 1));
  std::optional<Scalar> fill;
  if (args[2].kind() == Value::Kind::kTensor) {
    // masked_fill.Tensor: a 0-dim value tensor (of any dtype, converted to
    // self's as PyTorch does); its value is only known to the kernel.
    const TensorMeta& v = args[2].tensor();
    if (v.dim() != 0) {
      return RuntimeErr(absl::StrCat(op, ": masked_fill_ only supports a 0-dimensional value tensor, but got tensor "
                                         "with ", v.dim(), " dimension(s)."));
    }
  } else {
    TD_ASSIGN_OR_RETURN(Scalar value, ScalarArg(op, args, 2));
    fill = value;
  }
  const TensorMeta* tensors[] = {self, mask};
  TD_ASSIGN_OR_RETURN(Device device, CommonDevice(op, tensors, /*allow_cpu_scalars=*/true));
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, self->dtype));
  // PyTorch: expand_outplace(mask, self), then a contiguous clone of self.
  const Shape shapes[] = {mask->sizes, self->sizes};
  TD_ASSIGN_OR_RETURN(Shape sizes, BroadcastShapes(op, shapes));
  if (mask->dtype != ScalarType::kBool && mask->dtype != ScalarType::kUInt8) {
    return RuntimeErr(absl::StrCat(op, ": masked_fill_ only supports boolean masks, but got mask with dtype ",
                                   DtypeName(mask->dtype)));
  }
  if (fill) TD_RETURN_IF_ERROR(CheckFillValue(op, *fill, self->dtype));
  TD_RETURN_IF_ERROR(CheckNewSizes(op, sizes, self->dtype));
  return OneOutput(TensorMeta::Contiguous(std::move(sizes), self->dtype, device));
}

// ---- addcmul / addcdiv, gelu -------------------------------------------------

absl::StatusOr<MetaResult> Addcmul(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(const TensorMeta* t1, TensorArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(const TensorMeta* t2, TensorArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(Scalar value, ScalarArg(op, args, 3));
  const TensorMeta* tensors[] = {self, t1, t2};
  TD_ASSIGN_OR_RETURN(Device device, CommonDevice(op, tensors, /*allow_cpu_scalars=*/true));
  const bool is_div = absl::StartsWith(op, "addcdiv");
  if (is_div && IsIntegral(t1->dtype, /*include_bool=*/true) && IsIntegral(t2->dtype, /*include_bool=*/true)) {
    return RuntimeErr(absl::StrCat(
        op, ": Integer division with addcdiv is no longer supported, and in a future release addcdiv will perform a "
            "true division of tensor1 and tensor2. Use (input + value * tensor1 / tensor2) with floating tensors."));
  }
  PromotionOperand operands[3] = {{self, nullptr}, {t1, nullptr}, {t2, nullptr}};
  TD_ASSIGN_OR_RETURN(ScalarType common, ResultType(op, operands));
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, common));
  if (common == ScalarType::kBool) return NotImplementedForDtype(op, common);
  // PyTorch converts `value` to the compute dtype unchecked (0.5 -> 0 for int64).
  (void)value;
  TD_ASSIGN_OR_RETURN(TensorMeta out, IteratorOutput(op, tensors, common, common, device));
  return OneOutput(std::move(out));
}

absl::StatusOr<MetaResult> Gelu(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_RETURN_IF_ERROR(ExpectArgCount(op, args, 2));
  if (args[1].kind() != Value::Kind::kString) return TypeErr(absl::StrCat(op, "(): argument 'approximate' must be str"));
  const std::string& approximate = args[1].str();
  if (approximate != "none" && approximate != "tanh") {
    return RuntimeErr(absl::StrCat(op, ": approximate argument must be either none or tanh (got '", approximate, "')"));
  }
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, self->dtype));
  if (!IsFloating(self->dtype)) return NotImplementedForDtype(op, self->dtype);
  return UnaryResult(op, *self, std::nullopt, self->dtype);
}

// ---- pointwise math: exp2 ... lerp --------------------------------------------
// Each follows the TensorIterator construction PyTorch 1.13 uses for it (so
// the output layout is PyTorch's), then refuses the dtypes PyTorch's CPU
// kernel does not dispatch, with its kernel name ('"expm1_vml_cpu" not
// implemented for 'Half'').

namespace {

// '<op>: "<kernel>" not implemented for '<Dtype>'', PyTorch's AT_DISPATCH text.
absl::Status KernelNotImplemented(absl::string_view op, absl::string_view kernel, ScalarType t) {
  return RuntimeErr(absl::StrCat(op, ": \"", kernel, "\" not implemented for '", DtypeC10Name(t), "'"));
}

// The output dtype of a one-output result.
ScalarType OutDtype(const MetaResult& r) { return r.outputs[0].dtype; }

}  // namespace

// exp2, expm1, log2, log1p: UnaryFloat's rule (integers and bool give
// float32); PyTorch's CPU kernels of expm1/log2/log1p (the "vml" ones) have
// no float16 version.
absl::StatusOr<MetaResult> UnaryFloatMath(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(MetaResult r, UnaryFloat(op, args));
  if (OutDtype(r) == ScalarType::kFloat16 && op != "exp2") {
    return KernelNotImplemented(op, absl::StrCat(op, "_vml_cpu"), OutDtype(r));
  }
  return r;
}

// silu(self): same dtype and layout as self; float32, float64 and bfloat16
// only ("silu_cpu" covers no integer, bool or float16 tensor).
absl::StatusOr<MetaResult> Silu(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, self->dtype));
  if (!IsFloating(self->dtype) || self->dtype == ScalarType::kFloat16) {
    return KernelNotImplemented(op, "silu_cpu", self->dtype);
  }
  return UnaryResult(op, *self, std::nullopt, self->dtype);
}

// square(self) is PyTorch's pow(self, 2): result_type(self, 2), so integers
// keep their dtype and bool gives int64; a unary op on self.to(that dtype).
absl::StatusOr<MetaResult> Square(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  const Scalar two = Scalar::Int(2);
  PromotionOperand operands[2] = {{self, nullptr}, {nullptr, &two}};
  TD_ASSIGN_OR_RETURN(ScalarType common, ResultType(op, operands));
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, common));
  return UnaryResult(op, *self, common, common);
}

// relu_(self): relu's checks (bool: "Boolean inputs not supported for relu"),
// then the in-place rules (InPlaceResult).
absl::StatusOr<MetaResult> ReluInPlace(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  if (self->dtype == ScalarType::kBool) return RuntimeErr(absl::StrCat(op, ": Boolean inputs not supported for relu"));
  return InPlaceResult(op, args, UnarySame);
}

namespace {

enum class RoundingMode { kNone, kTrunc, kFloor };

// The `str? rounding_mode` argument of div (index 2).
absl::StatusOr<RoundingMode> ReadRoundingMode(absl::string_view op, absl::Span<const Value> args) {
  TD_RETURN_IF_ERROR(ExpectArgCount(op, args, 3));
  const Value& v = args[2];
  if (v.is_none()) return RoundingMode::kNone;
  if (v.kind() != Value::Kind::kString) return TypeErr(absl::StrCat(op, "(): argument 'rounding_mode' must be str or None"));
  if (v.str() == "trunc") return RoundingMode::kTrunc;
  if (v.str() == "floor") return RoundingMode::kFloor;
  return RuntimeErr(absl::StrCat(op, ": div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '",
                                 v.str(), "'"));
}

// div with a rounding mode (args: self, other[, mode]): None is true
// division (integers give float32); "trunc" and "floor" keep the promoted dtype (integers stay integers), and
// their CPU kernels ("div_trunc_cpu", "div_floor_cpu") refuse bool.
absl::StatusOr<MetaResult> DivRounding(absl::string_view op, absl::Span<const Value> args, bool scalar_other,
                                       RoundingMode mode) {
  TD_RETURN_IF_ERROR(ExpectArgCount(op, args, 2));
  const BinaryKind kind = mode == RoundingMode::kNone ? BinaryKind::kTrueDiv : BinaryKind::kArith;
  const Value binary_args[] = {args[0], args[1]};
  TD_ASSIGN_OR_RETURN(MetaResult r, scalar_other ? BinaryTensorScalar(op, binary_args, kind)
                                                 : BinaryTensorTensor(op, binary_args, kind));
  if (OutDtype(r) == ScalarType::kBool) {
    return KernelNotImplemented(op, mode == RoundingMode::kTrunc ? "div_trunc_cpu" : "div_floor_cpu", OutDtype(r));
  }
  return r;
}

absl::StatusOr<MetaResult> DivWithMode(absl::string_view op, absl::Span<const Value> args, bool scalar_other) {
  TD_ASSIGN_OR_RETURN(RoundingMode mode, ReadRoundingMode(op, args));
  return DivRounding(op, args, scalar_other, mode);
}

// fmod: the promoted dtype; "fmod_cpu" refuses bool.
absl::StatusOr<MetaResult> FmodImpl(absl::string_view op, absl::Span<const Value> args, bool scalar_other) {
  TD_ASSIGN_OR_RETURN(MetaResult r, scalar_other ? BinaryTensorScalar(op, args, BinaryKind::kArith)
                                                 : BinaryTensorTensor(op, args, BinaryKind::kArith));
  if (OutDtype(r) == ScalarType::kBool) return KernelNotImplemented(op, "fmod_cpu", OutDtype(r));
  return r;
}

// bitwise_left_shift / bitwise_right_shift: the promoted dtype, which must be
// an integer type ("lshift_cpu" / "rshift_cpu" refuse bool and floating).
absl::StatusOr<MetaResult> ShiftImpl(absl::string_view op, absl::Span<const Value> args, bool scalar_other) {
  TD_ASSIGN_OR_RETURN(MetaResult r, scalar_other ? BinaryTensorScalar(op, args, BinaryKind::kArith)
                                                 : BinaryTensorTensor(op, args, BinaryKind::kArith));
  if (!IsIntegral(OutDtype(r), /*include_bool=*/false)) {
    return KernelNotImplemented(op, op == "bitwise_left_shift" ? "lshift_cpu" : "rshift_cpu", OutDtype(r));
  }
  return r;
}

}  // namespace

absl::StatusOr<MetaResult> DivMode(absl::string_view op, absl::Span<const Value> args) {
  return DivWithMode(op, args, /*scalar_other=*/false);
}

absl::StatusOr<MetaResult> DivModeScalar(absl::string_view op, absl::Span<const Value> args) {
  return DivWithMode(op, args, /*scalar_other=*/true);
}

// floor_divide(self, other) is div(self, other, rounding_mode="floor").
absl::StatusOr<MetaResult> FloorDivide(absl::string_view op, absl::Span<const Value> args) {
  return DivRounding(op, args, /*scalar_other=*/false, RoundingMode::kFloor);
}

absl::StatusOr<MetaResult> FloorDivideScalar(absl::string_view op, absl::Span<const Value> args) {
  return DivRounding(op, args, /*scalar_other=*/true, RoundingMode::kFloor);
}

absl::StatusOr<MetaResult> Fmod(absl::string_view op, absl::Span<const Value> args) {
  return FmodImpl(op, args, /*scalar_other=*/false);
}

absl::StatusOr<MetaResult> FmodScalar(absl::string_view op, absl::Span<const Value> args) {
  return FmodImpl(op, args, /*scalar_other=*/true);
}

// atan2(self, other): a float op (integers and bool give float32);
// "atan2_cpu" has no float16 kernel.
absl::StatusOr<MetaResult> Atan2(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(MetaResult r, BinaryTensorTensor(op, args, BinaryKind::kTrueDiv));
  if (OutDtype(r) == ScalarType::kFloat16) return KernelNotImplemented(op, "atan2_cpu", OutDtype(r));
  return r;
}

absl::StatusOr<MetaResult> BitwiseShift(absl::string_view op, absl::Span<const Value> args) {
  return ShiftImpl(op, args, /*scalar_other=*/false);
}

absl::StatusOr<MetaResult> BitwiseShiftScalar(absl::string_view op, absl::Span<const Value> args) {
  return ShiftImpl(op, args, /*scalar_other=*/true);
}

// lerp(self, end, weight): no type promotion — end (and a tensor weight) must
// have self's dtype ("expected dtype float for `end` but got dtype double");
// the output is the TensorIterator result of (self, end[, weight]) in that
// dtype. Kernels: float32, float64, bfloat16 (no float16, no integers).
absl::StatusOr<MetaResult> Lerp(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(const TensorMeta* end, TensorArg(op, args, 1));
  TD_RETURN_IF_ERROR(ExpectArgCount(op, args, 3));
  const TensorMeta* weight = nullptr;
  if (args[2].is_tensor()) {
    TD_ASSIGN_OR_RETURN(weight, TensorArg(op, args, 2));
  } else {
    TD_RETURN_IF_ERROR(ScalarArg(op, args, 2).status());
  }
  if (end->dtype != self->dtype) {
    return RuntimeErr(absl::StrCat(op, ": expected dtype ", TypeMetaName(self->dtype), " for `end` but got dtype ",
                                   TypeMetaName(end->dtype)));
  }
  if (weight != nullptr && weight->dtype != self->dtype) {
    return RuntimeErr(absl::StrCat(op, ": expected dtype ", TypeMetaName(self->dtype), " for `weight` but got dtype ",
                                   TypeMetaName(weight->dtype)));
  }
  const TensorMeta* tensors[] = {self, end, weight};
  TD_ASSIGN_OR_RETURN(Device device, CommonDevice(op, tensors, /*allow_cpu_scalars=*/true));
  std::vector<const TensorMeta*> inputs = {self, end};
  if (weight != nullptr) inputs.push_back(weight);
  TD_ASSIGN_OR_RETURN(TensorMeta out, IteratorOutput(op, inputs, std::nullopt, self->dtype, device));
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, self->dtype));
  if (!IsFloating(self->dtype) || self->dtype == ScalarType::kFloat16) {
    return KernelNotImplemented(op, weight != nullptr ? "lerp_kernel_tensor" : "lerp_kernel_scalar", self->dtype);
  }
  return OneOutput(std::move(out));
}

}  // namespace tensord::meta
