// tensord/backends/cpu/cpu_backend.h — the CPU as a runtime Backend: its
// allocator (64-byte aligned storages; large ones, >= 2 MiB, mapped in 2 MiB
// granules and, when freed, kept in a bounded daemon-wide cache for the next
// allocation of the same granule count, as PyTorch's caching allocator
// does: a 64 MiB output then costs no page faults and no kernel zeroing;
// cached bytes are charged to no session), memcpy copies, and the kernels of
// kernels/cpu/.
//
//   absl::StatusOr<std::unique_ptr<CpuBackend>> cpu = CpuBackend::Create({});
//   auto account = runtime::MemoryAccount::Create(/*limit_bytes=*/1 << 30);
//   auto s = account->Allocate((*cpu)->allocator(), 4096, "zeros");
#ifndef TENSORD_BACKENDS_CPU_CPU_BACKEND_H_
#define TENSORD_BACKENDS_CPU_CPU_BACKEND_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tensord/kernels/registry.h"
#include "tensord/runtime/backend.h"
#include "tensord/runtime/memory.h"

namespace tensord::backends {

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

// The CPU's memory: refuses single allocations larger than the machine's
// physical memory (which would only fault later, long after the op
// returned), and keeps the cache of freed large blocks. Thread-safe.
class CpuAllocator final : public runtime::DeviceAllocator {
 public:
  // Storages of at least this many bytes are mmap'd in whole granules
  // (2 MiB-aligned, so that transparent huge pages back them; fresh ones are
  // zero) and go to the cache when freed.
  static constexpr int64_t kMapThresholdBytes = int64_t{2} << 20;
  static constexpr int64_t kGranuleBytes = int64_t{2} << 20;
  // The default cache cap's upper bound.
  static constexpr int64_t kDefaultCacheLimitBytes = int64_t{1} << 30;

  // `device`: what its storages say they are on (the CPU).
  explicit CpuAllocator(const CpuAllocatorOptions& options = {}, Device device = kCPU);
  ~CpuAllocator() override;  // unmaps the cache; every storage must be gone
  CpuAllocator(const CpuAllocator&) = delete;
  CpuAllocator& operator=(const CpuAllocator&) = delete;

  Device device() const override { return device_; }
  absl::Status CheckCapacity(int64_t nbytes) const override;
  absl::StatusOr<Block> Allocate(int64_t nbytes, bool zero_fill, uint64_t owner) override;
  void Free(const Block& block, int64_t nbytes, uint64_t owner) override;
  // Live storages' bytes, plus their large blocks' rounding up to whole
  // granules, plus the cached blocks (small storages' heap blocks count as
  // their sizes: malloc's own rounding is not known here).
  int64_t reserved_bytes() const override;

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
  struct CachedBlock {
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

  const Device device_;
  int64_t physical_bytes_ = 0;
  int64_t cache_limit_ = 0;
  absl::Duration idle_trim_after_;
  int uninitialized_fill_ = -1;
  // Bytes by which live large blocks exceed their storages (granule
  // rounding): the part of reserved_bytes() no counter of the runtime sees.
  std::atomic<int64_t> live_rounding_bytes_{0};

  // A std::mutex rather than absl::Mutex: ThreadSanitizer sees through
  // pthread mutexes, but not through Debian's prebuilt (uninstrumented)
  // abseil, whose Mutex would make every cache access look like a race.
  // mu_ guards cache_ and every member below it except trimmer_.
  mutable std::mutex mu_;
  std::condition_variable cv_;  // the idle trimmer waits on it
  std::vector<CachedBlock> cache_;
  int64_t cached_bytes_ = 0;
  uint64_t next_seq_ = 0;
  int64_t hits_ = 0;
  int64_t misses_ = 0;
  int64_t trimmed_bytes_ = 0;
  absl::Time last_activity_;
  bool stop_ = false;
  std::thread trimmer_;  // started with the first cached block
};

// A device whose memory is this process's: an allocator of its own for
// `device` (`allocator`, whose device() it is) and the CPU's kernels, run on
// the calling thread (and OpenMP's). The CPU and the test device are two of
// them; they differ in their name, their allocator, in whether the daemon
// may touch their bytes directly, and in their streams.
class HostMemoryBackend : public runtime::Backend {
 public:
  Device device() const override { return allocator_->device(); }
  int64_t total_memory_bytes() const override { return PhysicalMemoryBytes(); }
  // The machine's available memory (/proc/meminfo's MemAvailable): the CPU
  // and the test device share it with every process.
  int64_t free_memory_bytes() const override;
  const std::shared_ptr<runtime::DeviceAllocator>& allocator() const override { return allocator_; }
  KernelFn FindKernel(uint32_t op_id) const override { return kernels_.Find(DeviceType::kCPU, op_id); }

  // Physical memory of the machine, in bytes.
  static int64_t PhysicalMemoryBytes();

 protected:
  explicit HostMemoryBackend(std::shared_ptr<runtime::DeviceAllocator> allocator)
      : allocator_(std::move(allocator)) {}
  // Registers the CPU kernels; fails only on a build bug (a kernel
  // registered for an op the table lacks), with InternalError.
  absl::Status RegisterKernels();

 private:
  std::shared_ptr<runtime::DeviceAllocator> allocator_;
  KernelRegistry kernels_;
};

// The CPU, "cpu".
class CpuBackend final : public HostMemoryBackend {
 public:
  // InternalError only on a build bug (see RegisterKernels).
  static absl::StatusOr<std::unique_ptr<CpuBackend>> Create(const CpuAllocatorOptions& options);

  std::string description() const override;  // "16 cores"
  bool host_addressable() const override { return true; }
  // A HostStream: the CPU's work is done when the call that issues it
  // returns (so its allocator needs no owner's stream: `owner` is unused).
  absl::StatusOr<std::unique_ptr<runtime::Stream>> CreateStream(uint64_t owner) const override;
  // Unmaps the cached large blocks (CpuAllocator::Trim).
  int64_t Trim() override { return cpu_allocator_->Trim(); }

  CpuAllocator& cpu_allocator() const { return *cpu_allocator_; }

 private:
  explicit CpuBackend(std::shared_ptr<CpuAllocator> allocator)
      : HostMemoryBackend(allocator), cpu_allocator_(std::move(allocator)) {}

  std::shared_ptr<CpuAllocator> cpu_allocator_;  // allocator(), as itself
};

// The stream of a device whose work is done on the calling thread: each
// copy and kernel is done before the call that issues it returns, so its
// Events are done when recorded and Synchronize has nothing to wait for.
class HostStream final : public runtime::Stream {
 public:
  explicit HostStream(Device device) : device_(device) {}
  Device device() const override { return device_; }
  void* native_handle() const override { return nullptr; }
  absl::Status CopyFromHost(char* device_dst, const char* host_src, size_t n) override;
  absl::Status CopyToHost(char* host_dst, const char* device_src, size_t n) override;
  absl::Status CopyWithin(char* device_dst, const char* device_src, size_t n) override;
  absl::Status Launch(KernelFn kernel, KernelContext& ctx) override;
  absl::StatusOr<std::shared_ptr<runtime::Event>> Record() override;
  absl::Status Wait(const std::shared_ptr<runtime::Event>& event) override;
  absl::Status Synchronize() override { return absl::OkStatus(); }

 private:
  const Device device_;
};

// Cores online on the machine, at least 1.
int64_t CpuCores();

}  // namespace tensord::backends

#endif  // TENSORD_BACKENDS_CPU_CPU_BACKEND_H_
