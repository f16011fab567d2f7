// The daemon's gRPC service, driven in-process through the raw generated stub:
// handshake, sessions, streams, uploads, ops, fetches, memory accounting.
// Hostile input has its own file (hostile_test.cc).
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>

#include "grpcpp/generic/generic_stub.h"

#include "raw_client.h"

namespace tensord::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class ServiceTest : public DaemonFixture {};

std::vector<std::string> OurTable() { return OpTable::Get().Describe(); }

TEST_F(ServiceTest, HandshakeAcceptsTheSameTableAndTellsNothingElse) {
  grpc::ClientContext ctx;
  v1::HandshakeRequest req;
  req.set_protocol_version(wire::kProtocolVersion);
  req.set_client_version("test");
  req.set_op_table_digest(OpTable::Get().digest());
  for (const std::string& l : OurTable()) req.add_op_table(l);
  v1::HandshakeResponse resp;
  ASSERT_TRUE(stub_->Handshake(&ctx, req, &resp).ok());
  EXPECT_TRUE(resp.accepted()) << resp.refusal();
  EXPECT_EQ(resp.protocol_version(), wire::kProtocolVersion);
  EXPECT_EQ(resp.op_table_digest(), OpTable::Get().digest());
  // An unauthenticated caller learns the protocol version and the op
  // table's digest, nothing about the machine (memory, cores) or the release.
  v1::HandshakeResponse expected;
  expected.set_accepted(true);
  expected.set_protocol_version(wire::kProtocolVersion);
  expected.set_op_table_digest(OpTable::Get().digest());
  EXPECT_EQ(resp.SerializeAsString(), expected.SerializeAsString()) << resp.DebugString();
  // The daemon is alive, and a session holder learns the rest.
  RawSession s(stub_.get());
  EXPECT_TRUE(s.Sync().empty());
  const v1::OpenSessionResponse& open = s.open_response();
  EXPECT_FALSE(open.server_version().empty());
  ASSERT_GE(open.devices_size(), 1);
  EXPECT_EQ(open.devices(0).name(), "cpu");
  EXPECT_EQ(open.devices(0).type(), static_cast<int32_t>(DeviceType::kCPU));
  EXPECT_GT(open.devices(0).total_memory_bytes(), 0u);
  EXPECT_THAT(open.devices(0).description(), HasSubstr("core"));
  EXPECT_EQ(open.session_memory_limit_bytes(), 0u);
}

// What a session holder learns of the devices: each one's free memory and
// compute capability, the CUDA versions and, with no cuda device among
// them, why; `tensord devices` without an address reports the same.
TEST_F(ServiceTest, OpenSessionTellsFreeMemoryCapabilityAndWhyThereIsNoCuda) {
  RawSession s(stub_.get());
  const v1::OpenSessionResponse& open = s.open_response();
  ASSERT_GE(open.devices_size(), 1);
  bool any_cuda = false;
  for (const v1::DeviceInfo& d : open.devices()) {
    SCOPED_TRACE(d.name());
    EXPECT_GT(d.free_memory_bytes(), 0u);
    EXPECT_LE(d.free_memory_bytes(), d.total_memory_bytes());
    if (d.type() == static_cast<int32_t>(DeviceType::kCUDA)) {
      any_cuda = true;
      EXPECT_GE(d.capability_major(), 3);
    } else {
      EXPECT_EQ(d.capability_major(), 0);
      EXPECT_EQ(d.capability_minor(), 0);
    }
  }
  EXPECT_EQ(open.cuda_unavailable_reason().empty(), any_cuda) << open.cuda_unavailable_reason();
  if (open.cuda_runtime_version().empty()) {
    EXPECT_THAT(open.cuda_unavailable_reason(), HasSubstr("this daemon was built without CUDA"));
    EXPECT_TRUE(open.cuda_driver_version().empty());
  } else {
    EXPECT_THAT(open.cuda_runtime_version(), ::testing::MatchesRegex("[0-9]+\\.[0-9]+"));
  }
  if (!open.cuda_driver_version().empty()) {
    EXPECT_THAT(open.cuda_driver_version(), ::testing::MatchesRegex("[0-9]+\\.[0-9]+"));
  } else {
    EXPECT_FALSE(any_cuda);
  }

  server::ServiceOptions options;
  options.test_device = true;
  v1::OpenSessionResponse local;
  ASSERT_TRUE(server::DescribeLocalDevices(options, &local).ok());
  ASSERT_EQ(local.devices_size(), open.devices_size() + 1);
  EXPECT_EQ(local.devices(0).name(), "cpu");
  EXPECT_EQ(local.devices(0).total_memory_bytes(), open.devices(0).total_memory_bytes());
  EXPECT_EQ(local.devices(1).name(), "privateuseone:0");
  EXPECT_EQ(local.cuda_unavailable_reason(), open.cuda_unavailable_reason());
  EXPECT_EQ(local.cuda_runtime_version(), open.cuda_runtime_version());
  EXPECT_EQ(local.session_id(), 0u);  // no session: nothing was opened
}

TEST_F(ServiceTest, ARefusedHandshakeDoesNotNameTheDaemonsRelease) {
  grpc::ClientContext ctx;
  v1::HandshakeRequest req;
  req.set_protocol_version(wire::kProtocolVersion + 7);
  req.set_op_table_digest(OpTable::Get().digest());
  v1::HandshakeResponse resp;
  ASSERT_TRUE(stub_->Handshake(&ctx, req, &resp).ok());
  EXPECT_FALSE(resp.accepted());
  EXPECT_THAT(resp.refusal(), HasSubstr(absl::StrCat("speaks version ", wire::kProtocolVersion)));
  EXPECT_THAT(resp.refusal(), Not(HasSubstr(std::string(server::DaemonVersion()))));
  v1::HandshakeResponse expected;
  expected.set_refusal(resp.refusal());
  expected.set_protocol_version(wire::kProtocolVersion);
  expected.set_op_table_digest(OpTable::Get().digest());
  EXPECT_EQ(resp.SerializeAsString(), expected.SerializeAsString()) << resp.DebugString();
}

TEST_F(ServiceTest, HandshakeRefusesADifferentTableNamingTheDifference) {
  std::vector<std::string> table = OurTable();
  ASSERT_GT(table.size(), 3u);
  table[3] = "3 frobnicate(Tensor self) -> Tensor";
  grpc::ClientContext ctx;
  v1::HandshakeRequest req;
  req.set_protocol_version(wire::kProtocolVersion);
  req.set_op_table_digest(OpTable::Get().digest() ^ 1);
  for (const std::string& l : table) req.add_op_table(l);
  v1::HandshakeResponse resp;
  ASSERT_TRUE(stub_->Handshake(&ctx, req, &resp).ok());
  EXPECT_FALSE(resp.accepted());
  EXPECT_THAT(resp.refusal(), HasSubstr("op 3"));
  EXPECT_THAT(resp.refusal(), HasSubstr("frobnicate"));
  EXPECT_THAT(resp.refusal(), HasSubstr(OurTable()[3]));
}

TEST_F(ServiceTest, HandshakeRefusesAShorterTableAndAnotherProtocol) {
  std::vector<std::string> table = OurTable();
  table.pop_back();
  {
    grpc::ClientContext ctx;
    v1::HandshakeRequest req;
    req.set_protocol_version(wire::kProtocolVersion);
    req.set_op_table_digest(12345);
    for (const std::string& l : table) req.add_op_table(l);
    v1::HandshakeResponse resp;
    ASSERT_TRUE(stub_->Handshake(&ctx, req, &resp).ok());
    EXPECT_FALSE(resp.accepted());
    EXPECT_THAT(resp.refusal(), HasSubstr("client lacks"));
    EXPECT_THAT(resp.refusal(), HasSubstr(OurTable().back()));
  }
  {
    grpc::ClientContext ctx;
    v1::HandshakeRequest req;
    req.set_protocol_version(99);
    req.set_op_table_digest(OpTable::Get().digest());
    v1::HandshakeResponse resp;
    ASSERT_TRUE(stub_->Handshake(&ctx, req, &resp).ok());
    EXPECT_FALSE(resp.accepted());
    EXPECT_THAT(resp.refusal(), HasSubstr("protocol version 99"));
  }
}

TEST_F(ServiceTest, OpenSessionRefusesAnotherDigest) {
  grpc::ClientContext ctx;
  v1::OpenSessionRequest req;
  req.set_op_table_digest(OpTable::Get().digest() + 1);
  v1::OpenSessionResponse resp;
  const grpc::Status s = stub_->OpenSession(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("digest"));
}

TEST_F(ServiceTest, SessionsGetDistinctIdsAndSixteenByteTokens) {
  RawSession a(stub_.get(), false), b(stub_.get(), false);
  EXPECT_NE(a.id(), 0u);
  EXPECT_NE(a.id(), b.id());
  EXPECT_EQ(a.token().size(), 16u);
  EXPECT_NE(a.token(), b.token());
  EXPECT_EQ(daemon_->service().live_sessions(), 2u);
  EXPECT_TRUE(a.Close().ok());
  EXPECT_TRUE(b.Close().ok());
  EXPECT_EQ(daemon_->service().live_sessions(), 0u);
}

TEST_F(ServiceTest, OpenAttachSyncClose) {
  RawSession s(stub_.get());
  EXPECT_TRUE(s.Sync().empty());
  EXPECT_TRUE(s.Close().ok());
  EXPECT_EQ(s.close_response().ops_executed(), 0u);
  // Closing ends the stream.
  v1::ServerMessage m;
  EXPECT_FALSE(s.Read(&m));
  EXPECT_EQ(daemon_->service().live_sessions(), 0u);
  // A closed session is unknown.
  EXPECT_EQ(s.Close().error_code(), grpc::StatusCode::NOT_FOUND);
}

// A caller without the token cannot tell an open session's id from an
// unknown one: the same code and the same message for both.
TEST_F(ServiceTest, CloseSaysTheSameForAWrongTokenAndAnUnknownId) {
  RawSession s(stub_.get(), false);
  RawSession other(stub_.get());
  const grpc::Status wrong = CloseSessionRaw(stub_.get(), s.id(), std::string(16, 'x'));
  const grpc::Status unknown = CloseSessionRaw(stub_.get(), s.id() ^ 0x5a5a, s.token());
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(unknown.error_code(), wrong.error_code());
  EXPECT_EQ(unknown.error_message(), wrong.error_message());
  EXPECT_THAT(wrong.error_message(), HasSubstr("no session with this id and token"));
  // Both sessions are untouched.
  EXPECT_EQ(daemon_->service().live_sessions(), 2u);
  EXPECT_TRUE(other.Sync().empty());
  EXPECT_TRUE(s.Close().ok());
  EXPECT_TRUE(other.Close().ok());
}

TEST_F(ServiceTest, AttachSaysTheSameForAWrongTokenAndAnUnknownId) {
  RawSession s(stub_.get(), false);
  RawSession bad(stub_.get(), false);
  bad.Attach(s.id(), std::string(16, '\0'));
  const grpc::Status wrong = bad.Finish();
  RawSession bad2(stub_.get(), false);
  bad2.Attach(s.id() ^ 0x5a5a, s.token());
  const grpc::Status unknown = bad2.Finish();
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(unknown.error_code(), wrong.error_code());
  EXPECT_EQ(unknown.error_message(), wrong.error_message());
  EXPECT_THAT(wrong.error_message(), HasSubstr("no session with this id and token"));
  // The session itself is untouched and still attachable.
  s.Attach(s.id(), s.token());
  EXPECT_TRUE(s.Sync().empty());
}

TEST_F(ServiceTest, TheFirstMessageMustAttach) {
  grpc::ClientContext ctx;
  auto stream = stub_->Stream(&ctx);
  v1::ClientMessage m;
  m.add_requests()->mutable_sync()->set_request_id(1);
  stream->Write(m);
  stream->WritesDone();
  v1::ServerMessage r;
  EXPECT_FALSE(stream->Read(&r));
  const grpc::Status st = stream->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("attach"));
}

// The stream is read as bytes (so that upload data can go straight into the
// storage): bytes that are no ClientMessage end the stream with an error
// that says so, close the session, and leave the daemon serving.
TEST_F(ServiceTest, BytesThatDoNotParseEndTheStreamAndTheSession) {
  RawSession s(stub_.get(), false);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  const std::string method = absl::StrCat("/", v1::Tensord::service_full_name(), "/Stream");
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> raw(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel_.get(), grpc::internal::RpcMethod(method.c_str(), grpc::internal::RpcMethod::BIDI_STREAMING),
          &ctx));
  v1::ClientMessage attach;
  attach.mutable_attach()->set_session_id(s.id());
  attach.mutable_attach()->set_token(s.token());
  grpc::Slice a(attach.SerializeAsString());
  ASSERT_TRUE(raw->Write(grpc::ByteBuffer(&a, 1)));
  // requests { upload { data: 9 bytes claimed, 1 present } }
  grpc::Slice bad(std::string("\x12\x05\x12\x03\x2a\x09x", 7));
  raw->Write(grpc::ByteBuffer(&bad, 1));
  raw->WritesDone();
  grpc::ByteBuffer reply;
  EXPECT_FALSE(raw->Read(&reply));
  const grpc::Status st = raw->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("not a valid tensord.v1.ClientMessage"));
  RawSession next(stub_.get());
  EXPECT_TRUE(next.Sync().empty());
}

TEST_F(ServiceTest, OnlyOneStreamPerSession) {
  RawSession s(stub_.get());
  EXPECT_TRUE(s.Sync().empty());  // attached for sure
  RawSession second(stub_.get(), false);
  second.Attach(s.id(), s.token());
  const grpc::Status st = second.Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(st.error_message(), HasSubstr("already has a stream"));
  EXPECT_TRUE(s.Sync().empty());
}

TEST_F(ServiceTest, EndingTheStreamClosesTheSessionAndFreesItsMemory) {
  RawSession s(stub_.get());
  s.Upload<float>(1, {256}, ScalarType::kFloat32, std::vector<float>(256, 1.0f));
  EXPECT_TRUE(s.Sync().empty());
  EXPECT_EQ(daemon_->service().bytes_in_use(), 1024);
  EXPECT_TRUE(s.Finish().ok());
  EXPECT_EQ(daemon_->service().live_sessions(), 0u);
  EXPECT_EQ(daemon_->service().bytes_in_use(), 0);
}

TEST_F(ServiceTest, UploadViewFetchRoundTripsRealValues) {
  RawSession s(stub_.get());
  s.Upload<float>(1, {2, 3}, ScalarType::kFloat32, {0, 1, 2, 3, 4, 5});
  // transpose is a view: no kernel, shared storage, strided fetch.
  s.Send(Call(1, "transpose.int", {T(1), I(0), I(1)}, {2}));
  s.Send(Call(2, "select.int", {T(2), I(0), I(2)}, {3}));
  EXPECT_TRUE(s.Sync().empty());
  v1::Ack ack = s.Describe({1, 2, 3});
  ASSERT_EQ(ack.metas_size(), 3);
  EXPECT_THAT(ack.metas(1).sizes(), ::testing::ElementsAre(3, 2));
  EXPECT_THAT(ack.metas(1).strides(), ::testing::ElementsAre(1, 3));
  EXPECT_THAT(ack.metas(2).sizes(), ::testing::ElementsAre(2));
  EXPECT_EQ(ack.metas(2).storage_offset(), 2);
  EXPECT_THAT(ack.failed(), ::testing::ElementsAre(false, false, false));

  EXPECT_THAT(s.FetchValues<float>(1), ::testing::ElementsAre(0, 1, 2, 3, 4, 5));
  FetchResult t = s.Fetch(2);
  ASSERT_TRUE(t.ok);
  EXPECT_THAT(FromBytes<float>(t.data), ::testing::ElementsAre(0, 3, 1, 4, 2, 5));
  EXPECT_THAT(t.meta.sizes(), ::testing::ElementsAre(3, 2));
  EXPECT_THAT(t.meta.strides(), ::testing::ElementsAre(2, 1));  // contiguous layout of the data
  EXPECT_EQ(t.meta.storage_offset(), 0);
  EXPECT_EQ(t.total_bytes, 24u);
  EXPECT_THAT(s.FetchValues<float>(3), ::testing::ElementsAre(2, 5));
  // Views share storage: 24 bytes in all.
  EXPECT_EQ(daemon_->service().session_stats(s.id())->bytes_in_use, 24);
}

// CloseSession does not wait for the rest of a long message: the thread
// running it stops at the next request. (Before, Close waited for the
// session's lock, held for the whole message: all 64 matmuls ran.)
TEST_F(ServiceTest, ClosingASessionStopsTheMessageItIsRunning) {
  RawSession s(stub_.get());
  const int64_t n = 1024;
  s.Upload<float>(1, {n, n}, ScalarType::kFloat32, std::vector<float>(n * n, 0.5f));
  s.Upload<float>(2, {2}, ScalarType::kFloat32, {1, 2});
  EXPECT_TRUE(s.Sync().empty());
  // A fetch first, so that its reply says the message is running.
  std::vector<v1::Request> reqs;
  v1::Request fetch;
  fetch.mutable_fetch()->set_request_id(77);
  fetch.mutable_fetch()->set_handle(2);
  reqs.push_back(fetch);
  constexpr int kMatmuls = 64;
  for (int i = 0; i < kMatmuls; ++i) {
    reqs.push_back(Call(10 + i, "mm", {T(1), T(1)}, {static_cast<uint64_t>(100 + i)}));
  }
  s.Send(reqs);
  v1::ServerMessage m;
  ASSERT_TRUE(s.Read(&m));
  ASSERT_TRUE(m.has_data() && m.data().request_id() == 77u && m.data().last()) << m.DebugString();
  ASSERT_TRUE(s.Close().ok());
  EXPECT_LT(s.close_response().ops_executed(), static_cast<uint64_t>(kMatmuls));
  // The daemon serves a new session at once.
  RawSession t(stub_.get());
  t.Upload<float>(1, {2}, ScalarType::kFloat32, {3, 4});
  EXPECT_THAT(t.FetchValues<float>(1), ::testing::ElementsAre(3, 4));
}

TEST_F(ServiceTest, KernelOpsComputeRealValues) {
  RawSession s(stub_.get());
  s.Upload<float>(1, {2, 3}, ScalarType::kFloat32, {1, 2, 3, 4, 5, 6});
  s.Upload<float>(2, {3}, ScalarType::kFloat32, {10, 20, 30});
  s.Send({Call(1, "add.Tensor", {T(1), T(2), I(2)}, {3}),                 // broadcast, alpha=2
          Call(2, "sum", {T(1), IL({1}), B(false), None()}, {4}),         // row sums
          Call(3, "mm", {T(1), T(5)}, {6})});                             // 5 is unknown: fails
  std::vector<v1::Error> errors = s.Sync();
  ExpectOneError(errors, "unknown tensor handle 5");
  EXPECT_EQ(errors[0].op(), "mm");
  EXPECT_EQ(errors[0].call_id(), 3u);
  EXPECT_THAT(s.FetchValues<float>(3), ::testing::ElementsAre(21, 42, 63, 24, 45, 66));
  EXPECT_THAT(s.FetchValues<float>(4), ::testing::ElementsAre(6, 15));
  EXPECT_TRUE(s.Close().ok());
  EXPECT_EQ(s.close_response().ops_executed(), 2u);
  EXPECT_GE(s.close_response().peak_bytes(), 24u + 12u + 24u + 8u);
}

TEST_F(ServiceTest, FactoriesAndDtypeConversion) {
  RawSession s(stub_.get());
  s.Send({Call(1, "arange", {I(6), None(), None()}, {1}),
          Call(2, "view", {T(1), IL({2, 3})}, {2}),
          Call(3, "to.dtype", {T(2), Dt(static_cast<int32_t>(ScalarType::kFloat64)), B(false), B(false)}, {3}),
          Call(4, "zeros", {IL({2, 2}), None(), Dev("cpu")}, {4})});
  EXPECT_TRUE(s.Sync().empty());
  EXPECT_THAT(s.FetchValues<int64_t>(2), ::testing::ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_THAT(s.FetchValues<double>(3), ::testing::ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_THAT(s.FetchValues<float>(4), ::testing::ElementsAre(0, 0, 0, 0));
}

TEST_F(ServiceTest, RandomOpsDrawFromTheSessionGenerator) {
  RawSession s(stub_.get());
  s.Send({Call(1, "rand", {IL({1000}), None(), None()}, {1})});
  std::vector<float> v = s.FetchValues<float>(1);
  ASSERT_EQ(v.size(), 1000u);
  for (float x : v) {
    EXPECT_GE(x, 0.0f);
    EXPECT_LT(x, 1.0f);
  }
  EXPECT_NE(v[0], v[1]);
}

TEST_F(ServiceTest, DataDependentOpsReportTheirShapeThroughDescribe) {
  RawSession s(stub_.get());
  s.Upload<float>(1, {5}, ScalarType::kFloat32, {0, 3, 0, 7, 1});
  s.Send(Call(1, "nonzero", {T(1)}, {2}));
  v1::Ack ack = s.Describe({2});
  ASSERT_EQ(ack.metas_size(), 1);
  ASSERT_FALSE(ack.failed(0)) << ack.DebugString();
  EXPECT_THAT(ack.metas(0).sizes(), ::testing::ElementsAre(3, 1));
  EXPECT_EQ(ack.metas(0).dtype(), static_cast<int32_t>(ScalarType::kInt64));
  EXPECT_THAT(s.FetchValues<int64_t>(2), ::testing::ElementsAre(1, 3, 4));
}

TEST_F(ServiceTest, ChunkedUploadAndChunkedStridedFetch) {
  RawSession s(stub_.get());
  // 1000 x 1000 float32 = 4 MB: more than one 3 MiB chunk each way.
  const int64_t rows = 1000, cols = 1000;
  std::vector<float> v(rows * cols);
  std::iota(v.begin(), v.end(), 0.0f);
  const std::string bytes = Bytes(v);
  v1::Request first = Chunk(7, 0, bytes.substr(0, 600000), false);
  *first.mutable_upload()->mutable_meta() = MetaProto({rows, cols}, ScalarType::kFloat32);
  first.mutable_upload()->set_total_bytes(bytes.size());
  s.Send(first);
  s.Send(Chunk(7, 600000, bytes.substr(600000, 600000), false));
  s.Send(Chunk(7, 1200000, bytes.substr(1200000), true));
  s.Send(Call(1, "t", {T(7)}, {8}));
  EXPECT_TRUE(s.Sync().empty());

  FetchResult a = s.Fetch(7);
  ASSERT_TRUE(a.ok);
  EXPECT_EQ(a.chunks, 2);
  EXPECT_EQ(a.data, bytes);

  FetchResult t = s.Fetch(8);
  ASSERT_TRUE(t.ok);
  EXPECT_EQ(t.chunks, 2);
  std::vector<float> got = FromBytes<float>(t.data);
  ASSERT_EQ(got.size(), v.size());
  bool all_equal = true;
  for (int64_t j = 0; j < cols && all_equal; ++j) {
    for (int64_t i = 0; i < rows; ++i) {
      if (got[j * rows + i] != v[i * cols + j]) {
        ADD_FAILURE() << "transposed element (" << j << ", " << i << ") is " << got[j * rows + i];
        all_equal = false;
        break;
      }
    }
  }
}

TEST_F(ServiceTest, FetchOfAnEmptyTensorIsOneLastChunk) {
  RawSession s(stub_.get());
  s.Upload<float>(1, {0, 3}, ScalarType::kFloat32, std::vector<float>{});
  FetchResult r = s.Fetch(1);
  ASSERT_TRUE(r.ok) << r.error.DebugString();
  EXPECT_EQ(r.chunks, 1);
  EXPECT_TRUE(r.data.empty());
  EXPECT_THAT(r.meta.sizes(), ::testing::ElementsAre(0, 3));
}

TEST_F(ServiceTest, ReleaseFreesStorageOnlyWhenTheLastViewGoes) {
  RawSession s(stub_.get());
  s.Upload<float>(1, {4}, ScalarType::kFloat32, {1, 2, 3, 4});
  s.Send(Call(1, "unsqueeze", {T(1), I(0)}, {2}));
  v1::Request rel;
  rel.mutable_release()->add_handles(1);
  s.Send(rel);
  EXPECT_TRUE(s.Sync().empty());
  EXPECT_EQ(daemon_->service().session_stats(s.id())->bytes_in_use, 16);
  EXPECT_THAT(s.FetchValues<float>(2), ::testing::ElementsAre(1, 2, 3, 4));
  rel.mutable_release()->set_handles(0, 2);
  s.Send(rel);
  EXPECT_TRUE(s.Sync().empty());
  EXPECT_EQ(daemon_->service().session_stats(s.id())->bytes_in_use, 0);
  EXPECT_EQ(daemon_->service().session_stats(s.id())->live_handles, 0u);
  // Released handles are unknown afterwards.
  FetchResult r = s.Fetch(1);
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.error.message(), HasSubstr("unknown tensor handle 1"));
}

TEST_F(ServiceTest, MemoryIsAccountedAndReturnsToZeroAfterClose) {
  RawSession s(stub_.get());
  s.Upload<double>(1, {1000}, ScalarType::kFloat64, std::vector<double>(1000, 2.0));
  s.Send(Call(1, "zeros", {IL({250}), None(), None()}, {2}));
  EXPECT_TRUE(s.Sync().empty());
  auto stats = daemon_->service().session_stats(s.id());
  ASSERT_TRUE(stats.has_value());
  EXPECT_EQ(stats->bytes_in_use, 8000 + 1000);
  EXPECT_EQ(stats->live_handles, 2u);
  EXPECT_EQ(daemon_->service().bytes_in_use(), 9000);
  ASSERT_TRUE(s.Close().ok());
  EXPECT_EQ(s.close_response().peak_bytes(), 9000u);
  EXPECT_EQ(s.close_response().ops_executed(), 1u);
  EXPECT_EQ(daemon_->service().bytes_in_use(), 0);
}

TEST_F(ServiceTest, SessionMemoryLimitGivesAMemoryErrorNamingTheOp) {
  StartDaemon(/*session_memory_limit_bytes=*/8192);  // storage, and each handle's entry
  {
    grpc::ClientContext ctx;
    v1::HandshakeRequest req;
    req.set_protocol_version(wire::kProtocolVersion);
    req.set_op_table_digest(OpTable::Get().digest());
    v1::HandshakeResponse resp;
    ASSERT_TRUE(stub_->Handshake(&ctx, req, &resp).ok());
  }
  RawSession s(stub_.get());
  EXPECT_EQ(s.open_response().session_memory_limit_bytes(), 8192u);
  s.Upload<float>(1, {512}, ScalarType::kFloat32, std::vector<float>(512, 1.0f));  // 2048 bytes
  s.Send(Call(9, "zeros", {IL({2048}), None(), None()}, {2}, "model.py:12"));  // 8192 more: over
  std::vector<v1::Error> errors = s.Sync();
  ExpectOneError(errors, "out of memory");
  EXPECT_EQ(errors[0].kind(), "MemoryError");
  EXPECT_EQ(errors[0].op(), "zeros");
  EXPECT_EQ(errors[0].call_id(), 9u);
  EXPECT_EQ(errors[0].call_site(), "model.py:12");
  EXPECT_THAT(errors[0].message(), HasSubstr("8192 bytes"));
  EXPECT_THAT(errors[0].message(), HasSubstr("limit"));
  // The failed output reports the same error; the session keeps working.
  FetchResult r = s.Fetch(2);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error.kind(), "MemoryError");
  s.Send(Call(10, "zeros", {IL({256}), None(), None()}, {3}));
  EXPECT_TRUE(s.Sync().empty());
  EXPECT_EQ(daemon_->service().session_stats(s.id())->bytes_in_use, 3072);
  // Another session has its own budget.
  RawSession other(stub_.get());
  other.Upload<float>(1, {1024}, ScalarType::kFloat32, std::vector<float>(1024, 1.0f));
  EXPECT_TRUE(other.Sync().empty());
}

// OpCall.call_site_id: a site defined once is named by its id in later
// messages; an id never defined (or defined out of order) names none.
TEST_F(ServiceTest, InternedCallSitesNameTheSiteDefinedForTheirId) {
  RawSession s(stub_.get());
  s.Upload<float>(1, {2, 3}, ScalarType::kFloat32, {1, 2, 3, 4, 5, 6});
  s.Upload<float>(2, {4, 2}, ScalarType::kFloat32, std::vector<float>(8, 1.0f));
  auto id = [](v1::Request r, uint32_t k, bool keep_text) {
    if (!keep_text) r.mutable_call()->clear_call_site();
    r.mutable_call()->set_call_site_id(k);
    return r;
  };
  s.Send({id(Call(50, "neg", {T(1)}, {3}, "loop.py:7"), 1, true),     // defines 1
          id(Call(51, "neg", {T(1)}, {4}, "loop.py:8"), 2, true),     // defines 2
          id(Call(52, "neg", {T(1)}, {5}, "skip.py:1"), 4, true)});   // out of order: ignored
  s.Send(id(Call(53, "mm", {T(3), T(2)}, {6}), 1, false));            // a later message
  std::vector<v1::Error> errors = s.Sync();
  ExpectOneError(errors, "mm");
  EXPECT_EQ(errors[0].call_id(), 53u);
  EXPECT_EQ(errors[0].call_site(), "loop.py:7");
  s.Send(id(Call(54, "mm", {T(4), T(2)}, {7}), 2, false));
  errors = s.Sync();
  ExpectOneError(errors, "mm");
  EXPECT_EQ(errors[0].call_site(), "loop.py:8");
  s.Send(id(Call(55, "mm", {T(5), T(2)}, {8}), 4, false));  // never defined
  errors = s.Sync();
  ExpectOneError(errors, "mm");
  EXPECT_EQ(errors[0].call_site(), "");
  s.Send(id(Call(56, "mm", {T(5), T(2)}, {9}, "direct.py:3"), 2, true));  // redefines 2
  errors = s.Sync();
  ExpectOneError(errors, "mm");
  EXPECT_EQ(errors[0].call_site(), "direct.py:3");
}

TEST_F(ServiceTest, FailedOpsPropagateTheOriginalErrorWithoutRunning) {
  RawSession s(stub_.get());
  s.Upload<float>(1, {2, 3}, ScalarType::kFloat32, {1, 2, 3, 4, 5, 6});
  s.Upload<float>(2, {4, 2}, ScalarType::kFloat32, std::vector<float>(8, 1.0f));
  s.Send({Call(41, "mm", {T(1), T(2)}, {3}, "knn.py:30"),      // shape error
          Call(42, "neg", {T(3)}, {4}, "knn.py:31"),           // input failed: no new error
          Call(43, "sum", {T(4), None(), B(false), None()}, {5}, "knn.py:32")});
  std::vector<v1::Error> errors = s.Sync();
  ExpectOneError(errors, "mm");
  EXPECT_EQ(errors[0].kind(), "RuntimeError");
  EXPECT_EQ(errors[0].call_id(), 41u);
  EXPECT_EQ(errors[0].call_site(), "knn.py:30");
  // A fetch of the last output names the op that failed first.
  FetchResult r = s.Fetch(5);
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.error.op(), "mm");
  EXPECT_EQ(r.error.call_id(), 41u);
  EXPECT_EQ(r.error.call_site(), "knn.py:30");
  const absl::Status st = wire::FromProto(r.error);
  EXPECT_THAT(std::string(st.message()), HasSubstr("mm (call 41 at knn.py:30): "));
  // Describe flags failed handles and carries their errors.
  v1::Ack ack = s.Describe({1, 3, 5});
  EXPECT_THAT(ack.failed(), ::testing::ElementsAre(false, true, true));
  EXPECT_EQ(ack.errors_size(), 2);
  EXPECT_TRUE(s.Sync().empty());  // already reported
}

// A Sync with peek says whether errors wait and leaves them for the next
// Sync (the client sends one with an adopting upload, before its copy).
TEST_F(ServiceTest, APeekingSyncLeavesTheErrorsForTheNextSync) {
  RawSession s(stub_.get());
  s.Upload<float>(1, {2, 3}, ScalarType::kFloat32, {1, 2, 3, 4, 5, 6});
  v1::Ack clean = s.PeekSync();
  EXPECT_FALSE(clean.errors_pending());
  EXPECT_EQ(clean.errors_size(), 0);
  s.Send({Call(61, "mm", {T(1), T(1)}, {2}, "peek.py:1"),  // shape error
          Call(62, "neg", {T(2)}, {3}, "peek.py:2")});     // input failed: no new error
  v1::Ack pending = s.PeekSync();
  EXPECT_TRUE(pending.errors_pending());
  EXPECT_EQ(pending.errors_size(), 0);
  EXPECT_TRUE(s.PeekSync().errors_pending());  // still there
  std::vector<v1::Error> errors = s.Sync();
  ExpectOneError(errors, "mm");
  EXPECT_EQ(errors[0].call_id(), 61u);
  EXPECT_FALSE(s.PeekSync().errors_pending());  // reported
  EXPECT_TRUE(s.Sync().empty());
}

// The daemon parses each small message into the last one's objects and
// builds each fetch reply in the last one's: nothing of an earlier message
// or reply may come back (its requests, errors, meta or data).
TEST_F(ServiceTest, MessagesAndRepliesCarryNothingOfTheLastOnes) {
  RawSession s(stub_.get());
  s.Upload<float>(1, {2, 3}, ScalarType::kFloat32, {1, 2, 3, 4, 5, 6});
  s.Upload<float>(2, {4}, ScalarType::kFloat32, {7, 8, 9, 10});
  // Three requests, then a fetch whose first chunk reports the failed op.
  v1::Request fetch;
  fetch.mutable_fetch()->set_request_id(901);
  fetch.mutable_fetch()->set_handle(4);
  s.Send({Call(51, "mm", {T(1), T(1)}, {3}, "reuse.py:1"),  // shape error
          Call(52, "neg", {T(1)}, {4}, "reuse.py:2"), fetch});
  v1::ServerMessage m;
  ASSERT_TRUE(s.Read(&m));
  ASSERT_TRUE(m.has_data()) << m.DebugString();
  EXPECT_EQ(m.data().request_id(), 901u);
  ASSERT_EQ(m.data().errors_size(), 1) << m.DebugString();
  EXPECT_EQ(m.data().errors(0).call_id(), 51u);
  EXPECT_THAT(m.data().meta().sizes(), ::testing::ElementsAre(2, 3));
  EXPECT_EQ(m.data().data().size(), 24u);
  // A one-request message: only its fetch runs, and its reply has only its
  // own meta and data.
  fetch.mutable_fetch()->set_request_id(902);
  fetch.mutable_fetch()->set_handle(2);
  s.Send(fetch);
  ASSERT_TRUE(s.Read(&m));
  ASSERT_TRUE(m.has_data()) << m.DebugString();
  EXPECT_EQ(m.data().request_id(), 902u);
  EXPECT_EQ(m.data().errors_size(), 0) << m.DebugString();
  EXPECT_THAT(m.data().meta().sizes(), ::testing::ElementsAre(4));
  EXPECT_EQ(m.data().total_bytes(), 16u);
  EXPECT_EQ(FromBytes<float>(m.data().data()), (std::vector<float>{7, 8, 9, 10}));
  EXPECT_TRUE(s.Sync().empty());  // mm's error was reported once, and neg did not run twice
  EXPECT_THAT(s.FetchValues<float>(4), ::testing::ElementsAre(-1, -2, -3, -4, -5, -6));
}

// A unary call of grpc.health.v1.Health/Check for `service` (a
// HealthCheckRequest encoded by hand: field 1, length-delimited); the
// response's bytes.
grpc::Status HealthCheck(const std::shared_ptr<grpc::Channel>& channel, const std::string& service,
                         std::string* response_bytes) {
  grpc::GenericStub generic(channel);
  grpc::ClientContext ctx;
  grpc::CompletionQueue cq;
  std::string encoded;
  if (!service.empty()) encoded = std::string("\x0a") + static_cast<char>(service.size()) + service;
  grpc::Slice slice(encoded);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::Status status;
  auto call = generic.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", request, &cq);
  call->StartCall();
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  EXPECT_TRUE(cq.Next(&tag, &ok) && ok);
  grpc::Slice out;
  if (status.ok() && response.DumpToSingleSlice(&out).ok()) {
    response_bytes->assign(reinterpret_cast<const char*>(out.begin()), out.size());
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return status;
}

TEST_F(ServiceTest, HealthServiceAnswersServing) {
  // HealthCheckResponse{status: SERVING (1)} is the two bytes 08 01.
  const std::string serving("\x08\x01", 2);
  for (const std::string service : {"", "tensord.v1.Tensord"}) {
    std::string bytes;
    grpc::Status st = HealthCheck(channel_, service, &bytes);
    ASSERT_TRUE(st.ok()) << service << ": " << st.error_message();
    EXPECT_EQ(bytes, serving) << service;
  }
  std::string bytes;
  grpc::Status st = HealthCheck(channel_, "no.such.Service", &bytes);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(st.error_message(), HasSubstr("unknown service 'no.such.Service'"));
}

TEST_F(ServiceTest, NoCallbackPollingThreads) {
  // The daemon serves its health checks itself, on the synchronous API:
  // grpc++'s built-in health service brought a callback completion queue,
  // which gRPC 1.51 drives with two "nexting_thread"s that also picked up
  // the session streams' reads (two more thread switches per round trip).
  std::string bytes;
  ASSERT_TRUE(HealthCheck(channel_, "", &bytes).ok());
  int nexting = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(entry.path() / "comm");
    std::string name;
    std::getline(comm, name);
    nexting += name == "nexting_thread";
  }
  EXPECT_EQ(nexting, 0);
}

// Opens a session and its gRPC stream and sends a sync: the session, its
// stream attached, when the ack comes back; nullptr when the daemon refused
// the stream (RESOURCE_EXHAUSTED, the message containing `why`), after
// closing the session that was opened for it.
std::unique_ptr<RawSession> AttachedOrRefused(v1::Tensord::Stub* stub, const std::string& why) {
  auto s = std::make_unique<RawSession>(stub);
  v1::ClientMessage sync;
  sync.add_requests()->mutable_sync()->set_request_id(1);
  s->stream()->Write(sync);  // false when the stream was refused already
  v1::ServerMessage m;
  if (s->Read(&m)) {
    EXPECT_TRUE(m.has_ack()) << m.DebugString();
    return s;
  }
  const grpc::Status st = s->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_THAT(st.error_message(), HasSubstr(why));
  EXPECT_TRUE(s->Close().ok());  // opened, never attached
  return nullptr;
}

// A session stream on gRPC holds one of the server's threads while it
// lasts. With every stream slot taken, one more stream is refused with a
// message that says why, and the reserved threads keep health checks,
// opening and closing sessions answering (grpc.health.v1's Check used to
// fail once the streams held every thread).
TEST_F(ServiceTest, GrpcStreamsLeaveThreadsForHealthChecksAndOtherSessions) {
  grpc_threads_ = server::kReservedGrpcThreads + 8;  // 8 session streams on gRPC at most
  StartDaemon(0);
  ASSERT_EQ(daemon_->service().options().max_grpc_streams, 8u);
  // As many sessions as the server has threads: 8 get their stream, every
  // other one is refused at once (its thread goes back to the pool).
  std::vector<std::unique_ptr<RawSession>> held;
  int refused = 0;
  for (int i = 0; i < grpc_threads_; ++i) {
    if (auto s = AttachedOrRefused(stub_.get(), "already serves 8 Stream calls on gRPC")) {
      held.push_back(std::move(s));
    } else {
      ++refused;
    }
  }
  EXPECT_EQ(held.size(), 8u);
  EXPECT_EQ(refused, grpc_threads_ - 8);
  // More unary calls, one after another and at once, than there are
  // reserved threads.
  const std::string serving("\x08\x01", 2);
  for (int i = 0; i < 2 * server::kReservedGrpcThreads; ++i) {
    std::string bytes;
    ASSERT_TRUE(HealthCheck(channel_, "", &bytes).ok()) << i;
    EXPECT_EQ(bytes, serving);
  }
  std::vector<std::thread> checks;
  std::atomic<int> answered{0};
  for (int i = 0; i < 8; ++i) {
    checks.emplace_back([&] {
      std::string bytes;
      if (HealthCheck(channel_, "", &bytes).ok() && bytes == serving) answered.fetch_add(1);
    });
  }
  for (std::thread& t : checks) t.join();
  EXPECT_EQ(answered.load(), 8);
  // The held sessions still work; once one ends, its slot takes a new one.
  ASSERT_FALSE(held.empty());
  EXPECT_TRUE(held.front()->Sync().empty());
  EXPECT_TRUE(held.front()->Finish().ok());  // the session ends with its stream
  held.erase(held.begin());
  bool attached = false;
  for (int attempt = 0; attempt < 100 && !attached; ++attempt) {  // the ended call frees its slot as it returns
    if (auto next = AttachedOrRefused(stub_.get(), "already serves 8 Stream calls on gRPC")) {
      attached = true;
      EXPECT_TRUE(next->Finish().ok());
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  EXPECT_TRUE(attached);
  for (auto& h : held) EXPECT_TRUE(h->Sync().empty());
}

// Stream calls that never send attach (no session needed) cannot keep the
// gRPC stream slots: past attach_timeout they are cancelled when a session
// opens or a Stream call is refused.
TEST_F(ServiceTest, StreamCallsThatNeverAttachAreCancelledAfterTheAttachTimeout) {
  grpc_threads_ = server::kReservedGrpcThreads + 8;
  attach_timeout_ = absl::Milliseconds(300);
  StartDaemon(0);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReaderWriter<v1::ClientMessage, v1::ServerMessage>>> silent;
  for (int i = 0; i < 8; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    contexts.back()->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    silent.push_back(stub_->Stream(contexts.back().get()));  // opens the call, sends nothing
  }
  // A real session is refused while they hold every slot (they may take a
  // moment to reach the daemon).
  auto attaches = [&] {
    std::unique_ptr<RawSession> s = AttachedOrRefused(stub_.get(), "TENSORD_SAME_HOST_STREAM");
    if (s != nullptr) (void)s->Finish();
    return s != nullptr;
  };
  bool refused = false;
  for (int i = 0; i < 100 && !refused; ++i) {
    refused = !attaches();
    if (!refused) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(refused) << "the 8 silent Stream calls never held the 8 slots";
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // past attach_timeout
  bool attached = false;
  for (int i = 0; i < 200 && !attached; ++i) {  // the first try cancels them; their slots free as they return
    attached = attaches();
    if (!attached) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(attached);
  for (auto& call : silent) {
    v1::ServerMessage m;
    EXPECT_FALSE(call->Read(&m));
    EXPECT_EQ(call->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
}

TEST_F(ServiceTest, TcpListenerServesToo) {
  ASSERT_EQ(daemon_->addresses().size(), 2u);
  EXPECT_THAT(daemon_->addresses()[1], ::testing::StartsWith("127.0.0.1:"));
  EXPECT_NE(daemon_->addresses()[1], "127.0.0.1:0");
  auto channel = grpc::CreateChannel(daemon_->addresses()[1], grpc::InsecureChannelCredentials());
  auto stub = v1::Tensord::NewStub(channel);
  RawSession s(stub.get());
  s.Upload<int32_t>(1, {3}, ScalarType::kInt32, {7, 8, 9});
  EXPECT_THAT(s.FetchValues<int32_t>(1), ::testing::ElementsAre(7, 8, 9));
}

TEST_F(ServiceTest, ManySessionsRunConcurrently) {
  constexpr int kSessions = 8;
  std::vector<std::thread> threads;
  std::vector<int> ok(kSessions, 0);
  for (int k = 0; k < kSessions; ++k) {
    threads.emplace_back([&, k] {
      RawSession s(stub_.get());
      std::vector<float> v(1000, static_cast<float>(k));
      s.Upload<float>(1, {1000}, ScalarType::kFloat32, v);
      for (int i = 0; i < 20; ++i) s.Send(Call(i + 1, "unsqueeze", {T(1 + i)}, {}));  // wrong arg count
      for (int i = 0; i < 20; ++i) s.Send(Call(100 + i, "unsqueeze", {T(1), I(0)}, {static_cast<uint64_t>(1000 + i)}));
      std::vector<v1::Error> errors = s.Sync();
      std::vector<float> back = s.FetchValues<float>(1019);
      ok[k] = errors.size() == 20 && back == v;
      s.Finish();
    });
  }
  for (auto& t : threads) t.join();
  for (int k = 0; k < kSessions; ++k) EXPECT_TRUE(ok[k]) << "session " << k;
  EXPECT_EQ(daemon_->service().live_sessions(), 0u);
  EXPECT_EQ(daemon_->service().bytes_in_use(), 0);
}

}  // namespace
}  // namespace tensord::testing
