// Non-temporal copies for the data plane (see tensord/wire/copy.h).
#include "tensord/wire/copy.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <system_error>
#include <thread>

#include "tensord/transport/cpus.h"

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

// One split copy, shared by the caller and the threads started for it (each
// holds it: one that starts after the caller returned still finds it).
struct SplitCopy {
  char* dst;
  const char* src;
  size_t n;
  size_t pieces;
  std::atomic<size_t> next{0};  // the next piece to take
  std::atomic<size_t> done{0};  // pieces copied
};

// Copies piece `i` of `c`.
void CopyPiece(SplitCopy& c, size_t i) {
  const size_t begin = i * kCopyPieceBytes;
  NonTemporalCopy(c.dst + begin, c.src + begin, std::min(kCopyPieceBytes, c.n - begin));  // fenced
}

// A started thread: takes and copies pieces of `c` until none is left.
void HelpCopy(SplitCopy& c) {
  size_t copied = 0;
  for (size_t i; (i = c.next.fetch_add(1, std::memory_order_relaxed)) < c.pieces; ++copied) CopyPiece(c, i);
  if (copied > 0) c.done.fetch_add(copied, std::memory_order_release);  // publishes the bytes to the caller
}

// How often (in pieces the caller copied) it looks for idle cores again.
constexpr size_t kRecheckPieces = 4;

// The split copy: the caller starts up to `max_helpers` threads (with
// `when_idle`, only onto cores idle when it looks, before its first piece
// and every kRecheckPieces pieces after: a peer's polling thread goes to
// sleep within 100 us, freeing its core mid-copy), takes pieces like them,
// then waits for the pieces they are still copying.
void SplitCopyOnThreads(char* dst, const char* src, size_t n, int max_helpers, bool when_idle) {
  const size_t pieces = (n + kCopyPieceBytes - 1) / kCopyPieceBytes;
  auto c = std::make_shared<SplitCopy>();
  c->dst = dst;
  c->src = src;
  c->n = n;
  c->pieces = pieces;
  int started = 0;
  auto start = [&](int k) {
    for (; k > 0 && started < max_helpers; --k) {
      try {
        std::thread([c] { HelpCopy(*c); }).detach();
        ++started;
      } catch (const std::system_error&) {
        max_helpers = started;  // no more threads: the caller copies what is left
      }
    }
  };
  size_t mine = 0;
  for (;;) {
    if (started < max_helpers && mine % kRecheckPieces == 0) start(when_idle ? IdleCoresNow() : max_helpers);
    const size_t i = c->next.fetch_add(1, std::memory_order_relaxed);
    if (i >= pieces) break;
    CopyPiece(*c, i);
    ++mine;
  }
  c->done.fetch_add(mine, std::memory_order_relaxed);
  // Every piece is taken now; wait for those other threads are still
  // copying: at most one piece each, tens of microseconds on a core that was
  // idle, so yielding beats sleeping (a wake-up costs as much on this VM).
  while (c->done.load(std::memory_order_acquire) != pieces) std::this_thread::yield();
}

}  // namespace

void CopyTransfer(char* dst, const char* src, size_t n, int threads) {
  if (n < kNonTemporalCopyMinBytes) {
    std::memcpy(dst, src, n);
    return;
  }
  if (n < kParallelCopyMinBytes || threads <= 1) {
    NonTemporalCopy(dst, src, n);
    return;
  }
  // Only onto cores idle right now: a helper that shares a core with other
  // work is preempted in the middle of its piece, and the caller then waits
  // a scheduler slice for it, which costs far more than the split saves.
  SplitCopyOnThreads(dst, src, n, std::min(threads, kMaxCopyThreads) - 1, /*when_idle=*/true);
}

void CopyWithHelpers(char* dst, const char* src, size_t n, int helpers) {
  if (n == 0 || helpers <= 0) {
    NonTemporalCopy(dst, src, n);
    return;
  }
  SplitCopyOnThreads(dst, src, n, helpers, /*when_idle=*/false);
}

int MaxCopyThreads() { return std::min(UsableCores(), kMaxCopyThreads); }

}  // namespace tensord::wire
