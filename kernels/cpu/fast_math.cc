// ExpFArray: the widest exp variant this CPU runs, picked once (see
// fast_math.h and exp_lanes.h).
#include "fast_math.h"

#include "exp_lanes.h"

namespace tensord::cpu {
namespace {

int64_t ExpFBlocks4(const float* in, float* out, int64_t n) { return ExpFBlocks<F32x4, U32x4, I32x4>(in, out, n); }

using BlocksFn = int64_t (*)(const float*, float*, int64_t);

// The variant on `lanes` lanes; the 4-lane one for any width this build or
// CPU lacks.
BlocksFn BlocksOn(int lanes) {
#if defined(TENSORD_KERNELS_X86_VARIANTS)
  if (lanes == 16 && __builtin_cpu_supports("avx512f")) return ExpFBlocksAvx512;
  if (lanes == 8 && __builtin_cpu_supports("avx2")) return ExpFBlocksAvx2;
#else
  (void)lanes;
#endif
  return ExpFBlocks4;
}

// Whole vectors on `blocks`, then whole vectors of 4, then one at a time:
// every element gets ExpF's bits whichever path took it.
void ExpFArrayWith(BlocksFn blocks, const float* in, float* out, int64_t n) {
  int64_t i = blocks(in, out, n);
  i += ExpFBlocks4(in + i, out + i, n - i);
  for (; i < n; ++i) out[i] = ExpF(in[i]);
}

}  // namespace

std::vector<int> ExpFArrayLaneCounts() {
  std::vector<int> lanes = {4};
#if defined(TENSORD_KERNELS_X86_VARIANTS)
  __builtin_cpu_init();  // in case this runs before the constructors that do it
  if (__builtin_cpu_supports("avx2")) lanes.push_back(8);
  if (__builtin_cpu_supports("avx512f")) lanes.push_back(16);
#endif
  return lanes;
}

void ExpFArrayOnLanes(int lanes, const float* in, float* out, int64_t n) { ExpFArrayWith(BlocksOn(lanes), in, out, n); }

void ExpFArray(const float* in, float* out, int64_t n) {
  static const BlocksFn widest = BlocksOn(ExpFArrayLaneCounts().back());
  ExpFArrayWith(widest, in, out, n);
}

}  // namespace tensord::cpu
