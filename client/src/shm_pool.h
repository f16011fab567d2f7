// The client's end of the shared-memory side channel (tensord/transport/shm.h):
// a pool of segments — anonymous memfds sealed against shrinking, mapped
// here and registered with the daemon — reused across uploads and fetches
// so that their pages stay warm. Internal to client/.
#ifndef TENSORD_CLIENT_SRC_SHM_POOL_H_
#define TENSORD_CLIENT_SRC_SHM_POOL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace tensord::client::internal {

class ShmPool : public std::enable_shared_from_this<ShmPool> {
 public:
  // Connects to `channel_path` ("<daemon socket>.shm") and says hello for the
  // session, when its peer runs as `daemon_uid` (wire::ConnectShmChannel).
  // An error when the daemon offers no channel or refuses it (the caller
  // then uses the stream), PermissionDenied when another user listens there.
  // `max_bytes` caps the segments' total size.
  static absl::StatusOr<std::shared_ptr<ShmPool>> Connect(const std::string& channel_path, uint64_t session_id,
                                                          const std::string& token, uid_t daemon_uid,
                                                          size_t max_bytes);
  ~ShmPool();

  struct Lease {
    uint32_t id = 0;
    char* data = nullptr;
    size_t size = 0;
  };
  // A free segment of at least `nbytes` bytes (a new one, registered with the
  // daemon, when none is free). nullopt when the pool is at its cap or the
  // channel failed: the caller uses the stream.
  //
  // With `adopt`, the segment is for an upload that the daemon adopts as the
  // tensor's storage: it stays busy (ReleaseAfter and Release do not free
  // it) until the daemon lists it as freed (Freed). nullopt, too, when
  // adopted segments already hold half the cap or kMaxAdopted segments: the
  // caller then uses a copying segment, so that tensors a program keeps do
  // not starve transfers.
  std::optional<Lease> Acquire(size_t nbytes, bool adopt = false);
  static constexpr size_t kMaxAdopted = 32;  // half the daemon's segment limit per session
  // The segment is free again once the daemon has answered request `fence`
  // (it executes in order, so it has read the segment by then).
  void ReleaseAfter(uint32_t id, uint64_t fence);
  // The segment is free again now.
  void Release(uint32_t id);
  // The reader thread: the daemon answered request `request_id`.
  void Answered(uint64_t request_id);
  // The reader thread: the daemon freed the storages that adopted these
  // segments (a reply's shm_freed): they are free again. Unknown ids and
  // segments not adopted are ignored.
  void Freed(const uint32_t* ids, int n);
  // Segments created (memfds registered with the daemon) since Connect.
  int64_t segments_created() const;
  // The bytes of segment `id`, lent to the caller: the segment is free again
  // when the last copy of the returned pointer goes (the pool lives as long).
  std::shared_ptr<const char> Lend(uint32_t id);
  // Ends the channel (the daemon unmaps the segments when the session ends;
  // lent segments stay mapped here until released).
  void Close();

 private:
  struct Segment {
    uint32_t id = 0;
    char* data = nullptr;
    size_t size = 0;
    bool busy = false;
    uint64_t fence = 0;  // busy until this request is answered (0: until Release)
    bool adopted = false;  // busy until Freed names it
  };
  ShmPool() = default;
  Segment* FindLocked(uint32_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool FreeLocked(const Segment& s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropLocked(size_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  int sock_ ABSL_GUARDED_BY(mu_) = -1;
  size_t max_bytes_ = 0;
  size_t total_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t answered_ ABSL_GUARDED_BY(mu_) = 0;
  size_t adopted_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  size_t adopted_count_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t created_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Segment> segments_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tensord::client::internal

#endif  // TENSORD_CLIENT_SRC_SHM_POOL_H_
