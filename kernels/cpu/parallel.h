// kernels/cpu/parallel.h — splitting a large loop over the machine's cores
// with OpenMP (a well-kept runtime, not a scheduler of our own). Small loops
// stay on the calling thread: a team costs microseconds to wake, which only
// pays off over hundreds of thousands of elements.
//
//   ParallelFor(n, [&](int64_t begin, int64_t end) { ...elements [begin, end)... });
//   ParallelFor(rows, row_len, [&](int64_t r0, int64_t r1, int64_t chunk) { ... });
//
// Built without OpenMP (TENSORD_OPENMP=OFF, e.g. under ThreadSanitizer, which
// cannot see libgomp's synchronisation), every loop runs on the calling thread.
// Internal to kernels/.
#ifndef TENSORD_KERNELS_CPU_PARALLEL_H_
#define TENSORD_KERNELS_CPU_PARALLEL_H_

#include <algorithm>
#include <cstdint>

#ifdef TENSORD_HAVE_OPENMP
#include <omp.h>
#endif

namespace tensord::cpu {

// Work (elements of simple work) below which a loop is not split (about
// 100 us): a team costs microseconds to wake.
inline constexpr int64_t kParallelMinElements = int64_t{1} << 18;

// How many chunks ParallelFor(n, cost, f) uses: 1 for small work, else up to
// the OpenMP thread count, each worth at least half the threshold.
inline int64_t ParallelChunks(int64_t n, int64_t cost_per_item = 1) {
#ifdef TENSORD_HAVE_OPENMP
  const int64_t work = n * std::max<int64_t>(cost_per_item, 1);
  if (n < 2 || work < kParallelMinElements || omp_in_parallel()) return 1;
  return std::max<int64_t>(1, std::min<int64_t>({omp_get_max_threads(), n, work / (kParallelMinElements / 2)}));
#else
  (void)n;
  (void)cost_per_item;
  return 1;
#endif
}

// Calls f(begin, end, chunk) over ParallelChunks(n, cost_per_item) disjoint
// ranges covering [0, n) (chunk = 0, 1, ...), on that many threads; one call
// on this thread for small work, none for n <= 0. f must only write what its
// range owns (or chunk-indexed scratch) and must not throw.
template <typename F>
void ParallelFor(int64_t n, int64_t cost_per_item, F&& f) {
  if (n <= 0) return;
  const int64_t chunks = ParallelChunks(n, cost_per_item);
  if (chunks <= 1) {
    f(int64_t{0}, n, int64_t{0});
    return;
  }
#ifdef TENSORD_HAVE_OPENMP
  const int64_t per = (n + chunks - 1) / chunks;
#pragma omp parallel for num_threads(static_cast<int>(chunks)) schedule(static, 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * per;
    const int64_t end = std::min(n, begin + per);
    if (begin < end) f(begin, end, c);
  }
#endif
}

// Elementwise form: f(begin, end) over [0, n), each element one unit of work.
template <typename F>
void ParallelFor(int64_t n, F&& f) {
  ParallelFor(n, 1, [&f](int64_t begin, int64_t end, int64_t) { f(begin, end); });
}

}  // namespace tensord::cpu

#endif  // TENSORD_KERNELS_CPU_PARALLEL_H_
