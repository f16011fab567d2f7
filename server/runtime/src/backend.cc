// What the runtime does with any two backends: a session's streams, and
// copies between devices.
#include "tensord/runtime/backend.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "tensord/meta/errors.h"
#include "tensord/runtime/log.h"

namespace tensord::runtime {

SessionStreams::~SessionStreams() {
  if (absl::Status s = SynchronizeAll(); !s.ok()) {
    Log(LogLevel::kWarning, "a session's device work failed as it closed: ", s.message());
  }
}

absl::StatusOr<Stream*> SessionStreams::For(const Backend& backend) {
  for (auto& [b, s] : streams_) {
    if (b == &backend) return s.get();
  }
  TD_ASSIGN_OR_RETURN(std::unique_ptr<Stream> s, backend.CreateStream(owner_));
  streams_.emplace_back(&backend, std::move(s));
  return streams_.back().second.get();
}

absl::Status SessionStreams::SynchronizeAll() {
  absl::Status first;
  for (auto& [b, s] : streams_) first.Update(s->Synchronize());
  return first;
}

absl::Status CopyBetween(SessionStreams& streams, const Backend& from, const char* src, const Backend& to, char* dst,
                         size_t n, MemoryAccount& account, absl::string_view op) {
  if (n == 0) return absl::OkStatus();
  if (from.host_addressable() && to.host_addressable()) {
    std::memcpy(dst, src, n);
    return absl::OkStatus();
  }
  // Every path below waits for its copies: the host bytes (a storage a
  // later op may write, a bounce buffer freed on return) must not change
  // or go while a stream still reads or writes them.
  absl::Status s = [&]() -> absl::Status {
    if (to.host_addressable()) {
      TD_ASSIGN_OR_RETURN(Stream* fs, streams.For(from));
      TD_RETURN_IF_ERROR(fs->CopyToHost(dst, src, n));
      return fs->Synchronize();
    }
    TD_ASSIGN_OR_RETURN(Stream* ts, streams.For(to));
    if (from.host_addressable()) {
      TD_RETURN_IF_ERROR(ts->CopyFromHost(dst, src, n));
      return ts->Synchronize();
    }
    TD_ASSIGN_OR_RETURN(Stream* fs, streams.For(from));
    const Backend* host = streams.devices().cpu();
    if (host == nullptr) return InternalErr("no cpu backend for a copy between devices");
    TD_ASSIGN_OR_RETURN(std::shared_ptr<Storage> bounce,
                        account.Allocate(host->allocator(), static_cast<int64_t>(n), op, /*zero_fill=*/false));
    TD_RETURN_IF_ERROR(fs->CopyToHost(bounce->data(), src, n));
    TD_RETURN_IF_ERROR(fs->Synchronize());
    TD_RETURN_IF_ERROR(ts->CopyFromHost(dst, bounce->data(), n));
    return ts->Synchronize();
  }();
  if (!s.ok() && s.code() == absl::StatusCode::kInternal) {
    return InternalErr(absl::StrCat(op, ": copying ", n, " bytes from ", from.device().ToString(), " to ",
                                    to.device().ToString(), " failed: ", s.message()));
  }
  return s;
}

}  // namespace tensord::runtime
