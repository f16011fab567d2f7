// Binary and ternary elementwise CPU kernels: add, sub, rsub, mul, div,
// remainder, pow, maximum, minimum (computed in the output dtype, which the
// meta function promoted); comparisons (computed in the promoted input
// dtype, bool results); logical_and/or/xor; bitwise_and/or/xor; where; clamp;
// masked_fill; addcmul, addcdiv; div with rounding_mode and floor_divide,
// fmod, atan2, bitwise_left_shift / bitwise_right_shift, lerp; and the in-place forms of these (add_, ...,
// addcdiv_, through RunInPlace). Tensor operands broadcast; Scalar operands are constants of
// the compute dtype.
#include <cmath>
#include <type_traits>

#include "elementwise.h"
#include "elementwise_args.h"
#include "kernel_util.h"
#include "tensord/meta/shape_rules.h"

namespace tensord::cpu {
namespace {

#define TD_COMPUTE_T(tag) ComputeT<typename decltype(tag)::type>

// ---- arithmetic ---------------------------------------------------------------

// The second operand of a binary op: a tensor or a Python scalar.
struct Operand {
  const TensorRef* tensor = nullptr;
  const Scalar* scalar = nullptr;
};

// out = op(a, b) in the output's dtype T, for a tensor `a` and a tensor or
// scalar `b` (or, with `b_first`, op(b, a)). make_op(TypeTag<T>) builds op.
template <uint32_t kSet, typename MakeOp>
absl::Status ArithKernel(const TensorRef& out, const TensorRef& a, Operand b, const char* name,
                         MakeOp make_op, bool b_first = false) {
  return Dispatch<kSet>(out.meta->dtype, name, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = ComputeT<T>;
    auto op = make_op(tag);
    if (b.tensor != nullptr) {
      if (b_first) return RunBinary<T, T, T>(out, *b.tensor, a, op);
      return RunBinary<T, T, T>(out, a, *b.tensor, op);
    }
    const C y = ScalarTo<T>(*b.scalar);
    if (b_first) return RunUnary<T, T>(out, a, [op, y](C x) { return op(y, x); });
    return RunUnary<T, T>(out, a, [op, y](C x) { return op(x, y); });
  });
}

// Reads (self, other-or-scalar) of a binary op whose arg 1 is a tensor for
// ".Tensor" overloads and a Scalar otherwise.
struct BinaryArgs {
  TensorRef self;
  TensorRef other_tensor;
  Scalar other_scalar;
  Operand other;
};

absl::Status ReadBinaryArgs(const KernelContext& ctx, BinaryArgs& args) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(args.self, InputTensor(ctx, 0));
  if (ctx.args[1].is_tensor()) {
    TD_ASSIGN_OR_RETURN(args.other_tensor, InputTensor(ctx, 1));
    args.other.tensor = &args.other_tensor;
  } else {
    args.other_scalar = ctx.args[1].scalar();
    args.other.scalar = &args.other_scalar;
  }
  return absl::OkStatus();
}

// add / sub / rsub with alpha: self + alpha * other, self - alpha * other,
// other - alpha * self.
enum class AddKind { kAdd, kSub, kRSub };

template <AddKind kKind>
absl::Status AddLike(KernelContext& ctx) {
  BinaryArgs args;
  TD_RETURN_IF_ERROR(ReadBinaryArgs(ctx, args));
  const Scalar alpha = ctx.args[2].scalar();
  const char* name = kKind == AddKind::kAdd ? "add" : kKind == AddKind::kSub ? "sub" : "rsub";
  constexpr uint32_t kSet = kKind == AddKind::kAdd ? kSetAllButF8 : (kSetInts | kSetFloats);
  return ArithKernel<kSet>(
      ctx.outputs[0], args.self, args.other, name,
      [&alpha](auto tag) {
        using T = typename decltype(tag)::type;
        using C = ComputeT<T>;
        const C al = ScalarTo<T>(alpha);
        return [al](C x, C y) -> C {
          if constexpr (std::is_same_v<C, bool>) {
            return x || (al && y);
          } else if constexpr (kKind == AddKind::kAdd) {
            return WrapAdd<C>(x, WrapMul<C>(al, y));
          } else {
            return WrapSub<C>(x, WrapMul<C>(al, y));
          }
        };
      },
      /*b_first=*/kKind == AddKind::kRSub);
}

absl::Status Mul(KernelContext& ctx) {
  BinaryArgs args;
  TD_RETURN_IF_ERROR(ReadBinaryArgs(ctx, args));
  return ArithKernel<kSetAllButF8>(ctx.outputs[0], args.self, args.other, "mul", [](auto tag) {
    using C = TD_COMPUTE_T(tag);
    return [](C x, C y) -> C {
      if constexpr (std::is_same_v<C, bool>) {
        return x && y;
      } else {
        return WrapMul<C>(x, y);
      }
    };
  });
}

// True division; the meta function makes integer inputs floating.
absl::Status Div(KernelContext& ctx) {
  BinaryArgs args;
  TD_RETURN_IF_ERROR(ReadBinaryArgs(ctx, args));
  return ArithKernel<kSetFloats>(ctx.outputs[0], args.self, args.other, "div", [](auto tag) {
    using C = TD_COMPUTE_T(tag);
    return [](C x, C y) -> C { return x / y; };
  });
}

// Python-style remainder: the result has the sign of the divisor. Integer
// division by zero is PyTorch's "ZeroDivisionError" RuntimeError.
absl::Status Remainder(KernelContext& ctx) {
  BinaryArgs args;
  TD_RETURN_IF_ERROR(ReadBinaryArgs(ctx, args));
  bool zero_division = false;
  TD_RETURN_IF_ERROR(ArithKernel<kSetInts | kSetFloats>(
      ctx.outputs[0], args.self, args.other, "remainder",
      [&zero_division](auto tag) {
        using C = TD_COMPUTE_T(tag);
        return [&zero_division](C a, C b) -> C {
          if constexpr (std::is_floating_point_v<C>) {
            (void)zero_division;  // only integers divide by zero here
            C mod = std::fmod(a, b);
            if (mod != C(0) && ((b < C(0)) != (mod < C(0)))) mod += b;
            return mod;
          } else {
            if (b == C(0)) {
              zero_division = true;
              return C(0);
            }
            if constexpr (std::is_signed_v<C>) {
              if (b == C(-1)) return C(0);  // also avoids INT_MIN % -1
            }
            C mod = static_cast<C>(a % b);
            if constexpr (std::is_signed_v<C>) {
              if (mod != 0 && ((b < 0) != (mod < 0))) mod = static_cast<C>(mod + b);
            }
            return mod;
          }
        };
      }));
  if (zero_division) return RuntimeErr("ZeroDivisionError");
  return absl::OkStatus();
}

// Integer power by squaring, wrapping like PyTorch; negative exponents give
// 1 for base 1, +-1 for base -1 and 0 otherwise.
template <typename C>
C IntPow(C base, C exp) {
  if constexpr (std::is_same_v<C, bool>) {
    return exp ? base : true;
  } else {
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
}

template <typename C>
C PowValue(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::pow(a, b);
  } else {
    return IntPow<C>(a, b);
  }
}

absl::Status PowTensorTensor(KernelContext& ctx) {
  BinaryArgs args;
  TD_RETURN_IF_ERROR(ReadBinaryArgs(ctx, args));
  return ArithKernel<kSetInts | kSetFloats>(ctx.outputs[0], args.self, args.other, "pow",
                     [](auto tag) {
                       using C = TD_COMPUTE_T(tag);
                       return [](C a, C b) -> C { return PowValue<C>(a, b); };
                     });
}

absl::Status PowTensorScalar(KernelContext& ctx) {
  BinaryArgs args;
  TD_RETURN_IF_ERROR(ReadBinaryArgs(ctx, args));
  TD_RETURN_IF_ERROR(CheckPowScalarExponent(ctx.outputs[0].meta->dtype, args.other_scalar));
  return PowTensorTensor(ctx);
}

// pow.Scalar(Scalar self, Tensor exponent): the tensor is arg 1.
absl::Status PowScalarSelf(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef exponent, InputTensor(ctx, 1));
  const Scalar base = ctx.args[0].scalar();
  Operand b{nullptr, &base};
  return ArithKernel<kSetInts | kSetFloats>(
      ctx.outputs[0], exponent, b, "pow",
      [](auto tag) {
        using C = TD_COMPUTE_T(tag);
        return [](C a, C b) -> C { return PowValue<C>(a, b); };
      },
      /*b_first=*/true);
}

// maximum / minimum: NaN propagates.
template <bool kMax>
absl::Status MaxMinElementwise(KernelContext& ctx) {
  BinaryArgs args;
  TD_RETURN_IF_ERROR(ReadBinaryArgs(ctx, args));
  return ArithKernel<kSetAllButF8>(ctx.outputs[0], args.self, args.other,
                                   kMax ? "maximum" : "minimum", [](auto tag) {
                       using C = TD_COMPUTE_T(tag);
                       return [](C a, C b) -> C {
                         if constexpr (std::is_floating_point_v<C>) {
                           if (std::isnan(a)) return a;
                           if (std::isnan(b)) return b;
                         }
                         if constexpr (kMax) {
                           return a > b ? a : b;
                         } else {
                           return a < b ? a : b;
                         }
                       };
                     });
}

// ---- comparisons and logical ops ------------------------------------------------

enum class Cmp { kEq, kNe, kLt, kLe, kGt, kGe };

template <Cmp kCmp, typename C>
inline bool Compare(C a, C b) {
  if constexpr (kCmp == Cmp::kEq) return a == b;
  if constexpr (kCmp == Cmp::kNe) return a != b;
  if constexpr (kCmp == Cmp::kLt) return a < b;
  if constexpr (kCmp == Cmp::kLe) return a <= b;
  if constexpr (kCmp == Cmp::kGt) return a > b;
  if constexpr (kCmp == Cmp::kGe) return a >= b;
}

template <Cmp kCmp>
absl::Status CompareKernel(KernelContext& ctx) {
  static constexpr const char* kNames[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  const char* name = kNames[static_cast<int>(kCmp)];
  BinaryArgs args;
  TD_RETURN_IF_ERROR(ReadBinaryArgs(ctx, args));
  const TensorRef& out = ctx.outputs[0];
  TD_RETURN_IF_ERROR(ExpectBoolOutput(name, out));
  // Compare in the dtype PyTorch would promote the operands to.
  PromotionOperand ops[2];
  ops[0].tensor = args.self.meta;
  if (args.other.tensor) {
    ops[1].tensor = args.other.tensor->meta;
  } else {
    ops[1].scalar = args.other.scalar;
  }
  TD_ASSIGN_OR_RETURN(ScalarType common, ResultType(name, ops));
  return Dispatch<kSetAllButF8>(common, name, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = ComputeT<T>;
    if (args.other.tensor) {
      return RunBinary<bool, T, T>(out, args.self, *args.other.tensor,
                                   [](C a, C b) { return Compare<kCmp, C>(a, b); });
    }
    const C y = ScalarTo<T>(*args.other.scalar);
    return RunUnary<bool, T>(out, args.self, [y](C a) { return Compare<kCmp, C>(a, y); });
  });
}

enum class Logic { kAnd, kOr, kXor };

template <Logic kLogic>
absl::Status LogicalKernel(KernelContext& ctx) {
  const char* name = kLogic == Logic::kAnd ? "logical_and"
                     : kLogic == Logic::kOr ? "logical_or"
                                            : "logical_xor";
  BinaryArgs args;
  TD_RETURN_IF_ERROR(ReadBinaryArgs(ctx, args));
  const TensorRef& out = ctx.outputs[0];
  TD_RETURN_IF_ERROR(ExpectBoolOutput(name, out));
  TD_INTERNAL_CHECK(args.other.tensor != nullptr, name, " expects two tensors");
  // Each operand is tested against zero in its own dtype: casting to bool.
  return RunBinary<bool, bool, bool>(out, args.self, *args.other.tensor, [](bool a, bool b) {
    if constexpr (kLogic == Logic::kAnd) return a && b;
    if constexpr (kLogic == Logic::kOr) return a || b;
    if constexpr (kLogic == Logic::kXor) return a != b;
  });
}

template <Logic kLogic>
absl::Status BitwiseKernel(KernelContext& ctx) {
  const char* name = kLogic == Logic::kAnd ? "bitwise_and"
                     : kLogic == Logic::kOr ? "bitwise_or"
                                            : "bitwise_xor";
  BinaryArgs args;
  TD_RETURN_IF_ERROR(ReadBinaryArgs(ctx, args));
  return ArithKernel<kSetBool | kSetInts>(ctx.outputs[0], args.self, args.other, name,
                     [](auto tag) {
                       using C = TD_COMPUTE_T(tag);
                       return [](C a, C b) -> C {
                         if constexpr (kLogic == Logic::kAnd) return static_cast<C>(a & b);
                         if constexpr (kLogic == Logic::kOr) return static_cast<C>(a | b);
                         if constexpr (kLogic == Logic::kXor) return static_cast<C>(a ^ b);
                       };
                     });
}

// ---- where, clamp, masked_fill --------------------------------------------------

// where(condition, self, other) for every mix of tensor and Scalar operands.
absl::Status Where(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef cond, InputTensor(ctx, 0));
  const TensorRef& out = ctx.outputs[0];
  const bool self_t = ctx.args[1].is_tensor(), other_t = ctx.args[2].is_tensor();
  TensorRef self, other;
  if (self_t) {
    TD_ASSIGN_OR_RETURN(self, InputTensor(ctx, 1));
  }
  if (other_t) {
    TD_ASSIGN_OR_RETURN(other, InputTensor(ctx, 2));
  }
  return Dispatch<kSetAllButF8>(out.meta->dtype, "where", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = ComputeT<T>;
    if (self_t && other_t) {
      return RunTernary<T, bool, T, T>(out, cond, self, other,
                                       [](bool c, C a, C b) { return c ? a : b; });
    }
    if (self_t) {
      const C b = ScalarTo<T>(ctx.args[2].scalar());
      return RunBinary<T, bool, T>(out, cond, self, [b](bool c, C a) { return c ? a : b; });
    }
    if (other_t) {
      const C a = ScalarTo<T>(ctx.args[1].scalar());
      return RunBinary<T, bool, T>(out, cond, other, [a](bool c, C b) { return c ? a : b; });
    }
    const C a = ScalarTo<T>(ctx.args[1].scalar());
    const C b = ScalarTo<T>(ctx.args[2].scalar());
    return RunUnary<T, bool>(out, cond, [a, b](bool c) { return c ? a : b; });
  });
}

// out = clamp(self, lo, hi) with Python-number bounds (either may be absent):
// NaN inputs stay NaN; min > max gives max.
absl::Status ClampByScalars(KernelContext& ctx, const char* name, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  TD_RETURN_IF_ERROR(CheckClampBounds(lo.has_value(), hi.has_value()));
  const TensorRef& out = ctx.outputs[0];
  return Dispatch<kSetInts | kSetFloats>(out.meta->dtype, name, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = ComputeT<T>;
    const bool has_lo = lo.has_value(), has_hi = hi.has_value();
    const C l = has_lo ? ScalarTo<T>(*lo) : C(0);
    const C h = has_hi ? ScalarTo<T>(*hi) : C(0);
    return RunUnary<T, T>(out, self, [=](C x) -> C {
      if (IsNan(x)) return x;
      if (has_lo) x = (x < l) ? l : x;  // std::max(x, l)
      if (has_hi) x = (h < x) ? h : x;  // std::min(x, h)
      return x;
    });
  });
}

absl::Status Clamp(KernelContext& ctx) {
  return ClampByScalars(ctx, "clamp", OptionalScalar(ctx, 1), OptionalScalar(ctx, 2));
}

// clamp_min / clamp_max (Scalar): clamp with one bound.
template <bool kMin>
absl::Status ClampBound(KernelContext& ctx) {
  const std::optional<Scalar> bound = OptionalScalar(ctx, 1);
  return kMin ? ClampByScalars(ctx, "clamp_min", bound, std::nullopt)
              : ClampByScalars(ctx, "clamp_max", std::nullopt, bound);
}

// clamp.Tensor and clamp_min.Tensor / clamp_max.Tensor, as PyTorch's CPU
// kernels: a NaN in self or in a bound gives NaN; min > max gives max.
template <ClampKind kKind>
absl::Status ClampTensor(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const ClampTensorArgs a, ReadClampTensor(ctx, kKind));
  const TensorRef& self = a.self;
  const TensorRef& out = ctx.outputs[0];
  const char* name = a.name;
  const bool has_lo = a.min.has_value(), has_hi = a.max.has_value();
  const TensorRef lo = a.min.value_or(TensorRef{}), hi = a.max.value_or(TensorRef{});
  return Dispatch<kSetAllButF8>(out.meta->dtype, name, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = ComputeT<T>;
    auto raise = [](C x, C l) -> C {  // clamp_min: NaN from either side
      if (IsNan(x)) return x;
      if (IsNan(l)) return l;
      return (x < l) ? l : x;
    };
    auto lower = [](C x, C h) -> C {  // clamp_max
      if (IsNan(x)) return x;
      if (IsNan(h)) return h;
      return (h < x) ? h : x;
    };
    if (has_lo && has_hi) {
      return RunTernary<T, T, T, T>(out, self, lo, hi, [raise, lower](C x, C l, C h) {
        if (IsNan(l)) return l;
        if (IsNan(h)) return h;
        return lower(raise(x, l), h);
      });
    }
    if (has_lo) return RunBinary<T, T, T>(out, self, lo, raise);
    return RunBinary<T, T, T>(out, self, hi, lower);
  });
}

// The element of a 0-dim tensor as a Scalar (bool, int or float by dtype).
absl::StatusOr<Scalar> ZeroDimScalar(const TensorRef& t) {
  if (t.meta->dim() != 0) return InternalErr("internal: expected a 0-dim tensor");
  Scalar s;
  TD_RETURN_IF_ERROR(Dispatch<kSetAll>(t.meta->dtype, "masked_fill", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = ComputeT<T>;
    const C x = Load<T>(t.data_at_offset());
    if constexpr (std::is_same_v<T, bool>) {
      s = Scalar::Bool(x);
    } else if constexpr (kIsFloat<T>) {
      s = Scalar::Float(static_cast<double>(x));
    } else {
      s = Scalar::Int(static_cast<int64_t>(x));
    }
    return absl::OkStatus();
  }));
  return s;
}

absl::Status MaskedFill(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(TensorRef mask, InputTensor(ctx, 1));
  TD_RETURN_IF_ERROR(CheckMaskedFillMask(*mask.meta));
  Scalar value;
  if (ctx.args[2].kind() == Value::Kind::kTensor) {  // masked_fill.Tensor: the 0-dim value's element
    TD_ASSIGN_OR_RETURN(TensorRef v, InputTensor(ctx, 2));
    TD_ASSIGN_OR_RETURN(value, ZeroDimScalar(v));
  } else {
    value = ctx.args[2].scalar();
  }
  const TensorRef& out = ctx.outputs[0];
  return Dispatch<kSetAllButF8>(out.meta->dtype, "masked_fill", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = ComputeT<T>;
    const C v = ScalarTo<T>(value);
    return RunBinary<T, T, bool>(out, self, mask, [v](C x, bool m) { return m ? v : x; });
  });
}

// ---- addcmul / addcdiv ----------------------------------------------------------

// out = self + value * tensor1 * tensor2 (or / tensor2), all three operands
// converted to the output's dtype (the meta function's promoted dtype) and
// broadcast; value converted to that dtype as PyTorch does.
template <bool kDiv>
absl::Status Addc(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(TensorRef t1, InputTensor(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef t2, InputTensor(ctx, 2));
  const Scalar value = ctx.args[3].scalar();
  const TensorRef& out = ctx.outputs[0];
  const char* name = kDiv ? "addcdiv" : "addcmul";
  constexpr uint32_t kSet = kDiv ? kSetFloats : (kSetInts | kSetFloats);
  return Dispatch<kSet>(out.meta->dtype, name, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = ComputeT<T>;
    const C v = ScalarTo<T>(value);
    return RunTernary<T, T, T, T>(out, self, t1, t2, [v](C a, C b, C c) -> C {
      if constexpr (kDiv) {
        return a + v * b / c;
      } else {
        return WrapAdd<C>(a, WrapMul<C>(WrapMul<C>(v, b), c));
      }
    });
  });
}

// ---- div with rounding_mode, floor_divide, fmod -------------------------------

// Floor division of floats as PyTorch's div_floor_floating (CPython's rule):
// from fmod, so that a == b * q + mod holds; exactly-representable results
// are exact; division by zero gives IEEE a / b.
template <typename C>
C FloorDivFloat(C a, C b) {
  if (b == C(0)) return a / b;
  const C mod = std::fmod(a, b);
  C div = (a - mod) / b;
  if (mod != C(0) && ((b < C(0)) != (mod < C(0)))) div -= C(1);
  if (div == C(0)) return std::copysign(C(0), a / b);
  C floordiv = std::floor(div);
  if (div - floordiv > C(0.5)) floordiv += C(1);
  return floordiv;
}

// Integer trunc / floor division; b == 0 sets `zero_division` (PyTorch's
// "ZeroDivisionError"); MIN / -1 wraps to MIN (PyTorch traps there).
template <bool kFloor, typename C>
C IntDiv(C a, C b, bool& zero_division) {
  if (b == C(0)) {
    zero_division = true;
    return C(0);
  }
  if constexpr (std::is_signed_v<C>) {
    if (b == C(-1)) return WrapNeg<C>(a);
  }
  const C q = static_cast<C>(a / b);
  if constexpr (kFloor && std::is_signed_v<C>) {
    if ((a < 0) != (b < 0) && static_cast<C>(a % b) != 0) return static_cast<C>(q - 1);
  }
  return q;
}

// div.Tensor_mode / div.Scalar_mode (args: self, other, rounding_mode) and
// floor_divide / floor_divide.Scalar (always "floor"). The output dtype is the
// meta function's: floating for rounding_mode None, the promoted dtype else.
absl::Status DivMode(KernelContext& ctx) {
  BinaryArgs args;
  TD_RETURN_IF_ERROR(ReadBinaryArgs(ctx, args));
  TD_ASSIGN_OR_RETURN(const RoundingMode mode, ReadRoundingMode(ctx));
  if (mode == RoundingMode::kNone) return Div(ctx);
  const bool floor = mode == RoundingMode::kFloor;
  bool zero_division = false;
  auto run = [&](auto floor_tag) {
    constexpr bool kFloor = decltype(floor_tag)::value;
    return ArithKernel<kSetInts | kSetFloats>(
        ctx.outputs[0], args.self, args.other, kFloor ? "div_floor" : "div_trunc", [&zero_division](auto tag) {
          using C = TD_COMPUTE_T(tag);
          return [&zero_division](C a, C b) -> C {
            if constexpr (std::is_floating_point_v<C>) {
              (void)zero_division;  // only integers divide by zero here
              if constexpr (kFloor) {
                return FloorDivFloat<C>(a, b);
              } else {
                return std::trunc(a / b);
              }
            } else {
              return IntDiv<kFloor, C>(a, b, zero_division);
            }
          };
        });
  };
  TD_RETURN_IF_ERROR(floor ? run(std::true_type{}) : run(std::false_type{}));
  if (zero_division) return RuntimeErr("ZeroDivisionError");
  return absl::OkStatus();
}

// C's fmod: the result has the sign of self. Integer division by zero is
// PyTorch's "ZeroDivisionError".
absl::Status Fmod(KernelContext& ctx) {
  BinaryArgs args;
  TD_RETURN_IF_ERROR(ReadBinaryArgs(ctx, args));
  bool zero_division = false;
  TD_RETURN_IF_ERROR(ArithKernel<kSetInts | kSetFloats>(
      ctx.outputs[0], args.self, args.other, "fmod", [&zero_division](auto tag) {
        using C = TD_COMPUTE_T(tag);
        return [&zero_division](C a, C b) -> C {
          if constexpr (std::is_floating_point_v<C>) {
            (void)zero_division;  // only integers divide by zero here
            return std::fmod(a, b);
          } else {
            if (b == C(0)) {
              zero_division = true;
              return C(0);
            }
            if constexpr (std::is_signed_v<C>) {
              if (b == C(-1)) return C(0);  // also avoids MIN % -1
            }
            return static_cast<C>(a % b);
          }
        };
      }));
  if (zero_division) return RuntimeErr("ZeroDivisionError");
  return absl::OkStatus();
}

absl::Status Atan2(KernelContext& ctx) {
  BinaryArgs args;
  TD_RETURN_IF_ERROR(ReadBinaryArgs(ctx, args));
  return ArithKernel<kSetFloats>(ctx.outputs[0], args.self, args.other, "atan2", [](auto tag) {
    using C = TD_COMPUTE_T(tag);
    return [](C a, C b) -> C { return std::atan2(a, b); };
  });
}

// ---- shifts ---------------------------------------------------------------------

// a << b and a >> b on integers. A shift count outside [0, bits) is defined
// as later PyTorch releases define it (1.13 leaves it to the hardware): << gives
// 0; >> gives the sign fill (0 or -1; 0 for unsigned types).
template <bool kLeft, typename C>
C Shift(C a, C b) {
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

template <bool kLeft>
absl::Status ShiftKernel(KernelContext& ctx) {
  BinaryArgs args;
  TD_RETURN_IF_ERROR(ReadBinaryArgs(ctx, args));
  return ArithKernel<kSetInts>(ctx.outputs[0], args.self, args.other,
                               kLeft ? "bitwise_left_shift" : "bitwise_right_shift", [](auto tag) {
                                 using C = TD_COMPUTE_T(tag);
                                 return [](C a, C b) -> C { return Shift<kLeft, C>(a, b); };
                               });
}

// ---- lerp -----------------------------------------------------------------------

// self + weight * (end - self), computed from the nearer end as PyTorch does
// (|weight| < 0.5: from self, else from end) so that weight 1 gives end.
template <typename C>
C LerpValue(C self, C end, C weight) {
  const C diff = end - self;
  return std::abs(weight) < C(0.5) ? self + weight * diff : end - diff * (C(1) - weight);
}

// lerp.Scalar(self, end, weight) / lerp.Tensor(self, end, weight): every
// tensor has the output's dtype (checked by the meta function).
absl::Status Lerp(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(TensorRef end, InputTensor(ctx, 1));
  const TensorRef& out = ctx.outputs[0];
  const bool weight_tensor = ctx.args[2].is_tensor();
  TensorRef weight;
  if (weight_tensor) {
    TD_ASSIGN_OR_RETURN(weight, InputTensor(ctx, 2));
  }
  return Dispatch<kSetFloats>(out.meta->dtype, "lerp", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = ComputeT<T>;
    if (weight_tensor) {
      return RunTernary<T, T, T, T>(out, self, end, weight, [](C a, C b, C w) { return LerpValue<C>(a, b, w); });
    }
    const C w = ScalarTo<T>(ctx.args[2].scalar());
    return RunBinary<T, T, T>(out, self, end, [w](C a, C b) { return LerpValue<C>(a, b, w); });
  });
}

#undef TD_COMPUTE_T

}  // namespace

absl::Status RegisterBinaryKernels(KernelRegistry& r) {
  struct Entry {
    const char* name;
    KernelFn fn;
  };
  const Entry entries[] = {
      {"add.Tensor", AddLike<AddKind::kAdd>},
      {"add.Scalar", AddLike<AddKind::kAdd>},
      {"sub.Tensor", AddLike<AddKind::kSub>},
      {"sub.Scalar", AddLike<AddKind::kSub>},
      {"rsub.Scalar", AddLike<AddKind::kRSub>},
      {"mul.Tensor", Mul},
      {"mul.Scalar", Mul},
      {"div.Tensor", Div},
      {"div.Scalar", Div},
      {"remainder.Tensor", Remainder},
      {"remainder.Scalar", Remainder},
      {"pow.Tensor_Tensor", PowTensorTensor},
      {"pow.Tensor_Scalar", PowTensorScalar},
      {"pow.Scalar", PowScalarSelf},
      {"maximum", MaxMinElementwise<true>},
      {"minimum", MaxMinElementwise<false>},
      {"eq.Tensor", CompareKernel<Cmp::kEq>},
      {"eq.Scalar", CompareKernel<Cmp::kEq>},
      {"ne.Tensor", CompareKernel<Cmp::kNe>},
      {"ne.Scalar", CompareKernel<Cmp::kNe>},
      {"lt.Tensor", CompareKernel<Cmp::kLt>},
      {"lt.Scalar", CompareKernel<Cmp::kLt>},
      {"le.Tensor", CompareKernel<Cmp::kLe>},
      {"le.Scalar", CompareKernel<Cmp::kLe>},
      {"gt.Tensor", CompareKernel<Cmp::kGt>},
      {"gt.Scalar", CompareKernel<Cmp::kGt>},
      {"ge.Tensor", CompareKernel<Cmp::kGe>},
      {"ge.Scalar", CompareKernel<Cmp::kGe>},
      {"logical_and", LogicalKernel<Logic::kAnd>},
      {"logical_or", LogicalKernel<Logic::kOr>},
      {"logical_xor", LogicalKernel<Logic::kXor>},
      {"bitwise_and.Tensor", BitwiseKernel<Logic::kAnd>},
      {"bitwise_and.Scalar", BitwiseKernel<Logic::kAnd>},
      {"bitwise_or.Tensor", BitwiseKernel<Logic::kOr>},
      {"bitwise_or.Scalar", BitwiseKernel<Logic::kOr>},
      {"bitwise_xor.Tensor", BitwiseKernel<Logic::kXor>},
      {"bitwise_xor.Scalar", BitwiseKernel<Logic::kXor>},
      {"where.self", Where},
      {"where.ScalarOther", Where},
      {"where.ScalarSelf", Where},
      {"where.Scalar", Where},
      {"clamp", Clamp},
      {"clamp.Tensor", ClampTensor<ClampKind::kBoth>},
      {"clamp_min", ClampBound<true>},
      {"clamp_min.Tensor", ClampTensor<ClampKind::kMin>},
      {"clamp_max", ClampBound<false>},
      {"clamp_max.Tensor", ClampTensor<ClampKind::kMax>},
      {"masked_fill.Scalar", MaskedFill},
      {"masked_fill.Tensor", MaskedFill},
      {"addcmul", Addc<false>},
      {"addcdiv", Addc<true>},
      {"div.Tensor_mode", DivMode},
      {"div.Scalar_mode", DivMode},
      {"floor_divide", DivMode},
      {"floor_divide.Scalar", DivMode},
      {"fmod.Tensor", Fmod},
      {"fmod.Scalar", Fmod},
      {"atan2", Atan2},
      {"bitwise_left_shift.Tensor", ShiftKernel<true>},
      {"bitwise_left_shift.Tensor_Scalar", ShiftKernel<true>},
      {"bitwise_right_shift.Tensor", ShiftKernel<false>},
      {"bitwise_right_shift.Tensor_Scalar", ShiftKernel<false>},
      {"lerp.Scalar", Lerp},
      {"lerp.Tensor", Lerp},
      // In-place forms: the out-of-place kernel writing into self.
      {"add_.Tensor", InPlace<AddLike<AddKind::kAdd>>},
      {"add_.Scalar", InPlace<AddLike<AddKind::kAdd>>},
      {"sub_.Tensor", InPlace<AddLike<AddKind::kSub>>},
      {"sub_.Scalar", InPlace<AddLike<AddKind::kSub>>},
      {"mul_.Tensor", InPlace<Mul>},
      {"mul_.Scalar", InPlace<Mul>},
      {"div_.Tensor", InPlace<Div>},
      {"div_.Scalar", InPlace<Div>},
      {"clamp_", InPlace<Clamp>},
      {"clamp_.Tensor", InPlace<ClampTensor<ClampKind::kBoth>>},
      {"masked_fill_.Scalar", InPlace<MaskedFill>},
      {"masked_fill_.Tensor", InPlace<MaskedFill>},
      {"addcmul_", InPlace<Addc<false>>},
      {"addcdiv_", InPlace<Addc<true>>},
  };
  for (const Entry& e : entries) TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, e.name, e.fn));
  return absl::OkStatus();
}

}  // namespace tensord::cpu
