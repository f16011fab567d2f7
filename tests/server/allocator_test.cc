// The daemon's CPU allocator: per-session accounting and limits (in total
// and per device: MemoryAccount's slots), the cache of freed large blocks
// (reuse, zeroing, the cap, trimming) and the reserved bytes, on real
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

// ---- per-device accounting (MemoryAccount's slots) ---------------------------

constexpr Device kDev0{DeviceType::kPrivateUse1, 0};

std::shared_ptr<CpuAllocator> AllocatorFor(Device device) {
  CpuAllocatorOptions o;
  o.cache_limit_bytes = 0;
  o.idle_trim_after = absl::ZeroDuration();
  return std::make_shared<CpuAllocator>(o, device);
}

TEST(MemoryAccountTest, EachDeviceCountsItsStoragesAndPeakApartFromTheTotals) {
  auto cpu = AllocatorFor(kCPU);
  auto dev = AllocatorFor(kDev0);
  auto account = MemoryAccount::Create(0);
  std::shared_ptr<Storage> a = Alloc(cpu, *account, 1000, true);
  std::shared_ptr<Storage> b = Alloc(dev, *account, 300, true);
  std::shared_ptr<Storage> c = Alloc(cpu, *account, 24, false);
  EXPECT_EQ(account->bytes_in_use(kCPU), 1024);
  EXPECT_EQ(account->bytes_in_use(kDev0), 300);
  EXPECT_EQ(account->bytes_in_use(), 1324);
  a.reset();
  EXPECT_EQ(account->bytes_in_use(kCPU), 24);
  EXPECT_EQ(account->peak_bytes(kCPU), 1024);
  EXPECT_EQ(account->bytes_in_use(kDev0), 300);
  EXPECT_EQ(account->peak_bytes(kDev0), 300);
  // Another device's peak does not move with this one's.
  b.reset();
  std::shared_ptr<Storage> d = Alloc(dev, *account, 200, true);
  EXPECT_EQ(account->peak_bytes(kDev0), 300);
  EXPECT_EQ(account->peak_bytes(kCPU), 1024);
  EXPECT_EQ(account->peak_bytes(), 1324);
  EXPECT_EQ(account->bytes_in_use(Device{DeviceType::kCUDA, 0}), 0);  // a slot with nothing in it
  // Another session's storages are its own.
  auto other = MemoryAccount::Create(0);
  std::shared_ptr<Storage> e = Alloc(cpu, *other, 4096, true);
  EXPECT_EQ(account->bytes_in_use(kCPU), 24);
  EXPECT_EQ(other->bytes_in_use(kCPU), 4096);
  c.reset();
  d.reset();
  EXPECT_EQ(account->bytes_in_use(kCPU), 0);
  EXPECT_EQ(account->bytes_in_use(kDev0), 0);
  EXPECT_EQ(account->bytes_in_use(), 0);
}

TEST(MemoryAccountTest, ResetPeakSetsOneDevicesPeakToWhatIsInUseNow) {
  auto cpu = AllocatorFor(kCPU);
  auto dev = AllocatorFor(kDev0);
  auto account = MemoryAccount::Create(0);
  std::shared_ptr<Storage> keep = Alloc(cpu, *account, 100, true);
  Alloc(cpu, *account, 5000, true).reset();
  Alloc(dev, *account, 700, true).reset();
  EXPECT_EQ(account->peak_bytes(kCPU), 5100);
  account->ResetPeak(kCPU);
  EXPECT_EQ(account->peak_bytes(kCPU), 100);
  EXPECT_EQ(account->peak_bytes(kDev0), 700);  // untouched
  EXPECT_EQ(account->peak_bytes(), 5100);      // the totals' peak too
  Alloc(cpu, *account, 50, true).reset();
  EXPECT_EQ(account->peak_bytes(kCPU), 150);
  account->ResetPeak(kDev0);
  EXPECT_EQ(account->peak_bytes(kDev0), 0);
}

TEST(MemoryAccountTest, AdoptedStoragesCountOnTheirDevice) {
  auto cpu = AllocatorFor(kCPU);
  auto account = MemoryAccount::Create(0);
  auto memory = std::make_shared<std::vector<char>>(256);
  absl::StatusOr<std::shared_ptr<Storage>> s = account->Adopt(cpu, memory->data(), 256, memory, "upload");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(account->bytes_in_use(kCPU), 256);
  EXPECT_EQ(cpu->bytes_in_use(), 256);
  s->reset();
  EXPECT_EQ(account->bytes_in_use(kCPU), 0);
  EXPECT_EQ(account->peak_bytes(kCPU), 256);
}

TEST(MemoryAccountTest, ARefusedAllocationCountsOnNoDevice) {
  auto cpu = AllocatorFor(kCPU);
  auto account = MemoryAccount::Create(1000);
  EXPECT_FALSE(account->Allocate(cpu, 2000, "zeros").ok());
  EXPECT_EQ(account->bytes_in_use(kCPU), 0);
  EXPECT_EQ(account->peak_bytes(kCPU), 0);
  EXPECT_EQ(account->bytes_in_use(), 0);
}

TEST(MemoryAccountTest, DevicesPastTheSlotsCountInTheTotalsOnly) {
  using A = MemoryAccount;
  EXPECT_TRUE(A::HasDeviceSlot(kCPU));
  EXPECT_TRUE(A::HasDeviceSlot(Device{DeviceType::kPrivateUse1, A::kMaxPrivateUseDevices - 1}));
  EXPECT_TRUE(A::HasDeviceSlot(Device{DeviceType::kCUDA, A::kMaxCudaDevices - 1}));
  const Device past_cuda{DeviceType::kCUDA, A::kMaxCudaDevices};
  const Device past_private{DeviceType::kPrivateUse1, A::kMaxPrivateUseDevices};
  for (const Device& d : {past_cuda, past_private, kMetaDevice, Device{DeviceType::kCUDA, -1},
                          Device{static_cast<DeviceType>(77), 0}}) {
    EXPECT_FALSE(A::HasDeviceSlot(d)) << d.ToString();
  }
  auto account = A::Create(0);
  auto far = AllocatorFor(past_cuda);
  auto near = AllocatorFor(Device{DeviceType::kCUDA, A::kMaxCudaDevices - 1});
  auto dev7 = AllocatorFor(Device{DeviceType::kPrivateUse1, A::kMaxPrivateUseDevices - 1});
  std::shared_ptr<Storage> s = Alloc(far, *account, 640, true);
  std::shared_ptr<Storage> t = Alloc(near, *account, 64, true);
  std::shared_ptr<Storage> u = Alloc(dev7, *account, 8, true);
  EXPECT_EQ(account->bytes_in_use(), 712);
  EXPECT_EQ(account->bytes_in_use(past_cuda), -1);
  EXPECT_EQ(account->peak_bytes(past_cuda), -1);
  account->ResetPeak(past_cuda);  // nothing to reset
  EXPECT_EQ(account->bytes_in_use(Device{DeviceType::kCUDA, A::kMaxCudaDevices - 1}), 64);
  EXPECT_EQ(account->bytes_in_use(Device{DeviceType::kPrivateUse1, A::kMaxPrivateUseDevices - 1}), 8);
  // The neighbouring slots saw nothing: no slot was written out of place.
  EXPECT_EQ(account->bytes_in_use(kCPU), 0);
  EXPECT_EQ(account->bytes_in_use(kDev0), 0);
  EXPECT_EQ(account->bytes_in_use(Device{DeviceType::kCUDA, 0}), 0);
  s.reset();
  EXPECT_EQ(account->bytes_in_use(), 72);
  EXPECT_EQ(account->bytes_in_use(Device{DeviceType::kCUDA, A::kMaxCudaDevices - 1}), 64);
}

TEST(MemoryAccountTest, StoragesFreedOnOtherThreadsLeaveEveryCounterRight) {
  auto cpu = AllocatorFor(kCPU);
  auto dev = AllocatorFor(kDev0);
  auto account = MemoryAccount::Create(0);
  // Allocated here, freed on other threads.
  std::vector<std::shared_ptr<Storage>> made;
  for (int i = 0; i < 64; ++i) made.push_back(Alloc(i % 2 == 0 ? cpu : dev, *account, 128, true));
  EXPECT_EQ(account->bytes_in_use(kCPU), 32 * 128);
  EXPECT_EQ(account->bytes_in_use(kDev0), 32 * 128);
  std::thread freer([made = std::move(made)]() mutable { made.clear(); });
  freer.join();
  EXPECT_EQ(account->bytes_in_use(kCPU), 0);
  EXPECT_EQ(account->bytes_in_use(kDev0), 0);
  EXPECT_EQ(account->peak_bytes(kCPU), 32 * 128);
  // Threads allocating on both devices while others reset the peaks.
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        std::shared_ptr<Storage> s = Alloc((i + t) % 2 == 0 ? cpu : dev, *account, 64 * (1 + t), i % 2 == 0);
        if (i % 50 == 0) account->ResetPeak(t % 2 == 0 ? kCPU : kDev0);
        std::thread([s = std::move(s)] {}).join();  // the last reference goes on another thread
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(account->bytes_in_use(kCPU), 0);
  EXPECT_EQ(account->bytes_in_use(kDev0), 0);
  EXPECT_EQ(account->bytes_in_use(), 0);
  EXPECT_EQ(cpu->bytes_in_use(), 0);
  // At most every thread's storage at once (64 + 128 + 192 + 256 bytes).
  EXPECT_LE(account->peak_bytes(kCPU), 640);
  EXPECT_LE(account->peak_bytes(kDev0), 640);
  account->ResetPeak(kCPU);
  EXPECT_EQ(account->peak_bytes(kCPU), 0);
}

TEST(CpuAllocatorTest, ReservedBytesAreLiveStoragesTheirGranulesAndTheCache) {
  auto alloc = MakeAllocator(64 * kMiB);
  auto account = MemoryAccount::Create(0);
  EXPECT_EQ(alloc->reserved_bytes(), 0);
  std::shared_ptr<Storage> small = Alloc(alloc, *account, 100, true);
  EXPECT_EQ(alloc->reserved_bytes(), 100);
  std::shared_ptr<Storage> large = Alloc(alloc, *account, 3 * kMiB + 5, false);
  EXPECT_EQ(alloc->reserved_bytes(), 100 + 4 * kMiB);  // two whole granules
  large.reset();
  EXPECT_EQ(alloc->reserved_bytes(), 100 + 4 * kMiB);  // cached for reuse
  EXPECT_EQ(alloc->Trim(), 4 * kMiB);
  EXPECT_EQ(alloc->reserved_bytes(), 100);
  small.reset();
  EXPECT_EQ(alloc->reserved_bytes(), 0);
  // Without a cache a large block goes back at once.
  auto uncached = MakeAllocator(0);
  Alloc(uncached, *account, 2 * kMiB + 1, false).reset();
  EXPECT_EQ(uncached->reserved_bytes(), 0);
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
