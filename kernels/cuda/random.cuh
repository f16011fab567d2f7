// kernels/cuda/random.cuh — the random kernels of a RandomCall
// (random_call.h): one thread per element in a grid-stride loop. Element i
// (its row-major index) takes one Philox4x32-10 block, at counter
// (offset, i) under the seed's key (philox.h), and turns its four words into
// its value:
//
// - uniform [from, to): float16, bfloat16, float32 (and float8) from 24 bits
//   in float, float64 from 53 bits in double; value = fma(u, to - from,
//   from), and a value that rounds up to `to` in the output dtype becomes
//   `from` (PyTorch's CUDA uniform_ rule, keeping [from, to)).
// - normal: Box-Muller on two uniforms (24-bit in float, 53-bit in double),
//   z = sqrt(-2 ln u1) cos(2 pi u2) with u1 in (0, 1]; value = fma(z, std,
//   mean). Each element uses its own block, so the sine half of the pair is
//   not used.
// - randint [low, low + range): PyTorch's rejection-free random_from_to
//   (transformation::uniform_int_from_to): a 32-bit word modulo the range
//   when range < 2^32, else the 64-bit word w0:w1 modulo it, plus low,
//   converted to the output dtype as the CPU kernel converts it (its
//   modulo bias, below 2^-32 of the range, is PyTorch's too).
//
// A value therefore depends on (seed, offset, i) only: not on the grid, the
// block size or the output's strides. HostRandomEngine runs the same
// per-element code on the host (the host tests), with any launch shape.
// The device's logf/cosf may differ from the host's in the last bits, so
// normal draws agree between the two within a few ulps; uniform and integer
// draws agree exactly.
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_RANDOM_CUH_
#define TENSORD_KERNELS_CUDA_RANDOM_CUH_

#include <math.h>

#include <cstdint>
#include <type_traits>

#include "cuda_dtypes.h"
#include "elementwise_call.h"
#include "macros.h"
#include "offset_calculator.h"
#include "philox.h"
#include "random_call.h"

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

namespace tensord::cuda {

// What a kernel receives (by value) besides its offset calculator.
struct RandomParams {
  char* out;
  uint64_t numel;
  uint64_t seed, offset;
  double a, b;
  int64_t low;
  uint64_t range;
};

inline RandomParams MakeRandomParams(const RandomCall& c) {
  return RandomParams{c.out,  static_cast<uint64_t>(c.geometry.numel()), c.seed, c.offset, c.a, c.b, c.low,
                      c.range};
}

TD_HOST_DEVICE TD_INLINE Philox4x32 ElementBlock(const RandomParams& p, uint64_t i) {
  return Philox4x32_10(PhiloxCounter(p.offset, i), PhiloxKey(p.seed));
}

// Uniform [a, b) in T's compute type, rounded to T (see the file comment).
template <typename T>
TD_HOST_DEVICE TD_INLINE ComputeT<T> UniformValue(const Philox4x32& w, double from, double to) {
  if constexpr (std::is_same_v<T, double>) {
    const double v = ::fma(UniformDouble(w[0], w[1]), to - from, from);
    return v >= to ? from : v;
  } else {
    const float f = static_cast<float>(from), t = static_cast<float>(to);
    const ComputeT<T> v = Narrow<T>(::fmaf(UniformFloat(w[0]), t - f, f));
    return static_cast<double>(v) >= to ? Narrow<T>(f) : v;
  }
}

// Normal (mean, std) in T's compute type, by Box-Muller.
template <typename T>
TD_HOST_DEVICE TD_INLINE ComputeT<T> NormalValue(const Philox4x32& w, double mean, double std) {
  if constexpr (std::is_same_v<T, double>) {
    constexpr double kTwoPi = 6.283185307179586476925;
    const double u1 = UniformDoubleOpenZero(w[0], w[1]), u2 = UniformDouble(w[2], w[3]);
    const double z = ::sqrt(-2.0 * ::log(u1)) * ::cos(kTwoPi * u2);
    return ::fma(z, std, mean);
  } else {
    constexpr float kTwoPi = 6.28318530717958647692f;
    const float u1 = UniformFloatOpenZero(w[0]), u2 = UniformFloat(w[1]);
    const float z = ::sqrtf(-2.0f * ::logf(u1)) * ::cosf(kTwoPi * u2);
    return static_cast<ComputeT<T>>(::fmaf(z, static_cast<float>(std), static_cast<float>(mean)));
  }
}

// low + (draw mod range), as int64 (see the file comment).
TD_HOST_DEVICE TD_INLINE int64_t RandintValue(const Philox4x32& w, int64_t low, uint64_t range) {
  const uint64_t r = range < (uint64_t{1} << 32)
                         ? static_cast<uint64_t>(w[0] % static_cast<uint32_t>(range))
                         : ((static_cast<uint64_t>(w[0]) << 32) | w[1]) % range;
  return static_cast<int64_t>(static_cast<uint64_t>(low) + r);
}

template <typename T, RandomOp kOp>
struct RandomBody {
  template <typename index_t>
  static TD_HOST_DEVICE TD_INLINE void Run(const RandomParams& p, const OffsetCalculator<1, index_t>& calc,
                                           uint64_t i) {
    using C = ComputeT<T>;
    char* out = p.out + calc.get(static_cast<index_t>(i))[0];
    const Philox4x32 w = ElementBlock(p, i);
    if constexpr (kOp == RandomOp::kUniform) {
      Store<T>(out, UniformValue<T>(w, p.a, p.b));
    } else if constexpr (kOp == RandomOp::kNormal) {
      Store<T>(out, static_cast<C>(NormalValue<T>(w, p.a, p.b)));
    } else {
      // The CPU kernel's conversion: bool is v != 0, others static_cast
      // from int64 to the compute type, then stored.
      const int64_t v = RandintValue(w, p.low, p.range);
      if constexpr (std::is_same_v<C, bool>) {
        Store<T>(out, v != 0);
      } else {
        Store<T>(out, static_cast<C>(v));
      }
    }
  }
};

// The launch shape: 256 threads a block, a block per 256 elements up to
// 2^16 blocks (then a grid-stride loop). Values do not depend on it.
inline constexpr int kRandomThreads = 256;
inline int64_t RandomBlocks(uint64_t numel) {
  const uint64_t want = (numel + kRandomThreads - 1) / kRandomThreads;
  return static_cast<int64_t>(want < (uint64_t{1} << 16) ? want : (uint64_t{1} << 16));
}

#if defined(__CUDACC__)

template <class Body, typename index_t>
__global__ void __launch_bounds__(kRandomThreads) RandomKernel(RandomParams p, OffsetCalculator<1, index_t> calc) {
  const uint64_t step = static_cast<uint64_t>(gridDim.x) * kRandomThreads;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * kRandomThreads + threadIdx.x; i < p.numel; i += step) {
    Body::template Run<index_t>(p, calc, i);
  }
}

struct CudaRandomEngine {
  template <class Body>
  static int Run(const RandomCall& c, void* stream) {
    const RandomParams p = MakeRandomParams(c);
    if (p.numel == 0) return kLaunchOk;
    const unsigned int blocks = static_cast<unsigned int>(RandomBlocks(p.numel));
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (Fits32BitIndexing(c.geometry)) {
      RandomKernel<Body, uint32_t><<<blocks, kRandomThreads, 0, s>>>(p, OffsetCalculator<1, uint32_t>(c.geometry));
    } else {
      RandomKernel<Body, uint64_t><<<blocks, kRandomThreads, 0, s>>>(p, OffsetCalculator<1, uint64_t>(c.geometry));
    }
    return static_cast<int>(cudaGetLastError());
  }
};

#endif  // defined(__CUDACC__)

// The kernel's grid-stride loop on the host (tests): thread t of block b
// takes elements b * threads + t, then every blocks * threads further, in
// that order. `blocks` and `threads` (0: the GPU's) let a test vary the
// launch shape; `force_64bit` takes the 64-bit offset path.
struct HostRandomEngine {
  static inline int64_t blocks = 0;
  static inline int64_t threads = 0;
  static inline bool force_64bit = false;

  template <class Body>
  static int Run(const RandomCall& c, void* /*stream*/) {
    const RandomParams p = MakeRandomParams(c);
    if (p.numel == 0) return kLaunchOk;
    const uint64_t nb = static_cast<uint64_t>(blocks > 0 ? blocks : RandomBlocks(p.numel));
    const uint64_t nt = static_cast<uint64_t>(threads > 0 ? threads : kRandomThreads);
    auto loop = [&](const auto& calc) {
      for (uint64_t b = 0; b < nb; ++b) {
        for (uint64_t t = 0; t < nt; ++t) {
          for (uint64_t i = b * nt + t; i < p.numel; i += nb * nt) Body::Run(p, calc, i);
        }
      }
    };
    if (Fits32BitIndexing(c.geometry) && !force_64bit) {
      loop(OffsetCalculator<1, uint32_t>(c.geometry));
    } else {
      loop(OffsetCalculator<1, uint64_t>(c.geometry));
    }
    return kLaunchOk;
  }
};

// The body of `call.op` for `call.dtype`, run by Engine. Uniform and normal
// take the CPU kernel's floating dtypes (float8 too), randint every dtype
// but float8.
template <class Engine>
int DispatchRandom(const RandomCall& call, void* stream) {
  if (call.out == nullptr || call.geometry.num_operands != 1) return kLaunchBadOperands;
  switch (call.op) {
    case RandomOp::kUniform:
      return DispatchDtype<kSetFloats | kSetFloat8>(call.dtype, static_cast<int>(kLaunchBadDtype), [&](auto tag) {
        return Engine::template Run<RandomBody<typename decltype(tag)::type, RandomOp::kUniform>>(call, stream);
      });
    case RandomOp::kNormal:
      return DispatchDtype<kSetFloats | kSetFloat8>(call.dtype, static_cast<int>(kLaunchBadDtype), [&](auto tag) {
        return Engine::template Run<RandomBody<typename decltype(tag)::type, RandomOp::kNormal>>(call, stream);
      });
    case RandomOp::kRandint:
      if (call.range == 0) return kLaunchBadOperands;
      return DispatchDtype<kSetAllButF8>(call.dtype, static_cast<int>(kLaunchBadDtype), [&](auto tag) {
        return Engine::template Run<RandomBody<typename decltype(tag)::type, RandomOp::kRandint>>(call, stream);
      });
  }
  return kLaunchBadOp;
}

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_RANDOM_CUH_
