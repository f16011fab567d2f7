// Buffers for fetched tensors (a HostData's bytes), with a cache of freed
// large ones.
#ifndef TENSORD_CLIENT_FETCH_BUFFERS_H_
#define TENSORD_CLIENT_FETCH_BUFFERS_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/time/time.h"

namespace tensord::client::internal {

// Buffers of at least this many bytes are mapped 2 MiB-aligned with
// MADV_HUGEPAGE and, once freed, kept in the cache for the next fetch of
// the same rounded size.
inline constexpr size_t kLargeFetchBufferBytes = size_t{2} << 20;

// A cached buffer unused this long is unmapped (at the next fetch or free of
// a large buffer; and every cached buffer when a session closes).
inline constexpr absl::Duration kFetchBufferCacheIdle = absl::Seconds(5);

// The most bytes the cache keeps: 1 GiB, or a sixteenth of the machine's
// memory if that is less.
size_t FetchBufferCacheLimit();

// The machine's physical memory in bytes (0 when the system does not say).
// A fetch larger than this cannot be held, and is refused before it is
// sent: the daemon would otherwise stream all of it to a client that gave up.
uint64_t PhysicalMemoryBytes();

// A fetch's buffer of `n` bytes, not zero-filled (its old bytes may be an
// earlier fetch's, of this process); nullptr when there is no memory.
// Buffers of kLargeFetchBufferBytes and more come from the cache when it
// holds one of the same rounded size (2 MiB multiples), else fresh from the
// system (the kernel then zeroes each page as it is first written, which
// cost a fetch of 256 MiB about as much as copying it). Freeing the
// returned pointer's last reference, on any thread, puts a large buffer
// back in the cache (pages marked MADV_FREE, so that the kernel may take
// them back under memory pressure), unmapping the oldest cached ones when
// the cache would exceed its limit.
std::shared_ptr<char> AllocateFetchBuffer(uint64_t n);

// Unmaps every cached buffer (Session::Close calls it, as the daemon trims
// its own cache when a session closes).
void TrimFetchBufferCache();

// What the cache holds now: blocks and bytes (for tests).
struct FetchBufferCacheStats {
  size_t blocks = 0;
  size_t bytes = 0;
  uint64_t hits = 0;
};
FetchBufferCacheStats GetFetchBufferCacheStats();

}  // namespace tensord::client::internal

#endif  // TENSORD_CLIENT_FETCH_BUFFERS_H_
