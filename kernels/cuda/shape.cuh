// kernels/cuda/shape.cuh — the shape kernels of a RemapCall or a
// SequenceCall (shape_call.h): one thread per output element, a grid-stride
// loop, 64-bit offsets. A remap thread splits its linear index into the
// output's coordinates (row-major, last dim fastest) and sums each dim's
// output and source offsets; elements move as bits of their size, so every
// dtype is one instance per size. HostShapeEngine runs the same
// per-element code on the host (the host tests).
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_SHAPE_CUH_
#define TENSORD_KERNELS_CUDA_SHAPE_CUH_

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cuda_dtypes.h"
#include "elementwise_call.h"
#include "macros.h"
#include "rounded_math.h"
#include "shape_call.h"

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

namespace tensord::cuda {

// Elements of a remap's output.
inline int64_t RemapNumel(const RemapCall& c) {
  int64_t n = 1;
  for (int d = 0; d < c.ndim; ++d) n *= c.dims[d].out_size;
  return n;
}

// Element i of the output (U: an unsigned integer of the element's size).
template <typename U, RemapOp kOp>
struct RemapBody {
  static TD_HOST_DEVICE TD_INLINE void Run(const RemapCall& p, int64_t i) {
    int64_t rem = i, out_off = 0, src_off = 0;
    [[maybe_unused]] bool fill = false;          // kGather
    [[maybe_unused]] int64_t row = 0, col = 0;  // kTril, kTriu
    for (int d = p.ndim - 1; d >= 0; --d) {
      const RemapDim& m = p.dims[d];
      const int64_t j = rem % m.out_size;
      rem /= m.out_size;
      out_off += j * m.out_stride;
      if constexpr (kOp == RemapOp::kGather) {
        if (m.padded) {
          const int64_t k = j - m.before;  // |j|, |before| < 2^63 - out_size: no overflow (meta checked)
          if (k < 0 || k >= m.src_size) {
            fill = true;
          } else {
            src_off += k * m.src_stride;
          }
        } else {
          int64_t k = m.reverse ? m.src_size - 1 - j : j;
          if (m.shift != 0 || k >= m.src_size) k = (k % m.src_size + m.shift) % m.src_size;
          src_off += k * m.src_stride;
        }
      } else {
        src_off += j * m.src_stride;
        if (d == p.ndim - 1) col = j;
        if (d == p.ndim - 2) row = j;
      }
    }
    U v;
    if constexpr (kOp == RemapOp::kGather) {
      v = fill ? static_cast<U>(p.fill) : *reinterpret_cast<const U*>(p.src + src_off);
    } else {
      const bool keep = kOp == RemapOp::kTril ? col <= row + p.diagonal : col >= row + p.diagonal;
      v = keep ? *reinterpret_cast<const U*>(p.src + src_off) : U(0);
    }
    *reinterpret_cast<U*>(p.out + out_off) = v;
  }
};

// ---- sequences -------------------------------------------------------------------

// linspace's products and sums round each step (rounded_math.h), so its
// values match the CPU's bit for bit.
template <typename F>
TD_HOST_DEVICE TD_INLINE F FromBits(uint64_t bits) {
  F v;
  memcpy(&v, &bits, sizeof(F));
  return v;
}

// The type linspace computes in for T (the CPU kernel's StepT).
template <typename T>
using LinspaceStepT =
    std::conditional_t<std::is_same_v<T, double> || std::is_integral_v<T>, double, float>;

template <typename T>
inline constexpr bool kIsFloating = std::is_floating_point_v<ComputeT<T>>;

template <typename T, SequenceOp kOp>
struct SequenceBody {
  static TD_HOST_DEVICE TD_INLINE void Run(const SequenceCall& p, int64_t i) {
    using C = ComputeT<T>;
    char* dst = p.out + i * p.stride;
    if constexpr (kOp == SequenceOp::kArange) {
      if constexpr (kIsFloating<T>) {
        const double v = AddRn(FromBits<double>(p.start), MulRn(FromBits<double>(p.step), static_cast<double>(i)));
        Store<T>(dst, static_cast<C>(v));
      } else {
        const int64_t v =
            WrapAdd<int64_t>(static_cast<int64_t>(p.start), WrapMul<int64_t>(static_cast<int64_t>(p.step), i));
        Store<T>(dst, static_cast<T>(v));
      }
    } else {
      using S = LinspaceStepT<T>;
      const S s = FromBits<S>(p.start);
      S v;
      if (p.n == 1) {
        v = s;
      } else if (i < p.n / 2) {
        v = AddRn(s, MulRn(FromBits<S>(p.step), static_cast<S>(i)));
      } else {
        v = SubRn(FromBits<S>(p.end), MulRn(FromBits<S>(p.step), static_cast<S>(p.n - i - 1)));
      }
      if constexpr (kIsFloating<T>) {
        Store<T>(dst, static_cast<C>(v));
      } else {
        Store<T>(dst, FloatToInt<T>(static_cast<double>(v)));
      }
    }
  }
};

#if defined(__CUDACC__)

inline constexpr int kShapeThreads = 256;

template <class Body, class Call>
__global__ void __launch_bounds__(kShapeThreads) ShapeKernel(Call p, int64_t numel) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * kShapeThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kShapeThreads + threadIdx.x; i < numel; i += step) {
    Body::Run(p, i);
  }
}

struct CudaShapeEngine {
  template <class Body, class Call>
  static int Run(const Call& c, int64_t numel, void* stream) {
    if (numel == 0) return kLaunchOk;
    const int64_t want = (numel + kShapeThreads - 1) / kShapeThreads;
    const unsigned int blocks = static_cast<unsigned int>(want < (int64_t{1} << 16) ? want : (int64_t{1} << 16));
    ShapeKernel<Body, Call><<<blocks, kShapeThreads, 0, static_cast<cudaStream_t>(stream)>>>(c, numel);
    return static_cast<int>(cudaGetLastError());
  }
};

#endif  // defined(__CUDACC__)

// The kernel's work items one after another on the host (tests).
struct HostShapeEngine {
  template <class Body, class Call>
  static int Run(const Call& c, int64_t numel, void* /*stream*/) {
    for (int64_t i = 0; i < numel; ++i) Body::Run(c, i);
    return kLaunchOk;
  }
};

template <class Engine, RemapOp kOp>
int DispatchRemapOp(const RemapCall& call, int64_t numel, void* stream) {
  switch (call.itemsize) {
    case 1: return Engine::template Run<RemapBody<uint8_t, kOp>>(call, numel, stream);
    case 2: return Engine::template Run<RemapBody<uint16_t, kOp>>(call, numel, stream);
    case 4: return Engine::template Run<RemapBody<uint32_t, kOp>>(call, numel, stream);
    case 8: return Engine::template Run<RemapBody<uint64_t, kOp>>(call, numel, stream);
    default: return kLaunchBadDtype;
  }
}

// The body of `call.op` for its element size, run by Engine.
template <class Engine>
int DispatchRemap(const RemapCall& call, void* stream) {
  if (call.ndim < 0 || call.ndim > kMaxRemapDims) return kLaunchBadOperands;
  if (call.op != RemapOp::kGather && call.ndim < 2) return kLaunchBadOperands;
  for (int d = 0; d < call.ndim; ++d) {
    if (call.dims[d].out_size < 0) return kLaunchBadOperands;
  }
  const int64_t numel = RemapNumel(call);
  // An empty tensor's storage may have no address: nothing to do.
  if (numel == 0) return kLaunchOk;
  // The source may be empty (and have none) when every element is a pad.
  if (call.out == nullptr) return kLaunchBadOperands;
  for (int d = 0; d < call.ndim; ++d) {
    // A wrapping dim reads modulo its source size: it must have elements.
    if (!call.dims[d].padded && call.dims[d].src_size <= 0) return kLaunchBadOperands;
  }
  switch (call.op) {
    case RemapOp::kGather: return DispatchRemapOp<Engine, RemapOp::kGather>(call, numel, stream);
    case RemapOp::kTril: return DispatchRemapOp<Engine, RemapOp::kTril>(call, numel, stream);
    case RemapOp::kTriu: return DispatchRemapOp<Engine, RemapOp::kTriu>(call, numel, stream);
  }
  return kLaunchBadOp;
}

template <class Engine>
int DispatchSequence(const SequenceCall& call, void* stream) {
  if (call.n < 0 || (call.n > 0 && call.out == nullptr)) return kLaunchBadOperands;
  return DispatchDtype<kSetNumeric>(call.dtype, static_cast<int>(kLaunchBadDtype), [&](auto tag) -> int {
    using T = typename decltype(tag)::type;
    if (call.op == SequenceOp::kArange) {
      return Engine::template Run<SequenceBody<T, SequenceOp::kArange>>(call, call.n, stream);
    }
    if (call.op == SequenceOp::kLinspace) {
      return Engine::template Run<SequenceBody<T, SequenceOp::kLinspace>>(call, call.n, stream);
    }
    return static_cast<int>(kLaunchBadOp);
  });
}

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_SHAPE_CUH_
