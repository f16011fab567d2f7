// kernels/cuda/elementwise.cuh — the strided elementwise engine: runs a
// functor over every element of an ElementwiseIter (elementwise_call.h),
// the output first:
//
//   // in a .cu file: out (float) = op(a (float), b (float)), a and b of any
//   // dtype (each element converted to float on load) and any strides
//   int code = CudaEngine::Run<float, float, float>(AddOp<float>{alpha}, call.iter, stream);
//
// The functor takes and returns compute values (ComputeT of the storage
// types named: float for __half). Run checks that the output has dtype
// OutT, picks a path, launches on `stream` and returns a LaunchCode (or the
// cudaError_t of the launch, from cudaGetLastError):
//
// - vectorized: one dim (everything contiguous after BuildGeometry), every
//   operand of exactly its slot's dtype and aligned to 4 elements: each
//   thread loads and stores 4 elements at a time (aligned vector accesses)
//   in a grid-stride loop;
// - strided: any geometry, any input dtypes (LoadCast converts each element
//   as the CPU kernels' casts do): a grid-stride loop whose offsets come
//   from an OffsetCalculator passed by value, with 32-bit indexing when
//   every extent fits (Fits32BitIndexing) and 64-bit otherwise.
//
// Constant operands (Python scalars) are read from the kernel's parameters
// on both paths. HostEngine runs the same per-element code, path choice
// included, on host memory: the host tests check everything but the launch
// itself against the CPU kernels without a GPU.
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_ELEMENTWISE_CUH_
#define TENSORD_KERNELS_CUDA_ELEMENTWISE_CUH_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "cuda_dtypes.h"
#include "elementwise_call.h"
#include "macros.h"
#include "offset_calculator.h"

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

namespace tensord::cuda {

// Elements per thread on the vectorized path.
inline constexpr int kVecSize = 4;
inline constexpr int kVectorThreads = 128;
inline constexpr int kStridedThreads = 256;
// Grid-stride loops cap the grid here (about 60 waves of an H100).
inline constexpr int64_t kMaxBlocks = 1 << 16;

// The operands as a kernel receives them (by value).
template <int N>
struct ElementwiseParams {
  char* data[N];
  ScalarType dtype[N];
  bool constant[N];
  uint64_t value[N];
};

template <int N>
ElementwiseParams<N> MakeParams(const ElementwiseIter& it) {
  ElementwiseParams<N> p{};
  for (int k = 0; k < N; ++k) {
    p.data[k] = it.operands[k].data;
    p.dtype[k] = it.operands[k].dtype;
    p.constant[k] = it.operands[k].is_constant;
    p.value[k] = it.operands[k].value;
  }
  return p;
}

// A constant operand's value as the compute type of T.
template <typename T>
TD_HOST_DEVICE TD_INLINE ComputeT<T> ConstantAs(uint64_t bits) {
  ComputeT<T> v;
  memcpy(&v, &bits, sizeof(v));
  return v;
}

// Operand k's element at byte offset `off`, converted to T's compute type.
template <typename T, int N, typename offset_t>
TD_HOST_DEVICE TD_INLINE ComputeT<T> LoadOperand(const ElementwiseParams<N>& p, int k, offset_t off) {
  if (p.constant[k]) return ConstantAs<T>(p.value[k]);
  return LoadCast<T>(p.data[k] + off, p.dtype[k]);
}

template <typename T, int kN>
struct alignas(sizeof(T) * kN) AlignedVector {
  T val[kN];
};

// Input slot I's kVecSize values on the vectorized path.
template <size_t I, typename T>
struct VecSlot {
  ComputeT<T> v[kVecSize];
};
template <typename Seq, typename... T>
struct VecPack;
template <size_t... I, typename... T>
struct VecPack<std::index_sequence<I...>, T...> : VecSlot<I, T>... {};

// The per-element (strided) and per-group (vectorized) work of a launch
// with output type OutT and input types InT..., shared by the CUDA kernels
// and HostEngine.
template <typename OutT, typename... InT>
struct ElementwiseBody {
  static constexpr int N = 1 + static_cast<int>(sizeof...(InT));
  using Seq = std::index_sequence_for<InT...>;

  // Element at `off` (one byte offset per operand).
  template <typename Op, typename offset_t>
  static TD_HOST_DEVICE TD_INLINE void Strided(const Op& op, const ElementwiseParams<N>& p,
                                                const Array<offset_t, N>& off) {
    StridedImpl(op, p, off, Seq{});
  }

  // Elements [base, base + kVecSize) of contiguous, aligned operands of
  // exactly their slots' dtypes; fewer at the end (numel).
  template <typename Op>
  static TD_HOST_DEVICE TD_INLINE void Vector(const Op& op, const ElementwiseParams<N>& p, int64_t base,
                                               int64_t numel) {
    VectorImpl(op, p, base, numel, Seq{});
  }

 private:
  template <typename Op, typename offset_t, size_t... I>
  static TD_HOST_DEVICE TD_INLINE void StridedImpl(const Op& op, const ElementwiseParams<N>& p,
                                                    const Array<offset_t, N>& off, std::index_sequence<I...>) {
    Store<OutT>(p.data[0] + off[0], op(LoadOperand<InT>(p, static_cast<int>(I) + 1, off[static_cast<int>(I) + 1])...));
  }

  template <size_t I, typename T>
  static TD_HOST_DEVICE TD_INLINE void LoadVec(VecSlot<I, T>& slot, const ElementwiseParams<N>& p, int64_t base) {
    constexpr int k = static_cast<int>(I) + 1;
    if (p.constant[k]) {
      const ComputeT<T> c = ConstantAs<T>(p.value[k]);
      for (int j = 0; j < kVecSize; ++j) slot.v[j] = c;
    } else {
      using V = AlignedVector<StorageT<T>, kVecSize>;
      const V raw = *reinterpret_cast<const V*>(p.data[k] + base * static_cast<int64_t>(sizeof(StorageT<T>)));
      for (int j = 0; j < kVecSize; ++j) slot.v[j] = Decode<T>(raw.val[j]);
    }
  }

  template <typename T>
  static TD_HOST_DEVICE TD_INLINE ComputeT<T> LoadContiguous(const ElementwiseParams<N>& p, int k, int64_t i) {
    if (p.constant[k]) return ConstantAs<T>(p.value[k]);
    return Load<T>(p.data[k] + i * static_cast<int64_t>(sizeof(StorageT<T>)));
  }

  template <typename Op, size_t... I>
  static TD_HOST_DEVICE TD_INLINE void VectorImpl(const Op& op, const ElementwiseParams<N>& p, int64_t base,
                                                   int64_t numel, std::index_sequence<I...>) {
    constexpr int64_t out_size = sizeof(StorageT<OutT>);
    if (base + kVecSize <= numel) {
      VecPack<std::index_sequence<I...>, InT...> in;
      (LoadVec<I, InT>(static_cast<VecSlot<I, InT>&>(in), p, base), ...);
      (void)in;  // unused when there are no inputs (fills)
      using V = AlignedVector<StorageT<OutT>, kVecSize>;
      V out;
      for (int j = 0; j < kVecSize; ++j) {
        out.val[j] = Encode<OutT>(op(static_cast<const VecSlot<I, InT>&>(in).v[j]...));
      }
      *reinterpret_cast<V*>(p.data[0] + base * out_size) = out;
    } else {
      for (int64_t i = base; i < numel; ++i) {
        Store<OutT>(p.data[0] + i * out_size, op(LoadContiguous<InT>(p, static_cast<int>(I) + 1, i)...));
      }
    }
  }
};

// Whether `it` suits ElementwiseBody<OutT, InT...>: operand count, an output
// of dtype OutT that is not a constant. kLaunchOk or kLaunchBadOperands.
template <typename OutT, typename... InT>
int CheckOperands(const ElementwiseIter& it) {
  constexpr int N = 1 + static_cast<int>(sizeof...(InT));
  if (it.num_operands != N || it.geometry.num_operands != N) return kLaunchBadOperands;
  if (it.operands[0].is_constant || it.operands[0].dtype != ScalarTypeOf<OutT>()) return kLaunchBadOperands;
  return kLaunchOk;
}

// Whether the vectorized path applies: one dim, and every tensor operand
// contiguous, of exactly its slot's dtype and aligned to kVecSize elements.
template <typename OutT, typename... InT>
bool Vectorizable(const ElementwiseIter& it) {
  constexpr int N = 1 + static_cast<int>(sizeof...(InT));
  constexpr ScalarType kTypes[N] = {ScalarTypeOf<OutT>(), ScalarTypeOf<InT>()...};
  constexpr int64_t kSizes[N] = {static_cast<int64_t>(sizeof(StorageT<OutT>)),
                                 static_cast<int64_t>(sizeof(StorageT<InT>))...};
  if (it.geometry.ndim != 1) return false;
  for (int k = 0; k < N; ++k) {
    const ElementwiseOperand& o = it.operands[k];
    if (o.is_constant) continue;
    if (o.dtype != kTypes[k] || it.geometry.strides[0][k] != kSizes[k]) return false;
    if (reinterpret_cast<uintptr_t>(o.data) % static_cast<uintptr_t>(kSizes[k] * kVecSize) != 0) return false;
  }
  return true;
}

#if defined(__CUDACC__)

template <typename Body, typename Op, int N, typename index_t>
__global__ void __launch_bounds__(kStridedThreads)
    StridedKernel(Op op, ElementwiseParams<N> p, OffsetCalculator<N, index_t> calc, int64_t numel) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel; i += step) {
    Body::Strided(op, p, calc.get(static_cast<index_t>(i)));
  }
}

template <typename Body, typename Op, int N>
__global__ void __launch_bounds__(kVectorThreads) VectorKernel(Op op, ElementwiseParams<N> p, int64_t numel) {
  const int64_t groups = (numel + kVecSize - 1) / kVecSize;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += step) {
    Body::Vector(op, p, g * kVecSize, numel);
  }
}

inline unsigned int GridFor(int64_t work, int threads) {
  return static_cast<unsigned int>(std::min<int64_t>((work + threads - 1) / threads, kMaxBlocks));
}

struct CudaEngine {
  template <typename OutT, typename... InT, typename Op>
  static int Run(const Op& op, const ElementwiseIter& it, void* stream) {
    using Body = ElementwiseBody<OutT, InT...>;
    constexpr int N = Body::N;
    if (const int code = CheckOperands<OutT, InT...>(it); code != kLaunchOk) return code;
    const int64_t numel = it.geometry.numel();
    if (numel == 0) return kLaunchOk;
    const ElementwiseParams<N> p = MakeParams<N>(it);
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (Vectorizable<OutT, InT...>(it)) {
      const int64_t groups = (numel + kVecSize - 1) / kVecSize;
      VectorKernel<Body, Op, N><<<GridFor(groups, kVectorThreads), kVectorThreads, 0, s>>>(op, p, numel);
    } else if (Fits32BitIndexing(it.geometry)) {
      StridedKernel<Body, Op, N, uint32_t><<<GridFor(numel, kStridedThreads), kStridedThreads, 0, s>>>(
          op, p, OffsetCalculator<N, uint32_t>(it.geometry), numel);
    } else {
      StridedKernel<Body, Op, N, uint64_t><<<GridFor(numel, kStridedThreads), kStridedThreads, 0, s>>>(
          op, p, OffsetCalculator<N, uint64_t>(it.geometry), numel);
    }
    return static_cast<int>(cudaGetLastError());
  }
};

#endif  // defined(__CUDACC__)

// The CUDA engine's work done on the host, on host memory, one element or
// group after the other (tests; `stream` is ignored). `force_64bit` takes
// the 64-bit strided path even where 32 bits would do.
struct HostEngine {
  static inline bool force_64bit = false;

  template <typename OutT, typename... InT, typename Op>
  static int Run(const Op& op, const ElementwiseIter& it, void* /*stream*/) {
    using Body = ElementwiseBody<OutT, InT...>;
    constexpr int N = Body::N;
    if (const int code = CheckOperands<OutT, InT...>(it); code != kLaunchOk) return code;
    const int64_t numel = it.geometry.numel();
    if (numel == 0) return kLaunchOk;
    const ElementwiseParams<N> p = MakeParams<N>(it);
    if (Vectorizable<OutT, InT...>(it)) {
      for (int64_t base = 0; base < numel; base += kVecSize) Body::Vector(op, p, base, numel);
    } else if (Fits32BitIndexing(it.geometry) && !force_64bit) {
      const OffsetCalculator<N, uint32_t> calc(it.geometry);
      for (int64_t i = 0; i < numel; ++i) Body::Strided(op, p, calc.get(static_cast<uint32_t>(i)));
    } else {
      const OffsetCalculator<N, uint64_t> calc(it.geometry);
      for (int64_t i = 0; i < numel; ++i) Body::Strided(op, p, calc.get(static_cast<uint64_t>(i)));
    }
    return kLaunchOk;
  }
};

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_ELEMENTWISE_CUH_
