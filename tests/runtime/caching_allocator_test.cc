// The caching allocator (runtime/caching_allocator.h) on host memory: a
// DeviceMemorySource that records its calls, fills fresh segments with
// garbage (as a device's memory is) and can be told to run out of room.
// Reuse by owner, zeroing, splitting and merging, the segment sizes, the
// retry after giving the cache back, EmptyCache, reserved bytes, threads;
// then through MemoryAccount, and through the test device's backend, whose
// streams attach and detach their session.
#include "tensord/runtime/caching_allocator.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensord/backends/cpu/cpu_backend.h"
#include "tensord/backends/test_device/test_device_backend.h"
#include "tensord/meta/errors.h"
#include "tensord/runtime/backend.h"
#include "tensord/runtime/dispatcher.h"
#include "tensord/runtime/memory.h"

namespace tensord::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kKiB = int64_t{1} << 10;
constexpr int64_t kMiB = int64_t{1} << 20;
constexpr Device kDev{DeviceType::kPrivateUse1, 0};
constexpr unsigned char kGarbage = 0xAB;  // what a fresh segment holds

// What a RecordingSource saw; the test keeps it after the allocator took the source.
struct SourceLog {
  std::vector<size_t> maps;    // sizes, in order
  std::vector<size_t> unmaps;  // sizes, in order
  struct ZeroCall {
    char* p;
    size_t n;
    uint64_t owner;
  };
  std::vector<ZeroCall> zeros;
  int synchronizes = 0;
  int64_t mapped_now = 0;
  // Map refuses (ResourceExhausted) what would take more than this mapped at once.
  int64_t room = INT64_MAX;
  bool fail_zero = false;
};

class RecordingSource final : public DeviceMemorySource {
 public:
  RecordingSource(std::shared_ptr<SourceLog> log, int64_t total) : log_(std::move(log)), total_(total) {}
  Device device() const override { return kDev; }
  int64_t total_bytes() const override { return total_; }
  absl::StatusOr<char*> Map(size_t nbytes) override {
    EXPECT_GT(nbytes, 0u);
    EXPECT_EQ(nbytes % 512, 0u);
    if (log_->mapped_now + static_cast<int64_t>(nbytes) > log_->room) return OutOfMemoryErr("test: out of memory");
    void* p = nullptr;
    if (posix_memalign(&p, 512, nbytes) != 0) return InternalErr("posix_memalign failed");
    std::memset(p, kGarbage, nbytes);
    log_->maps.push_back(nbytes);
    log_->mapped_now += static_cast<int64_t>(nbytes);
    return static_cast<char*>(p);
  }
  void Unmap(char* base, size_t nbytes) override {
    log_->unmaps.push_back(nbytes);
    log_->mapped_now -= static_cast<int64_t>(nbytes);
    std::free(base);
  }
  absl::Status Zero(char* p, size_t n, uint64_t owner) override {
    if (log_->fail_zero) return InternalErr("test: the device failed");
    log_->zeros.push_back({p, n, owner});
    std::memset(p, 0, n);
    return absl::OkStatus();
  }
  absl::Status Synchronize() override {
    ++log_->synchronizes;
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<SourceLog> log_;
  const int64_t total_;
};

bool AllAre(const char* p, size_t n, unsigned char v) {
  return std::all_of(p, p + n, [v](char c) { return static_cast<unsigned char>(c) == v; });
}

class CachingAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override { Make(); }
  void Make(CachingAllocatorOptions options = {}, int64_t total = int64_t{1} << 30) {
    log_ = std::make_shared<SourceLog>();
    alloc_ = std::make_shared<CachingAllocator>(std::make_unique<RecordingSource>(log_, total), options);
  }
  DeviceAllocator::Block Get(int64_t nbytes, uint64_t owner, bool zero_fill = false) {
    absl::StatusOr<DeviceAllocator::Block> b = alloc_->Allocate(nbytes, zero_fill, owner);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *b : DeviceAllocator::Block{};
  }
  void Put(const DeviceAllocator::Block& b, int64_t nbytes, uint64_t owner) { alloc_->Free(b, nbytes, owner); }

  std::shared_ptr<SourceLog> log_;
  std::shared_ptr<CachingAllocator> alloc_;
  static constexpr uint64_t kA = 101, kB = 102, kC = 103;
};

TEST_F(CachingAllocatorTest, TheSameOwnerReusesItsBlockWithoutMappingOrZeroing) {
  alloc_->AttachOwner(kA);
  DeviceAllocator::Block a = Get(1000, kA);
  ASSERT_NE(a.data, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data) % DeviceAllocator::kAlignment, 0u);
  EXPECT_EQ(a.reserved, 1024u);
  EXPECT_THAT(log_->maps, ElementsAre(2 * kMiB));  // the small pool's segment
  // A fresh segment's bytes may be anyone's: zeroed whole, for its owner.
  ASSERT_EQ(log_->zeros.size(), 1u);
  EXPECT_EQ(log_->zeros[0].p, a.data);
  EXPECT_EQ(log_->zeros[0].n, static_cast<size_t>(2 * kMiB));
  EXPECT_EQ(log_->zeros[0].owner, kA);
  EXPECT_TRUE(AllAre(a.data, 1024, 0));
  std::memset(a.data, 0x5A, 1000);
  Put(a, 1000, kA);
  EXPECT_EQ(alloc_->stats().cached_bytes, 2 * kMiB);
  DeviceAllocator::Block again = Get(900, kA);
  EXPECT_EQ(again.data, a.data);
  EXPECT_EQ(log_->maps.size(), 1u);
  EXPECT_EQ(log_->zeros.size(), 1u);          // its own bytes: left for it to overwrite
  EXPECT_TRUE(AllAre(again.data, 900, 0x5A));
  Put(again, 900, kA);
  // zero_fill is honoured even for its own bytes.
  DeviceAllocator::Block zeroed = Get(1000, kA, /*zero_fill=*/true);
  EXPECT_EQ(zeroed.data, a.data);
  EXPECT_EQ(log_->zeros.size(), 2u);
  EXPECT_TRUE(AllAre(zeroed.data, 1000, 0));
  Put(zeroed, 1000, kA);
  CachingAllocator::Stats st = alloc_->stats();
  EXPECT_EQ(st.allocations, 3);
  EXPECT_EQ(st.maps, 1);
  EXPECT_EQ(st.zero_fills, 2);
  EXPECT_EQ(st.segments, 1);
}

TEST_F(CachingAllocatorTest, AnotherAttachedOwnerNeverGetsABlockWhileItsOwnerLives) {
  alloc_->AttachOwner(kA);
  alloc_->AttachOwner(kB);
  // 12 MiB (past the medium limit): a segment of its own, nothing split off.
  DeviceAllocator::Block a = Get(12 * kMiB, kA);
  std::memset(a.data, 0x11, 12 * kMiB);
  Put(a, 12 * kMiB, kA);
  DeviceAllocator::Block b = Get(12 * kMiB, kB);
  EXPECT_NE(b.data, a.data);
  EXPECT_THAT(log_->maps, ElementsAre(12 * kMiB, 12 * kMiB));
  EXPECT_EQ(alloc_->reserved_bytes(), 24 * kMiB);
  // Once A's stream is gone, anyone may have its block, zeroed.
  alloc_->DetachOwner(kA);
  DeviceAllocator::Block c = Get(12 * kMiB, kC);  // C never attached
  EXPECT_EQ(c.data, a.data);
  EXPECT_EQ(log_->maps.size(), 2u);
  EXPECT_EQ(log_->zeros.back().p, a.data);
  EXPECT_EQ(log_->zeros.back().owner, kC);
  EXPECT_TRUE(AllAre(c.data, 12 * kMiB, 0));
  Put(b, 12 * kMiB, kB);
  Put(c, 12 * kMiB, kC);
}

TEST_F(CachingAllocatorTest, AnOwnerNeverAttachedCachesForAnyoneAndGetsItsOwnBytesBackUnzeroed) {
  DeviceAllocator::Block n = Get(12 * kMiB, kC);
  std::memset(n.data, 0x33, 12 * kMiB);
  Put(n, 12 * kMiB, kC);
  const size_t zeros = log_->zeros.size();
  DeviceAllocator::Block again = Get(12 * kMiB, kC);
  EXPECT_EQ(again.data, n.data);
  EXPECT_EQ(log_->zeros.size(), zeros);  // its own bytes
  EXPECT_TRUE(AllAre(again.data, 12 * kMiB, 0x33));
  Put(again, 12 * kMiB, kC);
  // Another owner, attached or not, takes it from "anyone", zeroed.
  alloc_->AttachOwner(kA);
  DeviceAllocator::Block a = Get(12 * kMiB, kA);
  EXPECT_EQ(a.data, n.data);
  EXPECT_EQ(log_->zeros.size(), zeros + 1);
  EXPECT_TRUE(AllAre(a.data, 12 * kMiB, 0));
  Put(a, 12 * kMiB, kA);
}

TEST_F(CachingAllocatorTest, SmallBlocksShareASegmentAndMergeWhenFreed) {
  alloc_->AttachOwner(kA);
  DeviceAllocator::Block a = Get(1000, kA);
  DeviceAllocator::Block b = Get(2000, kA);
  EXPECT_EQ(b.data, a.data + 1024);  // split off the rest of the same segment
  EXPECT_EQ(b.reserved, 2048u);
  EXPECT_THAT(log_->maps, ElementsAre(2 * kMiB));
  EXPECT_EQ(alloc_->stats().cached_bytes, 2 * kMiB - 3 * kKiB);
  Put(a, 1000, kA);
  Put(b, 2000, kA);
  // All three pieces merged again: the largest small request takes the
  // segment from its start (unmerged, it would land past the first 3 KiB).
  EXPECT_EQ(alloc_->stats().cached_bytes, 2 * kMiB);
  DeviceAllocator::Block big = Get(kMiB, kA);
  EXPECT_EQ(big.data, a.data);
  Put(big, kMiB, kA);
  // A small pool whose limit is its segment: a 2 MiB request is the whole merged segment.
  CachingAllocatorOptions o;
  o.small_limit_bytes = 2 * kMiB;
  Make(o);
  alloc_->AttachOwner(kA);
  DeviceAllocator::Block x = Get(100, kA);
  DeviceAllocator::Block y = Get(5000, kA);
  Put(x, 100, kA);
  Put(y, 5000, kA);
  DeviceAllocator::Block whole = Get(2 * kMiB - 100, kA);
  EXPECT_EQ(whole.data, x.data);
  EXPECT_EQ(whole.reserved, static_cast<size_t>(2 * kMiB));
  EXPECT_THAT(log_->maps, ElementsAre(2 * kMiB));
  Put(whole, 2 * kMiB - 100, kA);
}

TEST_F(CachingAllocatorTest, BlocksMergeOnlyUnderOneKeyAndADetachedOwnersJoinAnyones) {
  // C, never attached, maps a small segment whose rest is anyone's; A takes
  // a block of that rest.
  DeviceAllocator::Block c = Get(1000, kC);
  alloc_->AttachOwner(kA);
  alloc_->AttachOwner(kB);
  DeviceAllocator::Block a = Get(1000, kA);
  EXPECT_EQ(a.data, c.data + 1024);
  EXPECT_THAT(log_->maps, ElementsAre(2 * kMiB));
  Put(c, 1000, kC);  // anyone's
  Put(a, 1000, kA);  // A's alone: merged with neither neighbour
  // B may not take A's block, and anyone's two pieces are apart: B gets the
  // rest past A's block.
  DeviceAllocator::Block b = Get(kMiB, kB);
  EXPECT_EQ(b.data, a.data + 1024);
  Put(b, kMiB, kB);
  EXPECT_EQ(alloc_->stats().cached_bytes, 2 * kMiB);
  alloc_->DetachOwner(kA);
  alloc_->DetachOwner(kB);
  // Both detached: every piece is anyone's and one block again, whose bytes
  // are of several sessions (zeroed for whoever comes, also its last user).
  const size_t zeros = log_->zeros.size();
  DeviceAllocator::Block whole = Get(kMiB, kC);
  EXPECT_EQ(whole.data, c.data);
  EXPECT_EQ(log_->zeros.size(), zeros + 1);
  EXPECT_EQ(log_->maps.size(), 1u);
  Put(whole, kMiB, kC);
}

TEST_F(CachingAllocatorTest, LargeRequestsRoundToTheirSegmentSizesAndSplitOnlyPastTheSmallLimit) {
  alloc_->AttachOwner(kA);
  // 12 MiB + 1 (past the medium limit): a segment of its own, rounded to
  // 2 MiB; the block rounded to 512 bytes, the rest split off (over 1 MiB).
  DeviceAllocator::Block l = Get(12 * kMiB + 1, kA);
  EXPECT_EQ(l.reserved, static_cast<size_t>(12 * kMiB + 512));
  // 3 MiB + 5 (medium): does not fit what is left; a 20 MiB segment.
  DeviceAllocator::Block m = Get(3 * kMiB + 5, kA);
  EXPECT_EQ(m.reserved, static_cast<size_t>(3 * kMiB + 512));
  EXPECT_THAT(log_->maps, ElementsAre(14 * kMiB, 20 * kMiB));
  EXPECT_EQ(alloc_->reserved_bytes(), 34 * kMiB);
  // 16.5 MiB from the 17 MiB (less 512 bytes) left of the 20 MiB segment:
  // the rest (under 1 MiB) stays with the block, not split.
  DeviceAllocator::Block rest = Get(16 * kMiB + kMiB / 2, kA);
  EXPECT_EQ(rest.data, m.data + m.reserved);
  EXPECT_EQ(rest.reserved, static_cast<size_t>(20 * kMiB) - m.reserved);
  // 1.5 MiB (a large request) takes the 14 MiB segment's last 2 MiB - 512
  // whole: the half MiB left would be no large block.
  DeviceAllocator::Block tail = Get(kMiB + kMiB / 2, kA);
  EXPECT_EQ(tail.data, l.data + l.reserved);
  EXPECT_EQ(tail.reserved, static_cast<size_t>(2 * kMiB - 512));
  EXPECT_EQ(alloc_->stats().cached_bytes, 0);
  EXPECT_EQ(log_->maps.size(), 2u);
  for (auto [blk, n] : {std::pair{m, 3 * kMiB + 5}, std::pair{l, 12 * kMiB + 1}, std::pair{rest, 16 * kMiB + kMiB / 2},
                        std::pair{tail, kMiB + kMiB / 2}}) {
    Put(blk, n, kA);
  }
  EXPECT_EQ(alloc_->stats().cached_bytes, 34 * kMiB);
  // Zero bytes: a block of its own, 512 bytes, with a distinct base.
  DeviceAllocator::Block z1 = Get(0, kA), z2 = Get(0, kA);
  EXPECT_NE(z1.data, z2.data);
  EXPECT_EQ(z1.reserved, 512u);
  Put(z1, 0, kA);
  Put(z2, 0, kA);
}

TEST_F(CachingAllocatorTest, NoRoomGivesTheCacheBackAndRetriesOnceThenFails) {
  log_->room = 24 * kMiB;
  DeviceAllocator::Block a = Get(12 * kMiB, kA);
  DeviceAllocator::Block small = Get(1000, kA);  // a 2 MiB segment that stays in use
  Put(a, 12 * kMiB, kA);
  EXPECT_EQ(alloc_->reserved_bytes(), 14 * kMiB);
  // 14 MiB more does not fit next to the cached 12 MiB: it goes, and the map is retried.
  DeviceAllocator::Block b = Get(14 * kMiB, kA);
  ASSERT_NE(b.data, nullptr);
  EXPECT_THAT(log_->unmaps, ElementsAre(12 * kMiB));
  EXPECT_GE(log_->synchronizes, 1);  // before anything went back
  CachingAllocator::Stats st = alloc_->stats();
  EXPECT_EQ(st.retries, 1);
  EXPECT_EQ(st.reserved_bytes, 16 * kMiB);
  // No room even without the cache: the source's reason, with the sizes.
  absl::StatusOr<DeviceAllocator::Block> c = alloc_->Allocate(12 * kMiB, false, kA);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(c.status().message(), HasSubstr("test: out of memory"));
  EXPECT_THAT(c.status().message(), HasSubstr("a segment of 12.00 MiB"));
  EXPECT_THAT(c.status().message(), HasSubstr("16.00 MiB reserved"));
  EXPECT_EQ(alloc_->stats().retries, 2);
  EXPECT_EQ(alloc_->stats().allocations, 3);  // a, small, b
  Put(b, 14 * kMiB, kA);
  Put(small, 1000, kA);
}

TEST_F(CachingAllocatorTest, AFailedZeroingIsAnErrorAndTheMemoryGoesBack) {
  log_->fail_zero = true;
  // A new segment that cannot be zeroed is unmapped at once.
  absl::StatusOr<DeviceAllocator::Block> b = alloc_->Allocate(4096, true, kA);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(b.status().message(),
              HasSubstr("zeroing a new segment of 2.00 MiB on privateuseone:0: test: the device failed"));
  EXPECT_THAT(log_->unmaps, ElementsAre(2 * kMiB));
  EXPECT_EQ(alloc_->reserved_bytes(), 0);
  // A cached block of another session that cannot be zeroed goes back to the cache.
  log_->fail_zero = false;
  DeviceAllocator::Block c = Get(4096, kC);
  Put(c, 4096, kC);
  log_->fail_zero = true;
  b = alloc_->Allocate(4096, false, kB);
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.status().message(), HasSubstr("zeroing a block of 4.00 KiB on privateuseone:0"));
  CachingAllocator::Stats st = alloc_->stats();
  EXPECT_EQ(st.allocations, 1);
  EXPECT_EQ(st.cached_bytes, 2 * kMiB);  // whole again
  log_->fail_zero = false;
  b = alloc_->Allocate(4096, false, kB);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->data, c.data);
  Put(*b, 4096, kB);
  EXPECT_EQ(alloc_->EmptyCache(), 2 * kMiB);
}

TEST_F(CachingAllocatorTest, EmptyCacheUnmapsOnlyWhollyFreeSegmentsAndSaysHowMuch) {
  alloc_->AttachOwner(kA);
  DeviceAllocator::Block keep = Get(1000, kA);  // its 2 MiB segment stays
  DeviceAllocator::Block big = Get(12 * kMiB, kA);
  DeviceAllocator::Block medium = Get(3 * kMiB, kA);  // 20 MiB segment, in use
  Put(big, 12 * kMiB, kA);
  EXPECT_EQ(alloc_->reserved_bytes(), 34 * kMiB);
  const int syncs = log_->synchronizes;
  EXPECT_EQ(alloc_->EmptyCache(), 12 * kMiB);
  EXPECT_EQ(log_->synchronizes, syncs + 1);
  EXPECT_THAT(log_->unmaps, ElementsAre(12 * kMiB));
  EXPECT_EQ(alloc_->reserved_bytes(), 22 * kMiB);
  EXPECT_EQ(alloc_->stats().segments, 2);
  EXPECT_EQ(alloc_->EmptyCache(), 0);
  Put(medium, 3 * kMiB, kA);  // cached for A: EmptyCache takes it all the same
  Put(keep, 1000, kA);
  EXPECT_EQ(alloc_->EmptyCache(), 22 * kMiB);
  EXPECT_EQ(alloc_->reserved_bytes(), 0);
  CachingAllocator::Stats st = alloc_->stats();
  EXPECT_EQ(st.segments, 0);
  EXPECT_EQ(st.cached_bytes, 0);
  EXPECT_EQ(st.maps, 3);
  EXPECT_EQ(st.unmaps, 3);
  EXPECT_EQ(log_->mapped_now, 0);
  // A's key still works after its segments went.
  DeviceAllocator::Block again = Get(1000, kA);
  EXPECT_EQ(alloc_->reserved_bytes(), 2 * kMiB);
  Put(again, 1000, kA);
}

TEST_F(CachingAllocatorTest, CheckCapacityIsAgainstTheDevicesMemory) {
  Make({}, 64 * kMiB);
  EXPECT_TRUE(alloc_->CheckCapacity(64 * kMiB).ok());
  absl::Status s = alloc_->CheckCapacity(64 * kMiB + 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("privateuseone:0 has 64.00 MiB of memory"));
  EXPECT_FALSE(alloc_->CheckCapacity(INT64_MAX).ok());
  EXPECT_FALSE(alloc_->Allocate(INT64_MAX, false, kA).ok());
  EXPECT_TRUE(log_->maps.empty());
}

TEST_F(CachingAllocatorTest, ThreadsAllocatingAndFreingNeverShareBytesOrSeeAnotherOwners) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 2000;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const uint64_t owner = 1000 + static_cast<uint64_t>(t);
      const unsigned char mark = static_cast<unsigned char>(0x10 + t);
      std::mt19937 rng(static_cast<uint32_t>(t));
      std::vector<std::pair<DeviceAllocator::Block, int64_t>> live;
      alloc_->AttachOwner(owner);
      for (int i = 0; i < kRounds; ++i) {
        const uint32_t r = rng();
        if (live.size() < 16 && (r % 3 != 0 || live.empty())) {
          // Mostly small, some from the large pool (medium and past it).
          const int64_t n = r % 101 == 0  ? static_cast<int64_t>(10 * kMiB + r % (3 * kMiB))
                            : r % 13 == 0 ? static_cast<int64_t>(kMiB + r % (2 * kMiB))
                                          : static_cast<int64_t>(r % 70000);
          const bool zero_fill = r % 5 == 0;
          absl::StatusOr<DeviceAllocator::Block> b = alloc_->Allocate(n, zero_fill, owner);
          if (!b.ok()) {
            ++failures;
            continue;
          }
          // Zeros, or this owner's own bytes: never another's.
          const bool clean = std::all_of(b->data, b->data + n, [&](char c) {
            const auto u = static_cast<unsigned char>(c);
            return u == 0 || (!zero_fill && u == mark);
          });
          if (!clean) ++failures;
          std::memset(b->data, mark, static_cast<size_t>(n));
          live.emplace_back(*b, n);
        } else {
          const size_t k = r % live.size();
          auto [b, n] = live[k];
          if (!AllAre(b.data, static_cast<size_t>(n), mark)) ++failures;  // no one wrote over it
          alloc_->Free(b, n, owner);
          live[k] = live.back();
          live.pop_back();
        }
        if (i % 500 == 499) {
          // A session's stream going and coming back; someone emptying the cache.
          alloc_->DetachOwner(owner);
          alloc_->AttachOwner(owner);
          if (t == 0) alloc_->EmptyCache();
        }
      }
      for (auto [b, n] : live) alloc_->Free(b, n, owner);
      alloc_->DetachOwner(owner);
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  CachingAllocator::Stats st = alloc_->stats();
  EXPECT_EQ(st.cached_bytes, st.reserved_bytes);  // every block is free
  EXPECT_EQ(alloc_->EmptyCache(), st.reserved_bytes);
  EXPECT_EQ(alloc_->reserved_bytes(), 0);
  EXPECT_EQ(log_->mapped_now, 0);
  EXPECT_EQ(alloc_->stats().maps, alloc_->stats().unmaps);
}

TEST_F(CachingAllocatorTest, StoragesOfAMemoryAccountGoBackToTheCache) {
  auto account = MemoryAccount::Create(0);
  auto other = MemoryAccount::Create(0);
  alloc_->AttachOwner(account->id());
  alloc_->AttachOwner(other->id());
  std::shared_ptr<DeviceAllocator> device = alloc_;
  char* first = nullptr;
  {
    absl::StatusOr<std::shared_ptr<Storage>> s = account->Allocate(device, 5000, "empty", /*zero_fill=*/false);
    ASSERT_TRUE(s.ok()) << s.status();
    first = (*s)->data();
    EXPECT_EQ((*s)->device(), kDev);
    EXPECT_EQ(account->bytes_in_use(kDev), 5000);
    EXPECT_EQ(device->bytes_in_use(), 5000);
    EXPECT_EQ(device->reserved_bytes(), 2 * kMiB);
  }
  EXPECT_EQ(device->bytes_in_use(), 0);
  EXPECT_EQ(device->reserved_bytes(), 2 * kMiB);  // cached
  absl::StatusOr<std::shared_ptr<Storage>> again = account->Allocate(device, 4000, "empty", false);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->data(), first);
  absl::StatusOr<std::shared_ptr<Storage>> theirs = other->Allocate(device, 100, "zeros");
  ASSERT_TRUE(theirs.ok());
  // The other session has a segment of its own: the rest of the first is
  // the first session's while its stream lives.
  EXPECT_NE((*theirs)->data(), first);
  EXPECT_TRUE(AllAre((*theirs)->data(), 100, 0));
  EXPECT_EQ(alloc_->stats().maps, 2);
  // Over the device's memory: MemoryAccount's message, with the device's reason.
  absl::StatusOr<std::shared_ptr<Storage>> huge = account->Allocate(device, int64_t{2} << 30, "empty");
  ASSERT_FALSE(huge.ok());
  EXPECT_THAT(huge.status().message(), HasSubstr("empty: out of memory: tried to allocate 2.00 GiB"));
  EXPECT_THAT(huge.status().message(), HasSubstr("privateuseone:0 has 1.00 GiB of memory"));
}

// The test device's backend: a session's stream attaches it, zeroing goes on
// that stream, and the session's end (its streams gone) detaches it.
TEST(TestDeviceCachingTest, ASessionsStreamOrdersItsZeroingAndReuse) {
  auto cpu = backends::CpuBackend::Create({});
  auto test = backends::TestDeviceBackend::Create();
  ASSERT_TRUE(cpu.ok() && test.ok());
  backends::TestDeviceBackend* dev = test->get();
  Backends devices;
  devices.Add(*std::move(cpu));
  devices.Add(*std::move(test));
  CachingAllocator& alloc = dev->caching_allocator();
  auto account = MemoryAccount::Create(0);
  {
    Dispatcher d(&devices, account);
    absl::StatusOr<std::vector<Tensor>> z = d.RunOp("zeros", {Shape{1000}, ScalarType::kFloat32, kDev}, false);
    ASSERT_TRUE(z.ok()) << z.status();
    absl::StatusOr<Stream*> stream = d.streams().For(*dev);
    ASSERT_TRUE(stream.ok());
    auto* queued = dynamic_cast<backends::QueuedStream*>(*stream);
    ASSERT_NE(queued, nullptr);
    // The output's zeroing was queued on the session's stream.
    EXPECT_GE(queued->issued(), 1u);
    char* first = (*z)[0].storage->data();
    z->clear();
    CachingAllocator::Stats st = alloc.stats();
    EXPECT_EQ(st.maps, 1);
    // The session's own freed block serves its next output: no map, no zeroing.
    absl::StatusOr<std::vector<Tensor>> o = d.RunOp("ones", {Shape{1000}, ScalarType::kFloat32, kDev}, false);
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_EQ((*o)[0].storage->data(), first);
    EXPECT_EQ(alloc.stats().maps, 1);
    EXPECT_EQ(alloc.stats().zero_fills, st.zero_fills);
    absl::StatusOr<std::vector<Tensor>> back = d.RunOp("to.device", {(*o)[0], kCPU}, false);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(reinterpret_cast<const float*>((*back)[0].storage->data())[999], 1.0f);
    // A kernel that allocates its output as it runs (nonzero): the block's
    // zeroing is done before the kernel writes it, not queued after.
    absl::StatusOr<std::vector<Tensor>> nz = d.RunOp("nonzero", {(*o)[0]}, false);
    ASSERT_TRUE(nz.ok()) << nz.status();
    absl::StatusOr<std::vector<Tensor>> nz_cpu = d.RunOp("to.device", {(*nz)[0], kCPU}, false);
    ASSERT_TRUE(nz_cpu.ok()) << nz_cpu.status();
    ASSERT_EQ((*nz_cpu)[0].meta.sizes, (Shape{1000, 1}));
    const auto* idx = reinterpret_cast<const int64_t*>((*nz_cpu)[0].storage->data());
    EXPECT_EQ(idx[1], 1);
    EXPECT_EQ(idx[999], 999);
  }
  // The session's streams are gone: its cached block is anyone's, and the
  // whole cache goes back with Trim.
  EXPECT_EQ(alloc.stats().cached_bytes, alloc.reserved_bytes());
  auto later = MemoryAccount::Create(0);
  {
    Dispatcher d(&devices, later);
    absl::StatusOr<std::vector<Tensor>> e = d.RunOp("ones", {Shape{1000}, ScalarType::kFloat32, kDev}, false);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ(alloc.stats().maps, 1);  // reused, after zeroing (another session's bytes)
  }
  EXPECT_EQ(dev->Trim(), 2 * kMiB);
  EXPECT_EQ(alloc.reserved_bytes(), 0);
}

}  // namespace
}  // namespace tensord::runtime
