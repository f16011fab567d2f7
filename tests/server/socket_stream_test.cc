// The same-host stream and the TCP stream (tensord/transport/socket_stream.h)
// spoken to raw, each test on both: a HelloStream needs the session's token
// and a session takes one stream (gRPC or this); messages larger than a
// record are reassembled both ways; a malformed record, an over-long
// message or a client that dies inside a message ends that session's stream
// with a reason, never the daemon, which keeps serving other sessions;
// closing the session ends the stream. On the TCP port, gRPC's connections
// and tensord's share the port; bytes that are neither are closed. The
// framing alone, between two plain sockets: tests/transport/.
#include <arpa/inet.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "../../server/src/side_channel.h"
#include "raw_client.h"
#include "tensord/wire/data_frame.h"
#include "tensord/transport/shm.h"
#include "tensord/transport/socket_stream.h"

namespace tensord::testing {
namespace {

using ::testing::HasSubstr;

using wire::StreamFraming;

// The client end of a same-host stream (kRecords: `where` is the side
// channel's path) or a TCP stream (kByteStream: `where` is HOST:PORT).
class SocketStream {
 public:
  SocketStream(StreamFraming framing, const std::string& where, uint64_t id, const std::string& token)
      : framing_(framing), receiver_(size_t{64} << 20, wire::kDefaultStreamSpinNanos, framing) {
    absl::StatusOr<int> fd = framing == StreamFraming::kRecords
                                 ? wire::ConnectShmChannel(where, wire::ShmOp::kHelloStream, id, token, ::geteuid())
                                 : wire::ConnectTcpStream(where, id, token, 10000);
    hello_ = fd.status();
    if (fd.ok()) {
      fd_ = *fd;
      timeval tv{10, 0};  // a broken daemon fails the test, not hangs it
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    }
  }
  ~SocketStream() {
    if (fd_ >= 0) ::close(fd_);
  }
  const absl::Status& hello() const { return hello_; }
  int fd() const { return fd_; }

  bool Send(const v1::ClientMessage& m) {
    grpc::ByteBuffer bb;
    bool own = false;
    if (!grpc::SerializationTraits<v1::ClientMessage>::Serialize(m, &bb, &own).ok()) return false;
    return wire::SendStreamMessage(fd_, bb, framing_).ok();
  }
  void Send(v1::Request r) {
    v1::ClientMessage m;
    *m.add_requests() = std::move(r);
    ASSERT_TRUE(Send(m));
  }
  // The next message; false at the end (end_status() says why) or on error.
  bool Read(v1::ServerMessage* m) {
    grpc::ByteBuffer bb;
    absl::StatusOr<bool> got = receiver_.Next(fd_, &bb);
    if (!got.ok()) {
      read_error_ = got.status();
      return false;
    }
    return *got && grpc::SerializationTraits<v1::ServerMessage>::Deserialize(&bb, m).ok();
  }
  // Reads to the end of the stream: what the daemon's end record said (OK
  // when `with_record` is false: the socket just closed).
  absl::Status End(bool with_record = true) {
    v1::ServerMessage m;
    while (Read(&m)) {
    }
    if (!read_error_.ok()) return read_error_;
    EXPECT_EQ(receiver_.ended_with_record(), with_record);
    return receiver_.end_status();
  }
  std::vector<v1::Error> Sync(uint64_t request_id) {
    v1::Request r;
    r.mutable_sync()->set_request_id(request_id);
    Send(r);
    v1::ServerMessage m;
    EXPECT_TRUE(Read(&m));
    EXPECT_TRUE(m.has_ack()) << m.DebugString();
    EXPECT_EQ(m.ack().request_id(), request_id);
    return {m.ack().errors().begin(), m.ack().errors().end()};
  }
  // Fetches `handle` (streamed: the data comes in FetchData chunks).
  std::string Fetch(uint64_t request_id, uint64_t handle) {
    v1::Request r;
    r.mutable_fetch()->set_request_id(request_id);
    r.mutable_fetch()->set_handle(handle);
    Send(r);
    std::string out;
    for (;;) {
      v1::ServerMessage m;
      if (!Read(&m)) {
        ADD_FAILURE() << "the stream ended during a fetch";
        return out;
      }
      if (!m.has_data()) {
        ADD_FAILURE() << m.DebugString();
        return out;
      }
      EXPECT_EQ(m.data().offset(), out.size());
      out += m.data().data();
      if (m.data().last()) return out;
    }
  }

 private:
  StreamFraming framing_;
  int fd_ = -1;
  absl::Status hello_;
  absl::Status read_error_;
  wire::StreamReceiver receiver_;
};

class SocketStreamTest : public DaemonFixture, public ::testing::WithParamInterface<StreamFraming> {
 protected:
  // Where this test's streams connect: the side channel, or the TCP port.
  std::string ChannelPath() const {
    return GetParam() == StreamFraming::kRecords ? wire::ShmSocketPath(dir_ + "/td.sock") : daemon_->addresses()[1];
  }
  bool tcp() const { return GetParam() == StreamFraming::kByteStream; }

  // Waits (at most 20 s) until the daemon has `n` sessions.
  void WaitForSessions(size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (daemon_->service().live_sessions() != n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(daemon_->service().live_sessions(), n);
  }

  // The daemon ended `s` with an InvalidArgument end record whose message
  // has `needle`, closed that session only, and still serves `bystander`.
  void ExpectRefusedAlone(SocketStream& s, const std::string& needle, RawSession& bystander) {
    absl::Status end = s.End();
    EXPECT_TRUE(absl::IsInvalidArgument(end)) << end;
    EXPECT_THAT(end.message(), HasSubstr(needle));
    WaitForSessions(1);
    ExpectBystanderServed(bystander);
  }

  // 4 MB of fetched data `s` never reads: returns once the daemon's write
  // blocks on the full socket, inside the session's message.
  void BlockTheDaemonOnUnreadFetches(SocketStream& s) {
    s.Send(UploadReq(1, MetaProto({1 << 18}, ScalarType::kFloat32), Bytes(std::vector<float>(1 << 18, 1.0f))));
    for (uint64_t i = 1; i <= 4; ++i) {
      v1::Request r;
      r.mutable_fetch()->set_request_id(i);
      r.mutable_fetch()->set_handle(1);
      s.Send(r);
    }
    // Until the daemon is inside the fetches (its replies fill our buffer).
    int queued = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (::ioctl(s.fd(), SIOCINQ, &queued) == 0 && queued < (64 << 10) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_GE(queued, 64 << 10);
  }

  // A bystander session on gRPC still works.
  void ExpectBystanderServed(RawSession& bystander) {
    bystander.Upload<float>(1, {2}, ScalarType::kFloat32, {1.5f, 2.5f});
    EXPECT_EQ(bystander.FetchValues<float>(1), (std::vector<float>{1.5f, 2.5f}));
  }
};

TEST_P(SocketStreamTest, RunsTheSessionWithMessagesLargerThanARecord) {
  RawSession raw(stub_.get(), /*attach=*/false);
  SocketStream s(GetParam(), ChannelPath(), raw.id(), raw.token());
  ASSERT_TRUE(s.hello().ok()) << s.hello();
  // 200,000 floats inline in one message: 800 KB, about 13 records.
  std::vector<float> v(200000);
  std::iota(v.begin(), v.end(), 0.25f);
  s.Send(UploadReq(1, MetaProto({200000}, ScalarType::kFloat32), Bytes(v)));
  s.Send(Call(1, "add.Tensor", {T(1), T(1), I(1)}, {2}));
  EXPECT_TRUE(s.Sync(1).empty());
  const std::string got = s.Fetch(2, 2);
  ASSERT_EQ(got.size(), v.size() * 4);
  std::vector<float> twice = FromBytes<float>(got);
  for (size_t i = 0; i < v.size(); i += 9973) EXPECT_EQ(twice[i], 2 * v[i]) << i;
  // An op error surfaces at the sync point, as on gRPC, naming the op.
  s.Send(Call(2, "add.Tensor", {T(1), T(99), I(1)}, {3}));
  std::vector<v1::Error> errors = s.Sync(3);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0].message(), HasSubstr("99"));
  EXPECT_EQ(daemon_->service().live_sessions(), 1u);
}

// Upload chunks of 64 KiB and more as the client encodes them (data last):
// on the TCP stream their data is received straight into the storage
// (wire::ParseClientMessageHead). They are checked as any chunk: good ones,
// whole or in two, keep their bytes; a first chunk not at offset 0, or with
// more data than its tensor, is one error (its handle holds the error, as a
// failed op's output does) and leaves no upload behind; the session goes on.
TEST_P(SocketStreamTest, LargeUploadChunksAreCheckedWhereverTheirDataGoes) {
  RawSession raw(stub_.get(), /*attach=*/false);
  SocketStream s(GetParam(), ChannelPath(), raw.id(), raw.token());
  ASSERT_TRUE(s.hello().ok()) << s.hello();
  std::vector<float> v(32771);  // 131,084 bytes
  std::iota(v.begin(), v.end(), 0.25f);
  const std::string bytes = Bytes(v);
  const auto send_chunk = [&](uint64_t handle, uint64_t offset, const std::string& data, bool first, bool last) {
    v1::Upload head;
    head.set_handle(handle);
    if (first) {
      *head.mutable_meta() = MetaProto({32771}, ScalarType::kFloat32);
      head.set_total_bytes(bytes.size());
    }
    head.set_offset(offset);
    head.set_last(last);
    head.set_call_site("model.py:7");
    wire::BorrowedSlices borrowed;
    grpc::ByteBuffer bb = wire::EncodeUploadChunk(head, borrowed.Borrow(data.data(), data.size()));
    EXPECT_TRUE(wire::SendStreamMessage(s.fd(), bb, GetParam()).ok());
    bb.Clear();
  };
  const auto pending = [&] { return daemon_->service().session_stats(raw.id())->pending_uploads; };
  send_chunk(1, 0, bytes, true, true);
  EXPECT_TRUE(s.Sync(1).empty());
  EXPECT_TRUE(s.Fetch(2, 1) == bytes);
  send_chunk(2, 0, bytes.substr(0, 70000), true, false);
  send_chunk(2, 70000, bytes.substr(70000), false, true);
  EXPECT_TRUE(s.Sync(3).empty());
  EXPECT_TRUE(s.Fetch(4, 2) == bytes);
  // Not at offset 0: one error for the upload, none for the chunk after it.
  send_chunk(3, 8, bytes.substr(0, 70000), true, false);
  send_chunk(3, 70008, bytes.substr(70008), false, true);
  std::vector<v1::Error> errors = s.Sync(5);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0].message(), HasSubstr("offset"));
  EXPECT_EQ(pending(), 0u);
  // More data than the tensor holds.
  send_chunk(4, 0, bytes + std::string(70000, 'x'), true, true);
  errors = s.Sync(6);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(pending(), 0u);
  // The session goes on.
  send_chunk(5, 0, bytes, true, true);
  EXPECT_TRUE(s.Sync(7).empty());
  EXPECT_TRUE(s.Fetch(8, 5) == bytes);
  EXPECT_EQ(daemon_->service().live_sessions(), 1u);
}

TEST_P(SocketStreamTest, HelloNeedsTheTokenAndASessionTakesOneStream) {
  RawSession raw(stub_.get(), /*attach=*/false);
  {
    SocketStream bad(GetParam(), ChannelPath(), raw.id(), "not the token");
    EXPECT_TRUE(absl::IsNotFound(bad.hello())) << bad.hello();
    SocketStream unknown(GetParam(), ChannelPath(), raw.id() ^ 1, raw.token());
    // The same answer: the hello does not tell whether an id exists.
    EXPECT_EQ(unknown.hello(), bad.hello());
    EXPECT_THAT(bad.hello().message(), HasSubstr("no session with this id and token"));
  }
  SocketStream first(GetParam(), ChannelPath(), raw.id(), raw.token());
  ASSERT_TRUE(first.hello().ok()) << first.hello();
  SocketStream second(GetParam(), ChannelPath(), raw.id(), raw.token());
  EXPECT_THAT(second.hello().message(), HasSubstr("already has a stream attached"));
  // A session attached on gRPC takes no same-host stream either.
  RawSession on_grpc(stub_.get());
  EXPECT_TRUE(on_grpc.Sync().empty());
  SocketStream third(GetParam(), ChannelPath(), on_grpc.id(), on_grpc.token());
  EXPECT_THAT(third.hello().message(), HasSubstr("already has a stream attached"));
  // The refusals hurt neither session.
  EXPECT_TRUE(first.Sync(1).empty());
  EXPECT_TRUE(on_grpc.Sync().empty());
}

TEST_P(SocketStreamTest, AMalformedRecordEndsThatStreamOnly) {
  RawSession bystander(stub_.get());
  RawSession raw(stub_.get(), /*attach=*/false);
  SocketStream s(GetParam(), ChannelPath(), raw.id(), raw.token());
  ASSERT_TRUE(s.hello().ok()) << s.hello();
  const char junk[] = "not a record header";
  ASSERT_EQ(::send(s.fd(), junk, sizeof(junk), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(junk)));
  ExpectRefusedAlone(s, "malformed record", bystander);
}

TEST_P(SocketStreamTest, BytesThatAreNotAClientMessageEndTheStream) {
  RawSession bystander(stub_.get());
  RawSession raw(stub_.get(), /*attach=*/false);
  SocketStream s(GetParam(), ChannelPath(), raw.id(), raw.token());
  ASSERT_TRUE(s.hello().ok()) << s.hello();
  const std::string garbage(100, '\xff');
  grpc::Slice slice(garbage.data(), garbage.size());
  ASSERT_TRUE(wire::SendStreamMessage(s.fd(), grpc::ByteBuffer(&slice, 1), GetParam()).ok());
  ExpectRefusedAlone(s, "not a valid tensord.v1.ClientMessage", bystander);
}

TEST_P(SocketStreamTest, AnOverLongMessageIsRefusedNotAllocated) {
  RawSession bystander(stub_.get());
  RawSession raw(stub_.get(), /*attach=*/false);
  SocketStream s(GetParam(), ChannelPath(), raw.id(), raw.token());
  ASSERT_TRUE(s.hello().ok()) << s.hello();
  if (tcp()) {
    // A header that announces more than the daemon's 64 MiB limit.
    wire::ByteStreamHeader head;
    head.length = size_t{65} << 20;
    ASSERT_EQ(::send(s.fd(), &head, sizeof(head), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(head)));
    ExpectRefusedAlone(s, "longer than", bystander);
    return;
  }
  // Records that say "more follows" past the daemon's 64 MiB limit.
  std::string record(sizeof(wire::RecordHeader) + wire::kStreamRecordBytes, '\0');
  wire::RecordHeader head;
  head.flags = wire::kRecordMore;
  std::memcpy(record.data(), &head, sizeof(head));
  bool sent = true;
  for (size_t total = 0; sent && total <= (size_t{65} << 20); total += wire::kStreamRecordBytes) {
    sent = ::send(s.fd(), record.data(), record.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(record.size());
  }
  ExpectRefusedAlone(s, "longer than", bystander);
}

TEST_P(SocketStreamTest, AClientThatDiesInsideAMessageLosesOnlyItsSession) {
  RawSession bystander(stub_.get());
  {
    RawSession raw(stub_.get(), /*attach=*/false);
    SocketStream s(GetParam(), ChannelPath(), raw.id(), raw.token());
    ASSERT_TRUE(s.hello().ok()) << s.hello();
    s.Send(UploadReq(1, MetaProto({4}, ScalarType::kFloat32), Bytes(std::vector<float>{1, 2, 3, 4})));
    std::string record;
    if (tcp()) {
      wire::ByteStreamHeader head;
      head.length = 1000;  // ... and 100 bytes come
      record.assign(reinterpret_cast<const char*>(&head), sizeof(head));
      record.append(100, '\0');
    } else {
      record.assign(sizeof(wire::RecordHeader) + 100, '\0');
      wire::RecordHeader head;
      head.flags = wire::kRecordMore;  // ... and nothing follows
      std::memcpy(record.data(), &head, sizeof(head));
    }
    ASSERT_EQ(::send(s.fd(), record.data(), record.size(), MSG_NOSIGNAL), static_cast<ssize_t>(record.size()));
  }  // the socket closes here, as when the process dies
  WaitForSessions(1);
  EXPECT_EQ(daemon_->service().bytes_in_use(), 0);  // its tensor was freed
  ExpectBystanderServed(bystander);
}

TEST_P(SocketStreamTest, ClosingTheSessionEndsItsStream) {
  RawSession raw(stub_.get(), /*attach=*/false);
  SocketStream s(GetParam(), ChannelPath(), raw.id(), raw.token());
  ASSERT_TRUE(s.hello().ok()) << s.hello();
  EXPECT_TRUE(s.Sync(1).empty());
  grpc::ClientContext ctx;
  v1::CloseSessionRequest req;
  req.set_session_id(raw.id());
  req.set_token(raw.token());
  v1::CloseSessionResponse resp;
  ASSERT_TRUE(stub_->CloseSession(&ctx, req, &resp).ok());
  // The daemon shuts the socket both ways (a blocked write must fail): the
  // client reads the end of the stream without a record.
  absl::Status end = s.End(/*with_record=*/false);
  EXPECT_TRUE(end.ok()) << end;
  WaitForSessions(0);
}

TEST_P(SocketStreamTest, ClosingTheSessionOfAClientThatDoesNotReadCompletes) {
  RawSession bystander(stub_.get());
  RawSession raw(stub_.get(), /*attach=*/false);
  SocketStream s(GetParam(), ChannelPath(), raw.id(), raw.token());
  ASSERT_TRUE(s.hello().ok()) << s.hello();
  // The daemon's write blocks inside the session's message. CloseSession
  // (here on gRPC, as another process might) still closes the session.
  ASSERT_NO_FATAL_FAILURE(BlockTheDaemonOnUnreadFetches(s));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));  // a hang fails, not blocks
  v1::CloseSessionRequest req;
  req.set_session_id(raw.id());
  req.set_token(raw.token());
  v1::CloseSessionResponse resp;
  const grpc::Status closed = stub_->CloseSession(&ctx, req, &resp);
  EXPECT_TRUE(closed.ok()) << closed.error_message();
  WaitForSessions(1);
  ExpectBystanderServed(bystander);
}

// At shutdown a stream's client is told why its stream ends: the daemon
// stops reading the socket, and the stream's thread sends the end record.
// When the last connection of a side channel or TCP port ends after a
// session's stream ran on it, the acceptor gives free memory back once;
// gRPC connections and probes of the port do not trim.
TEST_P(SocketStreamTest, TheEndOfTheLastStreamGivesMemoryBack) {
  server::SideChannelServer& acceptor = *daemon_->side_channels()[tcp() ? 0 : 1];  // TCP acceptors come first
  RawSession bystander(stub_.get());  // gRPC only
  ExpectBystanderServed(bystander);
  EXPECT_EQ(acceptor.trims(), 0u);
  for (int round = 1; round <= 2; ++round) {
    RawSession raw(stub_.get(), /*attach=*/false);
    {
      SocketStream s(GetParam(), ChannelPath(), raw.id(), raw.token());
      ASSERT_TRUE(s.hello().ok()) << s.hello();
      v1::Request r;
      r.mutable_sync()->set_request_id(1);
      s.Send(r);
      v1::ServerMessage m;
      ASSERT_TRUE(s.Read(&m));
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (acceptor.trims() < static_cast<uint64_t>(round) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(acceptor.trims(), static_cast<uint64_t>(round));
  }
}

TEST_P(SocketStreamTest, ShutdownEndsTheStreamSayingSo) {
  RawSession raw(stub_.get(), /*attach=*/false);
  SocketStream s(GetParam(), ChannelPath(), raw.id(), raw.token());
  ASSERT_TRUE(s.hello().ok()) << s.hello();
  EXPECT_TRUE(s.Sync(1).empty());
  const auto t0 = std::chrono::steady_clock::now();
  daemon_->Shutdown();
  // The stream ended at once, well within the grace a busy stream gets.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  absl::Status end = s.End();
  EXPECT_TRUE(absl::IsUnavailable(end)) << end;
  EXPECT_THAT(end.message(), HasSubstr("shutting down"));
}

// One that stays busy past the grace (its write blocked on a client that
// does not read) is ended as before: shutdown does not wait for it.
TEST_P(SocketStreamTest, ShutdownDoesNotWaitForAStreamThatCannotEnd) {
  RawSession raw(stub_.get(), /*attach=*/false);
  SocketStream s(GetParam(), ChannelPath(), raw.id(), raw.token());
  ASSERT_TRUE(s.hello().ok()) << s.hello();
  ASSERT_NO_FATAL_FAILURE(BlockTheDaemonOnUnreadFetches(s));
  const auto t0 = std::chrono::steady_clock::now();
  daemon_->Shutdown();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(daemon_->service().live_sessions(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Framings, SocketStreamTest,
                         ::testing::Values(StreamFraming::kRecords, StreamFraming::kByteStream),
                         [](const ::testing::TestParamInfo<StreamFraming>& info) {
                           return info.param == StreamFraming::kRecords ? "SameHost" : "Tcp";
                         });

// The TCP port serves gRPC and TCP streams side by side; a connection that
// sends neither is closed, one that sends nothing holds no one up, and a
// shared-memory hello (which needs a Unix socket) is refused with a reason.
using TcpPortTest = DaemonFixture;

// A hello frame (`op`) naming `s` and its token.
wire::ShmFrame Hello(wire::ShmOp op, const RawSession& s) {
  wire::ShmFrame f;
  f.op = static_cast<uint32_t>(op);
  f.session_id = s.id();
  f.token_size = static_cast<uint32_t>(s.token().size());
  std::memcpy(f.token, s.token().data(), s.token().size());
  return f;
}

// Whether the daemon closed `fd` (its end of the stream, or a reset for
// bytes it left unread) before anything came and before the socket's
// receive timeout.
bool ClosedByPeer(int fd) {
  char byte;
  const ssize_t r = ::recv(fd, &byte, 1, 0);
  return r == 0 || (r < 0 && errno == ECONNRESET);
}

// A listening socket on `family`'s loopback at `port` (0: any), non-blocking
// (accept says EAGAIN while no one connected); -1 when it cannot be had.
int LoopbackListener(int family, int port) {
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  sockaddr_storage ss{};
  socklen_t len;
  if (family == AF_INET) {
    auto* sa = reinterpret_cast<sockaddr_in*>(&ss);
    sa->sin_family = AF_INET;
    sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa->sin_port = htons(port);
    len = sizeof(*sa);
  } else {
    auto* sa = reinterpret_cast<sockaddr_in6*>(&ss);
    sa->sin6_family = AF_INET6;
    sa->sin6_addr = in6addr_loopback;
    sa->sin6_port = htons(port);
    len = sizeof(*sa);
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(fd, 4) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  return ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                       : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

// Whether someone connected to listener `fd` (and is waiting to be accepted).
bool SomeoneConnected(int fd) {
  const int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (c < 0) return false;
  ::close(c);
  return true;
}

// The client hands ConnectTcpStream gRPC's peer as the address to prefer.
// Through a proxy that peer is the proxy's: then no hello (which carries the
// session's token) goes anywhere, and the session stays on gRPC.
TEST_F(TcpPortTest, TheHelloGoesOnlyWhereTheNameResolves) {
  const std::string& address = daemon_->addresses()[1];  // 127.0.0.1:PORT
  const int port = std::stoi(address.substr(address.rfind(':') + 1));
  const int proxy = LoopbackListener(AF_INET, 0);
  ASSERT_GE(proxy, 0);
  {
    RawSession s(stub_.get(), /*attach=*/false);
    const std::string peer = absl::StrCat("ipv4:127.0.0.1:", BoundPort(proxy));
    absl::StatusOr<int> fd = wire::ConnectTcpStream(address, s.id(), s.token(), 10000, peer);
    ASSERT_FALSE(fd.ok());
    EXPECT_TRUE(absl::IsFailedPrecondition(fd.status())) << fd.status();
    EXPECT_THAT(std::string(fd.status().message()), HasSubstr(peer));
    EXPECT_FALSE(SomeoneConnected(proxy));
    // The session was not attached: a gRPC stream still can be.
    fd = wire::ConnectTcpStream(address, s.id(), s.token(), 10000, absl::StrCat("ipv6:%5B::ffff:127.0.0.1%5D:", port));
    ASSERT_TRUE(fd.ok()) << fd.status();  // the same address, IPv4-mapped
    ::close(*fd);
  }
  // localhost may resolve to ::1 before 127.0.0.1; with something else on
  // [::1]:PORT, the peer gRPC reached (127.0.0.1) goes first.
  const int decoy = LoopbackListener(AF_INET6, port);
  if (decoy < 0) GTEST_SKIP() << "no IPv6 loopback here to put a decoy on";
  for (int i = 0; i < 3; ++i) {
    RawSession s(stub_.get(), /*attach=*/false);
    absl::StatusOr<int> fd = wire::ConnectTcpStream(absl::StrCat("localhost:", port), s.id(), s.token(), 10000,
                                                    absl::StrCat("ipv4:127.0.0.1:", port));
    ASSERT_TRUE(fd.ok()) << fd.status();
    ::close(*fd);
    EXPECT_FALSE(SomeoneConnected(decoy));
  }
  ::close(decoy);
  ::close(proxy);
}

TEST_F(TcpPortTest, TellsGrpcFromStreamsAndClosesAnythingElse) {
  const std::string& address = daemon_->addresses()[1];
  const int port = std::stoi(address.substr(address.rfind(':') + 1));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons(port);
  const auto connect_raw = [&] {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    timeval tv{20, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
  };
  // A silent connection, held open through the rest of the test.
  const int silent = connect_raw();
  // Junk, and a start of HTTP/2's preface that goes wrong: closed at once,
  // without a reply (recv sees the end, or a reset for the unread bytes).
  for (const std::string& garbage :
       {"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + std::string(64, 'x'), std::string("PRI * HTTP/1.1\r\n")}) {
    const int junk = connect_raw();
    ASSERT_EQ(::send(junk, garbage.data(), garbage.size(), MSG_NOSIGNAL), static_cast<ssize_t>(garbage.size()));
    EXPECT_TRUE(ClosedByPeer(junk)) << garbage;
    ::close(junk);
  }
  // A shared-memory hello: refused, naming why.
  RawSession raw(stub_.get(), /*attach=*/false);
  const int shm = connect_raw();
  ASSERT_TRUE(wire::SendShmFrame(shm, Hello(wire::ShmOp::kHello, raw)).ok());
  absl::Status refused = wire::RecvShmReply(shm);
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("Unix socket"));
  ::close(shm);
  // A hello whose first bytes come alone (fewer than its magic): still a
  // hello, answered once the rest comes.
  {
    RawSession split(stub_.get(), /*attach=*/false);
    const int fd = connect_raw();
    const wire::ShmFrame f = Hello(wire::ShmOp::kHelloStream, split);
    const char* bytes = reinterpret_cast<const char*>(&f);
    ASSERT_EQ(::send(fd, bytes, 2, MSG_NOSIGNAL), 2);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_EQ(::send(fd, bytes + 2, sizeof(f) - 2, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(f) - 2));
    absl::Status answered = wire::RecvShmReply(fd);
    EXPECT_TRUE(answered.ok()) << answered;
    ::close(fd);
  }
  // gRPC on the same port, while the silent one waits: a new channel
  // (a new connection) opens a session, and a TCP stream runs it.
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = v1::Tensord::NewStub(channel);
  RawSession over_tcp(stub.get(), /*attach=*/false);
  SocketStream s(StreamFraming::kByteStream, address, over_tcp.id(), over_tcp.token());
  ASSERT_TRUE(s.hello().ok()) << s.hello();
  s.Send(UploadReq(1, MetaProto({3}, ScalarType::kFloat32), Bytes(std::vector<float>{1, 2, 3})));
  EXPECT_TRUE(s.Sync(1).empty());
  EXPECT_EQ(FromBytes<float>(s.Fetch(2, 1)), (std::vector<float>{1, 2, 3}));
  ::close(silent);
}

// Anyone may connect to the TCP port: connections that never finish their
// first bytes (silent, half a preface, "PRI " alone) cannot keep clients
// out. Past the cap the one that waited longest is closed, a peer that goes
// away frees its place at once, and what stays silent is closed at the
// deadline.
// Each connection's thread is joined once it returns, not when the next
// connection comes: a returned thread's stack (8 MiB mapped, some of it
// resident) would otherwise stay until then.
TEST(SideChannelServerThreads, AreJoinedAsSoonAsTheyFinish) {
  int port = 0;
  absl::StatusOr<std::vector<int>> fds = server::SideChannelServer::ListenTcp("127.0.0.1", 0, &port);
  ASSERT_TRUE(fds.ok()) << fds.status();
  ASSERT_EQ(fds->size(), 1u);
  // Junk is closed before it reaches the service or gRPC: neither is needed.
  std::unique_ptr<server::SideChannelServer> server =
      server::SideChannelServer::StartTcp((*fds)[0], /*service=*/nullptr, /*grpc_server=*/nullptr);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons(port);
  for (int i = 0; i < 8; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    const std::string junk = "GET / HTTP/1.1\r\n\r\n";
    ASSERT_EQ(::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL), static_cast<ssize_t>(junk.size()));
    timeval tv{20, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    EXPECT_TRUE(ClosedByPeer(fd));
    ::close(fd);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (server->threads_held() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(server->threads_held(), 0u);
  // No session was served: no malloc_trim (it walks the whole heap, too
  // slow for every probe of the port).
  EXPECT_EQ(server->trims(), 0u);
  server->Stop();
}

TEST_F(TcpPortTest, ConnectionsThatNeverFinishTheirFirstBytesCannotKeepClientsOut) {
  const std::string& address = daemon_->addresses()[1];
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons(std::stoi(address.substr(address.rfind(':') + 1)));
  const auto connect_raw = [&](const std::string& first) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    if (!first.empty()) {
      EXPECT_EQ(::send(fd, first.data(), first.size(), MSG_NOSIGNAL), static_cast<ssize_t>(first.size()));
    }
    timeval tv{20, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
  };
  // Hit and run: half a preface, then gone (the daemon must not wait out
  // the deadline for each).
  for (int i = 0; i < server::SideChannelServer::kMaxPendingHellos; ++i) ::close(connect_raw("PR"));
  // More idle connections than the cap, held open.
  std::vector<int> held;
  for (int i = 0; i < server::SideChannelServer::kMaxPendingHellos + 8; ++i) {
    held.push_back(connect_raw(i % 2 == 0 ? "" : "PRI "));
  }
  // A new client still gets in: a gRPC session and its TCP stream.
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = v1::Tensord::NewStub(channel);
  RawSession fresh(stub.get(), /*attach=*/false);
  SocketStream s(StreamFraming::kByteStream, address, fresh.id(), fresh.token());
  ASSERT_TRUE(s.hello().ok()) << s.hello();
  EXPECT_TRUE(s.Sync(1).empty());
  // The first held ones were pushed out (closed), the last are closed at
  // the deadline; none is kept (a receive timeout, 20 s, would fail this).
  for (int fd : held) {
    EXPECT_TRUE(ClosedByPeer(fd));
    ::close(fd);
  }
  EXPECT_TRUE(s.Sync(2).empty());
}

}  // namespace
}  // namespace tensord::testing
