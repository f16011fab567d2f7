// The data plane: uploads (inline in the batch, streamed in chunks
// encoded around the caller's bytes, or through a shared-memory segment,
// copied or adopted as the tensor's storage) and fetches (streamed into a
// buffer of their own, or through a segment lent to the caller).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "fetch_buffers.h"
#include "session_impl.h"
#include "shm_pool.h"
#include "tensord/meta/errors.h"
#include "tensord/wire/copy.h"
#include "tensord/wire/data_frame.h"
#include "tensord/wire/wire.h"

namespace tensord::client {

absl::StatusOr<Tensor> Session::Upload(const void* data, size_t nbytes, const TensorMeta& meta, const CallSite& site) {
  // A device the daemon lacks fails here, at the caller's line, not at the
  // next sync point. Named as PyTorch's users make such tensors.
  if (!daemon_info_.Serves(meta.device)) return daemon_info_.DeviceUnavailable("tensor", meta.device);
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
      // storage (one copy in all), else one reused for copies (two). Only a
      // cpu tensor's storage can be the client's memory.
      if (nbytes >= options_.transport.shm_adopt_min_bytes && meta.device.is_cpu()) {
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
        TD_ASSIGN_OR_RETURN(Impl::Sent sync, im.SendForReplyLocked([&](uint64_t id, internal::Waiter&) {
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
    fetch = im.SendForReplyLocked([&](uint64_t id, internal::Waiter& w) {
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
  internal::Waiter* w = fetch->waiter.get();
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

}  // namespace tensord::client
