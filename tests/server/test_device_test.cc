// The daemon's second device: the test device (privateuseone:0, host memory
// behind explicit copies, backends/test_device/) served with --test-device.
// What a GPU changes, checked without one: the handshake lists the device;
// uploads, fetches and ops run there through the Backend copies; `to`
// and `copy_` move data across; tensors on two devices in one op are
// refused in PyTorch's words; each device counts its own bytes, and a
// session's memory statistics do too; and a daemon without the device says
// which devices it serves.
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "raw_client.h"
#include "tensord/backends/test_device/test_device_backend.h"

namespace tensord::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr Device kDev = backends::kTestDevice;

v1::TensorMetaProto MetaOn(const std::vector<int64_t>& sizes, ScalarType dtype, Device device) {
  v1::TensorMetaProto p;
  wire::ToProto(TensorMeta::Contiguous(Shape(sizes.begin(), sizes.end()), dtype, device), &p);
  return p;
}

class TestDeviceTest : public DaemonFixture {
 protected:
  void SetUp() override {
    test_device_ = true;
    StartDaemon(0);
  }
  int64_t DeviceBytes(size_t i) const { return daemon_->service().backends()[i].allocator()->bytes_in_use(); }
};

TEST_F(TestDeviceTest, TheSessionIsToldOfBothDevices) {
  RawSession s(stub_.get());
  const auto& devices = s.open_response().devices();
  ASSERT_EQ(devices.size(), 2);
  EXPECT_EQ(devices[0].name(), "cpu");
  EXPECT_EQ(devices[1].name(), "privateuseone:0");
  EXPECT_EQ(devices[1].type(), static_cast<int32_t>(DeviceType::kPrivateUse1));
  EXPECT_GT(devices[1].total_memory_bytes(), 0u);
}

TEST_F(TestDeviceTest, UploadComputeAndFetchOnTheDevice) {
  RawSession s(stub_.get());
  s.Send(UploadReq(1, MetaOn({4}, ScalarType::kFloat32, kDev), Bytes<float>({1, 2, 3, 4})));
  s.Send(Call(1, "mul.Scalar", {T(1), F(2.0)}, {2}));
  s.Send(Call(2, "transpose.int", {T(2), I(0), I(0)}, {3}));
  EXPECT_TRUE(s.Sync().empty());
  // Both storages are the device's, counted apart from the CPU's.
  EXPECT_EQ(DeviceBytes(1), 2 * 16);
  FetchResult r = s.Fetch(3);  // a view of a device tensor
  ASSERT_TRUE(r.ok) << r.error.message();
  EXPECT_EQ(r.meta.device_type(), static_cast<int32_t>(DeviceType::kPrivateUse1));
  EXPECT_THAT(FromBytes<float>(r.data), ElementsAre(2, 4, 6, 8));
  // Closing the session gives back every byte, on both devices (the
  // upload's and the fetch's host copies included). A close that finds the
  // session's last message still finishing completes on the closer thread.
  EXPECT_TRUE(s.Close().ok());
  for (int i = 0; i < 3000 && daemon_->service().closing_sessions() > 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  s.Finish();  // the stream's last placement buffer goes with it
  EXPECT_EQ(DeviceBytes(1), 0);
  EXPECT_EQ(DeviceBytes(0), 0);
}

TEST_F(TestDeviceTest, ToMovesDataAcrossBothWaysAStridedViewToo) {
  RawSession s(stub_.get());
  s.Upload<float>(1, {2, 3}, ScalarType::kFloat32, {1, 2, 3, 4, 5, 6});
  s.Send(Call(1, "transpose.int", {T(1), I(0), I(1)}, {2}));                // [3, 2], strided, cpu
  s.Send(Call(2, "to.device", {T(2), Dev("privateuseone:0"), None(), B(false), B(false)}, {3}));     // to the device
  s.Send(Call(3, "add.Scalar", {T(3), F(10.0), I(1)}, {4}));                   // computed there
  s.Send(Call(4, "to.device", {T(4), Dev("cpu"), None(), B(false), B(false)}, {5}));                 // and back
  EXPECT_TRUE(s.Sync().empty());
  EXPECT_THAT(s.FetchValues<float>(5), ElementsAre(11, 14, 12, 15, 13, 16));
  EXPECT_THAT(s.FetchValues<float>(4), ElementsAre(11, 14, 12, 15, 13, 16));  // fetched from the device
  // copy_ writes a device tensor from a cpu one (and the other way).
  s.Upload<float>(6, {3, 2}, ScalarType::kFloat32, {0, 0, 0, 0, 0, 0});
  s.Send(Call(5, "copy_", {T(4), T(6), B(false)}, {7}));
  s.Send(Call(6, "copy_", {T(6), T(3), B(false)}, {8}));
  EXPECT_TRUE(s.Sync().empty());
  EXPECT_THAT(s.FetchValues<float>(4), ElementsAre(0, 0, 0, 0, 0, 0));
  EXPECT_THAT(s.FetchValues<float>(6), ElementsAre(1, 4, 2, 5, 3, 6));
}

TEST_F(TestDeviceTest, TensorsOnTwoDevicesInOneOpAreRefused) {
  RawSession s(stub_.get());
  s.Upload<float>(1, {3}, ScalarType::kFloat32, {1, 2, 3});
  s.Send(UploadReq(2, MetaOn({3}, ScalarType::kFloat32, kDev), Bytes<float>({4, 5, 6})));
  s.Send(UploadReq(3, MetaOn({3}, ScalarType::kBool, kCPU), std::string("\1\0\1", 3)));
  s.Send(Call(1, "add.Tensor", {T(1), T(2), I(1)}, {4}));
  s.Send(Call(2, "masked_select", {T(2), T(3)}, {5}));  // no meta function: the dispatcher checks
  std::vector<v1::Error> errors = s.Sync();
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_THAT(errors[0].message(), HasSubstr("Expected all tensors to be on the same device"));
  EXPECT_THAT(errors[1].message(), HasSubstr("Expected all tensors to be on the same device, but found at least "
                                             "two devices, privateuseone:0 and cpu!"));
  // The session goes on: an op on one device still runs.
  s.Send(Call(3, "masked_select", {T(1), T(3)}, {6}));
  EXPECT_TRUE(s.Sync().empty());
  EXPECT_THAT(s.FetchValues<float>(6), ElementsAre(1, 3));
}

TEST_F(TestDeviceTest, ADeviceTensorCannotAdoptSharedMemory) {
  RawSession s(stub_.get());
  v1::Request r = UploadReq(1, MetaOn({4}, ScalarType::kFloat32, kDev), "");
  r.mutable_upload()->set_shm_adopt(true);
  r.mutable_upload()->set_shm_segment(1);
  r.mutable_upload()->set_total_bytes(16);
  s.Send(r);
  std::vector<v1::Error> errors = s.Sync();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0].message(), HasSubstr("only a cpu tensor can adopt a shared-memory segment"));
}

// MemoryStats: a session's bytes on each device apart, in stream order.
TEST_F(TestDeviceTest, MemoryStatsCountEachDeviceApartInStreamOrder) {
  RawSession s(stub_.get());
  RawSession other(stub_.get());
  other.Upload<float>(1, {64}, ScalarType::kFloat32, std::vector<float>(64, 1.0f));  // 256 bytes, another session's
  EXPECT_TRUE(other.Sync().empty());
  // No Sync in between: the reply comes after the uploads before it ran.
  s.Upload<float>(1, {3}, ScalarType::kFloat32, {1, 2, 3});
  s.Send(UploadReq(2, MetaOn({5}, ScalarType::kFloat64, kDev), Bytes<double>({1, 2, 3, 4, 5})));
  v1::ServerMessage cpu = s.MemoryStats(kCPU);
  ASSERT_TRUE(cpu.has_ack()) << cpu.DebugString();
  EXPECT_EQ(cpu.ack().allocated_bytes(), 12u);
  // The upload to the device arrived in host memory (a cpu storage, charged
  // there) and moved with its last chunk: the cpu's peak saw both.
  EXPECT_EQ(cpu.ack().peak_allocated_bytes(), 12u + 40u);
  // Reserved: every session's storages on the device (and what the
  // allocator adds), the device's memory as the handshake gave it.
  EXPECT_GE(cpu.ack().reserved_bytes(), 12u + 256u);
  EXPECT_EQ(cpu.ack().total_memory_bytes(), s.open_response().devices(0).total_memory_bytes());
  EXPECT_TRUE(cpu.ack().errors().empty());
  v1::ServerMessage dev = s.MemoryStats(kDev);
  ASSERT_TRUE(dev.has_ack()) << dev.DebugString();
  EXPECT_EQ(dev.ack().allocated_bytes(), 40u);
  // The caching allocator's one small-pool segment (2 MiB) holds the 40 bytes.
  EXPECT_EQ(dev.ack().reserved_bytes(), uint64_t{2} << 20);
  EXPECT_EQ(dev.ack().total_memory_bytes(), s.open_response().devices(1).total_memory_bytes());
  // Released, then reset: the reply has the peak before the reset.
  v1::Request release;
  release.mutable_release()->add_handles(2);
  s.Send(release);
  dev = s.MemoryStats(kDev, /*reset_peak=*/true);
  EXPECT_EQ(dev.ack().allocated_bytes(), 0u);
  EXPECT_EQ(dev.ack().peak_allocated_bytes(), 40u);
  dev = s.MemoryStats(kDev);
  EXPECT_EQ(dev.ack().peak_allocated_bytes(), 0u);
  EXPECT_EQ(s.MemoryStats(kCPU).ack().peak_allocated_bytes(), 52u);  // the cpu's peak is its own
}

// The device's caching allocator keeps what sessions free; a session's end
// gives back every segment no other session uses, and once every session
// has closed the device holds nothing.
TEST_F(TestDeviceTest, TheCacheGoesBackAsSessionsCloseToNothingAfterTheLast) {
  auto& dev = dynamic_cast<backends::TestDeviceBackend&>(daemon_->service().backends()[1]);
  const runtime::CachingAllocator& cache = dev.caching_allocator();
  constexpr int64_t kMiB = int64_t{1} << 20;
  ASSERT_EQ(cache.reserved_bytes(), 0);
  RawSession a(stub_.get());
  RawSession b(stub_.get());
  // a: small blocks (a 2 MiB segment) and 12 MiB (a segment of its own).
  a.Send(UploadReq(1, MetaOn({4}, ScalarType::kFloat32, kDev), Bytes<float>({1, 2, 3, 4})));
  a.Send(Call(1, "mul.Scalar", {T(1), F(2.0)}, {2}));
  a.Send(Call(2, "zeros", {IL({3 * kMiB}), Dt(static_cast<int32_t>(ScalarType::kFloat32)), Dev("privateuseone:0")},
              {3}));
  // b: 3 MiB twice (in one 20 MiB segment).
  b.Send(Call(1, "ones", {IL({3 * kMiB / 4}), Dt(static_cast<int32_t>(ScalarType::kFloat32)), Dev("privateuseone:0")},
              {1}));
  b.Send(Call(2, "mul.Scalar", {T(1), F(3.0)}, {2}));
  EXPECT_TRUE(a.Sync().empty());
  EXPECT_TRUE(b.Sync().empty());
  EXPECT_EQ(cache.reserved_bytes(), 2 * kMiB + 12 * kMiB + 20 * kMiB);
  // Freed tensors stay cached.
  v1::Request release;
  release.mutable_release()->add_handles(3);
  a.Send(release);
  EXPECT_TRUE(a.Sync().empty());
  EXPECT_EQ(cache.reserved_bytes(), 34 * kMiB);
  // a's end (with tensors still held): its segments go, b's stay.
  EXPECT_TRUE(a.Close().ok());
  for (int i = 0; i < 3000 && daemon_->service().closing_sessions() > 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  a.Finish();
  EXPECT_EQ(cache.reserved_bytes(), 20 * kMiB);
  EXPECT_THAT(b.FetchValues<float>(2), ::testing::Each(3.0f));
  EXPECT_TRUE(b.Close().ok());
  for (int i = 0; i < 3000 && daemon_->service().closing_sessions() > 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  b.Finish();
  EXPECT_EQ(cache.reserved_bytes(), 0);
  const runtime::CachingAllocator::Stats st = cache.stats();
  EXPECT_EQ(st.maps, 3);
  EXPECT_EQ(st.unmaps, 3);
  EXPECT_EQ(st.cached_bytes, 0);
}

TEST_F(TestDeviceTest, MemoryStatsIsNotASyncPointForErrors) {
  RawSession s(stub_.get());
  s.Upload<float>(1, {3}, ScalarType::kFloat32, {1, 2, 3});
  s.Send(Call(1, "add.Tensor", {T(1), T(99), I(1)}, {2}));  // an unknown handle: the session's error
  v1::ServerMessage m = s.MemoryStats(kCPU);
  ASSERT_TRUE(m.has_ack());
  EXPECT_TRUE(m.ack().errors().empty());
  EXPECT_TRUE(s.PeekSync().errors_pending());  // still waiting for a sync point
  ExpectOneError(s.Sync(), "unknown tensor handle 99");
}

TEST_F(TestDeviceTest, MemoryStatsOfADeviceNotServedOrMalformedIsARequestError) {
  RawSession s(stub_.get());
  struct Case {
    int32_t type, index;
    std::string message;
  };
  const std::vector<Case> cases = {
      {1, 3, "memory_stats: device cuda:3 is not available; this daemon serves cpu, privateuseone:0"},
      {3, 1, "memory_stats: device privateuseone:1 is not available; this daemon serves cpu, privateuseone:0"},
      {1, 2147483647, "memory_stats: device cuda:2147483647 is not available"},
      {2, 0, "memory_stats: device meta is not available: meta tensors exist only in the client"},
      {4, 0, "memory_stats: invalid device type 4 (expected 0..3)"},
      {-1, 0, "memory_stats: invalid device type -1 (expected 0..3)"},
      {0, -1, "memory_stats: negative device index -1"},
  };
  uint64_t id = 100;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    s.Send(MemoryStatsReq(++id, c.type, c.index, /*reset_peak=*/true));
    v1::ServerMessage m;
    ASSERT_TRUE(s.Read(&m));
    ASSERT_TRUE(m.has_error()) << m.DebugString();
    EXPECT_EQ(m.error().request_id(), id);
    EXPECT_EQ(m.error().error().kind(), "RuntimeError");
    EXPECT_EQ(m.error().error().op(), "memory_stats");
    EXPECT_THAT(m.error().error().message(), HasSubstr(c.message));
  }
  // None of it is the session's error, and the session goes on.
  EXPECT_TRUE(s.Sync().empty());
  s.Upload<float>(1, {2}, ScalarType::kFloat32, {1, 2});
  EXPECT_EQ(s.MemoryStats(kCPU).ack().allocated_bytes(), 8u);
}

// A daemon without --test-device names the devices it serves.
class NoTestDeviceTest : public DaemonFixture {};

TEST_F(NoTestDeviceTest, TheTestDeviceIsRefusedWithTheDevicesServed) {
  RawSession s(stub_.get());
  EXPECT_EQ(s.open_response().devices_size(), 1);
  s.Send(UploadReq(1, MetaOn({2}, ScalarType::kFloat32, kDev), Bytes<float>({1, 2})));
  s.Send(Call(1, "zeros", {IL({2}), None(), Dev("privateuseone:0")}, {2}));
  std::vector<v1::Error> errors = s.Sync();
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_THAT(errors[0].message(), HasSubstr("device must be one this daemon serves, got privateuseone:0"));
  EXPECT_THAT(errors[1].message(), HasSubstr("device 'privateuseone:0' is not available: this daemon serves cpu"));
}

TEST_F(NoTestDeviceTest, MemoryStatsOfTheTestDeviceNamesTheDevicesServed) {
  RawSession s(stub_.get());
  v1::ServerMessage m = s.MemoryStats(kDev);
  ASSERT_TRUE(m.has_error()) << m.DebugString();
  EXPECT_EQ(m.error().error().message(), "memory_stats: device privateuseone:0 is not available; this daemon serves cpu");
}

}  // namespace
}  // namespace tensord::testing
