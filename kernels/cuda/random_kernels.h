// kernels/cuda/random_kernels.h — the host side of the CUDA random kernels:
// rand, randn, rand_like, randn_like, randint, randint.low, uniform_ and
// normal_. Each reads the call's arguments as the op's CPU kernel does
// (kernels/cpu/factory.cc: the same checks and errors; the meta functions
// check the ranges and dtypes users give), keys Philox from the session's
// generator for the device (ctx.generator), and describes one launch
// (RandomCall) to `L`, the device (see elementwise_kernels.h):
//
//   RegisterRandomKernels<CudaLaunch>(registry, DeviceType::kCUDA);
//
// The values differ from the CPU kernels' (a counter-based generator
// instead of the CPU's engine, as PyTorch's CUDA numbers differ from its
// CPU numbers); random.cuh says how each is drawn. Host code only.
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_RANDOM_KERNELS_H_
#define TENSORD_KERNELS_CUDA_RANDOM_KERNELS_H_

#include <cstdint>
#include <string>

#include "elementwise_kernels.h"
#include "random_call.h"

namespace tensord::cuda::ew {

// Fills `call.out` and `call.geometry` for `out` (row-major logical
// order); NotImplemented past kMaxDims dims after merging.
inline absl::Status PrepareRandomCall(const KernelContext& ctx, const TensorRef& out, RandomCall* call) {
  const TensorMeta& m = *out.meta;
  Shape strides = m.strides;
  for (int64_t& s : strides) s *= m.itemsize();
  const int64_t* ptrs[1] = {strides.data()};
  if (!BuildLogicalGeometry(static_cast<int>(m.dim()), m.sizes.data(), 1, ptrs, &call->geometry)) {
    return NotImplementedErr(absl::StrCat(ctx.op->full_name(), ": CUDA random ops support at most ", kMaxDims,
                                          " dimensions after merging; got ", ShapeToString(m.sizes)));
  }
  call->out = out.data_at_offset();
  call->dtype = m.dtype;
  return absl::OkStatus();
}

// The Philox state of one call, taken from `g` (the session's generator
// for the device): the key is one 64-bit draw of its engine and the offset
// 0. Every call thus has a key of its own (two calls differ) that
// tensord.manual_seed fixes (same seed, same values), and the Generator
// needs no state beyond the engine the CPU kernels use.
inline void TakePhiloxState(Generator& g, RandomCall* call) {
  call->seed = g.engine();
  call->offset = 0;
}

// Launches `call` with the next Philox state of ctx.generator (not null).
// An empty output draws nothing and leaves the generator as it was, as
// PyTorch's CUDA generator.
template <class L>
absl::Status LaunchRandom(KernelContext& ctx, RandomCall& call) {
  if (call.geometry.numel() == 0) return absl::OkStatus();
  TD_INTERNAL_CHECK(ctx.generator != nullptr, ctx.op->full_name(), ": no generator");
  TakePhiloxState(*ctx.generator, &call);
  const int code = L::Random(call, ctx.stream);
  if (code == kLaunchOk) return absl::OkStatus();
  return LaunchError(ctx.op->full_name(), code, code > 0 ? L::ErrorString(code) : std::string());
}

// outputs[0] = uniform [a, b) draws, or normal ones of mean a and standard
// deviation b (`normal`). The CPU kernel's dtype set (floating, float8
// included) and its error for others, which names uniform_ or normal_.
template <class L>
absl::Status RandomFloat(KernelContext& ctx, bool normal, double a, double b) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  if (ctx.generator == nullptr) return InternalErr("internal: random op without a generator");
  const ScalarType dt = ctx.outputs[0].meta->dtype;
  if (!DtypeInSet(dt, kSetFloats | kSetFloat8)) return DtypeNotImplemented(normal ? "normal_" : "uniform_", dt);
  RandomCall call;
  TD_RETURN_IF_ERROR(PrepareRandomCall(ctx, ctx.outputs[0], &call));
  call.op = normal ? RandomOp::kNormal : RandomOp::kUniform;
  call.a = a;
  call.b = b;
  return LaunchRandom<L>(ctx, call);
}

// Argument i of uniform_ / normal_ as a double (the schema's float).
inline absl::Status RandomFloatArg(const KernelContext& ctx, size_t i, double& v) {
  TD_INTERNAL_CHECK(i < ctx.args.size(), "argument ", i, " missing");
  const Value& a = ctx.args[i];
  TD_INTERNAL_CHECK(a.kind() == Value::Kind::kFloat || a.kind() == Value::Kind::kInt, "argument ", i,
                    " is not a float");
  v = a.to_double();
  return absl::OkStatus();
}

template <class L>
absl::Status Rand(KernelContext& ctx) {
  return RandomFloat<L>(ctx, false, 0.0, 1.0);
}

template <class L>
absl::Status Randn(KernelContext& ctx) {
  return RandomFloat<L>(ctx, true, 0.0, 1.0);
}

// uniform_(self, from, to) / normal_(self, mean, std): self is outputs[0];
// the meta function checked the parameters.
template <class L, bool kNormal>
absl::Status RandomInPlace(KernelContext& ctx) {
  double a = 0, b = 1;
  TD_RETURN_IF_ERROR(RandomFloatArg(ctx, 1, a));
  TD_RETURN_IF_ERROR(RandomFloatArg(ctx, 2, b));
  return RandomFloat<L>(ctx, kNormal, a, b);
}

// randint(high, size) / randint.low(low, high, size): [low, high), every
// dtype but float8 (the CPU kernel's set and error); the meta function
// checked low < high and that both fit the dtype.
template <class L>
absl::Status RandintImpl(KernelContext& ctx, int64_t low, int64_t high) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  if (ctx.generator == nullptr) return InternalErr("internal: random op without a generator");
  if (!(low < high)) return InternalErr("internal: randint: low >= high passed the meta function");
  const ScalarType dt = ctx.outputs[0].meta->dtype;
  if (!DtypeInSet(dt, kSetAllButF8)) return DtypeNotImplemented("randint", dt);
  RandomCall call;
  TD_RETURN_IF_ERROR(PrepareRandomCall(ctx, ctx.outputs[0], &call));
  call.op = RandomOp::kRandint;
  call.low = low;
  call.range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  return LaunchRandom<L>(ctx, call);
}

template <class L>
absl::Status Randint(KernelContext& ctx) {
  TD_INTERNAL_CHECK(!ctx.args.empty(), "randint: missing arguments");
  return RandintImpl<L>(ctx, 0, ctx.args[0].to_int());
}

template <class L>
absl::Status RandintLow(KernelContext& ctx) {
  TD_INTERNAL_CHECK(ctx.args.size() >= 2, "randint.low: missing arguments");
  return RandintImpl<L>(ctx, ctx.args[0].to_int(), ctx.args[1].to_int());
}

template <class L>
absl::Status RegisterRandomKernels(KernelRegistry& r, DeviceType device) {
  struct Entry {
    const char* name;
    KernelFn fn;
  };
  const Entry entries[] = {
      {"rand", Rand<L>},
      {"randn", Randn<L>},
      {"rand_like", Rand<L>},
      {"randn_like", Randn<L>},
      {"uniform_", RandomInPlace<L, false>},
      {"normal_", RandomInPlace<L, true>},
      {"randint", Randint<L>},
      {"randint.low", RandintLow<L>},
  };
  for (const Entry& e : entries) TD_RETURN_IF_ERROR(r.Register(device, e.name, e.fn));
  return absl::OkStatus();
}

}  // namespace tensord::cuda::ew

#endif  // TENSORD_KERNELS_CUDA_RANDOM_KERNELS_H_
