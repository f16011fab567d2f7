// Non-temporal copies for the data plane (see tensord/wire/copy.h).
#include "tensord/wire/copy.h"

#include <cstring>

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

}  // namespace tensord::wire
