// The batcher: requests are appended to the pending batch under `mu` and
// sent as one message when the batch is full, when its first request is
// flush_interval old (by the next call, or by the background flusher), or at
// a sync point; releases queued by any thread go with it. The sending half
// of every round trip (SendForReplyLocked) is here too.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "session_impl.h"

namespace tensord::client {
namespace internal {

google::protobuf::ArenaOptions ArenaOptionsForBatches(char* initial_block) {
  google::protobuf::ArenaOptions o;
  o.initial_block = initial_block;
  o.initial_block_size = kBatchArenaBytes;
  o.start_block_size = 64 << 10;
  o.max_block_size = 1 << 20;
  return o;
}

}  // namespace internal

void Session::Impl::AppendReleasesLocked() {
  absl::MutexLock rl(&release_mu);
  if (!releases.empty()) {
    v1::Release* r = pending->add_requests()->mutable_release();
    r->mutable_handles()->Add(releases.begin(), releases.end());
    stats.releases += static_cast<int64_t>(releases.size());
    releases.clear();
    release_bytes.store(0, std::memory_order_relaxed);
  }
}

void Session::Impl::ReleaseBeforeLocked(int64_t allocates_bytes) {
  if (allocates_bytes >= kReleaseFirstBytes ||
      (allocates_bytes > 0 && release_bytes.load(std::memory_order_relaxed) >= kReleaseFirstBytes)) {
    AppendReleasesLocked();
  }
}

absl::Status Session::Impl::FlushLocked() {
  TD_RETURN_IF_ERROR(Usable());
  DropUploadSyncLocked();
  AppendReleasesLocked();
  if (pending->requests_size() == 0) return absl::OkStatus();
  batch_open = false;
  daemon_idle.store(false, std::memory_order_relaxed);
  const bool ok = transport->Send(*pending);
  ++stats.messages_sent;
  arena.Reset();
  pending = google::protobuf::Arena::CreateMessage<v1::ClientMessage>(&arena);
  if (!ok) {
    write_error = StreamLost();
    return write_error;
  }
  return absl::OkStatus();
}

absl::Status Session::Impl::MaybeFlushLocked() {
  if (pending->requests_size() >= batch_limit) return FlushLocked();
  if (flush_interval.count() == 0) return absl::OkStatus();
  const auto now = std::chrono::steady_clock::now();
  if (!batch_open) {
    batch_open = true;
    batch_started = now;
    last_batch_open = now;
    batch_interval = daemon_idle.load(std::memory_order_relaxed) ? std::min(flush_interval, kIdleFlushInterval)
                                                                   : flush_interval;
    if (flusher_idle) {
      flusher_idle = false;
      flush_cv.Signal();
    }
  } else if (now - batch_started >= batch_interval) {
    ++stats.timed_flushes;
    return FlushLocked();
  }
  return absl::OkStatus();
}

void Session::Impl::FlushLoop() {
  absl::MutexLock l(&mu);
  while (!flush_stop) {
    if (!batch_open) {
      const auto now = std::chrono::steady_clock::now();
      if (now - last_batch_open >= kFlusherIdleAfter) {
        flusher_idle = true;
        flush_cv.Wait(&mu);  // until a batch opens (or Stop)
      } else {
        flush_cv.WaitWithTimeout(&mu, absl::FromChrono(flush_interval));
      }
      continue;
    }
    const auto due = batch_started + batch_interval;
    if (std::chrono::steady_clock::now() < due) {
      flush_cv.WaitWithTimeout(&mu, absl::FromChrono(due - std::chrono::steady_clock::now()));
      continue;  // the batch open now (maybe a later one) is checked again
    }
    if (!closed.load()) {
      ++stats.timed_flushes;
      FlushLocked().IgnoreError();
    }
    batch_open = false;
  }
}

void Session::Impl::StopFlusher() {
  {
    absl::MutexLock l(&mu);
    flush_stop = true;
    flush_cv.Signal();
  }
  if (flusher.joinable()) flusher.join();
}

void Session::Impl::DropUploadSyncLocked() {
  if (!upload_sync.has_value()) return;
  Forget(*upload_sync);
  upload_sync.reset();
}

std::shared_ptr<internal::Waiter> Session::Impl::AddWaiterLocked(uint64_t* id) {
  *id = next_request_id++;
  auto w = std::make_shared<Waiter>();
  absl::MutexLock wl(&wmu);
  if (reader_done) {
    w->done = true;
    w->status = stream_status.ok() ? RuntimeErr("the daemon ended the session stream") : stream_status;
  }
  waiters[*id] = w;
  return w;
}

absl::StatusOr<Session::Impl::Sent> Session::Impl::SendForReplyLocked(
    absl::FunctionRef<void(uint64_t id, Waiter& w)> add) {
  Sent sent;
  sent.waiter = AddWaiterLocked(&sent.id);
  add(sent.id, *sent.waiter);
  if (absl::Status st = FlushLocked(); !st.ok()) {
    Forget(sent);
    return st;
  }
  return sent;
}

void Session::QueueRelease(uint64_t handle, int64_t bytes) {
  if (impl_->closed.load()) return;
  if (impl_->any_grad_targets.load(std::memory_order_acquire)) {
    absl::MutexLock gl(&impl_->grad_mu);
    impl_->grad_targets.erase(handle);
  }
  absl::MutexLock rl(&impl_->release_mu);
  impl_->releases.push_back(handle);
  int64_t total = 0;  // saturated: a tensor's bytes are an estimate that may already be INT64_MAX
  if (__builtin_add_overflow(impl_->release_bytes.load(std::memory_order_relaxed), bytes, &total)) {
    total = std::numeric_limits<int64_t>::max();
  }
  impl_->release_bytes.store(total, std::memory_order_relaxed);
}

}  // namespace tensord::client
