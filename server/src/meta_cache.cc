// The daemon's per-session meta cache: see meta_cache.h.
#include "meta_cache.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/container/inlined_vector.h"

namespace tensord::server {
namespace {

uint64_t Bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}

// Appends a tensor's metadata and its identity: the slot of the first
// earlier tensor argument that is the same tensor (same meta object), or
// its own slot.
void PutTensor(std::vector<uint64_t>& key, absl::InlinedVector<const TensorMeta*, 8>& seen, const TensorMeta* t) {
  if (t == nullptr) {
    key.push_back(~uint64_t{0});
    return;
  }
  size_t same = seen.size();
  for (size_t i = 0; i < seen.size(); ++i) {
    if (seen[i] == t) {
      same = i;
      break;
    }
  }
  seen.push_back(t);
  // One resize and plain stores: push_back and insert per word cost about
  // 320 instructions per tensor, a third of a cache hit.
  const size_t nd = t->sizes.size(), ns = t->strides.size();
  const size_t at = key.size();
  key.resize(at + 6 + nd + ns);
  uint64_t* w = key.data() + at;
  *w++ = same;
  *w++ = static_cast<uint64_t>(t->dtype);
  *w++ = (static_cast<uint64_t>(t->device.type) << 32) ^ static_cast<uint32_t>(t->device.index);
  *w++ = nd;
  w = std::copy(t->sizes.begin(), t->sizes.end(), w);
  *w++ = ns;
  w = std::copy(t->strides.begin(), t->strides.end(), w);
  *w = static_cast<uint64_t>(t->storage_offset);
}

}  // namespace

bool MetaCache::BuildKey(const OpEntry& op, absl::Span<const Value> args) {
  key_.clear();
  key_.push_back(op.id);
  absl::InlinedVector<const TensorMeta*, 8> seen;
  for (const Value& v : args) {
    key_.push_back(static_cast<uint64_t>(v.kind()));
    switch (v.kind()) {
      case Value::Kind::kNone:
        break;
      case Value::Kind::kTensor:
        PutTensor(key_, seen, v.tensor_ptr());
        break;
      case Value::Kind::kTensorList:
        key_.push_back(v.tensor_list().size());
        for (const TensorMeta* t : v.tensor_list()) {
          PutTensor(key_, seen, t);
          if (key_.size() > kMaxKeyWords) return false;
        }
        break;
      case Value::Kind::kScalar: {
        const Scalar s = v.scalar();
        key_.push_back(static_cast<uint64_t>(s.kind()));
        key_.push_back(s.is_float() ? Bits(s.to_double()) : static_cast<uint64_t>(s.to_int()));
        break;
      }
      case Value::Kind::kInt:
        key_.push_back(static_cast<uint64_t>(v.to_int()));
        break;
      case Value::Kind::kFloat:
        key_.push_back(Bits(v.to_double()));
        break;
      case Value::Kind::kBool:
        key_.push_back(v.to_bool() ? 1 : 0);
        break;
      case Value::Kind::kIntList:
        if (v.int_list().size() > kMaxKeyWords) return false;
        key_.push_back(v.int_list().size());
        key_.insert(key_.end(), v.int_list().begin(), v.int_list().end());
        break;
      case Value::Kind::kFloatList:
        if (v.float_list().size() > kMaxKeyWords) return false;
        key_.push_back(v.float_list().size());
        for (double d : v.float_list()) key_.push_back(Bits(d));
        break;
      case Value::Kind::kString: {
        const std::string& s = v.str();
        if (s.size() > 8 * kMaxKeyWords) return false;
        key_.push_back(s.size());
        for (size_t i = 0; i < s.size(); i += 8) {
          uint64_t w = 0;
          std::memcpy(&w, s.data() + i, std::min<size_t>(8, s.size() - i));
          key_.push_back(w);
        }
        break;
      }
      case Value::Kind::kDtype:
        key_.push_back(static_cast<uint64_t>(v.dtype()));
        break;
      case Value::Kind::kDevice:
        key_.push_back((static_cast<uint64_t>(v.device().type) << 32) ^ static_cast<uint32_t>(v.device().index));
        break;
    }
    if (key_.size() > kMaxKeyWords) return false;
  }
  return true;
}

const MetaResult* MetaCache::Find(const OpEntry& op, absl::Span<const Value> args) {
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

const MetaResult* MetaCache::Insert(MetaResult result) {
  if (!keyed_) {
    uncached_ = std::move(result);
    return &uncached_;
  }
  keyed_ = false;
  if (entries_.size() >= kCapacity) entries_.clear();
  return &entries_.insert_or_assign(key_, std::move(result)).first->second;
}

}  // namespace tensord::server
