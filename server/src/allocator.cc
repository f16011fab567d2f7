// CPU storages with per-session accounting, and the cache of freed large blocks.
#include "tensord/server/allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tensord/meta/errors.h"
#include "tensord/server/log.h"

namespace tensord::server {

std::string FormatBytes(int64_t bytes) {
  static const char* const kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " bytes");
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    ++u;
  }
  return absl::StrFormat("%.2f %s", v, kUnits[u]);
}

namespace {

std::atomic<uint64_t> g_next_account_id{1};

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

// What a session's failed allocation of `nbytes` for `op` says: the same
// words whether the storage was to be allocated or adopted (a shared-memory
// upload).
absl::Status OutOfMemory(absl::string_view op, int64_t nbytes, int64_t in_use, int64_t bookkeeping, int64_t limit,
                         absl::string_view why) {
  std::string msg = absl::StrCat(op, ": out of memory: tried to allocate ", FormatBytes(nbytes), " (", nbytes,
                                 " bytes); this session has ", FormatBytes(in_use), " in use");
  if (limit > 0) absl::StrAppend(&msg, " of its ", FormatBytes(limit), " limit (", limit, " bytes)");
  if (bookkeeping > 0) {
    absl::StrAppend(&msg, ", and ", FormatBytes(bookkeeping), " of bookkeeping (tensor handles, call sites)");
  }
  if (!why.empty()) absl::StrAppend(&msg, "; ", why);
  return OutOfMemoryErr(msg);
}

}  // namespace

CpuAllocator::CpuAllocator(const CpuAllocatorOptions& options)
    : idle_trim_after_(options.idle_trim_after),
      uninitialized_fill_(options.uninitialized_fill >= 0 && options.uninitialized_fill <= 255
                              ? options.uninitialized_fill
                              : -1) {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0 && pages <= INT64_MAX / page_size) {
    physical_bytes_ = static_cast<int64_t>(pages) * page_size;
  } else {
    physical_bytes_ = INT64_MAX / 2;
  }
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

int64_t CpuAllocator::Trim() {
  std::vector<Block> blocks;
  int64_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    blocks.swap(cache_);
    bytes = cached_bytes_;
    cached_bytes_ = 0;
    trimmed_bytes_ += bytes;
  }
  for (const Block& b : blocks) munmap(b.data, b.bytes);  // outside the lock: munmap is slow
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
      const Block& b = cache_[i];
      if (b.bytes != bytes) continue;
      if (best < 0) {
        best = i;
        continue;
      }
      const Block& cur = cache_[best];
      const bool mine = b.owner == owner, cur_mine = cur.owner == owner;
      if (mine != cur_mine ? mine : b.seq > cur.seq) best = i;
    }
    if (best >= 0) {
      const Block b = cache_[best];
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
  std::vector<Block> evicted;
  bool keep = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_activity_ = absl::Now();
    if (!stop_ && static_cast<int64_t>(bytes) <= cache_limit_) {
      keep = true;
      while (cached_bytes_ + static_cast<int64_t>(bytes) > cache_limit_) {
        auto oldest = std::min_element(cache_.begin(), cache_.end(),
                                       [](const Block& a, const Block& b) { return a.seq < b.seq; });
        evicted.push_back(*oldest);
        cached_bytes_ -= static_cast<int64_t>(oldest->bytes);
        trimmed_bytes_ += static_cast<int64_t>(oldest->bytes);
        *oldest = cache_.back();
        cache_.pop_back();
      }
      const bool was_empty = cache_.empty();
      cache_.push_back(Block{data, bytes, owner, next_seq_++});
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
  for (const Block& b : evicted) munmap(b.data, b.bytes);
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
      Log(LogLevel::kDebug, "cpu cache: unmapped ", FormatBytes(bytes), " after ",
          absl::FormatDuration(idle_trim_after_), " idle");
    }
    lock.lock();
  }
}

MemoryAccount::MemoryAccount(std::shared_ptr<CpuAllocator> allocator, int64_t limit_bytes)
    : allocator_(std::move(allocator)),
      limit_(limit_bytes < 0 ? 0 : limit_bytes),
      id_(g_next_account_id.fetch_add(1, std::memory_order_relaxed)) {}

std::shared_ptr<MemoryAccount> MemoryAccount::Create(std::shared_ptr<CpuAllocator> allocator, int64_t limit_bytes) {
  return std::make_shared<MemoryAccount>(std::move(allocator), limit_bytes);
}

absl::StatusOr<std::shared_ptr<Storage>> MemoryAccount::Allocate(int64_t nbytes, absl::string_view op, bool zero_fill) {
  if (nbytes < 0) return RuntimeErr(absl::StrCat(op, ": cannot allocate a negative number of bytes (", nbytes, ")"));
  auto oom = [&](absl::string_view why) {
    return OutOfMemory(op, nbytes, bytes_in_use(), bookkeeping_bytes(), limit_, why);
  };
  if (nbytes > allocator_->physical_memory_bytes()) {
    return oom(absl::StrCat("the machine has ", FormatBytes(allocator_->physical_memory_bytes()),
                            " of physical memory"));
  }
  // Charge first, so that concurrent allocations never overshoot the limit.
  int64_t cur = in_use_.load(std::memory_order_relaxed);
  for (;;) {
    if (limit_ > 0 && nbytes > limit_ - cur - bookkeeping_bytes()) return oom("");
    if (in_use_.compare_exchange_weak(cur, cur + nbytes, std::memory_order_relaxed)) break;
  }
  const int64_t now = cur + nbytes;
  int64_t peak = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  // Large blocks come in whole granules from the allocator's cache or fresh
  // from the system (zero, with transparent huge pages: a 64 MiB output then
  // faults 32 times instead of 16,384, as NumPy and glibc users see with
  // MADV_HUGEPAGE); small ones from the heap.
  const int fill = allocator_->uninitialized_fill_;
  char* p = nullptr;
  void* heap_block = nullptr;  // unmapped storages: the malloc'd block p lies in
  size_t mapped = 0;
  if (nbytes >= CpuAllocator::kMapThresholdBytes) {
    const int64_t g = CpuAllocator::kGranuleBytes;
    mapped = static_cast<size_t>((nbytes + g - 1) / g * g);
    bool dirty = false, foreign = false;
    p = allocator_->TakeBlock(mapped, id_, &dirty, &foreign);
    if (p == nullptr) {
      in_use_.fetch_sub(nbytes, std::memory_order_relaxed);
      return oom("the system refused the allocation");
    }
    // Another session's bytes never reach this one, whatever the caller
    // promised; this session's own are left when it will overwrite them.
    if (dirty && (zero_fill || foreign)) {
      std::memset(p, 0, static_cast<size_t>(nbytes));
    } else if (!zero_fill && fill >= 0) {
      std::memset(p, fill, static_cast<size_t>(nbytes));
    }
  } else {
    // From malloc, 64-byte aligned by hand inside a block 48 bytes larger:
    // glibc's malloc (16-byte aligned) serves small sizes from its per-thread
    // cache, where aligned_alloc takes its slow path every time (about 800
    // instructions; a 64-float output per op paid it). Never 0 bytes, so
    // that every storage has a distinct, valid base pointer.
    const int64_t rounded = ((nbytes + CpuAllocator::kAlignment - 1) / CpuAllocator::kAlignment + (nbytes == 0)) *
                            CpuAllocator::kAlignment;
    constexpr size_t kSlack = CpuAllocator::kAlignment - alignof(std::max_align_t);
    heap_block = std::malloc(static_cast<size_t>(rounded) + kSlack);
    if (heap_block == nullptr) {
      in_use_.fetch_sub(nbytes, std::memory_order_relaxed);
      return oom("the system refused the allocation");
    }
    const uintptr_t a = static_cast<uintptr_t>(CpuAllocator::kAlignment);
    p = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(heap_block) + a - 1) & ~(a - 1));
    // Zero-filled: a session never sees bytes another session left behind.
    if (zero_fill) {
      std::memset(p, 0, static_cast<size_t>(rounded));
    } else if (fill >= 0) {
      std::memset(p, fill, static_cast<size_t>(rounded));
    }
  }
  allocator_->in_use_.fetch_add(nbytes, std::memory_order_relaxed);
  Storage* raw = new (std::nothrow) Storage(p, heap_block, nbytes, mapped, shared_from_this());
  if (raw == nullptr) {
    if (mapped > 0) {
      allocator_->ReturnBlock(p, mapped, id_);
    } else {
      std::free(heap_block);
    }
    Uncharge(nbytes);
    return oom("the system refused the allocation");
  }
  try {
    return std::shared_ptr<Storage>(raw);  // on failure the constructor deletes `raw`
  } catch (const std::bad_alloc&) {
    return oom("the system refused the allocation");
  }
}

absl::StatusOr<std::shared_ptr<Storage>> MemoryAccount::Adopt(char* data, int64_t nbytes,
                                                             std::shared_ptr<void> keeper, absl::string_view op) {
  if (nbytes < 0) return RuntimeErr(absl::StrCat(op, ": cannot adopt a negative number of bytes (", nbytes, ")"));
  if (data == nullptr || keeper == nullptr) return InternalErr(absl::StrCat(op, ": adopting memory without an owner"));
  int64_t cur = in_use_.load(std::memory_order_relaxed);
  for (;;) {
    if (limit_ > 0 && nbytes > limit_ - cur - bookkeeping_bytes()) {
      return OutOfMemory(op, nbytes, cur, bookkeeping_bytes(), limit_, "");
    }
    if (in_use_.compare_exchange_weak(cur, cur + nbytes, std::memory_order_relaxed)) break;
  }
  const int64_t now = cur + nbytes;
  int64_t peak = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  allocator_->in_use_.fetch_add(nbytes, std::memory_order_relaxed);
  Storage* raw = new (std::nothrow) Storage(data, nullptr, nbytes, 0, shared_from_this());
  if (raw == nullptr) {
    Uncharge(nbytes);
    return OutOfMemoryErr(absl::StrCat(op, ": out of memory (the storage's bookkeeping)"));
  }
  raw->external_ = std::move(keeper);
  try {
    return std::shared_ptr<Storage>(raw);  // on failure the constructor deletes `raw`
  } catch (const std::bad_alloc&) {
    return OutOfMemoryErr(absl::StrCat(op, ": out of memory (the storage's bookkeeping)"));
  }
}

absl::Status MemoryAccount::Charge(int64_t nbytes, absl::string_view op) {
  if (nbytes < 0) return InternalErr(absl::StrCat(op, ": a negative charge of ", nbytes, " bytes"));
  int64_t cur = bookkeeping_.load(std::memory_order_relaxed);
  for (;;) {
    const int64_t storage = bytes_in_use();
    if (limit_ > 0 && nbytes > limit_ - storage - cur) return OutOfMemory(op, nbytes, storage, cur, limit_, "");
    if (bookkeeping_.compare_exchange_weak(cur, cur + nbytes, std::memory_order_relaxed)) break;
  }
  return absl::OkStatus();
}

void MemoryAccount::Uncharge(int64_t nbytes, bool bookkeeping) {
  if (bookkeeping) {
    bookkeeping_.fetch_sub(nbytes, std::memory_order_relaxed);
    return;
  }
  Uncharge(nbytes);
}

MemoryCharge::~MemoryCharge() {
  if (account_ != nullptr && bytes_ > 0) account_->Uncharge(bytes_, /*bookkeeping=*/true);
}

absl::Status MemoryCharge::Add(const std::shared_ptr<MemoryAccount>& account, int64_t nbytes, absl::string_view what) {
  if (account == nullptr || (account_ != nullptr && account_ != account)) {
    return InternalErr(absl::StrCat(what, ": a memory charge moved between accounts"));
  }
  TD_RETURN_IF_ERROR(account->Charge(nbytes, what));
  account_ = account;
  bytes_ += nbytes;
  return absl::OkStatus();
}

void MemoryCharge::Sub(int64_t nbytes) {
  nbytes = std::min(nbytes, bytes_);
  if (account_ == nullptr || nbytes <= 0) return;
  account_->Uncharge(nbytes, /*bookkeeping=*/true);
  bytes_ -= nbytes;
}

void MemoryAccount::Uncharge(int64_t nbytes) {
  in_use_.fetch_sub(nbytes, std::memory_order_relaxed);
  allocator_->in_use_.fetch_sub(nbytes, std::memory_order_relaxed);
}

uint64_t Storage::NextId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

Storage::~Storage() {
  if (external_ != nullptr) {
    external_.reset();  // the owner lets go of the memory (e.g. the client may reuse its segment)
  } else if (mapped_bytes_ > 0) {
    account_->allocator_->ReturnBlock(data_, mapped_bytes_, account_->id());
  } else {
    std::free(heap_block_);
  }
  account_->Uncharge(nbytes_);
}

}  // namespace tensord::server
