// Unary elementwise CPU kernels: neg, abs, sign, floor, ceil, round, trunc,
// relu, bitwise_not; exp, log, sqrt, rsqrt, sin, cos, tanh, sigmoid,
// reciprocal, erf (integer inputs computed in the output's floating dtype);
// gelu, silu (floating only); exp2, expm1, log2, log1p (floating, the meta
// function makes integer inputs float32); square (pow(x, 2) in the output's
// dtype); relu_ (in place);
// logical_not, isnan, isinf, isfinite (bool results).
#include <cmath>
#include <type_traits>

#include "elementwise.h"
#include "fast_math.h"
#include "elementwise_args.h"
#include "kernel_util.h"
#include "parallel.h"

namespace tensord::cpu {
namespace {

// out = op(self) where op is made per dtype by make_op(TypeTag<T>) and works
// on ComputeT<T>; the dtype is the output's (the meta function's choice).
template <uint32_t kSet, typename MakeOp>
absl::Status UnaryKernel(KernelContext& ctx, const char* name, MakeOp make_op) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef a, InputTensor(ctx, 0));
  const TensorRef& out = ctx.outputs[0];
  return Dispatch<kSet>(out.meta->dtype, name, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    return RunUnary<T, T>(out, a, make_op(tag));
  });
}

// out (bool) = pred(self), computed in the input's dtype.
template <typename MakePred>
absl::Status UnaryPredicateKernel(KernelContext& ctx, const char* name, MakePred make_pred) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef a, InputTensor(ctx, 0));
  const TensorRef& out = ctx.outputs[0];
  if (out.meta->dtype != ScalarType::kBool) {
    return InternalErr(absl::StrCat("internal: ", name, ": output dtype is ",
                                    DtypeName(out.meta->dtype), ", expected bool"));
  }
  return Dispatch<kSetAll>(a.meta->dtype, name, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    return RunUnary<bool, T>(out, a, make_pred(tag));
  });
}

#define TD_COMPUTE_T(tag) ComputeT<typename decltype(tag)::type>

absl::Status Neg(KernelContext& ctx) {
  return UnaryKernel<kSetInts | kSetFloats>(ctx, "neg", [](auto tag) {
    using C = TD_COMPUTE_T(tag);
    return [](C x) -> C { return WrapNeg<C>(x); };
  });
}

absl::Status Abs(KernelContext& ctx) {
  return UnaryKernel<kSetInts | kSetFloats>(ctx, "abs", [](auto tag) {
    using C = TD_COMPUTE_T(tag);
    return [](C x) -> C {
      if constexpr (std::is_floating_point_v<C>) {
        return std::fabs(x);
      } else if constexpr (std::is_unsigned_v<C>) {
        return x;
      } else {
        return x < 0 ? WrapNeg<C>(x) : x;
      }
    };
  });
}

absl::Status Sign(KernelContext& ctx) {
  return UnaryKernel<kSetAllButF8>(ctx, "sign", [](auto tag) {
    using C = TD_COMPUTE_T(tag);
    return [](C x) -> C {
      if constexpr (std::is_same_v<C, bool>) {
        return x;
      } else {
        return static_cast<C>((C(0) < x) - (x < C(0)));  // NaN -> 0, as PyTorch
      }
    };
  });
}

template <typename FloatFn>
absl::Status RoundingKernel(KernelContext& ctx, const char* name, FloatFn fn) {
  return UnaryKernel<kSetInts | kSetFloats>(ctx, name, [fn](auto tag) {
    using C = TD_COMPUTE_T(tag);
    return [fn](C x) -> C {
      if constexpr (std::is_floating_point_v<C>) {
        return fn(x);
      } else {
        (void)fn;  // captured for the float branch only
        return x;  // integers are already whole
      }
    };
  });
}

absl::Status Floor(KernelContext& ctx) {
  return RoundingKernel(ctx, "floor", [](auto x) { return std::floor(x); });
}
absl::Status Ceil(KernelContext& ctx) {
  return RoundingKernel(ctx, "ceil", [](auto x) { return std::ceil(x); });
}
absl::Status Round(KernelContext& ctx) {
  // Half to even under the default rounding mode, as PyTorch's nearbyint.
  return RoundingKernel(ctx, "round", [](auto x) { return std::nearbyint(x); });
}
absl::Status Trunc(KernelContext& ctx) {
  return RoundingKernel(ctx, "trunc", [](auto x) { return std::trunc(x); });
}

absl::Status Relu(KernelContext& ctx) {
  return UnaryKernel<kSetInts | kSetFloats>(ctx, "relu", [](auto tag) {
    using C = TD_COMPUTE_T(tag);
    // PyTorch's clamp_min(x, 0): NaN and -0.0 pass through unchanged.
    return [](C x) -> C { return x < C(0) ? C(0) : x; };
  });
}

absl::Status BitwiseNot(KernelContext& ctx) {
  return UnaryKernel<kSetBool | kSetInts>(ctx, "bitwise_not", [](auto tag) {
    using C = TD_COMPUTE_T(tag);
    return [](C x) -> C {
      if constexpr (std::is_same_v<C, bool>) {
        return !x;
      } else {
        return static_cast<C>(~x);
      }
    };
  });
}

// Floating unary math: computed in the output dtype (float for half types).
template <typename Fn>
absl::Status FloatMathKernel(KernelContext& ctx, const char* name, Fn fn) {
  return UnaryKernel<kSetFloats>(ctx, name, [fn](auto tag) {
    using C = TD_COMPUTE_T(tag);
    return [fn](C x) -> C { return fn(x); };
  });
}

absl::Status Erf(KernelContext& ctx) {
  return FloatMathKernel(ctx, "erf", [](auto x) { return std::erf(x); });
}

// gelu(self, approximate): x * Phi(x) with the exact normal CDF ('none') or
// PyTorch's tanh approximation ('tanh').
absl::Status Gelu(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(const bool tanh_approx, ReadGeluTanh(ctx));
  return UnaryKernel<kSetFloats>(ctx, "gelu", [tanh_approx](auto tag) {
    using C = TD_COMPUTE_T(tag);
    return [tanh_approx](C x) -> C {
      if (tanh_approx) {
        const C k_beta = static_cast<C>(M_SQRT2 * M_2_SQRTPI * 0.5);  // sqrt(2 / pi)
        const C k_kappa = static_cast<C>(0.044715);
        const C inner = k_beta * (x + k_kappa * x * x * x);
        return static_cast<C>(0.5) * x * (static_cast<C>(1) + std::tanh(inner));
      }
      return x * static_cast<C>(0.5) * (static_cast<C>(1) + std::erf(x * static_cast<C>(M_SQRT1_2)));
    };
  });
}

absl::Status Exp(KernelContext& ctx) {
  // float32 contiguous in and out: four lanes at a time.
  if (ctx.args.size() == 1 && ctx.outputs.size() == 1 && ctx.args[0].is_tensor()) {
    absl::StatusOr<TensorRef> self = InputTensor(ctx, 0);
    const TensorRef& out = ctx.outputs[0];
    if (self.ok() && self->meta->dtype == ScalarType::kFloat32 && out.meta->dtype == ScalarType::kFloat32 &&
        self->meta->sizes == out.meta->sizes && self->meta->is_contiguous() && out.meta->is_contiguous()) {
      const float* in = reinterpret_cast<const float*>(self->data_at_offset());
      float* o = reinterpret_cast<float*>(out.data_at_offset());
      ParallelFor(out.meta->numel(), [&](int64_t b, int64_t e) { ExpFArray(in + b, o + b, e - b); });
      return absl::OkStatus();
    }
  }
  // Other layouts and float types: ExpF per element (float), libm (double).
  return FloatMathKernel(ctx, "exp", [](auto x) {
    if constexpr (std::is_same_v<decltype(x), float>) {
      return ExpF(x);
    } else {
      return std::exp(x);
    }
  });
}
absl::Status Log(KernelContext& ctx) {
  return FloatMathKernel(ctx, "log", [](auto x) { return std::log(x); });
}
absl::Status Sqrt(KernelContext& ctx) {
  return FloatMathKernel(ctx, "sqrt", [](auto x) { return std::sqrt(x); });
}
absl::Status Rsqrt(KernelContext& ctx) {
  return FloatMathKernel(ctx, "rsqrt", [](auto x) { return decltype(x)(1) / std::sqrt(x); });
}
absl::Status Sin(KernelContext& ctx) {
  return FloatMathKernel(ctx, "sin", [](auto x) { return std::sin(x); });
}
absl::Status Cos(KernelContext& ctx) {
  return FloatMathKernel(ctx, "cos", [](auto x) { return std::cos(x); });
}
absl::Status Tanh(KernelContext& ctx) {
  return FloatMathKernel(ctx, "tanh", [](auto x) { return std::tanh(x); });
}
absl::Status Sigmoid(KernelContext& ctx) {
  return FloatMathKernel(ctx, "sigmoid", [](auto x) {
    using C = decltype(x);
    return C(1) / (C(1) + std::exp(-x));
  });
}
absl::Status Reciprocal(KernelContext& ctx) {
  return FloatMathKernel(ctx, "reciprocal", [](auto x) { return decltype(x)(1) / x; });
}

absl::Status Exp2(KernelContext& ctx) {
  return FloatMathKernel(ctx, "exp2", [](auto x) { return std::exp2(x); });
}
absl::Status Expm1(KernelContext& ctx) {
  return FloatMathKernel(ctx, "expm1", [](auto x) { return std::expm1(x); });
}
absl::Status Log2(KernelContext& ctx) {
  return FloatMathKernel(ctx, "log2", [](auto x) { return std::log2(x); });
}
absl::Status Log1p(KernelContext& ctx) {
  return FloatMathKernel(ctx, "log1p", [](auto x) { return std::log1p(x); });
}
// silu(x) = x * sigmoid(x), written x / (1 + exp(-x)) as PyTorch's CPU kernel.
absl::Status Silu(KernelContext& ctx) {
  return FloatMathKernel(ctx, "silu", [](auto x) {
    using C = decltype(x);
    return x / (C(1) + std::exp(-x));
  });
}

// square(x) = x * x in the output's dtype (bool inputs arrive as int64:
// the meta function promoted them); integers wrap like PyTorch's pow.
absl::Status Square(KernelContext& ctx) {
  return UnaryKernel<kSetInts | kSetFloats>(ctx, "square", [](auto tag) {
    using C = TD_COMPUTE_T(tag);
    return [](C x) -> C {
      if constexpr (std::is_floating_point_v<C>) {
        return x * x;
      } else {
        return WrapMul<C>(x, x);
      }
    };
  });
}

absl::Status LogicalNot(KernelContext& ctx) {
  return UnaryPredicateKernel(ctx, "logical_not", [](auto tag) {
    using C = TD_COMPUTE_T(tag);
    return [](C x) -> bool { return !(x != C(0)); };
  });
}
absl::Status IsNanKernel(KernelContext& ctx) {
  return UnaryPredicateKernel(ctx, "isnan", [](auto tag) {
    using C = TD_COMPUTE_T(tag);
    return [](C x) -> bool { return IsNan(x); };
  });
}
absl::Status IsInf(KernelContext& ctx) {
  return UnaryPredicateKernel(ctx, "isinf", [](auto tag) {
    using C = TD_COMPUTE_T(tag);
    return [](C x) -> bool {
      if constexpr (std::is_floating_point_v<C>) {
        return std::isinf(x);
      } else {
        return false;
      }
    };
  });
}
absl::Status IsFinite(KernelContext& ctx) {
  return UnaryPredicateKernel(ctx, "isfinite", [](auto tag) {
    using C = TD_COMPUTE_T(tag);
    return [](C x) -> bool {
      if constexpr (std::is_floating_point_v<C>) {
        return std::isfinite(x);
      } else {
        return true;
      }
    };
  });
}

#undef TD_COMPUTE_T

}  // namespace

absl::Status RegisterUnaryKernels(KernelRegistry& r) {
  struct Entry {
    const char* name;
    KernelFn fn;
  };
  const Entry entries[] = {
      {"neg", Neg},           {"abs", Abs},           {"sign", Sign},
      {"floor", Floor},       {"ceil", Ceil},         {"round", Round},
      {"trunc", Trunc},       {"relu", Relu},         {"bitwise_not", BitwiseNot},
      {"exp", Exp},           {"log", Log},           {"sqrt", Sqrt},
      {"rsqrt", Rsqrt},       {"sin", Sin},           {"cos", Cos},
      {"tanh", Tanh},         {"sigmoid", Sigmoid},   {"reciprocal", Reciprocal},
      {"logical_not", LogicalNot}, {"isnan", IsNanKernel}, {"isinf", IsInf},
      {"isfinite", IsFinite},  {"erf", Erf},          {"gelu", Gelu},
      {"exp2", Exp2},         {"expm1", Expm1},       {"log2", Log2},
      {"log1p", Log1p},       {"silu", Silu},         {"square", Square},
      {"relu_", InPlace<Relu>},
  };
  for (const Entry& e : entries) TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, e.name, e.fn));
  return absl::OkStatus();
}

}  // namespace tensord::cpu
