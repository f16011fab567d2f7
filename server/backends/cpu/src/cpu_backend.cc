// The CPU backend: the caching allocator of large blocks, memcpy copies, and
// the kernels of kernels/cpu/.
#include "tensord/backends/cpu/cpu_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tensord/meta/errors.h"
#include "tensord/runtime/log.h"

namespace tensord::backends {

using runtime::FormatBytes;

namespace {

// `bytes` (a whole number of granules) of fresh anonymous memory aligned to a
// granule, so that transparent huge pages can back all of it: map one
// granule more and unmap the unaligned head and tail. nullptr on failure.
char* MapAligned(size_t bytes) {
  const size_t g = static_cast<size_t>(CpuAllocator::kGranuleBytes);
  const size_t len = bytes + g;
  void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  const uintptr_t base = reinterpret_cast<uintptr_t>(m);
  const uintptr_t aligned = (base + g - 1) & ~(uintptr_t{g} - 1);
  const size_t head = aligned - base;
  const size_t tail = len - head - bytes;
  if (head > 0) munmap(m, head);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + bytes), tail);
  char* p = reinterpret_cast<char*>(aligned);
  (void)madvise(p, bytes, MADV_HUGEPAGE);  // a hint: without THP the pages are simply 4 KiB
  return p;
}

constexpr absl::string_view kRefused = "the system refused the allocation";

}  // namespace

int64_t CpuCores() {
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (n > 0) return n;
  const unsigned hc = std::thread::hardware_concurrency();
  return hc > 0 ? hc : 1;
}

int64_t HostMemoryBackend::PhysicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0 && pages <= INT64_MAX / page_size) return static_cast<int64_t>(pages) * page_size;
  return INT64_MAX / 2;
}

CpuAllocator::CpuAllocator(const CpuAllocatorOptions& options, Device device)
    : device_(device),
      physical_bytes_(HostMemoryBackend::PhysicalMemoryBytes()),
      idle_trim_after_(options.idle_trim_after),
      uninitialized_fill_(options.uninitialized_fill >= 0 && options.uninitialized_fill <= 255
                              ? options.uninitialized_fill
                              : -1) {
  cache_limit_ = options.cache_limit_bytes >= 0 ? options.cache_limit_bytes
                                                : std::min(kDefaultCacheLimitBytes, physical_bytes_ / 8);
}

CpuAllocator::~CpuAllocator() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (trimmer_.joinable()) trimmer_.join();
  Trim();
}

absl::Status CpuAllocator::CheckCapacity(int64_t nbytes) const {
  if (nbytes <= physical_bytes_) return absl::OkStatus();
  return OutOfMemoryErr(absl::StrCat("the machine has ", FormatBytes(physical_bytes_), " of physical memory"));
}

absl::StatusOr<runtime::DeviceAllocator::Block> CpuAllocator::Allocate(int64_t nbytes, bool zero_fill,
                                                                      uint64_t owner) {
  // Large blocks come in whole granules from the cache or fresh from the
  // system (zero, and backed by transparent huge pages, so that a large
  // output faults once per 2 MiB instead of once per 4 KiB page, as NumPy
  // and glibc users see with MADV_HUGEPAGE); small ones from the heap.
  const int fill = uninitialized_fill_;
  Block block;
  if (nbytes >= kMapThresholdBytes) {
    const int64_t g = kGranuleBytes;
    const size_t mapped = static_cast<size_t>((nbytes + g - 1) / g * g);
    bool dirty = false, foreign = false;
    char* p = TakeBlock(mapped, owner, &dirty, &foreign);
    if (p == nullptr) return OutOfMemoryErr(kRefused);
    // Another session's bytes never reach this one, whatever the caller
    // promised; this session's own are left when it will overwrite them.
    if (dirty && (zero_fill || foreign)) {
      std::memset(p, 0, static_cast<size_t>(nbytes));
    } else if (!zero_fill && fill >= 0) {
      std::memset(p, fill, static_cast<size_t>(nbytes));
    }
    block.data = p;
    block.reserved = mapped;
    live_rounding_bytes_.fetch_add(static_cast<int64_t>(mapped) - nbytes, std::memory_order_relaxed);
    return block;
  }
  // From malloc, 64-byte aligned by hand inside a block 48 bytes larger:
  // glibc's malloc (16-byte aligned) serves small sizes from its per-thread
  // cache, where aligned_alloc takes its slow path every time, and a small
  // output per op would pay it. Never 0 bytes, so that every storage has a
  // distinct, valid base pointer.
  const int64_t rounded = ((nbytes + kAlignment - 1) / kAlignment + (nbytes == 0)) * kAlignment;
  constexpr size_t kSlack = kAlignment - alignof(std::max_align_t);
  void* heap_block = std::malloc(static_cast<size_t>(rounded) + kSlack);
  if (heap_block == nullptr) return OutOfMemoryErr(kRefused);
  const uintptr_t a = static_cast<uintptr_t>(kAlignment);
  char* p = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(heap_block) + a - 1) & ~(a - 1));
  // Zero-filled: a session never sees bytes another session left behind.
  if (zero_fill) {
    std::memset(p, 0, static_cast<size_t>(rounded));
  } else if (fill >= 0) {
    std::memset(p, fill, static_cast<size_t>(rounded));
  }
  block.data = p;
  block.context = heap_block;
  return block;
}

void CpuAllocator::Free(const Block& block, int64_t nbytes, uint64_t owner) {
  if (block.reserved > 0) {
    ReturnBlock(block.data, block.reserved, owner);  // cached (counted) before the rounding is let go
    live_rounding_bytes_.fetch_sub(static_cast<int64_t>(block.reserved) - nbytes, std::memory_order_relaxed);
  } else {
    std::free(block.context);
  }
}

CpuAllocator::CacheStats CpuAllocator::cache_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  CacheStats s;
  s.limit_bytes = cache_limit_;
  s.cached_bytes = cached_bytes_;
  s.cached_blocks = static_cast<int64_t>(cache_.size());
  s.hits = hits_;
  s.misses = misses_;
  s.trimmed_bytes = trimmed_bytes_;
  return s;
}

int64_t CpuAllocator::reserved_bytes() const {
  int64_t cached;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cached = cached_bytes_;
  }
  return bytes_in_use() + live_rounding_bytes_.load(std::memory_order_relaxed) + cached;
}

int64_t CpuAllocator::Trim() {
  std::vector<CachedBlock> blocks;
  int64_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    blocks.swap(cache_);
    bytes = cached_bytes_;
    cached_bytes_ = 0;
    trimmed_bytes_ += bytes;
  }
  for (const CachedBlock& b : blocks) munmap(b.data, b.bytes);  // outside the lock: munmap is slow
  return bytes;
}

char* CpuAllocator::TakeBlock(size_t bytes, uint64_t owner, bool* dirty, bool* foreign) {
  *dirty = false;
  *foreign = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_activity_ = absl::Now();
    // The newest block of this size, preferring one this session freed (its
    // old bytes are its own; another session's are zeroed by the caller).
    int best = -1;
    for (int i = 0; i < static_cast<int>(cache_.size()); ++i) {
      const CachedBlock& b = cache_[i];
      if (b.bytes != bytes) continue;
      if (best < 0) {
        best = i;
        continue;
      }
      const CachedBlock& cur = cache_[best];
      const bool mine = b.owner == owner, cur_mine = cur.owner == owner;
      if (mine != cur_mine ? mine : b.seq > cur.seq) best = i;
    }
    if (best >= 0) {
      const CachedBlock b = cache_[best];
      cache_[best] = cache_.back();
      cache_.pop_back();
      cached_bytes_ -= static_cast<int64_t>(b.bytes);
      ++hits_;
      *dirty = true;
      *foreign = b.owner != owner;
      return b.data;
    }
    ++misses_;
  }
  char* p = MapAligned(bytes);
  if (p == nullptr && Trim() > 0) p = MapAligned(bytes);  // cached memory may be what is missing
  return p;
}

void CpuAllocator::ReturnBlock(char* data, size_t bytes, uint64_t owner) {
  std::vector<CachedBlock> evicted;
  bool keep = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_activity_ = absl::Now();
    if (!stop_ && static_cast<int64_t>(bytes) <= cache_limit_) {
      keep = true;
      while (cached_bytes_ + static_cast<int64_t>(bytes) > cache_limit_) {
        auto oldest = std::min_element(cache_.begin(), cache_.end(),
                                       [](const CachedBlock& a, const CachedBlock& b) { return a.seq < b.seq; });
        evicted.push_back(*oldest);
        cached_bytes_ -= static_cast<int64_t>(oldest->bytes);
        trimmed_bytes_ += static_cast<int64_t>(oldest->bytes);
        *oldest = cache_.back();
        cache_.pop_back();
      }
      const bool was_empty = cache_.empty();
      cache_.push_back(CachedBlock{data, bytes, owner, next_seq_++});
      cached_bytes_ += static_cast<int64_t>(bytes);
      if (idle_trim_after_ > absl::ZeroDuration()) {
        if (!trimmer_.joinable()) {
          try {
            trimmer_ = std::thread([this] { IdleTrimLoop(); });
          } catch (const std::system_error&) {
            // No thread: the cap still bounds the cache, and Trim empties it.
          }
        } else if (was_empty) {
          cv_.notify_one();
        }
      }
    }
  }
  for (const CachedBlock& b : evicted) munmap(b.data, b.bytes);
  if (!keep) munmap(data, bytes);
}

void CpuAllocator::IdleTrimLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (cache_.empty()) {
      cv_.wait(lock);
      continue;
    }
    const absl::Time deadline = last_activity_ + idle_trim_after_;
    const absl::Duration left = deadline - absl::Now();
    if (left > absl::ZeroDuration()) {
      cv_.wait_for(lock, absl::ToChronoNanoseconds(left));
      continue;
    }
    lock.unlock();
    const int64_t bytes = Trim();
    if (bytes > 0) {
      runtime::Log(runtime::LogLevel::kDebug, "cpu cache: unmapped ", FormatBytes(bytes), " after ",
                   absl::FormatDuration(idle_trim_after_), " idle");
    }
    lock.lock();
  }
}

int64_t HostMemoryBackend::free_memory_bytes() const {
  // MemAvailable: free memory plus the page cache and reclaimable slabs the
  // kernel would give up, what `free` shows as "available". Without it (an
  // old kernel, no /proc) the free pages alone, which undercounts.
  int64_t available = -1;
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    long long kib = 0;
    while (std::fgets(line, sizeof(line), f) != nullptr) {
      if (std::sscanf(line, "MemAvailable: %lld kB", &kib) == 1) {
        if (kib >= 0 && kib <= INT64_MAX / 1024) available = static_cast<int64_t>(kib) * 1024;
        break;
      }
    }
    std::fclose(f);
  }
  if (available < 0) {
    const long pages = ::sysconf(_SC_AVPHYS_PAGES);
    const long page_size = ::sysconf(_SC_PAGESIZE);
    available = pages > 0 && page_size > 0 && pages <= INT64_MAX / page_size ? int64_t{pages} * page_size : 0;
  }
  return std::min(available, total_memory_bytes());
}

absl::Status HostMemoryBackend::RegisterKernels() {
  if (absl::Status s = RegisterCpuKernels(kernels_); !s.ok()) {
    return InternalErr(absl::StrCat("registering the cpu kernels for ", device().ToString(),
                                    " failed: ", s.message()));
  }
  return absl::OkStatus();
}

namespace {

// An event of a HostStream: its work was done before Record returned.
class DoneEvent final : public runtime::Event {
 public:
  bool Query() const override { return true; }
  absl::Status Synchronize() const override { return absl::OkStatus(); }
};

}  // namespace

absl::Status HostStream::CopyFromHost(char* device_dst, const char* host_src, size_t n) {
  if (n > 0) std::memcpy(device_dst, host_src, n);
  return absl::OkStatus();
}

absl::Status HostStream::CopyToHost(char* host_dst, const char* device_src, size_t n) {
  if (n > 0) std::memcpy(host_dst, device_src, n);
  return absl::OkStatus();
}

absl::Status HostStream::CopyWithin(char* device_dst, const char* device_src, size_t n) {
  if (n > 0) std::memmove(device_dst, device_src, n);
  return absl::OkStatus();
}

absl::Status HostStream::Launch(KernelFn kernel, KernelContext& ctx) {
  ctx.stream = nullptr;
  return kernel(ctx);
}

absl::StatusOr<std::shared_ptr<runtime::Event>> HostStream::Record() { return std::make_shared<DoneEvent>(); }

absl::Status HostStream::Wait(const std::shared_ptr<runtime::Event>& event) {
  // Another stream's event (the test device's) may still be pending: this
  // stream's next work runs on the calling thread, so wait here.
  return event->Synchronize();
}

absl::StatusOr<std::unique_ptr<runtime::Stream>> CpuBackend::CreateStream(uint64_t /*owner*/) const {
  return std::make_unique<HostStream>(device());
}

absl::StatusOr<std::unique_ptr<CpuBackend>> CpuBackend::Create(const CpuAllocatorOptions& options) {
  std::unique_ptr<CpuBackend> b(new CpuBackend(std::make_shared<CpuAllocator>(options, kCPU)));
  TD_RETURN_IF_ERROR(b->RegisterKernels());
  return b;
}

std::string CpuBackend::description() const {
  const int64_t cores = CpuCores();
  return absl::StrCat(cores, cores == 1 ? " core" : " cores");
}

}  // namespace tensord::backends
