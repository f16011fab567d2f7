// The client's meta cache: per thread, a repeated op call is answered from
// what the same call produced before, without binding or a meta function.
#include "tensord/client/ops.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/hash/hash.h"
#include "ops_internal.h"
#include "tensord/meta/meta_key.h"

namespace tensord::client {
namespace internal {
namespace {

// Per thread, a repeated call skips overload resolution, binding, validation
// and the meta function: a meta-only call entirely, a call on daemon tensors
// up to streaming its bound arguments (kept in the entry). The key encodes
// everything those depend on: the op name and call mode; every argument, in
// order, with its kind and value (for a tensor: dtype, device, sizes,
// strides, storage_offset, and which earlier argument is the same tensor);
// keyword names; the innermost DeviceGuard and ForceMetaDevice. The entry
// holds what they produced: the overload, the output metadata, the aliasing
// and which input tensors autograd looks at (by position in the call's flat
// tensor list). Autograd state (requires_grad, grad mode, views, leaves) is
// not in the key: it is applied on every call, hit or miss, by the same code.
// Only successful calls are stored (an error is recomputed every time), and
// the cache is emptied when it holds kMetaCacheCapacity entries.

constexpr size_t kMetaCacheCapacity = 2048;
// Calls with more tensors than this are not cached (the same-tensor scan is
// quadratic; such calls are rare and their meta cost is dominated by data).
constexpr size_t kMetaCacheMaxTensors = 64;

struct MetaCacheEntry {
  const OpEntry* op = nullptr;
  std::vector<TensorMeta> outputs;
  std::vector<int> alias_of;  // MetaResult::alias_of (argument indices)
  // CallRoles as positions in the call's flat tensor list (-1: nullptr).
  absl::InlinedVector<int, 4> diff_inputs;
  absl::InlinedVector<int, 2> written;
  absl::InlinedVector<int, 2> alias_base;
  absl::InlinedVector<std::pair<int, int>, 4> slots;  // (argument, position)
  // A call whose outputs live in a daemon also keeps its bound arguments, to
  // stream them again: `values` with every tensor pointer cleared, and per
  // value the positions of its tensors in the call's flat tensor list (one
  // for a Tensor, one per item for a list; -1 for a None item).
  bool real = false;
  std::vector<Value> values;
  std::vector<absl::InlinedVector<int, 2>> value_tensors;
};

// The key being built: a growable array of words that keeps its storage
// from call to call (no allocation and no zero-filling per call).
class KeyBuffer {
 public:
  void clear() { size_ = 0; }
  void push_back(uint64_t w) { *Extend(1) = w; }
  // Room for n more words, to be written at the returned pointer.
  uint64_t* Extend(size_t n) {
    if (size_ + n > capacity_) Grow(size_ + n);
    uint64_t* at = words_.get() + size_;
    size_ += n;
    return at;
  }
  absl::Span<const uint64_t> span() const { return {words_.get(), size_}; }

 private:
  void Grow(size_t need) {
    const size_t cap = std::max<size_t>(need, 2 * capacity_ + 64);
    std::unique_ptr<uint64_t[]> w(new uint64_t[cap]);
    if (size_ > 0) std::memcpy(w.get(), words_.get(), size_ * sizeof(uint64_t));
    words_ = std::move(w);
    capacity_ = cap;
  }
  std::unique_ptr<uint64_t[]> words_;
  size_t size_ = 0, capacity_ = 0;
};

// Stored keys are vectors, looked up by the span being built.
struct KeyHash {
  using is_transparent = void;
  size_t operator()(absl::Span<const uint64_t> k) const { return absl::Hash<absl::Span<const uint64_t>>{}(k); }
};
struct KeyEq {
  using is_transparent = void;
  bool operator()(absl::Span<const uint64_t> a, absl::Span<const uint64_t> b) const { return a == b; }
};

struct MetaCache {
  bool enabled = true;
  int64_t hits = 0, misses = 0;
  KeyBuffer key;                                  // the current call's key (scratch)
  absl::InlinedVector<const Tensor*, 8> tensors;  // the current call's tensors, flat (scratch)
  absl::flat_hash_map<std::vector<uint64_t>, MetaCacheEntry, KeyHash, KeyEq> entries;

  const MetaCacheEntry* Find() const {
    auto it = entries.find(key.span());
    return it == entries.end() ? nullptr : &it->second;
  }
};

MetaCache& ThreadMetaCache() {
  // Held through a pointer: with the thread_local object itself, GCC
  // const-propagates its address into clones of the key builders, which in
  // a shared object (the Python module) then look the address up again
  // (__tls_get_addr) at every use: about 30 calls per op.
  thread_local const std::unique_ptr<MetaCache> cache = std::make_unique<MetaCache>();
  return *cache;
}

// Key words: values and tensor metadata as tensord/meta/meta_key.h writes
// them (as the daemon's cache does), each tensor behind a tag; every
// variable-length part is preceded by its length, so two different calls
// never encode alike. Tags lie above every Value::Kind (meta_key's first
// word of a value).
enum KeyTag : uint64_t {
  kTagTensor = 100,
  kTagNoneItem,
  kTagTensorList,
  kTagOptionalTensorList,
};

void PutString(KeyBuffer& k, absl::string_view s) {
  k.push_back(s.size());
  for (size_t i = 0; i < s.size(); i += 8) {
    uint64_t w = 0;
    std::memcpy(&w, s.data() + i, std::min<size_t>(8, s.size() - i));
    k.push_back(w);
  }
}

bool PutValue(KeyBuffer& k, const Value& v) {
  const size_t n = meta_key::ValueWords(v);
  if (n == 0) return false;  // raw tensor Values: Convert's error
  meta_key::PutValue(k.Extend(n), v);
  return true;
}

bool PutTensor(MetaCache& mc, const std::optional<Tensor>& t) {
  KeyBuffer& k = mc.key;
  if (!t.has_value()) {
    k.push_back(kTagNoneItem);
    return true;
  }
  if (!t->defined() || mc.tensors.size() >= kMetaCacheMaxTensors) return false;
  const TensorImpl* impl = t->impl().get();
  uint64_t same = 0;  // 1 + the position of the first earlier tensor that is this one
  for (size_t i = 0; i < mc.tensors.size(); ++i) {
    if (mc.tensors[i]->impl().get() == impl) {
      same = i + 1;
      break;
    }
  }
  mc.tensors.push_back(&*t);
  const TensorMeta& m = impl->meta;
  uint64_t* w = k.Extend(2 + meta_key::TensorMetaWords(m));
  *w++ = kTagTensor;
  *w++ = same;
  meta_key::PutTensorMeta(w, m);
  return true;
}

bool PutArg(MetaCache& mc, const Arg& a) {
  switch (a.kind()) {
    case Arg::kValue: return PutValue(mc.key, a.value());
    case Arg::kTensor: return PutTensor(mc, a.tensors()[0]);
    case Arg::kTensorList:
    case Arg::kOptionalTensorList:
      mc.key.push_back(a.kind() == Arg::kTensorList ? kTagTensorList : kTagOptionalTensorList);
      mc.key.push_back(a.tensors().size());
      for (const std::optional<Tensor>& t : a.tensors()) {
        if (!PutTensor(mc, t)) return false;
      }
      return true;
  }
  return false;
}

// Builds the call's key into mc.key and its flat tensor list into
// mc.tensors (the order Convert keeps them in). False when the call cannot
// be cached.
bool EncodeCall(absl::string_view name, const std::vector<Arg>& args, const Kwargs& kwargs, CallMode mode,
                bool force_meta, const Device* default_device, MetaCache& mc) {
  KeyBuffer& k = mc.key;
  k.clear();
  mc.tensors.clear();
  PutString(k, name);
  k.push_back(static_cast<uint64_t>(mode));
  k.push_back(force_meta);
  if (default_device == nullptr) {
    k.push_back(0);
  } else {
    k.push_back(1);
    k.push_back(meta_key::DeviceWord(*default_device));
  }
  k.push_back(args.size());
  for (const Arg& a : args) {
    if (!PutArg(mc, a)) return false;
  }
  k.push_back(kwargs.size());
  for (const auto& [kw, a] : kwargs) {
    PutString(k, kw);
    if (!PutArg(mc, a)) return false;
  }
  return true;
}

// A cache hit: the stored outputs, with autograd and storage ids applied to
// this call's tensors as on a miss.
absl::StatusOr<std::vector<Tensor>> CallCached(const MetaCacheEntry& e, absl::Span<const Tensor* const> tensors,
                                               CallSite& site) {
  auto at = [&](int i) -> const Tensor* { return i < 0 ? nullptr : tensors[i]; };
  CallRoles roles;
  for (int i : e.diff_inputs) roles.diff_inputs.push_back(at(i));
  for (int i : e.written) roles.written.push_back(at(i));
  for (int i : e.alias_base) roles.alias_base.push_back(at(i));
  for (const auto& [a, i] : e.slots) roles.slots.emplace_back(a, at(i));
  // The outputs' metadata is copied (the tensors take it); the small
  // vectors below hold a call's few items without a heap allocation.
  absl::InlinedVector<TensorMeta, 2> outputs(e.outputs.begin(), e.outputs.end());
  if (!e.real) return Produce(*e.op, roles, e.alias_of, absl::MakeSpan(outputs), /*on_meta=*/true, {}, {}, site);
  // Streamed to the daemon as on a miss, with this call's tensors bound
  // where the stored arguments had theirs.
  absl::InlinedVector<Tensor, 4> call_tensors;
  call_tensors.reserve(tensors.size());
  for (const Tensor* t : tensors) call_tensors.push_back(*t);
  absl::InlinedVector<Value, 4> values(e.values.begin(), e.values.end());
  for (size_t i = 0; i < values.size(); ++i) {
    const auto& pos = e.value_tensors[i];
    if (pos.empty()) continue;
    auto meta_at = [&](int p) -> const TensorMeta* { return p < 0 ? nullptr : &call_tensors[p].meta(); };
    if (values[i].kind() == Value::Kind::kTensor) {
      values[i] = Value(meta_at(pos[0]));
    } else {
      TensorList list;
      list.reserve(pos.size());
      for (int p : pos) list.push_back(meta_at(p));
      values[i] = Value(std::move(list));
    }
  }
  return Produce(*e.op, roles, e.alias_of, absl::MakeSpan(outputs), /*on_meta=*/false, values, call_tensors, site);
}

}  // namespace

std::optional<absl::StatusOr<std::vector<Tensor>>> CallFromMetaCache(absl::string_view name,
                                                                     const std::vector<Arg>& args,
                                                                     const Kwargs& kwargs, CallMode mode,
                                                                     bool force_meta, const Device* default_device,
                                                                     CallSite& site, std::optional<MetaCacheKey>* key) {
  MetaCache& mc = ThreadMetaCache();
  if (!mc.enabled || !EncodeCall(name, args, kwargs, mode, force_meta, default_device, mc)) return std::nullopt;
  if (const MetaCacheEntry* e = mc.Find()) {
    ++mc.hits;
    return CallCached(*e, mc.tensors, site);
  }
  ++mc.misses;
  key->emplace();
  (*key)->words.assign(mc.key.span().begin(), mc.key.span().end());
  (*key)->ntensors = mc.tensors.size();
  return std::nullopt;
}

void RememberMetaCall(MetaCacheKey key, const OpEntry& op, const MetaResult& r, const CallRoles& roles,
                      const std::vector<Tensor>& tensors, const std::vector<Value>* values) {
  if (tensors.size() != key.ntensors) return;  // the key's tensors are not Convert's: never expected
  auto pos = [&](const Tensor* t) { return t == nullptr ? -1 : static_cast<int>(t - tensors.data()); };
  MetaCacheEntry e;
  e.op = &op;
  e.outputs = r.outputs;
  e.alias_of = r.alias_of;
  for (const Tensor* t : roles.diff_inputs) e.diff_inputs.push_back(pos(t));
  for (const Tensor* t : roles.written) e.written.push_back(pos(t));
  for (const Tensor* t : roles.alias_base) e.alias_base.push_back(pos(t));
  for (const auto& [a, t] : roles.slots) e.slots.emplace_back(a, pos(t));
  if (values != nullptr) {
    auto meta_pos = [&](const TensorMeta* m) {
      if (m == nullptr) return -1;
      for (size_t i = 0; i < tensors.size(); ++i) {
        if (&tensors[i].meta() == m) return static_cast<int>(i);
      }
      return -2;  // not one of the call's tensors: never expected
    };
    e.real = true;
    e.values = *values;
    e.value_tensors.resize(values->size());
    for (size_t i = 0; i < values->size(); ++i) {
      Value& v = e.values[i];
      if (v.kind() == Value::Kind::kTensor) {
        e.value_tensors[i].push_back(meta_pos(v.tensor_ptr()));
        v = Value(static_cast<const TensorMeta*>(nullptr));
      } else if (v.kind() == Value::Kind::kTensorList) {
        for (const TensorMeta* m : v.tensor_list()) e.value_tensors[i].push_back(meta_pos(m));
        v = Value(TensorList(v.tensor_list().size(), nullptr));
      }
      for (int p : e.value_tensors[i]) {
        if (p == -2) return;
      }
    }
  }
  MetaCache& mc = ThreadMetaCache();
  if (mc.entries.size() >= kMetaCacheCapacity) mc.entries.clear();
  mc.entries.insert_or_assign(std::move(key.words), std::move(e));
}

}  // namespace internal

MetaCacheInfo GetMetaCacheInfo() {
  const internal::MetaCache& mc = internal::ThreadMetaCache();
  return MetaCacheInfo{mc.enabled, mc.hits, mc.misses, static_cast<int64_t>(mc.entries.size()),
                       static_cast<int64_t>(internal::kMetaCacheCapacity)};
}

void SetMetaCacheEnabled(bool enabled) { internal::ThreadMetaCache().enabled = enabled; }

void ClearMetaCache() {
  internal::MetaCache& mc = internal::ThreadMetaCache();
  mc.entries.clear();
  mc.hits = mc.misses = 0;
}

}  // namespace tensord::client
