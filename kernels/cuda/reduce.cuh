// kernels/cuda/reduce.cuh — the reduction engine: every output element of
// a ReduceCall (reduce_call.h) is folded by one block of kReduceThreads
// threads in a fixed order that depends on nothing but the reduction's
// size, so a float result is the same whatever the grid:
//
//   thread t folds elements t, t + 256, t + 512, ... in that order, then
//   the 256 partial results are combined by a fixed binary tree
//   (t with t + 128, then t with t + 64, ..., shared memory).
//
// Blocks loop over output elements (a grid-stride loop over blocks).
// Offsets come from 64-bit OffsetCalculators: one over the kept dims (the
// outputs and the input's start), one over the reduced dims in row-major
// order (so that element r is the r-th along them, the index argmax
// returns). The folds are the CPU kernels' (kernels/cpu/reduce.cc): sums in
// double or int64, NaN-propagating extremes, the first extreme's index.
// HostReduceEngine runs the same folds in the same order on the host (the
// host tests compare it with the CPU kernels).
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_REDUCE_CUH_
#define TENSORD_KERNELS_CUDA_REDUCE_CUH_

#include <math.h>

#include <cstdint>
#include <type_traits>

#include "cuda_dtypes.h"
#include "elementwise_call.h"
#include "macros.h"
#include "offset_calculator.h"
#include "reduce_call.h"

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

namespace tensord::cuda {

// What a reduction kernel receives (by value) besides its calculators.
struct ReduceParams {
  const char* in;
  ScalarType in_dtype;
  char* values;
  char* indices;
  int64_t out_numel;
  int64_t reduce_numel;
  int64_t count;
};

inline ReduceParams MakeReduceParams(const ReduceCall& c) {
  return ReduceParams{c.in, c.in_dtype, c.values, c.indices, c.kept.numel(), c.reduced.numel(), c.count};
}

// ---- the folds -------------------------------------------------------------------
// Each has an accumulator type `acc_t` (a plain struct or number, kept in
// shared memory), Identity(), Load(element, r) for element r of the
// reduction, Combine(a, b) where a comes from lower thread numbers, and
// Write(params, kept offsets, acc) to the outputs.

// sum / mean: every element converted to T (the CPU's cast to the output
// dtype), accumulated in double (floating T) or int64 (wrapping).
template <typename T, bool kMean>
struct SumFold {
  using C = ComputeT<T>;
  using acc_t = std::conditional_t<std::is_floating_point_v<C>, double, int64_t>;
  static TD_HOST_DEVICE TD_INLINE acc_t Identity() { return acc_t(0); }
  static TD_HOST_DEVICE TD_INLINE acc_t Load(const char* p, ScalarType dtype, int64_t /*r*/) {
    return static_cast<acc_t>(LoadCast<T>(p, dtype));
  }
  static TD_HOST_DEVICE TD_INLINE acc_t Combine(acc_t a, acc_t b) { return WrapAdd<acc_t>(a, b); }
  template <typename Off>
  static TD_HOST_DEVICE TD_INLINE void Write(const ReduceParams& p, const Off& off, acc_t a) {
    if constexpr (kMean) {
      const double m = static_cast<double>(a) / static_cast<double>(p.count);  // 0 / 0: NaN, as PyTorch
      Store<T>(p.values + off[0], ConvertValue<T, double>(m));
    } else {
      Store<T>(p.values + off[0], ConvertValue<T, acc_t>(a));
    }
  }
};

// The identities of max and min (no std::numeric_limits: its functions
// are host-only).
template <typename C>
TD_HOST_DEVICE TD_INLINE C HighestOf() {
  if constexpr (std::is_same_v<C, bool>) {
    return true;
  } else if constexpr (std::is_floating_point_v<C>) {
    return static_cast<C>(INFINITY);
  } else if constexpr (std::is_unsigned_v<C>) {
    return static_cast<C>(~C(0));
  } else {
    return static_cast<C>(static_cast<std::make_unsigned_t<C>>(~std::make_unsigned_t<C>(0)) >> 1);
  }
}
template <typename C>
TD_HOST_DEVICE TD_INLINE C LowestOf() {
  if constexpr (std::is_same_v<C, bool>) {
    return false;
  } else if constexpr (std::is_floating_point_v<C>) {
    return static_cast<C>(-INFINITY);
  } else if constexpr (std::is_unsigned_v<C>) {
    return C(0);
  } else {
    return static_cast<C>(-HighestOf<C>() - 1);
  }
}

// amax / amin / max() / min(): NaN propagates (the CPU's combine).
template <typename T, bool kMax>
struct ExtremeFold {
  using C = ComputeT<T>;
  using acc_t = C;
  static TD_HOST_DEVICE TD_INLINE acc_t Identity() { return kMax ? LowestOf<C>() : HighestOf<C>(); }
  static TD_HOST_DEVICE TD_INLINE acc_t Load(const char* p, ScalarType dtype, int64_t /*r*/) {
    return LoadCast<T>(p, dtype);
  }
  static TD_HOST_DEVICE TD_INLINE acc_t Combine(acc_t a, acc_t x) {
    if constexpr (kMax) {
      return (IsNan(x) || x > a) ? x : a;
    } else {
      return (IsNan(x) || x < a) ? x : a;
    }
  }
  template <typename Off>
  static TD_HOST_DEVICE TD_INLINE void Write(const ReduceParams& p, const Off& off, acc_t a) {
    Store<T>(p.values + off[0], a);
  }
};

// argmax / argmin / max.dim / min.dim: the extreme and the index of its
// first occurrence (NaN is the extreme), whatever order partial results
// meet in: ties go to the smaller index.
template <typename C>
struct ValueIndex {
  C value;
  int64_t index;  // -1: no element yet
};

template <typename T, bool kMax>
struct ArgFold {
  using C = ComputeT<T>;
  using acc_t = ValueIndex<C>;
  // x beats best (the CPU's Better).
  static TD_HOST_DEVICE TD_INLINE bool Better(C x, C best) {
    if (IsNan(best)) return false;
    if (IsNan(x)) return true;
    if constexpr (kMax) {
      return x > best;
    } else {
      return x < best;
    }
  }
  static TD_HOST_DEVICE TD_INLINE acc_t Identity() { return acc_t{C(0), -1}; }
  static TD_HOST_DEVICE TD_INLINE acc_t Load(const char* p, ScalarType dtype, int64_t r) {
    return acc_t{LoadCast<T>(p, dtype), r};
  }
  static TD_HOST_DEVICE TD_INLINE acc_t Combine(acc_t a, acc_t b) {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    if (Better(b.value, a.value)) return b;
    if (Better(a.value, b.value)) return a;
    return b.index < a.index ? b : a;  // equal (or both NaN): the first
  }
  template <typename Off>
  static TD_HOST_DEVICE TD_INLINE void Write(const ReduceParams& p, const Off& off, acc_t a) {
    if (p.values != nullptr) Store<T>(p.values + off[0], a.value);
    Store<int64_t>(p.indices + off[1], a.index);
  }
};

// Whether `call`'s outputs suit fold F's instance for T: values of dtype T
// (sum and mean: of T too), indices exactly for the arg folds.
template <typename T>
int CheckReduceOperands(const ReduceCall& c, bool arg) {
  if (c.in == nullptr && c.kept.numel() * c.reduced.numel() > 0) return kLaunchBadOperands;
  if (arg != (c.indices != nullptr)) return kLaunchBadOperands;
  if (!arg && c.values == nullptr) return kLaunchBadOperands;
  if (c.values != nullptr && c.values_dtype != ScalarTypeOf<T>()) return kLaunchBadOperands;
  if (c.kept.num_operands != 3 || c.reduced.num_operands != 1) return kLaunchBadOperands;
  return kLaunchOk;
}

#if defined(__CUDACC__)

template <typename Fold>
__global__ void __launch_bounds__(kReduceThreads)
    ReduceKernel(ReduceParams p, OffsetCalculator<3, uint64_t> kept, OffsetCalculator<1, uint64_t> reduced) {
  using acc_t = typename Fold::acc_t;
  __shared__ acc_t partial[kReduceThreads];
  const int t = static_cast<int>(threadIdx.x);
  for (int64_t o = blockIdx.x; o < p.out_numel; o += gridDim.x) {
    const auto ko = kept.get(static_cast<uint64_t>(o));
    const char* in = p.in + ko[2];
    acc_t a = Fold::Identity();
    for (int64_t r = t; r < p.reduce_numel; r += kReduceThreads) {
      a = Fold::Combine(a, Fold::Load(in + reduced.get(static_cast<uint64_t>(r))[0], p.in_dtype, r));
    }
    partial[t] = a;
    __syncthreads();
#pragma unroll
    for (int s = kReduceThreads / 2; s > 0; s /= 2) {
      if (t < s) partial[t] = Fold::Combine(partial[t], partial[t + s]);
      __syncthreads();
    }
    if (t == 0) Fold::Write(p, ko, partial[0]);
    __syncthreads();  // partial[0] is read before the next output overwrites it
  }
}

struct CudaReduceEngine {
  template <typename Fold>
  static int Run(const ReduceCall& c, void* stream) {
    const ReduceParams p = MakeReduceParams(c);
    if (p.out_numel == 0) return kLaunchOk;
    const unsigned int blocks = static_cast<unsigned int>(p.out_numel < (int64_t{1} << 16) ? p.out_numel : (int64_t{1} << 16));
    ReduceKernel<Fold><<<blocks, kReduceThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        p, OffsetCalculator<3, uint64_t>(c.kept), OffsetCalculator<1, uint64_t>(c.reduced));
    return static_cast<int>(cudaGetLastError());
  }
};

#endif  // defined(__CUDACC__)

// The kernel's folds and tree, block after block, on the host (tests).
struct HostReduceEngine {
  template <typename Fold>
  static int Run(const ReduceCall& c, void* /*stream*/) {
    using acc_t = typename Fold::acc_t;
    const ReduceParams p = MakeReduceParams(c);
    const OffsetCalculator<3, uint64_t> kept(c.kept);
    const OffsetCalculator<1, uint64_t> reduced(c.reduced);
    acc_t partial[kReduceThreads];
    for (int64_t o = 0; o < p.out_numel; ++o) {
      const auto ko = kept.get(static_cast<uint64_t>(o));
      const char* in = p.in + ko[2];
      for (int t = 0; t < kReduceThreads; ++t) {
        acc_t a = Fold::Identity();
        for (int64_t r = t; r < p.reduce_numel; r += kReduceThreads) {
          a = Fold::Combine(a, Fold::Load(in + reduced.get(static_cast<uint64_t>(r))[0], p.in_dtype, r));
        }
        partial[t] = a;
      }
      for (int s = kReduceThreads / 2; s > 0; s /= 2) {
        for (int t = 0; t < s; ++t) partial[t] = Fold::Combine(partial[t], partial[t + s]);
      }
      Fold::Write(p, ko, partial[0]);
    }
    return kLaunchOk;
  }
};

// The fold of `call.op` for `call.dtype`, run by Engine.
template <class Engine>
int DispatchReduce(const ReduceCall& call, void* stream) {
  return DispatchDtype<kSetAllButF8>(call.dtype, static_cast<int>(kLaunchBadDtype), [&](auto tag) -> int {
    using T = typename decltype(tag)::type;
    const bool arg = call.op == ReduceOp::kArgMax || call.op == ReduceOp::kArgMin;
    if (const int code = CheckReduceOperands<T>(call, arg); code != kLaunchOk) return code;
    switch (call.op) {
      case ReduceOp::kSum: return Engine::template Run<SumFold<T, false>>(call, stream);
      case ReduceOp::kMean:
        if constexpr (InSet<T>(ReduceDtypes(ReduceOp::kMean))) {
          return Engine::template Run<SumFold<T, true>>(call, stream);
        } else {
          return kLaunchBadDtype;
        }
      case ReduceOp::kMax: return Engine::template Run<ExtremeFold<T, true>>(call, stream);
      case ReduceOp::kMin: return Engine::template Run<ExtremeFold<T, false>>(call, stream);
      case ReduceOp::kArgMax: return Engine::template Run<ArgFold<T, true>>(call, stream);
      case ReduceOp::kArgMin: return Engine::template Run<ArgFold<T, false>>(call, stream);
    }
    return kLaunchBadOp;
  });
}

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_REDUCE_CUH_
