// The argument checks of the elementwise kernels (elementwise_args.h),
// shared by the CPU kernels and the CUDA host side.
#include "elementwise_args.h"

#include "absl/strings/str_cat.h"
#include "kernel_util.h"

namespace tensord::cpu {

absl::Status ExpectBoolOutput(const char* name, const TensorRef& out) {
  if (out.meta->dtype != ScalarType::kBool) {
    return InternalErr(absl::StrCat("internal: ", name, ": output dtype is ", DtypeName(out.meta->dtype),
                                    ", expected bool"));
  }
  return absl::OkStatus();
}

absl::Status CheckPowScalarExponent(ScalarType out_dtype, const Scalar& exponent) {
  if (IsIntegral(out_dtype, /*include_bool=*/false) && !exponent.is_float() && exponent.to_int() < 0) {
    return RuntimeErr("pow: Integers to negative integer powers are not allowed.");
  }
  return absl::OkStatus();
}

absl::StatusOr<RoundingMode> ReadRoundingMode(const KernelContext& ctx) {
  if (ctx.args.size() <= 2) return RoundingMode::kFloor;
  const Value& mode = ctx.args[2];
  if (mode.is_none()) return RoundingMode::kNone;
  if (mode.kind() != Value::Kind::kString || (mode.str() != "trunc" && mode.str() != "floor")) {
    return RuntimeErr("div expected rounding_mode to be one of None, 'trunc', or 'floor'");
  }
  return mode.str() == "floor" ? RoundingMode::kFloor : RoundingMode::kTrunc;
}

absl::Status CheckClampBounds(bool has_min, bool has_max) {
  if (!has_min && !has_max) return RuntimeErr("clamp: At least one of 'min' or 'max' must not be None");
  return absl::OkStatus();
}

absl::StatusOr<ClampTensorArgs> ReadClampTensor(const KernelContext& ctx, ClampKind kind) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  ClampTensorArgs a;
  TD_ASSIGN_OR_RETURN(a.self, InputTensor(ctx, 0));
  a.name = kind == ClampKind::kMin ? "clamp_min" : kind == ClampKind::kMax ? "clamp_max" : "clamp";
  const bool has_min = kind == ClampKind::kMin || (kind == ClampKind::kBoth && ctx.args[1].is_tensor());
  const bool has_max = kind == ClampKind::kMax || (kind == ClampKind::kBoth && ctx.args[2].is_tensor());
  TD_RETURN_IF_ERROR(CheckClampBounds(has_min, has_max));
  if (has_min) {
    TD_ASSIGN_OR_RETURN(a.min, InputTensor(ctx, 1));
  }
  if (has_max) {
    TD_ASSIGN_OR_RETURN(a.max, InputTensor(ctx, kind == ClampKind::kBoth ? 2 : 1));
  }
  return a;
}

absl::Status CheckMaskedFillMask(const TensorMeta& mask) {
  if (mask.dtype != ScalarType::kBool && mask.dtype != ScalarType::kUInt8) {
    return RuntimeErr(
        absl::StrCat("masked_fill only supports boolean masks, but got mask with dtype ", DtypeName(mask.dtype)));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> ReadGeluTanh(const KernelContext& ctx) {
  const Value& approximate = ctx.args[1];
  const bool is_string = approximate.kind() == Value::Kind::kString;
  const bool tanh_approx = is_string && approximate.str() == "tanh";
  if (!tanh_approx && !(is_string && approximate.str() == "none")) {
    return RuntimeErr("gelu: approximate argument must be either none or tanh.");
  }
  return tanh_approx;
}

}  // namespace tensord::cpu
