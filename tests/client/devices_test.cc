// What the C++ client knows of the daemon's devices (DaemonInfo: each
// device's memory and compute capability, the CUDA versions, why there is no
// CUDA device) and the error at the call site for a tensor on a device the
// daemon lacks, against daemons spawned from $TENSORD_BIN. The CUDA cases
// assert what the daemon reports: no cuda device here (a machine without a
// GPU), or cuda devices with their properties where it has some.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

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

constexpr Device kCuda0{DeviceType::kCUDA, 0};
constexpr Device kTestDevice{DeviceType::kPrivateUse1, 0};

class DevicesTest : public tc::testing::DaemonTest {
 protected:
  static void SetUpTestSuite() { SpawnDaemon(/*test_device=*/true); }
  const tc::DaemonInfo& info() const { return session_->daemon_info(); }
};

TEST_F(DevicesTest, EachDeviceComesWithItsMemoryAndCapability) {
  const tc::DaemonInfo& d = info();
  ASSERT_GE(d.device_info.size(), 2u);
  ASSERT_EQ(d.devices.size(), d.device_info.size());
  EXPECT_EQ(d.device_info[0].device, kCPU);
  EXPECT_EQ(d.devices[0], "cpu");
  EXPECT_EQ(d.device_info[1].device, kTestDevice);
  EXPECT_EQ(d.devices[1], "privateuseone:0");
  for (const tc::DeviceInfo& dev : d.device_info) {
    SCOPED_TRACE(dev.device.ToString());
    EXPECT_GT(dev.total_memory_bytes, 0);
    EXPECT_GT(dev.free_memory_bytes, 0);
    EXPECT_LE(dev.free_memory_bytes, dev.total_memory_bytes);
    EXPECT_FALSE(dev.description.empty());
    if (dev.device.is_cuda()) {
      EXPECT_GE(dev.capability_major, 3);
    } else {
      EXPECT_EQ(dev.capability_major, 0);
      EXPECT_EQ(dev.capability_minor, 0);
    }
  }
  EXPECT_THAT(d.device_info[0].description, HasSubstr("core"));
  EXPECT_TRUE(d.Serves(kCPU));
  EXPECT_TRUE(d.Serves(kTestDevice));
  EXPECT_FALSE(d.Serves(tensord::kMetaDevice));
  EXPECT_FALSE(d.Serves(Device{DeviceType::kPrivateUse1, 1}));
}

TEST_F(DevicesTest, TheCudaReasonIsGivenExactlyWhenThereIsNoCudaDevice) {
  const tc::DaemonInfo& d = info();
  if (d.cuda_device_count() == 0) {
    EXPECT_FALSE(d.cuda_unavailable_reason.empty());
    EXPECT_FALSE(d.Serves(kCuda0));
  } else {
    EXPECT_TRUE(d.cuda_unavailable_reason.empty()) << d.cuda_unavailable_reason;
    EXPECT_TRUE(d.Serves(kCuda0));
    EXPECT_FALSE(d.cuda_driver_version.empty());
    EXPECT_FALSE(d.cuda_runtime_version.empty());
  }
  // A build with CUDA names its runtime whether or not there is a GPU.
  EXPECT_EQ(d.cuda_runtime_version.empty(), d.cuda_unavailable_reason.rfind("this daemon was built without CUDA", 0) == 0)
      << d.cuda_unavailable_reason;
}

TEST_F(DevicesTest, ATensorOnADeviceTheDaemonLacksFailsAtTheCallWithNothingSent) {
  if (info().Serves(kCuda0)) GTEST_SKIP() << "the daemon serves cuda:0";
  const std::string served = "this daemon serves cpu, privateuseone:0; it has no CUDA device: ";
  const tc::Stats before = session_->stats();
  absl::StatusOr<tc::Tensor> z = tc::Zeros({3}, ScalarType::kFloat32, kCuda0);
  ASSERT_FALSE(z.ok());
  EXPECT_EQ(KindOf(z.status()), ErrorKind::kRuntime);
  EXPECT_EQ(z.status().message(),
            "zeros: device cuda:0 is not available: " + served + info().cuda_unavailable_reason);
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, tc::Ones({2}, ScalarType::kFloat32, kCPU));
  absl::StatusOr<tc::Tensor> moved = tc::To(x, Device{DeviceType::kCUDA, 1});
  ASSERT_FALSE(moved.ok());
  EXPECT_THAT(std::string(moved.status().message()), StartsWith("to.device: device cuda:1 is not available: " + served));
  absl::StatusOr<tc::Tensor> up = tc::FromVector(std::vector<float>{1, 2}, {2}, kCuda0);
  ASSERT_FALSE(up.ok());
  EXPECT_THAT(std::string(up.status().message()), StartsWith("tensor: device cuda:0 is not available: " + served));
  // A device of a kind the daemon has, at an index it lacks: no CUDA reason.
  absl::StatusOr<tc::Tensor> dev1 = tc::Zeros({3}, ScalarType::kFloat32, Device{DeviceType::kPrivateUse1, 1});
  ASSERT_FALSE(dev1.ok());
  EXPECT_EQ(dev1.status().message(),
            "zeros: device privateuseone:1 is not available: this daemon serves cpu, privateuseone:0");
  // Only the one op on the cpu went out, and the session goes on without a pending error.
  EXPECT_EQ(session_->stats().ops_issued - before.ops_issued, 1);
  EXPECT_EQ(session_->stats().uploads, before.uploads);
  ASSERT_OK_AND_ASSIGN(tc::Tensor y, tc::Add(x, x));
  EXPECT_TRUE(session_->Synchronize().ok());
}

TEST_F(DevicesTest, MixingACudaTensorWithACpuOneIsPyTorchsErrorAtTheCall) {
  if (!info().Serves(kCuda0)) GTEST_SKIP() << "no CUDA device: " << info().cuda_unavailable_reason;
  ASSERT_OK_AND_ASSIGN(tc::Tensor g, tc::Ones({3}, ScalarType::kFloat32, kCuda0));
  ASSERT_OK_AND_ASSIGN(tc::Tensor c, tc::Ones({3}, ScalarType::kFloat32, kCPU));
  absl::StatusOr<tc::Tensor> r = tc::Add(g, c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "add: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!");
  EXPECT_TRUE(session_->Synchronize().ok());
}

TEST(DaemonInfoTest, DeviceUnavailableNamesWhatIsServedAndWhy) {
  tc::DaemonInfo d;
  d.devices = {"cpu"};
  d.device_info.push_back(tc::DeviceInfo{kCPU, "2 cores", 1, 1, 0, 0});
  d.cuda_unavailable_reason = "this daemon was built without CUDA (the CUDA toolkit was not found when it was built)";
  EXPECT_EQ(d.cuda_device_count(), 0);
  EXPECT_EQ(d.DeviceUnavailable("ones", kCuda0).message(),
            "ones: device cuda:0 is not available: this daemon serves cpu; it has no CUDA device: this daemon was "
            "built without CUDA (the CUDA toolkit was not found when it was built)");
  EXPECT_EQ(KindOf(d.DeviceUnavailable("ones", kCuda0)), ErrorKind::kRuntime);
  // A daemon that gives no reason (one older than the field).
  d.cuda_unavailable_reason.clear();
  EXPECT_EQ(d.DeviceUnavailable("ones", kCuda0).message(),
            "ones: device cuda:0 is not available: this daemon serves cpu; it has no CUDA device");
  // With cuda:0 served, cuda:1 has no reason to give.
  d.devices.push_back("cuda:0");
  d.device_info.push_back(tc::DeviceInfo{kCuda0, "NVIDIA H100 80GB HBM3", 80, 79, 9, 0});
  EXPECT_EQ(d.cuda_device_count(), 1);
  EXPECT_EQ(d.DeviceUnavailable("to.device", Device{DeviceType::kCUDA, 1}).message(),
            "to.device: device cuda:1 is not available: this daemon serves cpu, cuda:0");
}

}  // namespace
