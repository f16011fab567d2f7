// The tensord.v1.Tensord service: handshake, sessions, streams.
#include "tensord/server/service.h"

#include <fcntl.h>
#include <malloc.h>
#include <google/protobuf/arena.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "tensord/artifact/builder.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/op_table.h"
#include "tensord/backends/test_device/test_device_backend.h"
#if defined(TENSORD_HAVE_CUDA)
#include "tensord/backends/cuda/cuda_backend.h"
#include "tensord/backends/cuda/discovery.h"
#endif
#include "tensord/runtime/log.h"
#include "tensord/transport/shm.h"
#include "tensord/transport/socket_stream.h"
#include "tensord/wire/data_frame.h"
#include "tensord/wire/wire.h"

#ifndef TENSORD_VERSION
#define TENSORD_VERSION "0.1.0"
#endif

namespace tensord::server {

using runtime::ArtifactPolicy;
using runtime::ArtifactStore;
using runtime::Log;
using runtime::LogLevel;
namespace {

constexpr size_t kTokenBytes = 16;
constexpr size_t kMaxClientNameBytes = 200;
constexpr size_t kMaxOpTableLineBytes = 1000;
// A handshake's op table beyond these is not compared (the daemon's own
// table has a few hundred lines of about 100 bytes).
constexpr size_t kMaxOpTableLines = 16384;
constexpr size_t kMaxOpTableBytes = size_t{4} << 20;

size_t OpTableBytes(const v1::HandshakeRequest& request) {
  size_t n = 0;
  for (const std::string& line : request.op_table()) n += line.size();
  return n;
}

// Fills `buf` from the kernel's CSPRNG.
bool SecureRandom(void* buf, size_t n) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t got = ::getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      break;
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
  if (n == 0) return true;
  // Fallback for kernels without getrandom(2).
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  while (n > 0) {
    const ssize_t got = ::read(fd, p, n);
    if (got <= 0) {
      if (got < 0 && errno == EINTR) continue;
      ::close(fd);
      return false;
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
  ::close(fd);
  return true;
}

// Compares secrets in time independent of where they differ.
bool TokenEquals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// A client-chosen name, safe to print in a log line.
std::string Printable(absl::string_view s, size_t max_bytes) {
  std::string out;
  for (char c : s.substr(0, max_bytes)) out.push_back(absl::ascii_isprint(static_cast<unsigned char>(c)) ? c : '?');
  if (s.size() > max_bytes) out += "...";
  return out;
}

// Why every stream and request ends once BeginShutdown began, or once a
// device failed (runtime::ReportDeviceFailure): then the daemon is about to
// exit for its supervisor to restart it, and every session hears which
// device failed and why.
absl::Status ShuttingDown() {
  if (runtime::DeviceFailed()) {
    const absl::Status failure = runtime::DeviceFailure();
    return absl::UnavailableError(
        absl::StrCat(failure.ok() ? "a device failed" : failure.message(), "; the daemon is restarting"));
  }
  return absl::UnavailableError("the daemon is shutting down");
}

std::string HexId(uint64_t id) { return absl::StrCat(absl::Hex(id, absl::kZeroPad16)); }

// One answer for an unknown session id and for a wrong token, everywhere a
// caller names a session (CloseSession, attach on every transport, the
// side channel's hello): a caller without the token must not learn whether
// an id exists. NotFound, which also fits a session that has just been
// closed or reaped.
absl::Status NoSuchSession(absl::string_view what) {
  return absl::NotFoundError(absl::StrCat(what, ": no session with this id and token"));
}

grpc::Status ToGrpcStatus(const absl::Status& st) {
  return grpc::Status(static_cast<grpc::StatusCode>(st.code()), std::string(st.message()));
}

}  // namespace

absl::string_view DaemonVersion() { return TENSORD_VERSION; }

namespace {

// What the CUDA runtime found, in plain types: a build without CUDA has no
// CUDA types to keep it in.
struct CudaFound {
  std::vector<std::string> gpus;  // "cuda:0 NVIDIA H100 (compute capability 9.0, 79.1 GiB)"
  std::string driver_version;     // empty without a driver
  std::string runtime_version;    // empty without CUDA in the build
  std::string why_none;           // empty when `gpus` is not
  std::string architectures;      // what the build has code for: "80-real,90-real,90-virtual"
};

CudaFound FindCuda() {
  CudaFound f;
#if defined(TENSORD_HAVE_CUDA)
  const backends::CudaDiscovery d = backends::DiscoverCudaDevices();
  if (d.driver_version > 0) f.driver_version = backends::CudaVersionString(d.driver_version);
  if (d.runtime_version > 0) f.runtime_version = backends::CudaVersionString(d.runtime_version);
  for (const backends::CudaDeviceInfo& g : d.devices) {
    f.gpus.push_back(absl::StrCat("cuda:", g.index, " ", g.name, " (compute capability ", g.major, ".", g.minor, ", ",
                                  FormatBytes(g.total_memory_bytes), ")"));
  }
  f.why_none = d.why_none;
  f.architectures = std::string(backends::BuiltCudaArchitectures());
#else
  f.why_none = "this daemon was built without CUDA (the CUDA toolkit was not found when it was built)";
#endif
  return f;
}

// The devices a daemon serves: the CPU first (`*cpu` is set to it), then the
// test device when asked for, then each GPU the machine has. A GPU whose
// backend cannot be made (a compute capability this build has no code for)
// is logged and skipped. Making a GPU's backend does not touch the GPU: its
// context waits for the first session that uses it.
absl::StatusOr<Backends> CreateBackends(const ServiceOptions& options, backends::CpuBackend** cpu) {
  absl::StatusOr<std::unique_ptr<backends::CpuBackend>> c = backends::CpuBackend::Create(options.cpu_allocator);
  if (!c.ok()) return c.status();
  *cpu = c->get();
  Backends devices;
  devices.Add(*std::move(c));
  if (options.test_device) {
    absl::StatusOr<std::unique_ptr<backends::TestDeviceBackend>> test =
        backends::TestDeviceBackend::Create({}, backends::TestDeviceFault{options.test_device_fault_at_launch});
    if (!test.ok()) return test.status();
    devices.Add(*std::move(test));
  }
#if defined(TENSORD_HAVE_CUDA)
  for (const backends::CudaDeviceInfo& g : backends::DiscoverCudaDevices().devices) {
    absl::StatusOr<std::unique_ptr<backends::CudaBackend>> b = backends::CudaBackend::Create(g);
    if (!b.ok()) {
      Log(LogLevel::kWarning, "cuda:", g.index, " is not served: ", b.status().message());
      continue;
    }
    devices.Add(*std::move(b));
  }
#endif
  return devices;
}

}  // namespace

CudaReport DescribeCuda(const Backends& served, bool log) {
  const CudaFound found = FindCuda();
  CudaReport r;
  r.driver_version = found.driver_version;
  r.runtime_version = found.runtime_version;
  size_t cuda_served = 0;
  for (size_t i = 0; i < served.size(); ++i) cuda_served += served[i].device().is_cuda() ? 1 : 0;
  if (cuda_served == 0) {
    // A machine's GPUs that the daemon does not serve: it has no CUDA backend
    // to serve them with yet.
    r.unavailable_reason =
        found.gpus.empty()
            ? found.why_none
            : absl::StrCat("this daemon serves none of the machine's ", found.gpus.size(),
                           found.gpus.size() == 1 ? " CUDA device (" : " CUDA devices (", absl::StrJoin(found.gpus, "; "),
                           "): this build has no code for their compute capability (see the daemon's log)");
  }
  if (log) {
    if (found.gpus.empty()) {
      Log(LogLevel::kInfo, "no CUDA device: ", found.why_none);
    } else {
      Log(LogLevel::kInfo, "CUDA devices: ", absl::StrJoin(found.gpus, "; "), "; driver ", found.driver_version,
          ", runtime ", found.runtime_version, "; code for ", found.architectures,
          cuda_served == 0 ? "; none served" : "");
    }
  }
  return r;
}

void FillDeviceReport(const Backends& served, const CudaReport& cuda, v1::OpenSessionResponse* out) {
  for (size_t i = 0; i < served.size(); ++i) {
    const Backend& b = served[i];
    v1::DeviceInfo* d = out->add_devices();
    d->set_name(b.device().ToString());
    d->set_type(static_cast<int32_t>(b.device().type));
    d->set_index(b.device().index);
    d->set_total_memory_bytes(static_cast<uint64_t>(std::max<int64_t>(b.total_memory_bytes(), 0)));
    d->set_free_memory_bytes(static_cast<uint64_t>(std::max<int64_t>(b.free_memory_bytes(), 0)));
    const std::pair<int, int> capability = b.capability();
    d->set_capability_major(capability.first);
    d->set_capability_minor(capability.second);
    d->set_description(b.description());
  }
  out->set_cuda_driver_version(cuda.driver_version);
  out->set_cuda_runtime_version(cuda.runtime_version);
  out->set_cuda_unavailable_reason(cuda.unavailable_reason);
}

absl::Status DescribeLocalDevices(const ServiceOptions& options, v1::OpenSessionResponse* out) {
  backends::CpuBackend* cpu = nullptr;
  absl::StatusOr<Backends> devices = CreateBackends(options, &cpu);
  if (!devices.ok()) return devices.status();
  FillDeviceReport(*devices, DescribeCuda(*devices, /*log=*/false), out);
  return absl::OkStatus();
}

int64_t TensordService::bytes_in_use() const {
  int64_t total = 0;
  for (size_t i = 0; i < backends_.size(); ++i) total += backends_[i].allocator()->bytes_in_use();
  return total;
}

absl::StatusOr<std::unique_ptr<TensordService>> TensordService::Create(const ServiceOptions& options) {
  backends::CpuBackend* cpu = nullptr;
  absl::StatusOr<Backends> devices = CreateBackends(options, &cpu);
  if (!devices.ok()) return devices.status();
  CudaReport cuda = DescribeCuda(*devices, /*log=*/true);
  std::unique_ptr<TensordService> service(
      new TensordService(options, *std::move(devices), cpu, std::move(cuda)));
  // Sessions that never attach are closed on a timer, not only when a later
  // one opens: otherwise they would hold their slot (and their peer's) for
  // as long as nobody else came.
  try {
    service->reaper_ = std::thread([s = service.get()] { s->ReapLoop(); });
    service->closer_ = std::thread([s = service.get()] { s->CloseLoop(); });
  } catch (const std::system_error& e) {
    return InternalErr(absl::StrCat("cannot start the threads that close sessions: ", e.what()));
  }
  return service;
}

TensordService::TensordService(const ServiceOptions& options, Backends backends, backends::CpuBackend* cpu,
                               CudaReport cuda)
    : options_(options), backends_(std::move(backends)), cpu_(cpu), cuda_(std::move(cuda)) {
  std::vector<std::pair<int, int>> capabilities;
  for (size_t i = 0; i < backends_.size(); ++i) {
    if (backends_[i].device().is_cuda()) capabilities.push_back(backends_[i].capability());
  }
  ArtifactPolicy policy = options_.artifacts;
  if (policy.isolation == ArtifactPolicy::Isolation::kProcess && policy.worker_binary.empty()) {
    // The workers run this very binary, the daemon's own file even after a
    // package upgrade replaced the path (then /proc/self/exe still names
    // the running image): a worker always speaks its daemon's protocol.
    // It names itself in ps (argv[0] and the thread name).
    policy.worker_binary = "/proc/self/exe";
  }
  if (policy.isolation == ArtifactPolicy::Isolation::kProcess) {
    Log(LogLevel::kInfo, "artifacts' CPU kernels run in a worker process per session (--artifact-isolation ",
        ArtifactPolicy::IsolationName(policy.isolation), "), each call for at most ",
        absl::FormatDuration(policy.call_timeout));
  }
  artifacts_ = std::make_unique<ArtifactStore>(std::move(policy), std::move(capabilities));
  // Stream writes byte buffers: install it as the handler of the Stream
  // method, as the generated code's WithStreamedUnaryMethod_ classes install
  // theirs (the method's index is its position in the service).
  const int stream_index = v1::ClientMessage::descriptor()
                               ->file()
                               ->FindServiceByName("Tensord")
                               ->FindMethodByName("Stream")
                               ->index();
  MarkMethodStreamed(stream_index,
                     new grpc::internal::BidiStreamingHandler<TensordService, grpc::ByteBuffer, grpc::ByteBuffer>(
                         [](TensordService* service, grpc::ServerContext* context,
                            grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
                           return service->Stream(context, stream);
                         },
                         this));
  // The unary calls take bytes too, so that a request is measured before
  // protobuf parses it (gRPC's own limit is the stream's 64 MiB, which small
  // submessages or empty strings can make gigabytes once parsed). Handshake
  // may come from anyone and carries an op table of up to kMaxOpTableBytes;
  // the others carry an id, a token and a name.
  BoundUnary(&TensordService::Handshake, "Handshake", kMaxOpTableBytes + (256 << 10), 8 << 20);
  BoundUnary(&TensordService::OpenSession, "OpenSession", 64 << 10, 1 << 20);
  BoundUnary(&TensordService::CloseSession, "CloseSession", 64 << 10, 1 << 20);
}

template <typename Request, typename Response>
void TensordService::BoundUnary(grpc::Status (TensordService::*method)(grpc::ServerContext*, const Request*,
                                                                        Response*),
                                const char* name, size_t max_bytes, int64_t max_extra_bytes) {
  const int index =
      v1::ClientMessage::descriptor()->file()->FindServiceByName("Tensord")->FindMethodByName(name)->index();
  // Served as a "streamed unary" call (one message each way): the same
  // bytes on the wire as a unary one, with the request as gRPC received it.
  MarkMethodStreamed(
      index, new grpc::internal::StreamedUnaryHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
                 [this, method, name, max_bytes, max_extra_bytes](
                     grpc::ServerContext* context,
                     grpc::ServerUnaryStreamer<grpc::ByteBuffer, grpc::ByteBuffer>* streamer) {
                   grpc::ByteBuffer in;
                   if (!streamer->Read(&in)) {
                     return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, absl::StrCat(name, ": no request came"));
                   }
                   // Measured only when small enough to read; -1: not measured, or unparsable.
                   std::optional<int64_t> extra;
                   if (in.Length() <= max_bytes) extra = wire::DecodedExtraBytes(in, Request::descriptor());
                   const int64_t extra_bytes = extra.value_or(-1);
                   if (in.Length() > max_bytes || extra_bytes > max_extra_bytes) {
                     return grpc::Status(
                         grpc::StatusCode::RESOURCE_EXHAUSTED,
                         absl::StrCat(name, ": a request of ", in.Length(), " bytes",
                                      extra_bytes >= 0 ? absl::StrCat(" (", extra_bytes, " more once parsed)") : "",
                                      " is more than the daemon reads for it (", max_bytes, " bytes, ",
                                      max_extra_bytes, " more once parsed)"));
                   }
                   Request request;
                   if (!extra.has_value() ||
                       !grpc::SerializationTraits<Request>::Deserialize(&in, &request).ok()) {
                     return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                         absl::StrCat(name, ": the request did not parse"));
                   }
                   Response response;
                   const grpc::Status status = (this->*method)(context, &request, &response);
                   if (!status.ok()) return status;
                   grpc::ByteBuffer out;
                   bool own = false;
                   if (!grpc::SerializationTraits<Response>::Serialize(response, &out, &own).ok()) {
                     return grpc::Status(grpc::StatusCode::INTERNAL, absl::StrCat(name, ": cannot encode the reply"));
                   }
                   streamer->Write(out);
                   return grpc::Status::OK;
                 }));
}

TensordService::~TensordService() {
  {
    absl::MutexLock l(&build_mu_);
    std::error_code ec;
    if (!build_cache_dir_.empty()) std::filesystem::remove_all(build_cache_dir_, ec);
  }
  BeginShutdown();  // also ends ReapLoop
  if (reaper_.joinable()) reaper_.join();
  {
    absl::MutexLock lock(&mu_);
    closer_stop_ = true;
  }
  // After the sessions it was handed are closed (BeginShutdown above hands
  // over the busy ones; nothing calls Remove once the servers stopped).
  if (closer_.joinable()) closer_.join();
}

void TensordService::ReapLoop() {
  const absl::Duration period =
      std::clamp(options_.attach_timeout / 4, absl::Milliseconds(10), absl::Seconds(5));
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&shutting_down_), period)) return;
    }
    ReapUnattached();
  }
}

bool TensordService::StillOpen(int fd, const Connection& c) {
  struct stat st;
  return ::fstat(fd, &st) == 0 && st.st_dev == c.dev && st.st_ino == c.inode;
}

bool TensordService::AdmitConnection(int fd, std::string peer) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return false;
  absl::MutexLock lock(&peers_mu_);
  // The entry of a connection gRPC closed stays until its number is reused
  // (a late call of that connection still finds its peer); only the open
  // ones count.
  fd_peers_.erase(fd);
  if (options_.max_connections_per_peer > 0) {
    size_t open = 0;
    for (const auto& [other, c] : fd_peers_) {
      if (c.peer == peer && StillOpen(other, c)) ++open;
    }
    if (open >= options_.max_connections_per_peer) {
      if (refused_connections_++ % 1000 == 0) {
        Log(LogLevel::kWarning, "refused a gRPC connection from ", Printable(peer, kMaxClientNameBytes), ": it has ",
            open, " open already, the daemon's limit per peer (", options_.max_connections_per_peer,
            ", twice --max-sessions-per-peer) (", refused_connections_, " refused so far)");
      }
      return false;
    }
  }
  fd_peers_[fd] = Connection{std::move(peer), st.st_dev, st.st_ino};
  return true;
}

std::string TensordService::PeerOf(const grpc::ServerContext& context) const {
  const std::string peer = context.peer();
  absl::string_view p = peer;
  int fd = -1;
  if (absl::ConsumePrefix(&p, "fd:") && absl::SimpleAtoi(p, &fd)) {
    absl::MutexLock lock(&peers_mu_);
    auto it = fd_peers_.find(fd);
    if (it != fd_peers_.end()) return it->second.peer;
    return peer;
  }
  // "ipv4:127.0.0.1:53412", "ipv6:%5B::1%5D:53412": the address without
  // the port (a client gets a new port for every connection).
  if (absl::StartsWith(peer, "ipv4:") || absl::StartsWith(peer, "ipv6:")) {
    const size_t colon = peer.rfind(':');
    if (colon > 5) return peer.substr(0, colon);
  }
  return peer;
}

grpc::Status TensordService::Handshake(grpc::ServerContext* context, const v1::HandshakeRequest* request,
                                       v1::HandshakeResponse* response) {
  const OpTable& table = OpTable::Get();
  // Unauthenticated: the protocol version and the op table's digest (and,
  // when they differ, what differs), nothing about the machine or the
  // daemon's release. OpenSession tells a session holder the rest.
  response->set_protocol_version(wire::kProtocolVersion);
  response->set_op_table_digest(table.digest());

  if (request->protocol_version() != wire::kProtocolVersion) {
    response->set_accepted(false);
    response->set_refusal(absl::StrCat("protocol version ", request->protocol_version(),
                                       " is not supported: this daemon speaks version ", wire::kProtocolVersion));
  } else if (request->op_table_digest() != table.digest() &&
             (static_cast<size_t>(request->op_table_size()) > kMaxOpTableLines ||
              OpTableBytes(*request) > kMaxOpTableBytes)) {
    // Anyone may call Handshake: an oversized table is refused by its
    // numbers, before any of it is copied for the comparison.
    response->set_accepted(false);
    response->set_refusal(absl::StrCat(
        "client and daemon were built from different op tables (client ", HexId(request->op_table_digest()),
        ", daemon ", HexId(table.digest()), "); the client's table (", request->op_table_size(), " lines, ",
        OpTableBytes(*request), " bytes) is too large to compare (at most ", kMaxOpTableLines, " lines and ",
        kMaxOpTableBytes, " bytes). Rebuild them from the same source."));
  } else if (request->op_table_digest() != table.digest()) {
    std::vector<std::string> theirs;
    theirs.reserve(request->op_table_size());
    for (const std::string& line : request->op_table()) theirs.push_back(Printable(line, kMaxOpTableLineBytes));
    std::string diff;
    if (theirs.empty()) {
      diff = absl::StrCat("op table digests differ (client ", HexId(request->op_table_digest()), ", daemon ",
                          HexId(table.digest()), ") and the client sent no table to compare");
    } else {
      diff = DiffOpTables(table.Describe(), theirs, "daemon", "client");
      if (diff.empty()) {
        diff = absl::StrCat("the tables sent are equal but the digests differ (client ",
                            HexId(request->op_table_digest()), ", daemon ", HexId(table.digest()), ")");
      }
    }
    response->set_accepted(false);
    response->set_refusal(absl::StrCat("client and daemon were built from different op tables: ", diff,
                                       ". Rebuild them from the same source."));
  } else {
    response->set_accepted(true);
  }
  if (!response->accepted()) {
    Log(LogLevel::kWarning, "handshake from ", context->peer(), " refused: ", response->refusal());
  }
  return grpc::Status::OK;
}

grpc::Status TensordService::OpenSession(grpc::ServerContext* context, const v1::OpenSessionRequest* request,
                                         v1::OpenSessionResponse* response) {
  const OpTable& table = OpTable::Get();
  if (request->op_table_digest() != table.digest()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("op table digest ", HexId(request->op_table_digest()),
                                     " does not match the daemon's ", HexId(table.digest()),
                                     "; Handshake says what differs"));
  }
  ReapUnattached();
  std::string token(kTokenBytes, '\0');
  if (!SecureRandom(token.data(), token.size())) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "no source of secure random numbers for the session token");
  }
  const std::string name = Printable(request->client_name(), kMaxClientNameBytes);
  const std::string peer = PeerOf(*context);
  uint64_t id = 0;
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_ || runtime::DeviceFailed()) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string(ShuttingDown().message()));
    }
    // Per peer first: one peer must not be able to fill the table for
    // everyone (it is then told its own limit, not the daemon's).
    size_t& mine = sessions_per_peer_[peer];
    if (options_.max_sessions_per_peer > 0 && mine >= options_.max_sessions_per_peer) {
      const size_t have = mine;
      if (mine == 0) sessions_per_peer_.erase(peer);
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          absl::StrCat("open session: ", Printable(peer, kMaxClientNameBytes), " already has ", have,
                                       " open sessions, the daemon's limit per peer (",
                                       options_.max_sessions_per_peer,
                                       ", tensord serve --max-sessions-per-peer); close some first"));
    }
    if (sessions_.size() + closing_ >= options_.max_sessions) {
      if (mine == 0) sessions_per_peer_.erase(peer);
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          absl::StrCat("open session: the daemon already has ", sessions_.size() + closing_,
                                       " open sessions (its limit; ", closing_,
                                       " of them closing once their running request ends)"));
    }
    do {
      if (!SecureRandom(&id, sizeof(id))) {
        if (mine == 0) sessions_per_peer_.erase(peer);
        return grpc::Status(grpc::StatusCode::INTERNAL, "no source of secure random numbers for the session id");
      }
    } while (id == 0 || sessions_.contains(id));
    std::shared_ptr<MemoryAccount> account = MemoryAccount::Create(options_.session_memory_limit_bytes);
    if (options_.cuda_session_memory_limit_bytes > 0) {
      for (size_t i = 0; i < backends_.size(); ++i) {
        const Device d = backends_[i].device();
        if (d.type != DeviceType::kCUDA || !MemoryAccount::HasDeviceSlot(d)) continue;
        absl::Status capped = account->SetDeviceLimit(d, options_.cuda_session_memory_limit_bytes);
        if (!capped.ok()) {  // a device with a slot and a positive limit: cannot fail
          if (mine == 0) sessions_per_peer_.erase(peer);
          return ToGrpcStatus(InternalErr(absl::StrCat("open session: ", capped.message())));
        }
      }
    }
    Entry e;
    e.session = std::make_shared<Session>(id, token, name, std::move(account), &backends_, artifacts_.get());
    e.opened = absl::Now();
    e.peer = peer;
    sessions_.emplace(id, std::move(e));
    ++mine;
  }
  response->set_session_id(id);
  response->set_token(token);
  response->set_server_version(std::string(DaemonVersion()));
  response->set_session_memory_limit_bytes(static_cast<uint64_t>(options_.session_memory_limit_bytes));
  FillDeviceReport(backends_, cuda_, response);
  Log(LogLevel::kInfo, "session ", HexId(id), " opened for client '", name, "' (", peer, ")");
  return grpc::Status::OK;
}

// ------------------------------------------------------------ kernel artifacts

grpc::Status TensordService::FindArtifact(grpc::ServerContext* /*context*/, const v1::FindArtifactRequest* request,
                                          v1::FindArtifactResponse* response) {
  if (!FindSession(request->session_id(), request->token()).ok()) {
    return ToGrpcStatus(NoSuchSession("find artifact"));
  }
  response->set_present(artifacts_->Has(request->content_hash()));
  return grpc::Status::OK;
}

grpc::Status TensordService::UploadArtifact(grpc::ServerContext* context, grpc::ServerReader<v1::ArtifactChunk>* reader,
                                            v1::UploadArtifactResponse* response) {
  v1::ArtifactChunk chunk;
  if (!reader->Read(&chunk)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "upload artifact: no chunk came");
  }
  absl::StatusOr<std::shared_ptr<Session>> session = FindSession(chunk.session_id(), chunk.token());
  if (!session.ok()) return ToGrpcStatus(NoSuchSession("upload artifact"));
  const ArtifactPolicy& policy = artifacts_->policy();
  if (policy.mode == ArtifactPolicy::Mode::kOff) {
    // Refused before a byte more is read: the policy needs none of them.
    return ToGrpcStatus(artifacts_->Add("", "").status());
  }
  const uint64_t total = chunk.total_bytes();
  if (total > policy.max_bytes) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat("upload artifact: the artifact holds ", total, " bytes, over this daemon's limit "
                                     "of ", policy.max_bytes, " bytes per artifact"));
  }
  std::string file;
  file.reserve(total);
  do {
    if (chunk.data().size() > total - file.size()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("upload artifact: more than the announced ", total, " bytes came"));
    }
    file += chunk.data();
  } while (reader->Read(&chunk));
  if (file.size() != total) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("upload artifact: ", file.size(), " of the announced ", total, " bytes came"));
  }
  absl::StatusOr<std::string> hash = artifacts_->Add(file, PeerOf(*context));
  if (!hash.ok()) {
    Log(LogLevel::kInfo, "refused an artifact from session ", HexId((*session)->id()), ": ", hash.status().message());
    return ToGrpcStatus(hash.status());
  }
  response->set_content_hash(*hash);
  return grpc::Status::OK;
}

grpc::Status TensordService::BuildArtifact(grpc::ServerContext* context, const v1::BuildArtifactRequest* request,
                                           v1::BuildArtifactResponse* response) {
  // Limits of one build: its sources' text, and its time.
  constexpr size_t kMaxSourceBytes = 16 << 20;
  constexpr absl::Duration kBuildTimeout = absl::Minutes(5);
  absl::StatusOr<std::shared_ptr<Session>> session = FindSession(request->session_id(), request->token());
  if (!session.ok()) return ToGrpcStatus(NoSuchSession("build artifact"));
  const ArtifactPolicy& policy = artifacts_->policy();
  if (policy.mode != ArtifactPolicy::Mode::kAny) {
    return ToGrpcStatus(absl::PermissionDeniedError(absl::StrCat(
        "building on the daemon runs the sources' code in it as an uploaded artifact does, and this daemon runs "
        "--artifacts ", ArtifactPolicy::ModeName(policy.mode),
        ": only --artifacts any builds for clients (build the artifact yourself and have its hash allowed)")));
  }
  BuildOptions options;
  options.name = request->name();
  std::vector<SourceText> files;
  size_t bytes = 0;
  for (const v1::SourceFile& f : request->sources()) {
    bytes += f.text().size();
    files.push_back({f.name(), f.text()});
  }
  if (bytes > kMaxSourceBytes) {
    return ToGrpcStatus(absl::ResourceExhaustedError(absl::StrCat(
        "build artifact: ", bytes, " bytes of sources, over the limit of ", kMaxSourceBytes)));
  }
  options.cuda_archs.assign(request->cuda_archs().begin(), request->cuda_archs().end());
  options.extra_cflags.assign(request->extra_cflags().begin(), request->extra_cflags().end());
  options.extra_cuda_cflags.assign(request->extra_cuda_cflags().begin(), request->extra_cuda_cflags().end());
  options.extra_ldflags.assign(request->extra_ldflags().begin(), request->extra_ldflags().end());
  // The daemon's own binary does the build, in a process of its own.
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) return ToGrpcStatus(InternalErr("build artifact: cannot find the daemon's own binary"));
  absl::StatusOr<std::string> file;
  {
    absl::MutexLock l(&build_mu_);
    if (build_cache_dir_.empty()) {
      const char* tmp = std::getenv("TMPDIR");
      std::string tmpl = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/tensord-builds-XXXXXX");
      if (mkdtemp(tmpl.data()) == nullptr) {
        return ToGrpcStatus(InternalErr(absl::StrCat("build artifact: cannot make ", tmpl, ": ", std::strerror(errno))));
      }
      build_cache_dir_ = tmpl;
    }
    options.cache_dir = build_cache_dir_;
    file = BuildArtifactInChild(self, options, files, kBuildTimeout);
  }
  if (!file.ok()) return ToGrpcStatus(file.status());
  absl::StatusOr<std::string> hash = artifacts_->Add(*file, PeerOf(*context));
  if (!hash.ok()) return ToGrpcStatus(hash.status());
  Log(LogLevel::kInfo, "built artifact ", request->name(), " (sha256 ", hash->substr(0, 12), ") for session ",
      HexId((*session)->id()));
  response->set_content_hash(*hash);
  response->set_artifact(*std::move(file));
  return grpc::Status::OK;
}

grpc::Status TensordService::CloseSession(grpc::ServerContext* context, const v1::CloseSessionRequest* request,
                                          v1::CloseSessionResponse* response) {
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(request->session_id());
    if (it == sessions_.end() || !TokenEquals(request->token(), it->second.session->token())) {
      return ToGrpcStatus(NoSuchSession("close session"));
    }
  }
  std::optional<SessionStats> stats = Remove(request->session_id(), "closed by the client");
  if (!stats) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("session ", HexId(request->session_id()), " was already closed"));
  }
  response->set_peak_bytes(static_cast<uint64_t>(stats->peak_bytes));
  response->set_ops_executed(stats->ops_executed);
  return grpc::Status::OK;
}

namespace {

constexpr char kUnparsable[] = "a message on the session stream is not a valid tensord.v1.ClientMessage";
// The longest message the same-host stream takes (gRPC's limit is the
// daemon's kMaxMessageBytes; this allows for a message's framing around a
// chunk of that size).
constexpr size_t kMaxStreamMessageBytes = (size_t{64} << 20) + (size_t{64} << 10);
// Stream messages from this size on are measured before they are parsed
// (RunStream); a smaller one takes at most a few MiB once parsed.
constexpr size_t kMeasuredMessageBytes = size_t{64} << 10;
// What parsing a stream message may take beyond its bytes without being
// charged to the session (RunStream).
constexpr int64_t kDecodeGraceBytes = int64_t{64} << 20;
// The first message of a gRPC Stream call, parsed before it names a session.
constexpr size_t kMaxAttachMessageBytes = 4 << 10;

// A session's writers over one stream's `send` (one message's bytes; false
// when the stream failed): replies serialized by protobuf, and fetched data
// sent from a slice over the storage, which the session keeps unchanged until
// the writer returns (after `send` let go of the slice).
struct StreamWriters {
  Session::Writer write;
  Session::DataWriter write_data;
};
StreamWriters WritersOver(std::function<bool(const grpc::ByteBuffer&)> send) {
  StreamWriters w;
  w.write = [send](const v1::ServerMessage& m) {
    grpc::ByteBuffer bb;
    bool own = false;
    if (!grpc::SerializationTraits<v1::ServerMessage>::Serialize(m, &bb, &own).ok()) return false;
    return send(bb);
  };
  w.write_data = [send](const v1::FetchData& head, const char* data, size_t n) {
    wire::BorrowedSlices borrowed;
    grpc::ByteBuffer bb = wire::EncodeFetchChunk(head, borrowed.Borrow(data, n));
    const bool ok = send(bb);
    bb.Clear();
    borrowed.WaitUntilReleased();
    return ok;
  };
  return w;
}

}  // namespace

absl::StatusOr<std::shared_ptr<Session>> TensordService::Attach(uint64_t id, absl::string_view token,
                                                               std::shared_ptr<GrpcStream> grpc, int sock) {
  absl::MutexLock lock(&mu_);
  if (shutting_down_ || runtime::DeviceFailed()) return ShuttingDown();
  auto it = sessions_.find(id);
  if (it == sessions_.end() || !TokenEquals(std::string(token), it->second.session->token())) {
    return NoSuchSession("attach");
  }
  if (it->second.attached) {
    return absl::FailedPreconditionError(absl::StrCat("attach: session ", HexId(id), " already has a stream attached"));
  }
  it->second.attached = true;
  it->second.grpc = std::move(grpc);
  it->second.socket = sock;
  return it->second.session;
}

TensordService::StreamEnd TensordService::RunStream(uint64_t id, const std::shared_ptr<Session>& session,
                                                    const v1::ClientMessage* first, const ReadBytes& read_bytes,
                                                    const Session::Writer& write,
                                                    const Session::DataWriter& write_data, absl::Status* refusal) {
  StreamEnd end = StreamEnd::kClient;
  bool ended = false;
  grpc::ByteBuffer in;
  size_t last_bytes = 0;  // the size of the main loop's last message
  // What decoding the message being run may take beyond its bytes
  // (wire::DecodedExtraBytes): small submessages could make a 64 MiB
  // message take gigabytes once parsed. Up to kDecodeGraceBytes of it is a
  // fixed cap per stream, like its received bytes (kMaxStreamMessageBytes),
  // so that a session at its limit can still send the releases that bring
  // it back under; beyond that it is charged to the session until the next
  // message is read, and refused over its limit before anything is parsed.
  // Messages under kMeasuredMessageBytes are not walked.
  // A message read while one runs (a backward callback's result) has its
  // own charge.
  MemoryCharge decoding_main;
  MemoryCharge decoding_nested;
  // Reads the next message into `m`; `place` (the main loop's) may put an
  // upload chunk's data straight into its storage.
  const auto read_placed = [&](v1::ClientMessage* m, bool place) {
    if (ended) return false;
    std::shared_ptr<Storage> keep;  // while the data is copied into it
    const auto place_upload = [&](const v1::Upload& head, size_t n) {
      return session->PlaceUploadData(head, n, &keep);
    };
    const PlaceUpload place_ref(place_upload);
    const int got = read_bytes(&in, place ? m : nullptr, place ? &place_ref : nullptr);
    if (got <= 0) {
      ended = true;
      end = got == 0 ? StreamEnd::kClient : got == -2 ? StreamEnd::kMalformed : StreamEnd::kLost;
      return false;
    }
    // 2: received and parsed by the reader, the data straight into the
    // storage (a large message: the arena is made anew after it).
    if (place) last_bytes = got == 2 ? std::numeric_limits<size_t>::max() : in.Length();
    MemoryCharge& decoding = place ? decoding_main : decoding_nested;
    decoding.Sub(decoding.bytes());
    if (got != 2 && in.Length() >= kMeasuredMessageBytes) {
      const std::optional<int64_t> extra = wire::DecodedExtraBytes(in, v1::ClientMessage::descriptor());
      if (!extra.has_value()) {
        ended = true;
        end = StreamEnd::kMalformed;
        return false;
      }
      absl::Status charged =
          *extra <= kDecodeGraceBytes
              ? absl::OkStatus()
              : decoding.Add(session->memory_account(), *extra - kDecodeGraceBytes,
                             absl::StrCat("decoding a stream message of ", in.Length(), " bytes (up to ",
                                          FormatBytes(*extra), " once parsed, ", FormatBytes(kDecodeGraceBytes),
                                          " of it not counted)"));
      if (!charged.ok()) {
        ended = true;
        end = StreamEnd::kOverLimit;
        *refusal = std::move(charged);
        return false;
      }
    }
    const bool parsed =
        got == 2 ? true
        : place  ? wire::ParseClientMessage(&in, m, place_ref)
                 : grpc::SerializationTraits<v1::ClientMessage>::Deserialize(&in, m).ok();
    if (!parsed) {
      ended = true;
      end = StreamEnd::kMalformed;
      return false;
    }
    if (m->has_attach()) {
      Log(LogLevel::kDebug, "session ", HexId(id), ": attach on an attached stream ignored");
    }
    return true;
  };
  // The engine reads through this while it waits for a BackwardCallback's
  // result (a message runs then: nothing is placed).
  const Session::Reader read = [&](v1::ClientMessage* m) { return read_placed(m, false); };
  // Each message is parsed onto an arena: a streamed op costs bump
  // allocations, not a malloc and a free for each of its submessages and
  // strings. The arena's first block is this stream's own, kept across
  // resets: a message that fits costs no malloc and free of the block
  // either. While messages stay small, the next one is parsed into the
  // last one's objects, cleared rather than made anew: its requests cost no
  // new objects, and the arena no reset (a large share of what a small
  // round trip spent parsing and resetting). The arena is reset, and the message
  // made anew, after a message over kReuseMaxBytes (whose strings it would
  // keep otherwise), every kReuseMessages messages, and once the first block
  // is full: the submessages of oneofs that Clear leaves on the arena, and
  // their strings, never pile up past that.
  constexpr size_t kArenaInitialBytes = 64 << 10;
  constexpr size_t kReuseMaxBytes = 4 << 10;
  constexpr int kReuseMessages = 64;
  std::unique_ptr<char[]> arena_block(new char[kArenaInitialBytes]);
  google::protobuf::ArenaOptions arena_options;
  arena_options.initial_block = arena_block.get();
  arena_options.initial_block_size = kArenaInitialBytes;
  arena_options.start_block_size = 64 << 10;
  arena_options.max_block_size = 1 << 20;
  google::protobuf::Arena arena(arena_options);
  const v1::ClientMessage* current = first;
  v1::ClientMessage* next = nullptr;
  int uses = 0;
  for (;;) {
    if (current == nullptr) {
      if (next == nullptr || last_bytes > kReuseMaxBytes || ++uses >= kReuseMessages ||
          arena.SpaceAllocated() > kArenaInitialBytes) {
        arena.Reset();
        next = google::protobuf::Arena::CreateMessage<v1::ClientMessage>(&arena);
        uses = 0;
      }
      if (!read_placed(next, true)) break;  // clears `next` first
      current = next;
    }
    // After a device failed, no session's next message runs: its stream
    // ends with the failure (ShuttingDown) while the daemon exits.
    if (runtime::DeviceFailed()) {
      end = StreamEnd::kDeviceFailed;
      break;
    }
    if (!session->ExecuteMessage(*current, write, read, write_data)) break;
    current = nullptr;
  }
  return end;
}

absl::Status TensordService::EndStream(uint64_t id, const std::shared_ptr<Session>& session, StreamEnd end,
                                       const absl::Status& refusal) {
  bool shutting_down = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(id);
    if (it != sessions_.end() && it->second.session == session) {
      it->second.grpc = nullptr;
      it->second.socket = -1;
    }
    shutting_down = shutting_down_ || end == StreamEnd::kDeviceFailed;
  }
  const char* why = end == StreamEnd::kDeviceFailed ? "a device failed"
                    : shutting_down                 ? "daemon shutting down"
                    : end == StreamEnd::kMalformed  ? "a message did not parse"
                    : end == StreamEnd::kOverLimit  ? "a message would take more memory to decode than its limit leaves"
                    : end == StreamEnd::kClient     ? "stream ended by the client"
                                                    : "stream lost";
  const bool removed = !session->closed() && Remove(id, why);
  if (shutting_down) return ShuttingDown();
  if (!removed) {
    // CloseSession or the daemon's shutdown closed the session and ended this stream.
    return absl::CancelledError(absl::StrCat("session ", HexId(id), " was closed"));
  }
  if (end == StreamEnd::kOverLimit) return refusal;
  return end == StreamEnd::kMalformed ? absl::InvalidArgumentError(kUnparsable) : absl::OkStatus();
}

grpc::Status TensordService::Stream(grpc::ServerContext* context,
                                    grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
  // This call holds one of the gRPC server's threads until the stream ends:
  // past max_grpc_streams it is refused, so that the threads left over keep
  // health checks, OpenSession and CloseSession answering.
  struct Count {
    std::atomic<size_t>& n;
    const size_t before = n.fetch_add(1, std::memory_order_relaxed);
    ~Count() { n.fetch_sub(1, std::memory_order_relaxed); }
  } count{grpc_streams_};
  if (count.before >= options_.max_grpc_streams) {
    ReapUnattached();  // frees the slots of calls that never attached, for the next caller
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat("the daemon already serves ", count.before,
                                     " Stream calls on gRPC (its limit: each holds one of its gRPC threads); the "
                                     "same-host stream (over the daemon's Unix socket) and the TCP stream (over its "
                                     "TCP port) hold none: leave TENSORD_SAME_HOST_STREAM and TENSORD_TCP_STREAM "
                                     "unset, or try again later"));
  }
  {
    absl::MutexLock lock(&mu_);
    unattached_[context] = absl::Now();
  }
  v1::ClientMessage msg;
  grpc::ByteBuffer in;
  const bool got_first = stream->Read(&in);
  {
    absl::MutexLock lock(&mu_);
    unattached_.erase(context);
  }
  if (!got_first) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "the stream ended before attaching to a session");
  }
  // Not yet anyone's session, so nothing to charge its decoding to: an
  // attach (with a request or two) is a few dozen bytes.
  if (in.Length() > kMaxAttachMessageBytes) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("the first message on a stream must carry attach (session id and token) and "
                                     "is at most ", kMaxAttachMessageBytes, " bytes; this one is ", in.Length()));
  }
  if (!grpc::SerializationTraits<v1::ClientMessage>::Deserialize(&in, &msg).ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, kUnparsable);
  }
  if (!msg.has_attach()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the first message on a stream must carry attach (session id and token)");
  }
  const uint64_t id = msg.attach().session_id();
  auto grpc_stream = std::make_shared<GrpcStream>(context);
  {
    absl::MutexLock l(&grpc_stream->mu);
    grpc_stream->stream = stream;
  }
  absl::StatusOr<std::shared_ptr<Session>> attached = Attach(id, msg.attach().token(), grpc_stream, -1);
  if (!attached.ok()) return ToGrpcStatus(attached.status());
  std::shared_ptr<Session> session = *std::move(attached);
  Log(LogLevel::kInfo, "session ", HexId(id), ": stream attached (", context->peer(), ")");

  const StreamWriters w = WritersOver([&out = *grpc_stream](const grpc::ByteBuffer& bb) {
    absl::MutexLock l(&out.mu);
    return out.stream->Write(bb);
  });
  const ReadBytes read_bytes = [&](grpc::ByteBuffer* bb, v1::ClientMessage*, const PlaceUpload*) {
    if (stream->Read(bb)) return 1;
    return context->IsCancelled() ? -1 : 0;
  };
  absl::Status refusal;
  const StreamEnd end = RunStream(id, session, &msg, read_bytes, w.write, w.write_data, &refusal);
  {
    absl::MutexLock l(&grpc_stream->mu);  // waits for a StreamEnd being written
    grpc_stream->stream = nullptr;
  }
  return ToGrpcStatus(EndStream(id, session, end, refusal));
}

void TensordService::ServeSocketStream(int sock, uint64_t session_id, absl::string_view token,
                                       wire::StreamFraming framing) {
  const char* kind = framing == wire::StreamFraming::kByteStream ? "tcp stream" : "same-host stream";
  absl::StatusOr<std::shared_ptr<Session>> attached = Attach(session_id, token, /*grpc=*/nullptr, sock);
  if (!wire::SendShmReply(sock, attached.status()).ok() || !attached.ok()) {
    if (!attached.ok()) Log(LogLevel::kWarning, kind, ": hello refused: ", attached.status().message());
    if (attached.ok()) EndStream(session_id, *attached, StreamEnd::kLost).IgnoreError();
    return;
  }
  std::shared_ptr<Session> session = *std::move(attached);
  Log(LogLevel::kInfo, "session ", HexId(session_id), ": ", kind, " attached");
  {
    absl::MutexLock lock(&mu_);
    ++socket_streams_;
  }
  // Counted until the end record went out (BeginShutdown waits for it).
  absl::Cleanup uncount = [this] {
    absl::MutexLock lock(&mu_);
    --socket_streams_;
  };
  // Fetched data: the kernel copies it from the storage into the socket.
  const StreamWriters w = WritersOver(
      [sock, framing](const grpc::ByteBuffer& bb) { return wire::SendStreamMessage(sock, bb, framing).ok(); });
  wire::StreamReceiver receiver(kMaxStreamMessageBytes, absl::ToInt64Nanoseconds(options_.stream_spin), framing);
  absl::Status read_error;
  const ReadBytes read_bytes = [&](grpc::ByteBuffer* bb, v1::ClientMessage* m, const PlaceUpload* place) {
    // On the TCP stream, a large upload's data goes from the socket straight
    // into its storage (one copy, the kernel's).
    const auto place_head = [&](const char* prefix, size_t prefix_len, size_t total) {
      return wire::ParseClientMessageHead(prefix, prefix_len, total, m, *place);
    };
    absl::StatusOr<bool> got = m != nullptr && place != nullptr ? receiver.Next(sock, bb, place_head)
                                                                : receiver.Next(sock, bb);
    if (!got.ok()) {
      read_error = got.status();
      return absl::IsInvalidArgument(read_error) ? -2 : -1;
    }
    // The end of the socket while the session is open: our client closes
    // the session (CloseSession) before its socket, so this one went away
    // without closing (killed, or crashed), as a lost gRPC stream.
    return !*got ? -1 : receiver.placed() ? 2 : 1;
  };
  absl::Status refusal;
  const StreamEnd end = RunStream(session_id, session, nullptr, read_bytes, w.write, w.write_data, &refusal);
  absl::Status why = EndStream(session_id, session, end, refusal);
  if (end == StreamEnd::kMalformed && !read_error.ok()) why = read_error;
  wire::SendStreamEnd(sock, why, framing).IgnoreError();  // the client may be gone
}

std::optional<SessionStats> TensordService::Remove(uint64_t session_id, absl::string_view why,
                                                   bool only_unattached) {
  std::shared_ptr<Session> session;
  std::string peer;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(session_id);
    if (it == sessions_.end() || (only_unattached && it->second.attached)) return std::nullopt;
    if (it->second.grpc != nullptr) it->second.grpc->context->TryCancel();
    // Wakes its reader, and fails a write that blocks because the client
    // does not read (which holds the session's lock that Close needs), as
    // TryCancel does on gRPC. No end record follows then.
    if (it->second.socket >= 0) ::shutdown(it->second.socket, SHUT_RDWR);
    session = std::move(it->second.session);
    peer = std::move(it->second.peer);
    sessions_.erase(it);
    ++closing_;
  }
  // A request of the session may be running (a kernel over billions of
  // elements): the caller (a CloseSession call, the reaper, a stream's end)
  // does not wait for it, which would hold a gRPC thread for as long as the
  // kernel runs; the closer thread closes the session once the request
  // ends. Until then the session still counts against its peer's limit and
  // the daemon's, so that closing sessions cannot run more requests at once
  // than the limits allow.
  std::optional<SessionStats> stats = session->TryClose();
  if (!stats.has_value()) {
    SessionStats so_far;
    so_far.peak_bytes = session->memory().peak_bytes();
    so_far.ops_executed = session->ops_executed();
    Log(LogLevel::kInfo, "session ", HexId(session_id), " closing (", why, ") once its running request ends");
    absl::MutexLock lock(&mu_);
    to_close_.push_back(Closing{std::move(session), session_id, std::move(peer), std::string(why)});
    return so_far;
  }
  session.reset();
  Closed(session_id, peer, why, *stats);
  return stats;
}

void TensordService::Closed(uint64_t session_id, const std::string& peer, absl::string_view why,
                            const SessionStats& stats) {
  bool last = false;
  {
    absl::MutexLock lock(&mu_);
    --closing_;
    if (auto p = sessions_per_peer_.find(peer); p != sessions_per_peer_.end() && --p->second == 0) {
      sessions_per_peer_.erase(p);
    }
    last = sessions_.empty() && closing_ == 0;
  }
  // Its freed large blocks (and every other cached one, on every device:
  // empty_cache) go back to the system, so that the daemon shrinks when its
  // clients leave, and a device reserves nothing once every session closed.
  int64_t trimmed = 0;
  for (size_t i = 0; i < backends_.size(); ++i) trimmed += backends_[i].Trim();
  // When the last client left, the heap pages glibc keeps in its per-thread
  // arenas after the sessions' small frees go back too.
  if (last) malloc_trim(0);
  Log(why == "stream lost" || why == "a message did not parse" ? LogLevel::kWarning : LogLevel::kInfo, "session ",
      HexId(session_id), " closed (", why, "): peak ", FormatBytes(stats.peak_bytes), " (", stats.peak_bytes,
      " bytes), ", stats.ops_executed, " ops executed; caches: ", FormatBytes(trimmed), " unmapped");
}

bool TensordService::CloserHasWork() const { return !to_close_.empty() || closer_stop_; }

void TensordService::CloseLoop() {
  for (;;) {
    Closing c;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &TensordService::CloserHasWork));
      if (to_close_.empty()) return;  // told to stop, and nothing is left
      c = std::move(to_close_.front());
      to_close_.pop_front();
    }
    const SessionStats stats = c.session->Close();  // waits for the running request
    c.session.reset();
    Closed(c.id, c.peer, c.why, stats);
  }
}

size_t TensordService::closing_sessions() const {
  absl::MutexLock lock(&mu_);
  return closing_;
}

void TensordService::ReapUnattached() {
  std::vector<uint64_t> stale;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    for (const auto& [id, e] : sessions_) {
      if (!e.attached && now - e.opened > options_.attach_timeout) stale.push_back(id);
    }
    // Under mu_: a handler removes its context before it returns.
    for (const auto& [context, since] : unattached_) {
      if (now - since > options_.attach_timeout) context->TryCancel();
    }
  }
  for (uint64_t id : stale) Remove(id, "no stream attached in time", /*only_unattached=*/true);
}

void TensordService::BeginShutdown() {
  const absl::Time deadline = absl::Now() + kShutdownGrace;
  bool any_socket = false;
  std::vector<std::shared_ptr<GrpcStream>> grpc_streams;
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    // Socket streams are ended from their own side first: a stream's
    // thread reads the end of its socket, and EndStream tells the client
    // why with the end record (Remove's shutdown of both directions would
    // leave it no way to). One that does not end within the grace (busy in
    // a long op, or blocked writing to a client that does not read) is
    // ended by Remove below, as gRPC's streams are.
    for (const auto& [id, e] : sessions_) {
      if (e.socket >= 0) {
        ::shutdown(e.socket, SHUT_RD);
        any_socket = true;
      }
      if (e.grpc != nullptr) grpc_streams.push_back(e.grpc);
    }
  }
  // A gRPC stream's thread waits in Read, which only a cancel ends: its
  // client is told why first, by a StreamEnd message, from a thread of its
  // own (a client that does not read can block the write until Remove
  // cancels the stream).
  absl::Notification told;
  std::thread teller;
  if (!grpc_streams.empty()) {
    try {
      teller = std::thread([&grpc_streams, &told] {
        v1::ServerMessage m;
        wire::ToProto(ShuttingDown(), "", 0, "", m.mutable_stream_end());
        grpc::ByteBuffer bb;
        bool own = false;
        if (grpc::SerializationTraits<v1::ServerMessage>::Serialize(m, &bb, &own).ok()) {
          // Written through to the socket before Write returns: the cancel
          // that follows would drop it from gRPC's send queue otherwise.
          const grpc::WriteOptions through = grpc::WriteOptions().set_write_through();
          for (const auto& w : grpc_streams) {
            absl::MutexLock l(&w->mu);
            if (w->stream != nullptr) w->stream->Write(bb, through);
          }
        }
        told.Notify();
      });
    } catch (const std::system_error& e) {
      Log(LogLevel::kWarning, "shutdown: cannot start a thread to tell gRPC streams why they end (", e.what(), ")");
    }
  }
  std::vector<uint64_t> ids;
  {
    absl::MutexLock lock(&mu_);
    if (any_socket) {
      mu_.AwaitWithDeadline(absl::Condition(
                                +[](int* streams) { return *streams == 0; }, &socket_streams_),
                            deadline);
    }
    for (const auto& [id, e] : sessions_) ids.push_back(id);
  }
  if (teller.joinable()) told.WaitForNotificationWithDeadline(deadline);
  for (uint64_t id : ids) Remove(id, "daemon shutting down");
  if (teller.joinable()) teller.join();  // Remove cancelled any write it was blocked in
}

absl::StatusOr<std::shared_ptr<Session>> TensordService::FindSession(uint64_t session_id,
                                                                   absl::string_view token) const {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session_id);
  if (it == sessions_.end() || !TokenEquals(std::string(token), it->second.session->token())) {
    return NoSuchSession("shared-memory channel");
  }
  return it->second.session;
}

size_t TensordService::live_sessions() const {
  absl::MutexLock lock(&mu_);
  return sessions_.size();
}

std::shared_ptr<Session> TensordService::SessionById(uint64_t session_id) const {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session_id);
  return it != sessions_.end() ? it->second.session : nullptr;
}

std::optional<SessionStats> TensordService::session_stats(uint64_t session_id) const {
  const std::shared_ptr<Session> session = SessionById(session_id);
  if (session == nullptr) return std::nullopt;
  return session->stats();
}

std::optional<bool> TensordService::session_running(uint64_t session_id) const {
  const std::shared_ptr<Session> session = SessionById(session_id);
  if (session == nullptr) return std::nullopt;
  return session->running();
}

}  // namespace tensord::server
