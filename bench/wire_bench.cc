// wire_bench — figures 2 and 3 of `make bench`: what the wire costs
// the C++ client, each figure beside a peer measured by this binary in the
// same run. A benchmark, not a test: nothing here passes or fails on speed.
//
//   build/bin/wire_bench [--json FILE] [--quick] [--only 2,3] [--tensord BIN]
//
// Figure 2, synchronous round trip: `c = a + b` on two 64-element float32
//   tensors, then c[0].item() (a select and a fetch of one element: one
//   message out, one back), repeated; the median round trip in microseconds
//   through the tensord C++ client, beside a bare gRPC ping-pong (one 64-byte
//   message each way on an open bidirectional stream, bench/tensord_bench/
//   echo.proto) on the same transport. Ratio = tensord / bare; target <= 1.3.
//   Four rows: over the Unix socket with the same-host stream (the session's
//   messages on the daemon's side-channel socket, the default there), over
//   the Unix socket with the gRPC stream
//   (SessionOptions::transport.same_host_stream = false), over loopback TCP
//   with the TCP stream (the session's messages on a TCP connection of their
//   own, the default there), and over loopback TCP with the gRPC stream
//   (SessionOptions::transport.tcp_stream = false).
// Figure 3, data plane: upload (FromBlob + Synchronize) and download (Fetch)
//   of 1 MiB, 64 MiB and 256 MiB float32 tensors through the C++ client, in
//   GB/s (10^9 bytes per second), beside memcpy of the same size between two
//   already-touched buffers in this process. Row names end with the path:
//   "(unix)" and "(tcp)" (the gRPC stream over the Unix socket and over
//   TCP), "(tcp stream)" (the TCP stream, the default over TCP) and
//   "(unix, shm)" (shared-memory segments, the default on the same host,
//   with the same-host stream for the messages). Over gRPC and the TCP
//   stream the peer is the bare transport of the same path (the same
//   transfers over bare gRPC, or over a bare TCP connection), which bounds
//   them: target >= 0.9, memcpy's rate kept as a note. Through shared
//   memory the peer is memcpy: target >= 0.8.
//
// Both peers run in their own process, like the daemon: the real `tensord
// serve --listen unix:TMP/sock --listen 127.0.0.1:0` (from --tensord,
// $TENSORD_BIN, else `tensord` beside this binary), and this binary again in
// `--serve-echo` mode on a temporary Unix socket and 127.0.0.1 port 0. The
// tensord and echo samples are taken in alternating blocks so that drift on a
// shared machine hits both. Nothing reaches the network.
//
// Output: a table on stdout; with --json, a JSON list of rows with figure,
// name, unit, ours, peer, peer_name, ratio (ours / peer), target (as
// bench/py_bench.py writes them) plus transport, repeats and where the CPU
// time went: figure 2 rows give CPU microseconds per round trip of each side
// (client_cpu_us, daemon_cpu_us, peer_client_cpu_us, peer_server_cpu_us;
// the server's from /proc/PID/task/*/schedstat, in nanoseconds) and the
// voluntary context switches per round trip of each process, all threads
// (client_switches, daemon_switches, peer_client_switches,
// peer_server_switches: how often a thread blocked and was woken), figure 3 rows the CPU share (CPU seconds / wall seconds) of the client and
// of the daemon during the transfers (client_cpu_share, daemon_cpu_share).
// Exit status 1 with a message on stderr when the daemon cannot be started
// or a client call fails. --quick: fewer repeats and no 256 MiB case (a smoke
// run, seconds).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "bench_util.h"
#include "grpcpp/grpcpp.h"
#include "tensord/client/client.h"
#include "tensord/wire/copy.h"
#include "tensord_bench/echo.grpc.pb.h"

extern char** environ;

namespace tc = tensord::client;
using Clock = std::chrono::steady_clock;

namespace {

// ---------------------------------------------------------------- helpers (bench_util.h)

using tensord::bench::Check;
using tensord::bench::Child;
using tensord::bench::Clobber;
using tensord::bench::CpuMark;
using tensord::bench::DaemonBinary;
using tensord::bench::Die;
using tensord::bench::Median;
using tensord::bench::ParseFigures;
using tensord::bench::PrintTable;
using tensord::bench::ProcCpuSeconds;
using tensord::bench::Row;
using tensord::bench::Seconds;
using tensord::bench::SelfCpuSeconds;
using tensord::bench::SelfDir;
using tensord::bench::SplitAddresses;
using tensord::bench::WriteJson;

// ---------------------------------------------------------------- echo server

// Bulk transfers over bare gRPC go in messages of this size, as tensord's
// large transfers do (SessionOptions::transport.chunk_bytes).
constexpr size_t kBulkChunkBytes = 4 << 20;

using BytesStream = grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>;

// Copies a received message's bytes to `dst` as tensord's receivers copy a
// transfer's pieces (wire::CopyTransferPiece: non-temporal stores for a
// transfer of `total_bytes` >= 4 MiB); returns the bytes copied.
size_t CopyOut(const grpc::ByteBuffer& in, char* dst, uint64_t total_bytes) {
  std::vector<grpc::Slice> slices;
  (void)in.Dump(&slices);
  size_t off = 0;
  for (const grpc::Slice& sl : slices) {
    tensord::wire::CopyTransferPiece(dst + off, reinterpret_cast<const char*>(sl.begin()), sl.size(), total_bytes);
    off += sl.size();
  }
  return off;
}

class EchoService final : public tensord::bench::Echo::Service {
 public:
  // Upload and Download take raw byte buffers: installed in place of the
  // generated handlers, as the daemon does for its Stream method.
  EchoService() {
    const auto* service = tensord::bench::Ping::descriptor()->file()->FindServiceByName("Echo");
    MarkMethodStreamed(service->FindMethodByName("Upload")->index(),
                       new grpc::internal::BidiStreamingHandler<EchoService, grpc::ByteBuffer, grpc::ByteBuffer>(
                           [](EchoService* self, grpc::ServerContext*, BytesStream* stream) { return self->Up(stream); },
                           this));
    MarkMethodStreamed(service->FindMethodByName("Download")->index(),
                       new grpc::internal::BidiStreamingHandler<EchoService, grpc::ByteBuffer, grpc::ByteBuffer>(
                           [](EchoService* self, grpc::ServerContext*, BytesStream* stream) { return self->Down(stream); },
                           this));
  }

  grpc::Status PingPong(grpc::ServerContext*, grpc::ServerReaderWriter<tensord::bench::Ping, tensord::bench::Ping>* stream)
      override {
    tensord::bench::Ping p;
    while (stream->Read(&p)) {
      if (!stream->Write(p)) break;
    }
    return grpc::Status::OK;
  }

 private:
  // Copies each message's bytes into a buffer (as tensord copies an upload
  // into the tensor's storage) and acknowledges it. The server does not know
  // the transfer's total: a message of kBulkChunkBytes is taken as part of a
  // large one, as the daemon's chunks of a large upload are.
  grpc::Status Up(BytesStream* stream) {
    grpc::ByteBuffer in;
    grpc::Slice nothing;
    const grpc::ByteBuffer ack(&nothing, 1);  // empty, but valid (a default ByteBuffer cannot be written)
    std::vector<char> landing;
    while (stream->Read(&in)) {
      if (landing.size() < in.Length()) landing.resize(in.Length());
      CopyOut(in, landing.data(), in.Length());
      if (!stream->Write(ack)) break;
    }
    return grpc::Status::OK;
  }
  // Sends the bytes asked for from one buffer, without copying them (as the
  // daemon sends a tensor's storage).
  grpc::Status Down(BytesStream* stream) {
    grpc::ByteBuffer in;
    std::vector<char> source(kBulkChunkBytes, 'd');
    while (stream->Read(&in)) {
      grpc::Slice ask;
      uint64_t n = 0;
      if (!in.DumpToSingleSlice(&ask).ok() || ask.size() != sizeof(n)) break;
      std::memcpy(&n, ask.begin(), sizeof(n));
      while (n > 0) {
        const size_t len = std::min<uint64_t>(n, kBulkChunkBytes);
        grpc::Slice piece(source.data(), len, grpc::Slice::STATIC_SLICE);
        if (!stream->Write(grpc::ByteBuffer(&piece, 1))) return grpc::Status::OK;
        n -= len;
      }
    }
    return grpc::Status::OK;
  }
};

// ---------------------------------------------------------------- bare TCP

// Bulk transfers over a bare TCP connection, the reference for the TCP
// stream's rows: what loopback TCP itself allows, with nothing of tensord or
// gRPC. A request is 16 bytes {u64 kind (1 upload, 2 download), u64 n}; an
// upload's n bytes follow, received straight into a buffer, then a 1-byte
// acknowledgement; a download's n bytes come back from one buffer. Both ends
// set TCP_NODELAY, as tensord's do.
bool SendAllTcp(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = send(fd, p, n, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}
bool RecvAllTcp(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = recv(fd, p, n, MSG_WAITALL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Serves bare TCP transfers on `listen_fd`, one connection at a time, until
// the listening socket is shut down.
void ServeBareTcp(int listen_fd) {
  std::vector<char> buf;
  for (;;) {
    const int fd = accept(listen_fd, nullptr, nullptr);
    if (fd < 0) {
      if (errno == EINTR) continue;
      return;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    uint64_t req[2];
    while (RecvAllTcp(fd, reinterpret_cast<char*>(req), sizeof(req))) {
      if (req[1] > (uint64_t{1} << 30)) break;
      if (buf.size() < req[1]) buf.resize(req[1], 'd');
      const char ack = 1;
      const bool ok = req[0] == 1   ? RecvAllTcp(fd, buf.data(), req[1]) && SendAllTcp(fd, &ack, 1)
                      : req[0] == 2 ? SendAllTcp(fd, buf.data(), req[1])
                                    : false;
      if (!ok) break;
    }
    close(fd);
  }
}

class BareTcpClient {
 public:
  explicit BareTcpClient(const std::string& address) {
    const size_t colon = address.rfind(':');
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
    if (inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr) != 1) Die("bare tcp: bad address " + address);
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0 || connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) Die("bare tcp: cannot connect");
    const int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  ~BareTcpClient() { close(fd_); }
  void Upload(const char* src, size_t nbytes) {
    const uint64_t req[2] = {1, nbytes};
    char ack;
    if (!SendAllTcp(fd_, reinterpret_cast<const char*>(req), sizeof(req)) || !SendAllTcp(fd_, src, nbytes) ||
        !RecvAllTcp(fd_, &ack, 1)) {
      Die("bare tcp upload failed (the echo server went away)");
    }
  }
  void Download(char* dst, size_t nbytes) {
    const uint64_t req[2] = {2, nbytes};
    if (!SendAllTcp(fd_, reinterpret_cast<const char*>(req), sizeof(req)) || !RecvAllTcp(fd_, dst, nbytes)) {
      Die("bare tcp download failed (the echo server went away)");
    }
  }

 private:
  int fd_ = -1;
};

// `wire_bench --serve-echo SOCKET_PATH`: serves Echo on unix:SOCKET_PATH and
// 127.0.0.1:0, and bare TCP transfers on another 127.0.0.1 port; prints
// "echo: listening on unix:..., 127.0.0.1:PORT; tcp 127.0.0.1:PORT2" and
// runs until stdin reaches EOF (the parent exited or stopped us) or SIGTERM.
int ServeEcho(const std::string& socket_path) {
  EchoService service;
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int tcp_port = 0, unix_port = 0;
  builder.AddListeningPort("unix:" + socket_path, grpc::InsecureServerCredentials(), &unix_port);
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &tcp_port);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(static_cast<int>(2 * kBulkChunkBytes));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || tcp_port == 0 || unix_port == 0) {
    std::fprintf(stderr, "echo server: cannot listen on unix:%s and 127.0.0.1:0\n", socket_path.c_str());
    return 1;
  }
  const int bare = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(sa);
  if (bare < 0 || bind(bare, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || listen(bare, 4) != 0 ||
      getsockname(bare, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    std::fprintf(stderr, "echo server: cannot listen for bare tcp on 127.0.0.1:0\n");
    return 1;
  }
  std::thread bare_server([bare] { ServeBareTcp(bare); });
  std::printf("echo: listening on unix:%s, 127.0.0.1:%d; tcp 127.0.0.1:%d\n", socket_path.c_str(), tcp_port,
              ntohs(sa.sin_port));
  std::fflush(stdout);
  char c;
  while (read(0, &c, 1) > 0) {
  }
  shutdown(bare, SHUT_RDWR);  // ends accept
  bare_server.join();
  close(bare);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
  unlink(socket_path.c_str());
  return 0;
}

// ---------------------------------------------------------------- figure 2

// One round trip of the echo stream: a 64-byte Ping out, the same back.
class EchoClient {
 public:
  explicit EchoClient(const std::string& address) {
    channel_ = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
    stub_ = tensord::bench::Echo::NewStub(channel_);
    stream_ = stub_->PingPong(&context_);
    ping_.set_payload(std::string(64, 'x'));
  }
  ~EchoClient() {
    stream_->WritesDone();
    tensord::bench::Ping p;
    while (stream_->Read(&p)) {
    }
    stream_->Finish().IgnoreError();
  }
  void RoundTrip() {
    if (!stream_->Write(ping_) || !stream_->Read(&pong_)) Die("echo round trip failed (the echo server went away)");
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<tensord::bench::Echo::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<tensord::bench::Ping, tensord::bench::Ping>> stream_;
  tensord::bench::Ping ping_, pong_;
};

// Bulk bytes over bare gRPC, with raw byte buffers as tensord uses: the
// reference of figure 3's gRPC rows for what the wire itself allows.
class BulkClient {
 public:
  explicit BulkClient(const std::string& address)
      : channel_(Channel(address)),
        up_(Open(channel_, "/tensord.bench.Echo/Upload", &up_ctx_)),
        down_(Open(channel_, "/tensord.bench.Echo/Download", &down_ctx_)) {}
  ~BulkClient() {
    for (auto* s : {up_.get(), down_.get()}) {
      s->WritesDone();
      grpc::ByteBuffer b;
      while (s->Read(&b)) {
      }
      s->Finish().IgnoreError();
    }
  }
  // Sends `nbytes` from `src` in messages of at most kBulkChunkBytes that
  // borrow `src` (no copy), then reads their acknowledgements.
  void Upload(const char* src, size_t nbytes) {
    size_t messages = 0;
    for (size_t off = 0; off < nbytes; off += kBulkChunkBytes, ++messages) {
      grpc::Slice piece(const_cast<char*>(src + off), std::min(kBulkChunkBytes, nbytes - off), grpc::Slice::STATIC_SLICE);
      if (!up_->Write(grpc::ByteBuffer(&piece, 1))) Die("bare gRPC upload failed (the echo server went away)");
    }
    grpc::ByteBuffer ack;
    for (size_t i = 0; i < messages; ++i) {
      if (!up_->Read(&ack)) Die("bare gRPC upload failed (the echo server went away)");
    }
  }
  // Asks for `nbytes` and copies what arrives into `dst` (CopyOut).
  void Download(char* dst, size_t nbytes) {
    uint64_t n = nbytes;
    grpc::Slice ask(&n, sizeof(n));
    if (!down_->Write(grpc::ByteBuffer(&ask, 1))) Die("bare gRPC download failed (the echo server went away)");
    grpc::ByteBuffer in;
    for (size_t got = 0; got < nbytes;) {
      if (!down_->Read(&in) || in.Length() > nbytes - got) Die("bare gRPC download failed");
      got += CopyOut(in, dst + got, nbytes);
    }
  }

 private:
  using Stream = grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>;
  static std::shared_ptr<grpc::Channel> Channel(const std::string& address) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(static_cast<int>(2 * kBulkChunkBytes));
    return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  }
  static std::unique_ptr<Stream> Open(const std::shared_ptr<grpc::Channel>& channel, const char* method,
                                      grpc::ClientContext* ctx) {
    return std::unique_ptr<Stream>(grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
        channel.get(), grpc::internal::RpcMethod(method, grpc::internal::RpcMethod::BIDI_STREAMING, channel), ctx));
  }
  std::shared_ptr<grpc::Channel> channel_;
  grpc::ClientContext up_ctx_, down_ctx_;
  std::unique_ptr<Stream> up_, down_;
};

// One row: tensord's and the echo's median round trip in microseconds, plus
// the CPU microseconds per round trip of each side (client = this process,
// all threads; server = the daemon or the echo process).
// `socket_stream`: the session's messages off gRPC (the same-host stream on
// "unix", the TCP stream on "tcp"), as by default; else the gRPC stream.
Row Figure2(const std::string& transport, const std::string& daemon_addr, pid_t daemon_pid,
            const std::string& echo_addr, pid_t echo_pid, int n, bool socket_stream) {
  tc::SessionOptions options;
  options.transport.same_host_stream = socket_stream;
  options.transport.tcp_stream = socket_stream;
  std::shared_ptr<tc::Session> s = Check(tc::Session::Connect(daemon_addr, options), "connect to tensord");
  if (s->uses_same_host_stream() != (socket_stream && transport == "unix") ||
      s->uses_tcp_stream() != (socket_stream && transport == "tcp")) {
    Die("the session's stream is not the one asked for");
  }
  tc::SessionGuard use(s);
  tc::Tensor a = Check(tc::Randn({64}), "randn");
  tc::Tensor b = Check(tc::Randn({64}), "randn");
  auto tensord_round_trip = [&] {
    tc::Tensor c = Check(tc::Add(a, b), "add");
    const std::vector<tc::TensorIndex> index{int64_t{0}};
    tc::Tensor c0 = Check(tc::Index(c, index), "c[0]");
    (void)Check(c0.Item(), "item");
  };
  EchoClient echo(echo_addr);

  // Warm both paths (connections, allocators, caches), then alternate blocks.
  for (int i = 0; i < 100; ++i) {
    tensord_round_trip();
    echo.RoundTrip();
  }
  std::vector<double> ours, peer;
  double cpu[4] = {0, 0, 0, 0};  // tensord client, daemon, echo client, echo server
  double sw[4] = {0, 0, 0, 0};   // their voluntary context switches
  const int blocks = 4;
  for (int blk = 0; blk < blocks; ++blk) {
    CpuMark m0 = CpuMark::Now(daemon_pid);
    for (int i = 0; i < n / blocks; ++i) {
      const auto t0 = Clock::now();
      tensord_round_trip();
      ours.push_back(Seconds(t0, Clock::now()) * 1e6);
    }
    CpuMark m1 = CpuMark::Now(daemon_pid);
    cpu[0] += m1.client - m0.client;
    cpu[1] += m1.server - m0.server;
    sw[0] += m1.client_switches - m0.client_switches;
    sw[1] += m1.server_switches - m0.server_switches;
    m0 = CpuMark::Now(echo_pid);
    for (int i = 0; i < n / blocks; ++i) {
      const auto t0 = Clock::now();
      echo.RoundTrip();
      peer.push_back(Seconds(t0, Clock::now()) * 1e6);
    }
    m1 = CpuMark::Now(echo_pid);
    cpu[2] += m1.client - m0.client;
    cpu[3] += m1.server - m0.server;
    sw[2] += m1.client_switches - m0.client_switches;
    sw[3] += m1.server_switches - m0.server_switches;
  }
  const double per = 1e6 / static_cast<double>(ours.size());
  Check(s->Close(), "close session");
  const std::string label = transport != "unix" ? (socket_stream ? "loopback TCP, tcp stream" : "loopback TCP, gRPC stream")
                            : socket_stream    ? "unix socket, same-host stream"
                                               : "unix socket, gRPC stream";
  return Row{2,       absl::StrCat("round trip: add + item, 64 floats (", label, ")"),
             "us",    Median(ours),
             Median(peer),
             absl::StrCat("bare gRPC ", grpc::Version(), " bidi ping-pong"),
             "<= 1.3", transport,
             static_cast<int>(ours.size()),
             {{"client_cpu_us", cpu[0] * per},
              {"daemon_cpu_us", cpu[1] * per},
              {"peer_client_cpu_us", cpu[2] * per},
              {"peer_server_cpu_us", cpu[3] * per},
              {"client_switches", sw[0] / static_cast<double>(ours.size())},
              {"daemon_switches", sw[1] / static_cast<double>(ours.size())},
              {"peer_client_switches", sw[2] / static_cast<double>(ours.size())},
              {"peer_server_switches", sw[3] / static_cast<double>(ours.size())}}};
}

// ---------------------------------------------------------------- figure 3

// The median seconds of memcpy of `nbytes` between two touched buffers.
double MemcpySeconds(const char* src, char* dst, size_t nbytes, int repeats) {
  std::memcpy(dst, src, nbytes);
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = Clock::now();
    std::memcpy(dst, src, nbytes);
    Clobber(dst);
    t.push_back(Seconds(t0, Clock::now()));
  }
  return Median(t);
}

std::string SizeName(size_t nbytes) { return absl::StrCat(nbytes >> 20, " MiB"); }

// Times `repeats` uploads and downloads of `nbytes` through `peer` (a
// BulkClient or a BareTcpClient; one warm-up of each first): the same
// transfers over the bare transport of the same path, which become the
// peer of the upload and download rows. That transport, not memcpy, bounds
// what tensord can move over it, so the target is >= 0.9 of it; memcpy's
// rate stays in the rows as memcpy_gbs.
template <typename Peer>
void UseBareAsPeer(Peer& peer, const std::string& peer_name, const char* src, char* dst, size_t nbytes, int repeats,
                   std::vector<Row>* rows) {
  std::vector<double> up, down;
  for (int i = 0; i <= repeats; ++i) {
    auto t0 = Clock::now();
    peer.Upload(src, nbytes);
    if (i > 0) up.push_back(Seconds(t0, Clock::now()));
    t0 = Clock::now();
    peer.Download(dst, nbytes);
    if (i > 0) down.push_back(Seconds(t0, Clock::now()));
  }
  const double gb = static_cast<double>(nbytes) * 1e-9;
  const double bare[2] = {gb / Median(up), gb / Median(down)};
  for (int k = 0; k < 2; ++k) {
    Row& r = (*rows)[k];
    r.extra.push_back({"memcpy_gbs", r.peer});
    r.peer = bare[k];
    r.peer_name = peer_name;
    r.target = ">= 0.9";
  }
}

// Upload and download rows for one size on one transport. `src` holds
// `nbytes` of float32 data; `dst` is a touched buffer of the same size. Each
// row also gives the CPU share of the client (this process) and of the daemon
// over the timed transfers: CPU seconds / wall seconds (1.0 = one core busy).
// `shm`: the same-host shared-memory path (Unix socket only); `tcp_stream`:
// the TCP stream carries the bytes (TCP only); else the gRPC stream does. With an `echo_addr` (the gRPC rows), the rows
// also give the rate of the same transfers over bare gRPC (BulkClient, to the
// echo server there, same transport) as a reference for what the wire
// itself allows.
std::vector<Row> Figure3(const std::string& transport, const std::string& daemon_addr, pid_t daemon_pid,
                         const std::string& echo_addr, const char* src, char* dst, size_t nbytes, int repeats,
                         bool shm, bool tcp_stream) {
  tc::SessionOptions options;
  options.transport.shared_memory = shm;
  options.transport.tcp_stream = tcp_stream;
  // Without shared memory the bytes go over the gRPC stream (what the
  // issue's 0.25 target is for), also over the Unix socket; with it, the
  // session's messages take the same-host stream, as by default.
  options.transport.same_host_stream = shm;
  std::shared_ptr<tc::Session> s = Check(tc::Session::Connect(daemon_addr, options), "connect to tensord");
  if (s->uses_shared_memory() != shm) Die(absl::StrCat("the session ", shm ? "does not use" : "uses", " shared memory"));
  if (s->uses_tcp_stream() != tcp_stream) Die(absl::StrCat("the session ", tcp_stream ? "does not use" : "uses", " the tcp stream"));
  tc::SessionGuard use(s);
  const int64_t numel = static_cast<int64_t>(nbytes / 4);
  const double gb = static_cast<double>(nbytes) * 1e-9;

  // Upload: FromBlob streams the data; Synchronize waits until the daemon has
  // it. The release of the previous tensor is synchronized outside the timing.
  // The CPU shares are taken over the whole loop (releases included): reading
  // /proc for every transfer would put milliseconds of other work between
  // transfers, and a 1 MiB transfer is shorter than the CPU clock's tick.
  std::vector<double> up;
  double up_cpu[3] = {0, 0, 0};  // client, daemon, wall
  {
    tc::Tensor t = Check(tc::FromBlob(src, nbytes, {numel}, tensord::ScalarType::kFloat32), "upload");  // warm-up
    Check(s->Synchronize(), "synchronize after upload");
  }
  Check(s->Synchronize(), "synchronize after release");
  CpuMark m0 = CpuMark::Now(daemon_pid);
  auto loop0 = Clock::now();
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = Clock::now();
    tc::Tensor t = Check(tc::FromBlob(src, nbytes, {numel}, tensord::ScalarType::kFloat32), "upload");
    Check(s->Synchronize(), "synchronize after upload");
    up.push_back(Seconds(t0, Clock::now()));
    t = tc::Tensor();
    Check(s->Synchronize(), "synchronize after release");
  }
  CpuMark m1 = CpuMark::Now(daemon_pid);
  up_cpu[0] = m1.client - m0.client;
  up_cpu[1] = m1.server - m0.server;
  up_cpu[2] = Seconds(loop0, Clock::now());
  const double memcpy_gbs = gb / MemcpySeconds(src, dst, nbytes, std::max(repeats, 5));

  // Download: Fetch copies the tensor into a new HostData; freeing it is
  // outside the timing.
  tc::Tensor t = Check(tc::FromBlob(src, nbytes, {numel}, tensord::ScalarType::kFloat32), "upload");
  Check(s->Synchronize(), "synchronize after upload");
  std::vector<double> down;
  double down_cpu[3] = {0, 0, 0};
  for (int i = 0; i <= repeats; ++i) {
    if (i == 1) {  // the first is a warm-up
      m0 = CpuMark::Now(daemon_pid);
      loop0 = Clock::now();
    }
    const auto t0 = Clock::now();
    tc::HostData d = Check(t.Fetch(), "fetch");
    const double dt = Seconds(t0, Clock::now());
    if (d.byte_size() != nbytes || std::memcmp(d.byte_data(), src, 64) != 0) {
      Die(absl::StrCat("fetch of ", SizeName(nbytes), " returned ", d.byte_size(), " bytes that differ from the upload"));
    }
    if (i > 0) down.push_back(dt);
  }
  m1 = CpuMark::Now(daemon_pid);
  down_cpu[0] = m1.client - m0.client;
  down_cpu[1] = m1.server - m0.server;
  down_cpu[2] = Seconds(loop0, Clock::now());
  t = tc::Tensor();
  Check(s->Close(), "close session");

  const std::string peer_name = "memcpy (same process)";
  std::vector<Row> rows = {
      Row{3, absl::StrCat("upload ", SizeName(nbytes), " (", transport, ")"), "GB/s", gb / Median(up), memcpy_gbs,
          peer_name, ">= 0.25", transport, repeats,
          {{"client_cpu_share", up_cpu[0] / up_cpu[2]}, {"daemon_cpu_share", up_cpu[1] / up_cpu[2]}}},
      Row{3, absl::StrCat("download ", SizeName(nbytes), " (", transport, ")"), "GB/s", gb / Median(down), memcpy_gbs,
          peer_name, ">= 0.25", transport, repeats,
          {{"client_cpu_share", down_cpu[0] / down_cpu[2]}, {"daemon_cpu_share", down_cpu[1] / down_cpu[2]}}},
  };
  if (absl::StartsWith(echo_addr, "tcp ")) {
    // The TCP stream's rows: the same transfers over a bare TCP connection.
    BareTcpClient bare(echo_addr.substr(4));
    UseBareAsPeer(bare, "a bare TCP connection (same path)", src, dst, nbytes, repeats, &rows);
  } else if (!echo_addr.empty()) {
    BulkClient echo(echo_addr);
    UseBareAsPeer(echo, "bare gRPC 1.51 bidi stream (same path)", src, dst, nbytes, repeats, &rows);
  }
  return rows;
}

// ---------------------------------------------------------------- main

void Usage() {
  std::fprintf(stderr,
               "usage: wire_bench [--json FILE] [--quick] [--only 2,3] [--tensord BIN]\n"
               "  figure 2: round trip (add + item) beside a bare gRPC ping-pong; figure 3: upload/download\n"
               "  GB/s beside the bare transport of the same path (memcpy through shared memory).\n"
               "  The daemon binary: --tensord, else $TENSORD_BIN, else tensord beside this binary.\n");
}

}  // namespace

int main(int argc, char** argv) {
  // As in the daemon and the Python module: Debian's abseil is built without
  // NDEBUG, so every Mutex acquisition (ours and gRPC's) would also record
  // lock order in a global graph. Both peers of figure 2 run in this process
  // (and the echo server is this binary too), so both go without it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::string json_path, daemon_bin;
  bool quick = false;
  std::set<int> only = {2, 3};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        Usage();
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--serve-echo") {
      return ServeEcho(next());
    } else if (a == "--json") {
      json_path = next();
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--tensord") {
      daemon_bin = next();
    } else if (a == "--only") {
      std::optional<std::set<int>> figures = ParseFigures(next(), {2, 3});
      if (!figures.has_value()) return 2;
      only = *std::move(figures);
    } else if (a == "-h" || a == "--help") {
      Usage();
      return 0;
    } else {
      Usage();
      return 2;
    }
  }
  daemon_bin = DaemonBinary(daemon_bin);

  char tmpl[] = "/tmp/tensord-wire-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) Die("mkdtemp failed");
  const std::string dir = tmpl;
  std::vector<Row> rows;
  {
    Child daemon({daemon_bin, "serve", "--listen", "unix:" + dir + "/tensord.sock", "--listen", "127.0.0.1:0"},
                 dir + "/tensord.log");
    const std::string listening = daemon.WaitForLine("tensord: listening on ", 30000);
    if (listening.empty()) Die(absl::StrCat("tensord did not start; see ", dir, "/tensord.log"));
    const auto [d_unix, d_tcp] = SplitAddresses(listening);
    if (d_unix.empty() || d_tcp.empty()) Die(absl::StrCat("unexpected listening line: ", listening));

    // The bare gRPC echo: figure 2's peer and figure 3's reference.
    Child echo({SelfDir() + "/wire_bench", "--serve-echo", dir + "/echo.sock"}, dir + "/echo.log");
    const std::string echo_line = echo.WaitForLine("echo: listening on ", 30000);
    if (echo_line.empty()) Die(absl::StrCat("the echo server did not start; see ", dir, "/echo.log"));
    const auto [e_unix, e_tcp] = SplitAddresses(echo_line);
    const size_t bare_at = echo_line.find("; tcp ");
    if (bare_at == std::string::npos) Die(absl::StrCat("unexpected echo line: ", echo_line));
    const std::string e_bare = absl::StrCat("tcp ", absl::StripAsciiWhitespace(echo_line.substr(bare_at + 6)));
    if (only.count(2)) {
      const int n = quick ? 200 : 2000;
      rows.push_back(Figure2("unix", d_unix, daemon.pid(), e_unix, echo.pid(), n, true));
      rows.push_back(Figure2("unix", d_unix, daemon.pid(), e_unix, echo.pid(), n, false));
      rows.push_back(Figure2("tcp", d_tcp, daemon.pid(), e_tcp, echo.pid(), n, true));
      rows.push_back(Figure2("tcp", d_tcp, daemon.pid(), e_tcp, echo.pid(), n, false));
    }
    if (only.count(3)) {
      std::vector<std::pair<size_t, int>> cases = {{size_t{1} << 20, quick ? 5 : 30}, {size_t{64} << 20, quick ? 3 : 7}};
      if (!quick) cases.push_back({size_t{256} << 20, 5});
      const size_t max_bytes = cases.back().first;
      std::vector<float> src(max_bytes / 4);
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i % 1000) * 0.001f;
      std::vector<char> dst(max_bytes, 1);
      for (const auto& [nbytes, repeats] : cases) {
        struct Path {
          std::string transport, addr, echo_addr;
          bool shm, tcp_stream;
        };
        for (const Path& p : {Path{"unix", d_unix, e_unix, false, false}, Path{"tcp", d_tcp, e_tcp, false, false},
                              Path{"tcp stream", d_tcp, e_bare, false, true}, Path{"unix, shm", d_unix, "", true, false}}) {
          for (Row& r : Figure3(p.transport, p.addr, daemon.pid(), p.echo_addr, reinterpret_cast<const char*>(src.data()),
                                dst.data(), nbytes, repeats, p.shm, p.tcp_stream)) {
            if (p.shm) r.target = ">= 0.8";
            rows.push_back(std::move(r));
          }
        }
      }
    }
    tc::ShutdownAll();
  }
  for (const char* f : {"/tensord.log", "/echo.log", "/echo.sock", "/tensord.sock"}) unlink((dir + f).c_str());
  rmdir(dir.c_str());

  PrintTable(rows);
  if (!json_path.empty()) WriteJson(json_path, rows);
  return 0;
}
