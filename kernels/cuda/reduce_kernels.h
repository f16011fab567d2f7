// kernels/cuda/reduce_kernels.h — the host side of the CUDA reduction
// kernels: sum, mean, amax, amin, max(), min(), argmax, argmin, max.dim,
// min.dim, nansum, prod, all, any, var, std, norm, linalg_vector_norm,
// logsumexp. Each reads the call's arguments as the op's CPU kernel does
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

#include <cmath>
#include <vector>

#include "../cpu/reduce_args.h"
#include "elementwise_kernels.h"
#include "reduce_call.h"

namespace tensord::cuda::ew {

// The kept and reduced geometries of a reduction of `in` over the dims set
// in `mask`, into `values` and/or `indices` (null when absent), whose dims
// are in's with the reduced ones removed, or kept as size 1 with `keepdim`.
absl::Status BuildReduceGeometry(absl::string_view op, const TensorRef& in, const std::vector<bool>& mask,
                                 bool keepdim, const TensorRef* values, const TensorRef* indices, ReduceCall* call);

// The calls' arguments are read and checked by the CPU kernels' functions
// (kernels/cpu/reduce_args.h).
using cpu::ArgReduceArgs;
using cpu::CheckNonEmptyReduction;
using cpu::NormArgs;
using cpu::ReductionArgs;
using cpu::ScanArgs;
using cpu::VarStdArgs;

template <class L>
absl::Status LaunchReduce(const KernelContext& ctx, const ReduceCall& call) {
  const int code = L::Reduce(call, ctx.stream);
  if (code == kLaunchOk) return absl::OkStatus();
  return LaunchError(ctx.op->full_name(), code, code > 0 ? L::ErrorString(code) : std::string());
}

template <class L>
absl::Status RunReduce(const KernelContext& ctx, ReduceOp op, ScalarType dtype, const ReductionArgs& r,
                       const TensorRef* values, const TensorRef* indices, double arg = 0) {
  ReduceCall call;
  call.op = op;
  call.dtype = dtype;
  call.arg = arg;
  TD_RETURN_IF_ERROR(BuildReduceGeometry(ctx.op->full_name(), r.in, r.mask, r.keepdim, values, indices, &call));
  return LaunchReduce<L>(ctx, call);
}

// sum / mean (self, dim, keepdim, *, dtype): every element converted to the
// output's dtype (integers summed to int64 exactly), accumulated in double
// or int64.
template <class L, bool kMean>
absl::Status SumMean(KernelContext& ctx) {
  const char* name = kMean ? "mean" : "sum";
  TD_ASSIGN_OR_RETURN(const ReductionArgs r, cpu::ReadSumMean(ctx, kMean));
  const TensorRef& out = ctx.outputs[0];
  const ScalarType out_t = out.meta->dtype;
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
  TD_ASSIGN_OR_RETURN(const ReductionArgs r, cpu::ReadAmaxAmin(ctx, name));
  return ExtremeReduce<L, kMax>(ctx, name, r);
}

// max(self) / min(self): over every element.
template <class L, bool kMax>
absl::Status MaxMinAll(KernelContext& ctx) {
  const char* name = kMax ? "max" : "min";
  TD_ASSIGN_OR_RETURN(const ReductionArgs r, cpu::ReadMaxMinAll(ctx, name));
  return ExtremeReduce<L, kMax>(ctx, name, r);
}

// argmax / argmin (values == nullptr) and max.dim / min.dim, read by
// cpu::ReadArgReduce: the extreme along `a.dim` (< 0: every element, in
// row-major order) and its first index.
template <class L, bool kMax>
absl::Status ArgReduce(const KernelContext& ctx, const char* name, uint32_t dtypes, const ArgReduceArgs& a,
                       const TensorRef* values, const TensorRef& indices) {
  const TensorRef& self = a.self;
  ReductionArgs r;
  r.in = self;
  r.keepdim = a.keepdim;
  r.mask.assign(static_cast<size_t>(self.meta->dim()), a.dim < 0);
  if (a.dim >= 0 && self.meta->dim() > 0) r.mask[static_cast<size_t>(a.dim)] = true;
  TD_INTERNAL_CHECK(indices.meta->dtype == ScalarType::kInt64, name, ": indices must be int64");
  const ScalarType dt = self.meta->dtype;
  if (!DtypeInSet(dt, dtypes)) return DtypeNotImplemented(name, dt);
  if (values != nullptr) TD_INTERNAL_CHECK(values->meta->dtype == dt, name, ": values dtype");
  return RunReduce<L>(ctx, kMax ? ReduceOp::kArgMax : ReduceOp::kArgMin, dt, r, values, &indices);
}

template <class L, bool kMax>
absl::Status ArgMaxMin(KernelContext& ctx) {
  const char* name = kMax ? "argmax" : "argmin";
  TD_ASSIGN_OR_RETURN(const ArgReduceArgs a, cpu::ReadArgReduce(ctx, name, /*with_values=*/false));
  return ArgReduce<L, kMax>(ctx, name, kSetInts | kSetFloats, a, nullptr, ctx.outputs[0]);
}

template <class L, bool kMax>
absl::Status MaxMinDim(KernelContext& ctx) {
  const char* name = kMax ? "max" : "min";
  TD_ASSIGN_OR_RETURN(const ArgReduceArgs a, cpu::ReadArgReduce(ctx, name, /*with_values=*/true));
  return ArgReduce<L, kMax>(ctx, name, kSetAllButF8, a, &ctx.outputs[0], ctx.outputs[1]);
}

// nansum (self, dim, keepdim, *, dtype): integer and bool inputs are plain
// sums (as the CPU: PyTorch redirects them); floating inputs are converted
// to the output's (floating) dtype and skip NaNs.
template <class L>
absl::Status Nansum(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  if (IsIntegral(self.meta->dtype, /*include_bool=*/true)) return SumMean<L, false>(ctx);
  TD_ASSIGN_OR_RETURN(const ReductionArgs r, cpu::ReadNansum(ctx));
  const TensorRef& out = ctx.outputs[0];
  if (!DtypeInSet(out.meta->dtype, ReduceDtypes(ReduceOp::kNansum))) {
    return DtypeNotImplemented("nansum", out.meta->dtype);
  }
  return RunReduce<L>(ctx, ReduceOp::kNansum, out.meta->dtype, r, &out, nullptr);
}

// prod (self, *, dtype) / prod.dim_int (self, dim, keepdim, *, dtype): the
// input converted to the output's dtype, multiplied in double (floating)
// or int64 (wrapping).
template <class L>
absl::Status Prod(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const ReductionArgs r, cpu::ReadProd(ctx));
  const TensorRef& out = ctx.outputs[0];
  if (!DtypeInSet(out.meta->dtype, ReduceDtypes(ReduceOp::kProd))) {
    return DtypeNotImplemented("prod", out.meta->dtype);
  }
  return RunReduce<L>(ctx, ReduceOp::kProd, out.meta->dtype, r, &out, nullptr);
}

// all / any (self) and all.dim / any.dim (self, dim, keepdim): the input
// read as bool; the output bool, or uint8 for uint8 inputs (the meta
// function's choice).
template <class L, bool kAll>
absl::Status AllAny(KernelContext& ctx) {
  const char* name = kAll ? "all" : "any";
  TD_ASSIGN_OR_RETURN(const ReductionArgs r, cpu::ReadAllAny(ctx, name));
  const TensorRef& out = ctx.outputs[0];
  TD_INTERNAL_CHECK(out.meta->dtype == ScalarType::kBool || out.meta->dtype == ScalarType::kUInt8, name,
                    ": output dtype ", DtypeName(out.meta->dtype));
  return RunReduce<L>(ctx, kAll ? ReduceOp::kAll : ReduceOp::kAny, out.meta->dtype, r, &out, nullptr);
}

// var / std, every overload (self, unbiased) / (self, dim, unbiased,
// keepdim) / (self, dim, *, correction, keepdim): M2 / max(N - correction,
// 0) (a non-positive divisor gives inf or NaN, as PyTorch), std its square
// root; the elements read as double, the result in the output's dtype.
template <class L, bool kStd>
absl::Status VarStd(KernelContext& ctx) {
  const char* name = kStd ? "std" : "var";
  TD_ASSIGN_OR_RETURN(const VarStdArgs a, cpu::ReadVarStd(ctx, name));
  const TensorRef& out = ctx.outputs[0];
  if (!DtypeInSet(out.meta->dtype, kSetFloats)) return DtypeNotImplemented(name, out.meta->dtype);
  return RunReduce<L>(ctx, kStd ? ReduceOp::kStd : ReduceOp::kVar, out.meta->dtype, a.r, &out, nullptr,
                      a.correction);
}

// norm.Scalar (self, p) / norm.ScalarOpt_dim (self, p, dim, keepdim) /
// norm.ScalarOpt_dim_dtype (..., *, dtype) / linalg_vector_norm (self, ord,
// dim, keepdim, *, dtype): the input converted to the output's dtype;
// p = 0 counts non-zeros, inf / -inf take the max / min of |x|, other p
// give (sum |x|^p)^(1/p) (p = 1 and 2 without pow); an empty reduction
// gives 0 (the meta function refuses the ones PyTorch refuses).
template <class L>
absl::Status Norm(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const NormArgs a, cpu::ReadNorm(ctx));
  const ReductionArgs& r = a.r;
  const double ord = a.ord;
  const TensorRef& out = ctx.outputs[0];
  if (!DtypeInSet(out.meta->dtype, kSetFloats)) return DtypeNotImplemented("norm", out.meta->dtype);
  ReduceOp op = ReduceOp::kNormP;
  if (std::isinf(ord)) {
    op = ord > 0 ? ReduceOp::kNormInf : ReduceOp::kNormNegInf;
  } else if (ord == 0) {
    op = ReduceOp::kNormZero;
  } else if (ord == 1) {
    op = ReduceOp::kNormOne;
  } else if (ord == 2) {
    op = ReduceOp::kNormTwo;
  }
  return RunReduce<L>(ctx, op, out.meta->dtype, r, &out, nullptr, ord);
}

// logsumexp (self, dim, keepdim): max + log(sum(exp(x - max))), the max
// taken as 0 where it is infinite (as the CPU); integers give float32 (the
// meta function's choice).
template <class L>
absl::Status Logsumexp(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const ReductionArgs r, cpu::ReadLogsumexp(ctx));
  const TensorRef& out = ctx.outputs[0];
  if (!DtypeInSet(out.meta->dtype, kSetFloats)) return DtypeNotImplemented("logsumexp", out.meta->dtype);
  return RunReduce<L>(ctx, ReduceOp::kLogsumexp, out.meta->dtype, r, &out, nullptr);
}

// cumsum / cumprod (self, dim, *, dtype): the input converted to the
// output's dtype (the meta function's: dtype=, or the input's with integers
// and bool widened to int64), accumulated along `dim` in double (floating)
// or int64 (wrapping), each prefix written; a 0-dim tensor scans as one
// element.
template <class L, bool kProd>
absl::Status CumScan(KernelContext& ctx) {
  const char* name = kProd ? "cumprod" : "cumsum";
  TD_ASSIGN_OR_RETURN(const ScanArgs a, cpu::ReadScan(ctx, name));
  const TensorRef& self = a.self;
  const int64_t dim = a.dim;
  const TensorRef& out = ctx.outputs[0];
  const TensorMeta& im = *self.meta;
  const TensorMeta& om = *out.meta;
  ScanCall call;
  call.op = kProd ? ScanOp::kCumprod : ScanOp::kCumsum;
  call.dtype = om.dtype;
  call.in = self.data_at_offset();
  call.in_dtype = im.dtype;
  call.out = out.data_at_offset();
  Shape sizes, in_strides, out_strides;  // the dims other than `dim`
  call.length = 1;
  for (int64_t d = 0; d < im.dim(); ++d) {
    if (d == dim) {
      call.length = im.sizes[d];
      call.in_step = im.strides[d] * im.itemsize();
      call.out_step = om.strides[d] * om.itemsize();
      continue;
    }
    sizes.push_back(im.sizes[d]);
    in_strides.push_back(im.strides[d] * im.itemsize());
    out_strides.push_back(om.strides[d] * om.itemsize());
  }
  if (call.length == 0) return absl::OkStatus();
  if (!DtypeInSet(om.dtype, kScanDtypes)) return DtypeNotImplemented(name, om.dtype);
  const int64_t* strides[] = {out_strides.data(), in_strides.data()};
  if (!BuildGeometry(static_cast<int>(sizes.size()), sizes.data(), 2, strides, &call.lines)) {
    return NotImplementedErr(absl::StrCat(name, ": CUDA scans support at most ", kMaxDims,
                                          " dimensions besides the scanned one after merging; got ",
                                          ShapeToString(im.sizes)));
  }
  const int code = L::Scan(call, ctx.stream);
  if (code == kLaunchOk) return absl::OkStatus();
  return LaunchError(ctx.op->full_name(), code, code > 0 ? L::ErrorString(code) : std::string());
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
      {"min.dim", MaxMinDim<L, false>}, {"nansum", Nansum<L>},           {"prod", Prod<L>},
      {"prod.dim_int", Prod<L>},        {"all", AllAny<L, true>},         {"all.dim", AllAny<L, true>},
      {"any", AllAny<L, false>},        {"any.dim", AllAny<L, false>},
      {"var", VarStd<L, false>},        {"var.dim", VarStd<L, false>},    {"var.correction", VarStd<L, false>},
      {"std", VarStd<L, true>},         {"std.dim", VarStd<L, true>},     {"std.correction", VarStd<L, true>},
      {"norm.Scalar", Norm<L>},         {"norm.ScalarOpt_dim", Norm<L>},  {"norm.ScalarOpt_dim_dtype", Norm<L>},
      {"linalg_vector_norm", Norm<L>},  {"logsumexp", Logsumexp<L>},
      {"cumsum", CumScan<L, false>},    {"cumprod", CumScan<L, true>},
  };
  for (const Entry& e : entries) TD_RETURN_IF_ERROR(r.Register(device, e.name, e.fn));
  return absl::OkStatus();
}

}  // namespace tensord::cuda::ew

#endif  // TENSORD_KERNELS_CUDA_REDUCE_KERNELS_H_
