// tensord/wire/copy.h — copying received bytes into a large destination (a
// storage being uploaded, a fetch's buffer) with non-temporal stores, and
// copying a whole same-host transfer on several cores.
//
// A transfer's bytes arrive in small pieces that are hot in the cache (the
// kernel has just copied them out of the socket) and go to a destination of
// megabytes that nothing reads soon. memcpy of such a piece uses ordinary
// stores, which first read each destination line into the cache; the
// non-temporal stores used here write the lines without reading them. On this
// project's build machine (AMD EPYC, 2 cores) that copies 64 KiB pieces into a
// 256 MiB destination at about 21 GB/s against memcpy's 12 GB/s. glibc's
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
// CopyTransfer; each thread copies at least half of it. Measured on this
// project's build machine (2 cores, AMD EPYC): 1 MiB copies no faster on two
// cores than on one (both ~30 us), 4 MiB and up copy 1.5-2x as fast.
inline constexpr uint64_t kParallelCopyMinBytes = uint64_t{4} << 20;
// At most this many threads copy one transfer: a copy is bound by memory
// bandwidth, which a few cores already reach.
inline constexpr int kMaxCopyThreads = 8;

// Copies a whole transfer of `n` bytes between two places this process can
// reach directly (on the same-host path: a shared-memory segment and the
// caller's buffer or a tensor's storage); they must not overlap. Below
// kNonTemporalCopyMinBytes: memcpy (the bytes stay in the cache, where the
// next op reads them). From there: non-temporal stores and a fence, as
// NonTemporalCopy; and from kParallelCopyMinBytes with `threads` > 1, split
// into up to min(`threads`, kMaxCopyThreads) ranges of at least
// kParallelCopyMinBytes / 2 copied by that many OpenMP threads. One thread on
// builds without OpenMP and inside a parallel region. Returns when every byte
// is copied and visible to any thread that later synchronizes with the caller.
void CopyTransfer(char* dst, const char* src, size_t n, int threads);

// As CopyTransfer, but the ranges past the first are copied by threads
// started for this copy (the caller copies the first, and a range whose
// thread cannot be started), not by OpenMP's team; inside a parallel region
// too. For a process that may have been forked from one that used GNU
// OpenMP, before this library was even loaded (a multiprocessing worker that
// imports tensord after the parent ran torch): GNU OpenMP's threads do not
// survive fork, and a team started in such a child waits for them forever.
// pthread_atfork cannot count a fork that came before the library was loaded.
void CopyTransferOnNewThreads(char* dst, const char* src, size_t n, int threads);

// The threads CopyTransfer may use in this process: OpenMP's team size
// (OMP_NUM_THREADS, else the cores this process may run on); 1 without OpenMP.
// A caller that may run in a child forked after the parent used OpenMP must
// not start an OpenMP team there (CopyTransfer): CopyTransferOnNewThreads.
int MaxCopyThreads();

}  // namespace tensord::wire

#endif  // TENSORD_WIRE_COPY_H_
