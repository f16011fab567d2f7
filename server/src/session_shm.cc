// A session's shared-memory segments: client memfds mapped by the side
// channel (tensord/transport/shm.h) and named by Upload and Fetch.
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
  m->id = id;
  shm_.emplace(id, std::move(m));
  return absl::OkStatus();
}

absl::Status Session::UnmapShmSegment(uint32_t id) {
  std::shared_ptr<ShmMapping> m;  // unmapped outside the lock (or by a copy in flight)
  absl::MutexLock l(&shm_mu_);
  auto it = shm_.find(id);
  if (it == shm_.end()) return absl::NotFoundError(absl::StrCat("shared-memory segment ", id, " is not mapped"));
  if (it->second->adopted.load()) {
    return absl::FailedPreconditionError(absl::StrCat("shared-memory segment ", id,
                                                      " backs a tensor's storage (an adopting upload): it cannot be "
                                                      "unmapped before a reply lists it in shm_freed"));
  }
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
  if (m->adopted.load()) {
    return RuntimeErr(absl::StrCat(what, ": shared-memory segment ", id,
                                   " backs a tensor's storage (an adopting upload) and is busy until a reply lists "
                                   "it in shm_freed"));
  }
  return m;
}

namespace {

// What an adopted storage holds: the mapping (so it stays mapped even if the
// session ends first) and where to report the segment free again.
template <typename Mapping, typename FreedList>
struct AdoptedSegment {
  std::shared_ptr<Mapping> mapping;
  std::shared_ptr<FreedList> freed;
  ~AdoptedSegment() {
    // Free for the client to reuse: cleared before the id is reported, so an
    // adopt that follows the report finds it free.
    mapping->adopted.store(false);
    freed->Add(mapping->id);
  }
};

}  // namespace

absl::StatusOr<std::shared_ptr<Storage>> Session::AdoptShmRange(absl::string_view what, uint32_t id, uint64_t offset,
                                                                uint64_t nbytes) {
  // Kernels may assume the allocator's alignment.
  if (offset % static_cast<uint64_t>(runtime::DeviceAllocator::kAlignment) != 0) {
    return RuntimeErr(absl::StrCat(what, ": an adopted segment's offset must be a multiple of ",
                                   runtime::DeviceAllocator::kAlignment, " bytes, got ", offset));
  }
  absl::StatusOr<std::shared_ptr<ShmMapping>> r = ShmRange(what, id, offset, nbytes);
  if (!r.ok()) return r.status();
  std::shared_ptr<ShmMapping> m = *std::move(r);
  {
    // Under shm_mu_, so that an unmap sees either the flag or no adoption.
    absl::MutexLock l(&shm_mu_);
    auto it = shm_.find(id);
    bool expected = false;
    if (it == shm_.end() || it->second != m || !m->adopted.compare_exchange_strong(expected, true)) {
      return RuntimeErr(absl::StrCat(what, ": shared-memory segment ", id,
                                     " was unmapped or adopted meanwhile (it is busy until a reply lists it in "
                                     "shm_freed)"));
    }
  }
  // From here the keeper owns the flag: whatever happens, dropping it clears
  // the flag and reports the segment free.
  auto keeper = std::make_shared<AdoptedSegment<ShmMapping, ShmFreedList>>();
  keeper->mapping = m;
  keeper->freed = shm_freed_;
  // The client can still write its own mapping of these bytes: that changes
  // only this session's tensor (as writing through a numpy array that a
  // torch.from_numpy tensor shares would), never another session's memory
  // or the daemon's bookkeeping, and the seals keep the pages from going away.
  // Charged as "upload", as StartUploadLocked's allocation is: an upload over
  // the session's limit reads the same on every path.
  return memory_->Adopt(devices_->cpu()->allocator(), m->data + offset, static_cast<int64_t>(nbytes), std::move(keeper), "upload");
}

}  // namespace tensord::server
