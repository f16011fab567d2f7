// Tests of the C++ client (client/): meta mode without a daemon, and against
// a daemon spawned from $TENSORD_BIN on a private Unix socket: op values,
// release batching, deferred errors with op name and call site, O(1) round
// trips, data-dependent ops, chunked uploads, sessions and the handshake.
#include <grpcpp/grpcpp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <csignal>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <thread>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "fetch_buffers.h"  // client/src: the fetch buffer cache
#include "daemon_fixture.h"
#include "tensord/client/client.h"
#include "tensord/meta/errors.h"
#include "tensord/v1/tensord.grpc.pb.h"

namespace tc = tensord::client;
using tensord::ErrorKind;
using tensord::KindOf;
using tensord::ScalarType;
using tensord::Shape;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

using tensord::client::testing::DaemonTest;

std::vector<double> Values(const tc::Tensor& t) {
  auto d = t.Fetch();
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? d->ToDoubles() : std::vector<double>{};
}

// ---------------------------------------------------------------- meta mode

TEST(MetaMode, NeedsNoDaemon) {
  const int64_t before = tc::MetaOpsRun();
  tc::DeviceGuard meta(tensord::kMetaDevice);
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, tc::Randn({8, 4}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor w, tc::Randn({2, 4}));
  EXPECT_TRUE(x.is_meta());
  EXPECT_EQ(x.session(), nullptr);
  ASSERT_OK_AND_ASSIGN(tc::Tensor wt, tc::T(w));
  ASSERT_OK_AND_ASSIGN(tc::Tensor y, tc::Matmul(x, wt));
  EXPECT_EQ(y.sizes(), (Shape{8, 2}));
  EXPECT_EQ(y.strides(), (Shape{2, 1}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor s, tc::Sum(x, std::vector<int64_t>{0}));
  EXPECT_EQ(s.sizes(), (Shape{4}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor p, tc::Call1("add", {x, 1}));
  EXPECT_EQ(p.sizes(), (Shape{8, 4}));
  EXPECT_EQ(p.dtype(), ScalarType::kFloat32);
  EXPECT_GE(tc::MetaOpsRun() - before, 6);
  // No session was ever needed.
  EXPECT_EQ(tc::DefaultSessionIfAny(), nullptr);
}

TEST(MetaMode, ViewsGiveStridesAndOffsets) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, tc::Zeros({3, 4}, ScalarType::kFloat32, tensord::kMetaDevice));
  ASSERT_OK_AND_ASSIGN(tc::Tensor v, tc::Index(x, {tc::Slice{1, std::nullopt, std::nullopt},
                                                   tc::Slice{std::nullopt, std::nullopt, 2}}));
  EXPECT_EQ(v.sizes(), (Shape{2, 2}));
  EXPECT_EQ(v.strides(), (Shape{4, 2}));
  EXPECT_EQ(v.storage_offset(), 4);
  ASSERT_OK_AND_ASSIGN(tc::Tensor e, tc::Index(x, {tc::EllipsisIndex{}, tc::NoneIndex{}, int64_t{1}}));
  EXPECT_EQ(e.sizes(), (Shape{3, 1}));
  EXPECT_EQ(e.storage_offset(), 1);
  auto too_many = tc::Index(x, {int64_t{0}, int64_t{0}, int64_t{0}});
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(KindOf(too_many.status()), ErrorKind::kIndex);
  EXPECT_THAT(too_many.status().message(), HasSubstr("too many indices for tensor of dimension 2"));
  ASSERT_OK_AND_ASSIGN(tc::Tensor vv, tc::Call1("view", {x, 2, 6}, {}, tc::CallMode::kMethod));  // varargs ints
  EXPECT_EQ(vv.sizes(), (Shape{2, 6}));
}

TEST(MetaMode, ShapeErrorsAtTheCallSite) {
  tc::DeviceGuard meta(tensord::kMetaDevice);
  ASSERT_OK_AND_ASSIGN(tc::Tensor a, tc::Randn({8, 4}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor b, tc::Randn({3, 2}));
  auto r = tc::Matmul(a, b);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(KindOf(r.status()), ErrorKind::kRuntime);
  EXPECT_EQ(r.status().message(), "matmul: size mismatch, self is [8, 4], other is [3, 2] (4 != 3)");
}

TEST(MetaMode, DataDependentOpsRaiseNotImplemented) {
  tc::DeviceGuard meta(tensord::kMetaDevice);
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, tc::Randn({3, 4}));
  auto nz = tc::Call("nonzero", {x});
  ASSERT_FALSE(nz.ok());
  EXPECT_EQ(KindOf(nz.status()), ErrorKind::kNotImplemented);
  EXPECT_THAT(nz.status().message(), HasSubstr("nonzero"));
  EXPECT_THAT(nz.status().message(), HasSubstr("depends on the data"));
  auto item = x.Item();
  ASSERT_FALSE(item.ok());
  EXPECT_EQ(KindOf(item.status()), ErrorKind::kNotImplemented);
  EXPECT_THAT(item.status().message(), HasSubstr("item"));
  ASSERT_OK_AND_ASSIGN(tc::Tensor mask, tc::Call1("gt", {x, 0}));
  auto sel = tc::Index(x, {mask});
  ASSERT_FALSE(sel.ok());
  EXPECT_EQ(KindOf(sel.status()), ErrorKind::kNotImplemented);
  EXPECT_THAT(sel.status().message(), HasSubstr("masked_select"));
  auto to_cpu = tc::To(x, tensord::kCPU);
  ASSERT_FALSE(to_cpu.ok());
  EXPECT_THAT(to_cpu.status().message(), HasSubstr("empty_like"));
}

TEST(MetaMode, OverloadResolutionPicksScalarForNumbers) {
  tc::DeviceGuard meta(tensord::kMetaDevice);
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, tc::Zeros({2}, ScalarType::kInt32));
  ASSERT_OK_AND_ASSIGN(tc::Tensor y, tc::Call1("add", {x, 2.5}));  // add.Scalar: int32 + float -> float32
  EXPECT_EQ(y.dtype(), ScalarType::kFloat32);
  ASSERT_OK_AND_ASSIGN(tc::Tensor z, tc::Call1("add", {x, 2}));  // int32 + int -> int32
  EXPECT_EQ(z.dtype(), ScalarType::kInt32);
  auto bad = tc::Call("add", {x, "nope"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(KindOf(bad.status()), ErrorKind::kType);
  EXPECT_THAT(bad.status().message(), HasSubstr("add() received an invalid combination of arguments"));
  auto unknown = tc::Call("no_such_op", {x});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("no_such_op"));
}

// ---------------------------------------------------------------- meta cache

// The difference in this thread's meta cache counters since `before`.
struct CacheDelta {
  int64_t hits, misses;
};
CacheDelta Since(const tc::MetaCacheInfo& before) {
  const tc::MetaCacheInfo now = tc::GetMetaCacheInfo();
  return {now.hits - before.hits, now.misses - before.misses};
}

TEST(MetaCache, RepeatedCallsHitWithFreshIdenticalResults) {
  tc::ClearMetaCache();
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, tc::Zeros({4, 6}, ScalarType::kFloat32, tensord::kMetaDevice));
  const tc::MetaCacheInfo before = tc::GetMetaCacheInfo();
  ASSERT_OK_AND_ASSIGN(tc::Tensor v1, tc::Call1("transpose", {x, 0, 1}, {}, tc::CallMode::kMethod));
  ASSERT_OK_AND_ASSIGN(tc::Tensor v2, tc::Call1("transpose", {x, 0, 1}, {}, tc::CallMode::kMethod));
  EXPECT_EQ(Since(before).misses, 1);
  EXPECT_EQ(Since(before).hits, 1);
  EXPECT_EQ(v1.meta(), v2.meta());
  EXPECT_EQ(v2.strides(), (Shape{1, 6}));
  EXPECT_NE(v1.impl(), v2.impl());  // a new tensor per call
  EXPECT_EQ(v2.storage_id(), x.storage_id());  // a view of x, also when answered from the cache
  // The same op on another tensor with the same metadata hits, and its view
  // aliases that tensor, not the one the entry was made from.
  ASSERT_OK_AND_ASSIGN(tc::Tensor y, tc::Zeros({4, 6}, ScalarType::kFloat32, tensord::kMetaDevice));
  const tc::MetaCacheInfo before_v3 = tc::GetMetaCacheInfo();
  ASSERT_OK_AND_ASSIGN(tc::Tensor v3, tc::Call1("transpose", {y, 0, 1}, {}, tc::CallMode::kMethod));
  EXPECT_EQ(Since(before_v3).hits, 1);
  EXPECT_EQ(v3.storage_id(), y.storage_id());
  // A copy is fresh storage on every hit.
  ASSERT_OK_AND_ASSIGN(tc::Tensor c1, tc::Call1("add", {x, x}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor c2, tc::Call1("add", {x, x}));
  EXPECT_NE(c1.storage_id(), c2.storage_id());
  EXPECT_NE(c2.storage_id(), x.storage_id());
}

TEST(MetaCache, KeyHoldsEverythingThatDecidesTheResult) {
  tc::ClearMetaCache();
  ASSERT_OK_AND_ASSIGN(tc::Tensor xi, tc::Zeros({2, 3}, ScalarType::kInt32, tensord::kMetaDevice));
  ASSERT_OK_AND_ASSIGN(tc::Tensor a, tc::Call1("add", {xi, 2}));
  EXPECT_EQ(a.dtype(), ScalarType::kInt32);
  ASSERT_OK_AND_ASSIGN(tc::Tensor b, tc::Call1("add", {xi, 2.0}));  // a float scalar: another entry
  EXPECT_EQ(b.dtype(), ScalarType::kFloat32);
  ASSERT_OK_AND_ASSIGN(tc::Tensor c, tc::Call1("add", {xi, true}));
  EXPECT_EQ(c.dtype(), ScalarType::kInt32);
  // Strides and offsets are part of the key: a transposed input keeps its layout.
  ASSERT_OK_AND_ASSIGN(tc::Tensor xt, tc::Call1("t", {xi}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor d, tc::Call1("add", {xt, 2}));
  EXPECT_EQ(d.strides(), (Shape{1, 3}));  // xt's layout, not the contiguous entry's
  ASSERT_OK_AND_ASSIGN(tc::Tensor xc, tc::Call1("contiguous", {xt}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor dc, tc::Call1("add", {xc, 2}));
  EXPECT_EQ(dc.strides(), (Shape{2, 1}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor row, tc::Call1("select", {xi, 0, 1}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor row0, tc::Call1("select", {xi, 0, 0}));
  EXPECT_EQ(row.storage_offset(), 3);
  EXPECT_EQ(row0.storage_offset(), 0);
  ASSERT_OK_AND_ASSIGN(tc::Tensor e, tc::Call1("view", {row, -1}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor e0, tc::Call1("view", {row0, -1}));
  EXPECT_EQ(e.storage_offset(), 3);
  EXPECT_EQ(e0.storage_offset(), 0);
  // Keywords by name: sum(dim=1) and sum(dim=1, keepdim=True) differ.
  ASSERT_OK_AND_ASSIGN(tc::Tensor s1, tc::Call1("sum", {xi}, {{"dim", std::vector<int64_t>{1}}}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor s2, tc::Call1("sum", {xi}, {{"dim", std::vector<int64_t>{1}}, {"keepdim", true}}));
  EXPECT_EQ(s1.sizes(), (Shape{2}));
  EXPECT_EQ(s2.sizes(), (Shape{2, 1}));
}

TEST(MetaCache, ErrorsAreNotCachedAndRepeatExactly) {
  tc::ClearMetaCache();
  tc::DeviceGuard meta(tensord::kMetaDevice);
  ASSERT_OK_AND_ASSIGN(tc::Tensor a, tc::Randn({8, 4}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor b, tc::Randn({3, 2}));
  const tc::MetaCacheInfo before = tc::GetMetaCacheInfo();
  for (int i = 0; i < 2; ++i) {
    auto r = tc::Matmul(a, b);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message(), "matmul: size mismatch, self is [8, 4], other is [3, 2] (4 != 3)");
  }
  EXPECT_EQ(Since(before).hits, 0);
  EXPECT_EQ(tc::GetMetaCacheInfo().size, before.size);
}

TEST(MetaCache, AutogradIsAppliedPerCall) {
  tc::ClearMetaCache();
  tc::DeviceGuard meta(tensord::kMetaDevice);
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, tc::Randn({3, 4}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor plain, tc::Call1("mul", {x, 2}));
  EXPECT_FALSE(plain.requires_grad());
  ASSERT_OK_AND_ASSIGN(tc::Tensor w, tc::Randn({3, 4}));
  ASSERT_TRUE(w.SetRequiresGrad(true).ok());
  const tc::MetaCacheInfo before = tc::GetMetaCacheInfo();
  ASSERT_OK_AND_ASSIGN(tc::Tensor y, tc::Call1("mul", {w, 2}));  // a hit: same metadata as x
  EXPECT_EQ(Since(before).hits, 1);
  EXPECT_TRUE(y.requires_grad());
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name, "MulBackward0");
  ASSERT_OK_AND_ASSIGN(tc::Tensor v, tc::Call1("transpose", {w, 0, 1}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor v2, tc::Call1("transpose", {w, 0, 1}));
  EXPECT_EQ(v2.grad_fn()->name, "TransposeBackward0");
  tc::SetGradEnabled(false);
  ASSERT_OK_AND_ASSIGN(tc::Tensor z, tc::Call1("mul", {w, 2}));
  tc::SetGradEnabled(true);
  EXPECT_FALSE(z.requires_grad());
  // An in-place op: the entry made on a tensor that needs no grad still
  // refuses a leaf that does, and gives back the written tensor itself.
  ASSERT_OK_AND_ASSIGN(tc::Tensor r, tc::Call1("add_", {x, 1}, {}, tc::CallMode::kMethod));
  EXPECT_EQ(r.impl(), x.impl());
  auto bad = tc::Call1("add_", {w, 1}, {}, tc::CallMode::kMethod);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("a leaf Variable that requires grad"));
}

TEST(MetaCache, SameTensorTwiceIsAnotherKey) {
  tc::ClearMetaCache();
  tc::DeviceGuard meta(tensord::kMetaDevice);
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, tc::Randn({5}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor y, tc::Randn({5}));
  const tc::MetaCacheInfo before = tc::GetMetaCacheInfo();
  ASSERT_OK_AND_ASSIGN(tc::Tensor a, tc::Call1("add_", {x, x}, {}, tc::CallMode::kMethod));
  ASSERT_OK_AND_ASSIGN(tc::Tensor b, tc::Call1("add_", {y, x}, {}, tc::CallMode::kMethod));
  EXPECT_EQ(Since(before).misses, 2);
  EXPECT_EQ(a.impl(), x.impl());
  EXPECT_EQ(b.impl(), y.impl());  // the written tensor of this call, not the cached call's
  ASSERT_OK_AND_ASSIGN(tc::Tensor c, tc::Call1("add_", {x, y}, {}, tc::CallMode::kMethod));
  EXPECT_EQ(Since(before).hits, 1);
  EXPECT_EQ(c.impl(), x.impl());
}

TEST(MetaCache, CanBeTurnedOff) {
  tc::ClearMetaCache();
  tc::SetMetaCacheEnabled(false);
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, tc::Zeros({4}, ScalarType::kFloat32, tensord::kMetaDevice));
  ASSERT_OK_AND_ASSIGN(tc::Tensor a, tc::Call1("neg", {x}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor b, tc::Call1("neg", {x}));
  EXPECT_EQ(a.meta(), b.meta());
  EXPECT_EQ(tc::GetMetaCacheInfo().hits, 0);
  EXPECT_EQ(tc::GetMetaCacheInfo().size, 0);
  EXPECT_FALSE(tc::GetMetaCacheInfo().enabled);
  tc::SetMetaCacheEnabled(true);
}

TEST(HostData, DecodesHalfBFloat16AndFloat8) {
  EXPECT_EQ(tc::HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(tc::HalfToFloat(0xc000), -2.0f);
  EXPECT_EQ(tc::HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(tc::HalfToFloat(0x7c00)));
  EXPECT_EQ(tc::BFloat16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(tc::Float8E4M3FNToFloat(0x38), 1.0f);     // exp 7, mant 0
  EXPECT_EQ(tc::Float8E4M3FNToFloat(0x7e), 448.0f);   // the largest e4m3fn
  EXPECT_TRUE(std::isnan(tc::Float8E4M3FNToFloat(0x7f)));
  EXPECT_EQ(tc::Float8E4M3FNToFloat(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(tc::Float8E5M2ToFloat(0x3c), 1.0f);
  EXPECT_EQ(tc::Float8E5M2ToFloat(0x7b), 57344.0f);
}

TEST(Connect, UnreachableDaemonIsAClearError) {
  auto s = tc::Session::Connect("unix:/nonexistent/tensord-test.sock");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(KindOf(s.status()), ErrorKind::kRuntime);
  EXPECT_THAT(s.status().message(), HasSubstr("unix:/nonexistent/tensord-test.sock"));
}

// A fake daemon that refuses the handshake, as a daemon with another op
// table does.
class RefusingService final : public tensord::v1::Tensord::Service {
  grpc::Status Handshake(grpc::ServerContext*, const tensord::v1::HandshakeRequest* req,
                         tensord::v1::HandshakeResponse* resp) override {
    last_ops = req->op_table_size();
    resp->set_accepted(false);
    resp->set_refusal("op tables differ (client has 118 ops, daemon has 117 ops): daemon lacks 'x'");
    return grpc::Status::OK;
  }

 public:
  int last_ops = 0;
};

TEST(Connect, HandshakeRefusalSaysWhatDiffers) {
  RefusingService service;
  std::string path = "/tmp/tensord-client-test-" + std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  b.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto s = tc::Session::Connect("unix:" + path);
  server->Shutdown();
  ::unlink(path.c_str());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("refused"));
  EXPECT_THAT(s.status().message(), HasSubstr("daemon lacks 'x'"));
  EXPECT_EQ(service.last_ops, static_cast<int>(tensord::OpTable::Get().size()));
}

// A fake daemon that accepts the handshake and opens one session.
class AcceptingService final : public tensord::v1::Tensord::Service {
  grpc::Status Handshake(grpc::ServerContext*, const tensord::v1::HandshakeRequest* req,
                         tensord::v1::HandshakeResponse* resp) override {
    resp->set_accepted(true);
    resp->set_protocol_version(req->protocol_version());
    resp->set_op_table_digest(req->op_table_digest());
    return grpc::Status::OK;
  }
  grpc::Status OpenSession(grpc::ServerContext*, const tensord::v1::OpenSessionRequest*,
                           tensord::v1::OpenSessionResponse* resp) override {
    resp->set_session_id(7);
    resp->set_token("the-secret-token");
    return grpc::Status::OK;
  }
};

// Something of another user than the daemon's listens at the daemon's
// side-channel path (PATH.shm): connect fails saying so, naming the path and
// both users, and the listener never gets the session's token. The daemon's
// user is the owner of its socket: chowned here to another user, which
// needs root.
TEST(Connect, ASideChannelOfAnotherUserIsRefusedLoudly) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (chown of the daemon's socket to another user)";
  AcceptingService service;
  char tmpl[] = "/tmp/tensord-client-squat-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string path = dir + "/td.sock";
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  b.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0) << std::strerror(errno);
  const int squatter = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, (path + ".shm").c_str(), sizeof(sa.sun_path) - 1);
  ASSERT_EQ(::bind(squatter, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  ASSERT_EQ(::listen(squatter, 8), 0);
  for (const char* off : {"", "TENSORD_SHM"}) {  // the shared-memory channel, then the same-host stream
    SCOPED_TRACE(off);
    if (*off != '\0') ::setenv(off, "0", 1);
    auto s = tc::Session::Connect("unix:" + path);
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.status().message(), HasSubstr("refusing the side channel " + path + ".shm"));
    EXPECT_THAT(s.status().message(), HasSubstr("runs as uid 0, but the daemon runs as uid 65534"));
    const int conn = ::accept4(squatter, nullptr, nullptr, SOCK_CLOEXEC);
    ASSERT_GE(conn, 0);
    char buf[256];
    EXPECT_EQ(::recv(conn, buf, sizeof(buf), 0), 0);  // nothing, and the end
    ::close(conn);
  }
  ::unsetenv("TENSORD_SHM");
  ::close(squatter);
  server->Shutdown();
  std::filesystem::remove_all(dir);
}

// ---------------------------------------------------------------- with a daemon

class WithDaemon : public DaemonTest {
 protected:
  // Replaces the test's session by one that sends only full batches and sync
  // points (no time flush), for tests that count messages exactly.
  void UseBatchOnlySession() {
    guard_.reset();
    session_->Close().IgnoreError();
    tc::SessionOptions o;
    o.flush_interval_us = 0;
    session_ = Open(o);
    ASSERT_NE(session_, nullptr);
    guard_ = std::make_unique<tc::SessionGuard>(session_);
  }
};

TEST_F(WithDaemon, MetaCacheKeyHoldsTheDeviceGuard) {
  tc::ClearMetaCache();
  {
    tc::DeviceGuard meta(tensord::kMetaDevice);
    ASSERT_OK_AND_ASSIGN(tc::Tensor z, tc::Call1("zeros", {Shape{2}}, {}, tc::CallMode::kFunction));
    EXPECT_TRUE(z.is_meta());
  }
  tc::DeviceGuard meta(tensord::kMetaDevice);
  tc::DeviceGuard cpu(tensord::kCPU);  // the innermost guard wins: not the meta entry
  ASSERT_OK_AND_ASSIGN(tc::Tensor z, tc::Call1("zeros", {Shape{2}}, {}, tc::CallMode::kFunction));
  EXPECT_FALSE(z.is_meta());
  EXPECT_EQ(Values(z), (std::vector<double>{0, 0}));
  EXPECT_EQ(tc::GetMetaCacheInfo().hits, 0);
}

TEST_F(WithDaemon, EmbeddedDaemonIsPrivate) {
  EXPECT_GT((*daemon_)->daemon_pid(), 0);
  EXPECT_THAT((*daemon_)->address(), HasSubstr("unix:"));
  EXPECT_EQ(session_->daemon_pid(), 0);  // connected, not spawned
  EXPECT_NE(session_->session_id(), (*daemon_)->session_id());
}

TEST_F(WithDaemon, OpsComputeExpectedValues) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor a, tc::FromVector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor b, tc::FromVector(std::vector<float>{1, 0, 0, 1, 1, 1}, {3, 2}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor c, tc::Matmul(a, b));
  EXPECT_EQ(c.sizes(), (Shape{2, 2}));
  EXPECT_EQ(Values(c), (std::vector<double>{4, 5, 10, 11}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor s, tc::Sum(c));
  ASSERT_OK_AND_ASSIGN(tensord::Scalar v, s.Item());
  EXPECT_DOUBLE_EQ(v.to_double(), 30.0);
  // Broadcasting add of a column and a row; a view (transpose) as input.
  ASSERT_OK_AND_ASSIGN(tc::Tensor col, tc::FromVector(std::vector<float>{10, 20}, {2, 1}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor at, tc::T(a));
  ASSERT_OK_AND_ASSIGN(tc::Tensor atT, tc::T(at));
  ASSERT_OK_AND_ASSIGN(tc::Tensor sum, tc::Add(atT, col));
  EXPECT_EQ(Values(sum), (std::vector<double>{11, 12, 13, 24, 25, 26}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor idx, tc::Index(a, {int64_t{1}, tc::Slice{std::nullopt, std::nullopt, 2}}));
  EXPECT_EQ(Values(idx), (std::vector<double>{4, 6}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor r, tc::Arange(tensord::Scalar::Int(6)));
  EXPECT_EQ(r.dtype(), ScalarType::kInt64);
  ASSERT_OK_AND_ASSIGN(tc::Tensor fd, tc::FloorDivide(r, tc::Arg(-4)));
  EXPECT_EQ(fd.dtype(), ScalarType::kInt64);
  EXPECT_EQ(Values(fd), (std::vector<double>{0, -1, -1, -1, -1, -2}));
  // max.dim returns (values, indices).
  ASSERT_OK_AND_ASSIGN(std::vector<tc::Tensor> mx, tc::Call("max", {a, 1}, {}, tc::CallMode::kMethod));
  ASSERT_EQ(mx.size(), 2u);
  EXPECT_EQ(Values(mx[0]), (std::vector<double>{3, 6}));
  EXPECT_EQ(Values(mx[1]), (std::vector<double>{2, 2}));
  EXPECT_TRUE(session_->Synchronize().ok());
}

TEST_F(WithDaemon, PredictedMetaEqualsDaemonMeta) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, tc::Randn({4, 6}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor t, tc::Call1("transpose", {x, 0, 1}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor v, tc::Index(t, {tc::Slice{1, 5, 2}}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor e, tc::Call1("exp", {v}));
  for (const tc::Tensor& y : {x, t, v, e}) {
    ASSERT_OK_AND_ASSIGN(tensord::TensorMeta real, y.DaemonMeta());
    EXPECT_EQ(real, y.meta()) << real.ToString() << " vs " << y.meta().ToString();
  }
}

TEST_F(WithDaemon, DataDependentOpsAskTheDaemon) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, tc::FromVector(std::vector<float>{0, 1, 0, 2, 3, 0}, {2, 3}));
  const tc::Stats before = session_->stats();
  ASSERT_OK_AND_ASSIGN(tc::Tensor nz, tc::Call1("nonzero", {x}));
  EXPECT_EQ(session_->stats().round_trips - before.round_trips, 1);
  EXPECT_EQ(nz.sizes(), (Shape{3, 2}));
  EXPECT_EQ(nz.dtype(), ScalarType::kInt64);
  EXPECT_EQ(Values(nz), (std::vector<double>{0, 1, 1, 0, 1, 1}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor mask, tc::Call1("gt", {x, 0}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor sel, tc::Index(x, {mask}));
  EXPECT_EQ(sel.sizes(), (Shape{3}));
  EXPECT_EQ(Values(sel), (std::vector<double>{1, 2, 3}));
  // A mask over the first dim only goes through nonzero + index.
  ASSERT_OK_AND_ASSIGN(tc::Tensor rows, tc::FromVector(std::vector<int64_t>{0, 1}, {2}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor rmask, tc::Call1("eq", {rows, 1}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor second, tc::Index(x, {rmask}));
  EXPECT_EQ(second.sizes(), (Shape{1, 3}));
  EXPECT_EQ(Values(second), (std::vector<double>{2, 3, 0}));
}

TEST_F(WithDaemon, ThousandSmallOpsCostOneRoundTrip) {
  UseBatchOnlySession();
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, tc::Zeros({4}));
  const tc::Stats before = session_->stats();
  for (int i = 0; i < 1000; ++i) {
    ASSERT_OK_AND_ASSIGN(x, tc::Call1("add", {x, 1}));
  }
  ASSERT_OK_AND_ASSIGN(tc::Tensor s, tc::Sum(x));
  ASSERT_OK_AND_ASSIGN(tensord::Scalar v, s.Item());
  EXPECT_DOUBLE_EQ(v.to_double(), 4000.0);
  const tc::Stats after = session_->stats();
  EXPECT_EQ(after.ops_issued - before.ops_issued, 1001);
  EXPECT_EQ(after.round_trips - before.round_trips, 1);
  // 1,001 calls in batches of 128 plus the fetch: at most 9 messages.
  EXPECT_LE(after.messages_sent - before.messages_sent, 9);
}

TEST_F(WithDaemon, ReleasesAreBatchedAndPiggyBacked) {
  UseBatchOnlySession();
  uint64_t dropped = 0;
  const tc::Stats before = session_->stats();
  {
    ASSERT_OK_AND_ASSIGN(tc::Tensor x, tc::Zeros({2}));
    dropped = x.handle();
  }
  // Nothing was sent for the release alone.
  EXPECT_EQ(session_->stats().messages_sent, before.messages_sent);
  for (int i = 0; i < 300; ++i) {
    ASSERT_OK_AND_ASSIGN(tc::Tensor tmp, tc::Ones({2}));
  }
  ASSERT_TRUE(session_->Synchronize().ok());
  const tc::Stats after = session_->stats();
  EXPECT_EQ(after.releases - before.releases, 301);
  EXPECT_LE(after.messages_sent - before.messages_sent, 4);  // 3 batches + the sync
  // The daemon forgot the released handle.
  auto gone = session_->Describe(dropped);
  EXPECT_FALSE(gone.ok());
}

TEST_F(WithDaemon, AnOpenBatchIsSentByTheTimeFlush) {
  // The fixture's session has the default time flush: a few ops left alone
  // (no sync point, batch not full) are sent by the flusher. Polls with a
  // generous deadline; no timing threshold.
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, tc::Zeros({4}));
  for (int i = 0; i < 5; ++i) {
    ASSERT_OK_AND_ASSIGN(x, tc::Call1("add", {x, 1}));
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (session_->stats().timed_flushes == 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  const tc::Stats st = session_->stats();
  EXPECT_GE(st.timed_flushes, 1);
  EXPECT_EQ(st.round_trips, 0);
  // Ops keep streaming from several threads while the flusher sends.
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      tc::SessionGuard g(session_);
      for (int i = 0; i < 300; ++i) ASSERT_TRUE(tc::Call1("add", {x, 1}).ok());
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_OK_AND_ASSIGN(tc::Tensor s, tc::Sum(x));
  ASSERT_OK_AND_ASSIGN(tensord::Scalar v, s.Item());
  EXPECT_DOUBLE_EQ(v.to_double(), 20.0);
}

TEST_F(WithDaemon, ABatchOpenedWhileTheFlusherWaitsIsStillSent) {
  // The flusher is woken only by a batch that opens while it is idle. Here
  // the first batch wakes it and goes out with a sync point before its
  // deadline; the second opens while the flusher still sleeps until the
  // first one's deadline, so nothing wakes it: it must find the second batch
  // then and send it when that one is due. Polls with a generous deadline;
  // no timing threshold.
  guard_.reset();
  session_->Close().IgnoreError();
  tc::SessionOptions o;
  o.flush_interval_us = 1000000;
  ASSERT_OK_AND_ASSIGN(session_, tc::Session::Connect((*daemon_)->address(), o));
  guard_ = std::make_unique<tc::SessionGuard>(session_);
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, tc::Zeros({4}));  // opens a batch: wakes the idle flusher
  absl::SleepFor(absl::Milliseconds(100));            // lets it go to sleep until the deadline
  ASSERT_TRUE(session_->Synchronize().ok());          // sends the batch (normally) before then
  ASSERT_OK_AND_ASSIGN(x, tc::Call1("add", {x, 1}));  // opens the next one: no wake-up
  // Only the time flush can send this batch now (no sync point, not full).
  const int64_t sent = session_->stats().messages_sent;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (session_->stats().messages_sent == sent && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  const tc::Stats st = session_->stats();
  EXPECT_EQ(st.messages_sent, sent + 1);
  EXPECT_GE(st.timed_flushes, 1);
  ASSERT_OK_AND_ASSIGN(tc::Tensor s, tc::Sum(x));
  ASSERT_OK_AND_ASSIGN(tensord::Scalar v, s.Item());
  EXPECT_DOUBLE_EQ(v.to_double(), 4.0);
}

// The first batch after a wait (the daemon has nothing of the session's to
// run) is sent once it is 50 us old, by the next call that finds it so; a
// later batch waits for the session's flush interval (a minute here), a
// sync point or a full batch. Sleeps give lower bounds only: no timing
// threshold.
TEST_F(WithDaemon, TheFirstBatchAfterAWaitIsSentSoon) {
  guard_.reset();
  session_->Close().IgnoreError();
  tc::SessionOptions o;
  o.flush_interval_us = 60 * 1000 * 1000;
  ASSERT_OK_AND_ASSIGN(session_, tc::Session::Connect((*daemon_)->address(), o));
  guard_ = std::make_unique<tc::SessionGuard>(session_);
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, tc::Zeros({4}));
  ASSERT_TRUE(session_->Synchronize().ok());
  const tc::Stats before = session_->stats();
  ASSERT_OK_AND_ASSIGN(x, tc::Call1("add", {x, 1}));  // opens the first batch after the wait
  absl::SleepFor(absl::Milliseconds(1));
  ASSERT_OK_AND_ASSIGN(x, tc::Call1("add", {x, 1}));  // finds it due (or the flusher sent it)
  const tc::Stats early = session_->stats();
  EXPECT_EQ(early.messages_sent, before.messages_sent + 1);
  EXPECT_EQ(early.timed_flushes, before.timed_flushes + 1);
  // The daemon has work now: the next batch is not due for a minute.
  ASSERT_OK_AND_ASSIGN(x, tc::Call1("add", {x, 1}));
  absl::SleepFor(absl::Milliseconds(1));
  ASSERT_OK_AND_ASSIGN(x, tc::Call1("add", {x, 1}));
  const tc::Stats later = session_->stats();
  EXPECT_EQ(later.messages_sent, early.messages_sent);
  EXPECT_EQ(later.round_trips, before.round_trips);
  ASSERT_OK_AND_ASSIGN(tc::Tensor total, tc::Sum(x));
  ASSERT_OK_AND_ASSIGN(tensord::Scalar v, total.Item());
  EXPECT_DOUBLE_EQ(v.to_double(), 16.0);
}

// Close returns even while another thread is stuck sending to a daemon that
// stopped reading (SIGSTOP): it ends the stream under the sender after a
// grace period, and that upload fails. On the same-host stream (gRPC's
// stream is not ended by a cancel while its write waits on the stopped
// peer: see Session::Close). The 90 s bound only catches a hang; it is not
// a timing threshold.
TEST_F(WithDaemon, CloseReturnsWhileASendToAStoppedDaemonBlocks) {
  const char* bin = std::getenv("TENSORD_BIN");
  for (bool same_host : {true}) {
    tc::SessionOptions spawn;
    spawn.daemon_binary = bin;
    ASSERT_OK_AND_ASSIGN(std::shared_ptr<tc::Session> owner, tc::Session::SpawnEmbedded(spawn));
    const pid_t pid = owner->daemon_pid();
    ASSERT_GT(pid, 0);
    tc::SessionOptions o;
    o.transport.shared_memory = false;
    o.transport.same_host_stream = same_host;
    ASSERT_OK_AND_ASSIGN(std::shared_ptr<tc::Session> s, tc::Session::Connect(owner->address(), o));
    ASSERT_EQ(::kill(pid, SIGSTOP), 0);
    std::vector<uint8_t> bytes(size_t{64} << 20, 7);
    absl::Status upload;
    std::thread sender([&] {
      tc::SessionGuard use(s);
      upload = tc::FromBlob(bytes.data(), bytes.size(), {static_cast<int64_t>(bytes.size())}, ScalarType::kUInt8)
                   .status();
    });
    absl::SleepFor(absl::Milliseconds(300));  // the sender fills the socket and blocks
    absl::Notification closed;
    absl::Status close_status;
    std::thread closer([&] {
      close_status = s->Close();
      closed.Notify();
    });
    const bool returned = closed.WaitForNotificationWithTimeout(absl::Seconds(90));
    ::kill(pid, SIGCONT);  // lets a hung Close and sender go, so that the test ends either way
    closer.join();
    sender.join();
    EXPECT_TRUE(returned) << (same_host ? "same-host stream" : "gRPC stream");
    EXPECT_FALSE(upload.ok()) << (same_host ? "same-host stream" : "gRPC stream");
    EXPECT_TRUE(s->closed());
    owner->Close().IgnoreError();
  }
}

TEST_F(WithDaemon, DeferredErrorsNameTheOpAndCallSite) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, tc::FromVector(std::vector<float>{1, 2, 3, 4}, {2, 2}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor bad_index, tc::FromVector(std::vector<int64_t>{0, 7, 1, 0}, {2, 2}));
  // The index is out of range: only the kernel can know. The call returns.
  const int line = __LINE__ + 1;
  auto g = tc::Call1("gather", {x, 1, bad_index});
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_OK_AND_ASSIGN(tc::Tensor later, tc::Call1("neg", {*g}));
  // The error surfaces at the sync point that depends on it.
  auto f = later.Fetch();
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.status().message(), HasSubstr("gather"));
  EXPECT_THAT(f.status().message(), HasSubstr("client_test.cc:" + std::to_string(line)));
  // The fetch reported it; a second failure nobody fetched surfaces at the
  // next synchronize(), with its own op and call site.
  ASSERT_OK_AND_ASSIGN(tc::Tensor bad_rows, tc::FromVector(std::vector<int64_t>{0, 9}, {2}));
  const int line2 = __LINE__ + 1;
  auto bad = tc::Call1("index_select", {x, 0, bad_rows});
  ASSERT_TRUE(bad.ok()) << bad.status();
  auto s = session_->Synchronize();
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("index_select"));
  EXPECT_THAT(s.message(), HasSubstr("client_test.cc:" + std::to_string(line2)));
  // Reported once: the next sync is clean, and the session still works.
  EXPECT_TRUE(session_->Synchronize().ok());
  ASSERT_OK_AND_ASSIGN(tc::Tensor ok, tc::Sum(x));
  EXPECT_DOUBLE_EQ((*ok.Item()).to_double(), 10.0);
  // A failure whose output is never read is raised by the next fetch of an
  // unrelated tensor (a fetch is a sync point), once.
  const int line3 = __LINE__ + 1;
  auto dropped = tc::Call1("index_select", {x, 0, bad_rows});
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  auto item = ok.Item();
  ASSERT_FALSE(item.ok());
  EXPECT_EQ(item.status().code(), absl::StatusCode::kOutOfRange) << item.status();
  EXPECT_THAT(item.status().message(), HasSubstr("client_test.cc:" + std::to_string(line3)));
  EXPECT_DOUBLE_EQ((*ok.Item()).to_double(), 10.0);
}

TEST_F(WithDaemon, LargeUploadsAreChunked) {
  tc::SessionOptions stream_only;
  stream_only.transport.shared_memory = false;
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<tc::Session> stream, tc::Session::Connect(session_->address(), stream_only));
  EXPECT_FALSE(stream->uses_shared_memory());
  tc::SessionGuard use(stream);
  const int64_t n = 3 * 1024 * 1024 + 17;  // ~12 MiB of float32
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  const tc::Stats before = stream->stats();
  ASSERT_OK_AND_ASSIGN(tc::Tensor t, tc::FromVector(v, {n}));
  const tc::Stats mid = stream->stats();
  EXPECT_GE(mid.messages_sent - before.messages_sent, 4);  // 4 chunks of at most 4 MiB
  ASSERT_OK_AND_ASSIGN(tc::HostData d, t.Fetch());
  ASSERT_EQ(d.numel(), n);
  EXPECT_EQ(d.data<float>()[n - 1], static_cast<float>(n - 1));
  EXPECT_EQ(std::memcmp(d.byte_data(), v.data(), n * sizeof(float)), 0);
  EXPECT_EQ(stream->stats().shm_uploads + stream->stats().shm_fetches, 0);
}

// Over the stream an upload is sent from the caller's memory without a copy:
// FromBlob returns only once gRPC no longer reads it, so the caller may
// overwrite it at once. Sizes that are 0, below, at and above the chunk
// size, not multiples of it, and odd byte counts round trip exactly.
TEST_F(WithDaemon, StreamedTransfersOfEverySizeRoundTrip) {
  tc::SessionOptions stream_only;
  stream_only.transport.shared_memory = false;
  stream_only.transport.inline_upload_limit = 100;  // most sizes below are chunked
  // Chunks just over the size from which the daemon copies them straight
  // into the storage (wire::kMinBorrowedBytes); smaller ones are parsed whole.
  const size_t chunk = (64 << 10) + 8;
  stream_only.transport.chunk_bytes = chunk;
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<tc::Session> stream, tc::Session::Connect(session_->address(), stream_only));
  tc::SessionGuard use(stream);
  for (size_t n : {size_t{0}, size_t{1}, size_t{101}, chunk - 1, chunk, chunk + 1, 3 * chunk, 40 * chunk + 33,
                   (size_t{7} << 20) + 5}) {
    std::vector<uint8_t> bytes(n);
    for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i * 31 + n);
    const std::vector<uint8_t> expect = bytes;
    const tc::Stats before = stream->stats();
    ASSERT_OK_AND_ASSIGN(tc::Tensor t,
                         tc::FromBlob(bytes.data(), n, {static_cast<int64_t>(n)}, ScalarType::kUInt8));
    const tc::Stats after = stream->stats();
    if (n > 100) {
      EXPECT_GE(after.messages_sent - before.messages_sent, static_cast<int64_t>((n + chunk - 1) / chunk)) << n;
    }
    std::fill(bytes.begin(), bytes.end(), 0xee);  // the daemon has its own copy
    ASSERT_OK_AND_ASSIGN(tc::HostData d, t.Fetch());
    ASSERT_EQ(d.byte_size(), n);
    EXPECT_TRUE(n == 0 || std::memcmp(d.byte_data(), expect.data(), n) == 0) << n;
    // A strided view (the daemon gathers it) of the same data.
    if (n >= 2) {
      ASSERT_OK_AND_ASSIGN(tc::Tensor odd, tc::Call1("slice", {t, 0, 1, static_cast<int64_t>(n), 2}));
      ASSERT_OK_AND_ASSIGN(tc::HostData o, odd.Fetch());
      ASSERT_EQ(o.byte_size(), n / 2);
      for (size_t i = 0; i < n / 2; ++i) ASSERT_EQ(static_cast<uint8_t>(o.byte_data()[i]), expect[1 + 2 * i]) << n;
    }
  }
  EXPECT_EQ(stream->stats().shm_uploads + stream->stats().shm_fetches, 0);
}

// Inline uploads (the data inside the batch's message) of sizes on both
// sides of the one-slice limit (64 KiB) and of the reused write buffer's
// cap (1 MiB), growing and shrinking, two in one message, round trip
// exactly over the same-host stream and over the gRPC stream: the reused
// buffer never leaks one message's bytes into the next.
TEST_F(WithDaemon, InlineUploadsOfEverySizeRoundTripOnEveryStream) {
  for (bool same_host : {true, false}) {
    tc::SessionOptions inline_only;
    inline_only.transport.shared_memory = false;
    inline_only.transport.same_host_stream = same_host;
    inline_only.transport.inline_upload_limit = size_t{2} << 20;
    ASSERT_OK_AND_ASSIGN(std::shared_ptr<tc::Session> s, tc::Session::Connect(session_->address(), inline_only));
    ASSERT_EQ(s->uses_same_host_stream(), same_host);
    tc::SessionGuard use(s);
    for (size_t n : {size_t{65000}, size_t{65536} + 100, size_t{300000}, size_t{70001}, (size_t{1} << 20) + 5,
                     size_t{200000}, size_t{9}}) {
      std::vector<uint8_t> a(n), b(n);
      for (size_t i = 0; i < n; ++i) {
        a[i] = static_cast<uint8_t>(i * 7 + n);
        b[i] = static_cast<uint8_t>(i * 13 + 5);
      }
      const tc::Stats before = s->stats();
      ASSERT_OK_AND_ASSIGN(tc::Tensor ta, tc::FromBlob(a.data(), n, {static_cast<int64_t>(n)}, ScalarType::kUInt8));
      ASSERT_OK_AND_ASSIGN(tc::Tensor tb, tc::FromBlob(b.data(), n, {static_cast<int64_t>(n)}, ScalarType::kUInt8));
      ASSERT_OK_AND_ASSIGN(tc::HostData da, ta.Fetch());
      ASSERT_OK_AND_ASSIGN(tc::HostData db, tb.Fetch());
      EXPECT_EQ(s->stats().uploads - before.uploads, 2);
      ASSERT_EQ(da.byte_size(), n);
      ASSERT_EQ(db.byte_size(), n);
      EXPECT_EQ(std::memcmp(da.byte_data(), a.data(), n), 0) << n << (same_host ? " same-host" : " gRPC");
      EXPECT_EQ(std::memcmp(db.byte_data(), b.data(), n), 0) << n << (same_host ? " same-host" : " gRPC");
    }
    EXPECT_EQ(s->stats().shm_uploads, 0);
  }
}

// A large fetch's buffer, once freed, serves the next fetch of its size
// (no fresh pages for the kernel to zero), holding that fetch's bytes; a
// fetch of another size gets a buffer of its own.
TEST_F(WithDaemon, AFreedFetchBufferIsReusedByTheNextFetchOfItsSize) {
  tc::SessionOptions stream_only;
  stream_only.transport.shared_memory = false;
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<tc::Session> stream, tc::Session::Connect(session_->address(), stream_only));
  tc::SessionGuard use(stream);
  const int64_t n = (5 << 20) / 4 + 3;  // 5 MiB of float32 and then some: a 6 MiB buffer
  std::vector<float> a(n), b(n);
  std::iota(a.begin(), a.end(), 1.0f);
  std::iota(b.begin(), b.end(), -5.0f);
  ASSERT_OK_AND_ASSIGN(tc::Tensor ta, tc::FromVector(a, {n}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor tb, tc::FromVector(b, {n}));
  const void* first = nullptr;
  {
    ASSERT_OK_AND_ASSIGN(tc::HostData d, ta.Fetch());
    ASSERT_EQ(std::memcmp(d.byte_data(), a.data(), n * sizeof(float)), 0);
    first = d.byte_data();
  }
  const tc::internal::FetchBufferCacheStats freed = tc::internal::GetFetchBufferCacheStats();
  EXPECT_GE(freed.blocks, 1u);
  ASSERT_OK_AND_ASSIGN(tc::HostData d, tb.Fetch());
  const tc::internal::FetchBufferCacheStats reused = tc::internal::GetFetchBufferCacheStats();
  EXPECT_EQ(reused.hits, freed.hits + 1);
  EXPECT_EQ(reused.blocks, freed.blocks - 1);
  EXPECT_EQ(d.byte_data(), first);
  EXPECT_EQ(std::memcmp(d.byte_data(), b.data(), n * sizeof(float)), 0);
  // Another size (3 MiB: a 4 MiB buffer): not from the cache.
  const int64_t m = (3 << 20) / 4;
  ASSERT_OK_AND_ASSIGN(tc::Tensor head, tc::Call1("slice", {tb, 0, 0, m, 1}));
  ASSERT_OK_AND_ASSIGN(tc::HostData e, head.Fetch());
  EXPECT_EQ(tc::internal::GetFetchBufferCacheStats().hits, reused.hits);
  EXPECT_EQ(std::memcmp(e.byte_data(), b.data(), m * sizeof(float)), 0);
}

TEST_F(WithDaemon, ARepeatedCallSiteIsNamedOnEveryPass) {
  // A C++ call site travels once per stream, then as its interned id (looked
  // up by file and line): an op that fails on a later pass through a line
  // names that line, not another line that was interned in between.
  ASSERT_OK_AND_ASSIGN(tc::Tensor rows, tc::FromVector(std::vector<int64_t>{0, 2}, {2}));
  int loop_line = 0, other_line = 0;
  for (int64_t n : {3, 4, 1}) {  // index 2 >= 1 on the last pass: the daemon's error
    ASSERT_OK_AND_ASSIGN(tc::Tensor t, tc::Zeros({n}));
    other_line = __LINE__ + 1;
    ASSERT_OK_AND_ASSIGN(tc::Tensor u, tc::Call1("neg", {t}));
    loop_line = __LINE__ + 1;
    ASSERT_OK_AND_ASSIGN(tc::Tensor v, tc::Call1("index_select", {u, 0, rows}));
  }
  absl::Status st = session_->Synchronize();
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("index_select"));
  EXPECT_THAT(st.message(), HasSubstr("client_test.cc:" + std::to_string(loop_line))) << st;
  EXPECT_THAT(st.message(), Not(HasSubstr("client_test.cc:" + std::to_string(other_line)))) << st;
  EXPECT_TRUE(session_->Synchronize().ok());
}

TEST_F(WithDaemon, TheSameHostStreamAndTheGrpcStreamAgree) {
  // Over a Unix socket the session stream runs on the daemon's side-channel
  // socket unless told not to; both carry the same messages and give the
  // same results, data (streamed in chunks, no shared memory) and errors.
  tc::SessionOptions on_socket, on_grpc;
  on_socket.transport.shared_memory = on_grpc.transport.shared_memory = false;
  on_grpc.transport.same_host_stream = false;
  EXPECT_TRUE(session_->uses_same_host_stream());
  const int64_t n = 1024 * 1024 + 5;  // 4 MiB of float32 and then some: two chunks
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.5f);
  for (const tc::SessionOptions& o : {on_socket, on_grpc}) {
    ASSERT_OK_AND_ASSIGN(std::shared_ptr<tc::Session> s, tc::Session::Connect(session_->address(), o));
    EXPECT_EQ(s->uses_same_host_stream(), o.transport.same_host_stream);
    tc::SessionGuard use(s);
    ASSERT_OK_AND_ASSIGN(tc::Tensor t, tc::FromVector(v, {n}));
    ASSERT_OK_AND_ASSIGN(tc::Tensor u, tc::Add(t, t));
    ASSERT_OK_AND_ASSIGN(tc::HostData d, u.Fetch());
    ASSERT_EQ(d.numel(), n);
    for (int64_t i = 0; i < n; i += 4099) ASSERT_EQ(d.data<float>()[i], 2 * v[i]) << i;
    EXPECT_EQ(d.data<float>()[n - 1], 2 * v[n - 1]);
    ASSERT_OK_AND_ASSIGN(tc::Tensor rows, tc::FromVector(std::vector<int64_t>{0, 9}, {2}));
    const int line = __LINE__ + 1;
    ASSERT_OK_AND_ASSIGN(tc::Tensor bad, tc::Call1("index_select", {t, 0, rows}));  // 9 < n: fine
    ASSERT_OK_AND_ASSIGN(tc::Tensor small, tc::FromVector(std::vector<float>{1, 2, 3}, {3}));
    const int bad_line = __LINE__ + 1;
    ASSERT_OK_AND_ASSIGN(tc::Tensor worse, tc::Call1("index_select", {small, 0, rows}));  // 9 >= 3: the daemon's error
    absl::Status st = s->Synchronize();
    EXPECT_FALSE(st.ok());
    EXPECT_THAT(st.message(), HasSubstr("client_test.cc:" + std::to_string(bad_line))) << st;
    EXPECT_THAT(st.message(), Not(HasSubstr("client_test.cc:" + std::to_string(line)))) << st;
    EXPECT_EQ(s->stats().shm_uploads + s->stats().shm_fetches, 0);
    EXPECT_TRUE(s->Close().ok());
  }
}

TEST_F(WithDaemon, StreamPollingSettings) {
  // Polling for replies on or off, the same-host stream gives the same
  // results; a polling time out of range, from the options or the
  // environment, fails Connect naming the setting.
  tc::SessionOptions polls, sleeps;
  polls.transport.stream_spin_us = 1000;
  sleeps.transport.stream_spin_us = 0;
  for (const tc::SessionOptions& o : {polls, sleeps}) {
    ASSERT_OK_AND_ASSIGN(std::shared_ptr<tc::Session> s, tc::Session::Connect(session_->address(), o));
    EXPECT_TRUE(s->uses_same_host_stream());
    tc::SessionGuard use(s);
    ASSERT_OK_AND_ASSIGN(tc::Tensor a, tc::FromVector(std::vector<float>{1, 2, 3}, {3}));
    for (int i = 0; i < 50; ++i) {
      ASSERT_OK_AND_ASSIGN(a, tc::Add(a, a));
      const std::vector<tc::TensorIndex> zero{int64_t{0}};
      ASSERT_OK_AND_ASSIGN(tc::Tensor first, tc::Index(a, zero));
      ASSERT_OK_AND_ASSIGN(tensord::Scalar v, first.Item());
      ASSERT_EQ(v.to_double(), std::ldexp(1.0, i + 1)) << i;
    }
    EXPECT_TRUE(s->Close().ok());
  }
  tc::SessionOptions too_long;
  too_long.transport.stream_spin_us = 2'000'000;
  absl::StatusOr<std::shared_ptr<tc::Session>> refused = tc::Session::Connect(session_->address(), too_long);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("SessionOptions::transport.stream_spin_us is 2000000"));
  ::setenv("TENSORD_STREAM_SPIN_US", "fast", 1);
  refused = tc::Session::Connect(session_->address());
  ::unsetenv("TENSORD_STREAM_SPIN_US");
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("TENSORD_STREAM_SPIN_US: 'fast' is not a polling time in microseconds"));
}

TEST_F(WithDaemon, SameHostTransfersGoThroughSharedMemory) {
  EXPECT_TRUE(session_->uses_shared_memory());  // a Unix socket: automatic
  const int64_t n = 3 * 1024 * 1024 + 17;
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  const tc::Stats before = session_->stats();
  ASSERT_OK_AND_ASSIGN(tc::Tensor t, tc::FromVector(v, {n}));
  ASSERT_OK_AND_ASSIGN(tc::HostData d, t.Fetch());
  ASSERT_OK_AND_ASSIGN(tc::HostData d2, t.Fetch());  // a second segment: `d` still holds the first
  const tc::Stats after = session_->stats();
  EXPECT_EQ(after.shm_uploads - before.shm_uploads, 1);
  EXPECT_EQ(after.shm_fetches - before.shm_fetches, 2);
  EXPECT_LE(after.messages_sent - before.messages_sent, 3);
  ASSERT_EQ(d.byte_size(), n * sizeof(float));
  EXPECT_NE(d.byte_data(), d2.byte_data());
  EXPECT_EQ(std::memcmp(d.byte_data(), v.data(), n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(d2.byte_data(), v.data(), n * sizeof(float)), 0);
}

TEST_F(WithDaemon, SynchronizeAfterAnAdoptedUploadWaitsForTheSyncSentWithIt) {
  ASSERT_TRUE(session_->uses_shared_memory());
  const int64_t n = int64_t{1} << 20;  // 4 MiB: adopted
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  const tc::Stats before = session_->stats();
  ASSERT_OK_AND_ASSIGN(tc::Tensor t, tc::FromVector(v, {n}));
  // Sent at once, with a sync; Synchronize waits for that sync's reply.
  EXPECT_EQ(session_->stats().messages_sent - before.messages_sent, 1);
  ASSERT_TRUE(session_->Synchronize().ok());
  const tc::Stats after = session_->stats();
  EXPECT_EQ(after.messages_sent - before.messages_sent, 1);
  EXPECT_EQ(after.round_trips - before.round_trips, 1);
  EXPECT_EQ(after.shm_adopted_uploads - before.shm_adopted_uploads, 1);
  ASSERT_OK_AND_ASSIGN(tc::HostData d, t.Fetch());
  ASSERT_EQ(d.byte_size(), n * sizeof(float));
  EXPECT_EQ(std::memcmp(d.byte_data(), v.data(), n * sizeof(float)), 0);

  // Threads uploading and synchronizing on one session at once: whichever
  // thread's Synchronize takes an upload's sync, every upload is whole when
  // its own thread's Synchronize returns.
  constexpr int kThreads = 4;
  constexpr int kRounds = 12;
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&, k] {
      tc::SessionGuard use(session_);
      std::vector<float> mine(n, static_cast<float>(k + 1));
      for (int r = 0; r < kRounds && failures[k].empty(); ++r) {
        mine[n - 1] = static_cast<float>(r);
        absl::StatusOr<tc::Tensor> u = tc::FromVector(mine, {n});
        absl::Status st = u.ok() ? session_->Synchronize() : u.status();
        if (!st.ok()) {
          failures[k] = st.ToString();
          break;
        }
        absl::StatusOr<tc::HostData> got = u->Fetch();
        if (!got.ok()) {
          failures[k] = got.status().ToString();
        } else if (std::memcmp(got->byte_data(), mine.data(), n * sizeof(float)) != 0) {
          failures[k] = absl::StrCat("round ", r, ": the fetched bytes differ from the upload");
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int k = 0; k < kThreads; ++k) EXPECT_EQ(failures[k], "") << "thread " << k;
  ASSERT_TRUE(session_->Synchronize().ok());

  // An upload that finds no segment (larger than the pool) streams its
  // chunks after an adopted upload: the adopted upload's sync no longer
  // covers everything sent, so Synchronize sends a sync of its own.
  tc::SessionOptions small_pool;
  small_pool.transport.shm_pool_bytes = size_t{12} << 20;
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<tc::Session> s2, tc::Session::Connect(session_->address(), small_pool));
  {
    tc::SessionGuard use(s2);
    ASSERT_OK_AND_ASSIGN(tc::Tensor adopted, tc::FromVector(v, {n}));  // 4 MiB: adopted
    std::vector<float> large(4 * n, 3.0f);                              // 16 MiB: no segment
    const tc::Stats mid = s2->stats();
    ASSERT_EQ(mid.shm_adopted_uploads, 1);
    ASSERT_OK_AND_ASSIGN(tc::Tensor streamed, tc::FromVector(large, {4 * n}));
    const tc::Stats chunked = s2->stats();
    EXPECT_EQ(chunked.shm_uploads, mid.shm_uploads);  // it took the stream
    ASSERT_TRUE(s2->Synchronize().ok());
    EXPECT_EQ(s2->stats().messages_sent - chunked.messages_sent, 1);
    ASSERT_OK_AND_ASSIGN(tc::HostData got, streamed.Fetch());
    EXPECT_EQ(std::memcmp(got.byte_data(), large.data(), large.size() * sizeof(float)), 0);
  }
  ASSERT_TRUE(s2->Close().ok());
}

TEST_F(WithDaemon, SessionsAreIsolated) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor mine, tc::Ones({3}));
  auto other = tc::Session::Connect((*daemon_)->address());
  ASSERT_TRUE(other.ok()) << other.status();
  tc::Tensor theirs;
  {
    tc::SessionGuard use(*other);
    ASSERT_OK_AND_ASSIGN(theirs, tc::Call1("full", {Shape{3}, 2.0}));
  }
  auto mixed = tc::Add(mine, theirs);
  ASSERT_FALSE(mixed.ok());
  EXPECT_THAT(mixed.status().message(), HasSubstr("different sessions"));
  // Closing the other session leaves this one working; its tensors refuse use.
  ASSERT_TRUE((*other)->Close().ok());
  auto dead = tc::Call1("neg", {theirs});
  ASSERT_FALSE(dead.ok());
  EXPECT_THAT(dead.status().message(), HasSubstr("closed"));
  EXPECT_EQ(Values(mine), (std::vector<double>{1, 1, 1}));
}

// A fetch the client cannot count (2**62 elements x 4 bytes) or hold (2**62
// bytes) is refused before it is sent: sent, the daemon would stream it all
// and the session's next sync point would wait behind that stream.
TEST_F(WithDaemon, ARefusedFetchLeavesTheSessionUsable) {
  const int64_t n = int64_t{1} << 31;
  ASSERT_OK_AND_ASSIGN(tc::Tensor one, tc::Call1("zeros", {Shape{1}}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, tc::Call1("expand", {one, Shape{n, n}}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor b, tc::Call1("zeros", {Shape{1}}, {{"dtype", ScalarType::kUInt8}}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor y, tc::Call1("expand", {b, Shape{n, n}}));
  // Bounded: a hang fails the test instead of hanging the suite.
  absl::Notification done;
  std::thread t([&] {
    absl::StatusOr<tc::HostData> d = x.Fetch();
    EXPECT_FALSE(d.ok());
    EXPECT_THAT(d.status().message(), HasSubstr("fetch: tensor of 4611686018427387904 elements x 4 bytes overflows int64"));
    EXPECT_TRUE(session_->Synchronize().ok());
    d = y.Fetch();
    EXPECT_FALSE(d.ok());
    EXPECT_EQ(KindOf(d.status()), ErrorKind::kOutOfMemory) << d.status();
    EXPECT_THAT(d.status().message(), HasSubstr("4611686018427387904 bytes exceed this machine's memory"));
    EXPECT_TRUE(session_->Synchronize().ok());
    done.Notify();
  });
  if (!done.WaitForNotificationWithTimeout(absl::Seconds(60))) {
    ADD_FAILURE() << "the session hung after a refused fetch";
    std::_Exit(1);  // the stuck thread cannot be joined
  }
  t.join();
  ASSERT_OK_AND_ASSIGN(tc::Tensor z, tc::Call1("add", {one, 2}));
  EXPECT_EQ(Values(z), (std::vector<double>{2}));
}

TEST_F(WithDaemon, RealToMetaIsLocal) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, tc::Ones({2, 5}));
  const tc::Stats before = session_->stats();
  ASSERT_OK_AND_ASSIGN(tc::Tensor m, tc::To(x, tensord::kMetaDevice));
  EXPECT_TRUE(m.is_meta());
  EXPECT_EQ(m.sizes(), (Shape{2, 5}));
  EXPECT_EQ(session_->stats().ops_issued, before.ops_issued);
}

}  // namespace
