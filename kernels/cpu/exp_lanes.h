// kernels/cpu/exp_lanes.h — the float32 exp of kernels/cpu/fast_math.h on any
// number of lanes (a GCC vector type of 4, 8 or 16 floats), so that the SSE2
// baseline and the AVX2 and AVX-512 variants (kernels/cpu/x86/) compute the
// same bits from one body.
//
//   using F = float __attribute__((vector_size(32)));  // and U, I: uint32_t, int32_t
//   F e = ExpFLanes<F, U, I>(x);
//
// Self-contained on purpose: the x86 variants are compiled with -mavx2 or
// -mavx512f, and any inline function they instantiated from a shared header
// could be the copy the linker keeps for every caller, AVX instructions and
// all. Nothing here but this template (instantiated there only with their
// own vector types, so its symbols are theirs). Internal to kernels/.
#ifndef TENSORD_KERNELS_CPU_EXP_LANES_H_
#define TENSORD_KERNELS_CPU_EXP_LANES_H_

#include <cstdint>
#include <cstring>

namespace tensord::cpu {

// e^x lane by lane for F (float lanes), U and I (uint32_t and int32_t lanes of
// the same width): what ExpF (fast_math.h) says, which is this on 4 lanes.
// Every width gives the same bits as long as the caller's translation unit
// does not contract a * b + c into a fused multiply-add (-ffp-contract=off
// where the target has FMA: AVX-512F does).
template <typename F, typename U, typename I>
inline F ExpFLanes(F x) {
  // Clamp first (NaN passes: both comparisons are false).
  const F lo = F{} - 104.0f;
  const F hi = F{} + 89.0f;
  F xc = x < lo ? lo : x;
  xc = xc > hi ? hi : xc;
  // n = round(x / ln2) by the 1.5 * 2^23 trick (round to nearest even, and
  // the integer is read from the low mantissa bits, no float->int cast).
  constexpr float kShift = 12582912.0f;         // 1.5 * 2^23
  constexpr uint32_t kShiftBits = 0x4B400000u;  // its bit pattern
  const F t = xc * 1.44269504088896341f + kShift;
  const F fn = t - kShift;
  const I n = reinterpret_cast<I>(reinterpret_cast<U>(t) - kShiftBits);
  // r = x - n ln2 in two steps (ln2 split into an exact high part and the rest).
  F r = xc - fn * 0.693359375f;
  r = r - fn * -2.12194440e-4f;
  F p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const F y = p * r * r + r + 1.0f;
  // 2^n = 2^n1 * 2^n2 with both halves normal (n in [-150, 129]).
  const I n1 = n >> 1;
  const I n2 = n - n1;
  const F s1 = reinterpret_cast<F>(reinterpret_cast<U>(n1 + 127) << 23);
  const F s2 = reinterpret_cast<F>(reinterpret_cast<U>(n2 + 127) << 23);
  const F e = y * s1 * s2;
  return x != x ? x : e;  // NaN in, the same NaN out
}

// out[i] = ExpFLanes(in[i]) over the whole vectors of F at the start of
// [0, n); returns how many elements that is (n rounded down to F's lanes).
template <typename F, typename U, typename I>
inline int64_t ExpFBlocks(const float* in, float* out, int64_t n) {
  constexpr int64_t kLanes = static_cast<int64_t>(sizeof(F) / sizeof(float));
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    F v;
    std::memcpy(&v, in + i, sizeof v);
    v = ExpFLanes<F, U, I>(v);
    std::memcpy(out + i, &v, sizeof v);
  }
  return i;
}

// The x86-64 variants (kernels/cpu/x86/, built only there): ExpFBlocks on 8
// lanes (AVX2) and 16 (AVX-512F). Call them only on a CPU that has the
// instructions (fast_math.cc checks).
int64_t ExpFBlocksAvx2(const float* in, float* out, int64_t n);
int64_t ExpFBlocksAvx512(const float* in, float* out, int64_t n);

}  // namespace tensord::cpu

#endif  // TENSORD_KERNELS_CPU_EXP_LANES_H_
