// tensord/meta/meta_key.h — the words of a meta-cache key, shared by the
// client's cache of calls (client/src/meta_cache.cc) and the daemon's
// per-session cache of bound calls (tensord/runtime/meta_cache.h), so that
// both encode an argument's value and a tensor's metadata the same way. A
// meta function is a pure function of what these words hold: its op, and
// per argument the kind and value (for a tensor: dtype, device,
// storage_offset, sizes, strides, and which earlier argument is the same
// tensor, which each cache adds itself). Every variable-length part is
// preceded by its length, so two different calls never encode alike.
//
//   uint64_t* w = buffer.Extend(meta_key::ValueWords(v));  // 0: a tensor kind
//   meta_key::PutValue(w, v);
#ifndef TENSORD_META_META_KEY_H_
#define TENSORD_META_META_KEY_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "tensord/meta/device.h"
#include "tensord/meta/tensor_meta.h"
#include "tensord/meta/value.h"

namespace tensord::meta_key {

inline uint64_t DoubleBits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}

inline uint64_t DeviceWord(const Device& d) {
  return static_cast<uint64_t>(static_cast<uint32_t>(d.type)) << 32 | static_cast<uint32_t>(d.index);
}

// The words PutValue writes for `v`: its kind and its value. 0 for a tensor
// or tensor list, which each cache encodes with its own notion of identity.
inline size_t ValueWords(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kTensor:
    case Value::Kind::kTensorList: return 0;
    case Value::Kind::kNone: return 1;
    case Value::Kind::kScalar: return 3;
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
    case Value::Kind::kBool:
    case Value::Kind::kDtype:
    case Value::Kind::kDevice: return 2;
    case Value::Kind::kIntList: return 2 + v.int_list().size();
    case Value::Kind::kFloatList: return 2 + v.float_list().size();
    case Value::Kind::kString: return 2 + (v.str().size() + 7) / 8;
  }
  return 0;
}

// Writes `v` (not a tensor kind) at `w`, ValueWords(v) words; returns the end.
inline uint64_t* PutValue(uint64_t* w, const Value& v) {
  *w++ = static_cast<uint64_t>(v.kind());
  switch (v.kind()) {
    case Value::Kind::kNone:
    case Value::Kind::kTensor:
    case Value::Kind::kTensorList: break;
    case Value::Kind::kScalar: {
      const Scalar s = v.scalar();
      *w++ = static_cast<uint64_t>(s.kind());
      *w++ = s.is_float() ? DoubleBits(s.to_double()) : static_cast<uint64_t>(s.to_int());
      break;
    }
    case Value::Kind::kInt: *w++ = static_cast<uint64_t>(v.to_int()); break;
    case Value::Kind::kFloat: *w++ = DoubleBits(v.to_double()); break;
    case Value::Kind::kBool: *w++ = v.to_bool() ? 1 : 0; break;
    case Value::Kind::kIntList:
      *w++ = v.int_list().size();
      w = std::copy(v.int_list().begin(), v.int_list().end(), w);
      break;
    case Value::Kind::kFloatList:
      *w++ = v.float_list().size();
      for (double d : v.float_list()) *w++ = DoubleBits(d);
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
    case Value::Kind::kDtype: *w++ = static_cast<uint64_t>(v.dtype()); break;
    case Value::Kind::kDevice: *w++ = DeviceWord(v.device()); break;
  }
  return w;
}

// The words PutTensorMeta writes for `m`.
inline size_t TensorMetaWords(const TensorMeta& m) { return 5 + m.sizes.size() + m.strides.size(); }

// Writes `m`'s dtype, device, storage_offset, sizes and strides at `w`
// (TensorMetaWords(m) words); returns the end.
inline uint64_t* PutTensorMeta(uint64_t* w, const TensorMeta& m) {
  *w++ = static_cast<uint64_t>(m.dtype);
  *w++ = DeviceWord(m.device);
  *w++ = static_cast<uint64_t>(m.storage_offset);
  *w++ = m.sizes.size();
  w = std::copy(m.sizes.begin(), m.sizes.end(), w);
  *w++ = m.strides.size();
  return std::copy(m.strides.begin(), m.strides.end(), w);
}

}  // namespace tensord::meta_key

#endif  // TENSORD_META_META_KEY_H_
