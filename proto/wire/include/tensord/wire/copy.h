// tensord/wire/copy.h — copying received bytes into a large destination (a
// storage being uploaded, a fetch's buffer) with non-temporal stores, and
// copying a whole same-host transfer on several cores.
//
// A transfer's bytes arrive in small pieces that are hot in the cache (the
// kernel has just copied them out of the socket) and go to a destination of
// megabytes that nothing reads soon. memcpy of such a piece uses ordinary
// stores, which first read each destination line into the cache; the
// non-temporal stores used here write the lines without reading them, which
// saves that read of the destination (bench/RESULTS.md, figure 3). glibc's
// memcpy makes the same choice, but only for a single copy larger than a
// share of the last-level cache, which no piece is.
#ifndef TENSORD_WIRE_COPY_H_
#define TENSORD_WIRE_COPY_H_

#include <cstddef>
#include <cstdint>

namespace tensord::wire {

// Transfers of at least this many bytes in all (the whole tensor, not the
// piece) are copied with non-temporal stores; smaller ones stay in the cache
// with memcpy, where the next op reads them.
inline constexpr uint64_t kNonTemporalCopyMinBytes = uint64_t{4} << 20;

// Copies `n` bytes from `src` to `dst` (which must not overlap) with
// non-temporal stores, then a store fence, so that the bytes are visible to
// any thread that later synchronizes with this one. Any alignment and any
// `n`; the unaligned head and tail use memcpy. memcpy on targets without
// SSE2.
void NonTemporalCopy(char* dst, const char* src, size_t n);

// A piece of a transfer of `total_bytes`: NonTemporalCopy when the transfer
// is at least kNonTemporalCopyMinBytes, else memcpy.
void CopyTransferPiece(char* dst, const char* src, size_t n, uint64_t total_bytes);

// Transfers of at least this many bytes are split across threads by
// CopyTransfer. Below it a split copy was measured no faster than one
// thread (a thread started for the copy first runs tens of microseconds
// later); from it on, faster (bench/RESULTS.md, figure 3).
inline constexpr uint64_t kParallelCopyMinBytes = uint64_t{16} << 20;
// The pieces that the threads of a split copy take one at a time.
inline constexpr size_t kCopyPieceBytes = size_t{1} << 20;
// At most this many threads copy one transfer: a copy is bound by memory
// bandwidth, which a few cores already reach.
inline constexpr int kMaxCopyThreads = 8;

// Copies a whole transfer of `n` bytes between two places this process can
// reach directly (on the same-host path: a shared-memory segment and the
// caller's buffer or a tensor's storage); they must not overlap. Below
// kNonTemporalCopyMinBytes: memcpy (the bytes stay in the cache, where the
// next op reads them). From there: non-temporal stores and a fence, as
// NonTemporalCopy. From kParallelCopyMinBytes with `threads` > 1, up to
// min(`threads`, kMaxCopyThreads) - 1 threads are started for this copy, only
// onto cores idle when the caller looks (IdleCoresNow, transport/cpus.h: before its
// first piece and every few pieces after), and they and the caller take
// pieces of kCopyPieceBytes in turn until none is left. The caller never
// waits for a thread that has not started, only for pieces another thread is
// copying; a thread that starts late finds nothing to do and ends. Threads of
// their own, not OpenMP's team: GNU OpenMP's threads do not survive fork, and
// a team started in a child forked from a process that used OpenMP (torch,
// say, even before this library was loaded) waits for them forever. If no
// thread can be started, the caller copies alone. Returns when every byte is
// copied and visible to any thread that later synchronizes with the caller.
void CopyTransfer(char* dst, const char* src, size_t n, int threads);

// CopyTransfer's split copy with `helpers` threads started for it at once
// (none: one thread of non-temporal stores), whatever the size and however
// busy the machine: for tests.
void CopyWithHelpers(char* dst, const char* src, size_t n, int helpers);

// The threads CopyTransfer may use in this process: UsableCores() (transport/cpus.h:
// the cores, fewer when pinned or under a cgroup CPU quota), at most
// kMaxCopyThreads.
int MaxCopyThreads();

}  // namespace tensord::wire

#endif  // TENSORD_WIRE_COPY_H_
