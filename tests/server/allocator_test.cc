// The daemon's CPU allocator: per-session accounting and limits, and the
// cache of freed large blocks (reuse, zeroing, the cap, trimming), on real
// mappings. A test per property; the last one runs allocations on several
// threads (run it under `make tsan` / `make sanitize`).
#include "tensord/backends/cpu/cpu_backend.h"
#include "tensord/runtime/memory.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "raw_client.h"

namespace tensord::testing {
namespace {

using ::testing::HasSubstr;
using backends::CpuAllocator;
using backends::CpuAllocatorOptions;
using runtime::MemoryAccount;
using runtime::Storage;

constexpr int64_t kMiB = int64_t{1} << 20;

std::shared_ptr<CpuAllocator> MakeAllocator(int64_t cache_limit, absl::Duration idle = absl::ZeroDuration(),
                                            int fill = -1) {
  CpuAllocatorOptions o;
  o.cache_limit_bytes = cache_limit;
  o.idle_trim_after = idle;
  o.uninitialized_fill = fill;
  return std::make_shared<CpuAllocator>(o);
}

std::shared_ptr<Storage> Alloc(const std::shared_ptr<CpuAllocator>& on, MemoryAccount& account, int64_t nbytes,
                               bool zero_fill) {
  absl::StatusOr<std::shared_ptr<Storage>> s = account.Allocate(on, nbytes, "test", zero_fill);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

bool AllBytesAre(const Storage& s, unsigned char v) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(s.data());
  return std::all_of(p, p + s.nbytes(), [v](unsigned char b) { return b == v; });
}

TEST(CpuAllocatorTest, DefaultCapIsAGibibyteOrAnEighthOfMemory) {
  CpuAllocator a;
  EXPECT_EQ(a.cache_stats().limit_bytes,
            std::min(CpuAllocator::kDefaultCacheLimitBytes, a.physical_memory_bytes() / 8));
}

TEST(CpuAllocatorTest, AFreedLargeBlockComesBackForTheSameGranuleCount) {
  auto alloc = MakeAllocator(64 * kMiB);
  auto account = MemoryAccount::Create(0);
  std::shared_ptr<Storage> s = Alloc(alloc, *account, 3 * kMiB, false);
  char* first = s->data();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % CpuAllocator::kGranuleBytes, 0u);  // huge-page aligned
  s.reset();
  EXPECT_EQ(alloc->cache_stats().cached_bytes, 4 * kMiB);  // 3 MiB is two 2 MiB granules
  EXPECT_EQ(alloc->cache_stats().cached_blocks, 1);
  // 3.5 MiB is two granules too: the same block.
  s = Alloc(alloc, *account, 3 * kMiB + kMiB / 2, false);
  EXPECT_EQ(s->data(), first);
  EXPECT_EQ(alloc->cache_stats().hits, 1);
  EXPECT_EQ(alloc->cache_stats().misses, 1);
  EXPECT_EQ(alloc->cache_stats().cached_bytes, 0);
  // A different granule count does not take it.
  std::shared_ptr<Storage> other = Alloc(alloc, *account, 6 * kMiB, false);
  EXPECT_NE(other->data(), first);
  EXPECT_EQ(alloc->cache_stats().misses, 2);
}

TEST(CpuAllocatorTest, SmallStoragesDoNotUseTheCache) {
  auto alloc = MakeAllocator(64 * kMiB);
  auto account = MemoryAccount::Create(0);
  Alloc(alloc, *account, CpuAllocator::kMapThresholdBytes - 1, true).reset();
  EXPECT_EQ(alloc->cache_stats().cached_blocks, 0);
  EXPECT_EQ(alloc->cache_stats().misses, 0);
}

// Allocates a 4 MiB block for `account`, fills it with 0xAB and frees it
// (into the cache); returns its address.
char* FreeADirtyBlock(const std::shared_ptr<CpuAllocator>& alloc, MemoryAccount& account) {
  std::shared_ptr<Storage> s = Alloc(alloc, account, 4 * kMiB, false);
  std::memset(s->data(), 0xAB, 4 * kMiB);
  return s->data();
}

TEST(CpuAllocatorTest, ZeroFillOfAReusedDirtyBlockGivesZeros) {
  auto alloc = MakeAllocator(64 * kMiB);
  auto account = MemoryAccount::Create(0);
  char* first = FreeADirtyBlock(alloc, *account);
  std::shared_ptr<Storage> s = Alloc(alloc, *account, 4 * kMiB, /*zero_fill=*/true);
  ASSERT_EQ(s->data(), first);
  EXPECT_TRUE(AllBytesAre(*s, 0));
}

TEST(CpuAllocatorTest, WithoutZeroFillTheSameSessionGetsItsBlockAsItLeftIt) {
  auto alloc = MakeAllocator(64 * kMiB);
  auto account = MemoryAccount::Create(0);
  char* first = FreeADirtyBlock(alloc, *account);
  std::shared_ptr<Storage> s = Alloc(alloc, *account, 4 * kMiB, /*zero_fill=*/false);  // the caller overwrites it: no memset
  ASSERT_EQ(s->data(), first);
  EXPECT_TRUE(AllBytesAre(*s, 0xAB));
}

TEST(CpuAllocatorTest, AnotherSessionsBlockIsZeroedEvenWithoutZeroFill) {
  auto alloc = MakeAllocator(64 * kMiB);
  auto a = MemoryAccount::Create(0);
  auto b = MemoryAccount::Create(0);
  char* first = FreeADirtyBlock(alloc, *a);
  std::shared_ptr<Storage> s = Alloc(alloc, *b, 4 * kMiB, /*zero_fill=*/false);
  ASSERT_EQ(s->data(), first);
  EXPECT_TRUE(AllBytesAre(*s, 0));
}

TEST(CpuAllocatorTest, ASessionPrefersTheBlockItFreedItself) {
  auto alloc = MakeAllocator(64 * kMiB);
  auto a = MemoryAccount::Create(0);
  auto b = MemoryAccount::Create(0);
  std::shared_ptr<Storage> sa = Alloc(alloc, *a, 4 * kMiB, false);
  std::shared_ptr<Storage> sb = Alloc(alloc, *b, 4 * kMiB, false);
  char* pa = sa->data();
  char* pb = sb->data();
  sa.reset();
  sb.reset();  // b's block is the newer one
  sa = Alloc(alloc, *a, 4 * kMiB, false);
  EXPECT_EQ(sa->data(), pa);
  sb = Alloc(alloc, *b, 4 * kMiB, false);
  EXPECT_EQ(sb->data(), pb);
}

TEST(CpuAllocatorTest, UninitializedFillMarksBytesNobodyWrote) {
  auto alloc = MakeAllocator(64 * kMiB, absl::ZeroDuration(), 0xFF);
  auto account = MemoryAccount::Create(0);
  for (int64_t n : {int64_t{100}, 3 * kMiB}) {
    std::shared_ptr<Storage> fresh = Alloc(alloc, *account, n, false);
    EXPECT_TRUE(AllBytesAre(*fresh, 0xFF)) << n;
    std::memset(fresh->data(), 0x11, static_cast<size_t>(n));
    fresh.reset();
    std::shared_ptr<Storage> again = Alloc(alloc, *account, n, false);  // reused (the large one) or not
    EXPECT_TRUE(AllBytesAre(*again, 0xFF)) << n;
    again.reset();
    std::shared_ptr<Storage> zeroed = Alloc(alloc, *account, n, true);  // zero_fill still means zeros
    EXPECT_TRUE(AllBytesAre(*zeroed, 0)) << n;
  }
}

TEST(CpuAllocatorTest, TheCapIsRespectedByEvictingTheOldestBlocks) {
  auto alloc = MakeAllocator(8 * kMiB);
  auto account = MemoryAccount::Create(0);
  std::vector<std::shared_ptr<Storage>> live;
  std::vector<char*> addr;
  for (int i = 0; i < 4; ++i) {
    live.push_back(Alloc(alloc, *account, 4 * kMiB, false));
    addr.push_back(live.back()->data());
  }
  for (auto& s : live) s.reset();  // freed in order 0, 1, 2, 3
  CpuAllocator::CacheStats st = alloc->cache_stats();
  EXPECT_EQ(st.cached_bytes, 8 * kMiB);
  EXPECT_EQ(st.cached_blocks, 2);
  EXPECT_EQ(st.trimmed_bytes, 8 * kMiB);  // blocks 0 and 1 were unmapped
  // The two newest stay: the next two allocations get blocks 3 and 2.
  std::shared_ptr<Storage> x = Alloc(alloc, *account, 4 * kMiB, false);
  std::shared_ptr<Storage> y = Alloc(alloc, *account, 4 * kMiB, false);
  EXPECT_EQ(x->data(), addr[3]);
  EXPECT_EQ(y->data(), addr[2]);
  // A block larger than the cap is unmapped at once.
  Alloc(alloc, *account, 10 * kMiB, false).reset();
  EXPECT_EQ(alloc->cache_stats().cached_bytes, 0);
}

TEST(CpuAllocatorTest, ACapOfZeroTurnsTheCacheOff) {
  auto alloc = MakeAllocator(0);
  auto account = MemoryAccount::Create(0);
  Alloc(alloc, *account, 4 * kMiB, false).reset();
  Alloc(alloc, *account, 4 * kMiB, false).reset();
  CpuAllocator::CacheStats st = alloc->cache_stats();
  EXPECT_EQ(st.limit_bytes, 0);
  EXPECT_EQ(st.cached_bytes, 0);
  EXPECT_EQ(st.hits, 0);
  EXPECT_EQ(st.misses, 2);
}

TEST(CpuAllocatorTest, TrimUnmapsEveryCachedBlock) {
  auto alloc = MakeAllocator(64 * kMiB);
  auto account = MemoryAccount::Create(0);
  std::shared_ptr<Storage> a = Alloc(alloc, *account, 4 * kMiB, false);
  std::shared_ptr<Storage> b = Alloc(alloc, *account, 8 * kMiB, false);
  a.reset();
  b.reset();
  EXPECT_EQ(alloc->cache_stats().cached_bytes, 12 * kMiB);
  EXPECT_EQ(alloc->Trim(), 12 * kMiB);
  EXPECT_EQ(alloc->cache_stats().cached_bytes, 0);
  EXPECT_EQ(alloc->cache_stats().cached_blocks, 0);
  EXPECT_EQ(alloc->Trim(), 0);
}

TEST(CpuAllocatorTest, AnIdleCacheIsEmptiedByTime) {
  auto alloc = MakeAllocator(64 * kMiB, absl::Milliseconds(20));
  auto account = MemoryAccount::Create(0);
  Alloc(alloc, *account, 4 * kMiB, false).reset();
  // Not a speed check: the trimmer runs 20 ms after the last activity; allow
  // a loaded machine plenty of time to schedule it.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (alloc->cache_stats().cached_bytes != 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(alloc->cache_stats().cached_bytes, 0);
  EXPECT_EQ(alloc->cache_stats().trimmed_bytes, 4 * kMiB);
  // It keeps working after a trim, and trims again.
  Alloc(alloc, *account, 4 * kMiB, false).reset();
  while (alloc->cache_stats().cached_bytes != 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(alloc->cache_stats().trimmed_bytes, 8 * kMiB);
}

TEST(CpuAllocatorTest, AccountingCountsRequestedBytesAndCachedBytesBelongToNoSession) {
  auto alloc = MakeAllocator(64 * kMiB);
  auto account = MemoryAccount::Create(0);
  std::shared_ptr<Storage> s = Alloc(alloc, *account, 3 * kMiB + 5, false);
  EXPECT_EQ(account->bytes_in_use(), 3 * kMiB + 5);
  EXPECT_EQ(alloc->bytes_in_use(), 3 * kMiB + 5);
  s.reset();
  EXPECT_EQ(account->bytes_in_use(), 0);
  EXPECT_EQ(alloc->bytes_in_use(), 0);
  EXPECT_EQ(account->peak_bytes(), 3 * kMiB + 5);
  EXPECT_EQ(alloc->cache_stats().cached_bytes, 4 * kMiB);
}

TEST(CpuAllocatorTest, LimitsStillApplyWhenTheCacheHoldsAFittingBlock) {
  auto alloc = MakeAllocator(64 * kMiB);
  auto roomy = MemoryAccount::Create(0);
  Alloc(alloc, *roomy, 4 * kMiB, false).reset();
  auto tight = MemoryAccount::Create(3 * kMiB);
  absl::StatusOr<std::shared_ptr<Storage>> s = tight->Allocate(alloc, 4 * kMiB, "add", false);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.status().message(), HasSubstr("add: out of memory: tried to allocate 4.00 MiB (4194304 bytes)"));
  EXPECT_THAT(s.status().message(), HasSubstr("of its 3.00 MiB limit"));
  EXPECT_EQ(tight->bytes_in_use(), 0);
  EXPECT_EQ(alloc->cache_stats().cached_blocks, 1);  // untouched
  // Larger than the machine: refused before the cache is looked at.
  s = roomy->Allocate(alloc, alloc->physical_memory_bytes() + 1, "empty");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("of physical memory"));
}

TEST(CpuAllocatorTest, ThreadsAllocateAndFreeConcurrently) {
  auto alloc = MakeAllocator(16 * kMiB, absl::Milliseconds(1));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([alloc, t] {
      auto account = MemoryAccount::Create(0);
      for (int i = 0; i < 50; ++i) {
        const int64_t n = (2 + (i + t) % 3) * kMiB;
        absl::StatusOr<std::shared_ptr<Storage>> s = account->Allocate(alloc, n, "test", i % 2 == 0);
        ASSERT_TRUE(s.ok()) << s.status();
        (*s)->data()[0] = static_cast<char>(i);
        (*s)->data()[n - 1] = static_cast<char>(t);
        if (i % 7 == 0) alloc->Trim();
      }
      EXPECT_EQ(account->bytes_in_use(), 0);
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(alloc->bytes_in_use(), 0);
  EXPECT_LE(alloc->cache_stats().cached_bytes, 16 * kMiB);
}

// The daemon: a closed session's large storages are unmapped with it.
class AllocatorServiceTest : public DaemonFixture {};

TEST_F(AllocatorServiceTest, ClosingASessionTrimsTheCache) {
  RawSession s(stub_.get());
  const int64_t n = 3 * kMiB / 4;  // 3 MiB of float32
  s.Upload<float>(1, {n}, ScalarType::kFloat32, std::vector<float>(n, 1.0f));
  s.Send(Call(1, "mul.Scalar", {T(1), F(2.0)}, {2}));
  EXPECT_TRUE(s.Sync().empty());
  EXPECT_EQ(daemon_->service().bytes_in_use(), 6 * kMiB);
  EXPECT_THAT(s.FetchValues<float>(2), ::testing::Each(2.0f));
  EXPECT_TRUE(s.Close().ok());
  EXPECT_EQ(daemon_->service().bytes_in_use(), 0);
  const CpuAllocator::CacheStats st = daemon_->service().cpu_cache_stats();
  EXPECT_EQ(st.cached_bytes, 0);
  EXPECT_GE(st.trimmed_bytes, 8 * kMiB);  // both storages (two granules each) were cached, then unmapped
}

}  // namespace
}  // namespace tensord::testing
