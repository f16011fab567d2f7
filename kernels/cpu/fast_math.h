// kernels/cpu/fast_math.h — float32 exp on several lanes at a time (GCC
// vector extensions, exp_lanes.h: SSE2 on the x86-64 baseline, AVX2 and
// AVX-512F when the CPU has them, NEON on arm64): glibc's expf is a scalar
// call per element, several times slower on large arrays than NumPy's SIMD
// exp (bench/RESULTS.md, figure 4). ExpF (one value) computes exactly what ExpFArray
// computes for each lane.
//
//   ExpFArray(in, out, n);   // out[i] = e^in[i]; in == out is allowed
//
// Internal to kernels/.
#ifndef TENSORD_KERNELS_CPU_FAST_MATH_H_
#define TENSORD_KERNELS_CPU_FAST_MATH_H_

#include <cstdint>
#include <vector>

#include "exp_lanes.h"

namespace tensord::cpu {

using F32x4 = float __attribute__((vector_size(16)));
using U32x4 = uint32_t __attribute__((vector_size(16)));
using I32x4 = int32_t __attribute__((vector_size(16)));

// e^x for float32 within 2 ulp of the exact value over the whole range
// (measured against double exp in tests/kernels): the classic Cephes
// reduction x = n ln2 + r, |r| <= ln2 / 2, a degree-6 polynomial for e^r, and
// 2^n applied as two exponent-field factors so that results down in the
// subnormal range and up to overflow come out right (exp_lanes.h has the
// steps). exp(+inf) = inf, exp(-inf) = 0, NaN stays NaN, as std::exp. One
// lane of the vector body, so that it is ExpFArray's value by construction.
inline float ExpF(float x) {
  const F32x4 v = {x, x, x, x};
  return ExpFLanes<F32x4, U32x4, I32x4>(v)[0];
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
