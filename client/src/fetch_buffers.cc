// Fetch buffers and the cache of freed large ones (see fetch_buffers.h).
#include "fetch_buffers.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <new>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tensord::client::internal {
namespace {

// Only the process that made the cache uses it: a forked child (whose copy
// of `mu` may have been held by a parent's thread at the fork) maps and
// unmaps its own buffers.
struct Cache {
  struct Block {
    char* data;
    size_t bytes;
    absl::Time freed;
  };
  absl::Mutex mu;
  std::vector<Block> blocks ABSL_GUARDED_BY(mu);  // oldest first
  size_t bytes ABSL_GUARDED_BY(mu) = 0;
  uint64_t hits ABSL_GUARDED_BY(mu) = 0;
  const pid_t pid = ::getpid();
};

Cache& TheCache() {
  static Cache* const cache = new Cache;  // never destroyed: buffers may be freed during exit
  return *cache;
}

// Takes the blocks freed before `cutoff` out of the cache (oldest first),
// and more of the oldest until `incoming` more bytes fit under the limit.
std::vector<Cache::Block> EvictLocked(Cache& c, absl::Time cutoff, size_t incoming)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu) {
  size_t drop = 0;
  while (drop < c.blocks.size() &&
         (c.blocks[drop].freed < cutoff || c.bytes + incoming > FetchBufferCacheLimit())) {
    c.bytes -= c.blocks[drop++].bytes;
  }
  std::vector<Cache::Block> evicted(c.blocks.begin(), c.blocks.begin() + static_cast<std::ptrdiff_t>(drop));
  c.blocks.erase(c.blocks.begin(), c.blocks.begin() + static_cast<std::ptrdiff_t>(drop));
  return evicted;
}

void Unmap(const std::vector<Cache::Block>& blocks) {
  for (const Cache::Block& b : blocks) ::munmap(b.data, b.bytes);  // outside the lock: munmap is slow
}

// Caches a freed buffer, unmapping the stale and then the oldest ones to
// make room (or this one, if it alone is over the limit).
void Give(char* p, size_t bytes) {
  Cache& c = TheCache();
  if (::getpid() != c.pid || bytes > FetchBufferCacheLimit()) {
    ::munmap(p, bytes);
    return;
  }
  (void)::madvise(p, bytes, MADV_FREE);  // a hint: the kernel may reclaim the pages under pressure
  std::vector<Cache::Block> evicted;
  {
    absl::MutexLock l(&c.mu);
    const absl::Time now = absl::Now();
    evicted = EvictLocked(c, now - kFetchBufferCacheIdle, bytes);
    c.blocks.push_back(Cache::Block{p, bytes, now});
    c.bytes += bytes;
  }
  Unmap(evicted);
}

std::shared_ptr<char> Own(char* p, size_t bytes) {
  try {
    return std::shared_ptr<char>(p, [bytes](char* q) { Give(q, bytes); });
  } catch (const std::bad_alloc&) {
    ::munmap(p, bytes);
    return nullptr;
  }
}

}  // namespace

uint64_t PhysicalMemoryBytes() {
  static const uint64_t bytes = [] {
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page_size = ::sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page_size <= 0) return uint64_t{0};
    return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
  }();
  return bytes;
}

size_t FetchBufferCacheLimit() {
  static const size_t limit = [] {
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page_size = ::sysconf(_SC_PAGESIZE);
    const size_t gib = size_t{1} << 30;
    if (pages <= 0 || page_size <= 0) return gib;
    return std::min(gib, static_cast<size_t>(pages) / 16 * static_cast<size_t>(page_size));
  }();
  return limit;
}

std::shared_ptr<char> AllocateFetchBuffer(uint64_t n) {
  constexpr size_t kHuge = kLargeFetchBufferBytes;
  if (n < kHuge || n > std::numeric_limits<size_t>::max() - 2 * kHuge) {
    char* p = new (std::nothrow) char[std::max<uint64_t>(n, 1)];
    if (p == nullptr) return nullptr;
    return std::shared_ptr<char>(p, std::default_delete<char[]>());
  }
  const size_t bytes = (static_cast<size_t>(n) + kHuge - 1) & ~(kHuge - 1);
  Cache& c = TheCache();
  if (::getpid() == c.pid) {
    char* hit = nullptr;
    std::vector<Cache::Block> evicted;
    {
      absl::MutexLock l(&c.mu);
      evicted = EvictLocked(c, absl::Now() - kFetchBufferCacheIdle, 0);
      for (size_t i = c.blocks.size(); i-- > 0;) {
        if (c.blocks[i].bytes == bytes) {
          hit = c.blocks[i].data;
          c.blocks.erase(c.blocks.begin() + static_cast<std::ptrdiff_t>(i));
          c.bytes -= bytes;
          ++c.hits;
          break;
        }
      }
    }
    Unmap(evicted);
    if (hit != nullptr) return Own(hit, bytes);
  }
  // Fresh: one huge page more than needed, then the unaligned head and tail
  // unmapped, so that transparent huge pages back all of it (one page fault
  // per 2 MiB instead of per 4 KiB).
  const size_t len = bytes + kHuge;
  void* m = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  const uintptr_t base = reinterpret_cast<uintptr_t>(m);
  const uintptr_t aligned = (base + kHuge - 1) & ~(uintptr_t{kHuge} - 1);
  if (aligned > base) ::munmap(m, aligned - base);
  if (const size_t tail = len - (aligned - base) - bytes; tail > 0) {
    ::munmap(reinterpret_cast<void*>(aligned + bytes), tail);
  }
  char* p = reinterpret_cast<char*>(aligned);
  (void)::madvise(p, bytes, MADV_HUGEPAGE);  // a hint: without THP the pages are simply 4 KiB
  return Own(p, bytes);
}

void TrimFetchBufferCache() {
  Cache& c = TheCache();
  if (::getpid() != c.pid) return;
  std::vector<Cache::Block> evicted;
  {
    absl::MutexLock l(&c.mu);
    evicted.swap(c.blocks);
    c.bytes = 0;
  }
  Unmap(evicted);
}

FetchBufferCacheStats GetFetchBufferCacheStats() {
  Cache& c = TheCache();
  absl::MutexLock l(&c.mu);
  FetchBufferCacheStats s;
  s.blocks = c.blocks.size();
  s.bytes = c.bytes;
  s.hits = c.hits;
  return s;
}

}  // namespace tensord::client::internal
