// kernels/cuda/nn.cuh — the nn kernels of nn_call.h, written once for the
// GPU and for the host tests:
//
//   softmax   one block per row: a max fold, then a sum of exp(x - max),
//             each thread t over elements t, t + 256, ... and a fixed tree
//             (as reduce.cuh), then every element written
//   Adam      one thread per element, the CPU's rounding step by step
//   pooling   one thread per output element (forward) or per input
//             element (backward: a gather over the windows that cover it,
//             in the CPU's order, so no atomics and the CPU's sums)
//   im2col    one thread per column entry; col2im one per image element
//
// Every body is a TD_HOST_DEVICE function of one work item; the Cuda*
// engines launch it, the Host* engines loop over it (HostLaunch::Nn).
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_NN_CUH_
#define TENSORD_KERNELS_CUDA_NN_CUH_

#include <math.h>

#include <cstdint>
#include <type_traits>

#include "cuda_dtypes.h"
#include "elementwise_call.h"
#include "elementwise_ops.h"
#include "macros.h"
#include "nn_call.h"
#include "rounded_math.h"
#include "offset_calculator.h"
#include "tensord/kernels/device_error.h"

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

namespace tensord::cuda {

// ---- exact float arithmetic --------------------------------------------------------
// The fused Adam step must round like the CPU's loop: MulRn, AddRn, DivRn
// (rounded_math.h), and the square root here.

template <typename C>
TD_HOST_DEVICE TD_INLINE C SqrtRn(C a) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<C, float>) {
    return __fsqrt_rn(a);
  } else {
    return __dsqrt_rn(a);
  }
#else
  return math::Sqrt(a);
#endif
}

// ---- softmax ----------------------------------------------------------------------

struct SoftmaxParams {
  char* out;
  const char* in;
  ScalarType in_dtype;
  int64_t rows, n, in_stride, out_stride;
};

inline SoftmaxParams MakeSoftmaxParams(const SoftmaxCall& c) {
  return SoftmaxParams{c.out, c.in, c.in_dtype, c.rows.numel(), c.n, c.in_stride, c.out_stride};
}

// The folds of one row (C: float or double). Max propagates NaN, so a row
// with a NaN (or whose max is inf, or all -inf) comes out NaN, as the CPU's.
template <typename T, bool kLog>
struct SoftmaxRow {
  using C = ComputeT<T>;
  static TD_HOST_DEVICE TD_INLINE C Max(C a, C x) { return (IsNan(x) || x > a) ? x : a; }
  static TD_HOST_DEVICE TD_INLINE C At(const SoftmaxParams& p, const char* in, int64_t k) {
    return LoadCast<T>(in + k * p.in_stride, p.in_dtype);
  }
  // Thread t's share of pass 1 (the max) and 2 (the sum of exp(x - max)).
  static TD_HOST_DEVICE TD_INLINE C PartialMax(const SoftmaxParams& p, const char* in, int t) {
    C a = static_cast<C>(-INFINITY);
    for (int64_t k = t; k < p.n; k += kSoftmaxThreads) a = Max(a, At(p, in, k));
    return a;
  }
  static TD_HOST_DEVICE TD_INLINE C PartialSum(const SoftmaxParams& p, const char* in, int t, C mx) {
    C s = 0;
    for (int64_t k = t; k < p.n; k += kSoftmaxThreads) s += math::Exp(At(p, in, k) - mx);
    return s;
  }
  // Pass 3: thread t writes elements t, t + 256, ...
  static TD_HOST_DEVICE TD_INLINE void Write(const SoftmaxParams& p, const char* in, char* out, int t, C mx, C sum) {
    const C log_sum = math::Log(sum);
    for (int64_t k = t; k < p.n; k += kSoftmaxThreads) {
      const C x = At(p, in, k) - mx;
      Store<T>(out + k * p.out_stride, kLog ? x - log_sum : math::Exp(x) / sum);
    }
  }
};

// ---- fused Adam ----------------------------------------------------------------------

template <typename C>
struct AdamConstantsC {
  C sign, b1, omb1, b2, omb2, wd, decay, bc2_sqrt, eps, neg_step;
};

struct AdamParams {
  char* p;
  const char* g;
  char* m;
  char* v;
  int64_t numel;
};

// kernels/cpu/optim.cc's AdamSpan for element k, operation for operation.
template <typename C, bool kL2, bool kDecay>
struct AdamBody {
  static TD_HOST_DEVICE TD_INLINE void Run(const AdamParams& a, const AdamConstantsC<C>& c, int64_t k) {
    C* p = reinterpret_cast<C*>(a.p);
    const C* g = reinterpret_cast<const C*>(a.g);
    C* m = reinterpret_cast<C*>(a.m);
    C* v = reinterpret_cast<C*>(a.v);
    C gk = MulRn(g[k], c.sign);
    C pk = p[k];
    if constexpr (kDecay) pk = MulRn(pk, c.decay);
    if constexpr (kL2) gk = AddRn(gk, MulRn(c.wd, pk));
    const C mk = AddRn(MulRn(m[k], c.b1), MulRn(c.omb1, gk));
    const C vk = AddRn(MulRn(v[k], c.b2), MulRn(MulRn(c.omb2, gk), gk));
    const C denom = AddRn(DivRn(SqrtRn(vk), c.bc2_sqrt), c.eps);
    m[k] = mk;
    v[k] = vk;
    p[k] = AddRn(pk, DivRn(MulRn(c.neg_step, mk), denom));
  }
};

template <typename C>
AdamConstantsC<C> MakeAdamConstants(const AdamCall& call) {
  // static_cast of the CPU kernel's doubles, as it rounds them.
  return AdamConstantsC<C>{static_cast<C>(call.sign),         static_cast<C>(call.beta1),
                           static_cast<C>(call.one_minus_beta1), static_cast<C>(call.beta2),
                           static_cast<C>(call.one_minus_beta2), static_cast<C>(call.weight_decay),
                           static_cast<C>(call.decay),          static_cast<C>(call.bias_correction2_sqrt),
                           static_cast<C>(call.eps),            static_cast<C>(call.neg_step_size)};
}

// ---- pooling -------------------------------------------------------------------------

// The avg window of output (y, x) clipped to the input, and its divisor
// (kernels/cpu/conv.cc's Window: PyTorch's avg_pool2d rules).
struct AvgWindowC {
  int64_t y0, y1, x0, x1, divisor;
};

TD_HOST_DEVICE TD_INLINE AvgWindowC AvgWindowOf(const PoolCall& g, int64_t y, int64_t x) {
  AvgWindowC w;
  w.y0 = y * g.s[0] - g.p[0];
  w.x0 = x * g.s[1] - g.p[1];
  w.y1 = w.y0 + g.k[0] < g.h + g.p[0] ? w.y0 + g.k[0] : g.h + g.p[0];
  w.x1 = w.x0 + g.k[1] < g.w + g.p[1] ? w.x0 + g.k[1] : g.w + g.p[1];
  const int64_t pool_size = (w.y1 - w.y0) * (w.x1 - w.x0);
  w.y0 = w.y0 > 0 ? w.y0 : 0;
  w.x0 = w.x0 > 0 ? w.x0 : 0;
  w.y1 = w.y1 < g.h ? w.y1 : g.h;
  w.x1 = w.x1 < g.w ? w.x1 : g.w;
  if (g.divisor != 0) {
    w.divisor = g.divisor;
  } else if (g.count_include_pad) {
    w.divisor = pool_size;
  } else {
    w.divisor = (w.y1 - w.y0) * (w.x1 - w.x0);
  }
  return w;
}

// Element (n, c, y, x) of a tensor with element strides `st`.
template <typename T>
TD_HOST_DEVICE TD_INLINE T* PoolAt(char* base, const int64_t (&st)[4], int64_t n, int64_t c, int64_t y, int64_t x) {
  return reinterpret_cast<T*>(base) + (n * st[0] + c * st[1] + y * st[2] + x * st[3]);
}

// Work items: outputs (forward), inputs (avg backward), or both (max
// backward: item i checks index i and gathers input element i).
inline int64_t PoolWorkItems(const PoolCall& g) {
  const int64_t ins = g.n * g.c * g.h * g.w, outs = g.n * g.c * g.oh * g.ow;
  switch (g.op) {
    case PoolOp::kMaxForward:
    case PoolOp::kAvgForward: return outs;
    case PoolOp::kAvgBackward: return ins;
    case PoolOp::kMaxBackward: return ins > outs ? ins : outs;
  }
  return 0;
}

// Claims the error word for an index outside its plane (first one wins).
TD_HOST_DEVICE TD_INLINE void RecordPoolIndexError(DeviceErrorWord* w, uint32_t op_id, int64_t value, int64_t h,
                                                   int64_t width) {
#if defined(__CUDA_ARCH__)
  if (atomicCAS(reinterpret_cast<int*>(&w->code), 0, static_cast<int>(kPoolIndexOutOfBounds)) != 0) return;
#else
  if (w->code != kNoDeviceError) return;
  w->code = kPoolIndexOutOfBounds;
#endif
  w->op_id = op_id;
  w->value = value;
  w->dim = h;
  w->size = width;
}

template <typename T, PoolOp kOp>
struct PoolBody {
  static TD_HOST_DEVICE TD_INLINE void Run(const PoolCall& g, int64_t i) {
    if constexpr (kOp == PoolOp::kMaxForward || kOp == PoolOp::kAvgForward) {
      const int64_t x = i % g.ow, y = (i / g.ow) % g.oh, c = (i / (g.ow * g.oh)) % g.c, n = i / (g.ow * g.oh * g.c);
      T* out = PoolAt<T>(g.output, g.out_strides, n, c, y, x);
      if constexpr (kOp == PoolOp::kMaxForward) {
        // kernels/cpu/conv.cc's MaxPoolKernel: compared in double, NaN wins.
        int64_t y0 = y * g.s[0] - g.p[0];
        const int64_t y1e = y0 + (g.k[0] - 1) * g.d[0] + 1, y1 = y1e < g.h ? y1e : g.h;
        while (y0 < 0) y0 += g.d[0];
        int64_t x0 = x * g.s[1] - g.p[1];
        const int64_t x1e = x0 + (g.k[1] - 1) * g.d[1] + 1, x1 = x1e < g.w ? x1e : g.w;
        while (x0 < 0) x0 += g.d[1];
        int64_t best = y0 * g.w + x0;
        double mx = -INFINITY;
        for (int64_t iy = y0; iy < y1; iy += g.d[0]) {
          for (int64_t ix = x0; ix < x1; ix += g.d[1]) {
            const double v = static_cast<double>(*PoolAt<T>(g.input, g.in_strides, n, c, iy, ix));
            if (v > mx || IsNan(v)) {
              mx = v;
              best = iy * g.w + ix;
            }
          }
        }
        *out = static_cast<T>(mx);
        *PoolAt<int64_t>(g.indices, g.idx_strides, n, c, y, x) = best;
      } else {
        const AvgWindowC w = AvgWindowOf(g, y, x);
        if (w.y0 >= w.y1 || w.x0 >= w.x1) {
          *out = T(0);
          return;
        }
        double s = 0;
        for (int64_t iy = w.y0; iy < w.y1; ++iy) {
          for (int64_t ix = w.x0; ix < w.x1; ++ix) s += *PoolAt<T>(g.input, g.in_strides, n, c, iy, ix);
        }
        *out = static_cast<T>(s / static_cast<double>(w.divisor));
      }
    } else {
      if constexpr (kOp == PoolOp::kMaxBackward) {
        if (i < g.n * g.c * g.oh * g.ow) {
          const int64_t x = i % g.ow, y = (i / g.ow) % g.oh, c = (i / (g.ow * g.oh)) % g.c,
                        n = i / (g.ow * g.oh * g.c);
          const int64_t v = *PoolAt<int64_t>(g.indices, g.idx_strides, n, c, y, x);
          if (v < 0 || v >= g.h * g.w) RecordPoolIndexError(g.error_word, g.op_id, v, g.h, g.w);
        }
        if (i >= g.n * g.c * g.h * g.w) return;
      }
      // Input element (n, c, iy, ix): the outputs whose window may cover
      // it, in the CPU's order (row-major), summed in T as the CPU adds.
      const int64_t ix = i % g.w, iy = (i / g.w) % g.h, c = (i / (g.w * g.h)) % g.c, n = i / (g.w * g.h * g.c);
      const int64_t span_y = (g.k[0] - 1) * g.d[0] + 1, span_x = (g.k[1] - 1) * g.d[1] + 1;
      const int64_t ys = iy + g.p[0] < span_y ? 0 : (iy + g.p[0] - span_y) / g.s[0] + 1;
      const int64_t xs = ix + g.p[1] < span_x ? 0 : (ix + g.p[1] - span_x) / g.s[1] + 1;
      const int64_t ye0 = (iy + g.p[0]) / g.s[0] + 1, xe0 = (ix + g.p[1]) / g.s[1] + 1;
      const int64_t ye = ye0 < g.oh ? ye0 : g.oh, xe = xe0 < g.ow ? xe0 : g.ow;
      T acc = T(0);
      for (int64_t y = ys; y < ye; ++y) {
        for (int64_t x = xs; x < xe; ++x) {
          const T gy = *PoolAt<T>(g.output, g.out_strides, n, c, y, x);
          if constexpr (kOp == PoolOp::kMaxBackward) {
            // An index that names another element of the window (or one
            // outside it) is not this element's, as PyTorch's CUDA kernel.
            if (*PoolAt<int64_t>(g.indices, g.idx_strides, n, c, y, x) == iy * g.w + ix) acc += gy;
          } else {
            const AvgWindowC w = AvgWindowOf(g, y, x);
            if (iy >= w.y0 && iy < w.y1 && ix >= w.x0 && ix < w.x1) acc += static_cast<T>(gy / static_cast<T>(w.divisor));
          }
        }
      }
      *PoolAt<T>(g.input, g.in_strides, n, c, iy, ix) = acc;
    }
  }
};

// ---- im2col / col2im -------------------------------------------------------------------

inline int64_t ColWorkItems(const ColCall& g) {
  const int64_t ohw = g.oh * g.ow;
  return g.op == ColOp::kIm2Col ? g.c * g.k[0] * g.k[1] * g.nb * ohw : g.nb * g.c * g.h * g.w;
}

template <typename T, ColOp kOp>
struct ColBody {
  static TD_HOST_DEVICE TD_INLINE void Run(const ColCall& g, int64_t i) {
    const int64_t ohw = g.oh * g.ow, cols = g.nb * ohw;
    if constexpr (kOp == ColOp::kIm2Col) {
      // Row (c, ki, kj) of the [C * kh * kw][nb * ohw] buffer: group g's
      // rows are its cg channels', one block of the buffer.
      const int64_t col = i % cols, row = i / cols;
      const int64_t b = col / ohw, y = (col % ohw) / g.ow, x = col % g.ow;
      const int64_t kj = row % g.k[1], ki = (row / g.k[1]) % g.k[0], c = row / (g.k[0] * g.k[1]);
      const int64_t iy = y * g.s[0] - g.p[0] + ki * g.d[0], ix = x * g.s[1] - g.p[1] + kj * g.d[1];
      T v = T(0);
      if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) v = *PoolAt<T>(g.image, g.img_strides, b, c, iy, ix);
      reinterpret_cast<T*>(g.col)[i] = v;
    } else {
      // Image element (b, c, iy, ix): each (ki, kj) reads it from at most
      // one output position; summed in (ki, kj) order as the CPU's col2im.
      const int64_t ix = i % g.w, iy = (i / g.w) % g.h, c = (i / (g.w * g.h)) % g.c, b = i / (g.w * g.h * g.c);
      const T* colp = reinterpret_cast<const T*>(g.col);
      T acc = T(0);
      for (int64_t ki = 0; ki < g.k[0]; ++ki) {
        const int64_t ty = iy + g.p[0] - ki * g.d[0];
        if (ty < 0 || ty % g.s[0] != 0 || ty / g.s[0] >= g.oh) continue;
        const int64_t y = ty / g.s[0];
        for (int64_t kj = 0; kj < g.k[1]; ++kj) {
          const int64_t tx = ix + g.p[1] - kj * g.d[1];
          if (tx < 0 || tx % g.s[1] != 0 || tx / g.s[1] >= g.ow) continue;
          const int64_t x = tx / g.s[1];
          acc += colp[((c * g.k[0] + ki) * g.k[1] + kj) * cols + b * ohw + y * g.ow + x];
        }
      }
      *PoolAt<T>(g.image, g.img_strides, b, c, iy, ix) = acc;
    }
  }
};

// ---- engines ---------------------------------------------------------------------------

#if defined(__CUDACC__)

inline constexpr int kNnThreads = 256;

inline unsigned int NnBlocks(int64_t items, int threads) {
  const int64_t want = (items + threads - 1) / threads;
  return static_cast<unsigned int>(want < (int64_t{1} << 16) ? want : (int64_t{1} << 16));
}

template <class Body, class Params>
__global__ void __launch_bounds__(kNnThreads) NnElementKernel(Params p, int64_t items) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * kNnThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kNnThreads + threadIdx.x; i < items; i += step) {
    Body::Run(p, i);
  }
}

template <typename C, bool kL2, bool kDecay>
__global__ void __launch_bounds__(kNnThreads) AdamKernel(AdamParams a, AdamConstantsC<C> c) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * kNnThreads;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * kNnThreads + threadIdx.x; k < a.numel; k += step) {
    AdamBody<C, kL2, kDecay>::Run(a, c, k);
  }
}

// One block per row (grid-stride over rows); the partial results of each
// pass meet in a fixed tree in shared memory.
template <typename T, bool kLog>
__global__ void __launch_bounds__(kSoftmaxThreads) SoftmaxKernel(SoftmaxParams p, OffsetCalculator<2, uint64_t> rows) {
  using Row = SoftmaxRow<T, kLog>;
  using C = typename Row::C;
  __shared__ C partial[kSoftmaxThreads];
  const int t = static_cast<int>(threadIdx.x);
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const auto o = rows.get(static_cast<uint64_t>(r));
    const char* in = p.in + o[1];
    partial[t] = Row::PartialMax(p, in, t);
    __syncthreads();
#pragma unroll
    for (int s = kSoftmaxThreads / 2; s > 0; s /= 2) {
      if (t < s) partial[t] = Row::Max(partial[t], partial[t + s]);
      __syncthreads();
    }
    const C mx = partial[0];
    __syncthreads();
    partial[t] = Row::PartialSum(p, in, t, mx);
    __syncthreads();
#pragma unroll
    for (int s = kSoftmaxThreads / 2; s > 0; s /= 2) {
      if (t < s) partial[t] += partial[t + s];
      __syncthreads();
    }
    const C sum = partial[0];
    __syncthreads();  // partial[0] is read before the next row overwrites it
    Row::Write(p, in, p.out + o[0], t, mx, sum);
  }
}

struct CudaNnEngine {
  template <typename T, bool kLog>
  static int Softmax(const SoftmaxCall& c, void* stream) {
    const SoftmaxParams p = MakeSoftmaxParams(c);
    if (p.rows == 0 || p.n == 0) return kLaunchOk;
    const unsigned int blocks = static_cast<unsigned int>(p.rows < (int64_t{1} << 16) ? p.rows : (int64_t{1} << 16));
    SoftmaxKernel<T, kLog><<<blocks, kSoftmaxThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        p, OffsetCalculator<2, uint64_t>(c.rows));
    return static_cast<int>(cudaGetLastError());
  }
  template <typename C, bool kL2, bool kDecay>
  static int Adam(const AdamParams& a, const AdamConstantsC<C>& c, void* stream) {
    if (a.numel == 0) return kLaunchOk;
    AdamKernel<C, kL2, kDecay><<<NnBlocks(a.numel, kNnThreads), kNnThreads, 0, static_cast<cudaStream_t>(stream)>>>(a, c);
    return static_cast<int>(cudaGetLastError());
  }
  template <class Body, class Call>
  static int Elements(const Call& c, int64_t items, void* stream) {
    if (items == 0) return kLaunchOk;
    NnElementKernel<Body, Call><<<NnBlocks(items, kNnThreads), kNnThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        c, items);
    return static_cast<int>(cudaGetLastError());
  }
};

#endif  // defined(__CUDACC__)

// The same work items and trees, one after another on the host (tests).
struct HostNnEngine {
  template <typename T, bool kLog>
  static int Softmax(const SoftmaxCall& c, void* /*stream*/) {
    using Row = SoftmaxRow<T, kLog>;
    using C = typename Row::C;
    const SoftmaxParams p = MakeSoftmaxParams(c);
    if (p.rows == 0 || p.n == 0) return kLaunchOk;
    const OffsetCalculator<2, uint64_t> rows(c.rows);
    C partial[kSoftmaxThreads];
    for (int64_t r = 0; r < p.rows; ++r) {
      const auto o = rows.get(static_cast<uint64_t>(r));
      const char* in = p.in + o[1];
      for (int t = 0; t < kSoftmaxThreads; ++t) partial[t] = Row::PartialMax(p, in, t);
      for (int s = kSoftmaxThreads / 2; s > 0; s /= 2) {
        for (int t = 0; t < s; ++t) partial[t] = Row::Max(partial[t], partial[t + s]);
      }
      const C mx = partial[0];
      for (int t = 0; t < kSoftmaxThreads; ++t) partial[t] = Row::PartialSum(p, in, t, mx);
      for (int s = kSoftmaxThreads / 2; s > 0; s /= 2) {
        for (int t = 0; t < s; ++t) partial[t] += partial[t + s];
      }
      const C sum = partial[0];
      for (int t = 0; t < kSoftmaxThreads; ++t) Row::Write(p, in, p.out + o[0], t, mx, sum);
    }
    return kLaunchOk;
  }
  template <typename C, bool kL2, bool kDecay>
  static int Adam(const AdamParams& a, const AdamConstantsC<C>& c, void* /*stream*/) {
    for (int64_t k = 0; k < a.numel; ++k) AdamBody<C, kL2, kDecay>::Run(a, c, k);
    return kLaunchOk;
  }
  template <class Body, class Call>
  static int Elements(const Call& c, int64_t items, void* /*stream*/) {
    for (int64_t i = 0; i < items; ++i) Body::Run(c, i);
    return kLaunchOk;
  }
};

// ---- dispatch ---------------------------------------------------------------------------

template <class Engine>
int DispatchSoftmax(const SoftmaxCall& call, void* stream) {
  if (call.out == nullptr || call.rows.num_operands != 2) return kLaunchBadOperands;
  if (call.in == nullptr && call.rows.numel() * call.n > 0) return kLaunchBadOperands;
  return DispatchDtype<kSetFloats>(call.dtype, static_cast<int>(kLaunchBadDtype), [&](auto tag) -> int {
    using T = typename decltype(tag)::type;
    return call.log ? Engine::template Softmax<T, true>(call, stream) : Engine::template Softmax<T, false>(call, stream);
  });
}

template <class Engine>
int DispatchAdam(const AdamCall& call, void* stream) {
  if (call.numel > 0 && (call.param == nullptr || call.grad == nullptr || call.exp_avg == nullptr ||
                         call.exp_avg_sq == nullptr)) {
    return kLaunchBadOperands;
  }
  if (call.l2 && call.decoupled) return kLaunchBadOperands;
  const AdamParams a{call.param, call.grad, call.exp_avg, call.exp_avg_sq, call.numel};
  return DispatchDtype<kSetStdFloats>(call.dtype, static_cast<int>(kLaunchBadDtype), [&](auto tag) -> int {
    using C = typename decltype(tag)::type;
    const AdamConstantsC<C> c = MakeAdamConstants<C>(call);
    if (call.l2) return Engine::template Adam<C, true, false>(a, c, stream);
    if (call.decoupled) return Engine::template Adam<C, false, true>(a, c, stream);
    return Engine::template Adam<C, false, false>(a, c, stream);
  });
}

template <class Engine>
int DispatchPool(const PoolCall& call, void* stream) {
  const int64_t items = PoolWorkItems(call);
  if (items > 0 && (call.input == nullptr || call.output == nullptr)) return kLaunchBadOperands;
  const bool max = call.op == PoolOp::kMaxForward || call.op == PoolOp::kMaxBackward;
  if (items > 0 && max && call.indices == nullptr) return kLaunchBadOperands;
  if (call.op == PoolOp::kMaxBackward && call.error_word == nullptr) return kLaunchBadOperands;
  return DispatchDtype<kSetStdFloats>(call.dtype, static_cast<int>(kLaunchBadDtype), [&](auto tag) -> int {
    using T = typename decltype(tag)::type;
    switch (call.op) {
      case PoolOp::kMaxForward: return Engine::template Elements<PoolBody<T, PoolOp::kMaxForward>>(call, items, stream);
      case PoolOp::kMaxBackward: return Engine::template Elements<PoolBody<T, PoolOp::kMaxBackward>>(call, items, stream);
      case PoolOp::kAvgForward: return Engine::template Elements<PoolBody<T, PoolOp::kAvgForward>>(call, items, stream);
      case PoolOp::kAvgBackward: return Engine::template Elements<PoolBody<T, PoolOp::kAvgBackward>>(call, items, stream);
    }
    return static_cast<int>(kLaunchBadOp);
  });
}

template <class Engine>
int DispatchCol(const ColCall& call, void* stream) {
  const int64_t items = ColWorkItems(call);
  if (items > 0 && (call.image == nullptr || call.col == nullptr)) return kLaunchBadOperands;
  return DispatchDtype<kSetStdFloats>(call.dtype, static_cast<int>(kLaunchBadDtype), [&](auto tag) -> int {
    using T = typename decltype(tag)::type;
    return call.op == ColOp::kIm2Col ? Engine::template Elements<ColBody<T, ColOp::kIm2Col>>(call, items, stream)
                                     : Engine::template Elements<ColBody<T, ColOp::kCol2Im>>(call, items, stream);
  });
}

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_NN_CUH_
