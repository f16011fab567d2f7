// kernels/cuda/philox.h — the counter-based Philox4x32-10 generator of the
// CUDA random kernels (Salmon et al., "Parallel random numbers: as easy as
// 1, 2, 3", SC'11; the Random123 library's philox4x32 with 10 rounds, as
// curand's and PyTorch's CUDA generator use), and the draws built on it:
//
//   const Philox4x32 w = Philox4x32_10(PhiloxCounter(offset, i), PhiloxKey(seed));
//   float u = UniformFloat(w[0]);            // [0, 1), 24 random bits
//
// Written for device and host alike: curand's philox (curand_kernel.h) is
// device code only, and the host tests replay the kernels' draws with this
// one (checked against Random123's known-answer vectors). Plain C++ besides
// macros.h. Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_PHILOX_H_
#define TENSORD_KERNELS_CUDA_PHILOX_H_

#include <cstdint>

#include "macros.h"

namespace tensord::cuda {

// Four 32-bit words: a counter or one block of output.
struct Philox4x32 {
  uint32_t v[4];
  TD_HOST_DEVICE TD_INLINE uint32_t operator[](int i) const { return v[i]; }
};
struct PhiloxKey2x32 {
  uint32_t v[2];
};

// The key of a 64-bit seed: its low word first (curand_init's layout).
TD_HOST_DEVICE TD_INLINE PhiloxKey2x32 PhiloxKey(uint64_t seed) {
  return PhiloxKey2x32{{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}};
}

// The counter of element `i` of a call at generator offset `offset`: the
// offset in the low two words and the element in the high two, as
// curand_init(seed, subsequence = i, offset) lays them out. Every element
// has its own subsequence, so its numbers depend on (seed, offset, i) alone,
// never on which thread computes it.
TD_HOST_DEVICE TD_INLINE Philox4x32 PhiloxCounter(uint64_t offset, uint64_t i) {
  return Philox4x32{{static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32), static_cast<uint32_t>(i),
                     static_cast<uint32_t>(i >> 32)}};
}

// The high and low words of a * b.
TD_HOST_DEVICE TD_INLINE void MulHiLo32(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
#if defined(__CUDA_ARCH__)
  *hi = __umulhi(a, b);
  *lo = a * b;
#else
  const uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  *lo = static_cast<uint32_t>(p);
#endif
}

// Philox4x32 with 10 rounds: the block of output for counter `ctr` under
// `key` (Random123's philox4x32_R(10, ctr, key)).
TD_HOST_DEVICE TD_INLINE Philox4x32 Philox4x32_10(Philox4x32 ctr, PhiloxKey2x32 key) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // multipliers
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments
  uint32_t k0 = key.v[0], k1 = key.v[1];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    MulHiLo32(kM0, ctr.v[0], &hi0, &lo0);
    MulHiLo32(kM1, ctr.v[2], &hi1, &lo1);
    ctr = Philox4x32{{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
  }
  return ctr;
}

// ---- draws from the output words ---------------------------------------------------

inline constexpr float kTwoPowMinus24 = 5.9604644775390625e-08f;      // 2^-24
inline constexpr double kTwoPowMinus53 = 1.1102230246251565404e-16;   // 2^-53

// [0, 1) from the top 24 bits of `w`: a float's mantissa, every value exact.
TD_HOST_DEVICE TD_INLINE float UniformFloat(uint32_t w) { return static_cast<float>(w >> 8) * kTwoPowMinus24; }

// (0, 1] from the top 24 bits of `w` (a logarithm's argument: never 0).
TD_HOST_DEVICE TD_INLINE float UniformFloatOpenZero(uint32_t w) {
  return static_cast<float>((w >> 8) + 1) * kTwoPowMinus24;
}

// [0, 1) from the top 53 bits of hi:lo: a double's mantissa, every value exact.
TD_HOST_DEVICE TD_INLINE double UniformDouble(uint32_t hi, uint32_t lo) {
  const uint64_t x = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<double>(x >> 11) * kTwoPowMinus53;
}

// (0, 1] from the top 53 bits of hi:lo.
TD_HOST_DEVICE TD_INLINE double UniformDoubleOpenZero(uint32_t hi, uint32_t lo) {
  const uint64_t x = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<double>((x >> 11) + 1) * kTwoPowMinus53;
}

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_PHILOX_H_
