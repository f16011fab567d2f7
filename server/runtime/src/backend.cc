// What the runtime does with any two backends: a session's streams, and
// copies between devices.
#include "tensord/runtime/backend.h"

#include <atomic>
#include <cstring>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tensord/meta/errors.h"
#include "tensord/runtime/log.h"

namespace tensord::runtime {

namespace {

// The process's device-failure state. A std::mutex, not absl::Mutex: the
// handler may be called from any thread, also one inside a CUDA call, and
// nothing here may take part in abseil's deadlock graph of the session locks.
struct FailureState {
  std::mutex mu;
  DeviceFailureHandler handler;  // guarded by mu
  absl::Status first;            // guarded by mu; OK while none
  std::atomic<bool> failed{false};
};

FailureState& Failures() {
  static FailureState* const state = new FailureState();  // never destroyed: reports may come during exit
  return *state;
}

}  // namespace

void ReportDeviceFailure(const Device& device, std::string why) {
  FailureState& f = Failures();
  DeviceFailureHandler handler;
  {
    std::lock_guard<std::mutex> lock(f.mu);
    if (!f.first.ok()) {
      Log(LogLevel::kDebug, device.ToString(), " failed again (", why, ")");
      return;
    }
    f.first = InternalErr(absl::StrCat(device.ToString(), " failed (", why, ")"));
    f.failed.store(true, std::memory_order_release);
    handler = f.handler;
  }
  Log(LogLevel::kError, device.ToString(), " failed (", why, "): the device is unusable until the process restarts");
  if (handler) handler(device, why);
}

void SetDeviceFailureHandler(DeviceFailureHandler handler) {
  FailureState& f = Failures();
  std::lock_guard<std::mutex> lock(f.mu);
  f.handler = std::move(handler);
  f.first = absl::OkStatus();
  f.failed.store(false, std::memory_order_release);
}

bool DeviceFailed() { return Failures().failed.load(std::memory_order_acquire); }

absl::Status DeviceFailure() {
  FailureState& f = Failures();
  std::lock_guard<std::mutex> lock(f.mu);
  return f.first;
}

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
