// Session::GetMemoryStats against a daemon spawned from $TENSORD_BIN with the
// test device (privateuseone:0): a session's bytes per device, now and at
// their peak, the reset of a device's peak, the allocator's reserved bytes
// and the emptying of its cache, a device the daemon does not serve, and
// that the request is not a sync point for errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon_fixture.h"
#include "tensord/client/client.h"
#include "tensord/meta/errors.h"

namespace tc = tensord::client;
using tensord::Device;
using tensord::DeviceType;
using tensord::ErrorKind;
using tensord::KindOf;
using tensord::kCPU;
using tensord::ScalarType;
using ::testing::HasSubstr;
using ::testing::StartsWith;

namespace {

constexpr Device kTestDevice{DeviceType::kPrivateUse1, 0};
constexpr int64_t kMiB = int64_t{1} << 20;

class MemoryStatsTest : public tc::testing::DaemonTest {
 protected:
  static void SetUpTestSuite() { SpawnDaemon(/*test_device=*/true); }
  tc::MemoryStats Stats(const Device& d, bool reset_peak = false, bool empty_cache = false) {
    absl::StatusOr<tc::MemoryStats> st = session_->GetMemoryStats(d, reset_peak, empty_cache);
    EXPECT_TRUE(st.ok()) << st.status();
    return st.ok() ? *st : tc::MemoryStats{-1, -1, -1, -1};
  }
};

TEST_F(MemoryStatsTest, EachDeviceCountsItsOwnStoragesExactly) {
  EXPECT_EQ(Stats(kCPU).allocated_bytes, 0);
  EXPECT_EQ(Stats(kTestDevice).allocated_bytes, 0);
  ASSERT_OK_AND_ASSIGN(tc::Tensor a, tc::Zeros({1000}, ScalarType::kFloat32, kCPU));  // 4,000 bytes
  EXPECT_EQ(Stats(kCPU).allocated_bytes, 4000);
  EXPECT_EQ(Stats(kTestDevice).allocated_bytes, 0);
  ASSERT_OK_AND_ASSIGN(tc::Tensor b, tc::Zeros({250}, ScalarType::kFloat64, kTestDevice));  // 2,000 bytes
  EXPECT_EQ(Stats(kCPU).allocated_bytes, 4000);
  EXPECT_EQ(Stats(kTestDevice).allocated_bytes, 2000);
  // A view allocates nothing.
  ASSERT_OK_AND_ASSIGN(tc::Tensor v, tc::Reshape(a, {10, 100}));
  EXPECT_EQ(Stats(kCPU).allocated_bytes, 4000);
  // Released tensors stop counting at the next request: no sync needed.
  a = tc::Tensor();
  EXPECT_EQ(Stats(kCPU).allocated_bytes, 4000);  // the view still holds the storage
  ASSERT_OK_AND_ASSIGN(tc::Tensor one, tc::Zeros({1}, ScalarType::kInt8, kCPU));
  v = tc::Tensor();  // released after `one` was allocated
  tc::MemoryStats cpu = Stats(kCPU);
  EXPECT_EQ(cpu.allocated_bytes, 1);
  EXPECT_EQ(cpu.peak_allocated_bytes, 4001);
  b = tc::Tensor();
  tc::MemoryStats dev = Stats(kTestDevice);
  EXPECT_EQ(dev.allocated_bytes, 0);
  EXPECT_EQ(dev.peak_allocated_bytes, 2000);
  EXPECT_EQ(Stats(kCPU).allocated_bytes, 1);
}

TEST_F(MemoryStatsTest, ResetPeakSetsOneDevicesPeakToWhatIsInUse) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor cpu_big, tc::Zeros({4096}, ScalarType::kFloat32, kCPU));      // 16 KiB
  ASSERT_OK_AND_ASSIGN(tc::Tensor dev_big, tc::Zeros({2048}, ScalarType::kFloat32, kTestDevice));  // 8 KiB
  ASSERT_OK_AND_ASSIGN(tc::Tensor keep, tc::Zeros({16}, ScalarType::kFloat32, kCPU));
  cpu_big = tc::Tensor();
  dev_big = tc::Tensor();
  // The reply has the peak before the reset.
  tc::MemoryStats before = Stats(kCPU, /*reset_peak=*/true);
  EXPECT_EQ(before.allocated_bytes, 64);
  EXPECT_EQ(before.peak_allocated_bytes, 16384 + 64);
  tc::MemoryStats after = Stats(kCPU);
  EXPECT_EQ(after.allocated_bytes, 64);
  EXPECT_EQ(after.peak_allocated_bytes, 64);
  // The other device keeps its peak until its own reset.
  EXPECT_EQ(Stats(kTestDevice).peak_allocated_bytes, 8192);
  Stats(kTestDevice, /*reset_peak=*/true);
  EXPECT_EQ(Stats(kTestDevice).peak_allocated_bytes, 0);
  // A new peak after the reset.
  ASSERT_OK_AND_ASSIGN(tc::Tensor again, tc::Zeros({100}, ScalarType::kFloat32, kCPU));
  again = tc::Tensor();
  EXPECT_EQ(Stats(kCPU).peak_allocated_bytes, 464);
}

TEST_F(MemoryStatsTest, ReservedIsTheDevicesForEverySessionAndAllocatedIsThisSessions) {
  tc::MemoryStats cpu = Stats(kCPU);
  EXPECT_GT(cpu.total_bytes, 0);
  EXPECT_GE(cpu.reserved_bytes, cpu.allocated_bytes);
  std::shared_ptr<tc::Session> other = Open();
  ASSERT_NE(other, nullptr);
  const tc::MemoryStats dev_before = Stats(kTestDevice);
  {
    tc::SessionGuard use(other);
    // 3 MiB + 5 bytes: a block of the device's caching allocator, in a
    // 20 MiB segment of the other session's (PyTorch's sizes).
    ASSERT_OK_AND_ASSIGN(tc::Tensor t, tc::Zeros({3 * kMiB + 5}, ScalarType::kUInt8, kTestDevice));
    ASSERT_OK_AND_ASSIGN(tc::MemoryStats theirs, other->GetMemoryStats(kTestDevice));
    EXPECT_EQ(theirs.allocated_bytes, 3 * kMiB + 5);
    // This session's bytes did not move; the device's reserved bytes did,
    // by the whole segment.
    const tc::MemoryStats mine = Stats(kTestDevice);
    EXPECT_EQ(mine.allocated_bytes, dev_before.allocated_bytes);
    EXPECT_EQ(mine.reserved_bytes - dev_before.reserved_bytes, 20 * kMiB);
    EXPECT_EQ(theirs.reserved_bytes, mine.reserved_bytes);
  }
  ASSERT_TRUE(other->Close().ok());
  // The segment goes back with the session (the daemon empties the caches
  // of every device when a session closes). CloseSession may answer before
  // the session is gone (a request of it still running ends first, on the
  // daemon's closer thread), so the reserved bytes are waited for, not
  // read once.
  int64_t reserved = Stats(kTestDevice).reserved_bytes;
  for (absl::Time deadline = absl::Now() + absl::Seconds(30);
       reserved != dev_before.reserved_bytes && absl::Now() < deadline;
       reserved = Stats(kTestDevice).reserved_bytes) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(reserved, dev_before.reserved_bytes);
  EXPECT_EQ(Stats(kTestDevice).total_bytes, Stats(kCPU).total_bytes);  // host memory both
}

TEST_F(MemoryStatsTest, EmptyCacheGivesBackTheBlocksTheAllocatorKeeps) {
  const int64_t empty = Stats(kCPU, false, /*empty_cache=*/true).reserved_bytes;
  {
    // 3 MiB + 5 bytes: two 2 MiB granules, kept cached once freed (the cpu
    // keeps freed storages of 2 MiB and more for 5 s).
    ASSERT_OK_AND_ASSIGN(tc::Tensor t, tc::Zeros({3 * kMiB + 5}, ScalarType::kUInt8, kCPU));
    EXPECT_GE(Stats(kCPU).reserved_bytes, empty + 4 * kMiB);
  }
  const tc::MemoryStats cached = Stats(kCPU);
  EXPECT_EQ(cached.allocated_bytes, 0);
  EXPECT_GE(cached.reserved_bytes, empty + 4 * kMiB);
  // The reply is after the cache was emptied; the session's bytes are untouched.
  const tc::MemoryStats emptied = Stats(kCPU, false, /*empty_cache=*/true);
  EXPECT_EQ(emptied.reserved_bytes, empty);
  EXPECT_EQ(emptied.allocated_bytes, 0);
  EXPECT_EQ(emptied.peak_allocated_bytes, cached.peak_allocated_bytes);
  ASSERT_OK_AND_ASSIGN(tc::Tensor again, tc::Ones({4}, ScalarType::kFloat32, kCPU));
  EXPECT_EQ(Stats(kCPU, false, true).allocated_bytes, 16);
}

TEST_F(MemoryStatsTest, ADeviceTheDaemonDoesNotServeIsARuntimeErrorNamingWhatItServes) {
  for (const Device& d : {Device{DeviceType::kCUDA, 3}, Device{DeviceType::kPrivateUse1, 1}}) {
    absl::StatusOr<tc::MemoryStats> st = session_->GetMemoryStats(d);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(KindOf(st.status()), ErrorKind::kRuntime) << st.status();
    // Refused by the client, before a round trip, with the reason when the
    // daemon has no CUDA device (this one has none).
    EXPECT_THAT(std::string(st.status().message()),
                StartsWith("memory_stats: device " + d.ToString() +
                           " is not available: this daemon serves cpu, privateuseone:0"));
    if (d.is_cuda()) {
      EXPECT_THAT(st.status().message(), HasSubstr("; it has no CUDA device: "));
    }
  }
  absl::StatusOr<tc::MemoryStats> meta = session_->GetMemoryStats(tensord::kMetaDevice);
  ASSERT_FALSE(meta.ok());
  EXPECT_EQ(KindOf(meta.status()), ErrorKind::kRuntime);
  EXPECT_THAT(meta.status().message(), HasSubstr("memory_stats: device meta is not available"));
  // The session goes on.
  ASSERT_OK_AND_ASSIGN(tc::Tensor t, tc::Ones({3}, ScalarType::kFloat32, kCPU));
  EXPECT_EQ(Stats(kCPU).allocated_bytes, 12);
  EXPECT_TRUE(session_->Synchronize().ok());
}

TEST_F(MemoryStatsTest, IsNotASyncPointForErrors) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, tc::FromVector(std::vector<float>{1, 2, 3, 4}, {2, 2}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor rows, tc::FromVector(std::vector<int64_t>{0, 9}, {2}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor bad, tc::Call1("index_select", {x, 0, rows}));  // fails in the daemon
  // Answered after the failed op ran, without its error...
  ASSERT_OK_AND_ASSIGN(tc::MemoryStats st, session_->GetMemoryStats(kCPU));
  EXPECT_GE(st.allocated_bytes, 16 + 16);
  // ...which the next sync point reports.
  absl::Status s = session_->Synchronize();
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("index_select"));
  EXPECT_TRUE(session_->Synchronize().ok());
}

TEST_F(MemoryStatsTest, AClosedSessionRefuses) {
  ASSERT_TRUE(session_->Close().ok());
  absl::StatusOr<tc::MemoryStats> st = session_->GetMemoryStats(kCPU);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.status().message(), HasSubstr("is closed"));
}

}  // namespace
