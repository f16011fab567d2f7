// The client's shared-memory segment pool (see shm_pool.h).
#include "shm_pool.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "tensord/transport/shm.h"

namespace tensord::client::internal {
namespace {

// Segment sizes: powers of two from 1 MiB to 64 MiB, then multiples of
// 64 MiB, so that a segment is reused by transfers of similar size.
size_t SegmentSize(size_t n) {
  constexpr size_t kMin = size_t{1} << 20, kStep = size_t{64} << 20;
  // Rounding up must not wrap to a small segment: past the last step, the
  // size is beyond every pool's limit anyway.
  if (n > std::numeric_limits<size_t>::max() - kStep) return std::numeric_limits<size_t>::max();
  if (n > kStep) return (n + kStep - 1) / kStep * kStep;
  size_t s = kMin;
  while (s < n) s <<= 1;
  return s;
}

}  // namespace

absl::StatusOr<std::shared_ptr<ShmPool>> ShmPool::Connect(const std::string& channel_path, uint64_t session_id,
                                                          const std::string& token, uid_t daemon_uid,
                                                          size_t max_bytes) {
  absl::StatusOr<int> fd = wire::ConnectShmChannel(channel_path, wire::ShmOp::kHello, session_id, token, daemon_uid);
  if (!fd.ok()) return fd.status();
  std::shared_ptr<ShmPool> p(new ShmPool());
  p->max_bytes_ = max_bytes;
  absl::MutexLock l(&p->mu_);
  p->sock_ = *fd;
  return p;
}

ShmPool::~ShmPool() {
  absl::MutexLock l(&mu_);
  if (sock_ >= 0) ::close(sock_);
  for (Segment& s : segments_) ::munmap(s.data, s.size);
}

void ShmPool::Close() {
  absl::MutexLock l(&mu_);
  if (sock_ >= 0) ::close(sock_);
  sock_ = -1;
}

ShmPool::Segment* ShmPool::FindLocked(uint32_t id) {
  for (Segment& s : segments_) {
    if (s.id == id) return &s;
  }
  return nullptr;
}

bool ShmPool::FreeLocked(const Segment& s) const { return !s.busy || (s.fence != 0 && answered_ >= s.fence); }

void ShmPool::DropLocked(size_t index) {
  Segment s = segments_[index];
  segments_.erase(segments_.begin() + static_cast<std::ptrdiff_t>(index));
  total_bytes_ -= s.size;
  if (sock_ >= 0) {
    wire::ShmFrame f;
    f.op = static_cast<uint32_t>(wire::ShmOp::kUnmap);
    f.segment = s.id;
    if (!wire::SendShmFrame(sock_, f).ok() || !wire::RecvShmReply(sock_).ok()) {
      ::close(sock_);
      sock_ = -1;
    }
  }
  ::munmap(s.data, s.size);
}

std::optional<ShmPool::Lease> ShmPool::Acquire(size_t nbytes, bool adopt) {
  absl::MutexLock l(&mu_);
  if (sock_ < 0 || nbytes == 0) return std::nullopt;
  if (adopt && adopted_count_ >= kMaxAdopted) return std::nullopt;
  Segment* best = nullptr;
  for (Segment& s : segments_) {
    if (s.size >= nbytes && FreeLocked(s) && (best == nullptr || s.size < best->size)) best = &s;
  }
  if (best == nullptr) {
    const size_t size = SegmentSize(nbytes);
    if (size > max_bytes_) return std::nullopt;
    if (adopt && adopted_bytes_ + size > max_bytes_ / 2) return std::nullopt;
    // Make room: drop free segments, largest first.
    while (total_bytes_ + size > max_bytes_) {
      size_t victim = segments_.size();
      for (size_t i = 0; i < segments_.size(); ++i) {
        if (FreeLocked(segments_[i]) && (victim == segments_.size() || segments_[i].size > segments_[victim].size)) {
          victim = i;
        }
      }
      if (victim == segments_.size()) return std::nullopt;
      DropLocked(victim);
      if (sock_ < 0) return std::nullopt;
    }
    // An anonymous memfd: no name in /dev/shm, gone when both sides let go.
    const int fd = ::memfd_create("tensord-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return std::nullopt;
    void* p = MAP_FAILED;
    if (::ftruncate(fd, static_cast<off_t>(size)) == 0 &&
        ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0) {
      p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    if (p == MAP_FAILED) {
      ::close(fd);
      return std::nullopt;
    }
    Segment s;
    s.id = next_id_++;
    s.data = static_cast<char*>(p);
    s.size = size;
    wire::ShmFrame f;
    f.op = static_cast<uint32_t>(wire::ShmOp::kMap);
    f.segment = s.id;
    f.size = size;
    absl::Status st = wire::SendShmFrame(sock_, f, fd);
    ::close(fd);
    if (st.ok()) st = wire::RecvShmReply(sock_);
    if (!st.ok()) {
      ::munmap(p, size);
      // Refused (a limit): keep the channel for smaller transfers; a
      // failed socket: stop using it.
      if (absl::IsUnavailable(st)) {
        ::close(sock_);
        sock_ = -1;
      }
      return std::nullopt;
    }
    segments_.push_back(s);
    total_bytes_ += size;
    ++created_;
    best = &segments_.back();
  } else if (adopt && adopted_bytes_ + best->size > max_bytes_ / 2) {
    return std::nullopt;
  }
  best->busy = true;
  best->fence = 0;
  if (adopt) {
    best->adopted = true;
    adopted_bytes_ += best->size;
    ++adopted_count_;
  }
  return Lease{best->id, best->data, best->size};
}

void ShmPool::Freed(const uint32_t* ids, int n) {
  absl::MutexLock l(&mu_);
  for (int i = 0; i < n; ++i) {
    Segment* s = FindLocked(ids[i]);
    if (s == nullptr || !s->adopted) continue;
    s->adopted = false;
    s->busy = false;
    s->fence = 0;
    adopted_bytes_ -= s->size;
    --adopted_count_;
  }
}

int64_t ShmPool::segments_created() const {
  absl::MutexLock l(&mu_);
  return created_;
}

void ShmPool::ReleaseAfter(uint32_t id, uint64_t fence) {
  absl::MutexLock l(&mu_);
  if (Segment* s = FindLocked(id); s != nullptr && !s->adopted) s->fence = fence;
}

void ShmPool::Release(uint32_t id) {
  absl::MutexLock l(&mu_);
  if (Segment* s = FindLocked(id); s != nullptr && !s->adopted) {
    s->busy = false;
    s->fence = 0;
  }
}

void ShmPool::Answered(uint64_t request_id) {
  absl::MutexLock l(&mu_);
  answered_ = std::max(answered_, request_id);
}

std::shared_ptr<const char> ShmPool::Lend(uint32_t id) {
  char* data = nullptr;
  {
    absl::MutexLock l(&mu_);
    if (Segment* s = FindLocked(id)) data = s->data;
  }
  if (data == nullptr) return nullptr;
  std::shared_ptr<ShmPool> self = shared_from_this();
  return std::shared_ptr<const char>(data, [self, id](const char*) { self->Release(id); });
}

}  // namespace tensord::client::internal
