// kernels/cpu/reduce_args.h — how the reduction and scan kernels read a
// call's arguments and check them, shared by the CPU kernels (reduce.cc,
// scan.cc) and the CUDA host side (cuda/reduce_kernels.h), so that both
// devices raise the same errors with the same texts:
//
//   TD_ASSIGN_OR_RETURN(ReductionArgs r, ReadSumMean(ctx, /*mean=*/false));
//
// Each Read* function but ReadReduction and ReadNansum starts with
// CheckContext (an internal error when the dispatcher's context is
// malformed); all check the outputs' sizes (internal errors: the meta
// function decides them). Internal to kernels/.
#ifndef TENSORD_KERNELS_CPU_REDUCE_ARGS_H_
#define TENSORD_KERNELS_CPU_REDUCE_ARGS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensord/kernels/registry.h"

namespace tensord::cpu {

// A reduction of `in` over the dims set in `mask` (one flag per dim of
// in), folding `count` elements into each output element.
struct ReductionArgs {
  TensorRef in;
  std::vector<bool> mask;
  bool keepdim = false;
  int64_t count = 1;
};

// Reads self (argument 0) reduced over `dim` (None or []: every dim) and
// checks that outputs[0] has the reduced sizes. Errors: ReductionMask's
// (IndexError for a dim out of range, RuntimeError for a repeated one),
// naming `name`.
absl::StatusOr<ReductionArgs> ReadReduction(const KernelContext& ctx, const char* name, const Value& dim,
                                            bool keepdim);

// sum / mean (self, dim, keepdim, *, dtype). RuntimeError for mean into a
// non-floating dtype ("mean(): could not infer output dtype. ...").
absl::StatusOr<ReductionArgs> ReadSumMean(const KernelContext& ctx, bool mean);

// amax / amin (self, dim, keepdim): `name` is "amax" or "amin".
absl::StatusOr<ReductionArgs> ReadAmaxAmin(const KernelContext& ctx, const char* name);

// max(self) / min(self): every element. RuntimeError for an empty input
// (it has no identity to give).
absl::StatusOr<ReductionArgs> ReadMaxMinAll(const KernelContext& ctx, const char* name);

// IndexError when an element of `out` would fold an empty reduced dim
// (amax and friends have no identity): "amax(): Expected reduction dim 1
// to have non-zero size."
absl::Status CheckNonEmptyReduction(const char* name, const ReductionArgs& r, const TensorRef& out);

// argmax / argmin (self, dim?, keepdim) and max.dim / min.dim (self, dim,
// keepdim): `dim` wrapped, or -1 for argmax without one (every element in
// row-major order).
struct ArgReduceArgs {
  TensorRef self;
  int64_t dim = -1;
  bool keepdim = false;
};
// Reads argmax / argmin (`with_values` false: one output, dim optional)
// or max.dim / min.dim (true: values and indices, dim given). Errors:
// WrapDim's IndexError; RuntimeError for an empty input without a dim;
// IndexError for an empty reduced dim.
absl::StatusOr<ArgReduceArgs> ReadArgReduce(const KernelContext& ctx, const char* name, bool with_values);

// nansum (self, dim, keepdim, *, dtype) of a floating self (integer and
// bool ones are plain sums: the caller redirects them to sum). Internal
// when the output is not floating.
absl::StatusOr<ReductionArgs> ReadNansum(const KernelContext& ctx);

// prod (self, *, dtype) / prod.dim_int (self, dim, keepdim, *, dtype).
absl::StatusOr<ReductionArgs> ReadProd(const KernelContext& ctx);

// all / any (self) and all.dim / any.dim (self, dim, keepdim).
absl::StatusOr<ReductionArgs> ReadAllAny(const KernelContext& ctx, const char* name);

// var / std, every overload: (self, unbiased), (self, dim, unbiased,
// keepdim), (self, dim, *, correction, keepdim). `correction` is what N is
// reduced by (unbiased: 1, else 0; correction=None: 1). Internal when the
// output is not floating.
struct VarStdArgs {
  ReductionArgs r;
  double correction = 1.0;
};
absl::StatusOr<VarStdArgs> ReadVarStd(const KernelContext& ctx, const char* name);

// norm.Scalar (self, p) / norm.ScalarOpt_dim (self, p, dim, keepdim) /
// norm.ScalarOpt_dim_dtype (..., *, dtype) / linalg_vector_norm (self,
// ord, dim, keepdim, *, dtype): `ord` is p (None: 2).
struct NormArgs {
  ReductionArgs r;
  double ord = 2.0;
};
absl::StatusOr<NormArgs> ReadNorm(const KernelContext& ctx);

// logsumexp (self, dim, keepdim).
absl::StatusOr<ReductionArgs> ReadLogsumexp(const KernelContext& ctx);

// cumsum / cumprod (self, dim, *, dtype): self and its wrapped dim (WrapDim's
// IndexError); outputs[0] must have self's sizes.
struct ScanArgs {
  TensorRef self;
  int64_t dim = 0;
};
absl::StatusOr<ScanArgs> ReadScan(const KernelContext& ctx, const char* name);

}  // namespace tensord::cpu

#endif  // TENSORD_KERNELS_CPU_REDUCE_ARGS_H_
