// Meta functions of reductions: sum, mean, amax/amin, argmax/argmin, max/min
// (all elements, or along a dim with indices). Outputs are contiguous, as
// PyTorch allocates them; dim lists, negative dims and keepdim follow
// PyTorch's make_dim_mask.
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
absl::Status ZeroNumelCheckDims(absl::string_view op, const TensorMeta& self, const std::vector<int64_t>& dims) {
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
  TD_ASSIGN_OR_RETURN(std::vector<int64_t> dims, IntListArg(op, args, 1));
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
  const Value dims = dim ? Value(std::vector<int64_t>{*dim}) : Value();
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
  const Value dims(std::vector<int64_t>{d});
  TD_ASSIGN_OR_RETURN(TensorMeta values, ReductionOutput(op, *self, dims, keepdim, self->dtype));
  TensorMeta indices = values;
  indices.dtype = ScalarType::kInt64;
  return TwoOutputs(std::move(values), std::move(indices));
}

}  // namespace tensord::meta
