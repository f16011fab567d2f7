// Attacks on the daemon as a whole, at the raw protocol level: taking every
// session or every waiting connection from the others, listening where the
// daemon's side channel should be, and learning what a caller without a
// session's token must not (whether an id exists, the session's random
// numbers). Each shows the daemon alive and a session of another peer
// unharmed afterwards.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel_posix.h"
#include "../../server/src/side_channel.h"
#include "raw_client.h"
#include "tensord/transport/shm.h"
#include "tensord/transport/socket_stream.h"

namespace tensord::testing {
namespace {

using ::testing::HasSubstr;

// A TCP connection from the loopback address `from` (127.0.0.x: another
// "peer" on this host) to the daemon's TCP port `to` ("127.0.0.1:PORT"); -1
// when it cannot be made.
int ConnectFrom(const std::string& from, const std::string& to) {
  const size_t colon = to.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(to.substr(colon + 1), &port)) return -1;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  ::inet_pton(AF_INET, from.c_str(), &local.sin_addr);
  sockaddr_in remote{};
  remote.sin_family = AF_INET;
  remote.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, to.substr(0, colon).c_str(), &remote.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&remote), sizeof(remote)) != 0) {
    ADD_FAILURE() << "connect from " << from << " to " << to << ": " << std::strerror(errno);
    ::close(fd);
    return -1;
  }
  return fd;
}

// A gRPC stub over the connection `fd` (ConnectFrom), which it takes over.
std::unique_ptr<v1::Tensord::Stub> StubOver(int fd) {
  return v1::Tensord::NewStub(grpc::CreateInsecureChannelFromFd("tensord", fd));
}

grpc::Status OpenSession(v1::Tensord::Stub* stub, v1::OpenSessionResponse* resp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::OpenSessionRequest req;
  req.set_client_name("lockout-test");
  req.set_op_table_digest(OpTable::Get().digest());
  return stub->OpenSession(&ctx, req, resp);
}

class LockoutTest : public DaemonFixture {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    StartBystander();
  }
  void StartBystander() {
    bystander_.reset();
    bystander_stub_.reset();
    // Another peer: TCP from 127.0.0.2, while the attacks come over the
    // Unix socket (this test's uid) or from 127.0.0.1.
    const int fd = ConnectFrom("127.0.0.2", daemon_->addresses()[1]);
    ASSERT_GE(fd, 0);
    bystander_stub_ = StubOver(fd);
    bystander_ = std::make_unique<Bystander>(bystander_stub_.get());
  }

  // The other peer's session still computes, its data intact, and the
  // other peer can still open a session.
  void ExpectBystanderServed() {
    bystander_->ExpectServed();
    v1::OpenSessionResponse resp;
    const grpc::Status st = OpenSession(bystander_stub_.get(), &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    if (st.ok()) {
      EXPECT_TRUE(CloseSessionRaw(bystander_stub_.get(), resp.session_id(), resp.token()).ok());
    }
  }

  void TearDown() override {
    if (bystander_ != nullptr) ExpectBystanderServed();
    bystander_.reset();
    bystander_stub_.reset();
    DaemonFixture::TearDown();
  }

  std::unique_ptr<v1::Tensord::Stub> bystander_stub_;
  std::unique_ptr<Bystander> bystander_;
};

// One peer opening sessions in a loop gets its own limit, not the daemon's:
// the others can still open theirs.
TEST_F(LockoutTest, OnePeerCannotTakeEverySession) {
  const size_t limit = daemon_->service().options().max_sessions_per_peer;
  ASSERT_EQ(limit, 64u);
  std::vector<v1::OpenSessionResponse> mine;
  grpc::Status refused;
  for (int i = 0; i < 2000; ++i) {  // past the daemon's own limit (1024)
    v1::OpenSessionResponse resp;
    const grpc::Status st = OpenSession(stub_.get(), &resp);
    if (!st.ok()) {
      refused = st;
      break;
    }
    mine.push_back(resp);
  }
  EXPECT_EQ(mine.size(), limit);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr(absl::StrCat("uid ", ::geteuid(), " already has 64 open sessions")));
  EXPECT_THAT(refused.error_message(), HasSubstr("limit per peer (64"));
  // Another address is another peer, over the same port.
  const int fd = ConnectFrom("127.0.0.1", daemon_->addresses()[1]);
  ASSERT_GE(fd, 0);
  auto other = StubOver(fd);
  RawSession s(other.get());
  EXPECT_TRUE(s.Sync().empty());
  EXPECT_TRUE(s.Close().ok());
  ExpectBystanderServed();
  // A closed session makes room for the next.
  ASSERT_FALSE(mine.empty());
  EXPECT_TRUE(CloseSessionRaw(stub_.get(), mine.back().session_id(), mine.back().token()).ok());
  mine.pop_back();
  v1::OpenSessionResponse again;
  EXPECT_TRUE(OpenSession(stub_.get(), &again).ok());
  mine.push_back(again);
  for (const v1::OpenSessionResponse& r : mine) {
    EXPECT_TRUE(CloseSessionRaw(stub_.get(), r.session_id(), r.token()).ok());
  }
  EXPECT_EQ(daemon_->service().live_sessions(), 1u);  // the bystander's
}

// A session that no stream ever attaches to is closed once attach_timeout
// has passed, without anyone else opening a session.
TEST_F(LockoutTest, UnattachedSessionsAreClosedOnATimer) {
  attach_timeout_ = absl::Milliseconds(200);
  StartDaemon(0);
  StartBystander();  // attached: stays
  v1::OpenSessionResponse idle;
  ASSERT_TRUE(OpenSession(stub_.get(), &idle).ok());
  ASSERT_EQ(daemon_->service().live_sessions(), 2u);
  // Bounded: the timer runs every 50 ms here; 30 s only catches a daemon
  // that never reaps.
  for (int i = 0; i < 3000 && daemon_->service().live_sessions() > 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(daemon_->service().live_sessions(), 1u);
  RawSession late(stub_.get(), /*attach=*/false);
  late.Attach(idle.session_id(), idle.token());
  EXPECT_EQ(late.Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  ExpectBystanderServed();
}

// gRPC connections that one address keeps open are capped (twice its
// session limit): past that, its new ones are closed at once, while another
// address connects as before; a connection it closes makes room again.
TEST_F(LockoutTest, OnePeerCannotHoldEveryConnection) {
  max_sessions_per_peer_ = 3;
  StartDaemon(0);
  StartBystander();
  ASSERT_EQ(daemon_->service().options().max_connections_per_peer, 6u);
  const std::string port = daemon_->addresses()[1];
  std::vector<std::unique_ptr<v1::Tensord::Stub>> held;
  for (int i = 0; i < 6; ++i) {
    const int fd = ConnectFrom("127.0.0.1", port);
    ASSERT_GE(fd, 0);
    held.push_back(StubOver(fd));
    const grpc::Status st = HandshakeRaw(held.back().get());
    ASSERT_TRUE(st.ok()) << "connection " << i << ": " << st.error_message();
  }
  for (int i = 0; i < 3; ++i) {  // the seventh, and a few more
    const int fd = ConnectFrom("127.0.0.1", port);
    ASSERT_GE(fd, 0);
    auto refused = StubOver(fd);
    EXPECT_EQ(HandshakeRaw(refused.get()).error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  // Another address, on the same port, is another peer.
  const int other_fd = ConnectFrom("127.0.0.4", port);
  ASSERT_GE(other_fd, 0);
  auto other = StubOver(other_fd);
  EXPECT_TRUE(HandshakeRaw(other.get()).ok());
  ExpectBystanderServed();
  // One of the six goes: once the daemon has seen it close, a new one is
  // let in (bounded by 30 s: a daemon that never forgets a closed one fails).
  held.pop_back();
  grpc::Status again;
  for (int i = 0; i < 300; ++i) {
    const int fd = ConnectFrom("127.0.0.1", port);
    ASSERT_GE(fd, 0);
    auto stub = StubOver(fd);
    again = HandshakeRaw(stub.get());
    if (again.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(again.ok()) << again.error_message();
}

// A gRPC connection with no call in flight is closed after
// idle_connection_timeout (a channel made from an address reconnects for
// its next call); one that carries a session's stream stays open however
// long the session sits idle.
TEST_F(LockoutTest, AnIdleConnectionIsClosedButNotOneCarryingAStream) {
  idle_connection_timeout_ = absl::Milliseconds(300);
  StartDaemon(0);
  StartBystander();
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
  auto channel = grpc::CreateCustomChannel(daemon_->addresses()[1], grpc::InsecureChannelCredentials(), args);
  auto stub = v1::Tensord::NewStub(channel);
  v1::OpenSessionResponse resp;
  ASSERT_TRUE(OpenSession(stub.get(), &resp).ok());
  ASSERT_EQ(channel->GetState(false), GRPC_CHANNEL_READY);
  // Bounded by 30 s: a daemon that keeps idle connections fails here.
  EXPECT_TRUE(channel->WaitForStateChange(GRPC_CHANNEL_READY, std::chrono::system_clock::now() +
                                                                  std::chrono::seconds(30)))
      << "the idle connection was not closed";
  EXPECT_NE(channel->GetState(false), GRPC_CHANNEL_READY);
  // The next call reconnects, and the session opened before is still there.
  EXPECT_TRUE(CloseSessionRaw(stub.get(), resp.session_id(), resp.token()).ok());
  // A stream that sits idle for several timeouts keeps its connection.
  RawSession s(stub.get());
  s.Upload<int32_t>(1, {2}, ScalarType::kInt32, {4, 5});
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(channel->GetState(false), GRPC_CHANNEL_READY);
  EXPECT_THAT(s.FetchValues<int32_t>(1), ::testing::ElementsAre(4, 5));
  EXPECT_TRUE(s.Close().ok());
}

// A session closed while a kernel of it runs: CloseSession answers without
// waiting for the kernel (it would hold one of the gRPC server's threads
// for as long), the session is closed once the kernel ends, and until then
// it still counts against its peer's limit (or closing sessions could run
// kernels past it).
TEST_F(LockoutTest, ClosingASessionMidKernelHoldsNoThreadAndStillCounts) {
  max_sessions_per_peer_ = 2;  // the bystander's peer opens a second one in its checks
  StartDaemon(0);
  StartBystander();
  v1::OpenSessionResponse other;  // this peer's other session: the one below is its last
  ASSERT_TRUE(OpenSession(stub_.get(), &other).ok());
  RawSession s(stub_.get());
  s.Upload<float>(1, {1}, ScalarType::kFloat32, {1});
  ASSERT_TRUE(s.Sync().empty());
  // A sum over 2^32 elements (a view of one): seconds of work. The view is
  // made first, and the session seen idle after it, so that the request
  // found running below is the sum and nothing before it (the session may
  // still hold its thread a moment after a Sync's answer reached us; a close
  // then would not wait for the sum).
  s.Send({Call(1, "expand", {T(1), IL({int64_t{1} << 32}), B(false)}, {2})});
  ASSERT_TRUE(s.Sync().empty());
  for (int i = 0; i < 3000 && daemon_->service().session_running(s.id()).value_or(false); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_FALSE(daemon_->service().session_running(s.id()).value_or(true)) << "the session never went idle";
  s.Send({Call(2, "sum", {T(2), None(), B(false), None()}, {3})});
  bool running = false;
  for (int i = 0; i < 3000 && !running; ++i) {  // until the daemon is in the kernel (30 s at most)
    running = daemon_->service().session_running(s.id()).value_or(false);
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(running) << "the sum never started";
  ASSERT_TRUE(s.Close().ok());
  // Answered while the kernel still runs (closing sessions are those whose
  // close waits for it).
  EXPECT_EQ(daemon_->service().closing_sessions(), 1u);
  v1::OpenSessionResponse refused;
  const grpc::Status st = OpenSession(stub_.get(), &refused);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << "the closing session did not count";
  // Other peers are served meanwhile.
  ExpectBystanderServed();
  // Once the kernel ends the session is closed, and its slot is free again.
  for (int i = 0; i < 12000 && daemon_->service().closing_sessions() > 0; ++i) {  // 120 s at most
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(daemon_->service().closing_sessions(), 0u);
  v1::OpenSessionResponse again;
  ASSERT_TRUE(OpenSession(stub_.get(), &again).ok());
  EXPECT_TRUE(CloseSessionRaw(stub_.get(), again.session_id(), again.token()).ok());
  EXPECT_TRUE(CloseSessionRaw(stub_.get(), other.session_id(), other.token()).ok());
}

// What TCP peers are counted as: an IPv6 host's whole /64 is one peer (it
// can pick any address in it), an IPv4 client of a dual-stack socket the
// same as on an IPv4 socket.
TEST(PeerGroup, AnIpv6PeerIsItsSlash64AndAMappedIpv4PeerItsAddress) {
  const auto v6 = [](const char* text) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    EXPECT_EQ(::inet_pton(AF_INET6, text, &a.sin6_addr), 1) << text;
    return server::PeerGroup(reinterpret_cast<const sockaddr*>(&a));
  };
  EXPECT_EQ(v6("2001:db8:1:2:aaaa:bbbb:cccc:dddd"), "2001:db8:1:2::/64");
  EXPECT_EQ(v6("2001:db8:1:2::1"), "2001:db8:1:2::/64");
  EXPECT_EQ(v6("2001:db8:1:3::1"), "2001:db8:1:3::/64");
  EXPECT_EQ(v6("::ffff:192.0.2.7"), "192.0.2.7");
  EXPECT_EQ(v6("::1"), "::1");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ASSERT_EQ(::inet_pton(AF_INET, "192.0.2.7", &a.sin_addr), 1);
  EXPECT_EQ(server::PeerGroup(reinterpret_cast<const sockaddr*>(&a)), "192.0.2.7");
  sockaddr_un u{};
  u.sun_family = AF_UNIX;
  EXPECT_EQ(server::PeerGroup(reinterpret_cast<const sockaddr*>(&u)), "?");
}

// Silent connections from one address (more than the daemon lets wait in
// all before) do not push out a slow client from another address, which
// connected first and speaks last.
TEST_F(LockoutTest, AFloodOfSilentConnectionsDoesNotPushOutASlowClient) {
  const std::string port = daemon_->addresses()[1];
  const int slow = ConnectFrom("127.0.0.3", port);
  ASSERT_GE(slow, 0);
  constexpr int kFlood = 80;  // more than the 64 that could wait before
  std::vector<int> flood;
  for (int i = 0; i < kFlood; ++i) {
    const int fd = ConnectFrom("127.0.0.1", port);
    ASSERT_GE(fd, 0);
    flood.push_back(fd);
  }
  // The daemon accepts in order: once it pushed out the flood's connection
  // that the last one displaced, it has taken all of them (and the slow
  // one before). A daemon that pushes out others' connections instead
  // never closes this one: bounded by 30 s.
  const int displaced = flood[kFlood - 1 - server::SideChannelServer::kMaxPendingPerPeer];
  pollfd p{displaced, POLLIN | POLLRDHUP, 0};
  ASSERT_EQ(::poll(&p, 1, 30000), 1) << "the flood's connections were not pushed out";
  char byte;
  EXPECT_LE(::recv(displaced, &byte, 1, MSG_DONTWAIT), 0);
  // The slow client speaks now, and is served.
  auto stub = StubOver(slow);
  RawSession s(stub.get());
  s.Upload<int32_t>(1, {3}, ScalarType::kInt32, {7, 8, 9});
  EXPECT_THAT(s.FetchValues<int32_t>(1), ::testing::ElementsAre(7, 8, 9));
  EXPECT_TRUE(s.Close().ok());
  for (int fd : flood) ::close(fd);
  ExpectBystanderServed();
}

// Unknown id and wrong token get one answer on every transport: gRPC's
// CloseSession and attach, the same-host stream's and the shared-memory
// channel's hello, the TCP stream's hello.
TEST_F(LockoutTest, AnUnknownIdAndAWrongTokenGetTheSameAnswerEverywhere) {
  RawSession victim(stub_.get(), /*attach=*/false);
  const std::string wrong_token(victim.token().size(), 'x');
  const uint64_t unknown_id = victim.id() ^ 0x5a5a5a5a;
  std::vector<std::pair<std::string, std::string>> answers;  // what, "code: message"
  const auto note = [&](const std::string& what, int code, absl::string_view message) {
    answers.emplace_back(what, absl::StrCat(code, ": ", message));
  };
  for (const auto& [id, token] : {std::pair{victim.id(), wrong_token}, std::pair{unknown_id, victim.token()}}) {
    const std::string which = id == victim.id() ? "wrong token" : "unknown id";
    const grpc::Status close = CloseSessionRaw(stub_.get(), id, token);
    note("close, " + which, close.error_code(), close.error_message());
    RawSession attach(stub_.get(), /*attach=*/false);
    attach.Attach(id, token);
    const grpc::Status attached = attach.Finish();
    note("attach, " + which, attached.error_code(), attached.error_message());
    const std::string channel = wire::ShmSocketPath(dir_ + "/td.sock");
    for (const wire::ShmOp op : {wire::ShmOp::kHello, wire::ShmOp::kHelloStream}) {
      absl::StatusOr<int> fd = wire::ConnectShmChannel(channel, op, id, token, ::geteuid());
      ASSERT_FALSE(fd.ok());
      note(absl::StrCat("side channel ", static_cast<int>(op), ", ", which), static_cast<int>(fd.status().code()),
           fd.status().message());
    }
    absl::StatusOr<int> tcp = wire::ConnectTcpStream(daemon_->addresses()[1], id, token, 10000);
    ASSERT_FALSE(tcp.ok());
    note("tcp stream, " + which, static_cast<int>(tcp.status().code()), tcp.status().message());
  }
  ASSERT_EQ(answers.size(), 10u);
  for (size_t i = 0; i < 5; ++i) {
    // The wrong token and the unknown id, through the same door, alike.
    EXPECT_EQ(answers[i].second, answers[i + 5].second) << answers[i].first << " vs " << answers[i + 5].first;
    EXPECT_THAT(answers[i].second, HasSubstr(absl::StrCat(static_cast<int>(grpc::StatusCode::NOT_FOUND), ": ")));
    EXPECT_THAT(answers[i].second, HasSubstr("no session with this id and token"));
  }
  // The victim's session is untouched.
  victim.Attach(victim.id(), victim.token());
  EXPECT_TRUE(victim.Sync().empty());
  EXPECT_TRUE(victim.Close().ok());
  ExpectBystanderServed();
}

// The session's generator is not seeded from its id (which the daemon
// logs): seeding another session with the id does not give its numbers.
// manual_seed still makes them reproducible.
TEST_F(LockoutTest, RandomNumbersAreNotPredictableFromTheSessionId) {
  const auto rand8 = [](RawSession& s, std::optional<uint64_t> seed) {
    if (seed.has_value()) {
      v1::Request r;
      r.mutable_manual_seed()->set_seed(*seed);
      s.Send(r);
    }
    s.Send(Call(1, "rand", {IL({8}), None(), None()}, {1}));
    EXPECT_TRUE(s.Sync().empty());
    return s.FetchValues<float>(1);
  };
  RawSession a(stub_.get());
  RawSession b(stub_.get());
  const std::vector<float> unseeded = rand8(a, std::nullopt);
  EXPECT_NE(unseeded, rand8(b, a.id()));  // a log reader's guess
  RawSession c(stub_.get());
  RawSession d(stub_.get());
  EXPECT_EQ(rand8(c, 1234), rand8(d, 1234));
  RawSession e(stub_.get());
  RawSession f(stub_.get());
  EXPECT_NE(rand8(e, std::nullopt), rand8(f, std::nullopt));
  for (RawSession* s : {&a, &b, &c, &d, &e, &f}) EXPECT_TRUE(s->Close().ok());
  ExpectBystanderServed();
}

// A client hands the side channel its session's token only when the peer
// there runs as the daemon's user: a listener of another user (squatting
// the path) gets nothing, not even the hello's first byte.
TEST(SideChannelPeer, TheTokenGoesOnlyToThePeerOfTheDaemonsUser) {
  char tmpl[] = "/tmp/tensord-squat-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/td.sock.shm";
  const int squatter = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, path.c_str(), sizeof(sa.sun_path) - 1);
  ASSERT_EQ(::bind(squatter, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  ASSERT_EQ(::listen(squatter, 8), 0);
  // The daemon's user, as the client learns it from its socket's owner: not
  // the squatter's (this process's) uid.
  const uid_t daemon_uid = ::geteuid() + 1;
  absl::StatusOr<int> fd = wire::ConnectShmChannel(path, wire::ShmOp::kHello, 42, "secret-token", daemon_uid);
  ASSERT_FALSE(fd.ok());
  EXPECT_TRUE(absl::IsPermissionDenied(fd.status())) << fd.status();
  EXPECT_THAT(fd.status().message(), HasSubstr(path));
  EXPECT_THAT(fd.status().message(), HasSubstr(absl::StrCat("runs as uid ", ::geteuid())));
  EXPECT_THAT(fd.status().message(), HasSubstr(absl::StrCat("the daemon runs as uid ", daemon_uid)));
  EXPECT_THAT(fd.status().message(), HasSubstr("token was not sent"));
  const int conn = ::accept4(squatter, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(conn, 0);
  char buf[256];
  EXPECT_EQ(::recv(conn, buf, sizeof(buf), 0), 0);  // the end, and nothing before it
  ::close(conn);
  // The same-host stream's hello too.
  fd = wire::ConnectShmChannel(path, wire::ShmOp::kHelloStream, 42, "secret-token", daemon_uid);
  EXPECT_TRUE(absl::IsPermissionDenied(fd.status())) << fd.status();
  const int conn2 = ::accept4(squatter, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(conn2, 0);
  EXPECT_EQ(::recv(conn2, buf, sizeof(buf), 0), 0);
  ::close(conn2);
  ::close(squatter);
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace tensord::testing
