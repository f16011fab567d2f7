// A session's shared-memory segments: client memfds mapped by the side
// channel (tensord/wire/shm.h) and named by Upload and Fetch.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "tensord/meta/errors.h"
#include "tensord/server/session.h"

namespace tensord::server {

Session::ShmMapping::~ShmMapping() {
  if (data != nullptr) ::munmap(data, size);
}

bool Session::ClaimShmChannel() {
  absl::MutexLock l(&shm_mu_);
  if (shm_claimed_ || shm_closed_) return false;
  shm_claimed_ = true;
  return true;
}

absl::Status Session::MapShmSegment(uint32_t id, uint64_t size, int fd) {
  const std::string what = absl::StrCat("shared-memory segment ", id);
  if (id == 0) return absl::InvalidArgumentError("shared-memory segment id 0 is reserved (it means: no segment)");
  if (fd < 0) return absl::InvalidArgumentError(absl::StrCat(what, ": no file descriptor came with the request"));
  if (size == 0) return absl::InvalidArgumentError(absl::StrCat(what, ": size 0"));
  // Only a memfd can carry seals; F_SEAL_SHRINK means the file can never get
  // shorter than the mapping, so touching the mapping can never SIGBUS.
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the descriptor is not a sealable memfd (F_GET_SEALS: ", std::strerror(errno), ")"));
  }
  if ((seals & F_SEAL_SHRINK) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": the memfd must be sealed with F_SEAL_SHRINK (seals ",
                                                   seals, ")"));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": the descriptor is not a regular memfd"));
  }
  if (static_cast<uint64_t>(st.st_size) != size) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the request says ", size, " bytes but the memfd has ", st.st_size));
  }
  {
    absl::MutexLock l(&shm_mu_);
    if (shm_closed_) return absl::FailedPreconditionError(absl::StrCat(what, ": the session is closed"));
    if (shm_.contains(id)) return absl::InvalidArgumentError(absl::StrCat(what, " is already mapped"));
    if (shm_.size() >= kMaxShmSegments) {
      return absl::ResourceExhaustedError(
          absl::StrCat(what, ": the session already has ", shm_.size(), " segments (the limit)"));
    }
    if (size > kMaxShmBytes - shm_bytes_) {
      return absl::ResourceExhaustedError(absl::StrCat(what, ": ", size, " more bytes would exceed the ",
                                                       kMaxShmBytes, "-byte limit of a session's segments (",
                                                       shm_bytes_, " mapped)"));
    }
    shm_bytes_ += size;  // reserved while mapping (outside the lock)
  }
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  absl::MutexLock l(&shm_mu_);
  if (p == MAP_FAILED || shm_closed_ || shm_.contains(id)) {
    shm_bytes_ -= size;
    if (p != MAP_FAILED) ::munmap(p, size);
    if (p == MAP_FAILED) return absl::ResourceExhaustedError(absl::StrCat(what, ": mmap failed: ", std::strerror(errno)));
    return absl::FailedPreconditionError(absl::StrCat(what, ": the session closed, or the id was taken meanwhile"));
  }
  auto m = std::make_shared<ShmMapping>();
  m->data = static_cast<char*>(p);
  m->size = size;
  shm_.emplace(id, std::move(m));
  return absl::OkStatus();
}

absl::Status Session::UnmapShmSegment(uint32_t id) {
  std::shared_ptr<ShmMapping> m;  // unmapped outside the lock (or by a copy in flight)
  absl::MutexLock l(&shm_mu_);
  auto it = shm_.find(id);
  if (it == shm_.end()) return absl::NotFoundError(absl::StrCat("shared-memory segment ", id, " is not mapped"));
  m = std::move(it->second);
  shm_bytes_ -= m->size;
  shm_.erase(it);
  return absl::OkStatus();
}

size_t Session::shm_segments() const {
  absl::MutexLock l(&shm_mu_);
  return shm_.size();
}

absl::StatusOr<std::shared_ptr<Session::ShmMapping>> Session::ShmRange(absl::string_view what, uint32_t id,
                                                                      uint64_t offset, uint64_t nbytes) const {
  std::shared_ptr<ShmMapping> m;
  {
    absl::MutexLock l(&shm_mu_);
    auto it = shm_.find(id);
    if (it != shm_.end()) m = it->second;
  }
  if (m == nullptr) {
    return RuntimeErr(absl::StrCat(what, ": shared-memory segment ", id,
                                   " is not mapped in this session (register it on the side channel first)"));
  }
  if (offset > m->size || nbytes > m->size - offset) {
    return RuntimeErr(absl::StrCat(what, ": ", nbytes, " bytes at offset ", offset,
                                   " reach past the end of shared-memory segment ", id, " (", m->size, " bytes)"));
  }
  return m;
}

}  // namespace tensord::server
