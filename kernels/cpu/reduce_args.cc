// The argument reading and checking of the reduction and scan kernels
// (reduce_args.h), shared by the CPU kernels and the CUDA host side.
#include "reduce_args.h"

#include "absl/strings/str_cat.h"
#include "dtypes.h"
#include "kernel_util.h"
#include "tensord/meta/shape_rules.h"

namespace tensord::cpu {

absl::StatusOr<ReductionArgs> ReadReduction(const KernelContext& ctx, const char* name, const Value& dim,
                                            bool keepdim) {
  ReductionArgs r;
  r.keepdim = keepdim;
  TD_ASSIGN_OR_RETURN(r.in, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(r.mask, ReductionMask(name, dim, r.in.meta->dim()));
  TD_INTERNAL_CHECK(static_cast<int64_t>(r.mask.size()) == r.in.meta->dim());
  for (int64_t d = 0; d < r.in.meta->dim(); ++d) {
    if (r.mask[d]) r.count *= r.in.meta->sizes[d];
  }
  TD_RETURN_IF_ERROR(ExpectOutputSizes(name, ctx.outputs[0], ReducedShape(r.in.meta->sizes, r.mask, keepdim)));
  return r;
}

absl::StatusOr<ReductionArgs> ReadSumMean(const KernelContext& ctx, bool mean) {
  const char* name = mean ? "mean" : "sum";
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(ReductionArgs r, ReadReduction(ctx, name, ctx.args[1], ctx.args[2].to_bool()));
  const ScalarType out_t = ctx.outputs[0].meta->dtype;
  if (mean && !IsFloating(out_t)) {
    return RuntimeErr(absl::StrCat(
        "mean(): could not infer output dtype. Input dtype must be either a floating point or "
        "complex dtype. Got: ", TorchTypeName(out_t)));
  }
  return r;
}

absl::StatusOr<ReductionArgs> ReadAmaxAmin(const KernelContext& ctx, const char* name) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  return ReadReduction(ctx, name, ctx.args[1], ctx.args[2].to_bool());
}

absl::StatusOr<ReductionArgs> ReadMaxMinAll(const KernelContext& ctx, const char* name) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(ReductionArgs r, ReadReduction(ctx, name, Value(), /*keepdim=*/false));
  if (r.in.meta->numel() == 0) {
    return RuntimeErr(absl::StrCat(
        name, "(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
              "reduction dim with the 'dim' argument."));
  }
  return r;
}

absl::Status CheckNonEmptyReduction(const char* name, const ReductionArgs& r, const TensorRef& out) {
  if (r.count != 0 || out.meta->numel() == 0) return absl::OkStatus();
  for (int64_t d = 0; d < r.in.meta->dim(); ++d) {
    if (r.mask[d] && r.in.meta->sizes[d] == 0) {
      return IndexErr(absl::StrCat(name, "(): Expected reduction dim ", d, " to have non-zero size."));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ArgReduceArgs> ReadArgReduce(const KernelContext& ctx, const char* name, bool with_values) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, with_values ? 2 : 1));
  ArgReduceArgs a;
  TD_ASSIGN_OR_RETURN(a.self, InputTensor(ctx, 0));
  const TensorMeta& m = *a.self.meta;
  if (with_values || !ctx.args[1].is_none()) {
    TD_ASSIGN_OR_RETURN(a.dim, WrapDim(name, ctx.args[1].to_int(), m.dim()));
  }
  a.keepdim = ctx.args[2].to_bool();
  if (a.dim < 0) {
    if (m.numel() == 0) {
      return RuntimeErr(absl::StrCat(name, "(): Expected reduction dim to be specified for "
                                           "input.numel() == 0."));
    }
  } else if (m.dim() > 0 && m.sizes[a.dim] == 0) {  // a 0-dim tensor reduces as [1]
    return IndexErr(absl::StrCat(name, "(): Expected reduction dim ", a.dim, " to have non-zero size."));
  }
  return a;
}

absl::StatusOr<ReductionArgs> ReadNansum(const KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(ReductionArgs r, ReadReduction(ctx, "nansum", ctx.args[1], ctx.args[2].to_bool()));
  if (!IsFloating(ctx.outputs[0].meta->dtype)) {
    return InternalErr("internal: nansum of a float input to a non-float dtype");
  }
  return r;
}

namespace {

// prod / all / any: (self, ...) over every element, or the .dim overload
// (self, dim, keepdim, ...), which has `dim_overload_args` arguments.
absl::StatusOr<ReductionArgs> ReadOptionalDim(const KernelContext& ctx, const char* name, size_t dim_overload_args) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  Value dims;
  bool keepdim = false;
  if (ctx.args.size() == dim_overload_args) {
    dims = Value(Shape{ctx.args[1].to_int()});
    keepdim = ctx.args[2].to_bool();
  }
  return ReadReduction(ctx, name, dims, keepdim);
}

}  // namespace

absl::StatusOr<ReductionArgs> ReadProd(const KernelContext& ctx) { return ReadOptionalDim(ctx, "prod", 4); }

absl::StatusOr<ReductionArgs> ReadAllAny(const KernelContext& ctx, const char* name) {
  return ReadOptionalDim(ctx, name, 3);
}

absl::StatusOr<VarStdArgs> ReadVarStd(const KernelContext& ctx, const char* name) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  Value dims;
  bool keepdim = false;
  VarStdArgs a;
  if (ctx.args.size() == 4) {
    dims = ctx.args[1];
    keepdim = ctx.args[3].to_bool();
    if (ctx.op->schema.overload == "correction") {
      if (!ctx.args[2].is_none()) a.correction = static_cast<double>(ctx.args[2].to_int());
    } else {
      a.correction = ctx.args[2].to_bool() ? 1.0 : 0.0;
    }
  } else {
    a.correction = ctx.args[1].to_bool() ? 1.0 : 0.0;
  }
  TD_ASSIGN_OR_RETURN(a.r, ReadReduction(ctx, name, dims, keepdim));
  if (!IsFloating(ctx.outputs[0].meta->dtype)) {
    return InternalErr(absl::StrCat("internal: ", name, " to a non-float dtype"));
  }
  return a;
}

absl::StatusOr<NormArgs> ReadNorm(const KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  NormArgs a;
  const std::optional<Scalar> p = OptionalScalar(ctx, 1);
  a.ord = p ? p->to_double() : 2.0;
  Value dims;
  bool keepdim = false;
  if (ctx.args.size() >= 4) {
    dims = ctx.args[2];
    keepdim = ctx.args[3].to_bool();
  }
  TD_ASSIGN_OR_RETURN(a.r, ReadReduction(ctx, "norm", dims, keepdim));
  return a;
}

absl::StatusOr<ReductionArgs> ReadLogsumexp(const KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  return ReadReduction(ctx, "logsumexp", ctx.args[1], ctx.args[2].to_bool());
}

absl::StatusOr<ScanArgs> ReadScan(const KernelContext& ctx, const char* name) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  ScanArgs a;
  TD_ASSIGN_OR_RETURN(a.self, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(a.dim, WrapDim(name, ctx.args[1].to_int(), a.self.meta->dim()));
  TD_RETURN_IF_ERROR(ExpectOutputSizes(name, ctx.outputs[0], a.self.meta->sizes));
  return a;
}

}  // namespace tensord::cpu
