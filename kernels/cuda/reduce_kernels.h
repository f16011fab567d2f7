// kernels/cuda/reduce_kernels.h — the host side of the CUDA reduction
// kernels: sum, mean, amax, amin, max(), min(), argmax, argmin, max.dim,
// min.dim. Each reads the call's arguments as the op's CPU kernel does
// (kernels/cpu/reduce.cc: the same checks, errors and dtypes) and describes
// one launch (ReduceCall) to `L`, the device (see elementwise_kernels.h):
//
//   RegisterReduceKernels<CudaLaunch>(registry, DeviceType::kCUDA);
//
// Results may differ from the CPU's in the last bits of a floating sum
// (both accumulate in double, in different orders); on one device they do
// not depend on the launch (reduce.cuh). Host code only.
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_REDUCE_KERNELS_H_
#define TENSORD_KERNELS_CUDA_REDUCE_KERNELS_H_

#include <vector>

#include "elementwise_kernels.h"
#include "reduce_call.h"

namespace tensord::cuda::ew {

// The kept and reduced geometries of a reduction of `in` over the dims set
// in `mask`, into `values` and/or `indices` (null when absent), whose dims
// are in's with the reduced ones removed, or kept as size 1 with `keepdim`.
absl::Status BuildReduceGeometry(absl::string_view op, const TensorRef& in, const std::vector<bool>& mask,
                                 bool keepdim, const TensorRef* values, const TensorRef* indices, ReduceCall* call);

// The reduced dims of (self, dim, keepdim) and the elements folded into
// each output; an internal error when `out` does not have the reduced shape.
struct ReductionArgs {
  TensorRef in;
  std::vector<bool> mask;
  bool keepdim = false;
};
absl::StatusOr<ReductionArgs> ReadReduction(const KernelContext& ctx, const char* name, const Value& dim,
                                            bool keepdim);

// IndexError when an output element would fold an empty reduced dim
// (amax and friends have no identity to give): "amax(): Expected
// reduction dim 1 to have non-zero size."
absl::Status CheckNonEmptyReduction(const char* name, const ReductionArgs& r, const TensorRef& out);

template <class L>
absl::Status LaunchReduce(const KernelContext& ctx, const ReduceCall& call) {
  const int code = L::Reduce(call, ctx.stream);
  if (code == kLaunchOk) return absl::OkStatus();
  return LaunchError(ctx.op->full_name(), code, code > 0 ? L::ErrorString(code) : std::string());
}

template <class L>
absl::Status RunReduce(const KernelContext& ctx, ReduceOp op, ScalarType dtype, const ReductionArgs& r,
                       const TensorRef* values, const TensorRef* indices) {
  ReduceCall call;
  call.op = op;
  call.dtype = dtype;
  TD_RETURN_IF_ERROR(BuildReduceGeometry(ctx.op->full_name(), r.in, r.mask, r.keepdim, values, indices, &call));
  return LaunchReduce<L>(ctx, call);
}

// sum / mean (self, dim, keepdim, *, dtype): every element converted to the
// output's dtype (integers summed to int64 exactly), accumulated in double
// or int64.
template <class L, bool kMean>
absl::Status SumMean(KernelContext& ctx) {
  const char* name = kMean ? "mean" : "sum";
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(ReductionArgs r, ReadReduction(ctx, name, ctx.args[1], ctx.args[2].to_bool()));
  const TensorRef& out = ctx.outputs[0];
  const ScalarType out_t = out.meta->dtype;
  if (kMean && !IsFloating(out_t)) {
    return RuntimeErr(absl::StrCat("mean(): could not infer output dtype. Input dtype must be either a floating "
                                   "point or complex dtype. Got: ",
                                   cpu::TorchTypeName(out_t)));
  }
  // The dtype the CPU kernel computes in (the input's when integers sum to
  // int64, else the output's) decides what is refused.
  const bool int_to_long = out_t == ScalarType::kInt64 && IsIntegral(r.in.meta->dtype, true);
  const ScalarType computed = int_to_long ? r.in.meta->dtype : out_t;
  if (!DtypeInSet(computed, kSetAllButF8)) return DtypeNotImplemented(name, computed);
  return RunReduce<L>(ctx, kMean ? ReduceOp::kMean : ReduceOp::kSum, out_t, r, &out, nullptr);
}

template <class L, bool kMax>
absl::Status ExtremeReduce(KernelContext& ctx, const char* name, const ReductionArgs& r) {
  const TensorRef& out = ctx.outputs[0];
  TD_RETURN_IF_ERROR(CheckNonEmptyReduction(name, r, out));
  const ScalarType dt = out.meta->dtype;
  if (!DtypeInSet(dt, kSetAllButF8)) return DtypeNotImplemented(name, dt);
  return RunReduce<L>(ctx, kMax ? ReduceOp::kMax : ReduceOp::kMin, dt, r, &out, nullptr);
}

// amax / amin (self, dim, keepdim).
template <class L, bool kMax>
absl::Status AmaxAmin(KernelContext& ctx) {
  const char* name = kMax ? "amax" : "amin";
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(ReductionArgs r, ReadReduction(ctx, name, ctx.args[1], ctx.args[2].to_bool()));
  return ExtremeReduce<L, kMax>(ctx, name, r);
}

// max(self) / min(self): over every element.
template <class L, bool kMax>
absl::Status MaxMinAll(KernelContext& ctx) {
  const char* name = kMax ? "max" : "min";
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(ReductionArgs r, ReadReduction(ctx, name, Value(), /*keepdim=*/false));
  if (r.in.meta->numel() == 0) {
    return RuntimeErr(absl::StrCat(name,
                                   "(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                                   "reduction dim with the 'dim' argument."));
  }
  return ExtremeReduce<L, kMax>(ctx, name, r);
}

// argmax / argmin (values == nullptr) and max.dim / min.dim: the extreme
// along `dim` (< 0: every element, in row-major order) and its first index.
template <class L, bool kMax>
absl::Status ArgReduce(const KernelContext& ctx, const char* name, uint32_t dtypes, const TensorRef& self,
                       int64_t dim, bool keepdim, const TensorRef* values, const TensorRef& indices) {
  ReductionArgs r;
  r.in = self;
  r.keepdim = keepdim;
  r.mask.assign(static_cast<size_t>(self.meta->dim()), dim < 0);
  if (dim < 0) {
    if (self.meta->numel() == 0) {
      return RuntimeErr(absl::StrCat(name, "(): Expected reduction dim to be specified for input.numel() == 0."));
    }
  } else if (self.meta->dim() > 0) {
    r.mask[static_cast<size_t>(dim)] = true;
    if (self.meta->sizes[dim] == 0) {
      return IndexErr(absl::StrCat(name, "(): Expected reduction dim ", dim, " to have non-zero size."));
    }
  }
  TD_INTERNAL_CHECK(indices.meta->dtype == ScalarType::kInt64, name, ": indices must be int64");
  const ScalarType dt = self.meta->dtype;
  if (!DtypeInSet(dt, dtypes)) return DtypeNotImplemented(name, dt);
  if (values != nullptr) TD_INTERNAL_CHECK(values->meta->dtype == dt, name, ": values dtype");
  return RunReduce<L>(ctx, kMax ? ReduceOp::kArgMax : ReduceOp::kArgMin, dt, r, values, &indices);
}

template <class L, bool kMax>
absl::Status ArgMaxMin(KernelContext& ctx) {
  const char* name = kMax ? "argmax" : "argmin";
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  int64_t dim = -1;
  if (!ctx.args[1].is_none()) {
    TD_ASSIGN_OR_RETURN(dim, WrapDim(name, ctx.args[1].to_int(), self.meta->dim()));
  }
  return ArgReduce<L, kMax>(ctx, name, kSetInts | kSetFloats, self, dim, ctx.args[2].to_bool(), nullptr,
                            ctx.outputs[0]);
}

template <class L, bool kMax>
absl::Status MaxMinDim(KernelContext& ctx) {
  const char* name = kMax ? "max" : "min";
  TD_RETURN_IF_ERROR(CheckContext(ctx, 2));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(int64_t dim, WrapDim(name, ctx.args[1].to_int(), self.meta->dim()));
  return ArgReduce<L, kMax>(ctx, name, kSetAllButF8, self, dim, ctx.args[2].to_bool(), &ctx.outputs[0],
                            ctx.outputs[1]);
}

template <class L>
absl::Status RegisterReduceKernels(KernelRegistry& r, DeviceType device) {
  struct Entry {
    const char* name;
    KernelFn fn;
  };
  const Entry entries[] = {
      {"sum", SumMean<L, false>},       {"mean", SumMean<L, true>},       {"amax", AmaxAmin<L, true>},
      {"amin", AmaxAmin<L, false>},     {"max", MaxMinAll<L, true>},      {"min", MaxMinAll<L, false>},
      {"argmax", ArgMaxMin<L, true>},   {"argmin", ArgMaxMin<L, false>},  {"max.dim", MaxMinDim<L, true>},
      {"min.dim", MaxMinDim<L, false>},
  };
  for (const Entry& e : entries) TD_RETURN_IF_ERROR(r.Register(device, e.name, e.fn));
  return absl::OkStatus();
}

}  // namespace tensord::cuda::ew

#endif  // TENSORD_KERNELS_CUDA_REDUCE_KERNELS_H_
