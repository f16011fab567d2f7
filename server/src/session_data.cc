// A session's data plane: uploads (chunks into host memory, or placed
// straight into their storage; a tensor for another device moves there with
// its last chunk) and fetches (contiguous chunks of any layout, from any
// device, into the reply or a client's shared-memory segment).
#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "tensord/meta/errors.h"
#include "tensord/runtime/log.h"
#include "tensord/server/session.h"
#include "tensord/wire/copy.h"
#include "tensord/wire/data_frame.h"
#include "tensord/wire/wire.h"

namespace tensord::server {

using runtime::Log;
using runtime::LogLevel;

namespace {

// Uploads whose later chunks are being dropped (their first chunk failed):
// at most this many are remembered; past that, a later chunk is refused on
// its own (the error list is bounded too).
constexpr size_t kMaxDroppedUploads = 4096;

void DropRestOfUpload(absl::flat_hash_set<uint64_t>& dropped, uint64_t handle) {
  if (dropped.size() < kMaxDroppedUploads) dropped.insert(handle);
}

// Reads a tensor's elements in row-major order, whatever its strides, so that
// a Fetch can stream them as contiguous chunks without a second full copy.
// Used for non-contiguous tensors: a contiguous one is copied or sent straight
// from its storage.
class StridedReader {
 public:
  StridedReader(const char* storage, const TensorMeta& m)
      : base_(storage + m.storage_offset * m.itemsize()),
        itemsize_(m.itemsize()),
        sizes_(m.sizes),
        idx_(m.sizes.size(), 0) {
    // Byte strides; a dim of size <= 1 never advances, so its stride (which a
    // peer may have set to anything) is irrelevant and taken as 0.
    byte_strides_.resize(m.sizes.size());
    for (size_t d = 0; d < m.sizes.size(); ++d) {
      byte_strides_[d] = m.sizes[d] <= 1 ? 0 : m.strides[d] * itemsize_;
    }
  }

  // Copies the next `n` elements into `dst`.
  void Read(int64_t n, char* dst) {
    if (n <= 0) return;
    const size_t rank = sizes_.size();
    if (rank == 0) {
      std::memcpy(dst, base_, static_cast<size_t>(itemsize_));
      return;
    }
    const size_t last = rank - 1;
    while (n > 0) {
      const int64_t run = std::min(n, sizes_[last] - idx_[last]);
      const char* src = base_ + offset_;
      if (byte_strides_[last] == itemsize_) {
        std::memcpy(dst, src, static_cast<size_t>(run * itemsize_));
      } else {
        for (int64_t k = 0; k < run; ++k) {
          std::memcpy(dst + k * itemsize_, src + k * byte_strides_[last], static_cast<size_t>(itemsize_));
        }
      }
      dst += run * itemsize_;
      n -= run;
      idx_[last] += run;
      offset_ += run * byte_strides_[last];
      if (idx_[last] < sizes_[last]) continue;
      // Carry into the outer dims.
      offset_ -= idx_[last] * byte_strides_[last];
      idx_[last] = 0;
      for (size_t d = last; d-- > 0;) {
        ++idx_[d];
        offset_ += byte_strides_[d];
        if (idx_[d] < sizes_[d]) break;
        offset_ -= idx_[d] * byte_strides_[d];
        idx_[d] = 0;
      }
    }
  }

 private:
  const char* base_;
  const int64_t itemsize_;
  const Shape sizes_;
  Shape byte_strides_;
  Shape idx_;
  int64_t offset_ = 0;  // bytes from base_
};

}  // namespace

wire::Placement Session::PlaceUploadData(const v1::Upload& head, size_t n, std::shared_ptr<Storage>* keep) {
  absl::MutexLock lock(&mu_);
  placed_bytes_ = 0;
  if (closed_ || current_ != nullptr || !queue_.empty() || n == 0) return nullptr;
  if (head.shm_segment() != 0 || head.shm_adopt()) return nullptr;
  auto it = uploads_.find(head.handle());
  if (it == uploads_.end()) {
    // A first chunk (a whole upload of up to a chunk's size, often): the
    // upload starts now, as ExecuteUpload would start it, so that its data
    // too goes straight into the storage. Anything ExecuteUpload would
    // refuse is left to it (the data then goes in the message, and it
    // reports the error).
    TensorMeta m;
    uint64_t expected = 0;
    bool report_meta = false;
    if (!head.has_meta() || !CheckNewHandle(head.handle()).ok() ||
        !CheckFirstChunk(head, n, "upload", &m, &expected, &report_meta).ok()) {
      return nullptr;
    }
    // Nor one that would not fit from offset 0: declined before anything
    // starts, so that ExecuteUpload finds no upload and reports it.
    if (head.offset() != 0 || n > expected) return nullptr;
    if (!StartUploadLocked(head, m, expected).ok()) return nullptr;
    it = uploads_.find(head.handle());
  } else if (head.has_meta()) {
    return nullptr;  // a later chunk with meta: ExecuteUpload checks it first
  }
  PendingUpload& up = it->second;
  if (head.offset() != up.received || n > up.total_bytes - up.received) return nullptr;
  placed_bytes_ = n;
  placed_handle_ = head.handle();
  *keep = up.storage;
  return wire::Placement(up.storage->data() + up.received, up.total_bytes);
}

// ------------------------------------------------------------------- uploads

absl::Status Session::CheckFirstChunk(const v1::Upload& u, uint64_t data_bytes, absl::string_view what,
                                      TensorMeta* m, uint64_t* expected, bool* report_meta) {
  *report_meta = false;
  if (!u.has_meta()) return RuntimeErr(absl::StrCat(what, ": the first chunk carries no meta"));
  absl::StatusOr<TensorMeta> meta = wire::FromProto(u.meta(), what);
  if (!meta.ok()) return meta.status();
  *m = *std::move(meta);
  if (m->device.is_meta() || devices_->Find(m->device) == nullptr) {
    return RuntimeErr(absl::StrCat(what, ": device must be one this daemon serves, got ", m->device.ToString()));
  }
  if (!m->is_contiguous() || m->storage_offset != 0) {
    return RuntimeErr(absl::StrCat(what, ": uploads must be contiguous with storage_offset 0, got sizes ",
                                   ShapeToString(m->sizes), ", strides ", ShapeToString(m->strides),
                                   ", storage_offset ", m->storage_offset));
  }
  // Canonical strides (a size-1 dim's stride may be anything in a contiguous tensor).
  m->strides = ContiguousStrides(m->sizes);
  // Validated metadata bounds this today (contiguous, so its storage extent
  // is its numel); checked all the same, as every byte count from a peer is.
  absl::StatusOr<int64_t> dense = m->DenseBytes(what);
  if (!dense.ok()) return dense.status();
  *expected = static_cast<uint64_t>(*dense);
  *report_meta = true;
  uint64_t total = u.total_bytes();
  if (total == 0 && u.last()) total = data_bytes;  // a one-message upload may omit total_bytes
  if (total != *expected) {
    return RuntimeErr(absl::StrCat(what, ": total_bytes is ", total, " but sizes ", ShapeToString(m->sizes), " of ",
                                   DtypeName(m->dtype), " need ", *expected, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status Session::StartUploadLocked(const v1::Upload& u, const TensorMeta& meta, uint64_t expected) {
  // Each one in progress costs its bookkeeping besides its (charged) bytes.
  if (uploads_.size() >= kMaxPendingUploads) {
    return absl::ResourceExhaustedError(absl::StrCat("upload of handle ", u.handle(), ": ", uploads_.size(),
                                                     " uploads are already in progress in this session (the limit); "
                                                     "send the last chunk of one first"));
  }
  // Not zero-filled: the chunks overwrite every byte, and the storage is
  // published only once all of them arrived. Always host memory: a tensor
  // for another device moves there with the last chunk.
  absl::StatusOr<std::shared_ptr<Storage>> st =
      memory_->Allocate(devices_->cpu()->allocator(), static_cast<int64_t>(expected), "upload", /*zero_fill=*/false);
  if (!st.ok()) return st.status();
  PendingUpload up;
  up.meta = meta;
  up.storage = *std::move(st);
  up.total_bytes = expected;
  up.call_id = u.call_id();
  up.call_site = u.call_site().substr(0, kMaxCallSiteBytes);
  uploads_.emplace(u.handle(), std::move(up));
  return absl::OkStatus();
}

void Session::ExecuteUpload(const v1::Upload& u) {
  const uint64_t h = u.handle();
  bool first_chunk = false;
  // The site the first chunk named (later chunks name none; their failures
  // may erase the upload before reporting).
  std::string later_site;
  auto site = [&]() -> const std::string& { return u.call_site().empty() ? later_site : u.call_site(); };
  auto fail = [&](absl::Status s, const TensorMeta* meta) {
    auto err = RecordError(std::move(s), "upload", u.call_id(), site());
    InsertFailed(h, meta, err);
    // The rest of the upload is already on its way: its chunks are dropped
    // (the one error says what went wrong), not each refused again.
    if (first_chunk && !u.last()) DropRestOfUpload(dropped_uploads_, h);
  };
  const std::string what = absl::StrCat("upload of handle ", h);

  auto it = uploads_.find(h);
  if (it != uploads_.end() && u.call_site().empty()) later_site = it->second.call_site;
  if (it == uploads_.end()) {
    if (!dropped_uploads_.empty() && !u.has_meta() && dropped_uploads_.contains(h)) {
      if (u.last()) dropped_uploads_.erase(h);
      return;
    }
    // The first chunk.
    first_chunk = true;
    if (absl::Status s = CheckNewHandle(h); !s.ok()) {
      RecordError(RuntimeErr(absl::StrCat(what, ": ", s.message())), "upload", u.call_id(), site());
      if (!u.last()) DropRestOfUpload(dropped_uploads_, h);
      return;
    }
    TensorMeta m;
    uint64_t expected = 0;
    bool report_meta = false;
    if (absl::Status s = CheckFirstChunk(u, u.data().size(), what, &m, &expected, &report_meta); !s.ok()) {
      return fail(std::move(s), report_meta ? &m : nullptr);
    }
    if (u.shm_adopt()) {
      // One message whose storage is the client's segment: no copy here.
      if (!m.device.is_cpu()) {
        return fail(RuntimeErr(absl::StrCat(what, ": only a cpu tensor can adopt a shared-memory segment, not one "
                                            "on ", m.device.ToString())),
                    &m);
      }
      if (u.shm_segment() == 0 || !u.last() || !u.data().empty() || u.offset() != 0) {
        return fail(RuntimeErr(absl::StrCat(what, ": an adopting upload must be one message (last set, offset 0) "
                                            "naming a shared-memory segment and carrying no data")),
                    &m);
      }
      absl::StatusOr<std::shared_ptr<Storage>> st = AdoptShmRange(what, u.shm_segment(), u.shm_offset(), expected);
      if (!st.ok()) return fail(st.status(), &m);
      if (absl::Status s = handles_.Charge(1, HandleTable::EntryBytes(m), what); !s.ok()) return fail(std::move(s), &m);
      Tensor t;
      t.meta = std::move(m);
      t.storage = *std::move(st);
      t.ag = std::make_shared<AutogradMeta>();
      handles_.Insert(h, std::move(t));
      return;
    }
    if (absl::Status s = StartUploadLocked(u, m, expected); !s.ok()) return fail(std::move(s), &m);
    it = uploads_.find(h);
  } else if (u.shm_adopt()) {
    TensorMeta m = it->second.meta;
    uploads_.erase(it);
    return fail(RuntimeErr(absl::StrCat(what, ": only a first (and only) chunk can adopt a shared-memory segment")), &m);
  } else if (u.has_meta() && !(placed_bytes_ > 0 && placed_handle_ == h && it->second.received == 0)) {
    // Later chunks need no meta; if one comes, it must be the same. (A
    // first chunk placed by PlaceUploadData started its upload there, and
    // its meta was checked then.)
    absl::StatusOr<TensorMeta> meta = wire::FromProto(u.meta(), what);
    if (!meta.ok() || meta->sizes != it->second.meta.sizes || meta->dtype != it->second.meta.dtype) {
      TensorMeta m = it->second.meta;
      uploads_.erase(it);
      return fail(RuntimeErr(absl::StrCat(what, ": a later chunk carries a different meta than the first")), &m);
    }
  }

  PendingUpload& up = it->second;
  const char* src = u.data().data();
  uint64_t size = u.data().size();
  bool placed = false;  // the bytes are in the storage already (PlaceUploadData)
  if (placed_bytes_ > 0 && placed_handle_ == h && u.data().empty() && u.shm_segment() == 0) {
    size = placed_bytes_;
    placed = true;
  }
  placed_bytes_ = 0;
  std::shared_ptr<ShmMapping> shm;  // held while copying
  if (u.shm_segment() != 0) {
    // The rest of the bytes are in a shared-memory segment of this session.
    if (!u.data().empty()) {
      TensorMeta m = up.meta;
      uploads_.erase(it);
      return fail(RuntimeErr(absl::StrCat(what, ": a chunk carries both data and a shared-memory segment")), &m);
    }
    size = up.total_bytes - up.received;
    absl::StatusOr<std::shared_ptr<ShmMapping>> r = ShmRange(what, u.shm_segment(), u.shm_offset(), size);
    if (!r.ok()) {
      TensorMeta m = up.meta;
      uploads_.erase(it);
      return fail(r.status(), &m);
    }
    shm = *std::move(r);
    src = shm->data + u.shm_offset();
  }
  if (u.offset() != up.received) {
    TensorMeta m = up.meta;
    const uint64_t received = up.received;
    uploads_.erase(it);
    return fail(RuntimeErr(absl::StrCat(what, ": chunk at offset ", u.offset(), ", expected offset ", received,
                                        " (chunks must arrive in order, without gaps)")),
                &m);
  }
  if (size > up.total_bytes - up.received) {
    TensorMeta m = up.meta;
    const uint64_t total = up.total_bytes;
    uploads_.erase(it);
    return fail(RuntimeErr(absl::StrCat(what, ": chunk of ", size, " bytes at offset ", u.offset(),
                                        " reaches past total_bytes ", total)),
                &m);
  }
  if (size > 0 && !placed) {
    if (shm != nullptr) {
      // The rest of the transfer at once, from the segment: on several cores when large.
      wire::CopyTransfer(up.storage->data() + up.received, src, size, wire::MaxCopyThreads());
    } else {
      wire::CopyTransferPiece(up.storage->data() + up.received, src, size, up.total_bytes);
    }
  }
  up.received += size;
  if (!u.last()) return;
  if (up.received != up.total_bytes) {
    TensorMeta m = up.meta;
    const uint64_t received = up.received, total = up.total_bytes;
    uploads_.erase(it);
    return fail(RuntimeErr(absl::StrCat(what, ": the last chunk arrived after ", received, " of ", total, " bytes")),
                &m);
  }
  if (!up.meta.device.is_cpu()) {
    // The chunks arrive in host memory; a tensor for another device moves
    // there once it is whole, through the devices' copies.
    const Backend* to = devices_->Find(up.meta.device);
    absl::StatusOr<std::shared_ptr<Storage>> moved =
        to == nullptr ? absl::StatusOr<std::shared_ptr<Storage>>(DeviceUnavailable(what, up.meta.device, *devices_))
                      : dispatcher_.Allocate(*to, static_cast<int64_t>(up.total_bytes), what, false);
    absl::Status s = moved.status();
    if (s.ok()) {
      s = CopyBetween(dispatcher_.streams(), *devices_->cpu(), up.storage->data(), *to, (*moved)->data(),
                      up.total_bytes, *memory_, what);
    }
    if (!s.ok()) {
      TensorMeta m = up.meta;
      uploads_.erase(it);
      return fail(std::move(s), &m);
    }
    up.storage = *std::move(moved);
  }
  if (absl::Status s = handles_.Charge(1, HandleTable::EntryBytes(up.meta), what); !s.ok()) {
    TensorMeta m = up.meta;
    uploads_.erase(it);
    return fail(std::move(s), &m);
  }
  Tensor t;
  t.meta = std::move(up.meta);
  t.storage = std::move(up.storage);
  t.ag = std::make_shared<AutogradMeta>();
  uploads_.erase(it);
  handles_.Insert(h, std::move(t));
}

// ------------------------------------------------------------------- fetches

absl::StatusOr<char*> Session::HostBase(const Tensor& t, absl::string_view what, std::shared_ptr<Storage>* keep) {
  const Backend* from = devices_->Find(t.storage->device());
  if (from == nullptr) return DeviceUnavailable(what, t.storage->device(), *devices_);
  if (from->host_addressable()) return t.storage->data();
  // Strides are >= 0: the lowest byte addressed is at the storage offset.
  const int64_t begin = t.meta.storage_offset * t.meta.itemsize();
  TD_ASSIGN_OR_RETURN(int64_t end, t.meta.StorageBytesNeeded());
  if (end < begin) end = begin;  // an empty tensor addresses nothing
  TD_ASSIGN_OR_RETURN(*keep, memory_->Allocate(devices_->cpu()->allocator(), end - begin, what, false));
  TD_RETURN_IF_ERROR(CopyBetween(dispatcher_.streams(), *from, t.storage->data() + begin, *devices_->cpu(),
                                 (*keep)->data(), static_cast<size_t>(end - begin), *memory_, what));
  return reinterpret_cast<char*>(reinterpret_cast<uintptr_t>((*keep)->data()) - static_cast<uintptr_t>(begin));
}

bool Session::ExecuteFetch(const v1::Fetch& fetch, const Writer& write) {
  const uint64_t h = fetch.handle();
  if (auto err = AbandonUpload(h, "a fetch"); err != nullptr) {
    err->reported = true;
    return WriteRequestError(fetch.request_id(), *err, write);
  }
  auto fail = [&](absl::Status status) {
    OpError e;
    e.status = std::move(status);
    e.op = "fetch";
    return WriteRequestError(fetch.request_id(), e, write);
  };
  const Tensor* found = handles_.Find(h);
  if (found == nullptr) return fail(UnknownHandle("fetch", h));
  const Tensor& t = *found;
  if (t.failed()) {
    t.error->reported = true;
    return WriteRequestError(fetch.request_id(), *t.error, write);
  }
  const TensorMeta& m = t.meta;
  const int64_t numel = m.numel();
  const int64_t itemsize = m.itemsize();
  // Checked: an expanded view's element count can be far beyond what its
  // storage holds, and a wrapped total would pass the segment's capacity
  // check below and the copy would write past the mapping.
  absl::StatusOr<int64_t> dense = m.DenseBytes("fetch");
  if (!dense.ok()) return fail(dense.status());
  const int64_t total = *dense;
  // A device whose memory the daemon cannot read gives the bytes the
  // tensor addresses to host memory first.
  std::shared_ptr<Storage> staged;
  absl::StatusOr<char*> host_base = HostBase(t, "fetch", &staged);
  if (!host_base.ok()) return fail(host_base.status());
  char* const base = *host_base;
  // The first (or only) data message also says the tensor's metadata, its
  // size and the errors not reported yet.
  auto first_data = [&](v1::ServerMessage* msg) {
    v1::FetchData* d = msg->mutable_data();
    d->set_request_id(fetch.request_id());
    wire::ToProto(TensorMeta::Contiguous(m.sizes, m.dtype, m.device), d->mutable_meta());
    d->set_total_bytes(static_cast<uint64_t>(total));
    TakeUnreportedErrors(d->mutable_errors());
    shm_freed_->TakeInto(d->mutable_shm_freed());
    return d;
  };
  if (fetch.shm_segment() != 0 && static_cast<uint64_t>(total) <= fetch.shm_capacity()) {
    // Into the client's shared-memory segment: one copy, one message.
    absl::StatusOr<std::shared_ptr<ShmMapping>> shm =
        ShmRange(absl::StrCat("fetch of handle ", h), fetch.shm_segment(), fetch.shm_offset(), total);
    if (!shm.ok()) return fail(shm.status());
    char* dst = (*shm)->data + fetch.shm_offset();
    if (m.is_contiguous()) {
      wire::CopyTransfer(dst, base + m.storage_offset * itemsize, static_cast<size_t>(total),
                         wire::MaxCopyThreads());  // on several cores when large
    } else {
      StridedReader(base, m).Read(numel, dst);
    }
    v1::ServerMessage msg;
    v1::FetchData* d = first_data(&msg);
    d->set_shm_segment(fetch.shm_segment());
    d->set_last(true);
    return write(msg);
  }
  // Whole elements per chunk (every itemsize divides the chunk size).
  const int64_t per_chunk = kMaxChunkBytes / itemsize;
  // A strided tensor's reader (a contiguous one is sent from its storage)
  // and its chunk, reused.
  std::optional<StridedReader> reader;
  std::string gathered;
  int64_t done = 0;  // elements
  bool first = true;
  do {
    const int64_t n = std::min(per_chunk, numel - done);
    const size_t bytes = static_cast<size_t>(n * itemsize);
    // The session's reply, cleared: its FetchData and data string are
    // reused rather than allocated and freed for every fetch.
    v1::ServerMessage& msg = fetch_reply_;
    msg.mutable_data()->Clear();
    v1::FetchData* d = first ? first_data(&msg) : msg.mutable_data();
    d->set_request_id(fetch.request_id());
    d->set_offset(static_cast<uint64_t>(done * itemsize));
    const char* src;
    if (m.is_contiguous()) {
      src = base + (m.storage_offset + done) * itemsize;
    } else {
      gathered.resize(bytes);
      if (!reader.has_value()) reader.emplace(base, m);
      reader->Read(n, gathered.data());
      src = gathered.data();
    }
    done += n;
    d->set_last(done == numel);
    first = false;
    if (write_data_ != nullptr && bytes >= wire::kMinBorrowedBytes) {
      // The transport sends the bytes from here, without a copy.
      if (!(*write_data_)(*d, src, bytes)) return false;
    } else {
      d->set_data(src, bytes);
      const bool written = write(msg);
      // A large chunk's string is not kept (when no DataWriter took it).
      if (d->data().capacity() > kMaxKeptReplyBytes) msg.clear_kind();
      if (!written) return false;
    }
  } while (done < numel);
  return true;
}

}  // namespace tensord::server
