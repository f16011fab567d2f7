// The daemon's per-session meta cache: see meta_cache.h.
#include "tensord/runtime/meta_cache.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "tensord/meta/meta_key.h"

namespace tensord::runtime {
namespace {

// The words PutTensor writes for `t`.
size_t TensorWords(const TensorMeta* t) { return t == nullptr ? 1 : 1 + meta_key::TensorMetaWords(*t); }

// Writes a tensor's identity and metadata at `w` (TensorWords(t) words):
// the slot of the first earlier tensor argument that is the same tensor
// (same meta object), or its own slot, then meta_key's words. Returns the
// end of what it wrote.
uint64_t* PutTensor(uint64_t* w, absl::InlinedVector<const TensorMeta*, 8>& seen, const TensorMeta* t) {
  if (t == nullptr) {
    *w++ = ~uint64_t{0};
    return w;
  }
  size_t same = seen.size();
  for (size_t i = 0; i < seen.size(); ++i) {
    if (seen[i] == t) {
      same = i;
      break;
    }
  }
  seen.push_back(t);
  *w++ = same;
  return meta_key::PutTensorMeta(w, *t);
}

}  // namespace

bool MetaCache::BuildKey(const OpEntry& op, absl::Span<const Value> args) {
  // First the key's length, so that the words are written with plain
  // stores after one resize: a push_back per word cost a large share of a
  // hit. Calls whose key would pass kMaxKeyWords are not keyed.
  size_t words = 1;
  for (const Value& v : args) {
    switch (v.kind()) {
      case Value::Kind::kTensor:
        words += 1 + TensorWords(v.tensor_ptr());
        break;
      case Value::Kind::kTensorList:
        words += 2;
        for (const TensorMeta* t : v.tensor_list()) {
          words += TensorWords(t);
          if (words > kMaxKeyWords) return false;
        }
        break;
      default:
        words += meta_key::ValueWords(v);
        break;
    }
    if (words > kMaxKeyWords) return false;
  }
  key_.resize(words);
  uint64_t* w = key_.data();
  *w++ = op.id;
  absl::InlinedVector<const TensorMeta*, 8> seen;
  for (const Value& v : args) {
    switch (v.kind()) {
      case Value::Kind::kTensor:
        *w++ = static_cast<uint64_t>(v.kind());
        w = PutTensor(w, seen, v.tensor_ptr());
        break;
      case Value::Kind::kTensorList:
        *w++ = static_cast<uint64_t>(v.kind());
        *w++ = v.tensor_list().size();
        for (const TensorMeta* t : v.tensor_list()) w = PutTensor(w, seen, t);
        break;
      default:
        w = meta_key::PutValue(w, v);
        break;
    }
  }
  return true;
}

MetaCache::Entry* MetaCache::Find(const OpEntry& op, absl::Span<const Value> args) {
  keyed_ = BuildKey(op, args);
  if (keyed_) {
    auto it = entries_.find(key_);
    if (it != entries_.end()) {
      ++hits_;
      return &it->second;
    }
  }
  ++misses_;
  return nullptr;
}

MetaCache::Entry* MetaCache::Insert(MetaResult result) {
  // A result with many outputs (split into thousands of pieces) is not
  // kept: kCapacity of them would hold far more than a key's size suggests.
  if (!keyed_ || result.outputs.size() > kMaxCachedOutputs) {
    keyed_ = false;
    uncached_ = Entry{std::move(result), false};
    return &uncached_;
  }
  keyed_ = false;
  if (entries_.size() >= kCapacity) entries_.clear();
  return &entries_.insert_or_assign(key_, Entry{std::move(result), false}).first->second;
}

}  // namespace tensord::runtime
