// kernels/cuda/matmul_kernels.h — the host side of the CUDA matmul family:
// matmul, mm, bmm, addmm, baddbmm, dot, linear (batched GEMMs described to
// `L`, the device: L::Gemm, see cuda_launch.h) and outer (an elementwise
// multiply). Each reads its arguments as the op's CPU kernel does
// (kernels/cpu/matmul.cc: the same checks, errors and dtypes):
//
//   RegisterMatmulKernels<CudaLaunch>(registry, DeviceType::kCUDA);
//
// Every rank combination of matmul is a batch of GEMMs (a 1-D left operand
// a [1, k] row, a 1-D right operand a [k, 1] column, batch dims broadcast
// with stride 0), issued as strided-batched GEMMs over the innermost batch
// dims that nest uniformly. Operands go to the GEMM in place when one of
// their matrix strides is 1 (a transposed layout is passed as transposed);
// otherwise, or when their dtype is not the output's, as a contiguous copy
// in L::Allocate's scratch. A column-major output is computed as C^T = B^T
// A^T; any other output layout through a contiguous temporary.
//
// addmm / baddbmm / linear fold their epilogue into the GEMM: self (bias)
// is copied into the output (broadcast, converted) and the GEMM computes
// alpha * A @ B + beta * out; beta == 0 leaves self unread (NaN included),
// as PyTorch. float16/bfloat16 accumulate in float32 and are rounded once
// (the CPU rounds the product, then the epilogue: results may differ by a
// rounding of the output dtype); integers wrap, as on the CPU (PyTorch's
// CUDA refuses them). Host code only.
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_MATMUL_KERNELS_H_
#define TENSORD_KERNELS_CUDA_MATMUL_KERNELS_H_

#include <algorithm>
#include <climits>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../cpu/matmul_args.h"
#include "elementwise_kernels.h"
#include "gemm_call.h"
#include "tensord/kernels/cuda/cuda_kernels.h"

namespace tensord::cuda::mm {

using ew::CheckContext;
using ew::DtypeNotImplemented;
using ew::InputTensor;

// The matrices, the batched problem and the reading and checking of the
// calls are the CPU kernels' (kernels/cpu/matmul_args.h).
using cpu::Mat;
using cpu::MatmulPlan;

// How a GEMM (row-major terms, gemm_call.h) reads `m` in place: `trans`
// and `ld`. False when it cannot (neither stride is 1, or the leading
// dimension is too small or exceeds an int).
bool GemmLayout(const Mat& m, bool* trans, int64_t* ld);

// cpu::MakeMatmulPlan, then cpu::CheckGemmDims: the CPU kernel's errors
// (size mismatch, non-broadcastable batch dims, an output of the wrong
// shape, matrix dims past INT_MAX).
absl::StatusOr<MatmulPlan> MakePlan(const char* name, const TensorMeta& a, const TensorMeta& b,
                                    const TensorMeta& out);

// The batch as an outer loop and one inner run that a strided-batched GEMM
// takes: `outer` (sizes, and per-operand strides a, b, c) and the inner
// count and strides. Dims of size 1 are dropped; dims that nest uniformly
// in all three operands are merged.
struct BatchSplit {
  Shape outer;
  Shape outer_a, outer_b, outer_c;
  int64_t count = 1, stride_a = 0, stride_b = 0, stride_c = 0;
};
BatchSplit SplitBatch(const MatmulPlan& p);

// When B does not vary over the batch (stride 0: matmul of a batch by one
// matrix, linear) and the batch nests uniformly into the rows of A and C,
// folds it into their rows: one large GEMM instead of a batch of small
// ones. Leaves `p` alone when the folded A or C would not be GEMM-readable
// in place.
void FoldBatchIntoRows(MatmulPlan* p);

// alpha and beta of a GEMM into `t` (cpu::ScalarTo<T>: as the CPU's
// epilogue converts them).
void GemmScalars(ScalarType t, const Scalar& alpha, const Scalar& beta, GemmCall* call);

// out = alpha * a @ b (+ beta * self, self broadcast to out's shape, when
// `self` is given and beta != 0), matmul's ranks and broadcasting.
template <class L>
absl::Status Product(const KernelContext& ctx, const char* name, TensorRef a, TensorRef b, const TensorRef& out,
                     const TensorRef* self = nullptr, const Scalar& beta = Scalar::Int(0),
                     const Scalar& alpha = Scalar::Int(1)) {
  const ScalarType t = out.meta->dtype;
  TD_ASSIGN_OR_RETURN(MatmulPlan p, MakePlan(name, *a.meta, *b.meta, *out.meta));
  // The CPU computes float16/bfloat16 in float32: what it refuses is the rest.
  if (!DtypeInSet(t, kSetInts | kSetFloats)) return DtypeNotImplemented(name, t);
  const bool use_self = self != nullptr && beta.to_double() != 0.0;
  GemmCall call;
  call.dtype = t;
  call.allow_tf32 = t == ScalarType::kFloat32 && ctx.math.matmul_allow_tf32;
  GemmScalars(t, alpha, use_self ? beta : Scalar::Int(0), &call);
  if (out.meta->numel() == 0) return absl::OkStatus();

  // The output: in place when a GEMM can write it (row-major, or
  // column-major as the transposed product), else a contiguous temporary.
  TensorRef c = out;
  std::unique_ptr<ew::DeviceTemp> c_tmp, a_tmp, b_tmp;
  bool c_trans = false;
  int64_t ldc = 0;
  if (!GemmLayout(p.c, &c_trans, &ldc)) {
    TD_ASSIGN_OR_RETURN(c_tmp, ew::MakeTemp<L>(ctx, out.meta->sizes, t));
    c = c_tmp->ref();
  }
  if (use_self) {
    TD_RETURN_IF_ERROR(ew::CopyConvert<L>(ctx, c, *self));
  }
  // The operands, unless the GEMM reads none of them (k == 0).
  const int64_t k = p.a.cols;
  bool copied = c_tmp != nullptr;
  for (auto [x, mat, tmp] : {std::make_tuple(&a, p.a, &a_tmp), std::make_tuple(&b, p.b, &b_tmp)}) {
    bool tr;
    int64_t ld;
    if (k == 0 || (x->meta->dtype == t && GemmLayout(mat, &tr, &ld))) continue;
    TD_ASSIGN_OR_RETURN(*tmp, ew::MakeTemp<L>(ctx, x->meta->sizes, t));
    TD_RETURN_IF_ERROR(ew::CopyConvert<L>(ctx, (*tmp)->ref(), *x));
    *x = (*tmp)->ref();
    copied = true;
  }
  if (copied) {
    TD_ASSIGN_OR_RETURN(p, MakePlan(name, *a.meta, *b.meta, *c.meta));
  }
  const char* a_data = a.data_at_offset();
  const char* b_data = b.data_at_offset();
  TD_INTERNAL_CHECK(GemmLayout(p.c, &c_trans, &ldc), name, ": output not writable by a GEMM");
  if (c_trans) {  // C^T = B^T A^T
    std::swap(a_data, b_data);
    std::swap(p.a_bs, p.b_bs);
    const Mat at = p.a.Transposed();
    p.a = p.b.Transposed();
    p.b = at;
    p.c = p.c.Transposed();
    TD_INTERNAL_CHECK(GemmLayout(p.c, &c_trans, &ldc) && !c_trans, name, ": transposed output");
  }
  FoldBatchIntoRows(&p);
  TD_INTERNAL_CHECK(GemmLayout(p.c, &c_trans, &ldc) && !c_trans, name, ": folded output");
  call.m = p.c.rows;
  call.n = p.c.cols;
  call.k = k;
  call.ldc = ldc;
  if (k == 0) {
    // Nothing is read: any valid leading dimensions.
    call.lda = 1;
    call.ldb = std::max<int64_t>(1, call.n);
  } else {
    TD_INTERNAL_CHECK(GemmLayout(p.a, &call.trans_a, &call.lda) && GemmLayout(p.b, &call.trans_b, &call.ldb), name,
                      ": operand not readable by a GEMM");
  }
  const BatchSplit split = SplitBatch(p);
  const int64_t item = ItemSize(t);
  int64_t outer_n = 1;
  for (int64_t s : split.outer) outer_n *= s;
  Shape idx(split.outer.size(), 0);
  for (int64_t o = 0; o < outer_n; ++o) {
    int64_t off_a = 0, off_b = 0, off_c = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      off_a += idx[d] * split.outer_a[d];
      off_b += idx[d] * split.outer_b[d];
      off_c += idx[d] * split.outer_c[d];
    }
    for (int64_t first = 0; first < split.count; first += INT_MAX) {
      GemmCall g = call;
      g.batch = std::min<int64_t>(INT_MAX, split.count - first);
      g.stride_a = split.stride_a;
      g.stride_b = split.stride_b;
      g.stride_c = split.stride_c;
      g.a = a_data + (off_a + first * split.stride_a) * item;
      g.b = b_data + (off_b + first * split.stride_b) * item;
      g.c = c.data_at_offset() + (off_c + first * split.stride_c) * item;
      TD_RETURN_IF_ERROR(L::Gemm(ctx.op->full_name(), g, ctx.stream, ctx.device.index));
    }
    for (int64_t d = static_cast<int64_t>(idx.size()) - 1; d >= 0; --d) {
      if (++idx[d] < split.outer[d]) break;
      idx[d] = 0;
    }
  }
  if (c_tmp != nullptr) return ew::CopyConvert<L>(ctx, out, c);
  return absl::OkStatus();
}

template <class L>
absl::Status Matmul(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const cpu::ProductArgs a, cpu::ReadMatmul(ctx));
  return Product<L>(ctx, a.name, a.a, a.b, ctx.outputs[0]);
}

// mm (kRank 2) and bmm (kRank 3).
template <class L, int kRank>
absl::Status MmBmm(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const cpu::ProductArgs a, cpu::ReadMmBmm(ctx, kRank));
  return Product<L>(ctx, a.name, a.a, a.b, ctx.outputs[0]);
}

// addmm(self, mat1, mat2, *, beta, alpha) and baddbmm(self, batch1, batch2, *, beta, alpha).
template <class L>
absl::Status AddmmLike(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const cpu::ProductArgs a, cpu::ReadAddmm(ctx));
  return Product<L>(ctx, a.name, a.a, a.b, ctx.outputs[0], &*a.self, a.beta, a.alpha);
}

template <class L>
absl::Status Dot(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const cpu::ProductArgs a, cpu::ReadDot(ctx));
  return Product<L>(ctx, "dot", a.a, a.b, ctx.outputs[0]);
}

// linear(input, weight, bias=None): input @ weight.t() (+ bias).
template <class L>
absl::Status Linear(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const cpu::LinearArgs a, cpu::ReadLinear(ctx));
  const TensorRef wt{a.weight.base, &a.weight_t};
  if (!a.bias) return Product<L>(ctx, "linear", a.input, wt, ctx.outputs[0]);
  return Product<L>(ctx, "linear", a.input, wt, ctx.outputs[0], &*a.bias, Scalar::Int(1), Scalar::Int(1));
}

// outer(self, vec2): out[i, j] = self[i] * vec2[j] in the output's dtype.
template <class L>
absl::Status Outer(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const cpu::ProductArgs args, cpu::ReadOuter(ctx));
  const TensorRef &a = args.a, &b = args.b;
  const TensorRef& out = ctx.outputs[0];
  const ScalarType dt = out.meta->dtype;
  if (!DtypeInSet(dt, kSetAllButF8)) return DtypeNotImplemented("outer", dt);
  // self as a column [n, 1], broadcast against vec2 as a row.
  const TensorMeta col = cpu::ViewMeta(*a.meta, {a.meta->sizes[0], 1}, {a.meta->strides[0], 1}, a.meta->storage_offset);
  const TensorRef a_col{a.base, &col};
  return ew::Run<L>(ctx, EwFamily::kArith, ew::OpCode(ArithOp::kMul), dt, out, {EwInput::Of(a_col), EwInput::Of(b)});
}

template <class L>
absl::Status RegisterMatmulKernels(KernelRegistry& r, DeviceType device) {
  TD_RETURN_IF_ERROR(r.Register(device, "matmul", Matmul<L>));
  TD_RETURN_IF_ERROR(r.Register(device, "mm", MmBmm<L, 2>));
  TD_RETURN_IF_ERROR(r.Register(device, "bmm", MmBmm<L, 3>));
  TD_RETURN_IF_ERROR(r.Register(device, "addmm", AddmmLike<L>));
  TD_RETURN_IF_ERROR(r.Register(device, "baddbmm", AddmmLike<L>));
  TD_RETURN_IF_ERROR(r.Register(device, "dot", Dot<L>));
  TD_RETURN_IF_ERROR(r.Register(device, "outer", Outer<L>));
  TD_RETURN_IF_ERROR(r.Register(device, "linear", Linear<L>));
  return absl::OkStatus();
}

}  // namespace tensord::cuda::mm

#endif  // TENSORD_KERNELS_CUDA_MATMUL_KERNELS_H_
