// Two device-neutral pieces the GPU backend relies on, tested on host
// devices: a session's memory cap on one device (MemoryAccount::
// SetDeviceLimit: what --cuda-session-memory-limit sets on each GPU), and
// the process's device-failure report (runtime::ReportDeviceFailure: what
// the CUDA backend calls on a GPU fault).
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensord/backends/cpu/cpu_backend.h"
#include "tensord/backends/test_device/test_device_backend.h"
#include "tensord/meta/errors.h"
#include "tensord/runtime/backend.h"
#include "tensord/runtime/memory.h"

namespace tensord::runtime {
namespace {

using ::testing::HasSubstr;

class DeviceLimitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cpu = backends::CpuBackend::Create({});
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    cpu_ = *std::move(cpu);
    auto test = backends::TestDeviceBackend::Create();
    ASSERT_TRUE(test.ok()) << test.status();
    dev_ = *std::move(test);
  }
  std::unique_ptr<backends::CpuBackend> cpu_;
  std::unique_ptr<backends::TestDeviceBackend> dev_;
};

TEST_F(DeviceLimitTest, ACapOnOneDeviceRefusesWhatWouldPassItThere) {
  auto account = MemoryAccount::Create(int64_t{1} << 30);
  EXPECT_EQ(account->device_limit_bytes(backends::kTestDevice), 0);
  ASSERT_TRUE(account->SetDeviceLimit(backends::kTestDevice, 1000).ok());
  EXPECT_EQ(account->device_limit_bytes(backends::kTestDevice), 1000);
  EXPECT_EQ(account->device_limit_bytes(kCPU), 0);

  absl::StatusOr<std::shared_ptr<Storage>> a = account->Allocate(dev_->allocator(), 600, "zeros");
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<std::shared_ptr<Storage>> b = account->Allocate(dev_->allocator(), 500, "add");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(KindOf(b.status()), ErrorKind::kOutOfMemory);
  EXPECT_EQ(b.status().message(),
            "add: out of memory on privateuseone:0: tried to allocate 500 bytes (500 bytes); this session has "
            "600 bytes on privateuseone:0 of its 1000 bytes limit there (1000 bytes)");
  // The refused allocation left every counter as it was.
  EXPECT_EQ(account->bytes_in_use(backends::kTestDevice), 600);
  EXPECT_EQ(account->peak_bytes(backends::kTestDevice), 600);
  EXPECT_EQ(account->bytes_in_use(), 600);
  EXPECT_EQ(dev_->allocator()->bytes_in_use(), 600);
  // Up to the cap, exactly; other devices are not capped by it.
  absl::StatusOr<std::shared_ptr<Storage>> c = account->Allocate(dev_->allocator(), 400, "add");
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<std::shared_ptr<Storage>> host = account->Allocate(cpu_->allocator(), 1 << 20, "zeros");
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(account->bytes_in_use(), 1000 + (1 << 20));
  // Freed bytes make room again.
  a->reset();
  EXPECT_EQ(account->bytes_in_use(backends::kTestDevice), 400);
  EXPECT_TRUE(account->Allocate(dev_->allocator(), 600, "mul").ok());
  // A cap of 0 lifts it; the account's own limit still counts every device.
  ASSERT_TRUE(account->SetDeviceLimit(backends::kTestDevice, 0).ok());
  EXPECT_TRUE(account->Allocate(dev_->allocator(), 4096, "mul").ok());
}

TEST_F(DeviceLimitTest, TheAccountsLimitStillHoldsUnderALargerCap) {
  auto account = MemoryAccount::Create(1000);
  ASSERT_TRUE(account->SetDeviceLimit(backends::kTestDevice, 1 << 20).ok());
  absl::StatusOr<std::shared_ptr<Storage>> s = account->Allocate(dev_->allocator(), 2000, "zeros");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("of its 1000 bytes limit (1000 bytes)"));
  EXPECT_EQ(account->bytes_in_use(backends::kTestDevice), 0);  // the device's reservation was undone
}

TEST_F(DeviceLimitTest, AdoptedMemoryIsCappedToo) {
  auto account = MemoryAccount::Create(0);
  ASSERT_TRUE(account->SetDeviceLimit(kCPU, 100).ok());
  std::vector<char> bytes(200);
  std::shared_ptr<void> keeper = std::make_shared<int>(0);
  absl::StatusOr<std::shared_ptr<Storage>> s = account->Adopt(cpu_->allocator(), bytes.data(), 200, keeper, "upload");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("upload: out of memory on cpu: tried to allocate 200 bytes"));
  EXPECT_TRUE(account->Adopt(cpu_->allocator(), bytes.data(), 100, keeper, "upload").ok());
}

TEST_F(DeviceLimitTest, ConcurrentAllocationsNeverPassTheCap) {
  auto account = MemoryAccount::Create(0);
  ASSERT_TRUE(account->SetDeviceLimit(backends::kTestDevice, 64 * 100).ok());
  std::atomic<int> granted{0};
  std::vector<std::shared_ptr<Storage>> kept[4];
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        absl::StatusOr<std::shared_ptr<Storage>> s = account->Allocate(dev_->allocator(), 64, "zeros");
        if (s.ok()) {
          kept[t].push_back(*std::move(s));
          granted.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(granted.load(), 100);
  EXPECT_EQ(account->bytes_in_use(backends::kTestDevice), 64 * 100);
  EXPECT_EQ(account->peak_bytes(backends::kTestDevice), 64 * 100);
}

TEST_F(DeviceLimitTest, OnlyADeviceWithCountersTakesACap) {
  auto account = MemoryAccount::Create(0);
  EXPECT_TRUE(absl::IsInvalidArgument(account->SetDeviceLimit(Device{DeviceType::kMeta, 0}, 100)));
  EXPECT_TRUE(absl::IsInvalidArgument(account->SetDeviceLimit(Device{DeviceType::kCUDA, 64}, 100)));
  EXPECT_TRUE(absl::IsInvalidArgument(account->SetDeviceLimit(Device{DeviceType::kCUDA, 0}, -1)));
  EXPECT_TRUE(account->SetDeviceLimit(Device{DeviceType::kCUDA, 63}, 100).ok());
  EXPECT_EQ(account->device_limit_bytes(Device{DeviceType::kCUDA, 63}), 100);
  EXPECT_EQ(account->device_limit_bytes(Device{DeviceType::kCUDA, 64}), -1);
}

// ---- the device-failure report ---------------------------------------------------

class DeviceFailureReportTest : public ::testing::Test {
 protected:
  void TearDown() override { SetDeviceFailureHandler(nullptr); }
};

TEST_F(DeviceFailureReportTest, TheFirstReportReachesTheHandlerOnceAndIsRemembered) {
  std::vector<std::string> calls;
  SetDeviceFailureHandler([&](const Device& d, const std::string& why) { calls.push_back(d.ToString() + ": " + why); });
  EXPECT_FALSE(DeviceFailed());
  EXPECT_TRUE(DeviceFailure().ok());
  ReportDeviceFailure(Device{DeviceType::kCUDA, 1}, "an illegal memory access was encountered");
  ReportDeviceFailure(Device{DeviceType::kCUDA, 1}, "an illegal memory access was encountered");  // another stream
  ReportDeviceFailure(Device{DeviceType::kCUDA, 0}, "unspecified launch failure");
  EXPECT_EQ(calls, std::vector<std::string>{"cuda:1: an illegal memory access was encountered"});
  EXPECT_TRUE(DeviceFailed());
  EXPECT_EQ(KindOf(DeviceFailure()), ErrorKind::kInternal);
  EXPECT_EQ(DeviceFailure().message(), "cuda:1 failed (an illegal memory access was encountered)");
  // A new handler (a new daemon in the same process) starts clean.
  SetDeviceFailureHandler(nullptr);
  EXPECT_FALSE(DeviceFailed());
  ReportDeviceFailure(Device{DeviceType::kCUDA, 0}, "unspecified launch failure");  // no handler: remembered only
  EXPECT_EQ(DeviceFailure().message(), "cuda:0 failed (unspecified launch failure)");
}

TEST_F(DeviceFailureReportTest, ReportsFromManyThreadsCallTheHandlerOnce) {
  std::atomic<int> calls{0};
  SetDeviceFailureHandler([&](const Device&, const std::string&) { calls.fetch_add(1); });
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t] { ReportDeviceFailure(Device{DeviceType::kCUDA, t % 2}, "uncorrectable ECC error"); });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(calls.load(), 1);
  EXPECT_TRUE(DeviceFailed());
}

int g_kernel_runs = 0;
absl::Status CountingKernel(KernelContext&) {
  ++g_kernel_runs;
  return absl::OkStatus();
}

// The test device's simulated fault (what the daemon's tests use, in place
// of a GPU's): its N-th launch reports the failure, then every call fails.
TEST_F(DeviceFailureReportTest, TheTestDevicesSimulatedFault) {
  std::vector<std::string> calls;
  SetDeviceFailureHandler([&](const Device& d, const std::string& why) { calls.push_back(d.ToString() + ": " + why); });
  auto dev = backends::TestDeviceBackend::Create({}, backends::TestDeviceFault{2});
  ASSERT_TRUE(dev.ok()) << dev.status();
  absl::StatusOr<std::unique_ptr<Stream>> s = (*dev)->CreateStream(/*owner=*/1);
  ASSERT_TRUE(s.ok()) << s.status();
  g_kernel_runs = 0;
  KernelContext ctx;
  EXPECT_TRUE((*s)->Launch(CountingKernel, ctx).ok());
  absl::Status fault = (*s)->Launch(CountingKernel, ctx);
  EXPECT_EQ(KindOf(fault), ErrorKind::kInternal);
  EXPECT_THAT(fault.message(), HasSubstr("privateuseone:0: a simulated fault at kernel launch 2"));
  EXPECT_EQ(g_kernel_runs, 1);  // the faulting launch ran nothing
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_THAT(calls[0], HasSubstr("privateuseone:0: a simulated fault at kernel launch 2"));
  char byte = 0;
  EXPECT_FALSE((*s)->CopyToHost(&byte, &byte, 1).ok());
  EXPECT_FALSE((*s)->Synchronize().ok());
  EXPECT_FALSE((*dev)->CreateStream(/*owner=*/2).ok());
  EXPECT_EQ(calls.size(), 1u);
}

}  // namespace
}  // namespace tensord::runtime
