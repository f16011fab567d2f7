// Factory CPU kernels: empty (zero-filled: fresh storage never shows what a
// previous owner left there), zeros, ones, full, arange, eye, rand, randn and
// the *_like forms, and the in-place uniform_ / normal_ (which fill self, the
// output the daemon passes). Random ops draw from the session's generator in
// row-major order, so a seed gives the same values whatever the strides.
#include <cmath>
#include <random>

#include "kernel_util.h"

namespace tensord::cpu {
namespace {

absl::Status FillOutput(KernelContext& ctx, const Scalar& v) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  return Fill(ctx.outputs[0], v);
}

absl::Status Zeros(KernelContext& ctx) { return FillOutput(ctx, Scalar::Int(0)); }
absl::Status Ones(KernelContext& ctx) { return FillOutput(ctx, Scalar::Int(1)); }
// full(size, fill_value) and full_like(self, fill_value): fill_value is arg 1.
absl::Status FullKernel(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  return Fill(ctx.outputs[0], ctx.args[1].scalar());
}

// arange(end) / arange.start(start, end, step): element i is start + i * step,
// computed in double for floating outputs and int64 for integral ones (as
// PyTorch's accumulate type), then converted.
absl::Status ArangeImpl(KernelContext& ctx, const Scalar& start, const Scalar& step) {
  const TensorRef& out = ctx.outputs[0];
  if (out.meta->dim() != 1) return InternalErr("internal: arange: output is not 1-D");
  const int64_t n = out.meta->sizes[0];
  const int64_t stride = out.meta->strides[0] * out.meta->itemsize();
  char* p = out.data_at_offset();
  return Dispatch<kSetNumeric>(out.meta->dtype, "arange", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    if constexpr (kIsFloat<T>) {
      const double s = start.to_double(), st = step.to_double();
      for (int64_t i = 0; i < n; ++i) {
        Store<T>(p + i * stride, static_cast<ComputeT<T>>(s + st * static_cast<double>(i)));
      }
    } else {
      const int64_t s = ScalarTo<int64_t>(start), st = ScalarTo<int64_t>(step);
      for (int64_t i = 0; i < n; ++i) {
        Store<T>(p + i * stride, static_cast<T>(WrapAdd<int64_t>(s, WrapMul<int64_t>(st, i))));
      }
    }
    return absl::OkStatus();
  });
}

absl::Status Arange(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  return ArangeImpl(ctx, Scalar::Int(0), Scalar::Int(1));
}

absl::Status ArangeStart(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  return ArangeImpl(ctx, ctx.args[0].scalar(), ctx.args[2].scalar());
}

absl::Status Eye(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  const TensorRef& out = ctx.outputs[0];
  if (out.meta->dim() != 2) return InternalErr("internal: eye: output is not 2-D");
  TD_RETURN_IF_ERROR(Fill(out, Scalar::Int(0)));
  const int64_t n = std::min(out.meta->sizes[0], out.meta->sizes[1]);
  const int64_t step = (out.meta->strides[0] + out.meta->strides[1]) * out.meta->itemsize();
  char* p = out.data_at_offset();
  return Dispatch<kSetAll>(out.meta->dtype, "eye", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    for (int64_t i = 0; i < n; ++i) Store<T>(p + i * step, ScalarTo<T>(Scalar::Int(1)));
    return absl::OkStatus();
  });
}

// Fills `out` in row-major order with gen(engine) converted to T.
template <typename T, typename Gen>
void FillRandom(const TensorRef& out, std::mt19937_64& engine, Gen gen) {
  StridedLoop loop(out.meta->sizes);
  loop.Add(out.data_at_offset(), [&] {
    Shape s = out.meta->strides;
    for (int64_t& v : s) v *= out.meta->itemsize();
    return s;
  }());
  loop.Build(/*reorder=*/false);
  loop.Run([&](char* const* p, const int64_t* s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) Store<T>(p[0] + i * s[0], gen(engine));
  });
}

// Uniform [0, 1): the top `bits` bits of one 64-bit draw scaled by 2^-bits,
// with `bits` the precision of T, so every value is exactly representable
// and 1.0 can never appear (std::uniform_real_distribution<float> may round
// up to 1.0: LWG 2524).
template <typename T>
constexpr int UniformBits() {
  if constexpr (std::is_same_v<T, double>) return 53;
  else if constexpr (std::is_same_v<T, float>) return 24;
  else if constexpr (std::is_same_v<T, Half>) return 11;
  else if constexpr (std::is_same_v<T, BFloat16>) return 8;
  else if constexpr (std::is_same_v<T, Float8E4M3FN>) return 4;
  else return 3;  // Float8E5M2
}

// Fills outputs[0] with uniform [lo, hi) draws (normal: mean lo, std hi).
// rand/randn use (0, 1); uniform_/normal_ pass their arguments.
absl::Status RandImpl(KernelContext& ctx, bool normal, double lo = 0.0, double hi = 1.0) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  if (ctx.generator == nullptr) return InternalErr("internal: random op without a generator");
  const TensorRef& out = ctx.outputs[0];
  std::mt19937_64& engine = ctx.generator->engine;
  return Dispatch<kSetFloats | kSetFloat8>(out.meta->dtype, normal ? "normal_" : "uniform_",
                  [&](auto tag) -> absl::Status {
                    using T = typename decltype(tag)::type;
                    using C = ComputeT<T>;
                    if (normal) {
                      std::normal_distribution<double> dist(0.0, 1.0);
                      FillRandom<T>(out, engine, [&dist, lo, hi](std::mt19937_64& e) {
                        return static_cast<C>(lo + hi * dist(e));
                      });
                    } else {
                      constexpr int kBits = UniformBits<T>();
                      const double width = hi - lo;
                      FillRandom<T>(out, engine, [lo, width](std::mt19937_64& e) {
                        const double u = std::ldexp(static_cast<double>(e() >> (64 - kBits)), -kBits);
                        return static_cast<C>(lo + width * u);
                      });
                    }
                    return absl::OkStatus();
                  });
}

// uniform_(self, from, to) / normal_(self, mean, std): self is outputs[0]
// (the daemon passes self's storage); the meta function checked the ranges.
absl::Status FloatArgAt(const KernelContext& ctx, size_t i, double& v) {
  TD_INTERNAL_CHECK(i < ctx.args.size(), "argument ", i, " missing");
  const Value& a = ctx.args[i];
  TD_INTERNAL_CHECK(a.kind() == Value::Kind::kFloat || a.kind() == Value::Kind::kInt, "argument ", i,
                    " is not a float");
  v = a.to_double();
  return absl::OkStatus();
}

template <bool kNormal>
absl::Status RandomInPlace(KernelContext& ctx) {
  double a = 0, b = 1;
  TD_RETURN_IF_ERROR(FloatArgAt(ctx, 1, a));
  TD_RETURN_IF_ERROR(FloatArgAt(ctx, 2, b));
  return RandImpl(ctx, kNormal, a, b);
}

absl::Status Rand(KernelContext& ctx) { return RandImpl(ctx, false); }
absl::Status Randn(KernelContext& ctx) { return RandImpl(ctx, true); }

}  // namespace

absl::Status RegisterFactoryKernels(KernelRegistry& r) {
  struct Entry {
    const char* name;
    KernelFn fn;
  };
  const Entry entries[] = {
      {"empty", Zeros},        {"zeros", Zeros},           {"ones", Ones},
      {"full", FullKernel},    {"arange", Arange},         {"arange.start", ArangeStart},
      {"rand", Rand},          {"randn", Randn},           {"eye", Eye},
      {"empty_like", Zeros},   {"zeros_like", Zeros},      {"ones_like", Ones},
      {"full_like", FullKernel}, {"rand_like", Rand},      {"randn_like", Randn},
      {"uniform_", RandomInPlace<false>}, {"normal_", RandomInPlace<true>},
  };
  for (const Entry& e : entries) TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, e.name, e.fn));
  return absl::OkStatus();
}

}  // namespace tensord::cpu
