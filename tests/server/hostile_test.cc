// Hostile input straight at the gRPC service (no client library): every
// malformed or malicious request gets a clear error, and the daemon keeps
// serving a second session that runs alongside.
#include <limits>

#include "raw_client.h"

namespace tensord::testing {
namespace {

using ::testing::HasSubstr;

class HostileTest : public DaemonFixture {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    bystander_ = std::make_unique<Bystander>(stub_.get());
  }

  // The session running alongside still computes, and its data is intact.
  void ExpectBystanderServed() { bystander_->ExpectServed(); }

  void TearDown() override {
    ExpectBystanderServed();
    bystander_.reset();
    DaemonFixture::TearDown();
  }

  std::unique_ptr<Bystander> bystander_;
};

TEST_F(HostileTest, UnknownHandle) {
  RawSession s(stub_.get());
  s.Send(Call(1, "neg", {T(999)}, {2}));
  std::vector<v1::Error> errors = s.Sync();
  ExpectOneError(errors, "unknown tensor handle 999");
  EXPECT_EQ(errors[0].op(), "neg");
  EXPECT_EQ(errors[0].kind(), "RuntimeError");
  FetchResult r = s.Fetch(999);
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.error.message(), HasSubstr("unknown tensor handle 999"));
  v1::Error e;
  s.Describe({999}, &e);
  EXPECT_THAT(e.message(), HasSubstr("unknown tensor handle 999"));
  ExpectBystanderServed();
}

TEST_F(HostileTest, AnotherSessionsHandleIsUnknown) {
  RawSession s(stub_.get());
  // Handle 1 exists in the bystander's session, not in this one.
  s.Send(Call(1, "neg", {T(1)}, {2}));
  ExpectOneError(s.Sync(), "unknown tensor handle 1");
  FetchResult r = s.Fetch(1);
  EXPECT_FALSE(r.ok);
  v1::Request rel;
  rel.mutable_release()->add_handles(1);
  s.Send(rel);
  ExpectOneError(s.Sync(), "release: unknown tensor handle 1");
  ExpectBystanderServed();  // its handle 1 is intact
}

TEST_F(HostileTest, BadTokenAndForeignSessionId) {
  RawSession s(stub_.get(), false);
  s.Attach(bystander_->session().id(), s.token());  // someone else's session with our token
  EXPECT_EQ(s.Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  ExpectBystanderServed();
}

TEST_F(HostileTest, OutOfRangeDtypeInAnUploadAndInAnArgument) {
  RawSession s(stub_.get());
  v1::TensorMetaProto m = MetaProto({2}, ScalarType::kFloat32);
  m.set_dtype(99);
  s.Send(UploadReq(5, m, std::string(8, '\0')));
  ExpectOneError(s.Sync(), "invalid dtype 99");
  m.set_dtype(-1);
  s.Send(UploadReq(6, m, std::string(8, '\0')));
  ExpectOneError(s.Sync(), "invalid dtype -1");
  // A failed upload leaves a failed handle that reports the error.
  FetchResult r = s.Fetch(5);
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.error.message(), HasSubstr("invalid dtype 99"));

  s.Upload<float>(1, {2}, ScalarType::kFloat32, {1, 2});
  s.Send(Call(1, "to.dtype", {T(1), Dt(77), B(false), B(false)}, {2}));
  std::vector<v1::Error> errors = s.Sync();
  ExpectOneError(errors, "77 is not a valid dtype");
  EXPECT_EQ(errors[0].op(), "to.dtype");
  ExpectBystanderServed();
}

TEST_F(HostileTest, OutOfRangeDeviceType) {
  RawSession s(stub_.get());
  v1::TensorMetaProto m = MetaProto({2}, ScalarType::kFloat32);
  m.set_device_type(42);
  s.Send(UploadReq(5, m, std::string(8, '\0')));
  ExpectOneError(s.Sync(), "invalid device type 42");
  m.set_device_type(static_cast<int32_t>(DeviceType::kMeta));
  s.Send(UploadReq(6, m, std::string(8, '\0')));
  ExpectOneError(s.Sync(), "device must be one this daemon serves, got meta");
  s.Send(Call(1, "zeros", {IL({2}), None(), Dev("tpu:0")}, {7}));
  ExpectOneError(s.Sync(), "tpu:0");
  ExpectBystanderServed();
}

TEST_F(HostileTest, NegativeAndOverflowingSizes) {
  RawSession s(stub_.get());
  s.Send(UploadReq(5, MetaProto({-3}, ScalarType::kFloat32), ""));
  ExpectOneError(s.Sync(), "negative size -3");
  v1::TensorMetaProto huge = MetaProto({1, 1}, ScalarType::kFloat32);
  huge.set_sizes(0, int64_t{1} << 40);
  huge.set_sizes(1, int64_t{1} << 40);
  huge.set_strides(0, int64_t{1} << 40);
  s.Send(UploadReq(6, huge, ""));
  ExpectOneError(s.Sync(), "more elements than int64 can count");
  v1::TensorMetaProto far = MetaProto({1 << 20, 2}, ScalarType::kFloat32);
  far.set_strides(0, int64_t{1} << 50);
  s.Send(UploadReq(16, far, ""));
  ExpectOneError(s.Sync(), "overflow");
  // Rank mismatch between sizes and strides.
  v1::TensorMetaProto ranks = MetaProto({2, 2}, ScalarType::kFloat32);
  ranks.add_strides(1);
  s.Send(UploadReq(7, ranks, std::string(16, '\0')));
  ExpectOneError(s.Sync(), "2 sizes but 3 strides");
  // Op arguments: a negative size and a product that overflows.
  s.Send(Call(1, "zeros", {IL({-1, 4}), None(), None()}, {8}));
  std::vector<v1::Error> errors = s.Sync();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].op(), "zeros");
  EXPECT_THAT(errors[0].message(), HasSubstr("-1"));
  s.Send(Call(2, "zeros", {IL({int64_t{1} << 40, int64_t{1} << 40}), None(), None()}, {9}));
  errors = s.Sync();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].op(), "zeros");
  // An allocation larger than the machine is refused, not attempted.
  s.Send(Call(3, "zeros", {IL({int64_t{1} << 50}), Dt(static_cast<int32_t>(ScalarType::kUInt8)), None()}, {10}));
  errors = s.Sync();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].kind(), "MemoryError");
  ExpectBystanderServed();
}

TEST_F(HostileTest, StridesAndOffsetsThatReachPastTheStorage) {
  RawSession s(stub_.get());
  // Uploads are contiguous from offset 0; anything else could address
  // memory the data does not fill.
  v1::TensorMetaProto m = MetaProto({2, 3}, ScalarType::kFloat32);
  m.set_strides(0, 100);
  s.Send(UploadReq(5, m, std::string(24, '\0')));
  ExpectOneError(s.Sync(), "contiguous");
  m = MetaProto({2, 3}, ScalarType::kFloat32);
  m.set_storage_offset(1000);
  s.Send(UploadReq(6, m, std::string(24, '\0')));
  ExpectOneError(s.Sync(), "storage_offset 1000");
  m = MetaProto({2, 3}, ScalarType::kFloat32);
  m.set_storage_offset(-4);
  s.Send(UploadReq(7, m, std::string(24, '\0')));
  ExpectOneError(s.Sync(), "negative storage_offset");
  m = MetaProto({2, 3}, ScalarType::kFloat32);
  m.set_strides(1, -1);
  s.Send(UploadReq(8, m, std::string(24, '\0')));
  ExpectOneError(s.Sync(), "negative stride");
  // total_bytes that disagrees with the meta.
  v1::Request r = UploadReq(9, MetaProto({2, 3}, ScalarType::kFloat32), std::string(24, '\0'));
  r.mutable_upload()->set_total_bytes(1 << 30);
  s.Send(r);
  ExpectOneError(s.Sync(), "total_bytes is 1073741824");
  // Views whose arguments reach past the tensor.
  s.Upload<float>(1, {2, 3}, ScalarType::kFloat32, {1, 2, 3, 4, 5, 6});
  s.Send(Call(1, "narrow", {T(1), I(1), I(2), I(5)}, {10}));
  std::vector<v1::Error> errors = s.Sync();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].op(), "narrow");
  s.Send(Call(2, "select.int", {T(1), I(0), I(int64_t{1} << 62)}, {11}));
  errors = s.Sync();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].op(), "select.int");
  s.Send(Call(3, "view", {T(1), IL({7})}, {12}));
  errors = s.Sync();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].op(), "view");
  s.Send(Call(4, "expand", {T(1), IL({std::numeric_limits<int64_t>::max(), 2, 3}), B(false)}, {13}));
  errors = s.Sync();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].op(), "expand");
  ExpectBystanderServed();
}

TEST_F(HostileTest, WrongArgumentKindsAndCounts) {
  RawSession s(stub_.get());
  s.Upload<float>(1, {3}, ScalarType::kFloat32, {1, 2, 3});
  s.Send(Call(1, "add.Tensor", {T(1), I(3), I(1)}, {2}));
  std::vector<v1::Error> errors = s.Sync();
  ExpectOneError(errors, "argument 'other' expected Tensor, got int");
  EXPECT_EQ(errors[0].kind(), "TypeError");
  s.Send(Call(2, "add.Tensor", {T(1), T(1)}, {3}));
  ExpectOneError(s.Sync(), "expected 3 arguments");
  s.Send(Call(3, "neg", {T(1)}, {4, 5}));
  ExpectOneError(s.Sync(), "expected 1 output handle");
  s.Send(Call(4, "transpose.int", {T(1), Dev("cpu"), I(0)}, {6}));
  ExpectOneError(s.Sync(), "argument 'dim0' expected int, got Device");
  s.Send(Call(5, "cat", {TL({1, 0}), I(0)}, {7}));
  ExpectOneError(s.Sync(), "got None at index 1");
  v1::Request empty_value = Call(6, "neg", {T(1)}, {8});
  empty_value.mutable_call()->mutable_args(0)->Clear();
  s.Send(empty_value);
  ExpectOneError(s.Sync(), "argument 'self' has no value");
  s.Send(Call(7, "neg", {None()}, {9}));
  ExpectOneError(s.Sync(), "expected Tensor, got None");
  ExpectBystanderServed();
}

TEST_F(HostileTest, OpIdOutOfRange) {
  RawSession s(stub_.get());
  s.Send(Call(1, static_cast<uint32_t>(OpTable::Get().size()), {}, {2}));
  s.Send(Call(2, std::numeric_limits<uint32_t>::max(), {}, {3}));
  std::vector<v1::Error> errors = s.Sync();
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_THAT(errors[0].message(), HasSubstr("is out of range"));
  EXPECT_THAT(errors[1].message(), HasSubstr("op id 4294967295 is out of range"));
  FetchResult r = s.Fetch(2);
  EXPECT_FALSE(r.ok);
  ExpectBystanderServed();
}

TEST_F(HostileTest, BadOutputHandles) {
  RawSession s(stub_.get());
  s.Upload<float>(1, {3}, ScalarType::kFloat32, {1, 2, 3});
  s.Send(Call(1, "neg", {T(1)}, {0}));
  ExpectOneError(s.Sync(), "handle 0 is reserved");
  s.Send(Call(2, "neg", {T(1)}, {1}));
  ExpectOneError(s.Sync(), "handle 1 is already in use");
  s.Send(Call(3, "max.dim", {T(1), I(0), B(false)}, {5, 5}));
  ExpectOneError(s.Sync(), "appears twice");
  s.Send(UploadReq(1, MetaProto({1}, ScalarType::kFloat32), std::string(4, '\0')));
  ExpectOneError(s.Sync(), "already in use");
  // Handle 1 still holds the original data.
  EXPECT_THAT(s.FetchValues<float>(1), ::testing::ElementsAre(1, 2, 3));
  ExpectBystanderServed();
}

TEST_F(HostileTest, TruncatedChunkedUploads) {
  RawSession s(stub_.get());
  // First chunk, then an op uses the handle before the last chunk.
  v1::Request first = Chunk(5, 0, std::string(16, '\0'), false);
  *first.mutable_upload()->mutable_meta() = MetaProto({8}, ScalarType::kFloat32);
  first.mutable_upload()->set_total_bytes(32);
  first.mutable_upload()->set_call_id(77);
  s.Send(first);
  s.Send(Call(1, "neg", {T(5)}, {6}));
  std::vector<v1::Error> errors = s.Sync();
  ASSERT_EQ(errors.size(), 2u);
  // The truncated upload first (it came first), then the op that used it.
  EXPECT_THAT(errors[0].message(), HasSubstr("upload of handle 5 is incomplete: received 16 of 32 bytes"));
  EXPECT_EQ(errors[0].op(), "upload");
  EXPECT_EQ(errors[0].call_id(), 77u);
  EXPECT_THAT(errors[1].message(), HasSubstr("used before its upload completed"));
  EXPECT_EQ(errors[1].op(), "neg");
  EXPECT_EQ(errors[1].call_id(), 1u);
  FetchResult r = s.Fetch(5);
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.error.message(), HasSubstr("incomplete"));
  // A late chunk for it is an error too, not a crash.
  s.Send(Chunk(5, 16, std::string(16, '\0'), true));
  ExpectOneError(s.Sync(), "already in use");

  // A gap between chunks.
  first.mutable_upload()->set_handle(10);
  s.Send(first);
  s.Send(Chunk(10, 20, std::string(12, '\0'), true));
  ExpectOneError(s.Sync(), "chunk at offset 20, expected offset 16");
  // A chunk past total_bytes.
  first.mutable_upload()->set_handle(11);
  s.Send(first);
  s.Send(Chunk(11, 16, std::string(32, '\0'), true));
  ExpectOneError(s.Sync(), "reaches past total_bytes 32");
  // `last` before all bytes arrived.
  first.mutable_upload()->set_handle(12);
  s.Send(first);
  s.Send(Chunk(12, 16, std::string(8, '\0'), true));
  ExpectOneError(s.Sync(), "after 24 of 32 bytes");
  // A fetch interrupts an upload.
  first.mutable_upload()->set_handle(13);
  s.Send(first);
  r = s.Fetch(13);
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.error.message(), HasSubstr("incomplete"));
  // A continuation chunk without a first one.
  s.Send(Chunk(14, 0, std::string(4, '\0'), true));
  ExpectOneError(s.Sync(), "carries no meta");
  EXPECT_EQ(daemon_->service().session_stats(s.id())->pending_uploads, 0u);

  // An upload left unfinished when the stream ends is discarded with the session.
  first.mutable_upload()->set_handle(15);
  s.Send(first);
  EXPECT_TRUE(s.Sync().empty());
  EXPECT_EQ(daemon_->service().session_stats(s.id())->pending_uploads, 1u);
  EXPECT_TRUE(s.Finish().ok());
  EXPECT_EQ(daemon_->service().live_sessions(), 1u);  // the bystander
  ExpectBystanderServed();
}

// A first chunk of 64 KiB or more is placed straight into a storage it
// starts while the message is parsed (Session::PlaceUploadData): it is
// checked as any first chunk, and one that fails (a wrong total, a handle in
// use, a strided meta, the session's memory limit) is reported as before,
// leaving no upload behind; good ones, whole or continued, keep their bytes.
using LargeUploadTest = DaemonFixture;

TEST_F(LargeUploadTest, FirstChunksAreCheckedAsSmallOnes) {
  StartDaemon(/*session_memory_limit_bytes=*/1 << 20);
  RawSession s(stub_.get());
  std::vector<float> values(32768);  // 128 KiB
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f;
  s.Send(UploadReq(1, MetaProto({32768}, ScalarType::kFloat32), Bytes(values)));
  EXPECT_TRUE(s.Sync().empty());
  EXPECT_EQ(s.FetchValues<float>(1), values);
  // The same handle again.
  s.Send(UploadReq(1, MetaProto({32768}, ScalarType::kFloat32), Bytes(values)));
  ExpectOneError(s.Sync(), "already in use");
  // total_bytes that disagrees with the meta.
  v1::Request wrong = UploadReq(2, MetaProto({32768}, ScalarType::kFloat32), Bytes(values));
  wrong.mutable_upload()->set_total_bytes(1000);
  s.Send(wrong);
  ExpectOneError(s.Sync(), "total_bytes is 1000 but sizes [32768] of float32 need 131072 bytes");
  // A strided meta.
  v1::TensorMetaProto strided = MetaProto({128, 256}, ScalarType::kFloat32);
  strided.set_strides(0, 1);
  strided.set_strides(1, 128);
  s.Send(UploadReq(3, strided, Bytes(values)));
  ExpectOneError(s.Sync(), "contiguous");
  // Over the session's memory limit (1 MiB; 128 KiB in use).
  std::vector<float> big(262144);  // 1 MiB
  s.Send(UploadReq(4, MetaProto({262144}, ScalarType::kFloat32), Bytes(big)));
  std::vector<v1::Error> errors = s.Sync();
  ExpectOneError(errors, "out of memory");
  EXPECT_EQ(errors[0].kind(), "MemoryError");
  EXPECT_EQ(daemon_->service().session_stats(s.id())->pending_uploads, 0u);
  // ... and in chunks: one error for the upload, not one per chunk that
  // follows the failed first one.
  const std::string big_bytes = Bytes(big);
  v1::Request big_first = Chunk(6, 0, big_bytes.substr(0, 393216), false);
  *big_first.mutable_upload()->mutable_meta() = MetaProto({262144}, ScalarType::kFloat32);
  big_first.mutable_upload()->set_total_bytes(big_bytes.size());
  s.Send(big_first);
  s.Send(Chunk(6, 393216, big_bytes.substr(393216, 393216), false));
  s.Send(Chunk(6, 786432, big_bytes.substr(786432), true));
  errors = s.Sync();
  ExpectOneError(errors, "out of memory");
  EXPECT_TRUE(s.Sync().empty());
  EXPECT_EQ(daemon_->service().session_stats(s.id())->pending_uploads, 0u);
  // A large first chunk continued by a second.
  const std::string bytes = Bytes(values);
  v1::Request first = Chunk(5, 0, bytes.substr(0, 98304), false);
  *first.mutable_upload()->mutable_meta() = MetaProto({32768}, ScalarType::kFloat32);
  first.mutable_upload()->set_total_bytes(bytes.size());
  s.Send(first);
  s.Send(Chunk(5, 98304, bytes.substr(98304), true));
  EXPECT_TRUE(s.Sync().empty());
  EXPECT_EQ(s.FetchValues<float>(5), values);
  EXPECT_EQ(daemon_->service().session_stats(s.id())->pending_uploads, 0u);
}

TEST_F(HostileTest, MalformedRequestsAndMetaDevices) {
  RawSession s(stub_.get());
  s.Send(v1::Request());
  ExpectOneError(s.Sync(), "malformed request");
  s.Send(Call(1, "zeros", {IL({2}), None(), Dev("meta")}, {2}));
  std::vector<v1::Error> errors = s.Sync();
  ExpectOneError(errors, "meta");
  EXPECT_EQ(errors[0].kind(), "NotImplementedError");
  s.Send(Call(2, "zeros", {IL({2}), None(), Dev("cuda:0")}, {3}));
  errors = s.Sync();
  ExpectOneError(errors, "cuda:0");
  EXPECT_EQ(errors[0].kind(), "NotImplementedError");
  s.Upload<float>(1, {2}, ScalarType::kFloat32, {1, 2});
  s.Send(Call(3, "to.device", {T(1), Dev("meta"), None(), B(false), B(false)}, {4}));
  ExpectOneError(s.Sync(), "meta");
  ExpectBystanderServed();
}

TEST_F(HostileTest, AFloodOfErrorsIsBounded) {
  RawSession s(stub_.get());
  std::vector<v1::Request> reqs;
  for (int i = 0; i < 1500; ++i) reqs.push_back(Call(i, "neg", {T(424242)}, {}));
  s.Send(std::move(reqs));
  std::vector<v1::Error> errors = s.Sync();
  ASSERT_EQ(errors.size(), server::kMaxUnreportedErrors + 1);
  EXPECT_THAT(errors.back().message(), HasSubstr("476 more errors"));
  ExpectBystanderServed();
}

}  // namespace
}  // namespace tensord::testing
