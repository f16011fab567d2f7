// The argument reading and checking of the neural-network kernels
// (nn_args.h), shared by the CPU kernels and the CUDA host side.
#include "nn_args.h"

#include <climits>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernel_util.h"

namespace tensord::cpu {

std::array<int64_t, 2> IntPair(const Value& v, std::array<int64_t, 2> fallback) {
  const Shape x = IntList(v);
  if (x.empty()) return fallback;
  if (x.size() == 1) return {x[0], x[0]};
  return {x[0], x[1]};
}

absl::StatusOr<SoftmaxArgs> ReadSoftmax(const KernelContext& ctx, bool log) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  SoftmaxArgs a;
  TD_ASSIGN_OR_RETURN(a.self, InputTensor(ctx, 0));
  const char* name = log ? "log_softmax" : "softmax";
  TD_RETURN_IF_ERROR(ExpectOutputSizes(name, ctx.outputs[0], a.self.meta->sizes));
  const int64_t rank = a.self.meta->dim();
  int64_t dim = ctx.args[1].to_int();
  const int64_t r = rank == 0 ? 1 : rank;
  if (dim < -r || dim >= r) {
    return IndexErr(absl::StrCat(name, ": Dimension out of range (expected to be in range of [", -r, ", ", r - 1,
                                 "], but got ", dim, ")"));
  }
  if (dim < 0) dim += r;
  a.dim = dim;
  return a;
}

absl::StatusOr<AdamArgs> ReadFusedAdam(const KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 3));
  AdamArgs a;
  TD_ASSIGN_OR_RETURN(a.grad, InputTensor(ctx, 1));
  a.lr = ctx.args[4].to_double(), a.beta1 = ctx.args[5].to_double(), a.beta2 = ctx.args[6].to_double();
  a.weight_decay = ctx.args[7].to_double(), a.eps = ctx.args[8].to_double();
  a.step = ctx.args[9].to_int();
  a.maximize = ctx.args[10].to_bool(), a.decoupled = ctx.args[11].to_bool();
  if (a.step < 1) return RuntimeErr(absl::StrCat("_fused_adam_: step must be at least 1, got ", a.step));
  a.bias_correction1 = 1 - std::pow(a.beta1, static_cast<double>(a.step));
  a.bias_correction2 = 1 - std::pow(a.beta2, static_cast<double>(a.step));
  return a;
}

absl::StatusOr<ConvGeom> MakeConvGeom(absl::string_view op, const TensorMeta& in, const TensorMeta& wt,
                                      const Value& stride, const Value& padding, const Value& dilation,
                                      int64_t groups, absl::string_view device) {
  if (in.dim() != 4 || wt.dim() != 4 || groups <= 0) {
    return InternalErr(absl::StrCat(op, ": kernel got input ", ShapeToString(in.sizes), " weight ",
                                    ShapeToString(wt.sizes), " groups ", groups));
  }
  ConvGeom g;
  g.n = in.sizes[0], g.c = in.sizes[1], g.h = in.sizes[2], g.w = in.sizes[3];
  g.o = wt.sizes[0], g.kh = wt.sizes[2], g.kw = wt.sizes[3], g.groups = groups;
  g.s = IntPair(stride, {1, 1}), g.p = IntPair(padding, {0, 0}), g.d = IntPair(dilation, {1, 1});
  g.oh = (g.h + 2 * g.p[0] - g.d[0] * (g.kh - 1) - 1) / g.s[0] + 1;
  g.ow = (g.w + 2 * g.p[1] - g.d[1] * (g.kw - 1) - 1) / g.s[1] + 1;
  // BLAS and cuBLAS take 32-bit sizes; the column buffer is kk x ohw.
  if (g.kk() > INT_MAX || g.ohw() > INT_MAX || g.og() > INT_MAX) {
    return RuntimeErr(absl::StrCat(op, ": sizes too large for the ", device, " convolution (", g.kk(), " x ",
                                   g.ohw(), " columns)"));
  }
  return g;
}

}  // namespace tensord::cpu
