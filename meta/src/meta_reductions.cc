// Meta functions of reductions: sum, mean, nansum, prod, var/std, norm,
// logsumexp, all/any, amax/amin, argmax/argmin, max/min (all elements, or
// along a dim with indices), and the scans cumsum/cumprod. Outputs are
// contiguous, as PyTorch allocates them; dim lists, negative dims and keepdim
// follow PyTorch's make_dim_mask (dim=None, [] and () reduce every dim).
#include <cmath>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "meta_common.h"
#include "meta_functions.h"
#include "tensord/meta/shape_rules.h"

namespace tensord::meta {
namespace {

// PyTorch's zero_numel_check_dims for one dim of an empty tensor. `dim` is
// reported as the caller passed it.
absl::Status ZeroNumelCheckDim(absl::string_view op, const TensorMeta& self, int64_t dim) {
  if (self.dim() == 0) {
    if (dim != 0 && dim != -1) {
      return IndexErr(absl::StrCat(op, "(): Expected reduction dim -1 or 0 for scalar but got ", dim));
    }
    return absl::OkStatus();
  }
  TD_ASSIGN_OR_RETURN(int64_t d, WrapDim(op, dim, self.dim()));
  if (self.sizes[d] == 0) {
    return IndexErr(absl::StrCat(op, "(): Expected reduction dim ", dim, " to have non-zero size."));
  }
  return absl::OkStatus();
}

// ... and for a dim list.
absl::Status ZeroNumelCheckDims(absl::string_view op, const TensorMeta& self, const Shape& dims) {
  if (dims.empty()) {
    return RuntimeErr(absl::StrCat(op, "(): Expected reduction dim to be specified for input.numel() == 0. "
                                       "Specify the reduction dim with the 'dim' argument."));
  }
  for (int64_t d : dims) TD_RETURN_IF_ERROR(ZeroNumelCheckDim(op, self, d));
  return absl::OkStatus();
}

// A contiguous reduction output of `dtype`.
absl::StatusOr<TensorMeta> ReductionOutput(absl::string_view op, const TensorMeta& self, const Value& dim,
                                           bool keepdim, ScalarType dtype) {
  TD_ASSIGN_OR_RETURN(std::vector<bool> mask, ReductionMask(op, dim, self.dim()));
  return TensorMeta::Contiguous(ReducedShape(self.sizes, mask, keepdim), dtype, self.device);
}

}  // namespace

absl::StatusOr<MetaResult> SumMean(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_RETURN_IF_ERROR(ExpectArgCount(op, args, 4));
  TD_ASSIGN_OR_RETURN(bool keepdim, BoolArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(std::optional<ScalarType> dtype, OptDtypeArg(op, args, 3));
  // get_dtype_from_self(promote_integers=true): integers and bool sum to int64.
  ScalarType out = dtype ? *dtype : (IsIntegral(self->dtype, /*include_bool=*/true) ? ScalarType::kInt64 : self->dtype);
  if (op == "mean" && !IsFloating(out)) {
    return RuntimeErr(absl::StrCat("mean(): could not infer output dtype. ", dtype ? "Optional" : "Input",
                                   " dtype must be either a floating point or complex dtype. Got: ",
                                   DtypeC10Name(dtype ? *dtype : self->dtype)));
  }
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, self->dtype));
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, out));
  TD_ASSIGN_OR_RETURN(TensorMeta result, ReductionOutput(op, *self, args[1], keepdim, out));
  return OneOutput(std::move(result));
}

absl::StatusOr<MetaResult> AmaxAmin(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(Shape dims, IntListArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(bool keepdim, BoolArg(op, args, 2));
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, self->dtype));
  if (self->numel() == 0) TD_RETURN_IF_ERROR(ZeroNumelCheckDims(op, *self, dims));
  TD_ASSIGN_OR_RETURN(TensorMeta result, ReductionOutput(op, *self, Value(dims), keepdim, self->dtype));
  return OneOutput(std::move(result));
}

absl::StatusOr<MetaResult> ArgMaxMin(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(std::optional<int64_t> dim, OptIntArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(bool keepdim, BoolArg(op, args, 2));
  if (dim) {
    TD_ASSIGN_OR_RETURN(int64_t d, WrapDim(op, *dim, self->dim()));
    if (self->numel() == 0) TD_RETURN_IF_ERROR(ZeroNumelCheckDim(op, *self, d));
  } else if (self->numel() == 0) {
    return IndexErr(absl::StrCat(op, "(): Expected reduction dim to be specified for input.numel() == 0."));
  }
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, self->dtype));
  if (self->dtype == ScalarType::kBool) return NotImplementedForDtype(op, self->dtype);
  const Value dims = dim ? Value(Shape{*dim}) : Value();
  TD_ASSIGN_OR_RETURN(TensorMeta result, ReductionOutput(op, *self, dims, keepdim, ScalarType::kInt64));
  return OneOutput(std::move(result));
}

absl::StatusOr<MetaResult> MaxMinAll(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  if (self->numel() == 0) {
    return RuntimeErr(absl::StrCat(op, "(): Expected reduction dim to be specified for input.numel() == 0. "
                                       "Specify the reduction dim with the 'dim' argument."));
  }
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, self->dtype));
  return OneOutput(TensorMeta::Contiguous({}, self->dtype, self->device));
}

absl::StatusOr<MetaResult> MaxMinDim(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(int64_t dim, IntArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(bool keepdim, BoolArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(int64_t d, WrapDim(op, dim, self->dim()));
  if (self->numel() == 0) TD_RETURN_IF_ERROR(ZeroNumelCheckDim(op, *self, d));
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, self->dtype));
  const Value dims(Shape{d});
  TD_ASSIGN_OR_RETURN(TensorMeta values, ReductionOutput(op, *self, dims, keepdim, self->dtype));
  TensorMeta indices = values;
  indices.dtype = ScalarType::kInt64;
  return TwoOutputs(std::move(values), std::move(indices));
}

absl::StatusOr<MetaResult> Nansum(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_RETURN_IF_ERROR(ExpectArgCount(op, args, 4));
  TD_ASSIGN_OR_RETURN(bool keepdim, BoolArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(std::optional<ScalarType> dtype, OptDtypeArg(op, args, 3));
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, self->dtype));
  // PyTorch: integer and bool inputs are plain sums (to int64 by default);
  // floating inputs run nansum_cpu, which only covers floating outputs.
  const bool integral = IsIntegral(self->dtype, /*include_bool=*/true);
  ScalarType out = dtype ? *dtype : (integral ? ScalarType::kInt64 : self->dtype);
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, out));
  if (!integral && !IsFloating(out)) return NotImplementedForDtype(op, out);
  TD_ASSIGN_OR_RETURN(TensorMeta result, ReductionOutput(op, *self, args[1], keepdim, out));
  return OneOutput(std::move(result));
}

absl::StatusOr<MetaResult> Prod(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  // prod(self, *, dtype) or prod.dim_int(self, dim, keepdim, *, dtype).
  const bool has_dim = args.size() == 4;
  if (!has_dim) TD_RETURN_IF_ERROR(ExpectArgCount(op, args, 2));
  TD_ASSIGN_OR_RETURN(std::optional<ScalarType> dtype, OptDtypeArg(op, args, has_dim ? 3 : 1));
  Value dims;
  bool keepdim = false;
  if (has_dim) {
    TD_ASSIGN_OR_RETURN(int64_t dim, IntArg(op, args, 1));
    TD_ASSIGN_OR_RETURN(keepdim, BoolArg(op, args, 2));
    dims = Value(Shape{dim});
  }
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, self->dtype));
  const ScalarType out =
      dtype ? *dtype : (IsIntegral(self->dtype, /*include_bool=*/true) ? ScalarType::kInt64 : self->dtype);
  // PyTorch's CPU prod covers every dtype but float16 and bfloat16.
  if (out == ScalarType::kFloat16 || out == ScalarType::kBFloat16 || IsFloat8(out)) {
    return NotImplementedForDtype(op, out);
  }
  TD_ASSIGN_OR_RETURN(TensorMeta result, ReductionOutput(op, *self, dims, keepdim, out));
  return OneOutput(std::move(result));
}

absl::StatusOr<MetaResult> VarStd(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  Value dims;
  bool keepdim = false;
  if (args.size() == 4) {  // var.dim / var.correction
    dims = args[1];
    TD_ASSIGN_OR_RETURN(keepdim, BoolArg(op, args, 3));
  } else {
    TD_RETURN_IF_ERROR(ExpectArgCount(op, args, 2));  // var(self, unbiased)
  }
  if (!IsFloating(self->dtype) || IsFloat8(self->dtype)) {
    if (IsFloat8(self->dtype)) return NotImplementedForDtype(op, self->dtype);
    return RuntimeErr(absl::StrCat(op, "(): std and var only support floating point and complex dtypes, got ",
                                   DtypeC10Name(self->dtype)));
  }
  TD_ASSIGN_OR_RETURN(TensorMeta result, ReductionOutput(op, *self, dims, keepdim, self->dtype));
  return OneOutput(std::move(result));
}

absl::StatusOr<MetaResult> Norm(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  // linalg_vector_norm(self, ord, dim?, keepdim, *, dtype?); norm.Scalar(self, p);
  // norm.ScalarOpt_dim(self, p?, dim, keepdim); norm.ScalarOpt_dim_dtype(..., *, dtype).
  const bool linalg = op == "linalg_vector_norm";
  Value dims;
  bool keepdim = false;
  std::optional<ScalarType> dtype;
  if (args.size() >= 4) {
    dims = args[2];
    TD_ASSIGN_OR_RETURN(keepdim, BoolArg(op, args, 3));
  } else {
    TD_RETURN_IF_ERROR(ExpectArgCount(op, args, 2));
  }
  if (args.size() == 5) {
    TD_ASSIGN_OR_RETURN(dtype, OptDtypeArg(op, args, 4));
  }
  TD_ASSIGN_OR_RETURN(std::optional<Scalar> p, OptScalarArg(op, args, 1));
  const double ord = p ? p->to_double() : 2.0;
  const bool float_in = IsFloating(self->dtype) && !IsFloat8(self->dtype);
  if (linalg) {
    if (!float_in) {
      return RuntimeErr(absl::StrCat("linalg.vector_norm: Expected a floating point or complex tensor as input. Got ",
                                     DtypeC10Name(self->dtype)));
    }
    if (dtype && (!IsFloating(*dtype) || IsFloat8(*dtype) || !PromoteTypes(self->dtype, *dtype).ok() ||
                  *PromoteTypes(self->dtype, *dtype) != *dtype)) {
      return RuntimeErr(absl::StrCat("linalg.vector_norm: the dtype of the input (", DtypeC10Name(self->dtype),
                                     ") should be convertible without narrowing to the specified dtype (",
                                     DtypeC10Name(*dtype), ")"));
    }
  } else {
    if (!float_in) {
      return RuntimeErr(absl::StrCat("norm(): input dtype should be either floating point or complex. Got ",
                                     DtypeC10Name(self->dtype), " instead."));
    }
    if (dtype && (!IsFloating(*dtype) || IsFloat8(*dtype))) {
      return RuntimeErr(absl::StrCat("norm(): the desired output dtype should be either floating point or complex. Got ",
                                     DtypeC10Name(*dtype), " instead."));
    }
  }
  TD_ASSIGN_OR_RETURN(std::vector<bool> mask, ReductionMask(op, dims, self->dim()));
  if (linalg && self->numel() == 0 && (ord < 0 || std::isinf(ord))) {
    const std::string ord_text = p ? p->ToString() : "2";
    // No identity for max/min-like norms: PyTorch refuses reducing an empty dim.
    const bool all = dims.is_none() || (dims.kind() == Value::Kind::kIntList && dims.int_list().empty());
    if (all) {
      return RuntimeErr(absl::StrCat("linalg.vector_norm cannot compute the ", ord_text,
                                     " norm on an empty tensor because the operation does not have an identity"));
    }
    for (int64_t d = 0; d < self->dim(); ++d) {
      if (mask[d] && self->sizes[d] == 0) {
        return RuntimeErr(absl::StrCat("linalg.vector_norm cannot compute the ", ord_text,
                                       " norm on the dimension ", d,
                                       " because this dimension is empty and the operation does not have an identity"));
      }
    }
  }
  const ScalarType out = dtype ? *dtype : self->dtype;
  return OneOutput(TensorMeta::Contiguous(ReducedShape(self->sizes, mask, keepdim), out, self->device));
}

absl::StatusOr<MetaResult> Logsumexp(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_RETURN_IF_ERROR(ExpectArgCount(op, args, 3));
  TD_ASSIGN_OR_RETURN(Shape dims, IntListArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(bool keepdim, BoolArg(op, args, 2));
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, self->dtype));
  // Integers and bool give the default float dtype; float16 has no CPU exp in PyTorch 1.13.
  const ScalarType out = IsIntegral(self->dtype, /*include_bool=*/true) ? ScalarType::kFloat32 : self->dtype;
  if (out == ScalarType::kFloat16) return NotImplementedForDtype(op, out);
  TD_ASSIGN_OR_RETURN(std::vector<bool> mask, ReductionMask(op, Value(dims), self->dim()));
  if (dims.empty() && !keepdim && self->dim() > 0 && self->numel() != 0) {
    // PyTorch 1.13 reduces every dim for dim=[] but then adds the kept-dim
    // maximum in place into the squeezed result, which fails (an empty input
    // takes another path: log(sum(exp(x))), i.e. -inf).
    return RuntimeErr(absl::StrCat(op, ": output with shape [] doesn't match the broadcast shape ",
                                   ShapeToString(Shape(self->dim(), 1))));
  }
  return OneOutput(TensorMeta::Contiguous(ReducedShape(self->sizes, mask, keepdim), out, self->device));
}

absl::StatusOr<MetaResult> AllAny(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  Value dims;
  bool keepdim = false;
  if (args.size() == 3) {  // all.dim / any.dim
    TD_ASSIGN_OR_RETURN(int64_t dim, IntArg(op, args, 1));
    TD_ASSIGN_OR_RETURN(keepdim, BoolArg(op, args, 2));
    dims = Value(Shape{dim});
  } else {
    TD_RETURN_IF_ERROR(ExpectArgCount(op, args, 1));
  }
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, self->dtype));
  // PyTorch 1.13 keeps uint8 for uint8 inputs; every other dtype gives bool.
  const ScalarType out = self->dtype == ScalarType::kUInt8 ? ScalarType::kUInt8 : ScalarType::kBool;
  TD_ASSIGN_OR_RETURN(TensorMeta result, ReductionOutput(op, *self, dims, keepdim, out));
  return OneOutput(std::move(result));
}

absl::StatusOr<MetaResult> CumScan(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_RETURN_IF_ERROR(ExpectArgCount(op, args, 3));
  TD_ASSIGN_OR_RETURN(int64_t dim, IntArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(std::optional<ScalarType> dtype, OptDtypeArg(op, args, 2));
  TD_RETURN_IF_ERROR(WrapDim(op, dim, self->dim()).status());
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, self->dtype));
  // Integers and bool accumulate in int64 unless dtype= says otherwise.
  const ScalarType out =
      dtype ? *dtype : (IsIntegral(self->dtype, /*include_bool=*/true) ? ScalarType::kInt64 : self->dtype);
  // PyTorch 1.13's CPU scans cover every dtype but float16 and bool.
  if (out == ScalarType::kFloat16 || out == ScalarType::kBool || IsFloat8(out)) {
    return NotImplementedForDtype(op, out);
  }
  // The output is contiguous whatever the input's layout (PyTorch 1.13 CPU).
  return OneOutput(TensorMeta::Contiguous(self->sizes, out, self->device));
}

}  // namespace tensord::meta
