// kernels/cpu/dtypes.h — the C++ element types behind each ScalarType, the
// conversions between them (IEEE half, bfloat16 and float8 e4m3fn/e5m2, all
// round-to-nearest-even), and the dtype dispatch helpers the CPU kernels use.
//
//   Status s = DispatchAll(t.dtype, "abs", [&](auto tag) -> Status {
//     using T = typename decltype(tag)::type;   // int32_t, Half, double, ...
//     ... Load<T>(p) gives ComputeT<T> (float for Half/BFloat16/float8) ...
//   });
//
// Internal to kernels/: not a public header.
#ifndef TENSORD_KERNELS_CPU_DTYPES_H_
#define TENSORD_KERNELS_CPU_DTYPES_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tensord/meta/dtype.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/value.h"

namespace tensord::cpu {

// ---- bit casts --------------------------------------------------------------

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// ---- IEEE 754 binary16 ------------------------------------------------------
// The branch-light conversions of the FP16 library (Marat Dukhan), which c10
// uses too: exact widening; narrowing rounds to nearest even, overflows to
// inf and keeps NaN a (quiet) NaN.

inline float HalfBitsToFloat(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const uint32_t exp_offset = 0xE0u << 23;
  const float exp_scale = 0x1.0p-112f;
  const float normalized = BitsToFloat((two_w >> 4) + exp_offset) * exp_scale;
  const uint32_t magic_mask = 126u << 23;
  const float magic_bias = 0.5f;
  const float denormalized = BitsToFloat((two_w >> 17) | magic_mask) - magic_bias;
  const uint32_t denormalized_cutoff = 1u << 27;
  const uint32_t result =
      sign | (two_w < denormalized_cutoff ? FloatBits(denormalized) : FloatBits(normalized));
  return BitsToFloat(result);
}

inline uint16_t FloatToHalfBits(float f) {
  const float scale_to_inf = 0x1.0p+112f;
  const float scale_to_zero = 0x1.0p-110f;
  float base = (std::fabs(f) * scale_to_inf) * scale_to_zero;
  const uint32_t w = FloatBits(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = BitsToFloat((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = FloatBits(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

// ---- bfloat16 ---------------------------------------------------------------

inline float BFloat16BitsToFloat(uint16_t b) { return BitsToFloat(static_cast<uint32_t>(b) << 16); }

inline uint16_t FloatToBFloat16Bits(float f) {
  if (std::isnan(f)) return 0x7FC0;
  const uint32_t u = FloatBits(f);
  const uint32_t rounding_bias = 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding_bias) >> 16);
}

// ---- float8 -----------------------------------------------------------------
// e4m3fn: 4 exponent bits (bias 7), 3 mantissa bits, no infinities, NaN is
// S.1111.111, max 448; values that round past 448 become NaN (as c10).
// e5m2: 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like with inf; max
// 57344; values that round past it become inf.

float Float8E4M3FNBitsToFloat(uint8_t b);
uint8_t FloatToFloat8E4M3FNBits(float f);
float Float8E5M2BitsToFloat(uint8_t b);
uint8_t FloatToFloat8E5M2Bits(float f);

// ---- storage types ------------------------------------------------------------

struct Half {
  uint16_t x;
};
struct BFloat16 {
  uint16_t x;
};
struct Float8E4M3FN {
  uint8_t x;
};
struct Float8E5M2 {
  uint8_t x;
};

// The type arithmetic runs in: float for the narrow floating types, the
// storage type otherwise.
template <typename T>
struct ComputeType {
  using type = T;
};
template <> struct ComputeType<Half> { using type = float; };
template <> struct ComputeType<BFloat16> { using type = float; };
template <> struct ComputeType<Float8E4M3FN> { using type = float; };
template <> struct ComputeType<Float8E5M2> { using type = float; };
template <typename T>
using ComputeT = typename ComputeType<T>::type;

template <typename T>
inline constexpr bool kIsReducedFloat =
    std::is_same_v<T, Half> || std::is_same_v<T, BFloat16> || std::is_same_v<T, Float8E4M3FN> ||
    std::is_same_v<T, Float8E5M2>;
template <typename T>
inline constexpr bool kIsFloat = std::is_floating_point_v<T> || kIsReducedFloat<T>;
template <typename T>
inline constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// Loads one element. bool is read as a byte and tested against 0, so a client
// that uploads a byte other than 0/1 into a bool tensor cannot cause UB.
template <typename T>
inline ComputeT<T> Load(const char* p) {
  if constexpr (std::is_same_v<T, bool>) {
    return *reinterpret_cast<const uint8_t*>(p) != 0;
  } else if constexpr (std::is_same_v<T, Half>) {
    uint16_t b;
    std::memcpy(&b, p, 2);
    return HalfBitsToFloat(b);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    uint16_t b;
    std::memcpy(&b, p, 2);
    return BFloat16BitsToFloat(b);
  } else if constexpr (std::is_same_v<T, Float8E4M3FN>) {
    return Float8E4M3FNBitsToFloat(*reinterpret_cast<const uint8_t*>(p));
  } else if constexpr (std::is_same_v<T, Float8E5M2>) {
    return Float8E5M2BitsToFloat(*reinterpret_cast<const uint8_t*>(p));
  } else {
    return *reinterpret_cast<const T*>(p);
  }
}

template <typename T>
inline void Store(char* p, ComputeT<T> v) {
  if constexpr (std::is_same_v<T, bool>) {
    *reinterpret_cast<uint8_t*>(p) = v ? 1 : 0;
  } else if constexpr (std::is_same_v<T, Half>) {
    const uint16_t b = FloatToHalfBits(v);
    std::memcpy(p, &b, 2);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    const uint16_t b = FloatToBFloat16Bits(v);
    std::memcpy(p, &b, 2);
  } else if constexpr (std::is_same_v<T, Float8E4M3FN>) {
    *reinterpret_cast<uint8_t*>(p) = FloatToFloat8E4M3FNBits(v);
  } else if constexpr (std::is_same_v<T, Float8E5M2>) {
    *reinterpret_cast<uint8_t*>(p) = FloatToFloat8E5M2Bits(v);
  } else {
    *reinterpret_cast<T*>(p) = v;
  }
}

// ---- value conversions (PyTorch's static_cast semantics, without UB) --------

// Floating -> integer as PyTorch does on x86: 64-bit targets truncate through
// a 64-bit conversion, narrower ones through a 32-bit one and then wrap; an
// out-of-range or NaN value gives the "integer indefinite" (INT_MIN) of that
// conversion, as cvttss2si does. (-1.5 -> uint8 255, 300.0 -> int8 44,
// NaN -> int8 0, 3e10 -> int32 INT32_MIN.)
template <typename To>
inline To FloatToInt(double v) {
  if constexpr (sizeof(To) == 8) {
    if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0)) {
      return static_cast<To>(std::numeric_limits<int64_t>::min());
    }
    return static_cast<To>(static_cast<int64_t>(v));
  } else {
    int32_t i;
    if (!(v > -2147483649.0 && v < 2147483648.0)) {
      i = std::numeric_limits<int32_t>::min();
    } else {
      i = static_cast<int32_t>(v);
    }
    return static_cast<To>(static_cast<uint32_t>(i));  // wraps modulo 2^n
  }
}

// Converts a compute value of one type to the compute value of another.
template <typename To, typename From>
inline ComputeT<To> ConvertValue(ComputeT<From> v) {
  using CT = ComputeT<To>;
  using CF = ComputeT<From>;
  if constexpr (std::is_same_v<CT, CF>) {
    return v;
  } else if constexpr (std::is_same_v<CT, bool>) {
    return v != CF(0);
  } else if constexpr (std::is_floating_point_v<CF> && std::is_integral_v<CT>) {
    return FloatToInt<CT>(static_cast<double>(v));
  } else if constexpr (kIsReducedFloat<To>) {
    // c10's Half(double) narrows through float first; so do we.
    return static_cast<float>(v);
  } else {
    return static_cast<CT>(v);  // int -> int wraps; int -> float rounds
  }
}

// A Python scalar as the compute value of T (the conversion PyTorch applies
// when a Scalar meets a tensor of dtype T).
template <typename T>
inline ComputeT<T> ScalarTo(const Scalar& s) {
  using C = ComputeT<T>;
  if constexpr (std::is_same_v<C, bool>) {
    return s.to_bool();
  } else if constexpr (std::is_integral_v<C>) {
    if (s.is_float()) return FloatToInt<C>(s.to_double());
    return static_cast<C>(s.to_int());  // wraps, as c10 does
  } else {
    if (s.is_float()) return static_cast<C>(s.to_double());
    return static_cast<C>(s.to_int());
  }
}

// NaN test that compiles for every compute type.
template <typename C>
inline bool IsNan(C v) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

// ---- wrapping integer arithmetic (no signed-overflow UB) -------------------

template <typename C>
inline C WrapAdd(C a, C b) {
  if constexpr (std::is_integral_v<C> && std::is_signed_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return static_cast<C>(a + b);
  }
}
template <typename C>
inline C WrapSub(C a, C b) {
  if constexpr (std::is_integral_v<C> && std::is_signed_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
  } else {
    return static_cast<C>(a - b);
  }
}
template <typename C>
inline C WrapMul(C a, C b) {
  if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>) {
    // Multiply in a wide unsigned type so int8/int16 promotion to int cannot
    // overflow either.
    using U = std::conditional_t<(sizeof(C) > 4), uint64_t, uint32_t>;
    return static_cast<C>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return static_cast<C>(a * b);
  }
}
template <typename C>
inline C WrapNeg(C a) {
  return WrapSub<C>(C(0), a);
}

// ---- dispatch ---------------------------------------------------------------

template <typename T>
struct TypeTag {
  using type = T;
};

// Which dtypes an op accepts.
enum DtypeSet : uint32_t {
  kSetBool = 1u << 0,
  kSetInts = 1u << 1,       // uint8, int8, int16, int32, int64
  kSetStdFloats = 1u << 2,  // float32, float64
  kSetHalfs = 1u << 3,      // float16, bfloat16
  kSetFloat8 = 1u << 4,
  kSetNumeric = kSetInts | kSetStdFloats | kSetHalfs,
  kSetAllButF8 = kSetBool | kSetNumeric,
  kSetFloats = kSetStdFloats | kSetHalfs,
  kSetAll = kSetAllButF8 | kSetFloat8,
};

// PyTorch's spelling of a dtype in "not implemented for 'Float'" messages.
const char* TorchTypeName(ScalarType t);

absl::Status DtypeNotImplemented(absl::string_view op, ScalarType t);

// Calls f(TypeTag<T>{}) for the C++ type of `t` when `t` is in kSet; else a
// NotImplementedErr: "\"abs\" not implemented for 'Bool'". Only the types in
// kSet are instantiated, so f's body need only compile for those.
template <uint32_t kSet, typename F>
absl::Status Dispatch(ScalarType t, absl::string_view op, F&& f) {
  switch (t) {
    case ScalarType::kBool:
      if constexpr ((kSet & kSetBool) != 0) return f(TypeTag<bool>{});
      break;
    case ScalarType::kUInt8:
      if constexpr ((kSet & kSetInts) != 0) return f(TypeTag<uint8_t>{});
      break;
    case ScalarType::kInt8:
      if constexpr ((kSet & kSetInts) != 0) return f(TypeTag<int8_t>{});
      break;
    case ScalarType::kInt16:
      if constexpr ((kSet & kSetInts) != 0) return f(TypeTag<int16_t>{});
      break;
    case ScalarType::kInt32:
      if constexpr ((kSet & kSetInts) != 0) return f(TypeTag<int32_t>{});
      break;
    case ScalarType::kInt64:
      if constexpr ((kSet & kSetInts) != 0) return f(TypeTag<int64_t>{});
      break;
    case ScalarType::kFloat16:
      if constexpr ((kSet & kSetHalfs) != 0) return f(TypeTag<Half>{});
      break;
    case ScalarType::kBFloat16:
      if constexpr ((kSet & kSetHalfs) != 0) return f(TypeTag<BFloat16>{});
      break;
    case ScalarType::kFloat32:
      if constexpr ((kSet & kSetStdFloats) != 0) return f(TypeTag<float>{});
      break;
    case ScalarType::kFloat64:
      if constexpr ((kSet & kSetStdFloats) != 0) return f(TypeTag<double>{});
      break;
    case ScalarType::kFloat8_e4m3fn:
      if constexpr ((kSet & kSetFloat8) != 0) return f(TypeTag<Float8E4M3FN>{});
      break;
    case ScalarType::kFloat8_e5m2:
      if constexpr ((kSet & kSetFloat8) != 0) return f(TypeTag<Float8E5M2>{});
      break;
  }
  return DtypeNotImplemented(op, t);
}

// Element copy by size (for ops that move elements without looking at them).
template <typename F>
absl::Status DispatchBySize(int64_t itemsize, F&& f) {
  switch (itemsize) {
    case 1: return f(TypeTag<uint8_t>{});
    case 2: return f(TypeTag<uint16_t>{});
    case 4: return f(TypeTag<uint32_t>{});
    case 8: return f(TypeTag<uint64_t>{});
    default:
      return InternalErr(absl::StrCat("internal: unsupported itemsize ", itemsize));
  }
}

}  // namespace tensord::cpu

#endif  // TENSORD_KERNELS_CPU_DTYPES_H_
