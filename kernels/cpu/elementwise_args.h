// kernels/cpu/elementwise_args.h — the argument checks of the elementwise
// kernels (pow, div with a rounding mode, clamp, masked_fill, gelu, the
// comparisons), shared by the CPU kernels (binary.cc, unary.cc) and the
// CUDA host side (cuda/elementwise_kernels.h), so that both devices raise
// the same errors with the same texts:
//
//   TD_ASSIGN_OR_RETURN(const RoundingMode mode, ReadRoundingMode(ctx));
//
// Internal to kernels/.
#ifndef TENSORD_KERNELS_CPU_ELEMENTWISE_ARGS_H_
#define TENSORD_KERNELS_CPU_ELEMENTWISE_ARGS_H_

#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensord/kernels/registry.h"
#include "tensord/meta/tensor_meta.h"

namespace tensord::cpu {

// Internal error naming `name` unless `out` is bool (the comparisons' and
// predicates' output, decided by the meta function).
absl::Status ExpectBoolOutput(const char* name, const TensorRef& out);

// pow.Tensor_Scalar into `out_dtype`: RuntimeError for an integral output
// and a negative integer exponent.
absl::Status CheckPowScalarExponent(ScalarType out_dtype, const Scalar& exponent);

// The rounding of div.Tensor_mode / div.Scalar_mode (argument 2, None /
// 'trunc' / 'floor') and floor_divide (no argument: floor). RuntimeError
// for another value.
enum class RoundingMode { kNone, kTrunc, kFloor };
absl::StatusOr<RoundingMode> ReadRoundingMode(const KernelContext& ctx);

// RuntimeError when clamp has neither bound.
absl::Status CheckClampBounds(bool has_min, bool has_max);

// clamp.Tensor (self, min?, max?) and clamp_min.Tensor / clamp_max.Tensor
// (self, bound): self and the bounds given. Starts with CheckContext;
// CheckClampBounds's error.
enum class ClampKind { kBoth, kMin, kMax };
struct ClampTensorArgs {
  const char* name = "clamp";
  TensorRef self;
  std::optional<TensorRef> min, max;
};
absl::StatusOr<ClampTensorArgs> ReadClampTensor(const KernelContext& ctx, ClampKind kind);

// RuntimeError unless masked_fill's mask is bool or uint8.
absl::Status CheckMaskedFillMask(const TensorMeta& mask);

// gelu's `approximate` argument (argument 1): true for 'tanh', false for
// 'none'; RuntimeError for anything else.
absl::StatusOr<bool> ReadGeluTanh(const KernelContext& ctx);

}  // namespace tensord::cpu

#endif  // TENSORD_KERNELS_CPU_ELEMENTWISE_ARGS_H_
