// tensord/server/allocator.h — the daemon's CPU memory: 64-byte aligned
// storages charged to a per-session MemoryAccount (bytes in use, peak,
// optional limit) and to the daemon-wide CpuAllocator total. Large storages
// (>= 2 MiB) are mapped in 2 MiB granules and, when freed, kept in a bounded
// daemon-wide cache for the next allocation of the same granule count (as
// PyTorch's caching allocator): a 64 MiB output then costs no page faults and
// no kernel zeroing. Cached bytes are charged to no session.
//
//   auto allocator = std::make_shared<CpuAllocator>();   // default cache cap
//   auto account = MemoryAccount::Create(allocator, /*limit_bytes=*/1 << 30);
//   absl::StatusOr<std::shared_ptr<Storage>> s = account->Allocate(4096, "zeros");
//   // the bytes are returned to both counters when the last shared_ptr goes.
#ifndef TENSORD_SERVER_ALLOCATOR_H_
#define TENSORD_SERVER_ALLOCATOR_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace tensord::server {

// "1.50 MiB" — for error messages and logs.
std::string FormatBytes(int64_t bytes);

struct CpuAllocatorOptions {
  // Most bytes of freed large blocks kept mapped for reuse: -1 = the default,
  // min(1 GiB, physical memory / 8); 0 = no cache (every large block is
  // unmapped when freed).
  int64_t cache_limit_bytes = -1;
  // The cache is emptied (unmapped) once no large block was allocated or
  // freed for this long; <= 0 = never by time (Trim() still empties it).
  absl::Duration idle_trim_after = absl::Seconds(5);
  // Debugging aid, like glibc's MALLOC_PERTURB_: when 0..255, every storage
  // handed out without zero_fill is first filled with this byte, so that a
  // kernel that does not write every element of its output shows garbage
  // (0xFF: NaN, -1) instead of plausible stale values. -1 = off.
  int uninitialized_fill = -1;
};

// Daemon-wide CPU memory: counts every live storage of every session,
// refuses single allocations larger than the machine's physical memory
// (which would only fault later, long after the op returned), and keeps the
// cache of freed large blocks. Thread-safe.
class CpuAllocator {
 public:
  static constexpr int64_t kAlignment = 64;
  // Storages of at least this many bytes are mmap'd in whole granules
  // (2 MiB-aligned, so that transparent huge pages back them; fresh ones are
  // zero) and go to the cache when freed.
  static constexpr int64_t kMapThresholdBytes = int64_t{2} << 20;
  static constexpr int64_t kGranuleBytes = int64_t{2} << 20;
  // The default cache cap's upper bound.
  static constexpr int64_t kDefaultCacheLimitBytes = int64_t{1} << 30;

  explicit CpuAllocator(const CpuAllocatorOptions& options = {});
  ~CpuAllocator();  // unmaps the cache; every storage must be gone
  CpuAllocator(const CpuAllocator&) = delete;
  CpuAllocator& operator=(const CpuAllocator&) = delete;

  // Bytes held by all storages of all sessions (cached blocks excluded).
  int64_t bytes_in_use() const { return in_use_.load(std::memory_order_relaxed); }
  // Physical memory of the machine, in bytes (the largest allocation accepted).
  int64_t physical_memory_bytes() const { return physical_bytes_; }

  struct CacheStats {
    int64_t limit_bytes = 0;    // the cap (0: the cache is off)
    int64_t cached_bytes = 0;   // mapped bytes of the blocks kept now
    int64_t cached_blocks = 0;
    int64_t hits = 0;           // large allocations served from the cache
    int64_t misses = 0;         // large allocations that mapped fresh memory
    int64_t trimmed_bytes = 0;  // bytes unmapped by Trim and the idle trim, in total
  };
  CacheStats cache_stats() const;
  // Unmaps every cached block (a session closed, the daemon went idle).
  // Returns the bytes given back to the system.
  int64_t Trim();

 private:
  friend class MemoryAccount;
  friend class Storage;
  struct Block {
    char* data;
    size_t bytes;    // mapped bytes, a whole number of granules
    uint64_t owner;  // MemoryAccount::id() of the session that freed it
    uint64_t seq;    // order of caching (eviction takes the oldest)
  };

  // A mapped block of `bytes` (whole granules) for `owner`: from the cache
  // (*dirty: it holds old bytes; *foreign: they are another session's) or
  // freshly mapped (zero). nullptr when the system refuses.
  char* TakeBlock(size_t bytes, uint64_t owner, bool* dirty, bool* foreign);
  // Caches a freed block, evicting the oldest over the cap; unmaps it when it
  // cannot be cached.
  void ReturnBlock(char* data, size_t bytes, uint64_t owner);
  void IdleTrimLoop();

  std::atomic<int64_t> in_use_{0};
  int64_t physical_bytes_ = 0;
  int64_t cache_limit_ = 0;
  absl::Duration idle_trim_after_;
  int uninitialized_fill_ = -1;

  // A std::mutex rather than absl::Mutex: ThreadSanitizer sees through
  // pthread mutexes, but not through Debian's prebuilt (uninstrumented)
  // abseil, whose Mutex would make every cache access look like a race.
  // mu_ guards cache_ and every member below it except trimmer_.
  mutable std::mutex mu_;
  std::condition_variable cv_;  // the idle trimmer waits on it
  std::vector<Block> cache_;
  int64_t cached_bytes_ = 0;
  uint64_t next_seq_ = 0;
  int64_t hits_ = 0;
  int64_t misses_ = 0;
  int64_t trimmed_bytes_ = 0;
  absl::Time last_activity_;
  bool stop_ = false;
  std::thread trimmer_;  // started with the first cached block
};

class Storage;
class MemoryAccount;

// Bytes the daemon holds for a session outside any storage (the entries of
// its handle table, views and failed handles included; interned call
// sites): charged to its MemoryAccount's
// bookkeeping, and so under its limit, until subtracted or destroyed.
// Whatever a client can make the daemon keep is either charged here or
// bounded by a fixed cap before it is allocated. Not thread-safe (one owner).
class MemoryCharge {
 public:
  MemoryCharge() = default;
  ~MemoryCharge();
  MemoryCharge(const MemoryCharge&) = delete;
  MemoryCharge& operator=(const MemoryCharge&) = delete;

  // Charges `nbytes` (>= 0) more to `account` (the first Add picks the
  // account; later ones must name the same). ResourceExhausted (MemoryError)
  // naming `what`, the bytes, the bytes in use and the limit when over it.
  absl::Status Add(const std::shared_ptr<MemoryAccount>& account, int64_t nbytes, absl::string_view what);
  // Gives back `nbytes` (at most bytes()).
  void Sub(int64_t nbytes);
  int64_t bytes() const { return bytes_; }

 private:
  std::shared_ptr<MemoryAccount> account_;
  int64_t bytes_ = 0;
};

// One session's memory: current and peak bytes, and its limit (0 = none).
// Thread-safe: storages may be freed on any thread.
class MemoryAccount : public std::enable_shared_from_this<MemoryAccount> {
 public:
  static std::shared_ptr<MemoryAccount> Create(std::shared_ptr<CpuAllocator> allocator, int64_t limit_bytes);

  // Allocates `nbytes` (>= 0) zero-filled bytes, 64-byte aligned, charged to
  // this account. ResourceExhausted (MemoryError) naming `op`, the bytes
  // requested, the bytes in use and the limit when over the limit or when the
  // system has no memory left; InvalidArgument for a negative size.
  // `zero_fill=false` is the caller's promise to write every one of the
  // `nbytes` before any of them can reach a client (kernel scratch, upload
  // chunks, the dense outputs of structured kernels): the bytes are then
  // left as they are, except that a cached block another session freed is
  // always zeroed first.
  absl::StatusOr<std::shared_ptr<Storage>> Allocate(int64_t nbytes, absl::string_view op, bool zero_fill = true);

  // A storage over `nbytes` (>= 0) of memory the daemon did not allocate
  // (a client's shared-memory segment adopted by an upload): `data` stays
  // valid while `keeper` lives, and the storage holds `keeper` until its last
  // shared_ptr goes (then drops it: nothing is freed here). Charged to this
  // account like Allocate, with the same errors over the limit.
  absl::StatusOr<std::shared_ptr<Storage>> Adopt(char* data, int64_t nbytes, std::shared_ptr<void> keeper,
                                                 absl::string_view op);

  // Bytes of this session's storages (what memory statistics report).
  int64_t bytes_in_use() const { return in_use_.load(std::memory_order_relaxed); }
  int64_t peak_bytes() const { return peak_.load(std::memory_order_relaxed); }
  // Bytes of MemoryCharges: the session's bookkeeping. The limit holds
  // bytes_in_use() + bookkeeping_bytes().
  int64_t bookkeeping_bytes() const { return bookkeeping_.load(std::memory_order_relaxed); }
  int64_t limit_bytes() const { return limit_; }
  // A daemon-wide serial number (never reused): which session freed a cached block.
  uint64_t id() const { return id_; }

  MemoryAccount(std::shared_ptr<CpuAllocator> allocator, int64_t limit_bytes);  // use Create

 private:
  friend class Storage;
  friend class MemoryCharge;
  // Adds `nbytes` of bookkeeping if the limit allows (MemoryCharge).
  absl::Status Charge(int64_t nbytes, absl::string_view op);
  void Uncharge(int64_t nbytes);
  void Uncharge(int64_t nbytes, bool bookkeeping);

  std::shared_ptr<CpuAllocator> allocator_;
  const int64_t limit_;
  const uint64_t id_;
  std::atomic<int64_t> in_use_{0};
  std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> bookkeeping_{0};
};

// A block of CPU memory that one or more tensors view. Freed (and uncharged)
// when the last shared_ptr to it goes.
class Storage {
 public:
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  char* data() const { return data_; }
  int64_t nbytes() const { return nbytes_; }
  // Adopted memory (MemoryAccount::Adopt: a client's shared-memory segment):
  // the client can change these bytes at any moment, also while a kernel
  // reads them, so nothing the daemon validates may be read from here twice.
  bool client_writable() const { return external_ != nullptr; }

  // Autograd's version counter, shared by every tensor viewing this storage:
  // bumped by each in-place op (a schema argument `Tensor(a!)`) that writes
  // it. A tensor saved for backward remembers the version it was saved at.
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

  // A daemon-wide serial number, never reused while the daemon runs: two
  // tensors view the same storage iff their storages' ids are equal (what a
  // Describe reports; no address leaves the daemon).
  uint64_t id() const { return id_; }

 private:
  friend class MemoryAccount;
  Storage(char* data, void* heap_block, int64_t nbytes, size_t mapped_bytes, std::shared_ptr<MemoryAccount> account)
      : data_(data),
        heap_block_(heap_block),
        nbytes_(nbytes),
        mapped_bytes_(mapped_bytes),
        account_(std::move(account)),
        id_(NextId()) {}
  static uint64_t NextId();

  char* data_;
  void* heap_block_;     // unmapped storages: the malloc'd block that data_ lies in (64 bytes in at most)
  int64_t nbytes_;
  size_t mapped_bytes_;  // > 0: mapped, returned to the allocator's cache; else heap_block_ is
  std::shared_ptr<void> external_;  // non-null: adopted memory, kept alive by this (see Adopt)
  std::shared_ptr<MemoryAccount> account_;
  uint64_t version_ = 0;  // guarded by the owning session's mutex
  uint64_t id_;
};

}  // namespace tensord::server

#endif  // TENSORD_SERVER_ALLOCATOR_H_
