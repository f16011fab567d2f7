// What the daemon does when a device fails for good (a GPU fault leaves the
// process's CUDA context unusable: runtime::ReportDeviceFailure), checked
// without a GPU through the test device's simulated fault
// (DaemonOptions::test_device_fault_at_launch): the op that hit it fails,
// the health service says NOT_SERVING at once, every session's next
// message is refused with the failure (device and reason, "the daemon is
// restarting"), new sessions are refused, and the daemon's hook is called
// once (tensord serve exits there: binary_test.cc). Per-session limits on
// one device: MemoryAccount's own test (tests/runtime/device_limit_test.cc).
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "raw_client.h"
#include "tensord/backends/test_device/test_device_backend.h"
#include "tensord/runtime/backend.h"

namespace tensord::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kFault[] =
    "privateuseone:0 failed (a simulated fault at kernel launch 2 (TENSORD_TEST_DEVICE_FAULT_AT_LAUNCH))";

v1::TensorMetaProto DeviceMeta(int64_t n) {
  v1::TensorMetaProto p;
  wire::ToProto(TensorMeta::Contiguous(Shape{n}, ScalarType::kFloat32, backends::kTestDevice), &p);
  return p;
}

// What a session sees once its stream is ended: the final status, and the
// StreamEnd message when one came first.
grpc::Status EndOf(RawSession& s) {
  v1::ServerMessage m;
  while (s.Read(&m)) {
    if (m.has_stream_end()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, m.stream_end().message());
  }
  return s.stream()->Finish();
}

class DeviceFailureTest : public DaemonFixture {
 protected:
  void SetUp() override {
    test_device_ = true;
    test_device_fault_at_launch_ = 2;
    on_device_failure_ = [this](const std::string& why) {
      std::lock_guard<std::mutex> lock(mu_);
      hook_calls_.push_back(why);
    };
    StartDaemon(0);
  }
  std::vector<std::string> HookCalls() {
    std::lock_guard<std::mutex> lock(mu_);
    return hook_calls_;
  }
  grpc::health::v1::HealthCheckResponse::ServingStatus Health() {
    auto stub = grpc::health::v1::Health::NewStub(channel_);
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse resp;
    const grpc::Status st = stub->Check(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.status();
  }

  std::mutex mu_;
  std::vector<std::string> hook_calls_;
};

TEST_F(DeviceFailureTest, EverySessionGetsTheFailureHealthSaysNotServingAndTheHookRunsOnce) {
  RawSession gpu(stub_.get());    // hits the fault
  RawSession other(stub_.get());  // works on the cpu meanwhile
  gpu.Send(UploadReq(1, DeviceMeta(4), Bytes<float>({1, 2, 3, 4})));
  gpu.Send(Call(1, "mul.Scalar", {T(1), F(2.0)}, {2}));  // launch 1: fine
  EXPECT_TRUE(gpu.Sync().empty());
  EXPECT_THAT(gpu.FetchValues<float>(2), ::testing::ElementsAre(2, 4, 6, 8));
  other.Upload<float>(1, {2}, ScalarType::kFloat32, {5, 6});
  EXPECT_TRUE(other.Sync().empty());
  EXPECT_EQ(Health(), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_TRUE(HookCalls().empty());
  EXPECT_FALSE(runtime::DeviceFailed());

  gpu.Send(Call(2, "add.Scalar", {T(2), F(1.0), I(1)}, {3}));  // launch 2: the fault
  // The hook has run once the call's message is done; the next message of
  // every session is refused.
  const grpc::Status gpu_end = [&] {
    v1::Request r;
    r.mutable_sync()->set_request_id(99);
    gpu.Send(r);
    return EndOf(gpu);
  }();
  EXPECT_EQ(gpu_end.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(gpu_end.error_message(), std::string(kFault) + "; the daemon is restarting");
  ASSERT_EQ(HookCalls(), std::vector<std::string>{kFault});
  EXPECT_TRUE(runtime::DeviceFailed());
  EXPECT_EQ(runtime::DeviceFailure().message(), kFault);
  EXPECT_EQ(Health(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);

  // A session that never touched the device is told too, at its next message.
  other.Send(Call(1, "neg", {T(1)}, {2}));
  const grpc::Status other_end = EndOf(other);
  EXPECT_EQ(other_end.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(other_end.error_message(), HasSubstr(std::string(kFault) + "; the daemon is restarting"));

  // No new session.
  grpc::ClientContext ctx;
  v1::OpenSessionRequest req;
  req.set_client_name("late");
  req.set_op_table_digest(OpTable::Get().digest());
  v1::OpenSessionResponse resp;
  const grpc::Status refused = stub_->OpenSession(&ctx, req, &resp);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(refused.error_message(), HasSubstr(kFault));
  EXPECT_EQ(HookCalls().size(), 1u);  // reported once, whoever saw it since
}

TEST_F(DeviceFailureTest, AShutdownAfterTheFailureTellsIdleSessionsWhy) {
  RawSession gpu(stub_.get());
  RawSession idle(stub_.get());  // sends nothing after the fault
  gpu.Send(UploadReq(1, DeviceMeta(2), Bytes<float>({1, 2})));
  gpu.Send(Call(1, "neg", {T(1)}, {2}));
  gpu.Send(Call(2, "neg", {T(2)}, {3}));  // launch 2: the fault
  v1::Request sync;
  sync.mutable_sync()->set_request_id(7);
  gpu.Send(sync);
  EXPECT_EQ(EndOf(gpu).error_message(), std::string(kFault) + "; the daemon is restarting");
  // What tensord serve does next (main.cc): shut down, then exit.
  daemon_->Shutdown();
  const grpc::Status idle_end = EndOf(idle);
  EXPECT_EQ(idle_end.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(idle_end.error_message(), std::string(kFault) + "; the daemon is restarting");
  // The daemon's handler is gone with it: the next daemon starts clean.
  EXPECT_FALSE(runtime::DeviceFailed());
}

TEST_F(DeviceFailureTest, ADaemonWithoutTheFaultServesTheDeviceAsUsual) {
  test_device_fault_at_launch_ = 0;
  StartDaemon(0);
  RawSession s(stub_.get());
  s.Send(UploadReq(1, DeviceMeta(2), Bytes<float>({1, 2})));
  for (uint64_t i = 1; i <= 5; ++i) s.Send(Call(i, "neg", {T(i)}, {i + 1}));
  EXPECT_TRUE(s.Sync().empty());
  EXPECT_THAT(s.FetchValues<float>(6), ::testing::ElementsAre(-1, -2));
  EXPECT_TRUE(HookCalls().empty());
  EXPECT_EQ(Health(), grpc::health::v1::HealthCheckResponse::SERVING);
}

}  // namespace
}  // namespace tensord::testing
