// tensord/runtime/handles.h — a session's tensors by handle: the table a
// client's handles name, with what each entry costs the daemon charged to
// the session's memory account (a view or a gradient holds no new storage,
// but its entry, metadata and autograd identity are memory all the same).
//
//   HandleTable table(account);
//   TD_RETURN_IF_ERROR(table.Charge(1, HandleTable::EntryBytes(t.meta), "add"));
//   table.Insert(7, std::move(t));
//   Tensor* t = table.Find(7);                      // nullptr: unknown
//   table.Erase(7);                                  // the entry's charge given back
//
// Not thread-safe: one caller at a time (a session calls it under its lock).
#ifndef TENSORD_RUNTIME_HANDLES_H_
#define TENSORD_RUNTIME_HANDLES_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "tensord/runtime/autograd.h"
#include "tensord/runtime/memory.h"

namespace tensord::runtime {

class HandleTable {
 public:
  // node_hash_map: an entry's Tensor (and so its meta, which an op's
  // arguments point at) stays put while others come and go.
  using Map = absl::node_hash_map<uint64_t, Tensor>;

  explicit HandleTable(std::shared_ptr<MemoryAccount> memory) : memory_(std::move(memory)) {}
  HandleTable(const HandleTable&) = delete;
  HandleTable& operator=(const HandleTable&) = delete;

  // The tensor of `handle`; nullptr when the table has none.
  Tensor* Find(uint64_t handle) {
    auto it = tensors_.find(handle);
    return it == tensors_.end() ? nullptr : &it->second;
  }
  bool contains(uint64_t handle) const { return tensors_.contains(handle); }
  size_t size() const { return tensors_.size(); }
  const Map& entries() const { return tensors_; }

  // What the entry of a computed tensor of `m` is charged: the entry, its
  // autograd identity, their allocator overhead and the meta's dims beyond
  // those kept inline (MetaHeapBytes). An entry's meta does not change while
  // it is in the table, so what Erase gives back is what was charged.
  static int64_t EntryBytes(const TensorMeta& m);
  // Charges `n` entries of computed tensors, of `bytes` together (the sum
  // of their EntryBytes), before they are inserted. OutOfMemory naming
  // `what` and the numbers when over the account's limit: the caller then
  // inserts none of them.
  absl::Status Charge(size_t n, int64_t bytes, absl::string_view what);
  // Adds `t` under `handle` (charged with Charge first), unless the handle
  // already names a tensor.
  void Insert(uint64_t handle, Tensor t) { tensors_.emplace(handle, std::move(t)); }
  // Adds a failed tensor (`error`, with `meta` when known) under `handle`
  // unless it already names one, its entry charged on its own. Over the
  // account's limit (the out-of-memory error itself must reach its tensor)
  // at most kMaxUnchargedFailed such entries live uncharged; past those the
  // handle is not kept, and the error that says so is returned.
  absl::Status InsertFailed(uint64_t handle, const TensorMeta* meta, std::shared_ptr<OpError> error);
  // Removes `handle`'s entry, giving back its charge; false when there is none.
  bool Erase(uint64_t handle);

  // A handle the daemon names (a gradient or saved tensor it hands a
  // client's callback): the top bit set, not in the table and not one that
  // `taken` claims (a hostile client may have used daemon-style handles).
  uint64_t NewDaemonHandle(const std::function<bool(uint64_t)>& taken);

  // Empties the table, its charges given back; the caller frees the
  // returned entries (their storages), outside its lock.
  Map TakeAll();

  static constexpr uint64_t kDaemonHandleBit = uint64_t{1} << 63;
  static constexpr int64_t kMaxUnchargedFailed = 1024;

 private:
  const std::shared_ptr<MemoryAccount> memory_;
  Map tensors_;
  MemoryCharge entries_charge_;  // the computed tensors' entries
  // Failed entries kept uncharged now; each one's token decrements it.
  std::shared_ptr<std::atomic<int64_t>> uncharged_failed_ = std::make_shared<std::atomic<int64_t>>(0);
  uint64_t next_daemon_handle_ = 0;
};

}  // namespace tensord::runtime

#endif  // TENSORD_RUNTIME_HANDLES_H_
