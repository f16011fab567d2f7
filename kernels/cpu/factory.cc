// Factory CPU kernels: empty and empty_strided (zero-filled: fresh storage
// never shows what a previous owner left there), zeros, ones, full, arange,
// linspace, eye, rand, randn, randint and the *_like forms, and the in-place
// uniform_ / normal_ (which fill self, the output the daemon passes). Random
// ops draw from the session's generator in row-major order, so a seed gives
// the same values whatever the strides.
#include <cmath>
#include <cstring>
#include <random>

#include "kernel_util.h"

namespace tensord::cpu {
namespace {

absl::Status FillOutput(KernelContext& ctx, const Scalar& v) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  return Fill(ctx.outputs[0], v);
}

absl::Status Zeros(KernelContext& ctx) { return FillOutput(ctx, Scalar::Int(0)); }

// empty and empty_strided: zero the bytes the output's storage span covers
// (1 + sum((size - 1) * stride) elements from the offset), not every logical
// element: an empty_strided((2**62,), (0,)) addresses one element, and
// walking 2**62 of them would pin a daemon thread.
absl::Status ZeroSpan(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  const TensorRef& out = ctx.outputs[0];
  if (out.meta->numel() == 0) return absl::OkStatus();
  int64_t span = 1;
  for (int64_t d = 0; d < out.meta->dim(); ++d) span += (out.meta->sizes[d] - 1) * out.meta->strides[d];
  std::memset(out.data_at_offset(), 0, static_cast<size_t>(span * out.meta->itemsize()));
  return absl::OkStatus();
}
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

// linspace(start, end, steps): PyTorch's CPU kernel. Element i is
// start + step * i in the first half and end - step * (steps - 1 - i) in the
// second (so both ends are exact), with step = (end - start) / (steps - 1)
// in double for integral outputs (then truncated) and in the output's own
// type for float32/float64 (float for float16/bfloat16, rounded once).
// steps == 1 gives start. The meta function checked start/end fit the dtype.
absl::Status Linspace(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  const TensorRef& out = ctx.outputs[0];
  if (out.meta->dim() != 1) return InternalErr("internal: linspace: output is not 1-D");
  const int64_t steps = out.meta->sizes[0];
  const int64_t stride = out.meta->strides[0] * out.meta->itemsize();
  const Scalar start = ctx.args[0].scalar(), end = ctx.args[1].scalar();
  char* p = out.data_at_offset();
  return Dispatch<kSetNumeric>(out.meta->dtype, "linspace", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = ComputeT<T>;
    using StepT = std::conditional_t<std::is_same_v<T, double>, double, std::conditional_t<kIsFloat<T>, float, double>>;
    const StepT s = static_cast<StepT>(ScalarTo<T>(start));
    if (steps == 1) {
      Store<T>(p, static_cast<C>(s));
      return absl::OkStatus();
    }
    const StepT e = static_cast<StepT>(ScalarTo<T>(end));
    const StepT step = (e - s) / static_cast<StepT>(steps - 1);
    const int64_t halfway = steps / 2;
    for (int64_t i = 0; i < steps; ++i) {
      const StepT v = i < halfway ? s + step * static_cast<StepT>(i) : e - step * static_cast<StepT>(steps - i - 1);
      if constexpr (kIsFloat<T>) {
        Store<T>(p + i * stride, static_cast<C>(v));
      } else {
        Store<T>(p + i * stride, FloatToInt<T>(static_cast<double>(v)));
      }
    }
    return absl::OkStatus();
  });
}

// randint(high, size) / randint.low(low, high, size): uniform integers in
// [low, high) (PyTorch's random_from_to: a 64-bit draw modulo the range,
// plus low), converted to the output dtype, drawn in row-major order. The
// meta function checked low < high and both fit the dtype.
absl::Status RandintImpl(KernelContext& ctx, int64_t low, int64_t high) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  if (ctx.generator == nullptr) return InternalErr("internal: random op without a generator");
  if (!(low < high)) return InternalErr("internal: randint: low >= high passed the meta function");
  const TensorRef& out = ctx.outputs[0];
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  std::mt19937_64& engine = ctx.generator->engine;
  return Dispatch<kSetAllButF8>(out.meta->dtype, "randint", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = ComputeT<T>;
    FillRandom<T>(out, engine, [range, low](std::mt19937_64& e) {
      const int64_t v = static_cast<int64_t>(static_cast<uint64_t>(low) + e() % range);
      if constexpr (std::is_same_v<C, bool>) {
        return v != 0;
      } else {
        return static_cast<C>(v);
      }
    });
    return absl::OkStatus();
  });
}

absl::Status Randint(KernelContext& ctx) {
  TD_INTERNAL_CHECK(!ctx.args.empty(), "randint: missing arguments");
  return RandintImpl(ctx, 0, ctx.args[0].to_int());
}

absl::Status RandintLow(KernelContext& ctx) {
  TD_INTERNAL_CHECK(ctx.args.size() >= 2, "randint.low: missing arguments");
  return RandintImpl(ctx, ctx.args[0].to_int(), ctx.args[1].to_int());
}

}  // namespace

absl::Status RegisterFactoryKernels(KernelRegistry& r) {
  struct Entry {
    const char* name;
    KernelFn fn;
  };
  const Entry entries[] = {
      {"empty", ZeroSpan},        {"zeros", Zeros},           {"ones", Ones},
      {"full", FullKernel},    {"arange", Arange},         {"arange.start", ArangeStart},
      {"rand", Rand},          {"randn", Randn},           {"eye", Eye},
      {"empty_like", Zeros},   {"zeros_like", Zeros},      {"ones_like", Ones},
      {"full_like", FullKernel}, {"rand_like", Rand},      {"randn_like", Randn},
      {"uniform_", RandomInPlace<false>}, {"normal_", RandomInPlace<true>},
      // empty_strided: the daemon allocated 1 + sum((size - 1) * stride)
      // elements (0 when a size is 0), zero-filled like every fresh storage.
      {"linspace", Linspace},  {"randint", Randint},      {"randint.low", RandintLow},
      {"empty_strided", ZeroSpan},
  };
  for (const Entry& e : entries) TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, e.name, e.fn));
  return absl::OkStatus();
}

}  // namespace tensord::cpu
