// kernels/cuda/elementwise_ops.h — the functors of the CUDA elementwise
// kernels, one per op, and the dispatch from an ElementwiseCall (family,
// op, dtype) to Engine::Run with the functor for that dtype. Each functor
// is the CPU kernel's lambda (kernels/cpu/unary.cc, binary.cc), on the
// compute type C of a storage type T, so the devices agree:
//
//   template <class Engine> int DispatchUnary(const ElementwiseCall&, void* stream);
//   // kernels/cuda/unary.cu:  return DispatchUnary<CudaEngine>(call, stream);
//   // the host tests:         return DispatchUnary<HostEngine>(call, stream);
//
// Where the CPU raises an error from inside its loop (integer division or
// remainder by zero: "ZeroDivisionError"), a GPU thread cannot: these
// functors give 0 for x // 0, x % 0 and fmod(x, 0) on integers instead (the
// value the CPU computes before raising). The error word
// (device_error.h) is kept for bad indices.
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_ELEMENTWISE_OPS_H_
#define TENSORD_KERNELS_CUDA_ELEMENTWISE_OPS_H_

#include <math.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cuda_dtypes.h"
#include "elementwise_call.h"
#include "macros.h"

namespace tensord::cuda {

// ---- math on float and double, device or host -------------------------------

// The C library's functions, which CUDA declares for device code too.
#define TD_MATH1(NAME, FN)                                                        \
  TD_HOST_DEVICE TD_INLINE float NAME(float x) { return ::FN##f(x); }             \
  TD_HOST_DEVICE TD_INLINE double NAME(double x) { return ::FN(x); }
#define TD_MATH2(NAME, FN)                                                        \
  TD_HOST_DEVICE TD_INLINE float NAME(float x, float y) { return ::FN##f(x, y); } \
  TD_HOST_DEVICE TD_INLINE double NAME(double x, double y) { return ::FN(x, y); }

namespace math {
TD_MATH1(Exp, exp)
TD_MATH1(Log, log)
TD_MATH1(Sqrt, sqrt)
TD_MATH1(Sin, sin)
TD_MATH1(Cos, cos)
TD_MATH1(Tanh, tanh)
TD_MATH1(Erf, erf)
TD_MATH1(Exp2, exp2)
TD_MATH1(Expm1, expm1)
TD_MATH1(Log2, log2)
TD_MATH1(Log1p, log1p)
TD_MATH1(Floor, floor)
TD_MATH1(Ceil, ceil)
TD_MATH1(Trunc, trunc)
TD_MATH1(Rint, rint)
TD_MATH1(Fabs, fabs)
TD_MATH2(Fmod, fmod)
TD_MATH2(Atan2, atan2)
TD_MATH2(Pow, pow)
TD_MATH2(Copysign, copysign)

template <typename C>
TD_HOST_DEVICE TD_INLINE bool IsInf(C x) {
  if constexpr (std::is_floating_point_v<C>) {
    return !IsNan(x) && IsNan(x - x);  // inf - inf is NaN; finite - itself is 0
  } else {
    return false;
  }
}
}  // namespace math

#undef TD_MATH1
#undef TD_MATH2

// ---- copy ------------------------------------------------------------------------

template <typename T>
struct CopyFn {
  using C = ComputeT<T>;
  TD_HOST_DEVICE TD_INLINE C operator()(C x) const { return x; }
};

// ---- unary, one dtype -------------------------------------------------------------

template <typename T, UnaryOp kOp>
struct UnaryFn {
  using C = ComputeT<T>;
  TD_HOST_DEVICE TD_INLINE C operator()(C x) const {
    if constexpr (kOp == UnaryOp::kNeg) {
      if constexpr (std::is_floating_point_v<C>) {
        return -x;
      } else {
        return WrapNeg<C>(x);
      }
    } else if constexpr (kOp == UnaryOp::kAbs) {
      if constexpr (std::is_floating_point_v<C>) {
        return math::Fabs(x);
      } else if constexpr (std::is_unsigned_v<C>) {
        return x;
      } else {
        return x < 0 ? WrapNeg<C>(x) : x;  // abs(INT_MIN) wraps to INT_MIN, as PyTorch
      }
    } else if constexpr (kOp == UnaryOp::kSign) {
      if constexpr (std::is_same_v<C, bool>) {
        return x;
      } else if constexpr (std::is_unsigned_v<C>) {
        return static_cast<C>(x != 0 ? 1 : 0);
      } else {
        return static_cast<C>((C(0) < x) - (x < C(0)));  // NaN -> 0, as PyTorch
      }
    } else if constexpr (kOp == UnaryOp::kFloor || kOp == UnaryOp::kCeil || kOp == UnaryOp::kRound ||
                         kOp == UnaryOp::kTrunc) {
      if constexpr (std::is_floating_point_v<C>) {
        if constexpr (kOp == UnaryOp::kFloor) {
          return math::Floor(x);
        } else if constexpr (kOp == UnaryOp::kCeil) {
          return math::Ceil(x);
        } else if constexpr (kOp == UnaryOp::kRound) {
          return math::Rint(x);  // half to even, as the CPU's nearbyint
        } else {
          return math::Trunc(x);
        }
      } else {
        return x;  // integers are already whole
      }
    } else if constexpr (kOp == UnaryOp::kRelu) {
      if constexpr (std::is_unsigned_v<C>) {
        return x;
      } else {
        return x < C(0) ? C(0) : x;  // clamp_min(x, 0): NaN and -0.0 pass through
      }
    } else if constexpr (kOp == UnaryOp::kBitwiseNot) {
      if constexpr (std::is_same_v<C, bool>) {
        return !x;
      } else {
        return static_cast<C>(~x);
      }
    } else {
      static_assert(kOp == UnaryOp::kSquare, "unhandled UnaryOp");
      if constexpr (std::is_floating_point_v<C>) {
        return x * x;
      } else {
        return WrapMul<C>(x, x);
      }
    }
  }
};

// ---- floating math -------------------------------------------------------------------

template <typename T, FloatMathOp kOp>
struct FloatMathFn {
  using C = ComputeT<T>;
  static_assert(std::is_floating_point_v<C>, "floating dtypes only");
  TD_HOST_DEVICE TD_INLINE C operator()(C x) const {
    if constexpr (kOp == FloatMathOp::kExp) {
      return math::Exp(x);
    } else if constexpr (kOp == FloatMathOp::kLog) {
      return math::Log(x);
    } else if constexpr (kOp == FloatMathOp::kSqrt) {
      return math::Sqrt(x);
    } else if constexpr (kOp == FloatMathOp::kRsqrt) {
      return C(1) / math::Sqrt(x);
    } else if constexpr (kOp == FloatMathOp::kSin) {
      return math::Sin(x);
    } else if constexpr (kOp == FloatMathOp::kCos) {
      return math::Cos(x);
    } else if constexpr (kOp == FloatMathOp::kTanh) {
      return math::Tanh(x);
    } else if constexpr (kOp == FloatMathOp::kSigmoid) {
      return C(1) / (C(1) + math::Exp(-x));
    } else if constexpr (kOp == FloatMathOp::kReciprocal) {
      return C(1) / x;
    } else if constexpr (kOp == FloatMathOp::kErf) {
      return math::Erf(x);
    } else if constexpr (kOp == FloatMathOp::kExp2) {
      return math::Exp2(x);
    } else if constexpr (kOp == FloatMathOp::kExpm1) {
      return math::Expm1(x);
    } else if constexpr (kOp == FloatMathOp::kLog2) {
      return math::Log2(x);
    } else if constexpr (kOp == FloatMathOp::kLog1p) {
      return math::Log1p(x);
    } else if constexpr (kOp == FloatMathOp::kSilu) {
      return x / (C(1) + math::Exp(-x));  // as the CPU's
    } else if constexpr (kOp == FloatMathOp::kGeluErf) {
      return x * static_cast<C>(0.5) * (static_cast<C>(1) + math::Erf(x * static_cast<C>(M_SQRT1_2)));
    } else {
      static_assert(kOp == FloatMathOp::kGeluTanh, "unhandled FloatMathOp");
      const C k_beta = static_cast<C>(M_SQRT2 * M_2_SQRTPI * 0.5);  // sqrt(2 / pi)
      const C k_kappa = static_cast<C>(0.044715);
      const C inner = k_beta * (x + k_kappa * x * x * x);
      return static_cast<C>(0.5) * x * (static_cast<C>(1) + math::Tanh(inner));
    }
  }
};

// ---- predicates (bool results) ----------------------------------------------------------

template <typename T, PredicateOp kOp>
struct PredicateFn {
  using C = ComputeT<T>;
  TD_HOST_DEVICE TD_INLINE bool operator()(C x) const {
    if constexpr (kOp == PredicateOp::kLogicalNot) {
      return !(x != C(0));
    } else if constexpr (kOp == PredicateOp::kIsNan) {
      return IsNan(x);
    } else if constexpr (kOp == PredicateOp::kIsInf) {
      return math::IsInf(x);
    } else {
      static_assert(kOp == PredicateOp::kIsFinite, "unhandled PredicateOp");
      return !IsNan(x) && !math::IsInf(x);
    }
  }
};

// ---- binary arithmetic ------------------------------------------------------------------

// Integer power by squaring, wrapping; negative exponents give 1 for base 1,
// +-1 for base -1 and 0 otherwise (the CPU's IntPow).
template <typename C>
TD_HOST_DEVICE TD_INLINE C IntPow(C base, C exp) {
  if constexpr (std::is_signed_v<C>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exp & 1) ? C(-1) : C(1);
      return 0;
    }
  }
  C result = 1;
  while (exp) {
    if (exp & 1) result = WrapMul<C>(result, base);
    exp = static_cast<C>(exp >> 1);
    base = WrapMul<C>(base, base);
  }
  return result;
}

// a << b and a >> b; a count outside [0, bits) gives 0 for << and the sign
// fill for >> (the CPU's Shift).
template <bool kLeft, typename C>
TD_HOST_DEVICE TD_INLINE C Shift(C a, C b) {
  constexpr int kBits = static_cast<int>(sizeof(C) * 8);
  bool out_of_range = b >= C(kBits);
  if constexpr (std::is_signed_v<C>) out_of_range = out_of_range || b < C(0);
  if constexpr (kLeft) {
    if (out_of_range) return C(0);
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) << static_cast<int>(b)));
  } else {
    if constexpr (std::is_signed_v<C>) {
      if (out_of_range) return a < C(0) ? C(-1) : C(0);
    } else {
      if (out_of_range) return C(0);
    }
    return static_cast<C>(a >> static_cast<int>(b));
  }
}

template <typename T, ArithOp kOp>
struct ArithFn {
  using C = ComputeT<T>;
  C alpha{};  // kAdd, kSub
  TD_HOST_DEVICE TD_INLINE C operator()(C a, C b) const {
    if constexpr (kOp == ArithOp::kAdd || kOp == ArithOp::kSub) {
      if constexpr (std::is_same_v<C, bool>) {
        return a || (alpha && b);  // add only: sub refuses bool
      } else if constexpr (kOp == ArithOp::kAdd) {
        return WrapAdd<C>(a, WrapMul<C>(alpha, b));
      } else {
        return WrapSub<C>(a, WrapMul<C>(alpha, b));
      }
    } else if constexpr (kOp == ArithOp::kMul) {
      if constexpr (std::is_same_v<C, bool>) {
        return a && b;
      } else {
        return WrapMul<C>(a, b);
      }
    } else if constexpr (kOp == ArithOp::kDiv) {
      return a / b;
    } else if constexpr (kOp == ArithOp::kMaximum || kOp == ArithOp::kMinimum) {
      if constexpr (std::is_floating_point_v<C>) {  // NaN propagates
        if (IsNan(a)) return a;
        if (IsNan(b)) return b;
      }
      if constexpr (kOp == ArithOp::kMaximum) {
        return a > b ? a : b;
      } else {
        return a < b ? a : b;
      }
    } else if constexpr (kOp == ArithOp::kBitwiseAnd) {
      return static_cast<C>(a & b);
    } else if constexpr (kOp == ArithOp::kBitwiseOr) {
      return static_cast<C>(a | b);
    } else if constexpr (kOp == ArithOp::kBitwiseXor) {
      return static_cast<C>(a ^ b);
    } else if constexpr (kOp == ArithOp::kLeftShift) {
      return Shift<true, C>(a, b);
    } else if constexpr (kOp == ArithOp::kRightShift) {
      return Shift<false, C>(a, b);
    } else if constexpr (kOp == ArithOp::kAtan2) {
      return math::Atan2(a, b);
    } else {
      static_assert(kOp == ArithOp::kPow, "unhandled ArithOp");
      if constexpr (std::is_floating_point_v<C>) {
        return math::Pow(a, b);
      } else {
        return IntPow<C>(a, b);
      }
    }
  }
};

// ---- remainder, fmod, div with rounding -----------------------------------------------------

// Floor division of floats as PyTorch's div_floor_floating (the CPU's
// FloorDivFloat): from fmod, so that a == b * q + mod holds.
template <typename C>
TD_HOST_DEVICE TD_INLINE C FloorDivFloat(C a, C b) {
  if (b == C(0)) return a / b;
  const C mod = math::Fmod(a, b);
  C div = (a - mod) / b;
  if (mod != C(0) && ((b < C(0)) != (mod < C(0)))) div -= C(1);
  if (div == C(0)) return math::Copysign(C(0), a / b);
  C floordiv = math::Floor(div);
  if (div - floordiv > C(0.5)) floordiv += C(1);
  return floordiv;
}

template <typename T, DivisionOp kOp>
struct DivisionFn {
  using C = ComputeT<T>;
  TD_HOST_DEVICE TD_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      if constexpr (kOp == DivisionOp::kRemainder) {  // the sign of the divisor
        C mod = math::Fmod(a, b);
        if (mod != C(0) && ((b < C(0)) != (mod < C(0)))) mod += b;
        return mod;
      } else if constexpr (kOp == DivisionOp::kFmod) {
        return math::Fmod(a, b);
      } else if constexpr (kOp == DivisionOp::kDivTrunc) {
        return math::Trunc(a / b);
      } else {
        return FloorDivFloat<C>(a, b);
      }
    } else {
      if (b == C(0)) return C(0);  // the CPU raises ZeroDivisionError here (see the header)
      if constexpr (std::is_signed_v<C>) {
        if (b == C(-1)) {  // also avoids MIN / -1 and MIN % -1
          if constexpr (kOp == DivisionOp::kDivTrunc || kOp == DivisionOp::kDivFloor) {
            return WrapNeg<C>(a);
          } else {
            return C(0);
          }
        }
      }
      if constexpr (kOp == DivisionOp::kRemainder) {
        C mod = static_cast<C>(a % b);
        if constexpr (std::is_signed_v<C>) {
          if (mod != 0 && ((b < 0) != (mod < 0))) mod = static_cast<C>(mod + b);
        }
        return mod;
      } else if constexpr (kOp == DivisionOp::kFmod) {
        return static_cast<C>(a % b);
      } else {
        const C q = static_cast<C>(a / b);
        if constexpr (kOp == DivisionOp::kDivFloor && std::is_signed_v<C>) {
          if ((a < 0) != (b < 0) && static_cast<C>(a % b) != 0) return static_cast<C>(q - 1);
        }
        return q;
      }
    }
  }
};

// ---- comparisons and logical ops (bool results) ------------------------------------------

template <typename T, CompareOp kOp>
struct CompareFn {
  using C = ComputeT<T>;
  TD_HOST_DEVICE TD_INLINE bool operator()(C a, C b) const {
    if constexpr (kOp == CompareOp::kEq) {
      return a == b;
    } else if constexpr (kOp == CompareOp::kNe) {
      return a != b;
    } else if constexpr (kOp == CompareOp::kLt) {
      return a < b;
    } else if constexpr (kOp == CompareOp::kLe) {
      return a <= b;
    } else if constexpr (kOp == CompareOp::kGt) {
      return a > b;
    } else if constexpr (kOp == CompareOp::kGe) {
      return a >= b;
    } else if constexpr (kOp == CompareOp::kLogicalAnd) {
      return a && b;
    } else if constexpr (kOp == CompareOp::kLogicalOr) {
      return a || b;
    } else {
      static_assert(kOp == CompareOp::kLogicalXor, "unhandled CompareOp");
      return a != b;
    }
  }
};

// ---- ternary ops ------------------------------------------------------------------------

template <typename T>
struct WhereFn {
  using C = ComputeT<T>;
  TD_HOST_DEVICE TD_INLINE C operator()(bool c, C a, C b) const { return c ? a : b; }
};

// clamp with Python-number bounds: a NaN input stays NaN; min > max gives max.
template <typename T>
struct ClampScalarFn {
  using C = ComputeT<T>;
  bool has_min = false;
  bool has_max = false;
  TD_HOST_DEVICE TD_INLINE C operator()(C x, C lo, C hi) const {
    if (IsNan(x)) return x;
    if (has_min) x = (x < lo) ? lo : x;
    if (has_max) x = (hi < x) ? hi : x;
    return x;
  }
};

// clamp with tensor bounds (and clamp_min / clamp_max .Tensor): a NaN in self
// or in a bound gives NaN; min > max gives max.
template <typename T>
struct ClampTensorFn {
  using C = ComputeT<T>;
  bool has_min = false;
  bool has_max = false;
  static TD_HOST_DEVICE TD_INLINE C Raise(C x, C l) {
    if (IsNan(x)) return x;
    if (IsNan(l)) return l;
    return (x < l) ? l : x;
  }
  static TD_HOST_DEVICE TD_INLINE C Lower(C x, C h) {
    if (IsNan(x)) return x;
    if (IsNan(h)) return h;
    return (h < x) ? h : x;
  }
  TD_HOST_DEVICE TD_INLINE C operator()(C x, C lo, C hi) const {
    if (has_min && has_max) {
      if (IsNan(lo)) return lo;
      if (IsNan(hi)) return hi;
      return Lower(Raise(x, lo), hi);
    }
    if (has_min) return Raise(x, lo);
    return Lower(x, hi);
  }
};

template <typename T>
struct MaskedFillFn {
  using C = ComputeT<T>;
  TD_HOST_DEVICE TD_INLINE C operator()(C x, bool m, C v) const { return m ? v : x; }
};

template <typename T, bool kDiv>
struct AddcFn {
  using C = ComputeT<T>;
  C value{};
  TD_HOST_DEVICE TD_INLINE C operator()(C a, C b, C c) const {
    if constexpr (kDiv) {
      return a + value * b / c;
    } else {
      return WrapAdd<C>(a, WrapMul<C>(WrapMul<C>(value, b), c));
    }
  }
};

// self + weight * (end - self), from the nearer end (the CPU's LerpValue).
template <typename T>
struct LerpFn {
  using C = ComputeT<T>;
  TD_HOST_DEVICE TD_INLINE C operator()(C self, C end, C weight) const {
    const C diff = end - self;
    return math::Fabs(weight) < C(0.5) ? self + weight * diff : end - diff * (C(1) - weight);
  }
};

// ---- dispatch: one per family, instantiated per engine ------------------------------------

template <typename T>
ComputeT<T> ParamAs(const ElementwiseCall& call) {
  ComputeT<T> v;
  std::memcpy(&v, &call.param, sizeof(v));
  return v;
}

// In each family's switch, an op's case instantiates its functor only for
// the dtypes of its set.
#define TD_EW_CASE(ENUM, OP, SETFN, ...)                                                   \
  case ENUM::OP:                                                                           \
    if constexpr (InSet<T>(SETFN(ENUM::OP))) {                                             \
      return __VA_ARGS__;                                                                  \
    } else {                                                                               \
      return kLaunchBadDtype;                                                              \
    }

template <class Engine>
int DispatchCopy(const ElementwiseCall& call, void* stream) {
  if (call.op != static_cast<int>(CopyOp::kCopy)) return kLaunchBadOp;
  return DispatchDtype<kSetAll>(call.dtype, static_cast<int>(kLaunchBadDtype), [&](auto tag) -> int {
    using T = typename decltype(tag)::type;
    return Engine::template Run<T, T>(CopyFn<T>{}, call.iter, stream);
  });
}

template <class Engine>
int DispatchUnary(const ElementwiseCall& call, void* stream) {
  return DispatchDtype<kSetAllButF8>(call.dtype, static_cast<int>(kLaunchBadDtype), [&](auto tag) -> int {
    using T = typename decltype(tag)::type;
#define TD_UNARY(OP) TD_EW_CASE(UnaryOp, OP, UnaryDtypes, Engine::template Run<T, T>(UnaryFn<T, UnaryOp::OP>{}, call.iter, stream))
    switch (static_cast<UnaryOp>(call.op)) {
      TD_UNARY(kNeg)
      TD_UNARY(kAbs)
      TD_UNARY(kSign)
      TD_UNARY(kFloor)
      TD_UNARY(kCeil)
      TD_UNARY(kRound)
      TD_UNARY(kTrunc)
      TD_UNARY(kRelu)
      TD_UNARY(kBitwiseNot)
      TD_UNARY(kSquare)
    }
#undef TD_UNARY
    return kLaunchBadOp;
  });
}

template <class Engine>
int DispatchFloatMath(const ElementwiseCall& call, void* stream) {
  return DispatchDtype<kSetFloats>(call.dtype, static_cast<int>(kLaunchBadDtype), [&](auto tag) -> int {
    using T = typename decltype(tag)::type;
#define TD_FMATH(OP) \
  TD_EW_CASE(FloatMathOp, OP, FloatMathDtypes, Engine::template Run<T, T>(FloatMathFn<T, FloatMathOp::OP>{}, call.iter, stream))
    switch (static_cast<FloatMathOp>(call.op)) {
      TD_FMATH(kExp)
      TD_FMATH(kLog)
      TD_FMATH(kSqrt)
      TD_FMATH(kRsqrt)
      TD_FMATH(kSin)
      TD_FMATH(kCos)
      TD_FMATH(kTanh)
      TD_FMATH(kSigmoid)
      TD_FMATH(kReciprocal)
      TD_FMATH(kErf)
      TD_FMATH(kExp2)
      TD_FMATH(kExpm1)
      TD_FMATH(kLog2)
      TD_FMATH(kLog1p)
      TD_FMATH(kSilu)
      TD_FMATH(kGeluErf)
      TD_FMATH(kGeluTanh)
    }
#undef TD_FMATH
    return kLaunchBadOp;
  });
}

template <class Engine>
int DispatchPredicate(const ElementwiseCall& call, void* stream) {
  return DispatchDtype<kSetAll>(call.dtype, static_cast<int>(kLaunchBadDtype), [&](auto tag) -> int {
    using T = typename decltype(tag)::type;
#define TD_PRED(OP) \
  TD_EW_CASE(PredicateOp, OP, PredicateDtypes, Engine::template Run<bool, T>(PredicateFn<T, PredicateOp::OP>{}, call.iter, stream))
    switch (static_cast<PredicateOp>(call.op)) {
      TD_PRED(kLogicalNot)
      TD_PRED(kIsNan)
      TD_PRED(kIsInf)
      TD_PRED(kIsFinite)
    }
#undef TD_PRED
    return kLaunchBadOp;
  });
}

template <class Engine>
int DispatchArith(const ElementwiseCall& call, void* stream) {
  return DispatchDtype<kSetAllButF8>(call.dtype, static_cast<int>(kLaunchBadDtype), [&](auto tag) -> int {
    using T = typename decltype(tag)::type;
#define TD_ARITH(OP) \
  TD_EW_CASE(ArithOp, OP, ArithDtypes, Engine::template Run<T, T, T>(ArithFn<T, ArithOp::OP>{ParamAs<T>(call)}, call.iter, stream))
    switch (static_cast<ArithOp>(call.op)) {
      TD_ARITH(kAdd)
      TD_ARITH(kSub)
      TD_ARITH(kMul)
      TD_ARITH(kDiv)
      TD_ARITH(kMaximum)
      TD_ARITH(kMinimum)
      TD_ARITH(kBitwiseAnd)
      TD_ARITH(kBitwiseOr)
      TD_ARITH(kBitwiseXor)
      TD_ARITH(kLeftShift)
      TD_ARITH(kRightShift)
      TD_ARITH(kAtan2)
      TD_ARITH(kPow)
    }
#undef TD_ARITH
    return kLaunchBadOp;
  });
}

template <class Engine>
int DispatchDivision(const ElementwiseCall& call, void* stream) {
  return DispatchDtype<kSetIntsFloats>(call.dtype, static_cast<int>(kLaunchBadDtype), [&](auto tag) -> int {
    using T = typename decltype(tag)::type;
#define TD_DIVISION(OP) \
  TD_EW_CASE(DivisionOp, OP, DivisionDtypes, Engine::template Run<T, T, T>(DivisionFn<T, DivisionOp::OP>{}, call.iter, stream))
    switch (static_cast<DivisionOp>(call.op)) {
      TD_DIVISION(kRemainder)
      TD_DIVISION(kFmod)
      TD_DIVISION(kDivTrunc)
      TD_DIVISION(kDivFloor)
    }
#undef TD_DIVISION
    return kLaunchBadOp;
  });
}

template <class Engine>
int DispatchCompare(const ElementwiseCall& call, void* stream) {
  return DispatchDtype<kSetAllButF8>(call.dtype, static_cast<int>(kLaunchBadDtype), [&](auto tag) -> int {
    using T = typename decltype(tag)::type;
#define TD_COMPARE(OP) \
  TD_EW_CASE(CompareOp, OP, CompareDtypes, Engine::template Run<bool, T, T>(CompareFn<T, CompareOp::OP>{}, call.iter, stream))
    switch (static_cast<CompareOp>(call.op)) {
      TD_COMPARE(kEq)
      TD_COMPARE(kNe)
      TD_COMPARE(kLt)
      TD_COMPARE(kLe)
      TD_COMPARE(kGt)
      TD_COMPARE(kGe)
      TD_COMPARE(kLogicalAnd)
      TD_COMPARE(kLogicalOr)
      TD_COMPARE(kLogicalXor)
    }
#undef TD_COMPARE
    return kLaunchBadOp;
  });
}

template <class Engine>
int DispatchTernary(const ElementwiseCall& call, void* stream) {
  return DispatchDtype<kSetAllButF8>(call.dtype, static_cast<int>(kLaunchBadDtype), [&](auto tag) -> int {
    using T = typename decltype(tag)::type;
    const bool has_min = (call.flags & kClampHasMin) != 0, has_max = (call.flags & kClampHasMax) != 0;
    switch (static_cast<TernaryOp>(call.op)) {
      TD_EW_CASE(TernaryOp, kWhere, TernaryDtypes, Engine::template Run<T, bool, T, T>(WhereFn<T>{}, call.iter, stream))
      TD_EW_CASE(TernaryOp, kClampScalar, TernaryDtypes,
                 Engine::template Run<T, T, T, T>(ClampScalarFn<T>{has_min, has_max}, call.iter, stream))
      TD_EW_CASE(TernaryOp, kClampTensor, TernaryDtypes,
                 Engine::template Run<T, T, T, T>(ClampTensorFn<T>{has_min, has_max}, call.iter, stream))
      TD_EW_CASE(TernaryOp, kMaskedFill, TernaryDtypes,
                 Engine::template Run<T, T, bool, T>(MaskedFillFn<T>{}, call.iter, stream))
      TD_EW_CASE(TernaryOp, kAddcmul, TernaryDtypes,
                 Engine::template Run<T, T, T, T>(AddcFn<T, false>{ParamAs<T>(call)}, call.iter, stream))
      TD_EW_CASE(TernaryOp, kAddcdiv, TernaryDtypes,
                 Engine::template Run<T, T, T, T>(AddcFn<T, true>{ParamAs<T>(call)}, call.iter, stream))
      TD_EW_CASE(TernaryOp, kLerp, TernaryDtypes, Engine::template Run<T, T, T, T>(LerpFn<T>{}, call.iter, stream))
    }
    return kLaunchBadOp;
  });
}

#undef TD_EW_CASE

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_ELEMENTWISE_OPS_H_
