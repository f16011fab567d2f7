// The shared-memory side channel (tensord/wire/shm.h) spoken to raw: a
// hello needs the session's token; only sealed memfds of the stated size are
// mapped; Upload and Fetch through a segment round-trip the data; a segment
// is its own session's only; bad segment ids and offsets are errors naming
// the numbers, never a crash, and the daemon keeps serving.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <numeric>

#include "raw_client.h"
#include "tensord/wire/shm.h"

namespace tensord::testing {
namespace {

using ::testing::HasSubstr;

// One client end of the side channel.
class ShmClient {
 public:
  explicit ShmClient(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, path.data(), path.size());
    connected_ = ::connect(fd_, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) == 0;
    timeval tv{20, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~ShmClient() { ::close(fd_); }
  bool connected() const { return connected_; }

  absl::Status Hello(uint64_t id, const std::string& token) {
    wire::ShmFrame f;
    f.op = static_cast<uint32_t>(wire::ShmOp::kHello);
    f.session_id = id;
    f.token_size = static_cast<uint32_t>(token.size());
    std::memcpy(f.token, token.data(), token.size());
    if (absl::Status s = wire::SendShmFrame(fd_, f); !s.ok()) return s;
    return wire::RecvShmReply(fd_);
  }
  absl::Status Map(uint32_t segment, uint64_t size, int memfd) {
    wire::ShmFrame f;
    f.op = static_cast<uint32_t>(wire::ShmOp::kMap);
    f.segment = segment;
    f.size = size;
    if (absl::Status s = wire::SendShmFrame(fd_, f, memfd); !s.ok()) return s;
    return wire::RecvShmReply(fd_);
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// A memfd of `size` bytes mapped here; sealed against shrinking unless told.
struct Memfd {
  explicit Memfd(size_t n, bool seal = true) : size(n) {
    fd = ::memfd_create("tensord-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(n)), 0);
    if (seal) EXPECT_EQ(::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    data = static_cast<char*>(::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  }
  ~Memfd() {
    ::munmap(data, size);
    ::close(fd);
  }
  int fd;
  size_t size;
  char* data;
};

v1::Request ShmUpload(uint64_t handle, const std::vector<int64_t>& sizes, uint32_t segment, uint64_t offset) {
  v1::Request r;
  v1::Upload* u = r.mutable_upload();
  u->set_handle(handle);
  *u->mutable_meta() = MetaProto(sizes, ScalarType::kFloat32);
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  u->set_total_bytes(static_cast<uint64_t>(n) * 4);
  u->set_shm_segment(segment);
  u->set_shm_offset(offset);
  u->set_last(true);
  return r;
}

// A Fetch into a segment: the reply message.
v1::ServerMessage ShmFetch(RawSession& s, uint64_t request_id, uint64_t handle, uint32_t segment, uint64_t offset,
                           uint64_t capacity) {
  v1::Request r;
  v1::Fetch* f = r.mutable_fetch();
  f->set_request_id(request_id);
  f->set_handle(handle);
  f->set_shm_segment(segment);
  f->set_shm_offset(offset);
  f->set_shm_capacity(capacity);
  s.Send(r);
  v1::ServerMessage m;
  EXPECT_TRUE(s.Read(&m));
  return m;
}

class ShmTest : public DaemonFixture {
 protected:
  std::string ChannelPath() const { return wire::ShmSocketPath(dir_ + "/td.sock"); }
};

TEST_F(ShmTest, RoundTripThroughASegment) {
  RawSession s(stub_.get());
  ShmClient c(ChannelPath());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Hello(s.id(), s.token()).ok());
  const size_t n = 300001;  // floats: not a multiple of the page size
  Memfd seg(2 * n * 4 + 4096);
  ASSERT_TRUE(c.Map(7, seg.size, seg.fd).ok());
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.5f);
  std::memcpy(seg.data + 4096, v.data(), n * 4);
  s.Send(ShmUpload(1, {static_cast<int64_t>(n)}, 7, 4096));
  EXPECT_TRUE(s.Sync().empty());
  std::memset(seg.data + 4096, 0, n * 4);  // the daemon copied it
  EXPECT_EQ(s.FetchValues<float>(1), v);   // the stream path gives the same data
  v1::ServerMessage m = ShmFetch(s, 100, 1, 7, n * 4 + 4096, n * 4);
  ASSERT_TRUE(m.has_data()) << m.DebugString();
  EXPECT_EQ(m.data().shm_segment(), 7u);
  EXPECT_TRUE(m.data().data().empty());
  EXPECT_TRUE(m.data().last());
  EXPECT_EQ(std::memcmp(seg.data + n * 4 + 4096, v.data(), n * 4), 0);
  // Too small a capacity: streamed instead.
  m = ShmFetch(s, 101, 1, 7, 0, 16);
  ASSERT_TRUE(m.has_data());
  EXPECT_EQ(m.data().shm_segment(), 0u);
  EXPECT_FALSE(m.data().data().empty());
  while (!m.data().last()) ASSERT_TRUE(s.Read(&m));
  // A transposed view is written in row-major order.
  s.Upload<float>(2, {2, 3}, ScalarType::kFloat32, {1, 2, 3, 4, 5, 6});
  s.Send(Call(1, "t", {T(2)}, {3}));
  m = ShmFetch(s, 102, 3, 7, 0, 24);
  ASSERT_TRUE(m.has_data()) << m.DebugString();
  std::vector<float> got(6);
  std::memcpy(got.data(), seg.data, 24);
  EXPECT_THAT(got, ::testing::ElementsAre(1, 4, 2, 5, 3, 6));
}

TEST_F(ShmTest, HelloNeedsTheTokenAndOneChannelPerSession) {
  RawSession s(stub_.get());
  {
    ShmClient c(ChannelPath());
    absl::Status st = c.Hello(s.id(), "not the token");
    EXPECT_TRUE(absl::IsPermissionDenied(st)) << st;
    ShmClient d(ChannelPath());
    st = d.Hello(s.id() ^ 1, s.token());
    EXPECT_TRUE(absl::IsNotFound(st)) << st;
  }
  ShmClient ok(ChannelPath());
  ASSERT_TRUE(ok.Hello(s.id(), s.token()).ok());
  ShmClient second(ChannelPath());
  absl::Status st = second.Hello(s.id(), s.token());
  EXPECT_THAT(st.message(), HasSubstr("already has a shared-memory channel"));
}

TEST_F(ShmTest, OnlySealedMemfdsOfTheStatedSizeAreMapped) {
  RawSession s(stub_.get());
  ShmClient c(ChannelPath());
  ASSERT_TRUE(c.Hello(s.id(), s.token()).ok());
  Memfd unsealed(1 << 16, /*seal=*/false);
  EXPECT_THAT(c.Map(1, unsealed.size, unsealed.fd).message(), HasSubstr("F_SEAL_SHRINK"));
  Memfd good(1 << 16);
  EXPECT_THAT(c.Map(2, good.size + 1, good.fd).message(), HasSubstr("the memfd has 65536"));
  EXPECT_THAT(c.Map(0, good.size, good.fd).message(), HasSubstr("id 0 is reserved"));
  EXPECT_THAT(c.Map(3, good.size, -1).message(), HasSubstr("no file descriptor"));
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  EXPECT_THAT(c.Map(4, 4096, pipe_fds[0]).message(), HasSubstr("not a sealable memfd"));
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  ASSERT_TRUE(c.Map(5, good.size, good.fd).ok());
  EXPECT_THAT(c.Map(5, good.size, good.fd).message(), HasSubstr("already mapped"));
}

TEST_F(ShmTest, BadSegmentsAndOffsetsAreErrorsAndSegmentsAreTheSessionsOwn) {
  RawSession a(stub_.get());
  RawSession b(stub_.get());
  ShmClient c(ChannelPath());
  ASSERT_TRUE(c.Hello(a.id(), a.token()).ok());
  Memfd seg(1 << 16);
  ASSERT_TRUE(c.Map(1, seg.size, seg.fd).ok());
  // b names a's segment: unknown in b.
  b.Send(ShmUpload(1, {16}, 1, 0));
  ExpectOneError(b.Sync(), "shared-memory segment 1 is not mapped in this session");
  // Past the end, and an offset that would wrap around.
  a.Send(ShmUpload(1, {16385}, 1, 0));
  ExpectOneError(a.Sync(), "65540 bytes at offset 0 reach past the end of shared-memory segment 1 (65536 bytes)");
  a.Send(ShmUpload(2, {4}, 1, ~uint64_t{0} - 3));
  ExpectOneError(a.Sync(), "reach past the end");
  // Data and a segment together.
  v1::Request both = ShmUpload(3, {4}, 1, 0);
  both.mutable_upload()->set_data(std::string(16, 'x'));
  a.Send(both);
  ExpectOneError(a.Sync(), "both data and a shared-memory segment");
  // A fetch into a bad place: a RequestError, not a crash.
  a.Upload<float>(4, {4}, ScalarType::kFloat32, {1, 2, 3, 4});
  v1::ServerMessage m = ShmFetch(a, 50, 4, 1, 65530, 16);
  ASSERT_TRUE(m.has_error()) << m.DebugString();
  EXPECT_THAT(m.error().error().message(), HasSubstr("16 bytes at offset 65530 reach past the end"));
  m = ShmFetch(a, 51, 4, 9, 0, 16);
  ASSERT_TRUE(m.has_error()) << m.DebugString();
  EXPECT_THAT(m.error().error().message(), HasSubstr("segment 9 is not mapped"));
  // Both sessions still work.
  EXPECT_THAT(a.FetchValues<float>(4), ::testing::ElementsAre(1, 2, 3, 4));
  b.Upload<float>(9, {2}, ScalarType::kFloat32, {5, 6});
  EXPECT_THAT(b.FetchValues<float>(9), ::testing::ElementsAre(5, 6));
}

TEST_F(ShmTest, ClosingTheSessionUnmapsItsSegments) {
  auto s = std::make_unique<RawSession>(stub_.get());
  ShmClient c(ChannelPath());
  ASSERT_TRUE(c.Hello(s->id(), s->token()).ok());
  Memfd seg(1 << 20);
  ASSERT_TRUE(c.Map(1, seg.size, seg.fd).ok());
  ASSERT_TRUE(s->Close().ok());
  // Refused either way: the daemon answers "closed" while the channel is
  // still open, or it has already closed the channel (send or receive fails,
  // depending on when the daemon's channel thread sees the close).
  const absl::Status st = c.Map(2, seg.size, seg.fd);
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(std::string(st.message()), ::testing::AnyOf(HasSubstr("closed"), HasSubstr("channel: send"),
                                                          HasSubstr("channel: receive")));
  s->Finish();
}

}  // namespace
}  // namespace tensord::testing
