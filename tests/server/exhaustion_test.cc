// Memory a client could make the daemon hold beyond its session's limit,
// spoken to raw: failed output handles, call sites, uploads left open,
// stream messages announced and not sent or that would expand once parsed,
// and oversized handshakes are each charged to the session or capped. After
// each attempt the daemon's resident memory (this process: the daemon runs
// in it) has grown by less than kRssBound (measured outside sanitizer
// builds), the daemon serves, and a second session is unharmed.
#include <malloc.h>
#include <sys/socket.h>

#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "raw_client.h"
#include "absl/time/clock.h"
#include "tensord/transport/socket_stream.h"
#include "tensord/server/daemon.h"

namespace tensord::testing {
namespace {

using ::testing::HasSubstr;

// An attempt may leave this much more resident (allocator slack, gRPC's
// buffers); each one below would hold hundreds of megabytes unbounded.
constexpr int64_t kRssBound = int64_t{64} << 20;

// VmRSS of this process, in bytes.
int64_t ResidentBytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "VmRSS:  1234 kB"
  }
  return -1;
}

// Bytes allocated by malloc in this process, in every arena and in blocks
// of their own (mmap), touched or not.
int64_t MallocBytes() {
  const struct mallinfo2 mi = ::mallinfo2();
  return static_cast<int64_t>(mi.uordblks + mi.hblkhd);
}

class ExhaustionTest : public DaemonFixture {
 protected:
  void SetUp() override {
    StartDaemon(/*session_memory_limit_bytes=*/1 << 20);
    bystander_ = std::make_unique<Bystander>(stub_.get());
    rss_before_ = ResidentBytes();
    ASSERT_GT(rss_before_, 0);
  }

  void TearDown() override {
    if (kMemoryIsMeasurable) {
      EXPECT_LT(ResidentBytes() - rss_before_, kRssBound);
    }
    bystander_->ExpectServed();
    bystander_.reset();
    DaemonFixture::TearDown();
  }

  std::unique_ptr<Bystander> bystander_;
  int64_t rss_before_ = 0;
};

// Calls that fail with thousands of output handles each: every handle kept
// as a failed one is charged to the session, and past its limit is not kept.
TEST_F(ExhaustionTest, FailedOutputHandlesAreChargedToTheSession) {
  RawSession s(stub_.get());
  uint64_t next = 1000;
  constexpr int kCalls = 100, kOutputs = 10000;  // a million handles: hundreds of MiB if kept uncharged
  bool refused = false;
  for (int c = 0; c < kCalls; ++c) {
    std::vector<uint64_t> outs(kOutputs);
    for (uint64_t& h : outs) h = next++;
    s.Send(Call(c, "neg", {T(424242)}, outs));  // neg has one return: the call fails
    for (const v1::Error& e : s.Sync()) {
      if (absl::StrContains(e.message(), "is not kept")) {
        refused = true;
        EXPECT_THAT(e.message(), HasSubstr("out of memory"));
        EXPECT_EQ(e.kind(), "MemoryError");
      }
    }
  }
  EXPECT_TRUE(refused);
  const int64_t held = daemon_->service().session_stats(s.id())->bookkeeping_bytes;
  EXPECT_LE(held, 1 << 20);
  EXPECT_GT(held, 1 << 19);
  // Releasing the handles kept gives their bytes back (those not kept are
  // unknown: errors).
  v1::Request release;
  for (uint64_t h = 1000; h < next; ++h) release.mutable_release()->add_handles(h);
  s.Send(release);
  s.Sync();
  EXPECT_EQ(daemon_->service().session_stats(s.id())->bookkeeping_bytes, 0);
  s.Upload<float>(2, {2}, ScalarType::kFloat32, {7, 8});
  EXPECT_THAT(s.FetchValues<float>(2), ::testing::ElementsAre(7, 8));
}

// Views hold no storage of their own, but each handle is a table entry:
// entries are charged to the session, so a loop of views stops at its
// limit with an out-of-memory error, and releasing them gives it back.
TEST_F(ExhaustionTest, EveryHandleIsChargedEvenAViewWithoutStorage) {
  RawSession s(stub_.get());
  s.Upload<float>(1, {1}, ScalarType::kFloat32, {5});
  uint64_t next = 1000;
  int refused = 0, entries_refused = 0;
  // 20,000 views, several MiB of entries, in batches whose errors (at most
  // two per view) fit the list a sync reports.
  for (int batch = 0; batch < 40; ++batch) {
    std::vector<v1::Request> calls;
    for (int k = 0; k < 500; ++k, ++next) calls.push_back(Call(next, "unsqueeze", {T(1), I(0)}, {next}));
    s.Send(std::move(calls));
    // Over the limit, a view fails for its entry; its handle is then kept
    // as a failed one (a bounded number uncharged) or not kept at all.
    for (const v1::Error& e : s.Sync()) {
      ++refused;
      EXPECT_THAT(e.message(), HasSubstr("out of memory")) << e.DebugString();
      EXPECT_EQ(e.kind(), "MemoryError");
      entries_refused += absl::StrContains(e.message(), "unsqueeze (the table entries of 1 tensor handle)");
    }
  }
  EXPECT_GT(refused, 10000);
  EXPECT_GT(entries_refused, 1000);
  const int64_t held = daemon_->service().session_stats(s.id())->bookkeeping_bytes;
  EXPECT_LE(held, 1 << 20);
  EXPECT_GT(held, 1 << 18);
  // A kept view still reads its tensor; releasing every handle gives the
  // entries back, and views can be made again.
  EXPECT_THAT(s.FetchValues<float>(1000), ::testing::ElementsAre(5));
  v1::Request release;
  for (uint64_t h = 1000; h < next; ++h) release.mutable_release()->add_handles(h);
  s.Send(release);
  s.Sync();
  EXPECT_LT(daemon_->service().session_stats(s.id())->bookkeeping_bytes, 4096);
  s.Send(Call(next, "unsqueeze", {T(1), I(0)}, {next}));
  EXPECT_THAT(s.FetchValues<float>(next), ::testing::ElementsAre(5));
}

// A handle of a 64-dim tensor holds its sizes and strides beyond what its
// entry keeps inline (a kilobyte): that is charged too. 2,000 such views
// fit no 1 MiB session (at 360 bytes each they would have, holding 3 MB).
TEST_F(ExhaustionTest, AHandleIsChargedForItsDims) {
  RawSession s(stub_.get());
  std::vector<int64_t> sizes(64, 1);
  sizes[0] = 0;
  s.Upload<float>(1, sizes, ScalarType::kFloat32, {});
  const auto split = [&](uint64_t first, int n) {
    std::vector<uint64_t> outs(n);
    for (int i = 0; i < n; ++i) outs[i] = first + i;
    s.Send(Call(first, "split_with_sizes", {T(1), IL(std::vector<int64_t>(n, 0)), I(0)}, outs));
    return s.Sync();
  };
  std::vector<v1::Error> errors = split(1000, 2000);
  ASSERT_FALSE(errors.empty());
  EXPECT_THAT(errors[0].message(), HasSubstr("(the table entries of 2000 tensor handles): out of memory"));
  v1::Request release;  // the failed outputs that were kept
  for (uint64_t h = 1000; h < 3000; ++h) release.mutable_release()->add_handles(h);
  s.Send(release);
  s.Sync();
  const int64_t before = daemon_->service().session_stats(s.id())->bookkeeping_bytes;
  errors = split(10000, 500);
  EXPECT_TRUE(errors.empty()) << errors[0].message();
  EXPECT_EQ(daemon_->service().session_stats(s.id())->bookkeeping_bytes - before, 500 * (360 + 1024));
}

// Interned call sites: cut to kMaxCallSiteBytes and charged.
TEST_F(ExhaustionTest, CallSitesAreCutAndCharged) {
  RawSession s(stub_.get());
  const std::string site(64 << 10, 'x');  // 64 KiB each; 2,048 of them: 128 MiB if kept whole
  uint32_t id = 1;
  for (int batch = 0; batch < 64; ++batch) {
    std::vector<v1::Request> reqs;
    for (int k = 0; k < 32; ++k, ++id) {
      v1::Request r = Call(id, "neg", {T(424242)}, {}, site);
      r.mutable_call()->set_call_site_id(id);
      reqs.push_back(std::move(r));
    }
    s.Send(std::move(reqs));
    for (const v1::Error& e : s.Sync()) {
      EXPECT_LE(e.call_site().size(), server::kMaxCallSiteBytes);
    }
  }
  // 1 MiB holds fewer than 2,048 sites of 1 KiB (with their strings): some
  // were not kept, and the session's bytes stay under its limit.
  const int64_t held = daemon_->service().session_stats(s.id())->bookkeeping_bytes;
  EXPECT_LE(held, 1 << 20);
  EXPECT_GT(held, 1 << 19);
  // An interned site is still named by a later error.
  v1::Request again = Call(id, "neg", {T(424242)}, {}, "");
  again.mutable_call()->set_call_site_id(1);
  s.Send(again);
  std::vector<v1::Error> errors = s.Sync();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].call_site(), std::string(server::kMaxCallSiteBytes, 'x'));
}

// A site redefined with a shorter text gives back what the longer one
// held: otherwise rounds of long sites, each shortened, would pile up
// memory while the charge stayed small.
TEST_F(ExhaustionTest, ARedefinedCallSiteIsChargedForWhatItHolds) {
  RawSession s(stub_.get());
  const std::string long_site(server::kMaxCallSiteBytes, 'l');
  uint32_t id = 1;
  // Each round defines 400 sites of 1 KiB, then redefines them to one byte.
  // 45 rounds keep 18,000 sites, whose one-byte texts and string objects
  // fit the 1 MiB limit beside a round's long ones.
  const auto round = [&] {
    const uint32_t first = id;
    for (const std::string& text : {long_site, std::string("s")}) {
      std::vector<v1::Request> reqs;
      for (uint32_t k = first; k < first + 400; ++k) {
        v1::Request r = Call(k, "neg", {T(424242)}, {}, text);
        r.mutable_call()->set_call_site_id(k);
        reqs.push_back(std::move(r));
      }
      s.Send(std::move(reqs));
      for (const v1::Error& e : s.Sync()) EXPECT_THAT(e.call_site(), ::testing::AnyOf(text, "s"));
    }
    id = first + 400;
  };
  round();  // the first round warms the buffers that every round reuses
  const int64_t malloc_before = MallocBytes();
  for (int r = 1; r < 45; ++r) round();
  // Kept long, the 17,600 redefined sites would hold 17 MiB.
  if (kMemoryIsMeasurable) {
    EXPECT_LT(MallocBytes() - malloc_before, int64_t{6} << 20);
  }
  const int64_t held = daemon_->service().session_stats(s.id())->bookkeeping_bytes;
  EXPECT_LE(held, 18000 * 64);  // each site's string object and its short text
  // The last site is still named by its (short) text.
  v1::Request again = Call(id, "neg", {T(424242)}, {}, "");
  again.mutable_call()->set_call_site_id(id - 1);
  s.Send(again);
  const std::vector<v1::Error> errors = s.Sync();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].call_site(), "s");
}

// Describe answers each handle with its meta (and a failed one's error):
// a request that names a handle a million times, one byte each, would take
// gigabytes to answer; the reply is bounded instead.
TEST_F(ExhaustionTest, ADescribeIsAnsweredWithinABoundedReply) {
  RawSession s(stub_.get());
  s.Send(Call(1, "add.Tensor", {T(999), T(998), F(1)}, {1}, std::string(1024, 'x')));  // handle 1 fails
  s.Sync();
  const auto describe = [&](int copies) {
    v1::Request r;
    r.mutable_describe()->set_request_id(77 + copies);
    for (int i = 0; i < copies; ++i) r.mutable_describe()->add_handles(1);
    s.Send(r);
    v1::ServerMessage m;
    EXPECT_TRUE(s.Read(&m));
    return m;
  };
  v1::ServerMessage small = describe(1000);
  ASSERT_TRUE(small.has_ack()) << small.DebugString().substr(0, 500);
  EXPECT_EQ(small.ack().metas_size(), 1000);
  EXPECT_EQ(small.ack().errors_size(), 1000);
  v1::ServerMessage huge = describe(1000000);
  ASSERT_TRUE(huge.has_error()) << huge.DebugString().substr(0, 500);
  EXPECT_EQ(huge.error().request_id(), 77u + 1000000);
  EXPECT_THAT(huge.error().error().message(),
              HasSubstr("describe: the reply for 1000000 handles would be more than 4194304 bytes"));
  EXPECT_TRUE(s.Sync().empty());
}

// A recorded call over a list that names one tensor of 64 dims 100,000
// times (a byte each on the wire): its graph node would keep 100,000 copies
// of that metadata (over 100 MB). The node is charged to the session, so
// the call fails over the limit, and an ordinary recorded call still runs.
TEST_F(ExhaustionTest, AGraphNodeIsChargedForWhatItHolds) {
  RawSession s(stub_.get());
  s.Upload<float>(1, std::vector<int64_t>(64, 1), ScalarType::kFloat32, {2});
  v1::Request grad;
  grad.mutable_set_requires_grad()->add_handles(1);
  grad.mutable_set_requires_grad()->set_requires_grad(true);
  s.Send(grad);
  v1::Request cat = Call(1, "cat", {TL(std::vector<uint64_t>(100000, 1)), I(0)}, {2});
  cat.mutable_call()->set_record_grad(true);
  s.Send(cat);
  std::vector<v1::Error> errors = s.Sync();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].kind(), "MemoryError");
  EXPECT_THAT(errors[0].message(), HasSubstr("CatBackward0 (the autograd graph's node): out of memory"));
  EXPECT_LT(daemon_->service().session_stats(s.id())->bookkeeping_bytes, 64 << 10);
  v1::Request small = Call(2, "cat", {TL({1, 1}), I(0)}, {3});
  small.mutable_call()->set_record_grad(true);
  s.Send(small);
  EXPECT_TRUE(s.Sync().empty());
  EXPECT_GT(daemon_->service().session_stats(s.id())->bookkeeping_bytes, 2 * 1024);  // two slots of 64 dims
}

// Uploads begun and never finished: at most kMaxPendingUploads at once.
TEST_F(ExhaustionTest, UploadsInProgressAreCapped) {
  RawSession s(stub_.get());
  std::vector<v1::Request> reqs;
  for (uint64_t h = 1; h <= server::kMaxPendingUploads + 10; ++h) {
    v1::Request r = Chunk(h, 0, std::string(4, '\0'), /*last=*/false);
    *r.mutable_upload()->mutable_meta() = MetaProto({2}, ScalarType::kFloat32);
    r.mutable_upload()->set_total_bytes(8);
    reqs.push_back(std::move(r));
  }
  s.Send(std::move(reqs));
  std::vector<v1::Error> errors = s.Sync();
  ASSERT_EQ(errors.size(), 10u);
  EXPECT_THAT(errors[0].message(), HasSubstr("uploads are already in progress in this session (the limit)"));
  EXPECT_EQ(daemon_->service().session_stats(s.id())->pending_uploads, server::kMaxPendingUploads);
  // Finishing one makes room for another.
  s.Send(Chunk(1, 4, std::string(4, '\0'), /*last=*/true));
  s.Upload<float>(5000, {2}, ScalarType::kFloat32, {3, 4});
  EXPECT_THAT(s.FetchValues<float>(5000), ::testing::ElementsAre(3, 4));
}

// Sessions whose TCP streams each announce a 60 MiB message and send 8 KiB
// of it (past the first 4 KiB the receiver probes for a placed upload): the
// daemon's receivers grow with the bytes that came, not to the announced
// lengths (16 x 60 MiB reserved would be 960 MiB).
TEST_F(ExhaustionTest, AnnouncedStreamLengthsAreNotReservedBeforeTheirBytes) {
  const int64_t malloc_before = MallocBytes();
  std::vector<std::unique_ptr<RawSession>> sessions;
  std::vector<int> fds;
  for (int i = 0; i < 16; ++i) {
    sessions.push_back(std::make_unique<RawSession>(stub_.get(), /*attach=*/false));
    absl::StatusOr<int> fd =
        wire::ConnectTcpStream(daemon_->addresses()[1], sessions.back()->id(), sessions.back()->token(), 10000);
    ASSERT_TRUE(fd.ok()) << fd.status();
    fds.push_back(*fd);
    wire::ByteStreamHeader h;
    h.length = 60 << 20;
    const std::string bytes = std::string(reinterpret_cast<const char*>(&h), sizeof(h)) + std::string(8192, 'x');
    ASSERT_EQ(::send(*fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }
  // Let every stream's thread take its bytes in, then measure with them all
  // still waiting inside their messages. Untouched pages of a reserved
  // buffer are not resident, so the heap's allocated bytes are what show a
  // reservation made for the announced length.
  absl::SleepFor(absl::Milliseconds(300));
  if (kMemoryIsMeasurable) {
    EXPECT_LT(ResidentBytes() - rss_before_, kRssBound);
    EXPECT_LT(MallocBytes() - malloc_before, kRssBound);
  }
  // The bystander is served meanwhile (TearDown checks it again after).
  bystander_->ExpectServed();
  for (int fd : fds) ::close(fd);
}

// A stream message whose bytes are small but whose parse would take far
// more (empty submessages: 2 bytes each on the wire, tens once parsed) is
// counted against the session before it is parsed, and over the limit ends
// the stream with the numbers; the session's peers are unharmed.
TEST_F(ExhaustionTest, AMessageThatWouldDecodeBeyondTheLimitIsRefusedUnparsed) {
  const int64_t malloc_before = MallocBytes();
  RawSession s(stub_.get());
  ASSERT_TRUE(s.Sync().empty());
  {
    // One call with two million empty arguments, written as the bytes
    // protobuf would write (a Request whose `call` field is those bytes),
    // so that this test (the daemon's process) never builds them.
    std::string call;
    for (int i = 0; i < 2000000; ++i) call += std::string("\x1a\x00", 2);  // OpCall.args: an empty Value
    v1::ClientMessage m;
    v1::Request* r = m.add_requests();
    r->GetReflection()->MutableUnknownFields(r)->AddLengthDelimited(v1::Request::kCallFieldNumber, call);
    ASSERT_TRUE(s.stream()->Write(m));
  }
  const grpc::Status st = s.Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_THAT(st.error_message(), HasSubstr("decoding a stream message of 4000010 bytes (up to "));
  EXPECT_THAT(st.error_message(), HasSubstr("1.00 MiB limit"));
  // Refused before parsing: the two million Values (over 100 MiB) were
  // never made.
  if (kMemoryIsMeasurable) {
    EXPECT_LT(MallocBytes() - malloc_before, kRssBound);
  }
  // Big messages that a session at its limit needs still go through: a
  // release of a million handles (some 16 MiB once parsed).
  RawSession again(stub_.get());
  v1::Request release;
  for (uint64_t h = 1000; h < 1001000; ++h) release.mutable_release()->add_handles(h);
  again.Send(release);
  again.Sync();
  again.Upload<float>(2, {2}, ScalarType::kFloat32, {7, 8});
  EXPECT_THAT(again.FetchValues<float>(2), ::testing::ElementsAre(7, 8));
  EXPECT_TRUE(again.Close().ok());
}

// Before a gRPC stream names its session there is nobody to charge: its
// first message (attach) is refused unparsed past a few KiB.
TEST_F(ExhaustionTest, AnOversizedFirstStreamMessageIsRefusedUnparsed) {
  grpc::ClientContext ctx;
  auto stream = stub_->Stream(&ctx);
  v1::ClientMessage m;
  m.mutable_attach()->set_session_id(1);
  for (int i = 0; i < 100000; ++i) m.add_requests();
  ASSERT_TRUE(stream->Write(m));
  stream->WritesDone();
  v1::ServerMessage reply;
  while (stream->Read(&reply)) {
  }
  const grpc::Status st = stream->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("is at most 4096 bytes; this one is 200004"));
}

// An unauthenticated Handshake with a huge op table is refused by its
// numbers, not parsed, and one that parses is not copied line by line.
TEST_F(ExhaustionTest, AHandshakeWithAHugeOpTableIsRefusedUncopied) {
  const auto handshake = [&](const v1::HandshakeRequest& req, v1::HandshakeResponse* resp) {
    grpc::ClientContext ctx;
    return stub_->Handshake(&ctx, req, resp);
  };
  v1::HandshakeRequest req;
  req.set_protocol_version(wire::kProtocolVersion);
  req.set_op_table_digest(OpTable::Get().digest() ^ 1);
  const std::string line(300, 'y');
  for (int i = 0; i < 20000; ++i) req.add_op_table(line);  // 6 MB
  v1::HandshakeResponse resp;
  grpc::Status st = handshake(req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(st.error_message(), HasSubstr("Handshake: a request of 6"));
  EXPECT_THAT(st.error_message(), HasSubstr("is more than the daemon reads for it (4456448 bytes"));
  // 100,000 empty lines: 200 KB, some 10 MB once parsed (and a 4 MB
  // request of them would take 200 MB).
  req.clear_op_table();
  for (int i = 0; i < 100000; ++i) req.add_op_table("");
  st = handshake(req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(st.error_message(), HasSubstr("Handshake: a request of 200"));
  EXPECT_THAT(st.error_message(), HasSubstr("more once parsed) is more than the daemon reads for it"));
  // 16,385 lines of 100 bytes parse, and are refused by their count.
  req.Clear();
  req.set_protocol_version(wire::kProtocolVersion);
  req.set_op_table_digest(OpTable::Get().digest() ^ 1);
  for (int i = 0; i < 16385; ++i) req.add_op_table(std::string(100, 'z'));
  ASSERT_TRUE(handshake(req, &resp).ok());
  EXPECT_FALSE(resp.accepted());
  EXPECT_THAT(resp.refusal(), HasSubstr("16385 lines"));
  EXPECT_THAT(resp.refusal(), HasSubstr("too large to compare (at most 16384 lines and 4194304 bytes)"));
}

// The daemon's default options limit each session's memory, sized from the
// machine; 0 still means no limit.
using DefaultLimitTest = DaemonFixture;

TEST_F(DefaultLimitTest, TheDaemonLimitsSessionsUnlessToldNotTo) {
  const int64_t limit = server::DefaultSessionMemoryLimit();
  EXPECT_GE(limit, int64_t{64} << 20);
  EXPECT_EQ(server::DaemonOptions().session_memory_limit_bytes, -1);
  // A session holder learns its limit when it opens the session.
  auto session_limit = [this] {
    RawSession s(stub_.get());
    return s.open_response().session_memory_limit_bytes();
  };
  StartDaemon(/*session_memory_limit_bytes=*/-1);  // the default
  EXPECT_EQ(session_limit(), static_cast<uint64_t>(limit));
  StartDaemon(/*session_memory_limit_bytes=*/0);
  EXPECT_EQ(session_limit(), 0u);
}

}  // namespace
}  // namespace tensord::testing
