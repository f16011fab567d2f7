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
// returns). The folds are the CPU kernels' (kernels/cpu/reduce.cc): sums
// and products in double or int64, NaN-propagating extremes, the first
// extreme's index, all/any, norms; var/std and logsumexp, which the CPU
// computes in two passes, fold in one with a mergeable state (Chan's
// moments, a running max with its rescaled sum of exponentials).
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
  double arg;
};

inline ReduceParams MakeReduceParams(const ReduceCall& c) {
  return ReduceParams{c.in, c.in_dtype, c.values, c.indices, c.kept.numel(), c.reduced.numel(), c.count, c.arg};
}

// ---- the folds -------------------------------------------------------------------
// Each has an accumulator type `acc_t` (a plain struct or number, kept in
// shared memory), Identity(), Load(element, r) for element r of the
// reduction, Combine(a, b) where a comes from lower thread numbers, and
// Write(params, kept offsets, acc) to the outputs. The engine calls them on
// an object made by MakeFold: a fold that needs the call's argument (the
// norm's p) is constructed from the ReduceParams, the others are empty.

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

// nansum of a floating input: every element converted to T (the output's
// dtype), NaNs skipped, summed in double.
template <typename T>
struct NansumFold {
  using acc_t = double;
  static TD_HOST_DEVICE TD_INLINE acc_t Identity() { return 0.0; }
  static TD_HOST_DEVICE TD_INLINE acc_t Load(const char* p, ScalarType dtype, int64_t /*r*/) {
    const double x = static_cast<double>(LoadCast<T>(p, dtype));
    return IsNan(x) ? 0.0 : x;
  }
  static TD_HOST_DEVICE TD_INLINE acc_t Combine(acc_t a, acc_t b) { return a + b; }
  template <typename Off>
  static TD_HOST_DEVICE TD_INLINE void Write(const ReduceParams& p, const Off& off, acc_t a) {
    Store<T>(p.values + off[0], ConvertValue<T, double>(a));
  }
};

// prod: every element converted to T (the output's dtype), multiplied in
// double (floating T) or int64 (wrapping: the product modulo 2^64 does not
// depend on the order).
template <typename T>
struct ProdFold {
  using C = ComputeT<T>;
  using acc_t = std::conditional_t<std::is_floating_point_v<C>, double, int64_t>;
  static TD_HOST_DEVICE TD_INLINE acc_t Identity() { return acc_t(1); }
  static TD_HOST_DEVICE TD_INLINE acc_t Load(const char* p, ScalarType dtype, int64_t /*r*/) {
    return static_cast<acc_t>(LoadCast<T>(p, dtype));
  }
  static TD_HOST_DEVICE TD_INLINE acc_t Combine(acc_t a, acc_t b) { return WrapMul<acc_t>(a, b); }
  template <typename Off>
  static TD_HOST_DEVICE TD_INLINE void Write(const ReduceParams& p, const Off& off, acc_t a) {
    Store<T>(p.values + off[0], ConvertValue<T, acc_t>(a));
  }
};

// all / any: every element read as bool (non-zero, NaN included, is true);
// T is the output's dtype (bool, or uint8 for uint8 inputs).
template <typename T, bool kAll>
struct AllAnyFold {
  using acc_t = bool;
  static TD_HOST_DEVICE TD_INLINE acc_t Identity() { return kAll; }
  static TD_HOST_DEVICE TD_INLINE acc_t Load(const char* p, ScalarType dtype, int64_t /*r*/) {
    return LoadCast<bool>(p, dtype);
  }
  static TD_HOST_DEVICE TD_INLINE acc_t Combine(acc_t a, acc_t b) { return kAll ? (a && b) : (a || b); }
  template <typename Off>
  static TD_HOST_DEVICE TD_INLINE void Write(const ReduceParams& p, const Off& off, acc_t a) {
    Store<T>(p.values + off[0], ConvertValue<T, bool>(a));
  }
};

// var / std: the count, mean and sum of squared deviations (M2) of the
// elements read as double, merged with Chan et al.'s pairwise update (one
// element at a time, Welford's), so no sum of squares cancels. The result
// is M2 / max(count - correction, 0) (p.arg: the correction; a divisor of
// 0 gives inf or NaN, as PyTorch), its square root for std. T is the
// output's dtype.
struct Moments {
  double n;
  double mean;
  double m2;
};

template <typename T, bool kStd>
struct MomentsFold {
  using acc_t = Moments;
  static TD_HOST_DEVICE TD_INLINE acc_t Identity() { return acc_t{0.0, 0.0, 0.0}; }
  static TD_HOST_DEVICE TD_INLINE acc_t Load(const char* p, ScalarType dtype, int64_t /*r*/) {
    return acc_t{1.0, LoadCast<double>(p, dtype), 0.0};
  }
  static TD_HOST_DEVICE TD_INLINE acc_t Combine(acc_t a, acc_t b) {
    if (a.n == 0.0) return b;
    if (b.n == 0.0) return a;
    const double n = a.n + b.n;
    const double delta = b.mean - a.mean;
    return acc_t{n, a.mean + delta * (b.n / n), a.m2 + b.m2 + delta * delta * (a.n * (b.n / n))};
  }
  template <typename Off>
  static TD_HOST_DEVICE TD_INLINE void Write(const ReduceParams& p, const Off& off, acc_t a) {
    // An infinite or NaN element leaves a non-finite mean (an infinite mean
    // merged with anything non-empty becomes NaN); the CPU's two passes
    // then give NaN (inf - inf), where M2 alone could stay finite.
    const bool finite = !IsNan(a.mean - a.mean);
    const double count = static_cast<double>(p.count);
    const double divisor = count - p.arg > 0.0 ? count - p.arg : 0.0;
    const double v = finite ? a.m2 / divisor : NAN;
    Store<T>(p.values + off[0], ConvertValue<T, double>(kStd ? ::sqrt(v) : v));
  }
};

// logsumexp: the running maximum m (NaN propagating) and s, the sum of
// exp(x - Shift(m)) over the elements folded so far, where Shift(m) is m, or
// 0 when m is infinite (the CPU's rule). Merging rescales each side's s to
// the larger maximum. The result is log(s) + Shift(m), NaN when m is.
struct MaxSumExp {
  double m;
  double s;
};

template <typename T>
struct LogsumexpFold {
  using acc_t = MaxSumExp;
  static TD_HOST_DEVICE TD_INLINE double Shift(double m) { return IsNan(m - m) ? 0.0 : m; }
  // a's s rescaled to the shift `to`; 0 stays 0 (an all -inf side would
  // otherwise give 0 * inf).
  static TD_HOST_DEVICE TD_INLINE double Rescale(acc_t a, double to) {
    return a.s == 0.0 ? 0.0 : a.s * ::exp(Shift(a.m) - to);
  }
  static TD_HOST_DEVICE TD_INLINE acc_t Identity() { return acc_t{-INFINITY, 0.0}; }
  static TD_HOST_DEVICE TD_INLINE acc_t Load(const char* p, ScalarType dtype, int64_t /*r*/) {
    const double x = LoadCast<double>(p, dtype);
    return acc_t{x, ::exp(x - Shift(x))};
  }
  static TD_HOST_DEVICE TD_INLINE acc_t Combine(acc_t a, acc_t b) {
    const double m = (IsNan(b.m) || b.m > a.m) ? b.m : a.m;
    const double to = Shift(m);
    return acc_t{m, Rescale(a, to) + Rescale(b, to)};
  }
  template <typename Off>
  static TD_HOST_DEVICE TD_INLINE void Write(const ReduceParams& p, const Off& off, acc_t a) {
    const double v = IsNan(a.m) ? a.m : ::log(a.s) + Shift(a.m);
    Store<T>(p.values + off[0], ConvertValue<T, double>(v));
  }
};

// The vector norms (norm, linalg_vector_norm) of the elements converted to
// T (the output's dtype) and read as double, one fold per kind of p (the
// CPU's cases).
template <typename T, ReduceOp kOp>
struct NormFold {
  using acc_t = double;
  double ord = 0;  // kNormP's p

  TD_HOST_DEVICE explicit NormFold(const ReduceParams& p) : ord(p.arg) {}

  // NaN-propagating max (kNormInf) or min of two partial results.
  static TD_HOST_DEVICE TD_INLINE double Extreme(double a, double b) {
    if (IsNan(a)) return a;
    if (IsNan(b)) return b;
    return (kOp == ReduceOp::kNormInf ? b > a : b < a) ? b : a;
  }
  static TD_HOST_DEVICE TD_INLINE acc_t Identity() { return kOp == ReduceOp::kNormNegInf ? INFINITY : 0.0; }
  TD_HOST_DEVICE TD_INLINE acc_t Load(const char* p, ScalarType dtype, int64_t /*r*/) const {
    const double x = static_cast<double>(LoadCast<T>(p, dtype));
    if constexpr (kOp == ReduceOp::kNormZero) {
      return x != 0.0 ? 1.0 : 0.0;
    } else if constexpr (kOp == ReduceOp::kNormTwo) {
      return x * x;
    } else if constexpr (kOp == ReduceOp::kNormP) {
      return ::pow(::fabs(x), ord);
    } else {
      return ::fabs(x);
    }
  }
  static TD_HOST_DEVICE TD_INLINE acc_t Combine(acc_t a, acc_t b) {
    if constexpr (kOp == ReduceOp::kNormInf || kOp == ReduceOp::kNormNegInf) {
      return Extreme(a, b);
    } else {
      return a + b;
    }
  }
  template <typename Off>
  TD_HOST_DEVICE TD_INLINE void Write(const ReduceParams& p, const Off& off, acc_t a) const {
    double v = a;
    if constexpr (kOp == ReduceOp::kNormTwo) {
      v = ::sqrt(a);
    } else if constexpr (kOp == ReduceOp::kNormP) {
      v = p.count == 0 ? 0.0 : ::pow(a, 1.0 / ord);
    } else if constexpr (kOp == ReduceOp::kNormNegInf) {
      v = p.count == 0 ? 0.0 : a;
    }
    Store<T>(p.values + off[0], ConvertValue<T, double>(v));
  }
};

// Fold F for a launch with parameters p: constructed from them when it
// takes them (NormFold), else default-constructed.
template <typename F>
TD_HOST_DEVICE TD_INLINE F MakeFold(const ReduceParams& p) {
  if constexpr (std::is_constructible_v<F, const ReduceParams&>) {
    return F(p);
  } else {
    (void)p;
    return F{};
  }
}

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
  const Fold fold = MakeFold<Fold>(p);
  for (int64_t o = blockIdx.x; o < p.out_numel; o += gridDim.x) {
    const auto ko = kept.get(static_cast<uint64_t>(o));
    const char* in = p.in + ko[2];
    acc_t a = fold.Identity();
    for (int64_t r = t; r < p.reduce_numel; r += kReduceThreads) {
      a = fold.Combine(a, fold.Load(in + reduced.get(static_cast<uint64_t>(r))[0], p.in_dtype, r));
    }
    partial[t] = a;
    __syncthreads();
#pragma unroll
    for (int s = kReduceThreads / 2; s > 0; s /= 2) {
      if (t < s) partial[t] = fold.Combine(partial[t], partial[t + s]);
      __syncthreads();
    }
    if (t == 0) fold.Write(p, ko, partial[0]);
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
    const Fold fold = MakeFold<Fold>(p);
    acc_t partial[kReduceThreads];
    for (int64_t o = 0; o < p.out_numel; ++o) {
      const auto ko = kept.get(static_cast<uint64_t>(o));
      const char* in = p.in + ko[2];
      for (int t = 0; t < kReduceThreads; ++t) {
        acc_t a = fold.Identity();
        for (int64_t r = t; r < p.reduce_numel; r += kReduceThreads) {
          a = fold.Combine(a, fold.Load(in + reduced.get(static_cast<uint64_t>(r))[0], p.in_dtype, r));
        }
        partial[t] = a;
      }
      for (int s = kReduceThreads / 2; s > 0; s /= 2) {
        for (int t = 0; t < s; ++t) partial[t] = fold.Combine(partial[t], partial[t + s]);
      }
      fold.Write(p, ko, partial[0]);
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
      case ReduceOp::kProd: return Engine::template Run<ProdFold<T>>(call, stream);
      case ReduceOp::kAll:
      case ReduceOp::kAny:
        if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, uint8_t>) {
          return call.op == ReduceOp::kAll ? Engine::template Run<AllAnyFold<T, true>>(call, stream)
                                           : Engine::template Run<AllAnyFold<T, false>>(call, stream);
        } else {
          return kLaunchBadDtype;
        }
      default: break;
    }
    if constexpr (InSet<T>(kSetFloats)) {
      switch (call.op) {
        case ReduceOp::kNansum: return Engine::template Run<NansumFold<T>>(call, stream);
        case ReduceOp::kVar: return Engine::template Run<MomentsFold<T, false>>(call, stream);
        case ReduceOp::kStd: return Engine::template Run<MomentsFold<T, true>>(call, stream);
        case ReduceOp::kLogsumexp: return Engine::template Run<LogsumexpFold<T>>(call, stream);
        case ReduceOp::kNormInf: return Engine::template Run<NormFold<T, ReduceOp::kNormInf>>(call, stream);
        case ReduceOp::kNormNegInf: return Engine::template Run<NormFold<T, ReduceOp::kNormNegInf>>(call, stream);
        case ReduceOp::kNormZero: return Engine::template Run<NormFold<T, ReduceOp::kNormZero>>(call, stream);
        case ReduceOp::kNormOne: return Engine::template Run<NormFold<T, ReduceOp::kNormOne>>(call, stream);
        case ReduceOp::kNormTwo: return Engine::template Run<NormFold<T, ReduceOp::kNormTwo>>(call, stream);
        case ReduceOp::kNormP: return Engine::template Run<NormFold<T, ReduceOp::kNormP>>(call, stream);
        default: return kLaunchBadOp;
      }
    } else {
      return kLaunchBadDtype;  // the floating folds have no instance for T
    }
  });
}

// ---- scans -----------------------------------------------------------------------
// One thread scans one line, element after element: the CPU's order, so
// float results match it bit for bit and do not depend on the launch.
// Consecutive threads take consecutive lines in the output's memory order
// (BuildGeometry puts its smallest strides innermost), so a scan along an
// outer dim reads and writes coalesced; along the innermost dim each thread
// streams its own row.

// What the scan kernel receives besides its calculator (a ScanCall less
// its geometry).
struct ScanParams {
  const char* in;
  ScalarType in_dtype;
  char* out;
  int64_t lines;
  int64_t length;
  int64_t out_step;
  int64_t in_step;
};

inline ScanParams MakeScanParams(const ScanCall& c) {
  return ScanParams{c.in, c.in_dtype, c.out, c.lines.numel(), c.length, c.out_step, c.in_step};
}

// Scans the line whose output starts at `out` and input at `in`.
template <typename T, bool kProd>
TD_HOST_DEVICE TD_INLINE void ScanLine(const ScanParams& c, const char* in, char* out) {
  using C = ComputeT<T>;
  using Acc = std::conditional_t<std::is_floating_point_v<C>, double, int64_t>;
  Acc acc = kProd ? Acc(1) : Acc(0);
  for (int64_t k = 0; k < c.length; ++k) {
    const Acc x = static_cast<Acc>(LoadCast<T>(in + k * c.in_step, c.in_dtype));
    acc = kProd ? WrapMul<Acc>(acc, x) : WrapAdd<Acc>(acc, x);
    Store<T>(out + k * c.out_step, static_cast<C>(acc));
  }
}

#if defined(__CUDACC__)

template <typename T, bool kProd>
__global__ void __launch_bounds__(kScanThreads) ScanKernel(ScanParams c, OffsetCalculator<2, uint64_t> lines) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * kScanThreads;
  for (int64_t l = static_cast<int64_t>(blockIdx.x) * kScanThreads + threadIdx.x; l < c.lines; l += step) {
    const auto o = lines.get(static_cast<uint64_t>(l));
    ScanLine<T, kProd>(c, c.in + o[1], c.out + o[0]);
  }
}

struct CudaScanEngine {
  template <typename T, bool kProd>
  static int Run(const ScanCall& c, void* stream) {
    const int64_t n = c.lines.numel();
    if (n == 0 || c.length == 0) return kLaunchOk;
    const int64_t want = (n + kScanThreads - 1) / kScanThreads;
    const unsigned int blocks = static_cast<unsigned int>(want < (int64_t{1} << 16) ? want : (int64_t{1} << 16));
    ScanKernel<T, kProd><<<blocks, kScanThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        MakeScanParams(c), OffsetCalculator<2, uint64_t>(c.lines));
    return static_cast<int>(cudaGetLastError());
  }
};

#endif  // defined(__CUDACC__)

// The kernel's lines, one after another, on the host (tests).
struct HostScanEngine {
  template <typename T, bool kProd>
  static int Run(const ScanCall& c, void* /*stream*/) {
    const ScanParams p = MakeScanParams(c);
    if (p.length == 0) return kLaunchOk;
    const OffsetCalculator<2, uint64_t> lines(c.lines);
    for (int64_t l = 0; l < p.lines; ++l) {
      const auto o = lines.get(static_cast<uint64_t>(l));
      ScanLine<T, kProd>(p, p.in + o[1], p.out + o[0]);
    }
    return kLaunchOk;
  }
};

// The scan `call.op` for `call.dtype`, run by Engine.
template <class Engine>
int DispatchScan(const ScanCall& call, void* stream) {
  if (call.lines.num_operands != 2) return kLaunchBadOperands;
  if ((call.in == nullptr || call.out == nullptr) && call.lines.numel() * call.length > 0) return kLaunchBadOperands;
  return DispatchDtype<kScanDtypes>(call.dtype, static_cast<int>(kLaunchBadDtype), [&](auto tag) -> int {
    using T = typename decltype(tag)::type;
    switch (call.op) {
      case ScanOp::kCumsum: return Engine::template Run<T, false>(call, stream);
      case ScanOp::kCumprod: return Engine::template Run<T, true>(call, stream);
    }
    return kLaunchBadOp;
  });
}

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_REDUCE_CUH_
