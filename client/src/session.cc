// Session: handshake, the session stream (a writer batching requests; the
// waiting threads reading replies themselves), sync points, releases and
// counters.
#include "tensord/client/session.h"

#include <google/protobuf/arena.h>
#include <grpcpp/grpcpp.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <new>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <deque>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "autograd_internal.h"
#include "embedded_daemon.h"
#include "fetch_buffers.h"
#include "shm_pool.h"
#include "tensord/client/autograd.h"
#include "tensord/meta/errors.h"
#include "tensord/transport/shm.h"
#include "tensord/transport/socket_stream.h"
#include "tensord/v1/tensord.grpc.pb.h"
#include "tensord/wire/copy.h"
#include "tensord/wire/data_frame.h"
#include "tensord/wire/wire.h"
#include "transport.h"

namespace tensord::client {
namespace {

constexpr char kClientVersion[] = "0.1.0";

// How many forks this process is away from the one that loaded the client:
// a session opened before a fork belongs to the parent (its socket, its
// daemon, its threads), so the child must neither use it nor close it.
std::atomic<uint64_t> g_fork_generation{0};

// g_fork_generation + 1 when this process (or the one it was forked from)
// first opened a gRPC connection; 0: never. gRPC does not survive fork(): a
// child of a process whose gRPC threads (timers, pollers, event engine) ran
// has copies of their state without the threads, and a new connection there
// blocks forever (deadlines never fire) or crashes, depending on where those
// threads were at the fork. So such a child may not open sessions.
std::atomic<uint64_t> g_grpc_used_generation_plus1{0};

absl::Status CheckConnectAllowedAfterFork(absl::string_view what) {
  const uint64_t used = g_grpc_used_generation_plus1.load(std::memory_order_relaxed);
  if (used == 0 || used - 1 == g_fork_generation.load(std::memory_order_relaxed)) return absl::OkStatus();
  return RuntimeErr(absl::StrCat(
      what, ": this process (", ::getpid(), ") was forked from one that had already connected to a tensord daemon, "
      "and gRPC cannot open connections in such a child (they hang or crash). Start child processes with the "
      "'spawn' or 'forkserver' method of multiprocessing, or fork before the parent's first tensor"));
}

// SessionOptions::transport.stream_spin_us in nanoseconds: the caller's, else
// $TENSORD_STREAM_SPIN_US, else wire's default. InvalidArgument for a value
// out of range (the daemon's rule, wire::ParseStreamSpinMicros).
absl::StatusOr<int64_t> StreamSpinNanos(const SessionOptions& options) {
  int64_t us = options.transport.stream_spin_us;
  if (us > wire::kMaxStreamSpinMicros || us < -1) {
    return absl::InvalidArgumentError(absl::StrCat("SessionOptions::transport.stream_spin_us is ", us,
                                                   ": give 0 to ", wire::kMaxStreamSpinMicros,
                                                   " microseconds, or -1 for the default"));
  }
  if (us >= 0) return us * 1000;
  const char* env = std::getenv("TENSORD_STREAM_SPIN_US");
  if (env == nullptr || *env == '\0') return wire::kDefaultStreamSpinNanos;
  absl::StatusOr<int64_t> parsed = wire::ParseStreamSpinMicros(env);
  if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat("TENSORD_STREAM_SPIN_US: ", parsed.status().message()));
  return *parsed * 1000;
}

// Whether environment variable `name` is "0": a feature that the options
// leave on is turned off for this process.
bool EnvSaysOff(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && absl::string_view(v) == "0";
}

void CountForksOnce() {
  static const bool registered = [] {
    ::pthread_atfork(nullptr, nullptr, [] { g_fork_generation.fetch_add(1, std::memory_order_relaxed); });
    return true;
  }();
  (void)registered;
}

// One blocking request: completed by whichever thread reads its reply.
struct Waiter {
  bool done = false;
  absl::Status status;
  // Fetch
  bool have_meta = false;
  TensorMeta meta;
  uint64_t total_bytes = 0;
  // Streamed data: `received` of total_bytes bytes so far, in `buffer`
  // (allocated with the first chunk, not zero-filled).
  std::shared_ptr<char> buffer;
  uint64_t received = 0;
  std::vector<v1::Error> earlier_errors;  // FetchData.errors of the first chunk
  uint32_t shm_requested = 0;  // the segment offered to the daemon (0: none)
  uint32_t shm_segment = 0;    // the daemon put the data there
  // Sync / Describe
  v1::Ack ack;
};

// Function ids whose daemon node is gone (Ack.released_functions of every
// session), until TakeReleasedFunctions.
struct ReleasedFunctions {
  absl::Mutex mu;
  std::vector<uint64_t> ids ABSL_GUARDED_BY(mu);
};
ReleasedFunctions& Released() {
  static ReleasedFunctions* r = new ReleasedFunctions();
  return *r;
}

// The process-wide BackwardCallback handler.
struct HandlerSlot {
  absl::Mutex mu;
  BackwardCallbackHandler handler ABSL_GUARDED_BY(mu);
};
HandlerSlot& Handler() {
  static HandlerSlot* h = new HandlerSlot();
  return *h;
}

// The seed of the last ManualSeed, for sessions opened later.
struct SeedSlot {
  absl::Mutex mu;
  std::optional<uint64_t> seed ABSL_GUARDED_BY(mu);
};
SeedSlot& Seed() {
  static SeedSlot* s = new SeedSlot();
  return *s;
}

absl::Status GrpcError(absl::string_view what, const std::string& address, const grpc::Status& s) {
  return RuntimeErr(absl::StrCat(what, " (tensord daemon at ", address, "): ", s.error_message(), " (gRPC code ",
                                 static_cast<int>(s.error_code()), ")"));
}

// Batches of up to batch_limit small requests fit in the first block or two.
// The first block (`initial_block`, kBatchArenaBytes) belongs to the session
// and stays across resets: a batch that fits costs no malloc and free of it.
constexpr size_t kBatchArenaBytes = 64 << 10;
google::protobuf::ArenaOptions ArenaOptionsForBatches(char* initial_block) {
  google::protobuf::ArenaOptions o;
  o.initial_block = initial_block;
  o.initial_block_size = kBatchArenaBytes;
  o.start_block_size = 64 << 10;
  o.max_block_size = 1 << 20;
  return o;
}

std::chrono::system_clock::time_point DeadlineIn(int ms) {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(ms);
}

}  // namespace

struct Session::Impl {
  // A request sent for its reply: its id and the waiter the reply completes.
  struct Sent {
    uint64_t id = 0;
    std::shared_ptr<Waiter> waiter;
  };

  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Tensord::Stub> stub;
  // The session stream: the gRPC stream, or the same-host or TCP stream
  // beside it (transport.h). Set by Start before the stream is used; closed
  // by Close, and kept (its kind still answers).
  std::unique_ptr<internal::Transport> transport;
  std::string token;
  internal::EmbeddedDaemon daemon;
  std::atomic<bool> closed{false};
  // g_fork_generation when the session was made, and that process's pid.
  uint64_t fork_generation = g_fork_generation.load(std::memory_order_relaxed);
  pid_t owner_pid = ::getpid();
  bool Inherited() const { return fork_generation != g_fork_generation.load(std::memory_order_relaxed); }

  // Writer side: the pending batch, ids and counters.
  absl::Mutex mu;
  // The batch is built on an arena that is reset after each flush: a
  // streamed op costs bump allocations, not a malloc and a free for each
  // of its messages and strings.
  std::unique_ptr<char[]> arena_block{new char[kBatchArenaBytes]};  // declared first: outlives `arena`
  google::protobuf::Arena arena ABSL_GUARDED_BY(mu){ArenaOptionsForBatches(arena_block.get())};
  v1::ClientMessage* pending ABSL_GUARDED_BY(mu) = google::protobuf::Arena::CreateMessage<v1::ClientMessage>(&arena);
  uint64_t next_handle ABSL_GUARDED_BY(mu) = 1;
  uint64_t next_call_id ABSL_GUARDED_BY(mu) = 1;
  uint64_t next_request_id ABSL_GUARDED_BY(mu) = 1;
  // Call sites interned on this stream (OpCall.call_site_id), by text.
  absl::flat_hash_map<std::string, uint32_t> call_site_ids ABSL_GUARDED_BY(mu);
  // The same ids for C++ call sites (CallSite::Current()) by file pointer
  // and line, so a repeated call builds no text: the file's name is kept
  // and compared too (a pointer may be reused by a library loaded later).
  struct LineSite {
    std::string file;
    uint32_t id = 0;
  };
  absl::flat_hash_map<std::pair<const char*, int>, LineSite> line_site_ids ABSL_GUARDED_BY(mu);
  Stats stats ABSL_GUARDED_BY(mu);
  absl::Status write_error ABSL_GUARDED_BY(mu);
  // The time flush: when the pending batch got its first request.
  std::chrono::steady_clock::time_point batch_started ABSL_GUARDED_BY(mu);
  bool batch_open ABSL_GUARDED_BY(mu) = false;
  // When a batch last opened (the flusher goes idle kFlusherIdleAfter later).
  std::chrono::steady_clock::time_point last_batch_open ABSL_GUARDED_BY(mu);
  static constexpr std::chrono::milliseconds kFlusherIdleAfter{100};
  std::chrono::microseconds flush_interval{0};
  // The open batch's interval: flush_interval, or kIdleFlushInterval when
  // the batch opened while the daemon had nothing of this session's to run.
  std::chrono::microseconds batch_interval ABSL_GUARDED_BY(mu){0};
  static constexpr std::chrono::microseconds kIdleFlushInterval{50};
  // Set when a wait for the daemon returned (everything sent before it is
  // done), cleared when the next batch goes out.
  std::atomic<bool> daemon_idle{false};
  // The sync request (a peek: Sync.peek) that went out with the last
  // adopting upload (Session::Upload), as long as nothing was sent after
  // it: Synchronize then waits for its reply instead of sending another
  // request, unless the reply says errors wait to be reported.
  std::optional<Sent> upload_sync ABSL_GUARDED_BY(mu);

  // The flusher thread sleeps on flush_cv (with mu). While batches keep
  // opening it wakes every flush_interval by itself and sends a batch that
  // is due; after kFlusherIdleAfter without a batch opening it sleeps until
  // signalled (flusher_idle), and only opening a batch then signals it. So a
  // round trip every few microseconds costs no wake-up of this thread (a
  // futex wake and a context switch that would compete with the daemon for
  // a core), and an idle session no timer either.
  absl::CondVar flush_cv;
  bool flush_stop ABSL_GUARDED_BY(mu) = false;
  bool flusher_idle ABSL_GUARDED_BY(mu) = false;
  std::thread flusher;

  // Releases queued by ~TensorImpl (any thread).
  absl::Mutex release_mu;
  std::vector<uint64_t> releases ABSL_GUARDED_BY(release_mu);
  // The bytes of the tensors in `releases` (written under release_mu, read
  // without it by ReleaseBeforeLocked: a stale value only moves the
  // releases one request later or earlier).
  std::atomic<int64_t> release_bytes{0};

  // Reader side: waits in flight and what the stream's end said. There is no
  // reader thread: the daemon only writes replies to requests a client thread
  // waits for, so a waiting thread reads the stream itself (one at a time,
  // `reading`), completing every waiter a message is for, until its own
  // request is done; then the next waiting thread takes over. This saves the
  // thread handoff (a futex wake and a context switch) on every round trip.
  absl::Mutex wmu;
  bool reading ABSL_GUARDED_BY(wmu) = false;
  v1::ServerMessage read_buf;  // used by the reading thread only
  uint64_t placed = 0;          // the same: bytes of read_buf's FetchData that PlaceData took
  std::shared_ptr<char> placed_buffer;  // the same: the buffer they went to, alive until the message is handled
  absl::flat_hash_map<uint64_t, std::shared_ptr<Waiter>> waiters ABSL_GUARDED_BY(wmu);
  std::deque<v1::BackwardCallback> callbacks ABSL_GUARDED_BY(wmu);
  std::vector<v1::Error> unclaimed_errors ABSL_GUARDED_BY(wmu);
  bool reader_done ABSL_GUARDED_BY(wmu) = false;
  absl::Status stream_status ABSL_GUARDED_BY(wmu);
  // Why the daemon ended the gRPC stream (a StreamEnd message; a socket
  // stream's end record gives it instead): what the stream's end reports.
  absl::Status daemon_ended ABSL_GUARDED_BY(wmu);

  // Tensors whose .grad the daemon may change, by handle.
  absl::Mutex grad_mu;
  absl::flat_hash_map<uint64_t, std::weak_ptr<TensorImpl>> grad_targets ABSL_GUARDED_BY(grad_mu);
  // Set once the first tensor is registered: until then a release skips
  // grad_mu (a session without autograd never takes it). A registration
  // happens before its tensor's release (the impl is alive while it is
  // registered), so a release of a registered handle always sees it set.
  std::atomic<bool> any_grad_targets{false};

  std::string address;
  uint64_t session_id = 0;
  // The shared-memory side channel (null: everything goes through the stream).
  std::shared_ptr<internal::ShmPool> shm;

  absl::Status Usable() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (Inherited()) {
      return RuntimeErr(absl::StrCat(Session::Label(session_id), " belongs to process ", owner_pid,
                                     "; this process (", ::getpid(),
                                     ") was forked from it and cannot use it: start child processes with the "
                                     "'spawn' or 'forkserver' method of multiprocessing"));
    }
    if (closed.load()) return RuntimeErr(absl::StrCat(Session::Label(session_id), " is closed"));
    if (!write_error.ok()) return write_error;
    return absl::OkStatus();
  }

  absl::Status StreamLost() {
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

  // Appends the queued releases to the batch. Every request that names a
  // released handle is in the batch already (or sent): the handle's last
  // reference went after it was issued.
  void AppendReleasesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    absl::MutexLock rl(&release_mu);
    if (!releases.empty()) {
      v1::Release* r = pending->add_requests()->mutable_release();
      r->mutable_handles()->Add(releases.begin(), releases.end());
      stats.releases += static_cast<int64_t>(releases.size());
      releases.clear();
      release_bytes.store(0, std::memory_order_relaxed);
    }
  }

  // Queued releases go before a request that allocates at least
  // kReleaseFirstBytes, or before any request that allocates once the
  // tensors queued hold that much, so that what they free no longer counts
  // against the session's memory limit when the daemon allocates for it
  // (a large tensor deleted near the limit, then a small op). Otherwise
  // they wait for the batch's end (one Release request for many handles).
  static constexpr int64_t kReleaseFirstBytes = int64_t{64} << 10;
  void ReleaseBeforeLocked(int64_t allocates_bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (allocates_bytes >= kReleaseFirstBytes ||
        (allocates_bytes > 0 && release_bytes.load(std::memory_order_relaxed) >= kReleaseFirstBytes)) {
      AppendReleasesLocked();
    }
  }

  // Sends the pending batch (with queued releases) as one message. The
  // caller sends something after the last adopting upload's sync (the batch,
  // or messages of its own once the batch is out, as a streamed upload's
  // chunks), so that sync no longer covers everything sent: given up here
  // even when the batch is empty.
  absl::Status FlushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
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

  absl::Status MaybeFlushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
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

  // The flusher thread: sends a batch that stayed open flush_interval without
  // another call to send it (errors stay in write_error for the next call).
  void FlushLoop() {
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

  void StopFlusher() {
    {
      absl::MutexLock l(&mu);
      flush_stop = true;
      flush_cv.Signal();
    }
    if (flusher.joinable()) flusher.join();
  }

  // Gives up waiting for upload_sync (a message goes out after it). Nothing
  // is lost: a peek's reply carries no errors (they stay in the daemon for
  // the next sync point), and one read later finds no waiter.
  void DropUploadSyncLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (!upload_sync.has_value()) return;
    Forget(*upload_sync);
    upload_sync.reset();
  }

  // Registers a waiter for a new request id (call with mu held, before the
  // request is flushed).
  std::shared_ptr<Waiter> AddWaiterLocked(uint64_t* id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
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

  // The sending half of every round trip: registers a waiter for a new
  // request id, has `add(id, waiter)` append the request that names the id
  // to the pending batch, and flushes the batch (the request goes out now,
  // with whatever was pending). Returns what to wait for (Wait,
  // WaitOrCallback); when the flush fails, the waiter is forgotten and the
  // flush's error returned.
  absl::StatusOr<Sent> SendForReplyLocked(absl::FunctionRef<void(uint64_t id, Waiter& w)> add)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    Sent sent;
    sent.waiter = AddWaiterLocked(&sent.id);
    add(sent.id, *sent.waiter);
    if (absl::Status st = FlushLocked(); !st.ok()) {
      Forget(sent);
      return st;
    }
    return sent;
  }

  // Drops the waiter of `sent` (its reply, if one comes, completes nothing).
  void Forget(const Sent& sent) ABSL_LOCKS_EXCLUDED(wmu) {
    absl::MutexLock wl(&wmu);
    waiters.erase(sent.id);
  }

  // Reads server messages until `done(arg)` holds or the stream ends; when
  // another thread is reading, waits for it instead (it completes our waiter
  // too, or hands the reading over when its own request is done). wmu is
  // released while blocked in Read.
  template <typename T>
  void PumpLocked(bool (*done)(T*), T* arg) ABSL_EXCLUSIVE_LOCKS_REQUIRED(wmu) {
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

  // Blocks until the reply to `sent` came (or the stream ended); then its
  // waiter is forgotten. Returns the reply's status.
  absl::Status Wait(const Sent& sent) {
    absl::MutexLock wl(&wmu);
    PumpLocked(+[](Waiter* w) { return w->done; }, sent.waiter.get());
    waiters.erase(sent.id);
    daemon_idle.store(true, std::memory_order_relaxed);
    return sent.waiter->status;
  }

  // Blocks until the reply to `sent` came or a BackwardCallback arrives;
  // returns the callback (to be run by the caller without locks), or
  // nullopt once the reply came. The waiter stays (Forget it).
  std::optional<v1::BackwardCallback> WaitOrCallback(const Sent& sent) {
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

  // Reads (or waits for the reading thread) until the daemon ends the stream,
  // at most `timeout`; then cancels it. Used by Close after WritesDone.
  void DrainLocked(absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(wmu) {
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

  // The stream ended (Read returned false; `st` is what Finish said): fail
  // every wait still in flight.
  void EndOfStreamLocked(grpc::Status st) ABSL_EXCLUSIVE_LOCKS_REQUIRED(wmu) {
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
      stream_status = GrpcError(
          absl::StrCat(Session::Label(session_id), ": the session stream broke (the daemon may have stopped)"),
          address, st);
    } else {
      stream_status = GrpcError(absl::StrCat(Session::Label(session_id), ": the session stream failed"), address, st);
    }
    for (auto& [id, w] : waiters) {
      if (!w->done) {
        w->done = true;
        w->status = stream_status;
      }
    }
  }

  // Where the `n` data bytes of a FetchData chunk go (called by the reading
  // thread while it parses the chunk, before HandleMessageLocked): into the
  // waiting fetch's buffer at the chunk's offset, when the chunk fits it;
  // else nullptr (the bytes stay in the message, and HandleMessageLocked
  // reports what is wrong).
  wire::Placement PlaceData(const v1::FetchData& d, size_t n) ABSL_LOCKS_EXCLUDED(wmu) {
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

  // Completes the waiter `msg` answers. Fetch data is in the waiter's buffer
  // (PlaceData) or moved out of `msg`.
  void HandleMessageLocked(v1::ServerMessage* mutable_msg) ABSL_EXCLUSIVE_LOCKS_REQUIRED(wmu) {
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
        if (msg.ack().released_functions_size() > 0) {
          ReleasedFunctions& r = Released();
          absl::MutexLock rl(&r.mu);
          r.ids.insert(r.ids.end(), msg.ack().released_functions().begin(), msg.ack().released_functions().end());
        }
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

  // The errors no waiter claimed, then `reported` (a sync's or a fetch's
  // earlier errors), as one status: the first, with a count of the others.
  absl::Status TakeErrors(std::vector<v1::Error> reported) {
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

  int batch_limit = 128;
};

// ---------------------------------------------------------------- globals

namespace {

struct Globals {
  absl::Mutex mu;
  std::shared_ptr<Session> default_session ABSL_GUARDED_BY(mu);
  std::vector<std::weak_ptr<Session>> all ABSL_GUARDED_BY(mu);
  bool atexit_registered ABSL_GUARDED_BY(mu) = false;
};

Globals& G() {
  static Globals* g = new Globals();  // never destroyed: used from atexit
  return *g;
}

thread_local std::shared_ptr<Session> t_session;
std::atomic<int64_t> g_meta_ops{0};

void RegisterSession(const std::shared_ptr<Session>& s) {
  Globals& g = G();
  absl::MutexLock l(&g.mu);
  g.all.erase(std::remove_if(g.all.begin(), g.all.end(), [](const std::weak_ptr<Session>& w) { return w.expired(); }),
              g.all.end());
  g.all.push_back(s);
  if (!g.atexit_registered) {
    g.atexit_registered = true;
    std::atexit([] { ShutdownAll(); });
  }
}

}  // namespace

void CountMetaOp() { g_meta_ops.fetch_add(1, std::memory_order_relaxed); }
int64_t MetaOpsRun() { return g_meta_ops.load(); }

void ShutdownAll() {
  std::vector<std::shared_ptr<Session>> live;
  {
    Globals& g = G();
    absl::MutexLock l(&g.mu);
    for (auto& w : g.all) {
      if (auto s = w.lock()) live.push_back(std::move(s));
    }
    g.all.clear();
  }
  for (auto& s : live) s->Close().IgnoreError();
}

std::shared_ptr<Session> DefaultSessionIfAny() {
  Globals& g = G();
  absl::MutexLock l(&g.mu);
  return g.default_session;
}

void SetDefaultSession(std::shared_ptr<Session> session) {
  Globals& g = G();
  absl::MutexLock l(&g.mu);
  g.default_session = std::move(session);
}

absl::StatusOr<std::shared_ptr<Session>> CurrentSession() {
  if (t_session != nullptr && !t_session->closed()) return t_session;
  if (std::shared_ptr<Session> d = DefaultSessionIfAny(); d != nullptr && !d->closed()) return d;
  // Create one (outside the lock: Connect/SpawnEmbedded take it to register).
  static absl::Mutex create_mu(absl::kConstInit);
  absl::MutexLock create(&create_mu);  // one creation at a time
  if (std::shared_ptr<Session> d = DefaultSessionIfAny(); d != nullptr && !d->closed()) return d;
  absl::StatusOr<std::shared_ptr<Session>> s;
  if (const char* addr = std::getenv("TENSORD_ADDRESS"); addr != nullptr && *addr != '\0') {
    s = Session::Connect(addr);
  } else {
    s = Session::SpawnEmbedded();
  }
  if (!s.ok()) return s.status();
  SetDefaultSession(*s);
  return *s;
}

std::shared_ptr<Session> ExchangeThreadSession(std::shared_ptr<Session> session) {
  std::shared_ptr<Session> prev = std::move(t_session);
  t_session = std::move(session);
  return prev;
}

SessionGuard::SessionGuard(std::shared_ptr<Session> session) : previous_(ExchangeThreadSession(std::move(session))) {}
SessionGuard::~SessionGuard() { ExchangeThreadSession(std::move(previous_)); }

// ---------------------------------------------------------------- Session

Session::Session(SessionOptions options, std::string address)
    : options_(std::move(options)), address_(std::move(address)), impl_(std::make_unique<Impl>()) {
  CountForksOnce();
  impl_->address = address_;
  impl_->batch_limit = options_.batch_limit > 0 ? options_.batch_limit : 1;
}

Session::~Session() {
  if (impl_ != nullptr && impl_->Inherited()) {
    // A fork's copy of the parent's session: its threads do not exist here
    // and its socket and daemon are the parent's. Left as it is (a copy of
    // the parent's memory), not torn down.
    (void)impl_.release();
    return;
  }
  Close().IgnoreError();
}

// $TENSORD_NO_DAEMON (set by `tensord check`, which runs a script on meta
// tensors only): refuse to connect or spawn, so nothing can start a daemon.
static absl::Status CheckDaemonAllowed(absl::string_view what) {
  const char* env = std::getenv("TENSORD_NO_DAEMON");
  if (env == nullptr || *env == '\0' || absl::string_view(env) == "0") return absl::OkStatus();
  return RuntimeErr(absl::StrCat(what, ": no daemon may be used here ($TENSORD_NO_DAEMON is set, as `tensord check` ",
                                 "does): only meta tensors work; something needed real data or a non-meta device"));
}

absl::StatusOr<std::shared_ptr<Session>> Session::Connect(absl::string_view address, SessionOptions options) {
  TD_RETURN_IF_ERROR(CheckDaemonAllowed("connect"));
  TD_RETURN_IF_ERROR(CheckConnectAllowedAfterFork("connect"));
  if (address.empty()) return RuntimeErr("Connect: empty daemon address (expected unix:/path or host:port)");
  if (address.find(':') == absl::string_view::npos) {
    // gRPC would look a bare socket path up as a host name (port 443) and
    // fail with a DNS error that does not say what was meant.
    return RuntimeErr(absl::StrCat("Connect: '", address, "' is not a daemon address (expected unix:/path or host:port",
                                   address.find('/') != absl::string_view::npos
                                       ? absl::StrCat("; for this socket write unix:", address, ")")
                                       : ")"));
  }
  std::shared_ptr<Session> s(new Session(std::move(options), std::string(address)));
  TD_RETURN_IF_ERROR(s->Start());
  RegisterSession(s);
  return s;
}

absl::StatusOr<std::shared_ptr<Session>> Session::SpawnEmbedded(SessionOptions options) {
  TD_RETURN_IF_ERROR(CheckDaemonAllowed("spawning an embedded daemon"));
  TD_RETURN_IF_ERROR(CheckConnectAllowedAfterFork("spawning an embedded daemon"));
  TD_ASSIGN_OR_RETURN(std::string binary, internal::FindDaemonBinary(options.daemon_binary));
  TD_ASSIGN_OR_RETURN(internal::EmbeddedDaemon d, internal::StartEmbeddedDaemon(binary, options.spawn_timeout_ms));
  std::shared_ptr<Session> s(new Session(std::move(options), d.address));
  s->impl_->daemon = d;
  absl::Status st = s->Start();
  if (!st.ok()) {
    internal::StopEmbeddedDaemon(s->impl_->daemon);
    return st;
  }
  RegisterSession(s);
  return s;
}

absl::Status Session::Start() {
  Impl& im = *impl_;
  const absl::StatusOr<int64_t> spin_ns = StreamSpinNanos(options_);
  if (!spin_ns.ok()) return spin_ns.status();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  // No transparent retries: gRPC would keep every message sent on the
  // stream (up to 256 KiB of them) for a replay until the daemon's first
  // reply, holding on to an upload's borrowed bytes, which Upload waits for
  // (an upload of 64-256 KiB as the stream's first message never returned).
  // A session stream is never replayed anyway: its requests are not
  // idempotent.
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  uint64_t never = 0;
  g_grpc_used_generation_plus1.compare_exchange_strong(never, g_fork_generation.load(std::memory_order_relaxed) + 1);
  im.channel = grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args);
  im.stub = v1::Tensord::NewStub(im.channel);

  const OpTable& table = OpTable::Get();
  {
    v1::HandshakeRequest req;
    req.set_protocol_version(wire::kProtocolVersion);
    req.set_client_version(kClientVersion);
    req.set_op_table_digest(table.digest());
    for (std::string& line : table.Describe()) req.add_op_table(std::move(line));
    v1::HandshakeResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineIn(options_.connect_timeout_ms));
    grpc::Status st = im.stub->Handshake(&ctx, req, &resp);
    if (!st.ok()) return GrpcError("cannot connect: the handshake failed", address_, st);
    if (!resp.accepted()) {
      return RuntimeErr(absl::StrCat("the tensord daemon at ", address_, " refused this client: ", resp.refusal()));
    }
    if (resp.protocol_version() != wire::kProtocolVersion) {
      return RuntimeErr(absl::StrCat("the tensord daemon at ", address_, " speaks protocol version ",
                                     resp.protocol_version(), ", this client speaks ", wire::kProtocolVersion));
    }
    if (resp.op_table_digest() != table.digest()) {
      return RuntimeErr(absl::StrCat("the tensord daemon at ", address_, " has a different op table (digest ",
                                     absl::Hex(resp.op_table_digest()), ", this client has ",
                                     absl::Hex(table.digest()), "); rebuild the client and the daemon together"));
    }
  }
  {
    v1::OpenSessionRequest req;
    req.set_client_name(options_.client_name);
    req.set_op_table_digest(table.digest());
    v1::OpenSessionResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineIn(options_.connect_timeout_ms));
    grpc::Status st = im.stub->OpenSession(&ctx, req, &resp);
    if (!st.ok()) return GrpcError("cannot open a session", address_, st);
    session_id_ = resp.session_id();
    im.session_id = session_id_;
    im.token = resp.token();
    // What the daemon runs on: told to session holders only.
    daemon_info_.server_version = resp.server_version();
    daemon_info_.session_memory_limit_bytes = resp.session_memory_limit_bytes();
    for (const v1::DeviceInfo& d : resp.devices()) daemon_info_.devices.push_back(d.name());
    // The address gRPC's resolver chose ("ipv4:127.0.0.1:7070",
    // "ipv6:[::1]:7070"): the TCP stream connects to the same daemon there.
    daemon_peer_ = ctx.peer();
  }
  predict_backward_ = options_.predict_backward && !EnvSaysOff("TENSORD_PREDICT_BACKWARD");
  const bool shm_allowed = options_.transport.shared_memory && !EnvSaysOff("TENSORD_SHM");
  const bool sock_allowed = options_.transport.same_host_stream && !EnvSaysOff("TENSORD_SAME_HOST_STREAM");
  // Same host over a Unix socket: the shared-memory side channel and the
  // same-host stream, if the daemon offers them (silently gRPC otherwise).
  if (absl::StartsWith(address_, "unix:")) {
    absl::string_view path = absl::string_view(address_).substr(5);
    if (absl::StartsWith(path, "//")) path.remove_prefix(2);
    const std::string channel = wire::ShmSocketPath(path);
    // The side channel gets the session's token: only a peer running as the
    // daemon's user may have it. That user is the owner of the socket gRPC
    // just reached the daemon on (the daemon made it; anyone may see its
    // owner). A socket that cannot be looked at: no side channel.
    struct stat st;
    const bool owner_known = ::stat(std::string(path).c_str(), &st) == 0;
    // Someone else listening at the channel's path is an attack or a badly
    // broken setup, not a reason to fall back quietly: connect fails, saying
    // so (the session's token never went there).
    const auto refused = [&](const absl::Status& why) {
      return RuntimeErr(absl::StrCat("the tensord daemon at ", address_, ": ", why.message()));
    };
    if (shm_allowed && owner_known) {
      absl::StatusOr<std::shared_ptr<internal::ShmPool>> pool =
          internal::ShmPool::Connect(channel, session_id_, im.token, st.st_uid, options_.transport.shm_pool_bytes);
      if (pool.ok()) im.shm = *std::move(pool);
      if (absl::IsPermissionDenied(pool.status())) return refused(pool.status());
    }
    if (sock_allowed && owner_known) {
      // The hello attaches the stream: no attach message follows.
      absl::StatusOr<std::unique_ptr<internal::Transport>> t =
          internal::ConnectSameHostTransport(channel, session_id_, im.token, st.st_uid, *spin_ns);
      if (absl::IsPermissionDenied(t.status())) return refused(t.status());
      if (t.ok()) im.transport = *std::move(t);
    }
  } else if (options_.transport.tcp_stream && !EnvSaysOff("TENSORD_TCP_STREAM")) {
    // Over TCP: the stream on a connection of its own to the same port (the
    // hello attaches it), gRPC when that fails.
    // Where gRPC connected first: a name may resolve to addresses gRPC's
    // resolver and getaddrinfo order differently (localhost to ::1 or to
    // 127.0.0.1), and only one of them may be the daemon's.
    const int timeout_ms = std::max(1, std::min(options_.connect_timeout_ms, 10000));
    // Through a proxy (gRPC's peer is not an address the name resolves to)
    // the stream stays on gRPC.
    absl::StatusOr<std::unique_ptr<internal::Transport>> t =
        internal::ConnectTcpTransport(address_, session_id_, im.token, timeout_ms, daemon_peer_, *spin_ns);
    if (t.ok()) im.transport = *std::move(t);
  }
  if (im.transport == nullptr) TD_RETURN_IF_ERROR(AttachGrpcStream());
  return StartStreaming();
}

absl::Status Session::AttachGrpcStream() {
  Impl& im = *impl_;
  im.transport = internal::StartGrpcTransport(im.channel);
  // The attach carries a sync, and connect waits for its reply: a daemon
  // whose gRPC threads are all held by other session streams refuses the
  // call (ResourceExhausted, naming the streams that hold none), and that
  // is then the connect's error rather than the first sync point's. One
  // round trip per connect, on the gRPC stream only; not counted in
  // stats().round_trips (the caller waits for nothing of its own).
  absl::StatusOr<Impl::Sent> sync;
  {
    absl::MutexLock l(&im.mu);
    v1::Attach* attach = im.pending->mutable_attach();
    attach->set_session_id(session_id_);
    attach->set_token(im.token);
    sync = im.SendForReplyLocked(
        [&](uint64_t id, Waiter&) { im.pending->add_requests()->mutable_sync()->set_request_id(id); });
  }
  // A failed write: what the daemon said as it ended the call (StreamLost).
  absl::Status attached = sync.ok() ? im.Wait(*sync) : sync.status();
  if (!attached.ok()) {
    Close().IgnoreError();
    return attached;
  }
  return absl::OkStatus();
}

absl::Status Session::StartStreaming() {
  Impl& im = *impl_;
  std::optional<uint64_t> seed;
  {
    SeedSlot& ss = Seed();
    absl::MutexLock l(&ss.mu);
    seed = ss.seed;
  }
  if (seed.has_value()) TD_RETURN_IF_ERROR(SendManualSeed(*seed));
  int flush_us = options_.flush_interval_us;
  if (flush_us < 0) {  // not chosen by the caller: the environment's, else 2 ms
    const char* env = std::getenv("TENSORD_FLUSH_US");
    flush_us = env != nullptr && *env != '\0' ? std::atoi(env) : 2000;
  }
  if (flush_us > 0) {
    {
      absl::MutexLock l(&im.mu);
      im.flush_interval = std::chrono::microseconds(flush_us);
    }
    im.flusher = std::thread([&im] {
      pthread_setname_np(pthread_self(), "tensord-flush");  // shows in top -H and /proc/PID/task
      im.FlushLoop();
    });
  }
  return absl::OkStatus();
}

bool Session::closed() const { return impl_->closed.load(); }

int Session::daemon_pid() const { return impl_->daemon.pid; }

// How long Close waits for a thread that is sending before it ends the
// stream under it.
constexpr absl::Duration kCloseWaitsForWriters = absl::Seconds(5);

absl::Status Session::Close() {
  Impl& im = *impl_;
  if (im.Inherited()) {  // the parent's (see ~Session): closing it here would end the parent's stream
    im.closed.store(true);
    return absl::OkStatus();
  }
  {
    // A thread that holds mu while it sends (an upload's chunks) blocks for
    // as long as the daemon does not read: a daemon that is stopped or hung,
    // a network that stalls. Close waits for it kCloseWaitsForWriters at
    // most, then ends the stream under it (its send fails and it lets go).
    const absl::Time give_up = absl::Now() + kCloseWaitsForWriters;
    while (!im.mu.TryLock()) {
      if (absl::Now() >= give_up) {
        if (im.transport != nullptr) im.transport->Cancel();
        im.mu.Lock();
        break;
      }
      absl::SleepFor(absl::Milliseconds(1));
    }
    const bool already = im.closed.exchange(true);
    im.mu.Unlock();
    if (already) return absl::OkStatus();
  }
  im.StopFlusher();
  // CloseSession first (the stream is still attached), then end the stream.
  // A daemon that already dropped the session (NOT_FOUND) or went away
  // (UNAVAILABLE) has nothing left to free.
  absl::Status result;
  if (im.stub != nullptr && session_id_ != 0) {
    v1::CloseSessionRequest req;
    req.set_session_id(session_id_);
    req.set_token(im.token);
    v1::CloseSessionResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineIn(5000));
    grpc::Status st = im.stub->CloseSession(&ctx, req, &resp);
    if (!st.ok() && st.error_code() != grpc::StatusCode::UNAVAILABLE &&
        st.error_code() != grpc::StatusCode::NOT_FOUND) {
      result = GrpcError("closing the session failed", address_, st);
    }
  }
  {
    absl::MutexLock l(&im.mu);
    if (im.transport != nullptr) im.transport->CloseWrites();
  }
  if (im.transport != nullptr) {
    // Read to the end of the stream (the daemon ends it after CloseSession
    // or WritesDone) so that Finish runs; cancel a stream that lingers.
    absl::MutexLock wl(&im.wmu);
    im.DrainLocked(absl::Seconds(3));
  }
  {
    // Fail any wait still in flight (another thread may block on it).
    absl::MutexLock wl(&im.wmu);
    for (auto& [id, w] : im.waiters) {
      if (!w->done) {
        w->done = true;
        w->status = RuntimeErr(absl::StrCat(Label(session_id_), " is closed"));
      }
    }
  }
  {
    absl::MutexLock l(&im.mu);
    if (im.transport != nullptr) im.transport->Close();
    im.stub.reset();
    im.channel.reset();
  }
  internal::TrimFetchBufferCache();  // freed fetch buffers go back to the system, as the daemon's cache does
  if (im.shm != nullptr) im.shm->Close();  // lent segments stay mapped until released
  internal::StopEmbeddedDaemon(im.daemon);
  {
    absl::MutexLock rl(&im.release_mu);
    im.releases.clear();
  }
  return result;
}

Stats Session::stats() const {
  absl::MutexLock l(&impl_->mu);
  Stats s = impl_->stats;
  if (impl_->shm != nullptr) s.shm_segments_created = impl_->shm->segments_created();
  return s;
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

absl::StatusOr<std::vector<Tensor>> Session::EnqueueCall(const OpEntry& op, absl::Span<const Value> args,
                                                         absl::Span<const Tensor> tensor_args,
                                                         absl::Span<TensorMeta> outputs, const CallSite& site,
                                                         bool record_grad,
                                                         const std::vector<std::optional<Tensor>>& write_results) {
  bool unknown_tensor = false;
  auto handle_of = [&](const TensorMeta* m) -> uint64_t {
    if (m == nullptr) return 0;
    for (const Tensor& t : tensor_args) {
      if (&t.meta() == m) return t.handle();
    }
    unknown_tensor = true;
    return 0;
  };
  auto written = [&](size_t i) { return i < write_results.size() && write_results[i].has_value(); };
  // The site's text (resolved by the op's caller), or a C++ file:line site
  // (Produce leaves those unresolved), looked up by file and line first.
  const bool line_site = site.text.empty() && site.file != nullptr;

  Impl& im = *impl_;
  absl::InlinedVector<uint64_t, 2> handles(outputs.size());
  {
    absl::MutexLock l(&im.mu);
    TD_RETURN_IF_ERROR(im.Usable());
    int64_t output_bytes = 0;
    for (const TensorMeta& m : outputs) {
      // An estimate (expanded views count more than they hold): saturated, not wrapped.
      const int64_t b = SaturatingBytes(m.numel(), m.itemsize());
      if (__builtin_add_overflow(output_bytes, b, &output_bytes)) output_bytes = std::numeric_limits<int64_t>::max();
    }
    im.ReleaseBeforeLocked(output_bytes);
    // Built in place on the batch's arena.
    v1::OpCall* call = im.pending->add_requests()->mutable_call();
    for (const Value& v : args) {
      absl::Status st = wire::EncodeValue(v, handle_of, call->add_args());
      if (!st.ok() || unknown_tensor) {
        im.pending->mutable_requests()->RemoveLast();
        TD_RETURN_IF_ERROR(st);
        TD_INTERNAL_CHECK(!unknown_tensor, op.full_name(), ": a tensor argument without a handle");
      }
    }
    call->set_op_id(op.id);
    // Interned: each site's text travels once per stream, then its id.
    Impl::LineSite* line = nullptr;
    if (line_site) {
      // At most kMaxCallSiteIds entries (a program's lines are few, but
      // libraries loaded again and again bring new file pointers).
      const std::pair<const char*, int> key(site.file, site.line);
      if (auto it = im.line_site_ids.find(key); it != im.line_site_ids.end()) {
        line = &it->second;
      } else if (im.line_site_ids.size() < wire::kMaxCallSiteIds) {
        line = &im.line_site_ids[key];
      }
      if (line != nullptr && line->id != 0 && line->file != site.file) line->id = 0;  // another file, same address
    }
    if (line != nullptr && line->id != 0) {
      call->set_call_site_id(line->id);
    } else {
      std::string built_site;
      const std::string& site_text = line_site ? (built_site = site.Text()) : site.text;
      if (auto it = im.call_site_ids.find(site_text); it != im.call_site_ids.end()) {
        call->set_call_site_id(it->second);
        if (line != nullptr) *line = Impl::LineSite{site.file, it->second};
      } else {
        call->set_call_site(site_text);
        if (im.call_site_ids.size() < wire::kMaxCallSiteIds) {
          const uint32_t id = static_cast<uint32_t>(im.call_site_ids.size()) + 1;
          im.call_site_ids.emplace(site_text, id);
          call->set_call_site_id(id);
          if (line != nullptr) *line = Impl::LineSite{site.file, id};
        }
      }
    }
    call->set_record_grad(record_grad);
    call->set_call_id(im.next_call_id++);
    for (size_t i = 0; i < handles.size(); ++i) {
      handles[i] = written(i) ? 0 : im.next_handle++;
      call->add_outputs(handles[i]);
    }
    ++im.stats.ops_issued;
    TD_RETURN_IF_ERROR(im.MaybeFlushLocked());
  }
  std::vector<Tensor> result;
  result.reserve(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (written(i)) {
      result.push_back(*write_results[i]);
    } else {
      result.emplace_back(std::make_shared<TensorImpl>(shared_from_this(), handles[i], std::move(outputs[i])));
    }
  }
  return result;
}

absl::StatusOr<std::vector<Tensor>> Session::CallDataDependent(const OpEntry& op, absl::Span<const Value> args,
                                                               absl::Span<const Tensor> tensor_args,
                                                               const CallSite& site, bool record_grad) {
  // Stream the call with placeholder metas, then ask for the real ones.
  std::vector<TensorMeta> placeholders(op.schema.returns.size());
  for (TensorMeta& m : placeholders) m.device = tensor_args.empty() ? kCPU : tensor_args[0].device();
  TD_ASSIGN_OR_RETURN(std::vector<Tensor> outs,
                      EnqueueCall(op, args, tensor_args, absl::MakeSpan(placeholders), site, record_grad));
  Impl& im = *impl_;
  Impl::Sent describe;
  {
    absl::MutexLock l(&im.mu);
    TD_RETURN_IF_ERROR(im.Usable());
    ++im.stats.round_trips;
    TD_ASSIGN_OR_RETURN(describe, im.SendForReplyLocked([&](uint64_t id, Waiter&) {
      v1::Describe* d = im.pending->add_requests()->mutable_describe();
      d->set_request_id(id);
      for (const Tensor& t : outs) d->add_handles(t.handle());
    }));
  }
  TD_RETURN_IF_ERROR(im.Wait(describe));
  const v1::Ack& ack = describe.waiter->ack;
  for (int i = 0; i < static_cast<int>(outs.size()); ++i) {
    if (i < ack.failed_size() && ack.failed(i)) {
      // The daemon holds the op's error; a fetch of the output returns it.
      absl::StatusOr<HostData> f = Fetch(outs[i].handle());
      if (!f.ok()) return f.status();
      return RuntimeErr(absl::StrCat(op.full_name(), " failed in the daemon (call at ", site.Text(), ")"));
    }
  }
  if (ack.metas_size() != static_cast<int>(outs.size())) {
    return InternalErr(absl::StrCat(op.full_name(), ": the daemon described ", ack.metas_size(), " outputs, expected ",
                                    outs.size()));
  }
  std::vector<Tensor> result;
  for (int i = 0; i < ack.metas_size(); ++i) {
    TD_ASSIGN_OR_RETURN(TensorMeta m, wire::FromProto(ack.metas(i), absl::StrCat(op.full_name(), " output")));
    outs[i].impl()->meta = std::move(m);
    result.push_back(outs[i]);
  }
  return result;
}

absl::StatusOr<Tensor> Session::Upload(const void* data, size_t nbytes, const TensorMeta& meta, const CallSite& site) {
  Impl& im = *impl_;
  const std::string site_text = site.Text();  // named in the daemon's error, if the upload fails
  uint64_t handle = 0;
  {
    absl::MutexLock l(&im.mu);
    TD_RETURN_IF_ERROR(im.Usable());
    im.ReleaseBeforeLocked(static_cast<int64_t>(nbytes));
    handle = im.next_handle++;
    const uint64_t call_id = im.next_call_id++;
    ++im.stats.uploads;
    const char* bytes = static_cast<const char*>(data);
    std::optional<internal::ShmPool::Lease> lease;
    bool adopt = false;
    if (im.shm != nullptr && nbytes > options_.transport.inline_upload_limit) {
      // Large ones: a segment of their own that the daemon adopts as the
      // storage (one copy in all), else one reused for copies (two).
      if (nbytes >= options_.transport.shm_adopt_min_bytes) {
        lease = im.shm->Acquire(nbytes, /*adopt=*/true);
        adopt = lease.has_value();
      }
      if (!lease.has_value()) lease = im.shm->Acquire(nbytes);
    }
    if (lease.has_value()) {
      // One copy here (on several cores when large); unless adopted, the
      // daemon copies from the segment into the storage. An adopted
      // segment's request goes out first (below), so the copy comes later.
      if (!adopt) wire::CopyTransfer(lease->data, bytes, nbytes, wire::MaxCopyThreads());
      v1::Upload* u = im.pending->add_requests()->mutable_upload();
      u->set_handle(handle);
      wire::ToProto(meta, u->mutable_meta());
      u->set_total_bytes(nbytes);
      u->set_offset(0);
      u->set_shm_segment(lease->id);
      u->set_shm_offset(0);
      u->set_last(true);
      u->set_call_id(call_id);
      u->set_call_site(site_text);
      ++im.stats.shm_uploads;
      if (adopt) {
        // Busy until a reply lists it in shm_freed (the storage is gone).
        u->set_shm_adopt(true);
        ++im.stats.shm_adopted_uploads;
        // The request goes out now, with a sync after it, and the bytes are
        // copied in while the daemon adopts the segment (it reads none of
        // them to do so) and replies: a Synchronize that follows then finds
        // the reply on its way instead of starting a round trip after the
        // copy. No request that reads the tensor can reach the daemon before
        // the copy ends: it would have to be flushed, which takes `mu`. The
        // sync only peeks at errors (Sync.peek): they stay in the daemon,
        // reported at the next sync point as always, whether or not a
        // Synchronize uses this reply.
        TD_ASSIGN_OR_RETURN(Impl::Sent sync, im.SendForReplyLocked([&](uint64_t id, Waiter&) {
          v1::Sync* peek = im.pending->add_requests()->mutable_sync();
          peek->set_request_id(id);
          peek->set_peek(true);
        }));
        wire::CopyTransfer(lease->data, bytes, nbytes, wire::MaxCopyThreads());
        im.upload_sync = std::move(sync);
      } else {
        // Reusable once the daemon answers the next waiting request.
        im.shm->ReleaseAfter(lease->id, im.next_request_id);
        TD_RETURN_IF_ERROR(im.MaybeFlushLocked());
      }
    } else if (nbytes <= options_.transport.inline_upload_limit) {
      v1::Upload* u = im.pending->add_requests()->mutable_upload();
      u->set_handle(handle);
      wire::ToProto(meta, u->mutable_meta());
      u->set_total_bytes(nbytes);
      u->set_offset(0);
      u->set_data(bytes, nbytes);
      u->set_last(true);
      u->set_call_id(call_id);
      u->set_call_site(site_text);
      TD_RETURN_IF_ERROR(im.MaybeFlushLocked());
    } else {
      // The requests queued before this upload go first.
      TD_RETURN_IF_ERROR(im.FlushLocked());
      // Each chunk travels in its own message (never one giant message),
      // encoded around the caller's bytes: gRPC hands them to the socket
      // without a copy. They must stay valid until gRPC lets go of every
      // chunk's slice, which this waits for before returning.
      wire::BorrowedSlices borrowed;
      const size_t chunk = options_.transport.chunk_bytes > 0 ? options_.transport.chunk_bytes : (1u << 20);
      bool ok = true;
      for (size_t off = 0; off < nbytes && ok; off += chunk) {
        const size_t n = std::min(chunk, nbytes - off);
        v1::Upload u;
        u.set_handle(handle);
        if (off == 0) {
          wire::ToProto(meta, u.mutable_meta());
          u.set_total_bytes(nbytes);
          u.set_call_site(site_text);
        }
        u.set_offset(off);
        u.set_last(off + n == nbytes);
        u.set_call_id(call_id);
        grpc::ByteBuffer bb = wire::EncodeUploadChunk(u, borrowed.Borrow(bytes + off, n));
        ok = im.transport->SendBytes(bb);
        ++im.stats.messages_sent;
      }
      borrowed.WaitUntilReleased();
      if (!ok) {
        im.write_error = im.StreamLost();
        return im.write_error;
      }
    }
  }
  return Tensor(std::make_shared<TensorImpl>(shared_from_this(), handle, meta));
}

absl::StatusOr<HostData> Session::Fetch(uint64_t handle, uint64_t expected_bytes) {
  Impl& im = *impl_;
  // Refused before a waiter exists or a request goes out: once sent, the
  // daemon streams every byte, and a client that then cannot hold them
  // would wait behind that stream at its next sync point.
  if (const uint64_t physical = internal::PhysicalMemoryBytes(); physical > 0 && expected_bytes > physical) {
    return OutOfMemoryErr(absl::StrCat("fetch: the tensor's ", expected_bytes, " bytes exceed this machine's memory (",
                                       physical, " bytes)"));
  }
  std::optional<internal::ShmPool::Lease> lease;
  absl::StatusOr<Impl::Sent> fetch;
  {
    absl::MutexLock l(&im.mu);
    TD_RETURN_IF_ERROR(im.Usable());
    im.AppendReleasesLocked();  // as in Synchronize
    if (im.shm != nullptr && expected_bytes > options_.transport.inline_upload_limit) {
      lease = im.shm->Acquire(expected_bytes);
    }
    ++im.stats.round_trips;
    fetch = im.SendForReplyLocked([&](uint64_t id, Waiter& w) {
      v1::Fetch* f = im.pending->add_requests()->mutable_fetch();
      f->set_request_id(id);
      f->set_handle(handle);
      if (lease.has_value()) {
        f->set_shm_segment(lease->id);
        f->set_shm_offset(0);
        f->set_shm_capacity(lease->size);
        absl::MutexLock wl(&im.wmu);
        w.shm_requested = lease->id;
      }
    });
    if (!fetch.ok()) {
      if (lease.has_value()) im.shm->Release(lease->id);
      return fetch.status();
    }
  }
  absl::Status waited = im.Wait(*fetch);
  Waiter* w = fetch->waiter.get();
  HostData out;
  if (lease.has_value()) {
    if (waited.ok() && w->shm_segment != 0) {
      if (w->total_bytes > lease->size) {
        im.shm->Release(lease->id);  // not lent: free for the next request
        return InternalErr("the daemon's fetch overran its shared-memory segment");
      }
      out.mapped = im.shm->Lend(lease->id);  // the segment is free again when `out`'s data goes
      out.mapped_size = w->total_bytes;
      absl::MutexLock l(&im.mu);
      ++im.stats.shm_fetches;
    }
    if (out.mapped == nullptr) im.shm->Release(lease->id);  // streamed, or failed: not lent
  }
  TD_RETURN_IF_ERROR(waited);
  if (!w->have_meta) return InternalErr("the daemon completed a fetch without data");
  // A fetch is a sync point: an earlier op's error not reported yet (and
  // any error no waiter claimed) is raised here, naming that op's call site.
  TD_RETURN_IF_ERROR(im.TakeErrors(std::move(w->earlier_errors)));
  out.meta = std::move(w->meta);
  if (out.mapped == nullptr) {
    // Streamed: the buffer the chunks were copied into.
    out.mapped = std::move(w->buffer);
    out.mapped_size = w->total_bytes;
  }
  return out;
}

bool Session::uses_shared_memory() const { return impl_->shm != nullptr; }

bool Session::uses_same_host_stream() const {
  return impl_->transport != nullptr && impl_->transport->kind() == internal::TransportKind::kSameHost;
}
bool Session::uses_tcp_stream() const {
  return impl_->transport != nullptr && impl_->transport->kind() == internal::TransportKind::kTcp;
}

absl::StatusOr<TensorMeta> Session::Describe(uint64_t handle, uint64_t* storage_id) {
  Impl& im = *impl_;
  Impl::Sent describe;
  {
    absl::MutexLock l(&im.mu);
    TD_RETURN_IF_ERROR(im.Usable());
    ++im.stats.round_trips;
    TD_ASSIGN_OR_RETURN(describe, im.SendForReplyLocked([&](uint64_t id, Waiter&) {
      v1::Describe* d = im.pending->add_requests()->mutable_describe();
      d->set_request_id(id);
      d->add_handles(handle);
    }));
  }
  TD_RETURN_IF_ERROR(im.Wait(describe));
  const Waiter* w = describe.waiter.get();
  if (w->ack.failed_size() > 0 && w->ack.failed(0)) {
    absl::StatusOr<HostData> f = Fetch(handle);
    if (!f.ok()) return f.status();
    return RuntimeErr(absl::StrCat("tensor handle ", handle, " failed in the daemon"));
  }
  if (w->ack.metas_size() != 1) {
    return InternalErr(absl::StrCat("the daemon described ", w->ack.metas_size(), " tensors, expected 1"));
  }
  if (storage_id != nullptr) *storage_id = w->ack.storage_ids_size() == 1 ? w->ack.storage_ids(0) : 0;
  return wire::FromProto(w->ack.metas(0), absl::StrCat("handle ", handle));
}

absl::Status Session::Synchronize() {
  Impl& im = *impl_;
  Impl::Sent sync;
  bool peeked = false;
  {
    absl::MutexLock l(&im.mu);
    TD_RETURN_IF_ERROR(im.Usable());
    // Releases queued so far go before the sync, so that its reply already
    // lists the shared-memory segments their storages adopted as free.
    im.AppendReleasesLocked();
    ++im.stats.round_trips;
    if (im.upload_sync.has_value() && im.pending->requests_size() == 0) {
      // Nothing went out since an adopting upload and its sync: that sync's
      // reply says what a new one would, unless errors wait (below).
      sync = *std::move(im.upload_sync);
      im.upload_sync.reset();
      peeked = true;
    } else {
      TD_ASSIGN_OR_RETURN(sync, im.SendForReplyLocked([&](uint64_t id, Waiter&) {
        im.pending->add_requests()->mutable_sync()->set_request_id(id);
      }));
    }
  }
  TD_RETURN_IF_ERROR(im.Wait(sync));
  const Waiter* w = sync.waiter.get();
  // Errors wait in the daemon: a sync of its own reports them.
  if (peeked && w->ack.errors_pending()) return Synchronize();
  return im.TakeErrors({w->ack.errors().begin(), w->ack.errors().end()});
}

// ---------------------------------------------------------------- autograd

namespace {

std::shared_ptr<TensorImpl> MakeEngineTensor(std::shared_ptr<Session> s, uint64_t handle, TensorMeta meta,
                                             bool requires_grad) {
  auto impl = std::make_shared<TensorImpl>(std::move(s), handle, std::move(meta));
  impl->requires_grad = requires_grad;
  if (requires_grad) impl->grad_fn = internal::EngineResultNode();
  return impl;
}

}  // namespace

absl::Status Session::SendSetRequiresGrad(uint64_t handle, bool requires_grad, const CallSite& site) {
  Impl& im = *impl_;
  absl::MutexLock l(&im.mu);
  TD_RETURN_IF_ERROR(im.Usable());
  v1::SetRequiresGrad* r = im.pending->add_requests()->mutable_set_requires_grad();
  r->add_handles(handle);
  r->set_requires_grad(requires_grad);
  r->set_call_id(im.next_call_id++);
  r->set_call_site(site.Text());
  return im.MaybeFlushLocked();
}

absl::Status Session::SendRetainGrad(uint64_t handle) {
  Impl& im = *impl_;
  absl::MutexLock l(&im.mu);
  TD_RETURN_IF_ERROR(im.Usable());
  im.pending->add_requests()->mutable_retain_grad()->set_handle(handle);
  return im.MaybeFlushLocked();
}

absl::Status Session::SendSetGrad(uint64_t handle, uint64_t grad) {
  Impl& im = *impl_;
  absl::MutexLock l(&im.mu);
  TD_RETURN_IF_ERROR(im.Usable());
  v1::SetGrad* r = im.pending->add_requests()->mutable_set_grad();
  r->set_handle(handle);
  r->set_grad(grad);
  return im.MaybeFlushLocked();
}

absl::StatusOr<Tensor> Session::BindGrad(uint64_t handle, const TensorMeta& meta) {
  Impl& im = *impl_;
  uint64_t out = 0;
  {
    absl::MutexLock l(&im.mu);
    TD_RETURN_IF_ERROR(im.Usable());
    out = im.next_handle++;
    v1::GetGrad* r = im.pending->add_requests()->mutable_get_grad();
    r->set_handle(handle);
    r->set_output(out);
    TD_RETURN_IF_ERROR(im.MaybeFlushLocked());
  }
  return Tensor(std::make_shared<TensorImpl>(shared_from_this(), out, meta));
}

absl::Status Session::SendManualSeed(uint64_t seed) {
  Impl& im = *impl_;
  absl::MutexLock l(&im.mu);
  TD_RETURN_IF_ERROR(im.Usable());
  im.pending->add_requests()->mutable_manual_seed()->set_seed(seed);
  return im.MaybeFlushLocked();
}

absl::Status Session::SendRecordFunction(uint64_t function_id, const std::string& name,
                                         const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs,
                                         const std::vector<bool>& non_differentiable,
                                         const std::vector<uint64_t>& dirty, bool materialize_grads,
                                         const std::vector<uint64_t>& saved, const CallSite& site) {
  Impl& im = *impl_;
  absl::MutexLock l(&im.mu);
  TD_RETURN_IF_ERROR(im.Usable());
  v1::RecordFunction* r = im.pending->add_requests()->mutable_record_function();
  r->set_call_id(im.next_call_id++);
  r->set_function_id(function_id);
  r->set_name(name);
  r->mutable_inputs()->Add(inputs.begin(), inputs.end());
  r->mutable_outputs()->Add(outputs.begin(), outputs.end());
  for (bool b : non_differentiable) r->add_non_differentiable(b);
  r->mutable_dirty()->Add(dirty.begin(), dirty.end());
  r->set_materialize_grads(materialize_grads);
  r->mutable_saved()->Add(saved.begin(), saved.end());
  r->set_call_site(site.Text());
  return im.MaybeFlushLocked();
}

void Session::RegisterGradTarget(const std::shared_ptr<TensorImpl>& impl) {
  if (impl == nullptr || impl->handle == 0) return;
  absl::MutexLock gl(&impl_->grad_mu);
  impl_->grad_targets[impl->handle] = impl;
  impl_->any_grad_targets.store(true, std::memory_order_release);
}

void Session::RunCallback(const void* callback_message) {
  const v1::BackwardCallback& cb = *static_cast<const v1::BackwardCallback*>(callback_message);
  BackwardCallbackRequest req;
  req.callback_id = cb.callback_id();
  req.function_id = cb.function_id();
  req.create_graph = cb.create_graph();
  // Grads and saved tensors arrive the same way: one handle per slot (0 for
  // None), metas and requires_grad flags for the non-zero ones, in order.
  auto decode = [&](const auto& handles, const auto& metas, const auto& requires_grad, absl::string_view what,
                    std::vector<std::optional<Tensor>>* out) -> absl::Status {
    int k = 0;
    for (uint64_t h : handles) {
      if (h == 0) {
        out->emplace_back(std::nullopt);
        continue;
      }
      if (k >= metas.size()) {
        return InternalErr(absl::StrCat("the daemon's backward callback ", cb.callback_id(), " has ", metas.size(),
                                        " metas for more ", what, "s"));
      }
      TD_ASSIGN_OR_RETURN(TensorMeta m, wire::FromProto(metas[k], absl::StrCat("backward callback ", what)));
      const bool rg = k < requires_grad.size() && requires_grad[k];
      out->emplace_back(Tensor(MakeEngineTensor(shared_from_this(), h, std::move(m), rg)));
      ++k;
    }
    return absl::OkStatus();
  };
  absl::Status bad = decode(cb.grads(), cb.metas(), cb.requires_grad(), "gradient", &req.grads);
  if (bad.ok()) bad = decode(cb.saved(), cb.saved_metas(), cb.saved_requires_grad(), "saved tensor", &req.saved);
  BackwardCallbackHandler handler;
  {
    HandlerSlot& slot = Handler();
    absl::MutexLock l(&slot.mu);
    handler = slot.handler;
  }
  absl::StatusOr<std::vector<std::optional<Tensor>>> r;
  if (!bad.ok()) {
    r = bad;
  } else if (!handler) {
    r = RuntimeErr(absl::StrCat("the daemon asked for the backward of function ", cb.function_id(),
                                " but no backward callback handler is registered in this client"));
  } else {
    const bool previous = IsGradEnabled();
    SetGradEnabled(cb.create_graph());
    r = handler(req);
    SetGradEnabled(previous);
  }
  v1::Request out;
  v1::CallbackResult* cr = out.mutable_callback_result();
  cr->set_callback_id(cb.callback_id());
  if (r.ok()) {
    for (const std::optional<Tensor>& g : *r) {
      if (!g.has_value() || !g->defined()) {
        cr->add_grads(0);
      } else if (g->is_meta() || g->session().get() != this) {
        r = RuntimeErr(absl::StrCat("the backward of function ", cb.function_id(),
                                    " returned a gradient that is not a tensor of this session (",
                                    g->ToString(), ")"));
        break;
      } else {
        cr->add_grads(g->handle());
      }
    }
  }
  if (!r.ok()) {
    cr->clear_grads();
    wire::ToProto(r.status(), "", 0, "", cr->mutable_error());
  }
  Impl& im = *impl_;
  absl::MutexLock l(&im.mu);
  if (!im.Usable().ok()) return;
  *im.pending->add_requests() = std::move(out);
  im.FlushLocked().IgnoreError();  // a lost stream fails the waiting backward
  // `r` (holding the returned gradients) is destroyed after the flush: their
  // releases travel in a later message, after the daemon took them.
}

namespace {

// A Backward's roots and their given gradients (0: ones).
void AddRoots(const std::vector<Tensor>& roots, const std::vector<std::optional<Tensor>>& grad_roots,
              v1::Backward* b) {
  for (size_t i = 0; i < roots.size(); ++i) {
    b->add_roots(roots[i].handle());
    const bool given = i < grad_roots.size() && grad_roots[i].has_value() && grad_roots[i]->defined();
    b->add_grad_roots(given ? grad_roots[i]->handle() : 0);
  }
}

// The daemon holds a new .grad of `meta` for `impl`: the cached one is
// dropped and the next .grad access binds it (Tensor::Grad).
void MarkGradPending(TensorImpl& impl, TensorMeta meta, bool requires_grad) {
  impl.grad.reset();
  impl.grad_pending = true;
  impl.grad_meta = std::move(meta);
  impl.grad_requires_grad = requires_grad;
}

}  // namespace

absl::StatusOr<std::vector<std::optional<Tensor>>> Session::RunBackward(
    const std::vector<Tensor>& roots, const std::vector<std::optional<Tensor>>& grad_roots,
    const std::vector<Tensor>& inputs, bool retain_graph, bool create_graph, bool accumulate, bool allow_unused,
    const CallSite& site) {
  Impl& im = *impl_;
  Impl::Sent backward;
  std::vector<uint64_t> out_handles;
  {
    absl::MutexLock l(&im.mu);
    TD_RETURN_IF_ERROR(im.Usable());
    ++im.stats.round_trips;
    TD_ASSIGN_OR_RETURN(backward, im.SendForReplyLocked([&](uint64_t id, Waiter&) {
      v1::Backward* b = im.pending->add_requests()->mutable_backward();
      b->set_request_id(id);
      AddRoots(roots, grad_roots, b);
      for (const Tensor& t : inputs) {
        b->add_inputs(t.handle());
        if (!accumulate) {
          out_handles.push_back(im.next_handle++);
          b->add_outputs(out_handles.back());
        }
      }
      b->set_retain_graph(retain_graph);
      b->set_create_graph(create_graph);
      b->set_accumulate(accumulate);
      b->set_allow_unused(allow_unused);
      b->set_call_site(site.Text());
    }));
  }
  while (std::optional<v1::BackwardCallback> cb = im.WaitOrCallback(backward)) RunCallback(&*cb);
  im.Forget(backward);
  TD_RETURN_IF_ERROR(backward.waiter->status);
  const v1::Ack& ack = backward.waiter->ack;
  if (ack.errors_size() > 0) {
    absl::Status first = wire::FromProto(ack.errors(0));
    if (ack.errors_size() > 1) {
      first = MakeError(KindOf(first), absl::StrCat(first.message(), " (and ", ack.errors_size() - 1, " more error",
                                                    ack.errors_size() > 2 ? "s" : "", ")"));
    }
    return first;
  }
  std::vector<std::optional<Tensor>> results;
  if (accumulate) {
    for (int i = 0; i < ack.grad_changed_size(); ++i) {
      if (i >= ack.grad_metas_size()) return InternalErr("the daemon's backward Ack lacks grad metas");
      TD_ASSIGN_OR_RETURN(TensorMeta m, wire::FromProto(ack.grad_metas(i), "grad"));
      std::shared_ptr<TensorImpl> impl;
      {
        absl::MutexLock gl(&im.grad_mu);
        auto it = im.grad_targets.find(ack.grad_changed(i));
        if (it != im.grad_targets.end()) impl = it->second.lock();
      }
      if (impl == nullptr) continue;
      MarkGradPending(*impl, std::move(m), i < ack.grad_requires_grad_size() && ack.grad_requires_grad(i));
    }
    return results;
  }
  int k = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const bool defined = static_cast<int>(i) < ack.defined_size() && ack.defined(static_cast<int>(i));
    if (!defined) {
      results.emplace_back(std::nullopt);
      continue;
    }
    if (k >= ack.metas_size()) return InternalErr("the daemon's grad Ack lacks metas");
    TD_ASSIGN_OR_RETURN(TensorMeta m, wire::FromProto(ack.metas(k), "grad"));
    const bool rg = k < ack.grad_requires_grad_size() && ack.grad_requires_grad(k);
    results.emplace_back(Tensor(MakeEngineTensor(shared_from_this(), out_handles[i], std::move(m), rg)));
    ++k;
  }
  return results;
}

absl::Status Session::SendPredictedBackward(const std::vector<Tensor>& roots,
                                            const std::vector<std::optional<Tensor>>& grad_roots,
                                            const std::vector<Tensor>& inputs, bool retain_graph,
                                            std::vector<std::pair<std::shared_ptr<TensorImpl>, TensorMeta>> expect,
                                            const CallSite& site) {
  Impl& im = *impl_;
  std::sort(expect.begin(), expect.end(), [](const auto& a, const auto& b) { return a.first->handle < b.first->handle; });
  {
    absl::MutexLock l(&im.mu);
    TD_RETURN_IF_ERROR(im.Usable());
    // Released leaves leave the daemon before its walk, so that it sets a
    // .grad only where the client still holds the tensor, as predicted.
    im.AppendReleasesLocked();
    v1::Backward* b = im.pending->add_requests()->mutable_backward();
    AddRoots(roots, grad_roots, b);
    for (const Tensor& t : inputs) b->add_inputs(t.handle());
    b->set_retain_graph(retain_graph);
    b->set_accumulate(true);
    b->set_allow_unused(true);
    b->set_call_site(site.Text());
    b->set_predicted(true);
    for (const auto& [impl, meta] : expect) {
      b->add_expect_grad_changed(impl->handle);
      wire::ToProto(meta, b->add_expect_grad_metas());
    }
    ++im.stats.predicted_backwards;
    TD_RETURN_IF_ERROR(im.FlushLocked());
  }
  for (auto& [impl, meta] : expect) MarkGradPending(*impl, std::move(meta), /*requires_grad=*/false);
  return absl::OkStatus();
}

bool Session::predicts_backward() const { return predict_backward_; }

void SetBackwardCallbackHandler(BackwardCallbackHandler handler) {
  HandlerSlot& slot = Handler();
  absl::MutexLock l(&slot.mu);
  slot.handler = std::move(handler);
}

std::vector<uint64_t> TakeReleasedFunctions() {
  ReleasedFunctions& r = Released();
  absl::MutexLock l(&r.mu);
  std::vector<uint64_t> out;
  out.swap(r.ids);
  return out;
}

absl::Status ManualSeed(uint64_t seed) {
  {
    SeedSlot& ss = Seed();
    absl::MutexLock l(&ss.mu);
    ss.seed = seed;
  }
  std::shared_ptr<Session> s = t_session;
  if (s == nullptr || s->closed()) s = DefaultSessionIfAny();
  if (s == nullptr || s->closed()) return absl::OkStatus();
  return s->SendManualSeed(seed);
}

std::string Session::Label(uint64_t session_id) {
  return absl::StrCat("tensord session ", absl::Hex(session_id, absl::kZeroPad16));
}

}  // namespace tensord::client
