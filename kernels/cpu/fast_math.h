// kernels/cpu/fast_math.h — float32 exp on several lanes at a time (GCC
// vector extensions, exp_lanes.h: SSE2 on the x86-64 baseline, AVX2 and
// AVX-512F when the CPU has them, NEON on arm64): glibc's expf is a scalar
// call per element, which left exp and softmax over 16M floats 4-5x slower
// than NumPy's SIMD exp. ExpF (one value) computes exactly what ExpFArray
// computes for each lane.
//
//   ExpFArray(in, out, n);   // out[i] = e^in[i]; in == out is allowed
//
// Internal to kernels/.
#ifndef TENSORD_KERNELS_CPU_FAST_MATH_H_
#define TENSORD_KERNELS_CPU_FAST_MATH_H_

#include <cstdint>
#include <vector>

#include "dtypes.h"  // FloatBits, BitsToFloat

namespace tensord::cpu {

// e^x for float32 within 2 ulp of the exact value over the whole range
// (measured against double exp in tests/kernels): the classic Cephes
// reduction x = n ln2 + r, |r| <= ln2 / 2, a degree-6 polynomial for e^r, and
// 2^n applied as two exponent-field factors so that results down in the
// subnormal range and up to overflow come out right. exp(+inf) = inf,
// exp(-inf) = 0, NaN stays NaN, as std::exp.
inline float ExpF(float x) {
  // Clamp first (NaN passes: both comparisons are false).
  float xc = x < -104.0f ? -104.0f : x;
  xc = xc > 89.0f ? 89.0f : xc;
  // n = round(x / ln2) by the 1.5 * 2^23 trick (round to nearest even, and
  // the integer is read from the low mantissa bits, no float->int cast).
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23
  const float t = xc * 1.44269504088896341f + kShift;
  const float fn = t - kShift;
  const int32_t n = static_cast<int32_t>(FloatBits(t) - FloatBits(kShift));
  // r = x - n ln2 in two steps (ln2 split into an exact high part and the rest).
  float r = xc - fn * 0.693359375f;
  r = r - fn * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  // 2^n = 2^n1 * 2^n2 with both halves normal (n in [-150, 129]).
  const int32_t n1 = n >> 1;
  const int32_t n2 = n - n1;
  const float s1 = BitsToFloat(static_cast<uint32_t>(n1 + 127) << 23);
  const float s2 = BitsToFloat(static_cast<uint32_t>(n2 + 127) << 23);
  const float e = y * s1 * s2;
  return x != x ? x : e;  // NaN in, the same NaN out
}

// out[i] = ExpF(in[i]) for i < n, bit for bit; `in` and `out` may be the
// same array (or not overlap at all). Unaligned pointers are fine. Runs on
// the widest vectors the CPU has (fast_math.cc): 16 lanes with AVX-512F, 8
// with AVX2, else 4 (SSE2 on x86-64, NEON on arm64).
void ExpFArray(const float* in, float* out, int64_t n);

// The vector widths ExpFArray can use on this CPU and build: 4, then 8 and
// 16 where present. For tests, which check each against ExpF.
std::vector<int> ExpFArrayLaneCounts();
// ExpFArray on vectors of `lanes` floats (one of ExpFArrayLaneCounts()).
void ExpFArrayOnLanes(int lanes, const float* in, float* out, int64_t n);

}  // namespace tensord::cpu

#endif  // TENSORD_KERNELS_CPU_FAST_MATH_H_
