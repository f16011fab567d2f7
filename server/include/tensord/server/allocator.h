// tensord/server/allocator.h — the daemon's CPU memory: 64-byte aligned,
// zero-filled storages charged to a per-session MemoryAccount (bytes in use,
// peak, optional limit) and to the daemon-wide CpuAllocator total.
//
//   auto account = MemoryAccount::Create(allocator, /*limit_bytes=*/1 << 30);
//   absl::StatusOr<std::shared_ptr<Storage>> s = account->Allocate(4096, "zeros");
//   // the bytes are returned to both counters when the last shared_ptr goes.
#ifndef TENSORD_SERVER_ALLOCATOR_H_
#define TENSORD_SERVER_ALLOCATOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensord::server {

// "1.50 MiB" — for error messages and logs.
std::string FormatBytes(int64_t bytes);

// Daemon-wide CPU memory: counts every live storage of every session and
// refuses single allocations larger than the machine's physical memory
// (which would only fault later, long after the op returned).
class CpuAllocator {
 public:
  static constexpr int64_t kAlignment = 64;
  // Storages of at least this many bytes are mmap'd (page-aligned, zero, with
  // transparent huge pages requested) and unmapped when freed.
  static constexpr int64_t kMapThresholdBytes = int64_t{2} << 20;

  CpuAllocator();
  // Bytes held by all storages of all sessions.
  int64_t bytes_in_use() const { return in_use_.load(std::memory_order_relaxed); }
  // Physical memory of the machine, in bytes (the largest allocation accepted).
  int64_t physical_memory_bytes() const { return physical_bytes_; }

 private:
  friend class MemoryAccount;
  friend class Storage;
  std::atomic<int64_t> in_use_{0};
  int64_t physical_bytes_ = 0;
};

class Storage;

// One session's memory: current and peak bytes, and its limit (0 = none).
// Thread-safe: storages may be freed on any thread.
class MemoryAccount : public std::enable_shared_from_this<MemoryAccount> {
 public:
  static std::shared_ptr<MemoryAccount> Create(std::shared_ptr<CpuAllocator> allocator, int64_t limit_bytes);

  // Allocates `nbytes` (>= 0) zero-filled bytes, 64-byte aligned, charged to
  // this account. ResourceExhausted (MemoryError) naming `op`, the bytes
  // requested, the bytes in use and the limit when over the limit or when the
  // system has no memory left; InvalidArgument for a negative size.
  // `zero_fill=false` skips the zeroing for kernel scratch, which the kernel
  // writes before it reads and which never reaches a client.
  absl::StatusOr<std::shared_ptr<Storage>> Allocate(int64_t nbytes, absl::string_view op, bool zero_fill = true);

  int64_t bytes_in_use() const { return in_use_.load(std::memory_order_relaxed); }
  int64_t peak_bytes() const { return peak_.load(std::memory_order_relaxed); }
  int64_t limit_bytes() const { return limit_; }

  MemoryAccount(std::shared_ptr<CpuAllocator> allocator, int64_t limit_bytes);  // use Create

 private:
  friend class Storage;
  void Uncharge(int64_t nbytes);

  std::shared_ptr<CpuAllocator> allocator_;
  const int64_t limit_;
  std::atomic<int64_t> in_use_{0};
  std::atomic<int64_t> peak_{0};
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
  Storage(char* data, int64_t nbytes, size_t mapped_bytes, std::shared_ptr<MemoryAccount> account)
      : data_(data), nbytes_(nbytes), mapped_bytes_(mapped_bytes), account_(std::move(account)), id_(NextId()) {}
  static uint64_t NextId();

  char* data_;
  int64_t nbytes_;
  size_t mapped_bytes_;  // > 0: mmap'd, freed with munmap; else from aligned_alloc
  std::shared_ptr<MemoryAccount> account_;
  uint64_t version_ = 0;  // guarded by the owning session's mutex
  uint64_t id_;
};

}  // namespace tensord::server

#endif  // TENSORD_SERVER_ALLOCATOR_H_
