// kernels/cuda/cuda_dtypes.h — the element types of the CUDA kernels, and
// their loads, stores and conversions, written once for device and host
// (the host tests check them against the CPU kernels' kernels/cpu/dtypes.h,
// whose semantics they copy: PyTorch's casts, without undefined behaviour).
//
//   ComputeT<__half> x = Load<__half>(p);               // float
//   Store<int8_t>(q, ConvertValue<int8_t, __half>(x));  // -1.5 -> -1; 300 -> 44
//   float y = LoadCast<__half>(p, ScalarType::kInt64);  // int64 -> half -> float
//
// Storage types: bool (a byte, read as != 0), uint8_t, int8_t, int16_t,
// int32_t, int64_t, __half, __nv_bfloat16, float, double, Float8E4M3FN,
// Float8E5M2. float16 and bfloat16 compute in float, float8 only converts
// (through float). float8 narrowing does not saturate: e4m3fn overflows to
// NaN and e5m2 to inf, as c10 and the CPU kernels do (cuda_fp8.h's
// __nv_fp8_e4m3 constructors saturate, hence __NV_NOSAT here).
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_CUDA_DTYPES_H_
#define TENSORD_KERNELS_CUDA_CUDA_DTYPES_H_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "elementwise_call.h"
#include "macros.h"
#include "tensord/meta/dtype.h"

namespace tensord::cuda {

struct Float8E4M3FN {
  uint8_t x;
};
struct Float8E5M2 {
  uint8_t x;
};

template <typename T>
struct TypeTag {
  using type = T;
};

// ---- type traits ---------------------------------------------------------------

// The type arithmetic runs in: float for the narrow floating types.
template <typename T>
struct ComputeType {
  using type = T;
};
template <> struct ComputeType<__half> { using type = float; };
template <> struct ComputeType<__nv_bfloat16> { using type = float; };
template <> struct ComputeType<Float8E4M3FN> { using type = float; };
template <> struct ComputeType<Float8E5M2> { using type = float; };
template <typename T>
using ComputeT = typename ComputeType<T>::type;

// What a tensor's memory holds per element: bool as a byte, so that a byte
// other than 0 or 1 (which a client may upload) is read without UB.
template <typename T>
struct StorageType {
  using type = T;
};
template <> struct StorageType<bool> { using type = uint8_t; };
template <typename T>
using StorageT = typename StorageType<T>::type;

template <typename T>
inline constexpr bool kIsReducedFloat =
    std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, Float8E4M3FN> ||
    std::is_same_v<T, Float8E5M2>;
template <typename T>
inline constexpr bool kIsFloat8 = std::is_same_v<T, Float8E4M3FN> || std::is_same_v<T, Float8E5M2>;

template <typename T>
constexpr ScalarType ScalarTypeOf() {
  if constexpr (std::is_same_v<T, bool>) return ScalarType::kBool;
  else if constexpr (std::is_same_v<T, uint8_t>) return ScalarType::kUInt8;
  else if constexpr (std::is_same_v<T, int8_t>) return ScalarType::kInt8;
  else if constexpr (std::is_same_v<T, int16_t>) return ScalarType::kInt16;
  else if constexpr (std::is_same_v<T, int32_t>) return ScalarType::kInt32;
  else if constexpr (std::is_same_v<T, int64_t>) return ScalarType::kInt64;
  else if constexpr (std::is_same_v<T, __half>) return ScalarType::kFloat16;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return ScalarType::kBFloat16;
  else if constexpr (std::is_same_v<T, float>) return ScalarType::kFloat32;
  else if constexpr (std::is_same_v<T, double>) return ScalarType::kFloat64;
  else if constexpr (std::is_same_v<T, Float8E4M3FN>) return ScalarType::kFloat8_e4m3fn;
  else {
    static_assert(std::is_same_v<T, Float8E5M2>, "not a tensord element type");
    return ScalarType::kFloat8_e5m2;
  }
}

// T's bit in a DtypeSet (elementwise_call.h).
template <typename T>
constexpr uint32_t SetBitOf() {
  if constexpr (std::is_same_v<T, bool>) return kSetBool;
  else if constexpr (std::is_integral_v<T>) return kSetInts;
  else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) return kSetStdFloats;
  else if constexpr (kIsFloat8<T>) return kSetFloat8;
  else return kSetHalfs;
}
template <typename T>
constexpr bool InSet(uint32_t set) {
  return (SetBitOf<T>() & set) != 0;
}

// ---- storage <-> compute ------------------------------------------------------

template <typename T>
TD_HOST_DEVICE TD_INLINE ComputeT<T> Decode(StorageT<T> raw) {
  if constexpr (std::is_same_v<T, bool>) {
    return raw != 0;
  } else if constexpr (std::is_same_v<T, __half>) {
    return __half2float(raw);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(raw);
  } else if constexpr (std::is_same_v<T, Float8E4M3FN>) {
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(raw.x, __NV_E4M3)));
  } else if constexpr (std::is_same_v<T, Float8E5M2>) {
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(raw.x, __NV_E5M2)));
  } else {
    return raw;
  }
}

template <typename T>
TD_HOST_DEVICE TD_INLINE StorageT<T> Encode(ComputeT<T> v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? 1 : 0;
  } else if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(v);
  } else if constexpr (std::is_same_v<T, Float8E4M3FN>) {
    return Float8E4M3FN{__nv_cvt_float_to_fp8(v, __NV_NOSAT, __NV_E4M3)};
  } else if constexpr (std::is_same_v<T, Float8E5M2>) {
    return Float8E5M2{__nv_cvt_float_to_fp8(v, __NV_NOSAT, __NV_E5M2)};
  } else {
    return v;
  }
}

// One element at `p`, which is aligned to the element's size (every tensor
// element is: storage is allocated aligned and offsets count elements).
template <typename T>
TD_HOST_DEVICE TD_INLINE ComputeT<T> Load(const char* p) {
  return Decode<T>(*reinterpret_cast<const StorageT<T>*>(p));
}

template <typename T>
TD_HOST_DEVICE TD_INLINE void Store(char* p, ComputeT<T> v) {
  *reinterpret_cast<StorageT<T>*>(p) = Encode<T>(v);
}

// `v` rounded to what T stores (identity except for the narrow floats).
template <typename T>
TD_HOST_DEVICE TD_INLINE ComputeT<T> Narrow(ComputeT<T> v) {
  if constexpr (kIsReducedFloat<T>) {
    return Decode<T>(Encode<T>(v));
  } else {
    return v;
  }
}

// ---- conversions (PyTorch's static_cast semantics, as kernels/cpu/dtypes.h) ----

// Floating -> integer as PyTorch on x86 (the CPU kernels' FloatToInt): 64-bit
// targets truncate through a 64-bit conversion, narrower ones through a
// 32-bit one and then wrap; an out-of-range or NaN value gives that
// conversion's INT_MIN. (GPU conversion instructions saturate instead,
// hence the explicit ranges.)
template <typename To>
TD_HOST_DEVICE TD_INLINE To FloatToInt(double v) {
  if constexpr (sizeof(To) == 8) {
    if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0)) {
      return static_cast<To>(INT64_MIN);
    }
    return static_cast<To>(static_cast<int64_t>(v));
  } else {
    int32_t i;
    if (!(v > -2147483649.0 && v < 2147483648.0)) {
      i = INT32_MIN;
    } else {
      i = static_cast<int32_t>(v);
    }
    return static_cast<To>(static_cast<uint32_t>(i));  // wraps modulo 2^n
  }
}

// A compute value of From as the compute value of To, before rounding to
// To's storage (Narrow does that).
template <typename To, typename From>
TD_HOST_DEVICE TD_INLINE ComputeT<To> ConvertValue(ComputeT<From> v) {
  using CT = ComputeT<To>;
  using CF = ComputeT<From>;
  if constexpr (std::is_same_v<CT, CF>) {
    return v;
  } else if constexpr (std::is_same_v<CT, bool>) {
    return v != CF(0);
  } else if constexpr (std::is_floating_point_v<CF> && std::is_integral_v<CT>) {
    return FloatToInt<CT>(static_cast<double>(v));
  } else if constexpr (kIsReducedFloat<To>) {
    return static_cast<float>(v);  // c10 narrows double through float first
  } else {
    return static_cast<CT>(v);  // int -> int wraps; int -> float rounds
  }
}

// The element of dtype `src` at `p`, converted to T and rounded to T's
// storage: what the CPU kernels read after casting an input to T (AsDtype).
template <typename T>
TD_HOST_DEVICE TD_INLINE ComputeT<T> LoadCast(const char* p, ScalarType src) {
  switch (src) {
    case ScalarType::kBool: return Narrow<T>(ConvertValue<T, bool>(Load<bool>(p)));
    case ScalarType::kUInt8: return Narrow<T>(ConvertValue<T, uint8_t>(Load<uint8_t>(p)));
    case ScalarType::kInt8: return Narrow<T>(ConvertValue<T, int8_t>(Load<int8_t>(p)));
    case ScalarType::kInt16: return Narrow<T>(ConvertValue<T, int16_t>(Load<int16_t>(p)));
    case ScalarType::kInt32: return Narrow<T>(ConvertValue<T, int32_t>(Load<int32_t>(p)));
    case ScalarType::kInt64: return Narrow<T>(ConvertValue<T, int64_t>(Load<int64_t>(p)));
    case ScalarType::kFloat16: return Narrow<T>(ConvertValue<T, __half>(Load<__half>(p)));
    case ScalarType::kBFloat16: return Narrow<T>(ConvertValue<T, __nv_bfloat16>(Load<__nv_bfloat16>(p)));
    case ScalarType::kFloat32: return Narrow<T>(ConvertValue<T, float>(Load<float>(p)));
    case ScalarType::kFloat64: return Narrow<T>(ConvertValue<T, double>(Load<double>(p)));
    case ScalarType::kFloat8_e4m3fn: return Narrow<T>(ConvertValue<T, Float8E4M3FN>(Load<Float8E4M3FN>(p)));
    case ScalarType::kFloat8_e5m2: return Narrow<T>(ConvertValue<T, Float8E5M2>(Load<Float8E5M2>(p)));
  }
  return ComputeT<T>(0);  // unreachable: the host checked every operand's dtype
}

// ---- wrapping integer arithmetic (no signed-overflow UB), as the CPU's --------

template <typename C>
TD_HOST_DEVICE TD_INLINE C WrapAdd(C a, C b) {
  if constexpr (std::is_integral_v<C> && std::is_signed_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return static_cast<C>(a + b);
  }
}
template <typename C>
TD_HOST_DEVICE TD_INLINE C WrapSub(C a, C b) {
  if constexpr (std::is_integral_v<C> && std::is_signed_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
  } else {
    return static_cast<C>(a - b);
  }
}
template <typename C>
TD_HOST_DEVICE TD_INLINE C WrapMul(C a, C b) {
  if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>) {
    // In a wide unsigned type, so that int8/int16's promotion to int cannot overflow.
    using U = std::conditional_t<(sizeof(C) > 4), uint64_t, uint32_t>;
    return static_cast<C>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return static_cast<C>(a * b);
  }
}
template <typename C>
TD_HOST_DEVICE TD_INLINE C WrapNeg(C a) {
  return WrapSub<C>(C(0), a);
}

template <typename C>
TD_HOST_DEVICE TD_INLINE bool IsNan(C v) {
  if constexpr (std::is_floating_point_v<C>) {
    return v != v;
  } else {
    return false;
  }
}

// ---- host-side dtype dispatch --------------------------------------------------

// Calls f(TypeTag<T>{}) for the storage type of `t` when `t` is in kSet and
// returns its result; `otherwise` when not. Only the types in kSet are
// instantiated.
template <uint32_t kSet, typename R, typename F>
R DispatchDtype(ScalarType t, R otherwise, F&& f) {
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
      if constexpr ((kSet & kSetHalfs) != 0) return f(TypeTag<__half>{});
      break;
    case ScalarType::kBFloat16:
      if constexpr ((kSet & kSetHalfs) != 0) return f(TypeTag<__nv_bfloat16>{});
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
  return otherwise;
}

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_CUDA_DTYPES_H_
