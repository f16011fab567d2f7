// ExpFBlocks on 16 float lanes, compiled with -mavx512f -ffp-contract=off
// (kernels/CMakeLists.txt: AVX-512F has fused multiply-adds, which would round
// differently from ExpF); called only when the CPU has AVX-512F
// (kernels/cpu/fast_math.cc). Includes nothing but exp_lanes.h: see there why.
#include "../exp_lanes.h"

namespace tensord::cpu {

using F32x16 = float __attribute__((vector_size(64)));
using U32x16 = uint32_t __attribute__((vector_size(64)));
using I32x16 = int32_t __attribute__((vector_size(64)));

int64_t ExpFBlocksAvx512(const float* in, float* out, int64_t n) {
  return ExpFBlocks<F32x16, U32x16, I32x16>(in, out, n);
}

}  // namespace tensord::cpu
