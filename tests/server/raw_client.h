// Test helpers: an in-process daemon on a temporary Unix socket (and
// 127.0.0.1:0), and a session driven through the RAW generated gRPC stub —
// no client library — so that tests can send anything, hostile or not.
#ifndef TENSORD_TESTS_SERVER_RAW_CLIENT_H_
#define TENSORD_TESTS_SERVER_RAW_CLIENT_H_

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grpc/grpc.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tensord/meta/op_table.h"
#include "tensord/meta/tensor_meta.h"
#include "tensord/server/daemon.h"
#include "tensord/v1/tensord.grpc.pb.h"
#include "tensord/wire/wire.h"
#include "requests.h"
#include "sanitizers.h"

namespace tensord::testing {

struct FetchResult {
  bool ok = false;
  v1::Error error;         // when !ok
  v1::TensorMetaProto meta;
  std::string data;
  uint64_t total_bytes = 0;  // from the first chunk
  int chunks = 0;
};

// A session on one stream, spoken to with the generated stub.
class RawSession {
 public:
  explicit RawSession(v1::Tensord::Stub* stub, bool attach = true) : stub_(stub) {
    grpc::ClientContext ctx;
    v1::OpenSessionRequest req;
    req.set_client_name("raw-test");
    req.set_op_table_digest(OpTable::Get().digest());
    v1::OpenSessionResponse resp;
    const grpc::Status s = stub_->OpenSession(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    id_ = resp.session_id();
    token_ = resp.token();
    open_response_ = resp;
    if (attach) Attach(id_, token_);
  }

  // Opens the stream and sends `attach` (with any id/token).
  void Attach(uint64_t id, const std::string& token) {
    ctx_ = std::make_unique<grpc::ClientContext>();
    // A broken daemon fails the test instead of hanging it.
    ctx_->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    stream_ = stub_->Stream(ctx_.get());
    v1::ClientMessage m;
    m.mutable_attach()->set_session_id(id);
    m.mutable_attach()->set_token(token);
    stream_->Write(m);
  }

  uint64_t id() const { return id_; }
  const v1::OpenSessionResponse& open_response() const { return open_response_; }
  const std::string& token() const { return token_; }
  grpc::ClientReaderWriter<v1::ClientMessage, v1::ServerMessage>* stream() { return stream_.get(); }

  void Send(std::vector<v1::Request> reqs) {
    v1::ClientMessage m;
    for (auto& r : reqs) *m.add_requests() = std::move(r);
    ASSERT_TRUE(stream_->Write(m));
  }
  void Send(v1::Request r) { Send(std::vector<v1::Request>{std::move(r)}); }

  bool Read(v1::ServerMessage* m) { return stream_->Read(m); }

  // Sends a Sync and returns the errors it reports.
  std::vector<v1::Error> Sync() {
    v1::Ack ack = SyncAck(/*peek=*/false);
    return {ack.errors().begin(), ack.errors().end()};
  }

  // Sends a Sync with peek set and returns its ack (errors_pending, and no
  // errors: they stay for the next Sync).
  v1::Ack PeekSync() { return SyncAck(/*peek=*/true); }

  // Sends a Sync and returns its ack.
  v1::Ack SyncAck(bool peek) {
    v1::Request r;
    r.mutable_sync()->set_request_id(++request_id_);
    r.mutable_sync()->set_peek(peek);
    Send(r);
    v1::ServerMessage m;
    EXPECT_TRUE(Read(&m));
    EXPECT_TRUE(m.has_ack()) << m.DebugString();
    EXPECT_EQ(m.ack().request_id(), request_id_);
    return m.ack();
  }

  FetchResult Fetch(uint64_t handle) {
    v1::Request r;
    r.mutable_fetch()->set_request_id(++request_id_);
    r.mutable_fetch()->set_handle(handle);
    Send(r);
    FetchResult out;
    for (;;) {
      v1::ServerMessage m;
      if (!Read(&m)) {
        ADD_FAILURE() << "stream ended during a fetch";
        return out;
      }
      EXPECT_NE(m.kind_case(), v1::ServerMessage::kAck) << m.DebugString();
      if (m.has_error()) {
        EXPECT_EQ(m.error().request_id(), request_id_);
        out.error = m.error().error();
        return out;
      }
      const v1::FetchData& d = m.data();
      EXPECT_EQ(d.request_id(), request_id_);
      EXPECT_LE(d.data().size(), 3u << 20);
      if (out.chunks == 0) {
        out.meta = d.meta();
        out.total_bytes = d.total_bytes();
      }
      EXPECT_EQ(d.offset(), out.data.size());
      out.data += d.data();
      ++out.chunks;
      if (d.last()) {
        out.ok = true;
        EXPECT_EQ(out.data.size(), out.total_bytes);
        return out;
      }
    }
  }

  template <typename T>
  std::vector<T> FetchValues(uint64_t handle) {
    FetchResult r = Fetch(handle);
    EXPECT_TRUE(r.ok) << r.error.DebugString();
    return FromBytes<T>(r.data);
  }

  // Describe: the Ack, or the RequestError's error in *error.
  v1::Ack Describe(std::vector<uint64_t> handles, v1::Error* error = nullptr) {
    v1::Request r;
    r.mutable_describe()->set_request_id(++request_id_);
    for (uint64_t h : handles) r.mutable_describe()->add_handles(h);
    Send(r);
    v1::ServerMessage m;
    EXPECT_TRUE(Read(&m));
    if (m.has_error()) {
      if (error != nullptr) *error = m.error().error();
      else ADD_FAILURE() << m.DebugString();
      return {};
    }
    EXPECT_TRUE(m.has_ack());
    return m.ack();
  }

  // MemoryStats of `device`: its reply (an Ack, or a RequestError), checked
  // to answer this request.
  v1::ServerMessage MemoryStats(const Device& device, bool reset_peak = false) {
    Send(MemoryStatsReq(++request_id_, static_cast<int32_t>(device.type), device.index, reset_peak));
    v1::ServerMessage m;
    EXPECT_TRUE(Read(&m));
    EXPECT_EQ(m.has_ack() ? m.ack().request_id() : m.error().request_id(), request_id_) << m.DebugString();
    return m;
  }

  template <typename T>
  void Upload(uint64_t handle, const std::vector<int64_t>& sizes, ScalarType dtype, const std::vector<T>& values) {
    Send(UploadReq(handle, MetaProto(sizes, dtype), Bytes(values)));
  }

  // Ends the stream from the client side; returns the final status.
  grpc::Status Finish() {
    stream_->WritesDone();
    v1::ServerMessage m;
    while (stream_->Read(&m)) {
    }
    return stream_->Finish();
  }

  grpc::Status Close() {
    grpc::ClientContext ctx;
    v1::CloseSessionRequest req;
    req.set_session_id(id_);
    req.set_token(token_);
    v1::CloseSessionResponse resp;
    grpc::Status s = stub_->CloseSession(&ctx, req, &resp);
    close_response_ = resp;
    return s;
  }
  const v1::CloseSessionResponse& close_response() const { return close_response_; }

 private:
  v1::Tensord::Stub* stub_;
  uint64_t id_ = 0;
  std::string token_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::ClientMessage, v1::ServerMessage>> stream_;
  uint64_t request_id_ = 0;
  v1::CloseSessionResponse close_response_;
  v1::OpenSessionResponse open_response_;
};

// CloseSession for session `id` with `token`, as any caller may send it.
inline grpc::Status CloseSessionRaw(v1::Tensord::Stub* stub, uint64_t id, const std::string& token) {
  grpc::ClientContext ctx;
  v1::CloseSessionRequest req;
  req.set_session_id(id);
  req.set_token(token);
  v1::CloseSessionResponse resp;
  return stub->CloseSession(&ctx, req, &resp);
}

// A session that runs beside an attack: it holds handle 1 = [1, 2, 3]
// (float32). ExpectServed() checks that it still computes and that its data
// is intact; each check uses a new call id and output handle.
class Bystander {
 public:
  explicit Bystander(v1::Tensord::Stub* stub) : session_(stub) {
    session_.Upload<float>(1, {3}, ScalarType::kFloat32, {1, 2, 3});
    EXPECT_TRUE(session_.Sync().empty());
  }

  void ExpectServed() {
    ++calls_;
    const uint64_t out = 100 + calls_;
    session_.Send(Call(calls_, "unsqueeze", {T(1), I(0)}, {out}));
    EXPECT_TRUE(session_.Sync().empty());
    EXPECT_THAT(session_.FetchValues<float>(out), ::testing::ElementsAre(1, 2, 3));
  }

  RawSession& session() { return session_; }

 private:
  RawSession session_;
  uint64_t calls_ = 0;
};

// An in-process daemon on a temporary Unix socket and 127.0.0.1:0.
// A Handshake with this build's protocol version and op-table digest
// (30 s deadline); the reply in `*resp` when given.
inline grpc::Status HandshakeRaw(v1::Tensord::Stub* stub, v1::HandshakeResponse* resp = nullptr) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::HandshakeRequest req;
  req.set_protocol_version(wire::kProtocolVersion);
  req.set_op_table_digest(OpTable::Get().digest());
  v1::HandshakeResponse ignored;
  return stub->Handshake(&ctx, req, resp != nullptr ? resp : &ignored);
}

class DaemonFixture : public ::testing::Test {
 protected:
  // One gRPC library reference for the whole test program: otherwise the
  // last object of each test runs grpc_shutdown(), which can stall ~10 s.
  static void SetUpTestSuite() {
    static const bool initialized = (grpc_init(), true);
    (void)initialized;
  }

  void SetUp() override { StartDaemon(0); }
  void TearDown() override { StopDaemon(); }

  void StartDaemon(int64_t session_memory_limit_bytes) {
    StopDaemon();
    char tmpl[] = "/tmp/tensord-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    server::DaemonOptions o;
    o.listen = {"unix:" + dir_ + "/td.sock", "127.0.0.1:0"};
    o.session_memory_limit_bytes = session_memory_limit_bytes;
    if (grpc_threads_ > 0) o.grpc_threads = grpc_threads_;
    if (attach_timeout_ > absl::ZeroDuration()) o.attach_timeout = attach_timeout_;
    if (idle_connection_timeout_ > absl::ZeroDuration()) o.idle_connection_timeout = idle_connection_timeout_;
    if (max_sessions_per_peer_ >= 0) o.max_sessions_per_peer = max_sessions_per_peer_;
    o.test_device = test_device_;
    o.test_device_fault_at_launch = test_device_fault_at_launch_;
    o.on_device_failure = on_device_failure_;
    o.log_level = server::LogLevel::kWarning;
    runtime::SetLogLevel(runtime::LogLevel::kWarning);
    absl::StatusOr<std::unique_ptr<server::Daemon>> d = server::Daemon::Start(o);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
    channel_ = grpc::CreateChannel(daemon_->addresses()[0], grpc::InsecureChannelCredentials());
    stub_ = v1::Tensord::NewStub(channel_);
  }

  void StopDaemon() {
    stub_.reset();
    channel_.reset();
    if (daemon_) daemon_->Shutdown();
    daemon_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
    dir_.clear();
  }

  int grpc_threads_ = 0;  // > 0: DaemonOptions::grpc_threads for StartDaemon
  absl::Duration attach_timeout_;  // > 0: DaemonOptions::attach_timeout for StartDaemon
  absl::Duration idle_connection_timeout_;  // > 0: DaemonOptions::idle_connection_timeout
  int max_sessions_per_peer_ = -1;          // >= 0: DaemonOptions::max_sessions_per_peer
  bool test_device_ = false;                // DaemonOptions::test_device
  int64_t test_device_fault_at_launch_ = 0; // DaemonOptions::test_device_fault_at_launch
  std::function<void(const std::string&)> on_device_failure_;  // DaemonOptions::on_device_failure
  std::string dir_;
  std::unique_ptr<server::Daemon> daemon_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Tensord::Stub> stub_;
};

// Asserts that `errors` holds one error whose message contains `needle`.
inline void ExpectOneError(const std::vector<v1::Error>& errors, const std::string& needle) {
  ASSERT_EQ(errors.size(), 1u) << [&] {
    std::string s;
    for (auto& e : errors) s += e.DebugString();
    return s;
  }();
  EXPECT_THAT(errors[0].message(), ::testing::HasSubstr(needle)) << errors[0].DebugString();
}

}  // namespace tensord::testing

#endif  // TENSORD_TESTS_SERVER_RAW_CLIENT_H_
