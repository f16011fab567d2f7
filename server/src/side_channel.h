// The daemon's side channels, outside gRPC. Internal to server/.
//  - Beside each Unix socket the daemon serves gRPC on, the shared-memory
//    side channel (tensord/transport/shm.h): a SOCK_SEQPACKET Unix socket
//    "<socket>.shm", which also carries same-host streams
//    (tensord/transport/socket_stream.h).
//  - On each TCP port: the daemon accepts the connections itself and tells
//    gRPC's (which begin with HTTP/2's preface, "PRI * HTTP/2.0") from
//    tensord's TCP streams (which begin with a ShmFrame hello); the former
//    go to the gRPC server (grpc::AddInsecureChannelFromFd), the latter are
//    served here. So one port serves both, through any firewall, SSH tunnel
//    or container port mapping that lets gRPC through.
#ifndef TENSORD_SERVER_SRC_SIDE_CHANNEL_H_
#define TENSORD_SERVER_SRC_SIDE_CHANNEL_H_

#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "tensord/server/service.h"

namespace grpc {
class Server;
}

struct sockaddr;

namespace tensord::server {

// The peer a TCP connection from `addr` is counted as (pending connections,
// gRPC connections, sessions): an IPv4 address as written ("192.0.2.7"), an
// IPv4-mapped IPv6 address as that IPv4 address, and any other IPv6 address
// as its /64 ("2001:db8:1:2::/64"): one host is commonly given a whole /64,
// so counting each of its addresses apart would let it take 2^64 shares.
// "?" for any other family.
std::string PeerGroup(const sockaddr* addr);

class SideChannelServer {
 public:
  // Connections waiting for their first frame: at most kMaxPendingHellos in
  // all, and on a TCP port at most kMaxPendingPerPeer from one address.
  static constexpr int kMaxPendingHellos = 256;
  static constexpr int kMaxPendingPerPeer = 8;
  static constexpr int kHelloTimeoutSeconds = 5;

  // Listens on `path` (mode 0600: only the daemon's user can connect; a stale
  // socket file is replaced, anything else refused). One thread accepts; one
  // thread per connection reads its frames. A connection is served only when
  // its peer runs as the daemon's user (or root) and its hello names an open
  // session with the right token; each session takes one connection (and
  // one more for its same-host stream). At most kMaxPendingHellos
  // connections may wait for their hello at once (each has kHelloTimeoutSeconds
  // from its accept to send it); more are closed at once, so that a peer
  // opening connections in a loop cannot take a thread each. A failed
  // accept (out of descriptors) is retried after 100 ms, not at once.
  static absl::StatusOr<std::unique_ptr<SideChannelServer>> Start(const std::string& path, TensordService* service);

  // Binds and listens on every address HOST (a name or a literal, no
  // brackets) resolves to, at `port` (0: one the OS chooses, the same for
  // every address). Returns the listening sockets (close-on-exec, owned by
  // the caller) and the port in `*bound_port`; Unavailable with the OS's
  // reason (a port in use, a host not on this machine) when none could be
  // bound.
  static absl::StatusOr<std::vector<int>> ListenTcp(const std::string& host, int port, int* bound_port);

  // Serves TCP port connections accepted on `listen_fd` (from ListenTcp;
  // this server owns it from now on): gRPC's go to `grpc_server` (which
  // must outlive Stop), tensord's TCP streams to `service`. A connection
  // has kHelloTimeoutSeconds from its accept to send gRPC's preface and
  // first SETTINGS frame header, or a whole hello; one that sends anything
  // else, or closes, is closed at once, without a reply. Anyone may
  // connect, so idle or half-open connections must keep neither new clients
  // nor slow ones out: at most kMaxPendingPerPeer connections from one
  // address wait at once (a new one pushes out that address's oldest), and
  // at most kMaxPendingHellos in all (a new one pushes out the oldest of the
  // address with the most waiting). A flood from one address thus pushes out
  // only its own connections. gRPC connections are handed over with their
  // peer's address (TensordService::AdmitConnection, which may refuse it).
  static std::unique_ptr<SideChannelServer> StartTcp(int listen_fd, TensordService* service,
                                                     grpc::Server* grpc_server);

  // Serves gRPC on the Unix stream socket `listen_fd` (listening; this
  // server owns it from now on): each connection goes to `grpc_server` at
  // once, with its peer's uid (SO_PEERCRED) noted as the peer of its calls
  // (TensordService::AdmitConnection, which may refuse it), which gRPC's own
  // Unix listener does not tell ("unix:" for everyone).
  static std::unique_ptr<SideChannelServer> StartUnixGrpc(int listen_fd, TensordService* service,
                                                          grpc::Server* grpc_server);
  ~SideChannelServer();

  // Stops accepting, ends every connection, joins the threads and removes the
  // socket file. Idempotent.
  void Stop();

  const std::string& path() const { return path_; }

  // Connection threads started and not yet joined: those serving, and
  // those that returned and wait for the acceptor to join them (it is woken
  // for each, so that a finished thread's stack does not stay mapped).
  size_t threads_held() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock l(&mu_);
    return threads_.size();
  }
  // How often the acceptor gave free memory back (malloc_trim) when its
  // last connection thread ended after a session's stream or channel.
  uint64_t trims() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock l(&mu_);
    return trims_;
  }

 private:
  SideChannelServer() = default;
  void StartAccepting();
  void AcceptLoop();
  // Serves one connection; its first frame must come before `deadline`.
  void Serve(int fd, std::chrono::steady_clock::time_point deadline);
  // TCP: waits (kHelloTimeoutSeconds at most) for a connection's first
  // bytes. kGrpc: they were HTTP/2's, and the connection now belongs to the
  // gRPC server; kTensord: a hello may follow; kNone: nothing came, the
  // peer closed, or the daemon is stopping (the caller closes it).
  enum class FirstBytes { kGrpc, kTensord, kNone };
  FirstBytes Sniff(int fd, std::chrono::steady_clock::time_point deadline);
  void Forget(int fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HelloDone(int fd);  // `fd` stopped waiting for its hello (a frame came, or none will)
  void HelloDoneLocked(int fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);  // the same, under mu_
  void LogRefusedHello(absl::string_view who, const absl::Status& why);
  void ReapFinished() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // This connection's thread is about to return: the acceptor joins it.
  void Finished() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The wake pipe carries one byte per wake-up: a thread finished, or Stop.
  static constexpr char kWakeToReap = 0;
  static constexpr char kWakeToStop = 1;
  void Wake(char why);
  // The acceptor's answer to a readable wake pipe: drains it, joins the
  // finished threads; true when it is to stop.
  bool Woken() ABSL_LOCKS_EXCLUDED(mu_);

  // Which listener this is; path_ is the shared-memory channel's path.
  enum class Kind { kShm, kTcp, kUnixGrpc };
  Kind kind_ = Kind::kShm;
  bool tcp() const { return kind_ == Kind::kTcp; }
  const char* Label() const {
    return kind_ == Kind::kTcp ? "tcp port" : kind_ == Kind::kUnixGrpc ? "unix socket" : "shared-memory channel";
  }
  // A pending connection on a TCP port and its peer's address.
  struct Pending {
    int fd;
    std::string peer;
  };
  // Makes room for a connection from `peer` among the pending ones (TCP).
  void EvictForNewPending(const std::string& peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::string path_;                    // kShm; empty otherwise
  grpc::Server* grpc_server_ = nullptr;  // kTcp, kUnixGrpc
  TensordService* service_ = nullptr;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};  // non-blocking pipe: Wake writes, the acceptor reads
  std::thread acceptor_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<int> conns_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread::id> finished_ ABSL_GUARDED_BY(mu_);
  bool trim_when_idle_ ABSL_GUARDED_BY(mu_) = false;  // a session's connection ended since the last trim
  uint64_t trims_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<Pending> pending_ ABSL_GUARDED_BY(mu_);  // connections not past their hello yet, oldest first
  uint64_t refused_ ABSL_GUARDED_BY(mu_) = 0;     // connections closed for exceeding the cap
  uint64_t refused_hellos_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t accept_failures_ = 0;                  // the acceptor thread's own
  uint64_t thread_failures_ ABSL_GUARDED_BY(mu_) = 0;  // connections closed for want of a thread
};

}  // namespace tensord::server

#endif  // TENSORD_SERVER_SRC_SIDE_CHANNEL_H_
