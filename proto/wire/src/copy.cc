// Non-temporal copies for the data plane (see tensord/wire/copy.h).
#include "tensord/wire/copy.h"

#include <algorithm>
#include <cstring>
#include <system_error>
#include <thread>
#include <vector>

#ifdef TENSORD_HAVE_OPENMP
#include <omp.h>
#endif

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tensord::wire {

void NonTemporalCopy(char* dst, const char* src, size_t n) {
#if defined(__SSE2__)
  constexpr size_t kLine = 64;
  // The head up to the destination's next 16-byte boundary (stream stores
  // need it aligned); the source may stay unaligned.
  const size_t head = (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15;
  if (n < head + kLine) {
    std::memcpy(dst, src, n);
    return;
  }
  std::memcpy(dst, src, head);
  size_t i = head;
  for (; i + kLine <= n; i += kLine) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  // Non-temporal stores are weakly ordered: fence them before the bytes are
  // handed to another thread (a kernel, the reader of a fetch).
  _mm_sfence();
  std::memcpy(dst + i, src + i, n - i);
#else
  std::memcpy(dst, src, n);
#endif
}

void CopyTransferPiece(char* dst, const char* src, size_t n, uint64_t total_bytes) {
  if (total_bytes >= kNonTemporalCopyMinBytes) {
    NonTemporalCopy(dst, src, n);
  } else {
    std::memcpy(dst, src, n);
  }
}

namespace {

// How many ranges CopyTransfer and CopyTransferOnNewThreads split a copy of
// `n` bytes into for `threads` threads (1: not split).
int CopyRanges(size_t n, int threads) {
  if (n < kParallelCopyMinBytes || threads <= 1) return 1;
  const uint64_t by_size = n / (kParallelCopyMinBytes / 2);
  return static_cast<int>(std::min<uint64_t>({static_cast<uint64_t>(threads), kMaxCopyThreads, by_size}));
}

// Ranges of whole 64-byte lines (the last takes the rest): with a
// line-aligned destination (segments and storages are) no two threads write
// parts of one cache line.
size_t RangeBytes(size_t n, int ranges) { return (n / static_cast<size_t>(ranges)) & ~size_t{63}; }

void CopyRange(char* dst, const char* src, size_t n, int ranges, int r) {
  const size_t per = RangeBytes(n, ranges);
  const size_t begin = static_cast<size_t>(r) * per;
  const size_t end = r == ranges - 1 ? n : begin + per;
  NonTemporalCopy(dst + begin, src + begin, end - begin);
}

}  // namespace

void CopyTransfer(char* dst, const char* src, size_t n, int threads) {
  if (n < kNonTemporalCopyMinBytes) {
    std::memcpy(dst, src, n);
    return;
  }
  int ranges = 1;
#ifdef TENSORD_HAVE_OPENMP
  if (!omp_in_parallel()) ranges = CopyRanges(n, threads);
#else
  (void)threads;
#endif
  if (ranges <= 1) {
    NonTemporalCopy(dst, src, n);
    return;
  }
#ifdef TENSORD_HAVE_OPENMP
#pragma omp parallel for num_threads(ranges) schedule(static, 1)
  for (int r = 0; r < ranges; ++r) CopyRange(dst, src, n, ranges, r);
  // Each thread fenced its own stores, and the region's end is a barrier.
#endif
}

void CopyTransferOnNewThreads(char* dst, const char* src, size_t n, int threads) {
  if (n < kNonTemporalCopyMinBytes) {
    std::memcpy(dst, src, n);
    return;
  }
  const int ranges = CopyRanges(n, threads);
  std::vector<std::thread> helpers;
  helpers.reserve(static_cast<size_t>(ranges));
  for (int r = 1; r < ranges; ++r) {
    try {
      helpers.emplace_back([=] { CopyRange(dst, src, n, ranges, r); });
    } catch (const std::system_error&) {
      CopyRange(dst, src, n, ranges, r);  // no thread to be had: this one copies the range
    }
  }
  CopyRange(dst, src, n, ranges, 0);
  // Each thread fenced its own stores; join() makes them visible here.
  for (std::thread& t : helpers) t.join();
}

int MaxCopyThreads() {
#ifdef TENSORD_HAVE_OPENMP
  return std::max(1, omp_get_max_threads());
#else
  return 1;
#endif
}

}  // namespace tensord::wire
