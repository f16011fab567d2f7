// The daemon's per-session meta cache: see meta_cache.h.
#include "tensord/runtime/meta_cache.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/container/inlined_vector.h"

namespace tensord::runtime {
namespace {

uint64_t Bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}

uint64_t DeviceWord(const Device& d) {
  return (static_cast<uint64_t>(d.type) << 32) ^ static_cast<uint32_t>(d.index);
}

// The words PutTensor writes for `t`.
size_t TensorWords(const TensorMeta* t) { return t == nullptr ? 1 : 6 + t->sizes.size() + t->strides.size(); }

// Writes a tensor's metadata and its identity at `w` (TensorWords(t) words):
// the slot of the first earlier tensor argument that is the same tensor
// (same meta object), or its own slot. Returns the end of what it wrote.
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
  *w++ = static_cast<uint64_t>(t->dtype);
  *w++ = DeviceWord(t->device);
  *w++ = t->sizes.size();
  w = std::copy(t->sizes.begin(), t->sizes.end(), w);
  *w++ = t->strides.size();
  w = std::copy(t->strides.begin(), t->strides.end(), w);
  *w++ = static_cast<uint64_t>(t->storage_offset);
  return w;
}

}  // namespace

bool MetaCache::BuildKey(const OpEntry& op, absl::Span<const Value> args) {
  // First the key's length, so that the words are written with plain
  // stores after one resize: a push_back per word cost a large share of a
  // hit. Calls whose key would pass kMaxKeyWords are not keyed.
  size_t words = 1;
  for (const Value& v : args) {
    words += 1;
    switch (v.kind()) {
      case Value::Kind::kNone:
        break;
      case Value::Kind::kTensor:
        words += TensorWords(v.tensor_ptr());
        break;
      case Value::Kind::kTensorList:
        words += 1;
        for (const TensorMeta* t : v.tensor_list()) {
          words += TensorWords(t);
          if (words > kMaxKeyWords) return false;
        }
        break;
      case Value::Kind::kScalar:
        words += 2;
        break;
      case Value::Kind::kInt:
      case Value::Kind::kFloat:
      case Value::Kind::kBool:
      case Value::Kind::kDtype:
      case Value::Kind::kDevice:
        words += 1;
        break;
      case Value::Kind::kIntList:
        if (v.int_list().size() > kMaxKeyWords) return false;
        words += 1 + v.int_list().size();
        break;
      case Value::Kind::kFloatList:
        if (v.float_list().size() > kMaxKeyWords) return false;
        words += 1 + v.float_list().size();
        break;
      case Value::Kind::kString:
        if (v.str().size() > 8 * kMaxKeyWords) return false;
        words += 1 + (v.str().size() + 7) / 8;
        break;
    }
    if (words > kMaxKeyWords) return false;
  }
  key_.resize(words);
  uint64_t* w = key_.data();
  *w++ = op.id;
  absl::InlinedVector<const TensorMeta*, 8> seen;
  for (const Value& v : args) {
    *w++ = static_cast<uint64_t>(v.kind());
    switch (v.kind()) {
      case Value::Kind::kNone:
        break;
      case Value::Kind::kTensor:
        w = PutTensor(w, seen, v.tensor_ptr());
        break;
      case Value::Kind::kTensorList:
        *w++ = v.tensor_list().size();
        for (const TensorMeta* t : v.tensor_list()) w = PutTensor(w, seen, t);
        break;
      case Value::Kind::kScalar: {
        const Scalar s = v.scalar();
        *w++ = static_cast<uint64_t>(s.kind());
        *w++ = s.is_float() ? Bits(s.to_double()) : static_cast<uint64_t>(s.to_int());
        break;
      }
      case Value::Kind::kInt:
        *w++ = static_cast<uint64_t>(v.to_int());
        break;
      case Value::Kind::kFloat:
        *w++ = Bits(v.to_double());
        break;
      case Value::Kind::kBool:
        *w++ = v.to_bool() ? 1 : 0;
        break;
      case Value::Kind::kIntList:
        *w++ = v.int_list().size();
        w = std::copy(v.int_list().begin(), v.int_list().end(), w);
        break;
      case Value::Kind::kFloatList:
        *w++ = v.float_list().size();
        for (double d : v.float_list()) *w++ = Bits(d);
        break;
      case Value::Kind::kString: {
        const std::string& s = v.str();
        *w++ = s.size();
        for (size_t i = 0; i < s.size(); i += 8) {
          uint64_t word = 0;
          std::memcpy(&word, s.data() + i, std::min<size_t>(8, s.size() - i));
          *w++ = word;
        }
        break;
      }
      case Value::Kind::kDtype:
        *w++ = static_cast<uint64_t>(v.dtype());
        break;
      case Value::Kind::kDevice:
        *w++ = DeviceWord(v.device());
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
