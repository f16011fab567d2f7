// A session's handle table and what its entries are charged.
#include "tensord/runtime/handles.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tensord::runtime {
namespace {

// What a table entry costs beyond its Tensor: the hash node's and the
// shared objects' allocator headers and control blocks.
constexpr int64_t kEntryOverheadBytes = 96;

// What one computed tensor's entry is charged beyond its metadata's dims:
// the entry, its autograd identity and their overhead.
constexpr int64_t kComputedEntryBytes =
    static_cast<int64_t>(sizeof(std::pair<const uint64_t, Tensor>) + sizeof(AutogradMeta)) + kEntryOverheadBytes;

}  // namespace

int64_t HandleTable::EntryBytes(const TensorMeta& m) { return kComputedEntryBytes + MetaHeapBytes(m); }

absl::Status HandleTable::Charge(size_t n, int64_t bytes, absl::string_view what) {
  if (n == 0) return absl::OkStatus();
  return entries_charge_.Add(memory_, bytes,
                             absl::StrCat(what, " (the table entries of ", n, " tensor handle", n == 1 ? "" : "s", ")"));
}

absl::Status HandleTable::InsertFailed(uint64_t handle, const TensorMeta* meta, std::shared_ptr<OpError> error) {
  if (tensors_.contains(handle)) return absl::OkStatus();
  // A call may name thousands of outputs and fail: each kept handle costs
  // the daemon its entry, and its error's text.
  const int64_t entry_bytes =
      kComputedEntryBytes + static_cast<int64_t>(sizeof(MemoryCharge)) + (meta != nullptr ? MetaHeapBytes(*meta) : 0) +
      (error != nullptr ? static_cast<int64_t>(error->status.message().size() + error->call_site.size()) : 0);
  std::shared_ptr<void> token;
  auto charge = std::make_shared<MemoryCharge>();
  if (absl::Status s = charge->Add(memory_, entry_bytes, "a failed call's output handle"); s.ok()) {
    token = std::move(charge);
  } else if (uncharged_failed_->fetch_add(1) < kMaxUnchargedFailed) {
    token = std::shared_ptr<void>(uncharged_failed_.get(),
                                  [count = uncharged_failed_](void*) { count->fetch_sub(1); });
  } else {
    uncharged_failed_->fetch_sub(1);
    return absl::Status(s.code(),
                        absl::StrCat("handle ", handle, " (an output of a failed call) is not kept: ", s.message()));
  }
  Tensor t;
  if (meta != nullptr) t.meta = *meta;
  t.error = std::move(error);
  t.ag = std::make_shared<AutogradMeta>();
  t.charge = std::move(token);
  tensors_.emplace(handle, std::move(t));
  return absl::OkStatus();
}

bool HandleTable::Erase(uint64_t handle) {
  auto it = tensors_.find(handle);
  if (it == tensors_.end()) return false;
  // A failed entry carries its own charge; every other entry was charged
  // by Charge.
  if (it->second.charge == nullptr) entries_charge_.Sub(EntryBytes(it->second.meta));
  tensors_.erase(it);
  return true;
}

uint64_t HandleTable::NewDaemonHandle(const std::function<bool(uint64_t)>& taken) {
  uint64_t h = kDaemonHandleBit | ++next_daemon_handle_;
  while (tensors_.contains(h) || (taken != nullptr && taken(h))) h = kDaemonHandleBit | ++next_daemon_handle_;
  return h;
}

HandleTable::Map HandleTable::TakeAll() {
  Map out;
  out.swap(tensors_);
  entries_charge_.Sub(entries_charge_.bytes());
  return out;
}

}  // namespace tensord::runtime
