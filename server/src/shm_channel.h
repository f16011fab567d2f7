// The daemon's end of the shared-memory side channel (tensord/wire/shm.h):
// a SOCK_SEQPACKET Unix socket "<socket>.shm" beside each Unix socket the
// daemon serves gRPC on. Internal to server/.
#ifndef TENSORD_SERVER_SRC_SHM_CHANNEL_H_
#define TENSORD_SERVER_SRC_SHM_CHANNEL_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "tensord/server/service.h"

namespace tensord::server {

class ShmChannelServer {
 public:
  static constexpr int kMaxPendingHellos = 64;
  static constexpr int kHelloTimeoutSeconds = 5;

  // Listens on `path` (mode 0600: only the daemon's user can connect; a stale
  // socket file is replaced, anything else refused). One thread accepts; one
  // thread per connection reads its frames. A connection is served only when
  // its peer runs as the daemon's user (or root) and its hello names an open
  // session with the right token; each session takes one connection (and
  // one more for its same-host stream). At most kMaxPendingHellos
  // connections may wait for their hello at once (each has kHelloTimeoutSeconds
  // to send it); more are closed at once, so that a peer opening
  // connections in a loop cannot take a thread each.
  static absl::StatusOr<std::unique_ptr<ShmChannelServer>> Start(const std::string& path, TensordService* service);
  ~ShmChannelServer();

  // Stops accepting, ends every connection, joins the threads and removes the
  // socket file. Idempotent.
  void Stop();

  const std::string& path() const { return path_; }

 private:
  ShmChannelServer() = default;
  void AcceptLoop();
  void Serve(int fd);
  void HelloDone();  // a connection stopped waiting for its hello (a frame came, or none will)
  void ReapFinished() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::string path_;
  TensordService* service_ = nullptr;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::thread acceptor_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<int> conns_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread::id> finished_ ABSL_GUARDED_BY(mu_);
  int pending_hellos_ ABSL_GUARDED_BY(mu_) = 0;  // connections not past their hello yet
  uint64_t refused_ ABSL_GUARDED_BY(mu_) = 0;     // connections closed for exceeding the cap
};

}  // namespace tensord::server

#endif  // TENSORD_SERVER_SRC_SHM_CHANNEL_H_
