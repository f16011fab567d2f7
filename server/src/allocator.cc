// CPU storages with per-session accounting.
#include "tensord/server/allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tensord/meta/errors.h"

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

CpuAllocator::CpuAllocator() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0 && pages <= INT64_MAX / page_size) {
    physical_bytes_ = static_cast<int64_t>(pages) * page_size;
  } else {
    physical_bytes_ = INT64_MAX / 2;
  }
}

MemoryAccount::MemoryAccount(std::shared_ptr<CpuAllocator> allocator, int64_t limit_bytes)
    : allocator_(std::move(allocator)), limit_(limit_bytes < 0 ? 0 : limit_bytes) {}

std::shared_ptr<MemoryAccount> MemoryAccount::Create(std::shared_ptr<CpuAllocator> allocator, int64_t limit_bytes) {
  return std::make_shared<MemoryAccount>(std::move(allocator), limit_bytes);
}

absl::StatusOr<std::shared_ptr<Storage>> MemoryAccount::Allocate(int64_t nbytes, absl::string_view op, bool zero_fill) {
  if (nbytes < 0) return RuntimeErr(absl::StrCat(op, ": cannot allocate a negative number of bytes (", nbytes, ")"));
  auto oom = [&](absl::string_view why) {
    std::string msg = absl::StrCat(op, ": out of memory: tried to allocate ", FormatBytes(nbytes), " (", nbytes,
                                   " bytes); this session has ", FormatBytes(bytes_in_use()), " in use");
    if (limit_ > 0) absl::StrAppend(&msg, " of its ", FormatBytes(limit_), " limit (", limit_, " bytes)");
    if (!why.empty()) absl::StrAppend(&msg, "; ", why);
    return OutOfMemoryErr(msg);
  };
  if (nbytes > allocator_->physical_memory_bytes()) {
    return oom(absl::StrCat("the machine has ", FormatBytes(allocator_->physical_memory_bytes()),
                            " of physical memory"));
  }
  // Charge first, so that concurrent allocations never overshoot the limit.
  int64_t cur = in_use_.load(std::memory_order_relaxed);
  for (;;) {
    if (limit_ > 0 && nbytes > limit_ - cur) return oom("");
    if (in_use_.compare_exchange_weak(cur, cur + nbytes, std::memory_order_relaxed)) break;
  }
  const int64_t now = cur + nbytes;
  int64_t peak = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  // Large blocks are mapped directly: fresh anonymous pages are zero (no
  // memset), transparent huge pages are asked for (a 64 MiB output then
  // faults 32 times instead of 16,384, as NumPy and glibc users see with
  // MADV_HUGEPAGE), and munmap gives the memory back to the system at once.
  char* p = nullptr;
  size_t mapped = 0;
  if (nbytes >= CpuAllocator::kMapThresholdBytes) {
    mapped = static_cast<size_t>(nbytes);
    void* m = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      in_use_.fetch_sub(nbytes, std::memory_order_relaxed);
      return oom("the system refused the allocation");
    }
    (void)madvise(m, mapped, MADV_HUGEPAGE);  // a hint: without THP the pages are simply 4 KiB
    p = static_cast<char*>(m);
  } else {
    // aligned_alloc wants a size that is a multiple of the alignment, and
    // never 0 (so that every storage has a distinct, valid base pointer).
    const int64_t rounded = ((nbytes + CpuAllocator::kAlignment - 1) / CpuAllocator::kAlignment + (nbytes == 0)) *
                            CpuAllocator::kAlignment;
    p = static_cast<char*>(std::aligned_alloc(static_cast<size_t>(CpuAllocator::kAlignment),
                                              static_cast<size_t>(rounded)));
    if (p == nullptr) {
      in_use_.fetch_sub(nbytes, std::memory_order_relaxed);
      return oom("the system refused the allocation");
    }
    // Zero-filled: a session never sees bytes another session left behind.
    if (zero_fill) std::memset(p, 0, static_cast<size_t>(rounded));
  }
  allocator_->in_use_.fetch_add(nbytes, std::memory_order_relaxed);
  Storage* raw = new (std::nothrow) Storage(p, nbytes, mapped, shared_from_this());
  if (raw == nullptr) {
    if (mapped > 0) {
      munmap(p, mapped);
    } else {
      std::free(p);
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

void MemoryAccount::Uncharge(int64_t nbytes) {
  in_use_.fetch_sub(nbytes, std::memory_order_relaxed);
  allocator_->in_use_.fetch_sub(nbytes, std::memory_order_relaxed);
}

uint64_t Storage::NextId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

Storage::~Storage() {
  if (mapped_bytes_ > 0) {
    munmap(data_, mapped_bytes_);
  } else {
    std::free(data_);
  }
  account_->Uncharge(nbytes_);
}

}  // namespace tensord::server
