// The shared-memory side channel (tensord/transport/shm.h) spoken to raw: a
// hello needs the session's token; only sealed memfds of the stated size are
// mapped; Upload and Fetch through a segment round-trip the data; a segment
// is its own session's only; bad segment ids and offsets are errors naming
// the numbers, never a crash, and the daemon keeps serving.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>
#include <numeric>
#include <string>

#include "../../server/src/side_channel.h"
#include "raw_client.h"
#include "tensord/transport/shm.h"

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
  int fd() const { return fd_; }

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
  absl::Status Unmap(uint32_t segment) {
    wire::ShmFrame f;
    f.op = static_cast<uint32_t>(wire::ShmOp::kUnmap);
    f.segment = segment;
    if (absl::Status s = wire::SendShmFrame(fd_, f); !s.ok()) return s;
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
    if (seal) {
      EXPECT_EQ(::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    }
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

// An upload whose storage is the segment itself (Upload.shm_adopt).
v1::Request AdoptUpload(uint64_t handle, const std::vector<int64_t>& sizes, uint32_t segment, uint64_t offset = 0) {
  v1::Request r = ShmUpload(handle, sizes, segment, offset);
  r.mutable_upload()->set_shm_adopt(true);
  return r;
}

v1::Request ReleaseReq(std::vector<uint64_t> handles) {
  v1::Request r;
  for (uint64_t h : handles) r.mutable_release()->add_handles(h);
  return r;
}

// The segments a reply reports freed: a Describe of nothing is an Ack.
std::vector<uint32_t> Freed(RawSession& s) {
  v1::Ack ack = s.Describe({});
  return {ack.shm_freed().begin(), ack.shm_freed().end()};
}

// Mappings of the test's memfds in this process (the daemon runs in it too).
int MemfdMappings() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) n += line.find("memfd:tensord-test") != std::string::npos;
  return n;
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
    const absl::Status wrong = c.Hello(s.id(), "not the token");
    EXPECT_TRUE(absl::IsNotFound(wrong)) << wrong;
    ShmClient d(ChannelPath());
    const absl::Status unknown = d.Hello(s.id() ^ 1, s.token());
    // The same answer: the channel does not tell whether an id exists.
    EXPECT_EQ(unknown, wrong);
    EXPECT_THAT(wrong.message(), HasSubstr("no session with this id and token"));
  }
  ShmClient ok(ChannelPath());
  ASSERT_TRUE(ok.Hello(s.id(), s.token()).ok());
  ShmClient second(ChannelPath());
  absl::Status st = second.Hello(s.id(), s.token());
  EXPECT_THAT(st.message(), HasSubstr("already has a shared-memory channel"));
}

// Connections that never say hello each hold a daemon thread until their
// hello deadline; past SideChannelServer::kMaxPendingHellos of them the
// daemon closes new ones at once (no reply, no thread), and once they go a
// session's hello is answered again.
TEST_F(ShmTest, ConnectionsWaitingForTheirHelloAreCapped) {
  RawSession s(stub_.get());
  std::vector<std::unique_ptr<ShmClient>> silent;
  for (int i = 0; i < server::SideChannelServer::kMaxPendingHellos; ++i) {
    silent.push_back(std::make_unique<ShmClient>(ChannelPath()));
    ASSERT_TRUE(silent.back()->connected());
  }
  ShmClient over(ChannelPath());
  ASSERT_TRUE(over.connected());
  // Closed without a reply, well before the hello deadline (which would
  // send one): recv sees the end at once.
  timeval tv{server::SideChannelServer::kHelloTimeoutSeconds - 2, 0};
  ::setsockopt(over.fd(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char byte;
  EXPECT_EQ(::recv(over.fd(), &byte, 1, 0), 0) << std::strerror(errno);
  silent.clear();
  // Their threads see them close and leave; then a hello is served.
  absl::Status st;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  do {
    ShmClient ok(ChannelPath());
    st = ok.Hello(s.id(), s.token());
    if (st.ok()) break;
    absl::SleepFor(absl::Milliseconds(20));
  } while (absl::Now() < deadline);
  EXPECT_TRUE(st.ok()) << st;
  s.Upload<float>(1, {2}, ScalarType::kFloat32, {1, 2});
  EXPECT_THAT(s.FetchValues<float>(1), ::testing::ElementsAre(1, 2));
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

TEST_F(ShmTest, AnAdoptedSegmentIsTheStorageUntilItsLastViewGoes) {
  RawSession s(stub_.get());
  ShmClient c(ChannelPath());
  ASSERT_TRUE(c.Hello(s.id(), s.token()).ok());
  const int64_t rows = 1001, cols = 263;  // 1,053,052 bytes: past 1 MiB, not a multiple of the page
  const size_t n = static_cast<size_t>(rows * cols);
  Memfd seg(2 << 20);
  ASSERT_TRUE(c.Map(7, seg.size, seg.fd).ok());
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.25f);
  std::memcpy(seg.data, v.data(), n * 4);
  s.Send(AdoptUpload(1, {rows, cols}, 7));
  EXPECT_TRUE(s.Sync().empty());
  EXPECT_EQ(s.FetchValues<float>(1), v);
  // No copy: the storage is the segment (the client writing its own mapping
  // changes its own tensor).
  reinterpret_cast<float*>(seg.data)[5] = -1.0f;
  v[5] = -1.0f;
  EXPECT_EQ(s.FetchValues<float>(1), v);

  // Busy while adopted: another adopt, a copying upload, a fetch into it and
  // an unmap are refused; the session keeps working.
  s.Send(AdoptUpload(2, {4}, 7));
  ExpectOneError(s.Sync(), "shared-memory segment 7 backs a tensor's storage");
  s.Send(ShmUpload(3, {4}, 7, 0));
  ExpectOneError(s.Sync(), "busy until a reply lists it in shm_freed");
  v1::ServerMessage m = ShmFetch(s, 60, 1, 7, 0, seg.size);
  ASSERT_TRUE(m.has_error()) << m.DebugString();
  EXPECT_THAT(m.error().error().message(), HasSubstr("backs a tensor's storage"));
  EXPECT_THAT(c.Unmap(7).message(), HasSubstr("cannot be unmapped"));

  // A view and an in-place op through it; the base's handle goes first.
  s.Send(Call(1, "t", {T(1)}, {4}));
  s.Send(Call(2, "mul_.Scalar", {T(4), F(2.0)}, {0}));
  s.Send(ReleaseReq({1}));
  EXPECT_TRUE(Freed(s).empty());  // the view still holds the storage
  EXPECT_EQ(reinterpret_cast<float*>(seg.data)[7], 2 * v[7]);  // written in place, in the segment
  std::vector<float> got = s.FetchValues<float>(4);
  ASSERT_EQ(got.size(), n);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      ASSERT_EQ(got[static_cast<size_t>(j * rows + i)], 2 * v[static_cast<size_t>(i * cols + j)]) << i << "," << j;
    }
  }
  s.Send(ReleaseReq({4}));
  EXPECT_THAT(Freed(s), ::testing::ElementsAre(7u));
  EXPECT_TRUE(Freed(s).empty());  // reported once

  // Free again: adopted anew (at an aligned offset), unmapped after.
  std::memcpy(seg.data + 4096, v.data(), 64);
  s.Send(AdoptUpload(5, {16}, 7, 4096));
  EXPECT_TRUE(s.Sync().empty());
  EXPECT_EQ(s.FetchValues<float>(5), std::vector<float>(v.begin(), v.begin() + 16));
  s.Send(ReleaseReq({5}));
  EXPECT_THAT(Freed(s), ::testing::ElementsAre(7u));
  EXPECT_TRUE(c.Unmap(7).ok());
}

TEST_F(ShmTest, BadAdoptingUploadsAreErrorsAndTheDaemonKeepsServing) {
  RawSession s(stub_.get());
  ShmClient c(ChannelPath());
  ASSERT_TRUE(c.Hello(s.id(), s.token()).ok());
  Memfd seg(1 << 16);
  ASSERT_TRUE(c.Map(1, seg.size, seg.fd).ok());
  s.Send(AdoptUpload(1, {16}, 9));
  ExpectOneError(s.Sync(), "segment 9 is not mapped in this session");
  s.Send(AdoptUpload(2, {16385}, 1));
  ExpectOneError(s.Sync(), "65540 bytes at offset 0 reach past the end of shared-memory segment 1 (65536 bytes)");
  s.Send(AdoptUpload(3, {4}, 1, ~uint64_t{0} - 63));
  ExpectOneError(s.Sync(), "reach past the end");
  s.Send(AdoptUpload(4, {4}, 1, 100));
  ExpectOneError(s.Sync(), "offset must be a multiple of 64 bytes, got 100");
  s.Send(AdoptUpload(5, {4}, 0));
  ExpectOneError(s.Sync(), "must be one message");
  v1::Request with_data = AdoptUpload(6, {4}, 1);
  with_data.mutable_upload()->set_data(std::string(16, 'x'));
  s.Send(with_data);
  ExpectOneError(s.Sync(), "must be one message");
  v1::Request not_last = AdoptUpload(7, {4}, 1);
  not_last.mutable_upload()->set_last(false);
  s.Send(not_last);
  ExpectOneError(s.Sync(), "must be one message");
  // A chunked upload whose later chunk asks to adopt.
  v1::Request first = ShmUpload(8, {8}, 1, 0);
  first.mutable_upload()->set_shm_segment(0);
  first.mutable_upload()->set_data(std::string(16, 'x'));
  first.mutable_upload()->set_last(false);
  s.Send(first);
  v1::Request later = AdoptUpload(8, {8}, 1);
  later.mutable_upload()->clear_meta();
  later.mutable_upload()->set_offset(16);
  s.Send(later);
  ExpectOneError(s.Sync(), "only a first (and only) chunk can adopt");
  // Nothing was adopted, nothing is reported freed, and all still works.
  EXPECT_TRUE(Freed(s).empty());
  std::vector<float> v = {1, 2, 3, 4};
  std::memcpy(seg.data + 128, v.data(), 16);
  s.Send(AdoptUpload(10, {4}, 1, 128));
  EXPECT_TRUE(s.Sync().empty());
  EXPECT_EQ(s.FetchValues<float>(10), v);
}

TEST_F(ShmTest, AnAdoptedStorageCountsAgainstTheSessionsLimit) {
  StartDaemon(/*session_memory_limit_bytes=*/1 << 20);
  RawSession s(stub_.get());
  ShmClient c(ChannelPath());
  ASSERT_TRUE(c.Hello(s.id(), s.token()).ok());
  Memfd seg(2 << 20);
  ASSERT_TRUE(c.Map(3, seg.size, seg.fd).ok());
  s.Send(AdoptUpload(1, {(1 << 20) / 4 + 1}, 3));
  EXPECT_THAT(Freed(s), ::testing::ElementsAre(3u));  // refused: free again at once
  ExpectOneError(s.Sync(), "out of memory");
  s.Send(ReleaseReq({1}));  // the failed handle's entry is charged too
  s.Send(AdoptUpload(2, {(1 << 19) / 4}, 3));       // 512 KiB fits
  EXPECT_TRUE(s.Sync().empty());
  // 504 KiB more fits beside it (the handles' table entries are charged too).
  constexpr int64_t kMore = ((1 << 19) - 8192) / 4;
  s.Upload<float>(4, {kMore}, ScalarType::kFloat32, std::vector<float>(kMore, 1.0f));
  EXPECT_TRUE(s.Sync().empty());
  s.Upload<float>(5, {4096}, ScalarType::kFloat32, std::vector<float>(4096, 1.0f));  // over: the adopted 512 KiB count
  ExpectOneError(s.Sync(), "out of memory");
}

TEST_F(ShmTest, ClosingASessionFreesItsAdoptedStorages) {
  auto s = std::make_unique<RawSession>(stub_.get());
  ShmClient c(ChannelPath());
  ASSERT_TRUE(c.Hello(s->id(), s->token()).ok());
  Memfd seg(1 << 20);
  ASSERT_TRUE(c.Map(1, seg.size, seg.fd).ok());
  s->Send(AdoptUpload(1, {1 << 18}, 1));
  s->Send(Call(1, "t", {T(1)}, {2}));  // a 1-D t() is a view too
  EXPECT_TRUE(s->Sync().empty());
  EXPECT_EQ(MemfdMappings(), 2);  // this test's and the daemon's (in this process)
  ASSERT_TRUE(s->Close().ok());
  // The storages go with the session, and the mapping with them: once the
  // last thread that held the session lets go of it, which may be a moment
  // after Close returns (a stream thread still finishing).
  for (int i = 0; i < 1000 && MemfdMappings() != 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(MemfdMappings(), 1);
  s->Finish();
  // Another session works, and the daemon kept serving.
  RawSession t(stub_.get());
  t.Upload<float>(1, {2}, ScalarType::kFloat32, {5, 6});
  EXPECT_THAT(t.FetchValues<float>(1), ::testing::ElementsAre(5, 6));
}

// An expanded view counts 2**62 elements over 4 bytes of storage: its fetch
// would be 2**64 bytes, which wrapped to 0, passed the segment's capacity
// check, and the copy wrote past the mapping (the daemon died of SIGSEGV).
TEST_F(ShmTest, FetchIntoASegmentOfAViewWhoseBytesOverflowIsRefused) {
  RawSession s(stub_.get());
  ShmClient c(ChannelPath());
  ASSERT_TRUE(c.Hello(s.id(), s.token()).ok());
  Memfd seg(1 << 16);
  ASSERT_TRUE(c.Map(1, seg.size, seg.fd).ok());
  s.Upload<float>(1, {1}, ScalarType::kFloat32, {7.0f});
  const int64_t n = int64_t{1} << 31;
  s.Send(Call(1, "expand", {T(1), IL({n, n}), B(false)}, {2}));
  EXPECT_TRUE(s.Sync().empty());
  v1::ServerMessage m = ShmFetch(s, 100, 2, 1, 0, seg.size);
  ASSERT_TRUE(m.has_error()) << m.DebugString();
  EXPECT_EQ(m.error().request_id(), 100u);
  EXPECT_THAT(m.error().error().message(),
              HasSubstr("fetch: tensor of 4611686018427387904 elements x 4 bytes overflows int64"));
  // The session and its segment still serve a fetch; another session too.
  m = ShmFetch(s, 101, 1, 1, 0, seg.size);
  ASSERT_TRUE(m.has_data()) << m.DebugString();
  EXPECT_EQ(m.data().shm_segment(), 1u);
  float got = 0;
  std::memcpy(&got, seg.data, 4);
  EXPECT_EQ(got, 7.0f);
  EXPECT_TRUE(s.Sync().empty());
  RawSession t(stub_.get());
  t.Upload<float>(1, {2}, ScalarType::kFloat32, {5, 6});
  EXPECT_THAT(t.FetchValues<float>(1), ::testing::ElementsAre(5, 6));
}

// An adopting upload of `n` int64 values at the segment's start.
v1::Request AdoptInt64(uint64_t handle, int64_t n, uint32_t segment) {
  v1::Request r = AdoptUpload(handle, {n}, segment);
  *r.mutable_upload()->mutable_meta() = MetaProto({n}, ScalarType::kInt64);
  r.mutable_upload()->set_total_bytes(static_cast<uint64_t>(n) * 8);
  return r;
}

// The client keeps writing an adopted segment while the daemon runs kernels
// on it. index_add checks every index before its write pass reads them
// again: a value flipped between the passes must not send the write out of
// bounds. Each call either succeeds or reports an index error, and the
// daemon survives.
TEST_F(ShmTest, IndicesTheClientKeepsRewritingNeverReachPastTheTensor) {
  RawSession s(stub_.get());
  ShmClient c(ChannelPath());
  ASSERT_TRUE(c.Hello(s.id(), s.token()).ok());
  constexpr int64_t kN = 4096;
  Memfd seg(kN * 8);
  ASSERT_TRUE(c.Map(1, seg.size, seg.fd).ok());
  auto* idx = reinterpret_cast<int64_t*>(seg.data);
  for (int64_t i = 0; i < kN; ++i) idx[i] = i % 8;
  s.Send(AdoptInt64(1, kN, 1));
  s.Upload<float>(2, {8}, ScalarType::kFloat32, std::vector<float>(8, 0.0f));
  s.Upload<float>(3, {kN}, ScalarType::kFloat32, std::vector<float>(kN, 1.0f));
  ASSERT_TRUE(s.Sync().empty());

  // A volatile store per flip: the compiler keeps every one of them.
  std::atomic<bool> stop{false};
  std::thread flipper([&] {
    volatile int64_t* last = idx + kN - 1;
    while (!stop.load(std::memory_order_relaxed)) {
      *last = int64_t{1} << 40;  // far past any mapping: an unchecked write faults
      *last = 7;
    }
  });
  int ok = 0, refused = 0;
  uint64_t h = 100;
  for (int round = 0; round < 2000; ++round) {
    std::vector<v1::Request> batch;
    for (int k = 0; k < 10; ++k, ++h) {
      batch.push_back(Call(h, "index_add", {T(2), I(0), T(1), T(3), I(1)}, {h}));
      batch.push_back(ReleaseReq({h}));
    }
    s.Send(std::move(batch));
    const std::vector<v1::Error> errors = s.Sync();
    for (const v1::Error& e : errors) {
      EXPECT_THAT(e.message(), HasSubstr("out of bounds for dimension 0 with size 8")) << e.DebugString();
    }
    refused += static_cast<int>(errors.size());
    ok += 10 - static_cast<int>(errors.size());
  }
  stop = true;
  flipper.join();
  EXPECT_EQ(ok + refused, 20000);

  // The same session and another one work on.
  idx[kN - 1] = 7;
  s.Send(Call(1, "index_add", {T(2), I(0), T(1), T(3), I(1)}, {4}));
  std::vector<float> sums = s.FetchValues<float>(4);
  EXPECT_EQ(sums, std::vector<float>(8, kN / 8));
  RawSession t(stub_.get());
  t.Upload<float>(1, {2}, ScalarType::kFloat32, {5, 6});
  EXPECT_THAT(t.FetchValues<float>(1), ::testing::ElementsAre(5, 6));
}

// An in-place op on an integral adopted tensor runs on a private copy: its
// result still lands in the segment (the tensor's storage).
TEST_F(ShmTest, AnInPlaceOpOnAnAdoptedIntegralTensorWritesTheSegment) {
  RawSession s(stub_.get());
  ShmClient c(ChannelPath());
  ASSERT_TRUE(c.Hello(s.id(), s.token()).ok());
  Memfd seg(4096);
  ASSERT_TRUE(c.Map(1, seg.size, seg.fd).ok());
  auto* v = reinterpret_cast<int64_t*>(seg.data);
  for (int64_t i = 0; i < 16; ++i) v[i] = i - 8;
  s.Send(AdoptInt64(1, 16, 1));
  s.Send(Call(1, "narrow", {T(1), I(0), I(4), I(8)}, {2}));  // a view at an offset
  s.Send(Call(2, "clamp_", {T(2), I(-2), I(2)}, {0}));
  ASSERT_TRUE(s.Sync().empty());
  for (int64_t i = 0; i < 16; ++i) {
    const int64_t want = i >= 4 && i < 12 ? std::min<int64_t>(2, std::max<int64_t>(-2, i - 8)) : i - 8;
    EXPECT_EQ(v[i], want) << i;
  }
  std::vector<int64_t> got = s.FetchValues<int64_t>(1);
  EXPECT_EQ(got, std::vector<int64_t>(v, v + 16));
}

}  // namespace
}  // namespace tensord::testing
