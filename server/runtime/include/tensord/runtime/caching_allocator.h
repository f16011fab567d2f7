// tensord/runtime/caching_allocator.h — a device allocator that keeps freed
// blocks for reuse, as PyTorch's CUDA caching allocator does, for a device
// whose own allocation call is slow and synchronizing (cudaMalloc). The
// device-neutral half: the algorithm (size classes, best fit, splitting,
// merging, reuse ordered by each session's stream, giving memory back) is
// here, where it is tested on host memory in every CI run; a backend
// supplies the device's memory through a DeviceMemorySource (the CUDA
// backend: cudaMalloc, cudaFree, cudaMemsetAsync on the session's stream).
//
//   auto a = std::make_shared<CachingAllocator>(std::move(source));
//   a->AttachOwner(account->id());          // the session's stream exists
//   account->Allocate(a, nbytes, "add");    // a block of a cached segment, or a new one
//   ... the storage goes: its block is cached, reusable by that session at once ...
//   a->DetachOwner(account->id());          // its stream is synchronized and gone
//   a->EmptyCache();                        // every wholly free segment goes back
#ifndef TENSORD_RUNTIME_CACHING_ALLOCATOR_H_
#define TENSORD_RUNTIME_CACHING_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensord/meta/device.h"
#include "tensord/runtime/memory.h"

namespace tensord::runtime {

// Where a CachingAllocator's memory comes from: whole segments of one
// device, mapped and unmapped rarely. Called with the allocator's lock held
// (never re-entered). Thread-safe is not required beyond that.
class DeviceMemorySource {
 public:
  virtual ~DeviceMemorySource() = default;
  virtual Device device() const = 0;
  // The device's memory in bytes (what no allocation can exceed); asked
  // once, when the allocator is made.
  virtual int64_t total_bytes() const = 0;
  // A new segment of `nbytes` (> 0, a multiple of 512) bytes, aligned to at
  // least DeviceAllocator::kAlignment. Error: the device's reason, as a
  // phrase ("cudaMalloc: out of memory"); ResourceExhausted when the device
  // has no room (the allocator then gives back what it caches and retries
  // once), any other code when the device failed.
  virtual absl::StatusOr<char*> Map(size_t nbytes) = 0;
  // Gives back a whole segment Map made. Called only after Synchronize(), so
  // no work of any stream still uses it.
  virtual void Unmap(char* base, size_t nbytes) = 0;
  // Sets `n` bytes at `p` (a whole block, a multiple of the round) to zero,
  // in the order of `owner`'s work on the device (on CUDA, cudaMemsetAsync
  // on that session's stream; where the owner has no stream, before any
  // later work of anyone: no stream's pending work uses such a block).
  // Error: the device failed (the block goes back to the cache).
  virtual absl::Status Zero(char* p, size_t n, uint64_t owner) = 0;
  // Waits until no work of any stream is running on the device.
  virtual absl::Status Synchronize() = 0;
};

struct CachingAllocatorOptions {
  // Every block's size is rounded up to this many bytes.
  int64_t round_bytes = 512;
  // Requests of at most `small_limit_bytes` are served from segments of
  // `small_segment_bytes` (the small pool); larger ones from the large pool:
  // segments of `medium_segment_bytes` for requests up to
  // `medium_limit_bytes`, else of the request rounded up to
  // `large_round_bytes`. (PyTorch's: 1 MiB, 2 MiB, 10 MiB, 20 MiB, 2 MiB.)
  // A free block is split when the rest is at least `round_bytes` (small
  // pool) or more than `small_limit_bytes` (large pool). The allocator
  // rounds round_bytes up to a multiple of 512 and keeps the limits within
  // their segments.
  int64_t small_limit_bytes = int64_t{1} << 20;
  int64_t small_segment_bytes = int64_t{2} << 20;
  int64_t medium_limit_bytes = int64_t{10} << 20;
  int64_t medium_segment_bytes = int64_t{20} << 20;
  int64_t large_round_bytes = int64_t{2} << 20;
};

// A DeviceAllocator over a DeviceMemorySource that caches freed blocks.
//
// Reuse is ordered by stream without events: a block freed by a session is
// cached under that session (its owner) while the session's stream lives, and
// only that session reuses it (its stream runs its work in order, so the new
// use starts after the old one ends). Once the owner is detached (its stream
// synchronized and destroyed), its cached blocks serve any session. A block
// handed to a session other than the one whose bytes it may hold is zeroed
// first (DeviceAllocator::Allocate's promise), as is a block from a new
// segment. An allocation the source refuses for lack of room gives back every
// wholly free segment (after synchronizing the device) and retries once.
//
// Free blocks are cached per owner (the key "anyone" for detached owners,
// owners never attached and fresh segments), best fit by (key, size,
// address); a freed block merges with the free neighbours of its segment
// cached under the same key, and a detached owner's blocks with those of
// "anyone". A new segment is zeroed whole for the owner that maps it (its
// bytes may be anyone's); after that a block whose bytes may be of another
// session (or of several, after a merge) is zeroed whole before it is
// handed out, and one that holds only zeros is handed out as it is.
//
// Thread-safe: one lock, held for the bookkeeping and the source's calls.
class CachingAllocator final : public DeviceAllocator {
 public:
  explicit CachingAllocator(std::unique_ptr<DeviceMemorySource> source, CachingAllocatorOptions options = {});
  ~CachingAllocator() override;  // unmaps every segment (every storage must be gone)

  Device device() const override;
  absl::Status CheckCapacity(int64_t nbytes) const override;
  absl::StatusOr<Block> Allocate(int64_t nbytes, bool zero_fill, uint64_t owner) override;
  void Free(const Block& block, int64_t nbytes, uint64_t owner) override;
  // Bytes of every segment mapped (live blocks, their rounding, cached
  // blocks): PyTorch's memory_reserved.
  int64_t reserved_bytes() const override;

  // `owner`'s stream on this device exists: blocks it frees are cached for it
  // alone until DetachOwner. Attaching twice is the same as once.
  void AttachOwner(uint64_t owner);
  // `owner`'s stream is synchronized and gone: its cached blocks, and those it
  // frees from now on, serve anyone.
  void DetachOwner(uint64_t owner);
  // Synchronizes the device and unmaps every segment no live block uses
  // (PyTorch's empty_cache). Returns the bytes given back; 0 when the device
  // failed to synchronize (nothing is unmapped then).
  int64_t EmptyCache();

  struct Stats {
    int64_t segments = 0;          // mapped now
    int64_t reserved_bytes = 0;    // their bytes
    int64_t cached_bytes = 0;      // bytes of free blocks in them
    int64_t allocations = 0;       // Allocate calls that succeeded
    int64_t maps = 0;              // DeviceMemorySource::Map calls that succeeded
    int64_t unmaps = 0;
    int64_t zero_fills = 0;        // Zero calls (new segments and blocks zeroed)
    int64_t retries = 0;           // allocations retried after giving back the cache
  };
  Stats stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tensord::runtime

#endif  // TENSORD_RUNTIME_CACHING_ALLOCATOR_H_
