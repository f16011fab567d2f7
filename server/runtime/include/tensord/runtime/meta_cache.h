// tensord/runtime/meta_cache.h — the daemon's per-session cache of meta function
// results. Every streamed op is validated by its meta function before its
// kernel runs; a training loop repeats the same few calls (same op, same
// argument metadata) thousands of times, so the daemon remembers each
// successful result by a key of the op and every argument's kind and value
// (for a tensor: dtype, device, sizes, strides, storage_offset, and which
// earlier argument is the same tensor). Meta functions are pure functions of
// those, so a hit returns exactly what the meta function would. Errors are
// never cached: a failing call runs its meta function every time.
//
//   MetaCache cache;
//   const MetaResult* r = cache.Find(op, args);
//   if (r == nullptr) r = cache.Insert(*table.RunMeta(op, args));  // after a successful run
#ifndef TENSORD_RUNTIME_META_CACHE_H_
#define TENSORD_RUNTIME_META_CACHE_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "tensord/meta/op_table.h"
#include "tensord/meta/value.h"

namespace tensord::runtime {

class MetaCache {
 public:
  // Entries held at most; then the cache starts over (a loop's working set
  // is a few dozen calls).
  static constexpr size_t kCapacity = 1024;
  // Calls whose key would be longer (huge int lists, long tensor lists) are
  // not cached.
  static constexpr size_t kMaxKeyWords = 512;
  // Results with more outputs than this are not cached.
  static constexpr size_t kMaxCachedOutputs = 64;

  // A remembered result, and whether the dispatcher's checks of its output
  // metas (functions of the metas alone) passed: set by the dispatcher once
  // they did, so that a repeated call skips them.
  struct Entry {
    MetaResult result;
    bool outputs_checked = false;
  };

  // The remembered result of `op` on `args` (bound, ValidateArgs passed), or
  // nullptr. The pointer is valid until the next Insert.
  Entry* Find(const OpEntry& op, absl::Span<const Value> args);
  // Remembers the successful result of the call last passed to Find (which
  // must have returned nullptr) and returns where it is kept (outputs not
  // checked), valid until the next Insert.
  Entry* Insert(MetaResult result);

  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }
  size_t size() const { return entries_.size(); }

 private:
  // Builds key_ for the call; false when it cannot be keyed (too long).
  bool BuildKey(const OpEntry& op, absl::Span<const Value> args);

  std::vector<uint64_t> key_;  // the last Find's key, reused (no allocation per lookup)
  bool keyed_ = false;
  Entry uncached_;             // Insert's result for a call without a key
  absl::flat_hash_map<std::vector<uint64_t>, Entry> entries_;
  int64_t hits_ = 0;
  int64_t misses_ = 0;
};

}  // namespace tensord::runtime

#endif  // TENSORD_RUNTIME_META_CACHE_H_
