// The argument reading and checking of the matrix-product kernels and
// their plan (matmul_args.h), shared by the CPU kernels and the CUDA host
// side.
#include "matmul_args.h"

#include <algorithm>
#include <climits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernel_util.h"

namespace tensord::cpu {

absl::StatusOr<MatmulPlan> MakeMatmulPlan(const char* name, const TensorMeta& a, const TensorMeta& b,
                                          const TensorMeta& out) {
  if (a.dim() < 1 || b.dim() < 1) {
    return RuntimeErr(
        absl::StrCat(name, ": both arguments need at least 1 dimension, got ", a.dim(), "D and ", b.dim(), "D"));
  }
  MatmulPlan p;
  const int64_t da = a.dim(), db = b.dim();
  // A as [batch..., m, k], B as [batch..., k, n].
  p.a = da == 1 ? Mat{1, a.sizes[0], 0, a.strides[0]}
                : Mat{a.sizes[da - 2], a.sizes[da - 1], a.strides[da - 2], a.strides[da - 1]};
  p.b = db == 1 ? Mat{b.sizes[0], 1, b.strides[0], 0}
                : Mat{b.sizes[db - 2], b.sizes[db - 1], b.strides[db - 2], b.strides[db - 1]};
  if (p.a.cols != p.b.rows) {
    return RuntimeErr(absl::StrCat(name, ": size mismatch, self is ", ShapeToString(a.sizes), ", other is ",
                                   ShapeToString(b.sizes), " (", p.a.cols, " != ", p.b.rows, ")"));
  }
  const int64_t ba = std::max<int64_t>(da - 2, 0), bb = std::max<int64_t>(db - 2, 0);
  const int64_t nb = std::max(ba, bb);
  p.batch.assign(nb, 1);
  p.a_bs.assign(nb, 0);
  p.b_bs.assign(nb, 0);
  for (int64_t i = 0; i < nb; ++i) {
    const int64_t ia = i - (nb - ba), ib = i - (nb - bb);
    const int64_t sa = ia >= 0 ? a.sizes[ia] : 1, sb = ib >= 0 ? b.sizes[ib] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      return RuntimeErr(absl::StrCat(name, ": The size of tensor a (", sa, ") must match the size of tensor b (", sb,
                                     ") at non-singleton dimension ", i));
    }
    p.batch[i] = sa == 1 ? sb : sa;
    if (ia >= 0 && sa != 1) p.a_bs[i] = a.strides[ia];
    if (ib >= 0 && sb != 1) p.b_bs[i] = b.strides[ib];
  }
  // The output is [batch..., m (if A is 2-D+), n (if B is 2-D+)].
  Shape expect = p.batch;
  if (da > 1) expect.push_back(p.a.rows);
  if (db > 1) expect.push_back(p.b.cols);
  TD_RETURN_IF_ERROR(ExpectOutputSizes(name, TensorRef{nullptr, &out}, expect));
  p.c_bs.assign(out.strides.begin(), out.strides.begin() + nb);
  const int64_t oc = out.dim();
  if (da > 1 && db > 1) {
    p.c = Mat{p.a.rows, p.b.cols, out.strides[oc - 2], out.strides[oc - 1]};
  } else if (da > 1) {
    p.c = Mat{p.a.rows, 1, out.strides[oc - 1], 0};
  } else if (db > 1) {
    p.c = Mat{1, p.b.cols, 0, out.strides[oc - 1]};
  } else {
    p.c = Mat{1, 1, 0, 0};
  }
  return p;
}

absl::Status CheckGemmDims(const char* name, const MatmulPlan& p) {
  for (const int64_t v : {p.a.rows, p.a.cols, p.b.cols}) {
    if (v > INT_MAX) {
      return RuntimeErr(absl::StrCat(name, ": matrix dimension ", v, " exceeds what BLAS takes (", INT_MAX, ")"));
    }
  }
  return absl::OkStatus();
}

bool CollapseDims(const Shape& sizes, const Shape& strides, int64_t* size, int64_t* stride) {
  int64_t sz = 1, st = 0;
  bool have = false;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    if (sizes[d] == 1) continue;
    if (!have) {
      st = strides[d];
      have = true;
    } else if (strides[d] != st * sz) {
      return false;
    }
    sz *= sizes[d];
  }
  *size = sz;
  *stride = have ? st : 0;
  return true;
}

namespace {

// Arguments `first` and `first + 1` of the call as the product's a and b.
absl::StatusOr<ProductArgs> ReadPair(const KernelContext& ctx, const char* name, size_t first) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  ProductArgs p;
  p.name = name;
  TD_ASSIGN_OR_RETURN(p.a, InputTensor(ctx, first));
  TD_ASSIGN_OR_RETURN(p.b, InputTensor(ctx, first + 1));
  return p;
}

// Internal error naming `name` unless a and b are both 1-D.
absl::Status ExpectVectors(const char* name, const ProductArgs& p) {
  if (p.a.meta->dim() != 1 || p.b.meta->dim() != 1) {
    return InternalErr(
        absl::StrCat(name, ": expected 1-D operands, got ", p.a.meta->dim(), "-D and ", p.b.meta->dim(), "-D"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ProductArgs> ReadMatmul(const KernelContext& ctx) {
  return ReadPair(ctx, ctx.op->name().c_str(), 0);
}

absl::StatusOr<ProductArgs> ReadMmBmm(const KernelContext& ctx, int64_t rank) {
  const char* name = rank == 2 ? "mm" : "bmm";
  TD_ASSIGN_OR_RETURN(ProductArgs p, ReadPair(ctx, name, 0));
  const TensorMeta &a = *p.a.meta, &b = *p.b.meta;
  if (a.dim() != rank || b.dim() != rank) {
    return RuntimeErr(absl::StrCat(name, ": expected ", rank, "-D tensors, got ", a.dim(), "-D and ", b.dim(), "-D"));
  }
  if (rank == 3 && a.sizes[0] != b.sizes[0]) {
    return RuntimeErr(absl::StrCat("bmm: batch sizes differ, self is ", ShapeToString(a.sizes), ", mat2 is ",
                                   ShapeToString(b.sizes)));
  }
  return p;
}

absl::StatusOr<ProductArgs> ReadAddmm(const KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(ProductArgs p, ReadPair(ctx, ctx.op->name().c_str(), 1));
  TD_ASSIGN_OR_RETURN(p.self, InputTensor(ctx, 0));
  const char* name = p.name;
  const TensorMeta &a = *p.a.meta, &b = *p.b.meta;
  const int64_t rank = ctx.op->name() == "addmm" ? 2 : 3;
  if (a.dim() != rank || b.dim() != rank) {
    return InternalErr(
        absl::StrCat(name, ": expected ", rank, "-D operands, got ", a.dim(), "-D and ", b.dim(), "-D"));
  }
  if (rank == 3 && a.sizes[0] != b.sizes[0]) {
    return InternalErr(absl::StrCat(name, ": batch sizes differ, batch1 is ", ShapeToString(a.sizes),
                                    ", batch2 is ", ShapeToString(b.sizes)));
  }
  p.beta = ctx.args[3].scalar();
  p.alpha = ctx.args[4].scalar();
  return p;
}

absl::StatusOr<ProductArgs> ReadDot(const KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(ProductArgs p, ReadPair(ctx, "dot", 0));
  TD_RETURN_IF_ERROR(ExpectVectors("dot", p));
  return p;
}

absl::StatusOr<ProductArgs> ReadOuter(const KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(ProductArgs p, ReadPair(ctx, "outer", 0));
  TD_RETURN_IF_ERROR(ExpectVectors("outer", p));
  TD_RETURN_IF_ERROR(ExpectOutputSizes("outer", ctx.outputs[0], {p.a.meta->sizes[0], p.b.meta->sizes[0]}));
  return p;
}

absl::StatusOr<LinearArgs> ReadLinear(const KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  LinearArgs l;
  TD_ASSIGN_OR_RETURN(l.input, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(l.weight, InputTensor(ctx, 1));
  const TensorMeta& w = *l.weight.meta;
  if (w.dim() < 1 || w.dim() > 2) {
    return InternalErr(absl::StrCat("linear: weight must be 1-D or 2-D, got ", w.dim(), "-D"));
  }
  l.weight_t = w;
  if (w.dim() == 2) {
    std::swap(l.weight_t.sizes[0], l.weight_t.sizes[1]);
    std::swap(l.weight_t.strides[0], l.weight_t.strides[1]);
  }
  if (!ctx.args[2].is_none()) {
    TD_ASSIGN_OR_RETURN(l.bias, InputTensor(ctx, 2));
  }
  return l;
}

}  // namespace tensord::cpu
