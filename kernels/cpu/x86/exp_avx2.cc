// ExpFBlocks on 8 float lanes, compiled with -mavx2 -ffp-contract=off
// (kernels/CMakeLists.txt); called only when the CPU has AVX2
// (kernels/cpu/fast_math.cc). Includes nothing but exp_lanes.h: see there why.
#include "../exp_lanes.h"

namespace tensord::cpu {

using F32x8 = float __attribute__((vector_size(32)));
using U32x8 = uint32_t __attribute__((vector_size(32)));
using I32x8 = int32_t __attribute__((vector_size(32)));

int64_t ExpFBlocksAvx2(const float* in, float* out, int64_t n) { return ExpFBlocks<F32x8, U32x8, I32x8>(in, out, n); }

}  // namespace tensord::cpu
