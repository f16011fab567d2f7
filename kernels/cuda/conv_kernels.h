// kernels/cuda/conv_kernels.h — the host side of the CUDA convolutions:
// conv2d and convolution_backward (2-D, non-transposed), as the CPU kernels
// of kernels/cpu/conv.cc compute them: im2col (nn.cuh) and batched GEMMs
// through L::Gemm (gemm_call.h), col2im as a gather (no atomics, so
// grad_input is deterministic), grad_bias as a sum reduction in double.
//
//   RegisterConvKernels<CudaLaunch>(registry, DeviceType::kCUDA);
//
// cuDNN (in the CUDA toolkit) would replace ConvForward and the two GEMM
// passes of ConvBackward with cudnnConvolutionForward,
// cudnnConvolutionBackwardData and cudnnConvolutionBackwardFilter behind an
// L::Conv entry (loaded with dlopen as cuBLAS is, cublas_gemm.cc), keeping
// this path for what cuDNN refuses; it is not used yet because nothing
// here can test it without a GPU. Host code only.
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_CONV_KERNELS_H_
#define TENSORD_KERNELS_CUDA_CONV_KERNELS_H_

#include <algorithm>
#include <climits>
#include <cstdint>
#include <memory>
#include <optional>

#include "elementwise_kernels.h"
#include "gemm_call.h"
#include "nn_call.h"
#include "nn_kernels.h"
#include "reduce_kernels.h"

namespace tensord::cuda::nn {

// Scratch for one chunk of im2col columns: chunks of images keep it near
// this size (at least one image at a time).
inline constexpr int64_t kConvColumnBytes = int64_t{256} << 20;

// The convolution's geometry and its checks are the CPU kernel's
// (kernels/cpu/nn_args.h), with cuBLAS's int limits in place of BLAS's.
using cpu::ConvGeom;

// Images per chunk of columns: as many as fit kConvColumnBytes (at least
// one), and few enough that a GEMM's nb * oh * ow stays an int.
inline int64_t ConvChunk(const ConvGeom& g, int64_t item) {
  const int64_t per_image = std::max<int64_t>(1, g.c * g.kh * g.kw * g.ohw() * item);
  int64_t nb = std::clamp<int64_t>(kConvColumnBytes / per_image, 1, std::max<int64_t>(g.n, 1));
  if (g.ohw() > 0) nb = std::min<int64_t>(nb, INT_MAX / g.ohw());
  return std::max<int64_t>(nb, 1);
}

// `t` itself when contiguous, else a contiguous device copy held in `hold`.
template <class L>
absl::StatusOr<TensorRef> DenseOnDevice(const KernelContext& ctx, const TensorRef& t,
                                        std::unique_ptr<DeviceTemp>& hold) {
  if (t.meta->is_contiguous()) return t;
  TD_ASSIGN_OR_RETURN(hold, MakeTemp<L>(ctx, t.meta->sizes, t.meta->dtype));
  TD_RETURN_IF_ERROR(CopyConvert<L>(ctx, hold->ref(), t));
  return hold->ref();
}

// One of a convolution's GEMMs (m x k times k x n). A float32 GEMM may use
// TF32 when the session allows it for convolutions (MathMode::conv_allow_tf32,
// torch.backends.cudnn.allow_tf32: on by default, as PyTorch's cuDNN
// convolutions), so a CUDA model's convolutions trade precision for speed as
// they do under PyTorch, and its matmuls do not unless asked.
inline GemmCall ConvGemm(ScalarType dt, int64_t m, int64_t n, int64_t k, const MathMode& math) {
  GemmCall c;
  c.dtype = dt;
  c.m = m;
  c.n = n;
  c.k = k;
  c.allow_tf32 = dt == ScalarType::kFloat32 && math.conv_allow_tf32;
  return c;
}

// The im2col call of images [n0, n0 + nb) of `x` (element strides of a 4-D
// view) into `col`.
inline ColCall MakeColCall(ColOp op, const ConvGeom& g, ScalarType dt, char* x0, const int64_t (&st)[4], char* col,
                           int64_t nb) {
  ColCall c;
  c.op = op;
  c.dtype = dt;
  c.image = x0;
  for (int i = 0; i < 4; ++i) c.img_strides[i] = st[i];
  c.col = col;
  c.nb = nb;
  c.c = g.c;
  c.h = g.h;
  c.w = g.w;
  c.groups = g.groups;
  c.oh = g.oh;
  c.ow = g.ow;
  c.k[0] = g.kh;
  c.k[1] = g.kw;
  for (int i = 0; i < 2; ++i) {
    c.s[i] = g.s[i];
    c.p[i] = g.p[i];
    c.d[i] = g.d[i];
  }
  return c;
}

// conv2d(input, weight, bias, stride, padding, dilation, groups); a 3-D
// (unbatched) input is run as a batch of one. Per chunk of images: im2col,
// then per group (or per image, whichever is fewer) one batched GEMM
// out[n, g] = W_g @ col[g, n], over the bias already in out (beta 1).
template <class L>
absl::Status Conv2d(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef input, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(TensorRef weight, InputTensor(ctx, 1));
  std::optional<TensorRef> bias;
  if (!ctx.args[2].is_none()) {
    TD_ASSIGN_OR_RETURN(bias, InputTensor(ctx, 2));
  }
  const ScalarType dt = input.meta->dtype;
  const int64_t item = input.meta->itemsize();
  TensorMeta x4 = *input.meta;
  if (x4.dim() == 3) x4 = cpu::ViewMeta(x4, {1, x4.sizes[0], x4.sizes[1], x4.sizes[2]},
                                        {0, x4.strides[0], x4.strides[1], x4.strides[2]}, x4.storage_offset);
  TD_ASSIGN_OR_RETURN(ConvGeom g, cpu::MakeConvGeom("conv2d", x4, *weight.meta, ctx.args[3], ctx.args[4],
                                                     ctx.args[5], ctx.args[6].to_int(), "CUDA"));
  const TensorRef& out = ctx.outputs[0];
  if (out.meta->numel() == 0) return absl::OkStatus();
  if (!DtypeInSet(dt, kSetStdFloats)) return cpu::DtypeNotImplemented("conv2d", dt);
  // The GEMMs write an NCHW-contiguous result: out itself, or a temporary.
  std::unique_ptr<DeviceTemp> hw, ho;
  TD_ASSIGN_OR_RETURN(TensorRef wt, DenseOnDevice<L>(ctx, weight, hw));
  TensorRef dst = out;
  if (!out.meta->is_contiguous()) {
    TD_ASSIGN_OR_RETURN(ho, MakeTemp<L>(ctx, out.meta->sizes, dt));
    dst = ho->ref();
  }
  if (bias) {
    // Every output element starts as its channel's bias.
    TensorMeta b4 = cpu::ViewMeta(*bias->meta, {g.n, g.o, g.oh, g.ow}, {0, bias->meta->strides[0], 0, 0},
                                  bias->meta->storage_offset);
    TensorMeta d4 = cpu::ViewMeta(*dst.meta, {g.n, g.o, g.oh, g.ow}, ContiguousStrides({g.n, g.o, g.oh, g.ow}),
                                  dst.meta->storage_offset);
    TD_RETURN_IF_ERROR(CopyConvert<L>(ctx, TensorRef{dst.base, &d4}, TensorRef{bias->base, &b4}));
  }
  int64_t st[4];
  for (int i = 0; i < 4; ++i) st[i] = x4.strides[i];
  const char* x0 = input.base + x4.storage_offset * item;
  char* o0 = dst.data_at_offset();
  const char* w0 = wt.data_at_offset();
  // A 1x1, stride-1, unpadded convolution of NCHW-contiguous images reads
  // them as its columns.
  const bool direct = g.kh == 1 && g.kw == 1 && g.s[0] == 1 && g.s[1] == 1 && g.p[0] == 0 && g.p[1] == 0 &&
                      st[3] == 1 && st[2] == g.w && st[1] == g.h * g.w;
  const int64_t nb_max = direct ? g.n : ConvChunk(g, item);
  std::shared_ptr<char> col;
  if (!direct && g.kk() > 0) {
    TD_ASSIGN_OR_RETURN(col, L::Allocate(ctx.op->full_name(), g.c * g.kh * g.kw * nb_max * g.ohw() * item, ctx.stream));
  }
  for (int64_t n0 = 0; n0 < g.n; n0 += nb_max) {
    const int64_t nb = std::min(nb_max, g.n - n0);
    const char* b0;          // group 0 of image n0's columns
    int64_t ldb, b_image, b_group;  // element strides: row, next image, next group
    if (direct) {
      b0 = x0 + n0 * st[0] * item;
      ldb = g.ohw();
      b_image = st[0];
      b_group = g.cg() * g.ohw();
    } else {
      if (g.kk() > 0) {
        const ColCall c = MakeColCall(ColOp::kIm2Col, g, dt, const_cast<char*>(x0) + n0 * st[0] * item, st,
                                      col.get(), nb);
        TD_RETURN_IF_ERROR(LaunchNn<L>(ctx, c));
      }
      b0 = col.get();
      ldb = nb * g.ohw();
      b_image = g.ohw();
      b_group = g.kk() * nb * g.ohw();
    }
    GemmCall call = ConvGemm(dt, g.og(), g.ohw(), g.kk(), ctx.math);
    call.lda = std::max<int64_t>(1, g.kk());
    call.ldb = std::max<int64_t>(1, ldb);
    call.ldc = g.ohw();
    call.beta = bias ? 1 : 0;
    // Batched over images per group, or over groups per image.
    const bool by_group = g.groups <= nb;
    const int64_t outer = by_group ? g.groups : nb;
    for (int64_t q = 0; q < outer; ++q) {
      const int64_t gi = by_group ? q : 0, ni = by_group ? 0 : q;
      GemmCall c = call;
      c.batch = by_group ? nb : g.groups;
      c.a = w0 + gi * g.og() * g.kk() * item;
      c.stride_a = by_group ? 0 : g.og() * g.kk();
      c.b = b0 + (gi * b_group + ni * b_image) * item;
      c.stride_b = by_group ? b_image : b_group;
      c.c = o0 + ((n0 + ni) * g.o + gi * g.og()) * g.ohw() * item;
      c.stride_c = by_group ? g.o * g.ohw() : g.og() * g.ohw();
      TD_RETURN_IF_ERROR(L::Gemm(ctx.op->full_name(), c, ctx.stream, ctx.device.index));
    }
  }
  if (ho) return CopyConvert<L>(ctx, out, dst);
  return absl::OkStatus();
}

// convolution_backward(grad_output, input, weight, bias_sizes, stride,
// padding, dilation, transposed, output_padding, groups) -> (grad_input,
// grad_weight, grad_bias). Per chunk of images: grad_output regrouped as
// [groups][og][nb * oh * ow], the input's im2col; grad_weight[g] +=
// gy[g] @ col[g]^T (one GEMM batched over groups, summing the chunk's
// images in its k); then col[g, n] = W_g^T @ gy[g, n] into the same buffer
// and col2im into grad_input. grad_bias sums grad_output over (N, H, W).
template <class L>
absl::Status ConvBackward(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 3));
  TD_ASSIGN_OR_RETURN(TensorRef grad, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(TensorRef input, InputTensor(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef weight, InputTensor(ctx, 2));
  const char* name = "convolution_backward";
  TD_ASSIGN_OR_RETURN(ConvGeom g, cpu::MakeConvGeom(name, *input.meta, *weight.meta, ctx.args[4], ctx.args[5],
                                                     ctx.args[6], ctx.args[9].to_int(), "CUDA"));
  const ScalarType dt = input.meta->dtype;
  if (!DtypeInSet(dt, kSetStdFloats)) return cpu::DtypeNotImplemented(name, dt);
  const int64_t item = input.meta->itemsize();
  const TensorRef &gi = ctx.outputs[0], &gw = ctx.outputs[1], &gb = ctx.outputs[2];
  // grad_bias: sum over (N, oh, ow) in double.
  {
    ReduceCall call;
    call.op = ReduceOp::kSum;
    call.dtype = dt;
    TD_RETURN_IF_ERROR(ew::BuildReduceGeometry(ctx.op->full_name(), grad, {true, false, true, true}, false, &gb,
                                               nullptr, &call));
    TD_RETURN_IF_ERROR(ew::LaunchReduce<L>(ctx, call));
  }
  if (g.kk() == 0 || g.ohw() == 0 || g.n == 0 || g.og() == 0) {
    TD_RETURN_IF_ERROR(ew::Fill<L>(ctx, gi, Scalar::Int(0)));
    return ew::Fill<L>(ctx, gw, Scalar::Int(0));
  }
  std::unique_ptr<DeviceTemp> hw, hgw;
  TD_ASSIGN_OR_RETURN(TensorRef wt, DenseOnDevice<L>(ctx, weight, hw));
  TensorRef gw_dst = gw;
  if (!gw.meta->is_contiguous()) {
    TD_ASSIGN_OR_RETURN(hgw, MakeTemp<L>(ctx, gw.meta->sizes, dt));
    gw_dst = hgw->ref();
  }
  const int64_t nb_max = ConvChunk(g, item), ohw = g.ohw(), kk = g.kk(), og = g.og();
  TD_ASSIGN_OR_RETURN(std::shared_ptr<char> col,
                      L::Allocate(ctx.op->full_name(), g.c * g.kh * g.kw * nb_max * ohw * item, ctx.stream));
  TD_ASSIGN_OR_RETURN(std::unique_ptr<DeviceTemp> gyp,
                      MakeTemp<L>(ctx, {g.groups, og, nb_max, g.oh, g.ow}, dt));
  int64_t xs[4], is[4];
  for (int i = 0; i < 4; ++i) {
    xs[i] = input.meta->strides[i];
    is[i] = gi.meta->strides[i];
  }
  const Shape& gs = grad.meta->strides;
  const char* w0 = wt.data_at_offset();
  for (int64_t n0 = 0; n0 < g.n; n0 += nb_max) {
    const int64_t nb = std::min(nb_max, g.n - n0), cols = nb * ohw;
    // gy of images [n0, n0 + nb) as [groups][og][nb][oh][ow].
    TensorMeta src = cpu::ViewMeta(*grad.meta, {g.groups, og, nb, g.oh, g.ow},
                                   {og * gs[1], gs[1], gs[0], gs[2], gs[3]}, grad.meta->storage_offset + n0 * gs[0]);
    TensorMeta dstm = TensorMeta::Contiguous({g.groups, og, nb, g.oh, g.ow}, dt, ctx.device);
    TD_RETURN_IF_ERROR(CopyConvert<L>(ctx, TensorRef{gyp->buffer.get(), &dstm}, TensorRef{grad.base, &src}));
    const char* gy0 = gyp->buffer.get();
    // Columns of the input.
    TD_RETURN_IF_ERROR(LaunchNn<L>(
        ctx, MakeColCall(ColOp::kIm2Col, g, dt, input.base + (input.meta->storage_offset + n0 * xs[0]) * item, xs,
                         col.get(), nb)));
    // grad_weight[g] (og x kk) (+)= gy[g] (og x cols) @ col[g]^T (cols x kk).
    GemmCall wg = ConvGemm(dt, og, kk, cols, ctx.math);
    wg.a = gy0;
    wg.lda = cols;
    wg.stride_a = og * cols;
    wg.b = col.get();
    wg.trans_b = true;
    wg.ldb = cols;
    wg.stride_b = kk * cols;
    wg.c = gw_dst.data_at_offset();
    wg.ldc = kk;
    wg.stride_c = og * kk;
    wg.batch = g.groups;
    wg.beta = n0 == 0 ? 0 : 1;
    TD_RETURN_IF_ERROR(L::Gemm(ctx.op->full_name(), wg, ctx.stream, ctx.device.index));
    // col[g, n] (kk x ohw) = W_g^T (kk x og) @ gy[g, n] (og x ohw), over
    // the columns just read (the stream orders the two).
    GemmCall cg = ConvGemm(dt, kk, ohw, og, ctx.math);
    cg.trans_a = true;
    cg.lda = kk;
    cg.ldb = cols;
    cg.ldc = cols;
    const bool by_group = g.groups <= nb;
    const int64_t outer = by_group ? g.groups : nb;
    for (int64_t q = 0; q < outer; ++q) {
      const int64_t gr = by_group ? q : 0, ni = by_group ? 0 : q;
      GemmCall c = cg;
      c.batch = by_group ? nb : g.groups;
      c.a = w0 + gr * og * kk * item;
      c.stride_a = by_group ? 0 : og * kk;
      c.b = gy0 + (gr * og * cols + ni * ohw) * item;
      c.stride_b = by_group ? ohw : og * cols;
      c.c = col.get() + (gr * kk * cols + ni * ohw) * item;
      c.stride_c = by_group ? ohw : kk * cols;
      TD_RETURN_IF_ERROR(L::Gemm(ctx.op->full_name(), c, ctx.stream, ctx.device.index));
    }
    TD_RETURN_IF_ERROR(LaunchNn<L>(
        ctx, MakeColCall(ColOp::kCol2Im, g, dt, gi.base + (gi.meta->storage_offset + n0 * is[0]) * item, is,
                         col.get(), nb)));
  }
  if (hgw) return CopyConvert<L>(ctx, gw, gw_dst);
  return absl::OkStatus();
}

template <class L>
absl::Status RegisterConvKernels(KernelRegistry& r, DeviceType device) {
  TD_RETURN_IF_ERROR(r.Register(device, "conv2d", Conv2d<L>));
  return r.Register(device, "convolution_backward", ConvBackward<L>);
}

}  // namespace tensord::cuda::nn

#endif  // TENSORD_KERNELS_CUDA_CONV_KERNELS_H_
