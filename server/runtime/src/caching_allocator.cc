// The caching allocator's algorithm, device-neutral (see caching_allocator.h):
// two pools of free blocks, each a std::set ordered by (cache key, size,
// address) so that the best fit for a key is one lower_bound away; blocks of
// one segment linked in address order, so that a freed block merges with its
// free neighbours; segments mapped and unmapped through the
// DeviceMemorySource, under one mutex.
#include "tensord/runtime/caching_allocator.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tensord/meta/errors.h"
#include "tensord/runtime/log.h"

namespace tensord::runtime {

namespace {

// The cache key of free blocks any session may take: those of detached
// owners, of owners never attached, and of fresh segments. Accounts' ids
// start at 1.
constexpr uint64_t kAnyone = 0;
// What a block's bytes_of says when its bytes may be of several sessions.
constexpr uint64_t kUnknownBytes = ~uint64_t{0};
// ... and when it holds zeros, written when its segment was mapped and never
// handed out since: anyone may have it as it is.
constexpr uint64_t kZeroBytes = ~uint64_t{0} - 1;

// Whose bytes a block merged of blocks holding `a`'s and `b`'s holds.
uint64_t MergedBytes(uint64_t a, uint64_t b) {
  if (a == b || b == kZeroBytes) return a;
  if (a == kZeroBytes) return b;
  return kUnknownBytes;
}

struct Segment;

// A piece of a segment: handed out (allocated) or cached (in a pool).
struct BlockRec {
  Segment* segment = nullptr;
  char* ptr = nullptr;
  size_t size = 0;
  bool allocated = false;
  // While free: the owner whose stream alone may reuse it, or kAnyone.
  uint64_t key = kAnyone;
  // The session whose bytes it may hold (its last user), kUnknownBytes or
  // kZeroBytes.
  uint64_t bytes_of = kUnknownBytes;
  BlockRec* prev = nullptr;  // the neighbours in the segment, by address
  BlockRec* next = nullptr;
};

// One Map call's memory.
struct Segment {
  char* base = nullptr;
  size_t size = 0;
  bool small = false;      // which pool its free blocks go to
  int64_t live = 0;        // blocks handed out now
  BlockRec* head = nullptr;  // the block at `base`
};

struct ByKeySizeAddress {
  bool operator()(const BlockRec* a, const BlockRec* b) const {
    return std::make_tuple(a->key, a->size, reinterpret_cast<uintptr_t>(a->ptr)) <
           std::make_tuple(b->key, b->size, reinterpret_cast<uintptr_t>(b->ptr));
  }
};

using Pool = std::set<BlockRec*, ByKeySizeAddress>;

// x rounded up to a multiple of m (> 0); x + m must not overflow.
int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

CachingAllocatorOptions Sanitized(CachingAllocatorOptions o) {
  // Map takes multiples of 512; every block's base stays aligned to
  // round_bytes (a multiple of 512, so of kAlignment).
  o.round_bytes = RoundUp(std::max<int64_t>(o.round_bytes, 512), 512);
  o.small_segment_bytes = RoundUp(std::max(o.small_segment_bytes, o.round_bytes), o.round_bytes);
  o.small_limit_bytes = std::clamp<int64_t>(o.small_limit_bytes, 0, o.small_segment_bytes);
  o.large_round_bytes = RoundUp(std::max(o.large_round_bytes, o.round_bytes), o.round_bytes);
  o.medium_segment_bytes = RoundUp(std::max(o.medium_segment_bytes, o.round_bytes), o.round_bytes);
  o.medium_limit_bytes = std::clamp<int64_t>(o.medium_limit_bytes, o.small_limit_bytes, o.medium_segment_bytes);
  return o;
}

}  // namespace

class CachingAllocator::Impl {
 public:
  Impl(std::unique_ptr<DeviceMemorySource> source, const CachingAllocatorOptions& options)
      : source_(std::move(source)),
        o_(Sanitized(options)),
        device_(source_->device()),
        total_bytes_(source_->total_bytes()) {}

  ~Impl() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!segments_.empty()) (void)source_->Synchronize();  // nothing of any stream may still use them
    for (auto& [base, seg] : segments_) {
      if (seg->live > 0) {
        Log(LogLevel::kError, device_.ToString(), " caching allocator destroyed with ", seg->live,
            " blocks still in use");
      }
      DeleteBlocks(*seg);
      source_->Unmap(seg->base, seg->size);
    }
  }

  Device device() const { return device_; }

  // The size of the block serving `nbytes` (>= 0, at most total_bytes()).
  int64_t BlockSize(int64_t nbytes) const { return nbytes == 0 ? o_.round_bytes : RoundUp(nbytes, o_.round_bytes); }
  // The size of the segment to map for a block of `size`.
  int64_t SegmentSize(int64_t size) const {
    if (size <= o_.small_limit_bytes) return o_.small_segment_bytes;
    if (size <= o_.medium_limit_bytes) return std::max(o_.medium_segment_bytes, size);
    return RoundUp(size, o_.large_round_bytes);
  }

  absl::Status CheckCapacity(int64_t nbytes) const {
    const int64_t total = total_bytes_;
    if (nbytes >= 0 && nbytes <= total && BlockSize(nbytes) <= total) return absl::OkStatus();
    return OutOfMemoryErr(absl::StrCat(device_.ToString(), " has ", FormatBytes(total), " of memory (", total,
                                       " bytes)"));
  }

  absl::StatusOr<Block> Allocate(int64_t nbytes, bool zero_fill, uint64_t owner) {
    if (nbytes < 0) return InternalErr(absl::StrCat("allocating ", nbytes, " bytes on ", device_.ToString()));
    TD_RETURN_IF_ERROR(CheckCapacity(nbytes));  // also keeps the rounding below from overflowing
    const int64_t size = BlockSize(nbytes);
    const bool small = size <= o_.small_limit_bytes;
    Pool& pool = small ? small_ : large_;

    std::lock_guard<std::mutex> lock(mu_);
    const bool attached = attached_.count(owner) > 0;
    BlockRec* b = attached ? TakeBestFit(pool, owner, size) : nullptr;
    if (b == nullptr) b = TakeBestFit(pool, kAnyone, size);
    if (b == nullptr) {
      TD_ASSIGN_OR_RETURN(b, MapSegment(size, small, owner, attached ? owner : kAnyone));
    }
    b = Split(pool, b, static_cast<size_t>(size), small);
    b->allocated = true;
    ++b->segment->live;
    // Bytes of another session (or of several) never reach this one,
    // whatever the caller promised; its own are left when it will write
    // them, and zeros as they are.
    if (b->bytes_of != kZeroBytes && (zero_fill || b->bytes_of != owner)) {
      if (absl::Status z = source_->Zero(b->ptr, b->size, owner); !z.ok()) {
        const std::string what =
            absl::StrCat("zeroing a block of ", FormatBytes(b->size), " on ", device_.ToString(), ": ");
        Release(b, b->key);  // back where it came from, its bytes as they were
        return WithContext(z, what);
      }
      ++stats_.zero_fills;
    }
    b->bytes_of = owner;
    ++stats_.allocations;
    Block out;
    out.data = b->ptr;
    out.context = b;
    out.reserved = b->size;
    return out;
  }

  void Free(const Block& block, uint64_t owner) {
    auto* b = static_cast<BlockRec*>(block.context);
    if (b == nullptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    // Its owner's stream may still use it: only that stream reuses it, in
    // order after that use, until the owner is detached.
    Release(b, attached_.count(owner) > 0 ? owner : kAnyone);
  }

  int64_t reserved_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_.reserved_bytes;
  }

  void AttachOwner(uint64_t owner) {
    if (owner == kAnyone) return;
    std::lock_guard<std::mutex> lock(mu_);
    attached_.insert(owner);
  }

  void DetachOwner(uint64_t owner) {
    if (owner == kAnyone) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (attached_.erase(owner) == 0) return;
    for (Pool* pool : {&small_, &large_}) {
      // The owner's blocks are one range of the pool (ordered by key first).
      BlockRec probe;
      probe.key = owner;
      auto first = pool->lower_bound(&probe);
      auto last = first;
      while (last != pool->end() && (*last)->key == owner) ++last;
      std::vector<BlockRec*> blocks(first, last);
      pool->erase(first, last);
      for (BlockRec* b : blocks) stats_.cached_bytes -= static_cast<int64_t>(b->size);
      // No two of them are neighbours (a free block merges with free
      // neighbours of its key), so each merge below absorbs only blocks
      // already keyed anyone.
      for (BlockRec* b : blocks) Insert(*pool, MergeNeighbours(*pool, b, kAnyone));
    }
  }

  int64_t EmptyCache() {
    std::lock_guard<std::mutex> lock(mu_);
    if (absl::Status s = source_->Synchronize(); !s.ok()) {
      Log(LogLevel::kWarning, device_.ToString(), ": the cache was not emptied: ", s.message());
      return 0;
    }
    return UnmapFreeSegments();
  }

  Stats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  // The smallest free block of `key` in `pool` of at least `size` bytes,
  // taken out of the pool; nullptr when none.
  BlockRec* TakeBestFit(Pool& pool, uint64_t key, int64_t size) {
    BlockRec probe;
    probe.key = key;
    probe.size = static_cast<size_t>(size);
    auto it = pool.lower_bound(&probe);
    if (it == pool.end() || (*it)->key != key) return nullptr;
    BlockRec* b = *it;
    pool.erase(it);
    stats_.cached_bytes -= static_cast<int64_t>(b->size);
    return b;
  }

  void Insert(Pool& pool, BlockRec* b) {
    pool.insert(b);
    stats_.cached_bytes += static_cast<int64_t>(b->size);
  }

  // A new segment for a block of `size`, zeroed whole for `owner` (a fresh
  // segment may hold anyone's bytes; zeroed once, whatever is split off it
  // needs no zeroing until it is used), as one free block keyed `key` (what
  // is split off it stays with the owner that asked for it, as PyTorch keeps
  // it with the stream, so that it merges back whole when the owner frees).
  // When the device has no room: the cache goes back and the map is retried
  // once.
  absl::StatusOr<BlockRec*> MapSegment(int64_t size, bool small, uint64_t owner, uint64_t key) {
    const int64_t seg_bytes = SegmentSize(size);
    absl::StatusOr<char*> p = source_->Map(static_cast<size_t>(seg_bytes));
    if (!p.ok() && absl::IsResourceExhausted(p.status())) {
      ++stats_.retries;
      if (absl::Status s = source_->Synchronize(); !s.ok()) {
        return WithContext(s, absl::StrCat(device_.ToString(), ": synchronizing to give back cached memory"));
      }
      const int64_t freed = UnmapFreeSegments();
      Log(LogLevel::kDebug, device_.ToString(), ": no room for a segment of ", FormatBytes(seg_bytes),
          "; gave back ", FormatBytes(freed), " of cached segments and retried");
      p = source_->Map(static_cast<size_t>(seg_bytes));
    }
    if (!p.ok()) {
      std::string why = absl::StrCat(p.status().message(), " (mapping a segment of ", FormatBytes(seg_bytes), " for a ",
                                     FormatBytes(size), " block; ", device_.ToString(), " has ",
                                     FormatBytes(stats_.reserved_bytes), " reserved by this daemon, ",
                                     FormatBytes(stats_.cached_bytes), " of it free in partly used segments)");
      return absl::Status(p.status().code(), why);
    }
    ++stats_.maps;
    if (absl::Status z = source_->Zero(*p, static_cast<size_t>(seg_bytes), owner); !z.ok()) {
      (void)source_->Synchronize();  // the device failed: this only keeps Unmap's contract
      source_->Unmap(*p, static_cast<size_t>(seg_bytes));
      ++stats_.unmaps;
      return WithContext(z, absl::StrCat("zeroing a new segment of ", FormatBytes(seg_bytes), " on ",
                                         device_.ToString(), ": "));
    }
    ++stats_.zero_fills;
    auto seg = std::make_unique<Segment>();
    seg->base = *p;
    seg->size = static_cast<size_t>(seg_bytes);
    seg->small = small;
    auto* b = new BlockRec;
    b->segment = seg.get();
    b->ptr = seg->base;
    b->size = seg->size;
    b->key = key;
    b->bytes_of = kZeroBytes;
    seg->head = b;
    segments_.emplace(seg->base, std::move(seg));
    ++stats_.segments;
    stats_.reserved_bytes += seg_bytes;
    return b;
  }

  // `b` (out of any pool) cut to `size` bytes when the rest is worth a block
  // of its own: the rest, keyed and dirty as `b` was, goes to `pool`.
  BlockRec* Split(Pool& pool, BlockRec* b, size_t size, bool small) {
    const size_t rest = b->size - size;
    const bool worth = small ? rest >= static_cast<size_t>(o_.round_bytes)
                             : rest > static_cast<size_t>(o_.small_limit_bytes);
    if (!worth) return b;
    auto* r = new BlockRec;
    r->segment = b->segment;
    r->ptr = b->ptr + size;
    r->size = rest;
    r->key = b->key;
    r->bytes_of = b->bytes_of;
    r->prev = b;
    r->next = b->next;
    if (b->next != nullptr) b->next->prev = r;
    b->next = r;
    b->size = size;
    Insert(pool, r);
    return b;
  }

  // Puts allocated block `b` back into its pool under `key`, merged with its
  // free neighbours of that key.
  void Release(BlockRec* b, uint64_t key) {
    Segment& seg = *b->segment;
    Pool& pool = seg.small ? small_ : large_;
    b->allocated = false;
    --seg.live;
    Insert(pool, MergeNeighbours(pool, b, key));
  }

  // `b` (free, out of any pool) keyed `key` and merged with the free
  // neighbours of that key, which leave `pool`. Returns the merged block.
  BlockRec* MergeNeighbours(Pool& pool, BlockRec* b, uint64_t key) {
    b->key = key;
    for (BlockRec* n : {b->prev, b->next}) {
      if (n == nullptr || n->allocated || n->key != key) continue;
      pool.erase(n);
      stats_.cached_bytes -= static_cast<int64_t>(n->size);
      if (n == b->prev) {
        b->ptr = n->ptr;
        b->prev = n->prev;
        if (n->prev != nullptr) n->prev->next = b;
        if (n->segment->head == n) n->segment->head = b;
      } else {
        b->next = n->next;
        if (n->next != nullptr) n->next->prev = b;
      }
      b->size += n->size;
      // Merged bytes of two sessions: the next user gets them zeroed.
      b->bytes_of = MergedBytes(b->bytes_of, n->bytes_of);
      delete n;
    }
    return b;
  }

  // Unmaps every segment no live block uses (after the source synchronized);
  // returns their bytes.
  int64_t UnmapFreeSegments() {
    int64_t bytes = 0;
    for (auto it = segments_.begin(); it != segments_.end();) {
      Segment& seg = *it->second;
      if (seg.live > 0) {
        ++it;
        continue;
      }
      Pool& pool = seg.small ? small_ : large_;
      for (BlockRec* b = seg.head; b != nullptr; b = b->next) {
        pool.erase(b);
        stats_.cached_bytes -= static_cast<int64_t>(b->size);
      }
      DeleteBlocks(seg);
      source_->Unmap(seg.base, seg.size);
      bytes += static_cast<int64_t>(seg.size);
      stats_.reserved_bytes -= static_cast<int64_t>(seg.size);
      --stats_.segments;
      ++stats_.unmaps;
      it = segments_.erase(it);
    }
    return bytes;
  }

  static void DeleteBlocks(Segment& seg) {
    for (BlockRec* b = seg.head; b != nullptr;) {
      BlockRec* next = b->next;
      delete b;
      b = next;
    }
    seg.head = nullptr;
  }

  const std::unique_ptr<DeviceMemorySource> source_;
  const CachingAllocatorOptions o_;
  const Device device_;
  const int64_t total_bytes_;

  // A std::mutex rather than absl::Mutex: ThreadSanitizer sees through
  // pthread mutexes, not through Debian's uninstrumented abseil.
  mutable std::mutex mu_;  // guards everything below
  Pool small_;
  Pool large_;
  std::unordered_set<uint64_t> attached_;  // owners whose stream lives
  std::map<char*, std::unique_ptr<Segment>> segments_;
  Stats stats_;
};

CachingAllocator::CachingAllocator(std::unique_ptr<DeviceMemorySource> source, CachingAllocatorOptions options)
    : impl_(std::make_unique<Impl>(std::move(source), options)) {}

CachingAllocator::~CachingAllocator() = default;

Device CachingAllocator::device() const { return impl_->device(); }

absl::Status CachingAllocator::CheckCapacity(int64_t nbytes) const { return impl_->CheckCapacity(nbytes); }

absl::StatusOr<DeviceAllocator::Block> CachingAllocator::Allocate(int64_t nbytes, bool zero_fill, uint64_t owner) {
  return impl_->Allocate(nbytes, zero_fill, owner);
}

void CachingAllocator::Free(const Block& block, int64_t /*nbytes*/, uint64_t owner) { impl_->Free(block, owner); }

int64_t CachingAllocator::reserved_bytes() const { return impl_->reserved_bytes(); }

void CachingAllocator::AttachOwner(uint64_t owner) { impl_->AttachOwner(owner); }

void CachingAllocator::DetachOwner(uint64_t owner) { impl_->DetachOwner(owner); }

int64_t CachingAllocator::EmptyCache() { return impl_->EmptyCache(); }

CachingAllocator::Stats CachingAllocator::stats() const { return impl_->stats(); }

}  // namespace tensord::runtime
