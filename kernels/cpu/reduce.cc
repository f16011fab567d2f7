// Reduction CPU kernels: sum, mean, nansum (float inputs accumulate in
// double, integers in int64), prod, var/std (two passes: mean, then squared
// deviations), norm / linalg_vector_norm, logsumexp (shifted by the max),
// all/any, amax, amin, max/min over everything (NaN propagates), argmax,
// argmin, max.dim, min.dim (values and the index of the first extreme; NaN
// counts as the extreme, as in PyTorch).
//
// Value reductions walk the input in memory order with an accumulator
// operand that has stride 0 along reduced dims, so a reduction over the
// inner dim becomes a register loop and one over an outer dim a vectorisable
// acc[j] += x[j] loop.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernel_util.h"
#include "parallel.h"
#include "reduce_args.h"
#include "tensord/meta/shape_rules.h"

namespace tensord::cpu {
namespace {

// ---- value reductions -----------------------------------------------------------

// acc[i] = combine(acc[i], x[i]) over a contiguous run; out of line so that
// GCC vectorises it (see UnaryContiguous in elementwise.h).
template <typename In, typename Acc, typename Combine>
__attribute__((noinline)) void AccumulateContiguous(Acc* acc, const char* x, int64_t n,
                                                    Combine combine) {
  constexpr int64_t kIn = sizeof(In);
  for (int64_t i = 0; i < n; ++i) acc[i] = combine(acc[i], Load<In>(x + i * kIn));
}

// Accumulates `in` (dtype In) into `acc` (contiguous over the kept dims, in
// order, already initialised). `combine(acc, x)` folds one compute value;
// `reduce_run(x_ptr, stride, n, acc)` folds a run (the fast path).
template <typename In, typename Acc, typename Combine, typename ReduceRun>
absl::Status ReduceInto(const TensorRef& in, const std::vector<bool>& mask, Acc* acc,
                        Combine combine, ReduceRun reduce_run) {
  const Shape& sizes = in.meta->sizes;
  const int64_t nd = in.meta->dim();
  Shape acc_strides(nd, 0);
  int64_t stride = static_cast<int64_t>(sizeof(Acc));
  for (int64_t d = nd - 1; d >= 0; --d) {
    if (!mask[d]) {
      acc_strides[d] = stride;
      stride *= sizes[d];
    }
  }
  StridedLoop loop(sizes);
  TD_RETURN_IF_ERROR(loop.AddTensor(in));  // first: walk the input in memory order
  loop.Add(reinterpret_cast<char*>(acc), acc_strides);
  loop.Build();
  constexpr int64_t kIn = sizeof(In), kAcc = sizeof(Acc);
  loop.Run([&combine, &reduce_run](char* const* p, const int64_t* s, int64_t n) {
    const Combine comb = combine;  // local copies: see UnaryLoop in elementwise.h
    const ReduceRun run = reduce_run;
    const char* x = p[0];
    Acc* a = reinterpret_cast<Acc*>(p[1]);
    if (s[1] == 0) {
      *a = run(x, s[0], n, *a);
    } else if (s[0] == kIn && s[1] == kAcc) {
      AccumulateContiguous<In>(a, x, n, comb);
    } else {
      for (int64_t i = 0; i < n; ++i) {
        Acc* ai = reinterpret_cast<Acc*>(p[1] + i * s[1]);
        *ai = comb(*ai, Load<In>(x + i * s[0]));
      }
    }
  });
  return absl::OkStatus();
}

// Where the accumulator lives: the output itself when it is contiguous and
// of the accumulator's dtype, else a temporary copied out at the end.
template <typename Acc>
struct AccBuffer {
  std::unique_ptr<TempTensor> temp;
  Acc* data = nullptr;
  int64_t numel = 0;
  const TensorRef* out = nullptr;

  absl::Status Init(const TensorRef& o) {
    out = &o;
    numel = o.meta->numel();
    if (o.meta->dtype == ScalarTypeOf<Acc>() && o.meta->is_contiguous()) {
      data = o.data<Acc>();
    } else {
      TD_ASSIGN_OR_RETURN(temp, TempTensor::Make(o.meta->sizes, ScalarTypeOf<Acc>()));
      data = reinterpret_cast<Acc*>(temp->data());
    }
    return absl::OkStatus();
  }
  void Fill(Acc v) {
    for (int64_t i = 0; i < numel; ++i) data[i] = v;
  }
  absl::Status Finish() {
    if (temp) return CopyConvert(*out, temp->ref());
    return absl::OkStatus();
  }
};

// Contiguous runs are reduced with GCC vector extensions (16-byte vectors,
// native on every x86-64, and 32-byte ones where noted; several
// accumulators for independent chains);
// strided runs and the narrow types use plain loops. Not inlined, so that
// the accumulators stay in registers (see UnaryContiguous in elementwise.h).
#define TD_VEC(T, bytes) T __attribute__((vector_size(bytes)))

template <typename V>
inline V LoadVec(const char* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}

// The sum of one block of float32 in double: 16 floats per step into four
// accumulators of four doubles (independent chains, so the adds pipeline).
// Always inlined into the two entry points below, so that each compiles it
// for its own instruction set.
__attribute__((always_inline)) inline double SumFloatBlockBody(const char* x, int64_t n) {
  typedef TD_VEC(float, 16) VF;
  typedef TD_VEC(double, 32) VD;
  VD a0 = {}, a1 = {}, a2 = {}, a3 = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 += __builtin_convertvector(LoadVec<VF>(x + i * 4), VD);
    a1 += __builtin_convertvector(LoadVec<VF>(x + i * 4 + 16), VD);
    a2 += __builtin_convertvector(LoadVec<VF>(x + i * 4 + 32), VD);
    a3 += __builtin_convertvector(LoadVec<VF>(x + i * 4 + 48), VD);
  }
  const VD t = (a0 + a1) + (a2 + a3);
  double r = (t[0] + t[1]) + (t[2] + t[3]);
  for (; i < n; ++i) r += static_cast<double>(Load<float>(x + i * 4));
  return r;
}

__attribute__((noinline)) double SumFloatBlockBaseline(const char* x, int64_t n) {
  return SumFloatBlockBody(x, n);
}

// With AVX2 one instruction converts four floats, which keeps a core at
// memory speed. Chosen at run time with __builtin_cpu_supports rather than
// GCC's target_clones, whose ifunc resolver runs before the sanitizers'
// runtime is up and crashes sanitizer builds.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"), noinline)) double SumFloatBlockAvx2(const char* x, int64_t n) {
  return SumFloatBlockBody(x, n);
}

double SumFloatBlock(const char* x, int64_t n) {
  static const bool kAvx2 = __builtin_cpu_supports("avx2");
  return kAvx2 ? SumFloatBlockAvx2(x, n) : SumFloatBlockBaseline(x, n);
}
#else
double SumFloatBlock(const char* x, int64_t n) { return SumFloatBlockBaseline(x, n); }
#endif

// The sum of one contiguous block (no initial value) for the types with a
// vector path: float32 in double, float64, int64 (wrapping, in unsigned lanes).
template <typename In, typename Acc>
Acc SumBlock(const char* x, int64_t n) {
  if constexpr (std::is_same_v<In, float> && std::is_same_v<Acc, double>) {
    return SumFloatBlock(x, n);
  } else {
    static_assert(std::is_same_v<In, Acc> && (std::is_same_v<Acc, double> || std::is_same_v<Acc, int64_t>));
    typedef std::conditional_t<std::is_same_v<Acc, double>, double, uint64_t> E;
    typedef TD_VEC(E, 16) V;
    V a0 = {}, a1 = {}, a2 = {}, a3 = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      a0 += LoadVec<V>(x + i * 8);
      a1 += LoadVec<V>(x + i * 8 + 16);
      a2 += LoadVec<V>(x + i * 8 + 32);
      a3 += LoadVec<V>(x + i * 8 + 48);
    }
    const V t = (a0 + a1) + (a2 + a3);
    Acc r = WrapAdd<Acc>(static_cast<Acc>(t[0]), static_cast<Acc>(t[1]));
    for (; i < n; ++i) r = WrapAdd<Acc>(r, Load<In>(x + i * 8));
    return r;
  }
}

template <typename In, typename Acc>
inline constexpr bool kHasSumBlock = (std::is_same_v<In, float> && std::is_same_v<Acc, double>) ||
                                     (std::is_same_v<In, Acc> &&
                                      (std::is_same_v<Acc, double> || std::is_same_v<Acc, int64_t>));

// Elements per block of a long contiguous sum. The blocks are fixed, not
// derived from the thread count, so a sum gives the same bits on any number
// of threads; within a block the accumulators are doubles (for float32 this
// is more accurate than NumPy's pairwise float32 sum), and the block sums are
// added pairwise.
inline constexpr int64_t kSumBlockElements = int64_t{1} << 15;

// The sum of a long contiguous run: blocks summed in parallel (parallel.h),
// then combined pairwise, in a fixed order.
template <typename In, typename Acc>
Acc SumContiguous(const char* x, int64_t n) {
  constexpr int64_t kIn = sizeof(In);
  if (n <= kSumBlockElements) return SumBlock<In, Acc>(x, n);
  const int64_t blocks = (n + kSumBlockElements - 1) / kSumBlockElements;
  std::vector<Acc> part(static_cast<size_t>(blocks));
  ParallelFor(blocks, kSumBlockElements, [&](int64_t b0, int64_t b1, int64_t) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t first = b * kSumBlockElements;
      part[b] = SumBlock<In, Acc>(x + first * kIn, std::min(kSumBlockElements, n - first));
    }
  });
  for (size_t width = 1; width < part.size(); width *= 2) {
    for (size_t i = 0; i + width < part.size(); i += 2 * width) part[i] = WrapAdd<Acc>(part[i], part[i + width]);
  }
  return part[0];
}

template <typename In, typename Acc>
__attribute__((noinline)) Acc SumRun(const char* x, int64_t s, int64_t n, Acc init) {
  constexpr int64_t kIn = sizeof(In);
  if constexpr (kHasSumBlock<In, Acc>) {
    if (s == kIn) return WrapAdd<Acc>(init, SumContiguous<In, Acc>(x, n));
  }
  Acc r = init;
  for (int64_t i = 0; i < n; ++i) r = WrapAdd<Acc>(r, static_cast<Acc>(Load<In>(x + i * s)));
  return r;
}

// NaN-propagating max (kMax) or min of acc and a contiguous run of n values.
template <bool kMax, typename T>
__attribute__((noinline)) ComputeT<T> ExtremeContiguous(const char* x, int64_t n, ComputeT<T> acc) {
  using C = ComputeT<T>;
  constexpr int64_t kIn = sizeof(T);
  auto pick = [](C a, C v) {
    if constexpr (kMax) {
      return v > a ? v : a;
    } else {
      return v < a ? v : a;
    }
  };
  int64_t i = 0;
  bool nan = IsNan(acc);
  C r = acc;
  if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
    typedef TD_VEC(T, 16) V;
    constexpr int64_t kL = 16 / sizeof(T);
    if (n >= 2 * kL) {
      V m0 = LoadVec<V>(x), m1 = LoadVec<V>(x + 16);
      decltype(m0 != m0) n0 = {}, n1 = {};
      for (; i + 2 * kL <= n; i += 2 * kL) {
        const V a = LoadVec<V>(x + i * kIn), b = LoadVec<V>(x + i * kIn + 16);
        if constexpr (std::is_floating_point_v<T>) {
          n0 |= (a != a);
          n1 |= (b != b);
        }
        if constexpr (kMax) {
          m0 = a > m0 ? a : m0;
          m1 = b > m1 ? b : m1;
        } else {
          m0 = a < m0 ? a : m0;
          m1 = b < m1 ? b : m1;
        }
      }
      n0 |= n1;
      for (int64_t j = 0; j < kL; ++j) {
        r = pick(pick(r, m0[j]), m1[j]);
        nan |= n0[j] != 0;
      }
    }
  }
  for (; i < n; ++i) {
    const C v = Load<T>(x + i * kIn);
    nan |= IsNan(v);
    r = pick(r, v);
  }
  if constexpr (std::is_floating_point_v<C>) {
    if (nan) return std::numeric_limits<C>::quiet_NaN();
  }
  return r;
}

// Index of the first element of a contiguous run equal to v (or, with
// `nan`, the first NaN); n - 1 if none (callers pass a value that occurs).
template <typename T>
__attribute__((noinline)) int64_t FindFirst(const char* x, int64_t n, ComputeT<T> v, bool nan) {
  using C = ComputeT<T>;
  constexpr int64_t kIn = sizeof(T);
  int64_t i = 0;
  if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
    typedef TD_VEC(T, 16) V;
    constexpr int64_t kL = 16 / sizeof(T);
    V bv;
    for (int64_t j = 0; j < kL; ++j) bv[j] = v;
    for (; i + kL <= n; i += kL) {
      const V a = LoadVec<V>(x + i * kIn);
      const auto m = nan ? (a != a) : (a == bv);
      uint64_t w[2];
      std::memcpy(w, &m, 16);
      if ((w[0] | w[1]) != 0) break;
    }
  }
  for (; i < n; ++i) {
    const C a = Load<T>(x + i * kIn);
    if (nan ? IsNan(a) : a == v) return i;
  }
  return n - 1;
}

#undef TD_VEC

// sum / mean. The input is cast to the output dtype first (PyTorch's dtype=
// semantics), except integer -> int64 which is exact per element.
template <bool kMean>
absl::Status SumMean(KernelContext& ctx) {
  const char* name = kMean ? "mean" : "sum";
  TD_ASSIGN_OR_RETURN(const ReductionArgs spec, ReadSumMean(ctx, kMean));
  const TensorRef& out = ctx.outputs[0];
  const ScalarType out_t = out.meta->dtype;
  std::unique_ptr<TempTensor> cast_holder;
  TensorRef in = spec.in;
  const bool int_to_long = out_t == ScalarType::kInt64 && IsIntegral(in.meta->dtype, true);
  if (!int_to_long) {
    TD_ASSIGN_OR_RETURN(in, AsDtype(spec.in, out_t, cast_holder));
  }
  const int64_t count = spec.count;
  return Dispatch<kSetAllButF8>(in.meta->dtype, name, [&](auto tag) -> absl::Status {
    using In = typename decltype(tag)::type;
    using Acc = std::conditional_t<kIsFloat<In>, double, int64_t>;
    AccBuffer<Acc> acc;
    TD_RETURN_IF_ERROR(acc.Init(out));
    acc.Fill(Acc(0));
    auto combine = [](Acc a, ComputeT<In> x) { return WrapAdd<Acc>(a, static_cast<Acc>(x)); };
    auto run = [](const char* x, int64_t s, int64_t n, Acc a) { return SumRun<In, Acc>(x, s, n, a); };
    absl::Status st = ReduceInto<In, Acc>(in, spec.mask, acc.data, combine, run);
    if (!st.ok()) return st;
    if constexpr (kMean) {
      // 0 / 0 gives NaN for an empty reduction, as PyTorch.
      if constexpr (std::is_floating_point_v<Acc>) {
        for (int64_t i = 0; i < acc.numel; ++i) acc.data[i] /= static_cast<Acc>(count);
      } else {
        return InternalErr("internal: mean accumulated in an integer type");
      }
    }
    return acc.Finish();
  });
}

// amax / amin and max() / min() over everything.
template <bool kMax>
absl::Status ExtremeReduce(KernelContext& ctx, const char* name, const ReductionArgs& spec) {
  const TensorRef& out = ctx.outputs[0];
  TD_RETURN_IF_ERROR(CheckNonEmptyReduction(name, spec, out));
  std::unique_ptr<TempTensor> cast_holder;
  TD_ASSIGN_OR_RETURN(TensorRef in, AsDtype(spec.in, out.meta->dtype, cast_holder));
  return Dispatch<kSetAllButF8>(in.meta->dtype, name, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = ComputeT<T>;
    AccBuffer<C> acc;
    TD_RETURN_IF_ERROR(acc.Init(out));
    C init;
    if constexpr (std::is_same_v<C, bool>) {
      init = !kMax;
    } else if constexpr (std::is_floating_point_v<C>) {
      init = kMax ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::infinity();
    } else {
      init = kMax ? std::numeric_limits<C>::lowest() : std::numeric_limits<C>::max();
    }
    acc.Fill(init);
    auto combine = [](C a, C x) -> C {
      if constexpr (kMax) {
        return (IsNan(x) || x > a) ? x : a;
      } else {
        return (IsNan(x) || x < a) ? x : a;
      }
    };
    auto run = [&combine](const char* x, int64_t s, int64_t n, C a) {
      if constexpr (!std::is_same_v<C, bool>) {
        if (s == static_cast<int64_t>(sizeof(T))) return ExtremeContiguous<kMax, T>(x, n, a);
      }
      for (int64_t i = 0; i < n; ++i) a = combine(a, Load<T>(x + i * s));
      return a;
    };
    absl::Status st = ReduceInto<T, C>(in, spec.mask, acc.data, combine, run);
    if (!st.ok()) return st;
    return acc.Finish();
  });
}

template <bool kMax>
absl::Status AmaxAmin(KernelContext& ctx) {
  const char* name = kMax ? "amax" : "amin";
  TD_ASSIGN_OR_RETURN(const ReductionArgs spec, ReadAmaxAmin(ctx, name));
  return ExtremeReduce<kMax>(ctx, name, spec);
}

template <bool kMax>
absl::Status MaxMinAll(KernelContext& ctx) {
  const char* name = kMax ? "max" : "min";
  TD_ASSIGN_OR_RETURN(const ReductionArgs spec, ReadMaxMinAll(ctx, name));
  return ExtremeReduce<kMax>(ctx, name, spec);
}

// ---- index reductions -----------------------------------------------------------

// True when x should replace best (first extreme wins; NaN is the extreme).
template <bool kMax, typename C>
inline bool Better(C x, C best) {
  if (IsNan(best)) return false;
  if (IsNan(x)) return true;
  if constexpr (kMax) {
    return x > best;
  } else {
    return x < best;
  }
}

// Finds, along dim `d` of `in`, the extreme value and its index for every
// position of the other dims. `best` (compute type) and `idx` (int64) are
// contiguous over the kept shape (in's sizes without d).
template <bool kMax, typename T>
absl::Status ArgReduceDim(const TensorRef& in, int64_t d, ComputeT<T>* best, int64_t* idx) {
  using C = ComputeT<T>;
  const TensorMeta& m = *in.meta;
  const int64_t item = m.itemsize();
  const int64_t k_size = m.sizes[d];
  const int64_t k_stride = m.strides[d] * item;
  Shape kept, in_strides;
  for (int64_t i = 0; i < m.dim(); ++i) {
    if (i == d) continue;
    kept.push_back(m.sizes[i]);
    in_strides.push_back(m.strides[i] * item);
  }
  int64_t kept_numel = 1;
  for (int64_t s : kept) kept_numel *= s;
  if (kept_numel == 0) return absl::OkStatus();
  Shape best_strides = ContiguousStrides(kept), idx_strides = best_strides;
  for (size_t i = 0; i < kept.size(); ++i) {
    best_strides[i] *= static_cast<int64_t>(sizeof(C));
    idx_strides[i] *= static_cast<int64_t>(sizeof(int64_t));
  }
  // The reduced dim is "inner" when no other non-trivial dim has a smaller
  // stride: then scan each slice; else sweep whole kept-shape planes per k.
  bool reduced_inner = true;
  for (size_t i = 0; i < kept.size(); ++i) {
    if (kept[i] > 1 && in_strides[i] < k_stride) reduced_inner = false;
  }
  char* base = in.data_at_offset();
  if (reduced_inner || kept_numel < 16 || k_size == 1) {
    StridedLoop loop(kept);
    loop.Add(base, in_strides);
    loop.Add(reinterpret_cast<char*>(best), best_strides);
    loop.Add(reinterpret_cast<char*>(idx), idx_strides);
    loop.Build();
    loop.Run([&](char* const* p, const int64_t* s, int64_t n) {
      for (int64_t j = 0; j < n; ++j) {
        const char* x = p[0] + j * s[0];
        C b = Load<T>(x);
        int64_t bi = 0;
        if constexpr (!std::is_same_v<C, bool>) {
          if (k_stride == item) {
            // Two vectorisable passes: the extreme value, then its first index.
            b = ExtremeContiguous<kMax, T>(x, k_size, b);
            bi = FindFirst<T>(x, k_size, b, IsNan(b));
            *reinterpret_cast<C*>(p[1] + j * s[1]) = b;
            *reinterpret_cast<int64_t*>(p[2] + j * s[2]) = bi;
            continue;
          }
        }
        for (int64_t k = 1; k < k_size; ++k) {
          const C v = Load<T>(x + k * k_stride);
          if (Better<kMax>(v, b)) {
            b = v;
            bi = k;
          }
        }
        *reinterpret_cast<C*>(p[1] + j * s[1]) = b;
        *reinterpret_cast<int64_t*>(p[2] + j * s[2]) = bi;
      }
    });
    return absl::OkStatus();
  }
  for (int64_t k = 0; k < k_size; ++k) {
    StridedLoop loop(kept);
    loop.Add(base + k * k_stride, in_strides);
    loop.Add(reinterpret_cast<char*>(best), best_strides);
    loop.Add(reinterpret_cast<char*>(idx), idx_strides);
    loop.Build();
    loop.Run([&](char* const* p, const int64_t* s, int64_t n) {
      for (int64_t j = 0; j < n; ++j) {
        const C v = Load<T>(p[0] + j * s[0]);
        C* b = reinterpret_cast<C*>(p[1] + j * s[1]);
        if (k == 0 || Better<kMax>(v, *b)) {
          *b = v;
          *reinterpret_cast<int64_t*>(p[2] + j * s[2]) = k;
        }
      }
    });
  }
  return absl::OkStatus();
}

// Shared by argmax/argmin (values == nullptr) and max.dim/min.dim, whose
// arguments ReadArgReduce has checked. `dim` < 0 means "flattened" (argmax
// without dim).
template <bool kMax, uint32_t kSet>
absl::Status ArgReduce(const char* name, const TensorRef& self, int64_t dim,
                       const TensorRef* values, const TensorRef& indices) {
  TensorRef in = self;
  std::unique_ptr<TempTensor> holder;
  TensorMeta flat;
  int64_t d = dim;
  if (dim < 0) {
    TD_ASSIGN_OR_RETURN(TensorRef c, AsContiguous(self, holder));
    flat = ViewMeta(*c.meta, {c.meta->numel()}, {1}, c.meta->storage_offset);
    in = TensorRef{c.base, &flat};
    d = 0;
  } else if (self.meta->dim() == 0) {
    flat = ViewMeta(*self.meta, {1}, {1}, self.meta->storage_offset);  // a 0-dim tensor reduces as [1]
    in = TensorRef{self.base, &flat};
    d = 0;
  }
  TD_INTERNAL_CHECK(indices.meta->dtype == ScalarType::kInt64, name, ": indices must be int64");
  TD_INTERNAL_CHECK(indices.meta->numel() * in.meta->sizes[d] == in.meta->numel(), name,
                    ": output numel does not match");
  return Dispatch<kSet>(in.meta->dtype, name, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = ComputeT<T>;
    Shape kept = in.meta->sizes;
    kept.erase(kept.begin() + d);
    TD_ASSIGN_OR_RETURN(auto best, TempTensor::Make(kept, ScalarTypeOf<C>()));
    TD_ASSIGN_OR_RETURN(auto idx, TempTensor::Make(kept, ScalarType::kInt64));
    absl::Status st = ArgReduceDim<kMax, T>(in, d, reinterpret_cast<C*>(best->data()),
                                            reinterpret_cast<int64_t*>(idx->data()));
    if (!st.ok()) return st;
    // The outputs may carry keepdim's size-1 dim: view the results with
    // their sizes (contiguous either way).
    TensorMeta idx_view = ViewMeta(idx->meta(), indices.meta->sizes,
                                   ContiguousStrides(indices.meta->sizes), 0);
    TD_RETURN_IF_ERROR(CopyConvert(indices, TensorRef{idx->data(), &idx_view}));
    if (values != nullptr) {
      TensorMeta val_view = ViewMeta(best->meta(), values->meta->sizes,
                                     ContiguousStrides(values->meta->sizes), 0);
      TD_RETURN_IF_ERROR(CopyConvert(*values, TensorRef{best->data(), &val_view}));
    }
    return absl::OkStatus();
  });
}

template <bool kMax>
absl::Status ArgMaxMin(KernelContext& ctx) {
  const char* name = kMax ? "argmax" : "argmin";
  TD_ASSIGN_OR_RETURN(const ArgReduceArgs a, ReadArgReduce(ctx, name, /*with_values=*/false));
  return ArgReduce<kMax, kSetInts | kSetFloats>(name, a.self, a.dim, nullptr, ctx.outputs[0]);
}

template <bool kMax>
absl::Status MaxMinDim(KernelContext& ctx) {
  const char* name = kMax ? "max" : "min";
  TD_ASSIGN_OR_RETURN(const ArgReduceArgs a, ReadArgReduce(ctx, name, /*with_values=*/true));
  TD_INTERNAL_CHECK(ctx.outputs[0].meta->dtype == a.self.meta->dtype, name, ": values dtype");
  return ArgReduce<kMax, kSetAllButF8>(name, a.self, a.dim, &ctx.outputs[0], ctx.outputs[1]);
}

// ---- reductions computed in double ------------------------------------------------

// Byte strides of a contiguous accumulator over the kept dims of `sizes`,
// viewed at the input's rank (0 along reduced dims).
Shape AccByteStrides(const Shape& sizes, const std::vector<bool>& mask, int64_t item) {
  Shape st(sizes.size(), 0);
  int64_t stride = item;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    if (!mask[d]) {
      st[d] = stride;
      stride *= sizes[d];
    }
  }
  return st;
}

// acc[o] = fold(acc[o], x) for every element x of `in` (any dtype but
// float8, read as double) in the slot o of its kept dims; `acc` is
// contiguous over the kept dims and already initialised.
template <typename Fold>
absl::Status FoldAsDouble(const TensorRef& in, const std::vector<bool>& mask, double* acc, Fold fold) {
  return Dispatch<kSetAllButF8>(in.meta->dtype, "reduction", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    auto combine = [fold](double a, ComputeT<T> x) { return fold(a, static_cast<double>(x)); };
    auto run = [fold](const char* x, int64_t s, int64_t n, double a) {
      for (int64_t i = 0; i < n; ++i) a = fold(a, static_cast<double>(Load<T>(x + i * s)));
      return a;
    };
    return ReduceInto<T, double>(in, mask, acc, combine, run);
  });
}

// out[o] = finish(fold over the reduced elements of slot o, from `init`),
// computed in double and converted to the output's dtype.
template <typename Fold, typename Finish>
absl::Status DoubleReduce(const ReductionArgs& spec, const TensorRef& out, double init,
                          Fold fold, Finish finish) {
  AccBuffer<double> acc;
  TD_RETURN_IF_ERROR(acc.Init(out));
  acc.Fill(init);
  TD_RETURN_IF_ERROR(FoldAsDouble(spec.in, spec.mask, acc.data, fold));
  for (int64_t i = 0; i < acc.numel; ++i) acc.data[i] = finish(acc.data[i]);
  return acc.Finish();
}

// A second pass: acc[o] += term(x, center[o]) for every element x of `in`
// (read as double), where `center` and `acc` are contiguous doubles over the
// kept dims (center: the first pass's result).
template <typename Term>
absl::Status CenteredPass(const TensorRef& in, const std::vector<bool>& mask, const double* center,
                          double* acc, Term term) {
  const Shape& sizes = in.meta->sizes;
  const Shape st = AccByteStrides(sizes, mask, sizeof(double));
  StridedLoop loop(sizes);
  TD_RETURN_IF_ERROR(loop.AddTensor(in));
  loop.Add(const_cast<char*>(reinterpret_cast<const char*>(center)), st);
  loop.Add(reinterpret_cast<char*>(acc), st);
  loop.Build();
  return Dispatch<kSetAllButF8>(in.meta->dtype, "reduction", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    loop.Run([&term](char* const* p, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        const double x = static_cast<double>(Load<T>(p[0] + i * s[0]));
        const double c = *reinterpret_cast<const double*>(p[1] + i * s[1]);
        double* a = reinterpret_cast<double*>(p[2] + i * s[2]);
        *a += term(x, c);
      }
    });
    return absl::OkStatus();
  });
}

// nansum: integer and bool inputs are plain sums (PyTorch redirects them);
// floating inputs are cast to the output dtype and skip NaNs.
absl::Status Nansum(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  if (IsIntegral(self.meta->dtype, /*include_bool=*/true)) return SumMean<false>(ctx);
  TD_ASSIGN_OR_RETURN(ReductionArgs spec, ReadNansum(ctx));
  const TensorRef& out = ctx.outputs[0];
  std::unique_ptr<TempTensor> holder;
  TD_ASSIGN_OR_RETURN(spec.in, AsDtype(spec.in, out.meta->dtype, holder));
  return DoubleReduce(spec, out, 0.0, [](double a, double x) { return std::isnan(x) ? a : a + x; },
                      [](double a) { return a; });
}

// prod / prod.dim_int: the input is cast to the output dtype; floats multiply
// in double, integers in int64 (wrapping, as PyTorch's integer arithmetic).
absl::Status Prod(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(ReductionArgs spec, ReadProd(ctx));
  const TensorRef& out = ctx.outputs[0];
  std::unique_ptr<TempTensor> holder;
  TD_ASSIGN_OR_RETURN(spec.in, AsDtype(spec.in, out.meta->dtype, holder));
  if (IsFloating(out.meta->dtype)) {
    return DoubleReduce(spec, out, 1.0, [](double a, double x) { return a * x; },
                        [](double a) { return a; });
  }
  std::unique_ptr<TempTensor> long_holder;
  TD_ASSIGN_OR_RETURN(TensorRef in, AsDtype(spec.in, ScalarType::kInt64, long_holder));
  AccBuffer<int64_t> acc;
  TD_RETURN_IF_ERROR(acc.Init(out));
  acc.Fill(1);
  auto combine = [](int64_t a, int64_t x) { return WrapMul<int64_t>(a, x); };
  auto run = [](const char* x, int64_t s, int64_t n, int64_t a) {
    for (int64_t i = 0; i < n; ++i) a = WrapMul<int64_t>(a, Load<int64_t>(x + i * s));
    return a;
  };
  TD_RETURN_IF_ERROR((ReduceInto<int64_t, int64_t>(in, spec.mask, acc.data, combine, run)));
  return acc.Finish();
}

// var / std, every overload: sum((x - mean)^2) / max(N - correction, 0)
// (PyTorch's rule: a non-positive divisor gives inf or NaN), std its sqrt.
template <bool kStd>
absl::Status VarStd(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const VarStdArgs a, ReadVarStd(ctx, kStd ? "std" : "var"));
  const ReductionArgs& spec = a.r;
  const double correction = a.correction;
  const TensorRef& out = ctx.outputs[0];
  const TensorRef& in = spec.in;
  const int64_t kept = out.meta->numel();
  TD_ASSIGN_OR_RETURN(auto mean, TempTensor::Make({kept}, ScalarType::kFloat64));
  TD_ASSIGN_OR_RETURN(auto m2, TempTensor::Make({kept}, ScalarType::kFloat64));
  double* mean_p = reinterpret_cast<double*>(mean->data());
  double* m2_p = reinterpret_cast<double*>(m2->data());
  for (int64_t i = 0; i < kept; ++i) mean_p[i] = m2_p[i] = 0.0;
  TD_RETURN_IF_ERROR(FoldAsDouble(in, spec.mask, mean_p, [](double a, double x) { return a + x; }));
  const double count = static_cast<double>(spec.count);
  for (int64_t i = 0; i < kept; ++i) mean_p[i] /= count;  // 0 / 0: NaN, as PyTorch
  TD_RETURN_IF_ERROR(CenteredPass(in, spec.mask, mean_p, m2_p, [](double x, double c) {
    const double d = x - c;
    return d * d;
  }));
  const double divisor = std::max(count - correction, 0.0);
  for (int64_t i = 0; i < kept; ++i) {
    const double v = m2_p[i] / divisor;
    m2_p[i] = kStd ? std::sqrt(v) : v;
  }
  TensorMeta view = ViewMeta(m2->meta(), out.meta->sizes, ContiguousStrides(out.meta->sizes), 0);
  return CopyConvert(out, TensorRef{m2->data(), &view});
}

// norm.Scalar / norm.ScalarOpt_dim / norm.ScalarOpt_dim_dtype /
// linalg_vector_norm: p = 0 counts non-zeros, inf / -inf take max / min of
// |x|, other p give (sum |x|^p)^(1/p) (p = 1 and 2 without pow). The input is
// cast to dtype= first; an empty reduction gives 0 (the ops that refuse it
// were stopped by the meta function).
absl::Status Norm(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(NormArgs a, ReadNorm(ctx));
  ReductionArgs& spec = a.r;
  const double ord = a.ord;
  const TensorRef& out = ctx.outputs[0];
  std::unique_ptr<TempTensor> holder;
  TD_ASSIGN_OR_RETURN(spec.in, AsDtype(spec.in, out.meta->dtype, holder));
  const bool empty = spec.count == 0;
  auto nan_or = [](double a, double v, bool take) { return std::isnan(a) ? a : (std::isnan(v) || take) ? v : a; };
  if (std::isinf(ord) && ord > 0) {
    return DoubleReduce(spec, out, 0.0,
                        [nan_or](double a, double x) { return nan_or(a, std::fabs(x), std::fabs(x) > a); },
                        [](double a) { return a; });
  }
  if (std::isinf(ord)) {
    return DoubleReduce(spec, out, std::numeric_limits<double>::infinity(),
        [nan_or](double a, double x) { return nan_or(a, std::fabs(x), std::fabs(x) < a); },
        [empty](double a) { return empty ? 0.0 : a; });
  }
  if (ord == 0) {
    return DoubleReduce(spec, out, 0.0, [](double a, double x) { return a + (x != 0 ? 1.0 : 0.0); },
                        [](double a) { return a; });
  }
  if (ord == 1) {
    return DoubleReduce(spec, out, 0.0, [](double a, double x) { return a + std::fabs(x); },
                        [](double a) { return a; });
  }
  if (ord == 2) {
    return DoubleReduce(spec, out, 0.0, [](double a, double x) { return a + x * x; },
                        [](double a) { return std::sqrt(a); });
  }
  return DoubleReduce(spec, out, 0.0, [ord](double a, double x) { return a + std::pow(std::fabs(x), ord); },
                      [ord, empty](double a) { return empty ? 0.0 : std::pow(a, 1.0 / ord); });
}

// logsumexp: m + log(sum(exp(x - m))) with m the max over the reduced dims
// (m taken as 0 where it is infinite, as PyTorch); integers become float32.
absl::Status Logsumexp(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const ReductionArgs spec, ReadLogsumexp(ctx));
  const TensorRef& out = ctx.outputs[0];
  const TensorRef& in = spec.in;
  const int64_t kept = out.meta->numel();
  TD_ASSIGN_OR_RETURN(auto maxes, TempTensor::Make({kept}, ScalarType::kFloat64));
  TD_ASSIGN_OR_RETURN(auto sums, TempTensor::Make({kept}, ScalarType::kFloat64));
  double* m = reinterpret_cast<double*>(maxes->data());
  double* s = reinterpret_cast<double*>(sums->data());
  for (int64_t i = 0; i < kept; ++i) {
    m[i] = -std::numeric_limits<double>::infinity();
    s[i] = 0.0;
  }
  TD_RETURN_IF_ERROR(FoldAsDouble(in, spec.mask, m, [](double a, double x) {
    return (std::isnan(x) || x > a) ? x : a;
  }));
  for (int64_t i = 0; i < kept; ++i) {
    if (std::isinf(m[i])) m[i] = 0.0;
  }
  TD_RETURN_IF_ERROR(CenteredPass(in, spec.mask, m, s, [](double x, double c) { return std::exp(x - c); }));
  for (int64_t i = 0; i < kept; ++i) s[i] = std::log(s[i]) + m[i];
  TensorMeta view = ViewMeta(sums->meta(), out.meta->sizes, ContiguousStrides(out.meta->sizes), 0);
  return CopyConvert(out, TensorRef{sums->data(), &view});
}

// all / any (+ .dim): the input is read as bool (non-zero, NaN included, is
// true); the result is bool, or uint8 for uint8 inputs.
template <bool kAll>
absl::Status AllAny(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const ReductionArgs spec, ReadAllAny(ctx, kAll ? "all" : "any"));
  std::unique_ptr<TempTensor> holder;
  TD_ASSIGN_OR_RETURN(TensorRef in, AsDtype(spec.in, ScalarType::kBool, holder));
  AccBuffer<bool> acc;
  TD_RETURN_IF_ERROR(acc.Init(ctx.outputs[0]));
  acc.Fill(kAll);
  auto combine = [](bool a, bool x) { return kAll ? (a && x) : (a || x); };
  auto run = [](const char* x, int64_t s, int64_t n, bool a) {
    for (int64_t i = 0; i < n; ++i) {
      const bool v = *reinterpret_cast<const bool*>(x + i * s);
      a = kAll ? (a && v) : (a || v);
    }
    return a;
  };
  TD_RETURN_IF_ERROR((ReduceInto<bool, bool>(in, spec.mask, acc.data, combine, run)));
  return acc.Finish();
}

}  // namespace

absl::Status RegisterReduceKernels(KernelRegistry& r) {
  struct Entry {
    const char* name;
    KernelFn fn;
  };
  const Entry entries[] = {
      {"sum", SumMean<false>},      {"mean", SumMean<true>},
      {"amax", AmaxAmin<true>},     {"amin", AmaxAmin<false>},
      {"argmax", ArgMaxMin<true>},  {"argmin", ArgMaxMin<false>},
      {"max", MaxMinAll<true>},     {"min", MaxMinAll<false>},
      {"max.dim", MaxMinDim<true>}, {"min.dim", MaxMinDim<false>},
      {"nansum", Nansum},           {"prod", Prod},
      {"prod.dim_int", Prod},       {"var.correction", VarStd<false>},
      {"var.dim", VarStd<false>},   {"var", VarStd<false>},
      {"std.correction", VarStd<true>}, {"std.dim", VarStd<true>},
      {"std", VarStd<true>},        {"norm.Scalar", Norm},
      {"norm.ScalarOpt_dim", Norm}, {"norm.ScalarOpt_dim_dtype", Norm},
      {"linalg_vector_norm", Norm}, {"logsumexp", Logsumexp},
      {"all", AllAny<true>},        {"all.dim", AllAny<true>},
      {"any", AllAny<false>},       {"any.dim", AllAny<false>},
  };
  for (const Entry& e : entries) TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, e.name, e.fn));
  return absl::OkStatus();
}

}  // namespace tensord::cpu
