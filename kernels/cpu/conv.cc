// Convolution and pooling over NCHW tensors (float32 / float64; the meta
// functions refuse other dtypes). Outputs arrive allocated with the meta
// function's sizes and strides (kernels never decide a shape): every kernel
// reads contiguous copies of its inputs, computes into a contiguous buffer
// (the output itself when it is contiguous) and copies into the output's
// layout (channels-last outputs) at the end.
//
//   conv2d                      im2col + one GEMM (OpenBLAS) per image and group
//   convolution_backward        GEMMs + col2im: grad_input, grad_weight, grad_bias
//   max_pool2d_with_indices     window max (NaN wins, as PyTorch), flat h*W+w index
//   max_pool2d_with_indices_backward   grad scattered to the saved indices
//   avg_pool2d / _backward      PyTorch's divisor rules (count_include_pad, override)
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernel_util.h"
#include "nn_args.h"

namespace tensord::cpu {
namespace {

// A contiguous view of `t` (itself or a copy held in `h`).
absl::StatusOr<TensorRef> Dense(const TensorRef& t, std::unique_ptr<TempTensor>& h) { return AsContiguous(t, h); }

// Where a kernel writes: `out` itself when contiguous, else a contiguous
// temporary copied into `out` by Finish().
struct Dst {
  TensorRef out;
  std::unique_ptr<TempTensor> tmp;
  TensorRef ref;
  absl::Status Init(const TensorRef& o) {
    out = o;
    if (o.meta->is_contiguous()) {
      ref = o;
      return absl::OkStatus();
    }
    TD_ASSIGN_OR_RETURN(tmp, TempTensor::Make(o.meta->sizes, o.meta->dtype));
    ref = tmp->ref();
    return absl::OkStatus();
  }
  absl::Status Finish() { return tmp ? CopyConvert(out, ref) : absl::OkStatus(); }
};

// C[m, n] = alpha * op(A) @ op(B) + beta * C, all row-major and dense.
template <typename T>
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, const T* b, T beta, T* c) {
  const CBLAS_TRANSPOSE at = ta ? CblasTrans : CblasNoTrans, bt = tb ? CblasTrans : CblasNoTrans;
  const blasint lda = static_cast<blasint>(ta ? m : k), ldb = static_cast<blasint>(tb ? k : n);
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, at, bt, static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), 1.0f,
                a, std::max<blasint>(lda, 1), b, std::max<blasint>(ldb, 1), beta, c,
                std::max<blasint>(static_cast<blasint>(n), 1));
  } else {
    cblas_dgemm(CblasRowMajor, at, bt, static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), 1.0,
                a, std::max<blasint>(lda, 1), b, std::max<blasint>(ldb, 1), beta, c,
                std::max<blasint>(static_cast<blasint>(n), 1));
  }
}

// col[(c, i, j), (y, x)] = img[c, y*s - p + i*d, x*s - p + j*d] (0 outside).
template <typename T>
void Im2Col(const T* img, const ConvGeom& g, T* col) {
  const int64_t cg = g.cg();
  for (int64_t c = 0; c < cg; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        T* row = col + ((c * g.kh + i) * g.kw + j) * g.ohw();
        for (int64_t y = 0; y < g.oh; ++y) {
          const int64_t iy = y * g.s[0] - g.p[0] + i * g.d[0];
          for (int64_t x = 0; x < g.ow; ++x) {
            const int64_t ix = x * g.s[1] - g.p[1] + j * g.d[1];
            row[y * g.ow + x] = (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) ? img[(c * g.h + iy) * g.w + ix] : T(0);
          }
        }
      }
}

// The adjoint of Im2Col: img[...] += col[...].
template <typename T>
void Col2ImAdd(const T* col, const ConvGeom& g, T* img) {
  const int64_t cg = g.cg();
  for (int64_t c = 0; c < cg; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        const T* row = col + ((c * g.kh + i) * g.kw + j) * g.ohw();
        for (int64_t y = 0; y < g.oh; ++y) {
          const int64_t iy = y * g.s[0] - g.p[0] + i * g.d[0];
          if (iy < 0 || iy >= g.h) continue;
          for (int64_t x = 0; x < g.ow; ++x) {
            const int64_t ix = x * g.s[1] - g.p[1] + j * g.d[1];
            if (ix >= 0 && ix < g.w) img[(c * g.h + iy) * g.w + ix] += row[y * g.ow + x];
          }
        }
      }
}

// conv2d(input, weight, bias, stride, padding, dilation, groups); a 3-D
// (unbatched) input is run as a batch of one.
absl::Status Conv2dKernel(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef input, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(TensorRef weight, InputTensor(ctx, 1));
  std::optional<TensorRef> bias;
  if (!ctx.args[2].is_none()) {
    TD_ASSIGN_OR_RETURN(bias, InputTensor(ctx, 2));
  }
  std::unique_ptr<TempTensor> hi, hw, hb;
  TD_ASSIGN_OR_RETURN(TensorRef x, Dense(input, hi));
  TD_ASSIGN_OR_RETURN(TensorRef wt, Dense(weight, hw));
  std::optional<TensorRef> b;
  if (bias) {
    TD_ASSIGN_OR_RETURN(b, Dense(*bias, hb));
  }
  TensorMeta x4 = *x.meta;
  if (x4.dim() == 3) x4 = TensorMeta::Contiguous(Shape{1, x4.sizes[0], x4.sizes[1], x4.sizes[2]}, x4.dtype, x4.device);
  TD_ASSIGN_OR_RETURN(ConvGeom g,
                      MakeConvGeom("conv2d", x4, *wt.meta, ctx.args[3], ctx.args[4], ctx.args[5], ctx.args[6].to_int(),
                                   "CPU"));
  Dst dst;
  TD_RETURN_IF_ERROR(dst.Init(ctx.outputs[0]));
  if (dst.ref.meta->numel() == 0) return absl::OkStatus();
  TD_RETURN_IF_ERROR(Dispatch<kSetStdFloats>(x.meta->dtype, "conv2d", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* xp = x.data<T>();
    const T* wp = wt.data<T>();
    T* op = dst.ref.data<T>();
    const bool one_by_one =
        g.kh == 1 && g.kw == 1 && g.s == std::array<int64_t, 2>{1, 1} && g.p == std::array<int64_t, 2>{0, 0};
    std::unique_ptr<TempTensor> col;
    if (!one_by_one && g.kk() > 0) {
      TD_ASSIGN_OR_RETURN(col, TempTensor::Make(Shape{g.kk(), g.ohw()}, x.meta->dtype));
    }
    for (int64_t n = 0; n < g.n; ++n) {
      for (int64_t gi = 0; gi < g.groups; ++gi) {
        const T* img = xp + (n * g.c + gi * g.cg()) * g.h * g.w;
        T* o = op + (n * g.o + gi * g.og()) * g.ohw();
        if (g.kk() == 0) {
          std::fill(o, o + g.og() * g.ohw(), T(0));
          continue;
        }
        const T* cols = img;  // a 1x1, stride-1, unpadded conv reads the image as its columns
        if (!one_by_one) {
          Im2Col(img, g, col->ref().template data<T>());
          cols = col->ref().template data<T>();
        }
        Gemm<T>(false, false, g.og(), g.ohw(), g.kk(), wp + gi * g.og() * g.kk(), cols, T(0), o);
      }
      if (b) {
        const T* bp = b->data<T>();
        for (int64_t oc = 0; oc < g.o; ++oc) {
          T* o = op + (n * g.o + oc) * g.ohw();
          for (int64_t k = 0; k < g.ohw(); ++k) o[k] += bp[oc];
        }
      }
    }
    return absl::OkStatus();
  }));
  return dst.Finish();
}

// convolution_backward(grad_output, input, weight, bias_sizes, stride,
// padding, dilation, transposed, output_padding, groups) -> (grad_input,
// grad_weight, grad_bias).
absl::Status ConvBackwardKernel(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 3));
  TD_ASSIGN_OR_RETURN(TensorRef grad, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(TensorRef input, InputTensor(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef weight, InputTensor(ctx, 2));
  std::unique_ptr<TempTensor> hg, hi, hw;
  TD_ASSIGN_OR_RETURN(TensorRef gy, Dense(grad, hg));
  TD_ASSIGN_OR_RETURN(TensorRef x, Dense(input, hi));
  TD_ASSIGN_OR_RETURN(TensorRef wt, Dense(weight, hw));
  TD_ASSIGN_OR_RETURN(ConvGeom g, MakeConvGeom("convolution_backward", *x.meta, *wt.meta, ctx.args[4], ctx.args[5],
                                               ctx.args[6], ctx.args[9].to_int(), "CPU"));
  Dst dgi, dgw, dgb;
  TD_RETURN_IF_ERROR(dgi.Init(ctx.outputs[0]));
  TD_RETURN_IF_ERROR(dgw.Init(ctx.outputs[1]));
  TD_RETURN_IF_ERROR(dgb.Init(ctx.outputs[2]));
  TD_RETURN_IF_ERROR(Dispatch<kSetStdFloats>(x.meta->dtype, "convolution_backward", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* xp = x.data<T>();
    const T* wp = wt.data<T>();
    const T* gp = gy.data<T>();
    T* gi = dgi.ref.data<T>();
    T* gw = dgw.ref.data<T>();
    T* gb = dgb.ref.data<T>();
    std::fill(gi, gi + dgi.ref.meta->numel(), T(0));
    std::fill(gw, gw + dgw.ref.meta->numel(), T(0));
    for (int64_t oc = 0; oc < g.o; ++oc) {
      double s = 0;
      for (int64_t n = 0; n < g.n; ++n) {
        const T* row = gp + (n * g.o + oc) * g.ohw();
        for (int64_t k = 0; k < g.ohw(); ++k) s += row[k];
      }
      gb[oc] = static_cast<T>(s);
    }
    if (g.kk() == 0 || g.ohw() == 0 || g.n == 0 || g.og() == 0) return absl::OkStatus();
    TD_ASSIGN_OR_RETURN(std::unique_ptr<TempTensor> col, TempTensor::Make(Shape{g.kk(), g.ohw()}, x.meta->dtype));
    T* cp = col->ref().template data<T>();
    for (int64_t n = 0; n < g.n; ++n) {
      for (int64_t gr = 0; gr < g.groups; ++gr) {
        const T* gyo = gp + (n * g.o + gr * g.og()) * g.ohw();  // [og, ohw]
        const T* wg = wp + gr * g.og() * g.kk();                // [og, kk]
        // grad_weight[og, kk] += gy[og, ohw] @ col^T[ohw, kk]
        Im2Col(xp + (n * g.c + gr * g.cg()) * g.h * g.w, g, cp);
        Gemm<T>(false, true, g.og(), g.kk(), g.ohw(), gyo, cp, T(1), gw + gr * g.og() * g.kk());
        // col_grad[kk, ohw] = W^T[kk, og] @ gy[og, ohw]; then scattered back.
        Gemm<T>(true, false, g.kk(), g.ohw(), g.og(), wg, gyo, T(0), cp);
        Col2ImAdd(cp, g, gi + (n * g.c + gr * g.cg()) * g.h * g.w);
      }
    }
    return absl::OkStatus();
  }));
  TD_RETURN_IF_ERROR(dgi.Finish());
  TD_RETURN_IF_ERROR(dgw.Finish());
  return dgb.Finish();
}

// ---- pooling -------------------------------------------------------------

struct PoolGeom {
  int64_t planes, h, w, oh, ow;
  std::array<int64_t, 2> k, s, p, d;
};

// `self` (3-D or 4-D) as planes of h x w; the output sizes from `out`.
PoolGeom MakePool(const TensorMeta& self, const TensorMeta& out, const Value& k, const Value& s, const Value& p,
                  const Value* d) {
  PoolGeom g;
  const int64_t nd = self.dim();
  g.h = self.sizes[nd - 2], g.w = self.sizes[nd - 1];
  g.planes = g.h * g.w == 0 ? 0 : self.numel() / (g.h * g.w);
  g.oh = out.sizes[nd - 2], g.ow = out.sizes[nd - 1];
  g.k = IntPair(k, {1, 1});
  g.s = IntPair(s, g.k);
  g.p = IntPair(p, {0, 0});
  g.d = d ? IntPair(*d, {1, 1}) : std::array<int64_t, 2>{1, 1};
  return g;
}

absl::Status MaxPoolKernel(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 2));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  std::unique_ptr<TempTensor> hx;
  TD_ASSIGN_OR_RETURN(TensorRef x, Dense(self, hx));
  const PoolGeom g = MakePool(*x.meta, *ctx.outputs[0].meta, ctx.args[1], ctx.args[2], ctx.args[3], &ctx.args[4]);
  Dst dv, di;
  TD_RETURN_IF_ERROR(dv.Init(ctx.outputs[0]));
  TD_RETURN_IF_ERROR(di.Init(ctx.outputs[1]));
  TD_RETURN_IF_ERROR(Dispatch<kSetStdFloats>(x.meta->dtype, "max_pool2d", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* xp = x.data<T>();
    T* vp = dv.ref.data<T>();
    int64_t* ip = di.ref.data<int64_t>();
    for (int64_t pl = 0; pl < g.planes; ++pl) {
      const T* img = xp + pl * g.h * g.w;
      for (int64_t y = 0; y < g.oh; ++y) {
        int64_t y0 = y * g.s[0] - g.p[0];
        const int64_t y1 = std::min(y0 + (g.k[0] - 1) * g.d[0] + 1, g.h);
        while (y0 < 0) y0 += g.d[0];
        for (int64_t xo = 0; xo < g.ow; ++xo) {
          int64_t x0 = xo * g.s[1] - g.p[1];
          const int64_t x1 = std::min(x0 + (g.k[1] - 1) * g.d[1] + 1, g.w);
          while (x0 < 0) x0 += g.d[1];
          int64_t best = y0 * g.w + x0;
          double mx = -std::numeric_limits<double>::infinity();
          for (int64_t iy = y0; iy < y1; iy += g.d[0])
            for (int64_t ix = x0; ix < x1; ix += g.d[1]) {
              const double v = static_cast<double>(img[iy * g.w + ix]);
              if (v > mx || std::isnan(v)) {
                mx = v;
                best = iy * g.w + ix;
              }
            }
          const int64_t o = (pl * g.oh + y) * g.ow + xo;
          vp[o] = static_cast<T>(mx);
          ip[o] = best;
        }
      }
    }
    return absl::OkStatus();
  }));
  TD_RETURN_IF_ERROR(dv.Finish());
  return di.Finish();
}

// max_pool2d_with_indices_backward(grad_output, self, ..., indices):
// grad_input[plane][indices[plane][o]] += grad_output[plane][o].
absl::Status MaxPoolBackwardKernel(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef grad, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef indices, InputTensor(ctx, 7));
  std::unique_ptr<TempTensor> hg, hi;
  TD_ASSIGN_OR_RETURN(TensorRef gy, Dense(grad, hg));
  TD_ASSIGN_OR_RETURN(TensorRef idx, Dense(indices, hi));
  const PoolGeom g = MakePool(*self.meta, *gy.meta, ctx.args[2], ctx.args[3], ctx.args[4], &ctx.args[5]);
  Dst dst;
  TD_RETURN_IF_ERROR(dst.Init(ctx.outputs[0]));
  TD_RETURN_IF_ERROR(
      Dispatch<kSetStdFloats>(gy.meta->dtype, "max_pool2d_with_indices_backward", [&](auto tag) -> absl::Status {
        using T = typename decltype(tag)::type;
        const T* gp = gy.data<T>();
        const int64_t* ip = idx.data<int64_t>();
        T* out = dst.ref.data<T>();
        std::fill(out, out + dst.ref.meta->numel(), T(0));
        const int64_t plane = g.h * g.w, oplane = g.oh * g.ow;
        for (int64_t pl = 0; pl < g.planes; ++pl)
          for (int64_t o = 0; o < oplane; ++o) {
            const int64_t i = ip[pl * oplane + o];
            if (i < 0 || i >= plane) {
              return IndexErr(absl::StrCat("max_pool2d_with_indices_backward: index ", i,
                                           " out of range for an input plane of ", g.h, "x", g.w));
            }
            out[pl * plane + i] += gp[pl * oplane + o];
          }
        return absl::OkStatus();
      }));
  return dst.Finish();
}

// The window of output (y, x) clipped to the input, and its divisor
// (PyTorch's avg_pool2d rules).
struct AvgWindow {
  int64_t y0, y1, x0, x1, divisor;
};
AvgWindow Window(const PoolGeom& g, int64_t y, int64_t x, bool count_include_pad, std::optional<int64_t> divisor) {
  AvgWindow w;
  w.y0 = y * g.s[0] - g.p[0];
  w.x0 = x * g.s[1] - g.p[1];
  w.y1 = std::min(w.y0 + g.k[0], g.h + g.p[0]);
  w.x1 = std::min(w.x0 + g.k[1], g.w + g.p[1]);
  const int64_t pool_size = (w.y1 - w.y0) * (w.x1 - w.x0);
  w.y0 = std::max<int64_t>(w.y0, 0);
  w.x0 = std::max<int64_t>(w.x0, 0);
  w.y1 = std::min(w.y1, g.h);
  w.x1 = std::min(w.x1, g.w);
  if (divisor)
    w.divisor = *divisor;
  else if (count_include_pad)
    w.divisor = pool_size;
  else
    w.divisor = (w.y1 - w.y0) * (w.x1 - w.x0);
  return w;
}

std::optional<int64_t> OptInt(const Value& v) {
  if (v.is_none()) return std::nullopt;
  return v.to_int();
}

absl::Status AvgPoolKernel(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  std::unique_ptr<TempTensor> hx;
  TD_ASSIGN_OR_RETURN(TensorRef x, Dense(self, hx));
  const PoolGeom g = MakePool(*x.meta, *ctx.outputs[0].meta, ctx.args[1], ctx.args[2], ctx.args[3], nullptr);
  const bool cip = ctx.args[5].to_bool();
  const std::optional<int64_t> div = OptInt(ctx.args[6]);
  Dst dst;
  TD_RETURN_IF_ERROR(dst.Init(ctx.outputs[0]));
  TD_RETURN_IF_ERROR(Dispatch<kSetStdFloats>(x.meta->dtype, "avg_pool2d", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* xp = x.data<T>();
    T* op = dst.ref.data<T>();
    for (int64_t pl = 0; pl < g.planes; ++pl) {
      const T* img = xp + pl * g.h * g.w;
      for (int64_t y = 0; y < g.oh; ++y)
        for (int64_t xo = 0; xo < g.ow; ++xo) {
          const AvgWindow w = Window(g, y, xo, cip, div);
          T& o = op[(pl * g.oh + y) * g.ow + xo];
          if (w.y0 >= w.y1 || w.x0 >= w.x1) {
            o = T(0);
            continue;
          }
          double s = 0;
          for (int64_t iy = w.y0; iy < w.y1; ++iy)
            for (int64_t ix = w.x0; ix < w.x1; ++ix) s += img[iy * g.w + ix];
          o = static_cast<T>(s / static_cast<double>(w.divisor));
        }
    }
    return absl::OkStatus();
  }));
  return dst.Finish();
}

absl::Status AvgPoolBackwardKernel(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef grad, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 1));
  std::unique_ptr<TempTensor> hg;
  TD_ASSIGN_OR_RETURN(TensorRef gy, Dense(grad, hg));
  const PoolGeom g = MakePool(*self.meta, *gy.meta, ctx.args[2], ctx.args[3], ctx.args[4], nullptr);
  const bool cip = ctx.args[6].to_bool();
  const std::optional<int64_t> div = OptInt(ctx.args[7]);
  Dst dst;
  TD_RETURN_IF_ERROR(dst.Init(ctx.outputs[0]));
  TD_RETURN_IF_ERROR(Dispatch<kSetStdFloats>(gy.meta->dtype, "avg_pool2d_backward", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* gp = gy.data<T>();
    T* out = dst.ref.data<T>();
    std::fill(out, out + dst.ref.meta->numel(), T(0));
    for (int64_t pl = 0; pl < g.planes; ++pl) {
      T* img = out + pl * g.h * g.w;
      for (int64_t y = 0; y < g.oh; ++y)
        for (int64_t xo = 0; xo < g.ow; ++xo) {
          const AvgWindow w = Window(g, y, xo, cip, div);
          const T v = static_cast<T>(gp[(pl * g.oh + y) * g.ow + xo] / static_cast<T>(w.divisor));
          for (int64_t iy = w.y0; iy < w.y1; ++iy)
            for (int64_t ix = w.x0; ix < w.x1; ++ix) img[iy * g.w + ix] += v;
        }
    }
    return absl::OkStatus();
  }));
  return dst.Finish();
}

}  // namespace

absl::Status RegisterConvKernels(KernelRegistry& r) {
  TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, "conv2d", Conv2dKernel));
  TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, "convolution_backward", ConvBackwardKernel));
  TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, "max_pool2d_with_indices", MaxPoolKernel));
  TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, "max_pool2d_with_indices_backward", MaxPoolBackwardKernel));
  TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, "avg_pool2d", AvgPoolKernel));
  TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, "avg_pool2d_backward", AvgPoolBackwardKernel));
  return absl::OkStatus();
}

}  // namespace tensord::cpu
