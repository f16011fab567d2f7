// The reply reader. There is no reader thread: a thread that waits for a
// reply reads the stream itself (PumpLocked), completing the waiter of
// every message it reads, until its own reply came; then the next waiting
// thread takes over. What each ServerMessage completes is
// HandleMessageLocked's; a fetch's data goes straight into its buffer as it
// is read (PlaceData).
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "embedded_daemon.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "fetch_buffers.h"
#include "session_impl.h"
#include "tensord/meta/errors.h"
#include "tensord/wire/copy.h"
#include "tensord/wire/wire.h"

namespace tensord::client {

template <typename T>
void Session::Impl::PumpLocked(bool (*done)(T*), T* arg) {
  struct Follow {
    bool (*done)(T*);
    T* arg;
    Impl* im;
  } f{done, arg, this};
  while (!done(arg) && !reader_done) {
    if (reading) {
      wmu.Await(absl::Condition(
          +[](Follow* f) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return f->done(f->arg) || !f->im->reading || f->im->reader_done;
          },
          &f));
      continue;
    }
    reading = true;
    wmu.Unlock();
    grpc::Status st;
    placed = 0;
    const bool ok = transport->Read(
        &read_buf, [this](const v1::FetchData& head, size_t n) { return PlaceData(head, n); }, &st);
    wmu.Lock();
    reading = false;
    if (ok) {
      HandleMessageLocked(&read_buf);
    } else {
      EndOfStreamLocked(st);
    }
    placed_buffer.reset();
  }
}

absl::Status Session::Impl::StreamLost() {
  absl::MutexLock l(&wmu);
  // What the daemon sent before (replies, and why it ended the stream,
  // e.g. that it is shutting down), when the transport can give it
  // without waiting on a daemon that hangs.
  if (!reader_done && !reading && transport->ReadableAfterFailedSend()) {
    PumpLocked(+[](Impl*) { return false; }, this);
  }
  if (reader_done && !stream_status.ok()) return stream_status;
  return RuntimeErr(absl::StrCat(Session::Label(session_id), ": the connection to the daemon at ", address,
                                 " was lost"));
}

void Session::Impl::Forget(const Sent& sent) {
  absl::MutexLock wl(&wmu);
  waiters.erase(sent.id);
}

absl::Status Session::Impl::Wait(const Sent& sent) {
  absl::MutexLock wl(&wmu);
  PumpLocked(+[](Waiter* w) { return w->done; }, sent.waiter.get());
  waiters.erase(sent.id);
  daemon_idle.store(true, std::memory_order_relaxed);
  return sent.waiter->status;
}

std::optional<v1::BackwardCallback> Session::Impl::WaitOrCallback(const Sent& sent) {
  struct State {
    Waiter* w;
    std::deque<v1::BackwardCallback>* q;
  } st{sent.waiter.get(), &callbacks};
  absl::MutexLock wl(&wmu);
  PumpLocked(+[](State* s) { return s->w->done || !s->q->empty(); }, &st);
  if (!callbacks.empty()) {
    v1::BackwardCallback cb = std::move(callbacks.front());
    callbacks.pop_front();
    return cb;
  }
  return std::nullopt;
}

void Session::Impl::DrainLocked(absl::Duration timeout) {
  // A daemon that never ends the stream must not hang Close: cancel it
  // after `timeout` from a watchdog thread (Read then returns false).
  absl::Notification drained;
  std::thread watchdog([this, &drained, timeout] {
    if (!drained.WaitForNotificationWithTimeout(timeout)) transport->Cancel();
  });
  PumpLocked(+[](Impl*) { return false; }, this);
  drained.Notify();
  wmu.Unlock();
  watchdog.join();
  wmu.Lock();
}

void Session::Impl::EndOfStreamLocked(grpc::Status st) {
  reader_done = true;
  if (!daemon_ended.ok()) {
    st = grpc::Status(static_cast<grpc::StatusCode>(daemon_ended.code()), std::string(daemon_ended.message()));
  }
  if (closed.load()) {
    stream_status = RuntimeErr(absl::StrCat(Session::Label(session_id), " is closed"));
  } else if (st.ok()) {
    stream_status = RuntimeErr(absl::StrCat(Session::Label(session_id), ": the daemon at ", address,
                                            " ended the session stream"));
  } else if (st.error_code() == grpc::StatusCode::UNAVAILABLE && daemon_ended.ok() &&
             transport->kind() == internal::TransportKind::kGrpc) {
    // The connection broke before a StreamEnd was read (over a Unix
    // socket, gRPC drops what the daemon sent once a write to the closed
    // socket fails): most often the daemon stopped.
    stream_status = internal::GrpcError(
        absl::StrCat(Session::Label(session_id), ": the session stream broke (the daemon may have stopped)"),
        address, st);
  } else {
    stream_status =
        internal::GrpcError(absl::StrCat(Session::Label(session_id), ": the session stream failed"), address, st);
  }
  if (!stream_status.ok()) {
    // An embedded daemon that died (a kernel that crashed it, say): say how.
    if (std::string note = internal::EmbeddedDaemonEndNote(address); !note.empty()) {
      stream_status = absl::Status(stream_status.code(), absl::StrCat(stream_status.message(), "; ", note));
    }
  }
  for (auto& [id, w] : waiters) {
    if (!w->done) {
      w->done = true;
      w->status = stream_status;
    }
  }
}

wire::Placement Session::Impl::PlaceData(const v1::FetchData& d, size_t n) {
  absl::MutexLock wl(&wmu);
  auto it = waiters.find(d.request_id());
  if (it == waiters.end() || it->second->done || d.shm_segment() != 0) return nullptr;
  Waiter& w = *it->second;
  if (!w.have_meta) {
    // The first chunk: HandleMessageLocked validates its meta and size;
    // the buffer is sized by the size it announces, within gRPC's limit
    // on what this stream may receive in all (never more than asked).
    if (d.offset() != 0 || d.total_bytes() < n || w.buffer != nullptr) return nullptr;
    w.buffer = internal::AllocateFetchBuffer(d.total_bytes());
    if (w.buffer == nullptr) return nullptr;
    w.total_bytes = d.total_bytes();
  }
  if (d.offset() != w.received || n > w.total_bytes - w.received) return nullptr;
  placed = n;
  placed_buffer = w.buffer;  // the bytes may arrive over a while (the TCP stream): whatever happens to `w`
  return wire::Placement(w.buffer.get() + w.received, w.total_bytes);
}

void Session::Impl::HandleMessageLocked(v1::ServerMessage* mutable_msg) {
  const v1::ServerMessage& msg = *mutable_msg;
  switch (msg.kind_case()) {
    case v1::ServerMessage::kData: {
      const v1::FetchData& d = msg.data();
      auto it = waiters.find(d.request_id());
      if (d.last() && shm != nullptr) shm->Answered(d.request_id());
      if (d.shm_freed_size() > 0 && shm != nullptr) shm->Freed(d.shm_freed().data(), d.shm_freed_size());
      if (it == waiters.end() || it->second->done) return;
      Waiter& w = *it->second;
      if (d.shm_segment() != 0) {
        absl::StatusOr<TensorMeta> m = wire::FromProto(d.meta(), "fetched tensor");
        w.done = true;
        if (!m.ok()) {
          w.status = m.status();
        } else if (w.have_meta || d.shm_segment() != w.shm_requested || !d.last() || !d.data().empty()) {
          w.status = InternalErr(absl::StrCat("daemon answered a fetch in shared-memory segment ",
                                              d.shm_segment(), ", not as requested (segment ", w.shm_requested,
                                              ")"));
        } else {
          w.meta = *std::move(m);
          w.have_meta = true;
          w.total_bytes = d.total_bytes();
          w.shm_segment = d.shm_segment();
          w.earlier_errors.assign(d.errors().begin(), d.errors().end());
        }
        return;
      }
      if (!w.have_meta) {
        absl::StatusOr<TensorMeta> m = wire::FromProto(d.meta(), "fetched tensor");
        if (!m.ok()) {
          w.done = true;
          w.status = m.status();
          return;
        }
        absl::StatusOr<int64_t> n = m->DenseBytes("fetched tensor");
        const uint64_t expect = n.ok() ? static_cast<uint64_t>(*n) : 0;
        if (!n.ok() || d.total_bytes() != expect) {
          w.done = true;
          w.status = InternalErr(absl::StrCat("daemon sent ", d.total_bytes(), " bytes for ", m->ToString(),
                                              " (expected ", expect, ")"));
          return;
        }
        w.meta = *std::move(m);
        w.have_meta = true;
        w.earlier_errors.assign(d.errors().begin(), d.errors().end());
        w.total_bytes = d.total_bytes();
        if (w.buffer == nullptr) w.buffer = internal::AllocateFetchBuffer(w.total_bytes);
        if (w.buffer == nullptr) {
          w.done = true;
          w.status = OutOfMemoryErr(absl::StrCat("fetch: no memory for ", w.total_bytes, " bytes"));
          return;
        }
      }
      const uint64_t size = placed > 0 ? placed : d.data().size();
      if (d.offset() != w.received || size > w.total_bytes - w.received) {
        w.done = true;
        w.status = InternalErr(absl::StrCat("daemon sent a data chunk at offset ", d.offset(), " of ", size,
                                            " bytes; expected offset ", w.received, " of ", w.total_bytes));
        return;
      }
      if (placed == 0 && size > 0) {
        wire::CopyTransferPiece(w.buffer.get() + w.received, d.data().data(), size, w.total_bytes);
      }
      w.received += size;
      if (d.last()) {
        w.done = true;
        if (w.received != w.total_bytes) {
          w.status = InternalErr(absl::StrCat("daemon's fetch data ended at ", w.received, " of ",
                                              w.total_bytes, " bytes"));
        }
      }
      return;
    }
    case v1::ServerMessage::kAck: {
      if (shm != nullptr) {
        shm->Answered(msg.ack().request_id());
        if (msg.ack().shm_freed_size() > 0) shm->Freed(msg.ack().shm_freed().data(), msg.ack().shm_freed_size());
      }
      if (msg.ack().released_functions_size() > 0) internal::NoteReleasedFunctions(msg.ack().released_functions());
      auto it = waiters.find(msg.ack().request_id());
      if (it == waiters.end() || it->second->done) {
        for (const v1::Error& e : msg.ack().errors()) unclaimed_errors.push_back(e);
        return;
      }
      it->second->ack = msg.ack();
      it->second->done = true;
      return;
    }
    case v1::ServerMessage::kError: {
      if (shm != nullptr) shm->Answered(msg.error().request_id());
      if (msg.error().shm_freed_size() > 0 && shm != nullptr) {
        shm->Freed(msg.error().shm_freed().data(), msg.error().shm_freed_size());
      }
      auto it = waiters.find(msg.error().request_id());
      if (it == waiters.end() || it->second->done) {
        unclaimed_errors.push_back(msg.error().error());
        return;
      }
      it->second->status = wire::FromProto(msg.error().error());
      it->second->done = true;
      return;
    }
    case v1::ServerMessage::kCallback:
      callbacks.push_back(msg.callback());
      return;
    case v1::ServerMessage::kStreamEnd:
      // Nothing after it counts: end the stream now (the reads that
      // follow see its end, and report this).
      // Unavailable, as a socket stream's end record says it.
      daemon_ended = absl::UnavailableError(msg.stream_end().message().empty() ? "the daemon ended the session stream"
                                                                               : msg.stream_end().message());
      transport->Cancel();
      return;
    case v1::ServerMessage::KIND_NOT_SET:
      return;
  }
}

absl::Status Session::Impl::TakeErrors(std::vector<v1::Error> reported) {
  std::vector<v1::Error> errors;
  {
    absl::MutexLock wl(&wmu);
    errors.swap(unclaimed_errors);
  }
  for (v1::Error& e : reported) errors.push_back(std::move(e));
  if (errors.empty()) return absl::OkStatus();
  absl::Status first = wire::FromProto(errors[0]);
  if (errors.size() > 1) {
    first = MakeError(KindOf(first), absl::StrCat(first.message(), " (and ", errors.size() - 1, " more error",
                                                  errors.size() > 2 ? "s" : "", " since the last sync)"));
  }
  return first;
}

}  // namespace tensord::client
