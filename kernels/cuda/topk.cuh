// kernels/cuda/topk.cuh — the topk kernel of a TopkCall (topk_call.h): one
// block per row (a grid-stride loop over rows) sorts the row's (rank,
// index) pairs with a block-wide bitonic network, in shared memory or, for
// long rows, in scratch memory, then writes the first k.
//
// The order is the CPU kernel's strict total order (kernels/cpu/index.cc):
// by value, NaN above everything (first when largest, last otherwise), -0
// tied with +0, ties lower index first. TopkRank maps each value to a
// 64-bit key whose unsigned order is that order (integers offset by 2^63,
// floats through their double's bits), so a pair compares by (rank, index)
// and every pair of the row is distinct: the sorted row is the CPU's, bit
// for bit. Values are copied from self at the sorted indices, so NaN
// payloads and signed zeros are self's. The network is data-oblivious, so
// HostTopkEngine (the host tests) runs the same steps one pair at a time.
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_TOPK_CUH_
#define TENSORD_KERNELS_CUDA_TOPK_CUH_

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "cuda_dtypes.h"
#include "elementwise_call.h"
#include "macros.h"
#include "offset_calculator.h"
#include "topk_call.h"

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

namespace tensord::cuda {

// What a kernel receives (by value) besides its offset calculator.
struct TopkParams {
  const char* self;
  char* values;
  char* indices;
  uint64_t rows;
  int64_t n, k, padded;
  int64_t self_stride, values_stride, indices_stride;
  bool largest;
  char* scratch;
};

inline TopkParams MakeTopkParams(const TopkCall& c) {
  return TopkParams{c.self,       c.values,         c.indices,         static_cast<uint64_t>(c.geometry.numel()),
                    c.n,          c.k,              c.padded,          c.self_stride,
                    c.values_stride, c.indices_stride, c.largest,      c.scratch};
}

TD_HOST_DEVICE TD_INLINE uint64_t DoubleBits(double d) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(d));
#else
  uint64_t b;
  std::memcpy(&b, &d, sizeof(b));
  return b;
#endif
}

// The sort key of the value at `p`: ascending keys are the CPU's order.
template <typename T>
TD_HOST_DEVICE TD_INLINE uint64_t TopkRank(const char* p, bool largest) {
  using C = ComputeT<T>;
  const C v = Load<T>(p);
  constexpr uint64_t kSign = uint64_t{1} << 63;
  uint64_t key;
  if constexpr (std::is_floating_point_v<C>) {
    if (v != v) {
      key = ~uint64_t{0};  // NaN: above +inf
    } else {
      const double d = v == C(0) ? 0.0 : static_cast<double>(v);  // -0 ties with +0
      const uint64_t bits = DoubleBits(d);
      key = (bits & kSign) != 0 ? ~bits : bits | kSign;
    }
  } else {
    key = static_cast<uint64_t>(static_cast<int64_t>(v)) ^ kSign;
  }
  return largest ? ~key : key;
}

// Slot i of the row: its rank and index, or past n a pad that sorts last.
template <typename T>
TD_HOST_DEVICE TD_INLINE void TopkLoadSlot(const TopkParams& p, const char* row, uint64_t* keys, int64_t* idx,
                                           int64_t i) {
  if (i < p.n) {
    keys[i] = TopkRank<T>(row + i * p.self_stride, p.largest);
    idx[i] = i;
  } else {
    keys[i] = ~uint64_t{0};
    idx[i] = INT64_MAX;
  }
}

// One compare-exchange of the bitonic network's step (size, stride): pair t
// of the padded/2 pairs. Ascending blocks where (i & size) == 0.
TD_HOST_DEVICE TD_INLINE void BitonicPair(uint64_t* keys, int64_t* idx, int64_t size, int64_t stride, int64_t t) {
  const int64_t i = ((t & ~(stride - 1)) << 1) | (t & (stride - 1));  // stride is a power of two
  const int64_t j = i + stride;
  const bool greater = keys[i] > keys[j] || (keys[i] == keys[j] && idx[i] > idx[j]);
  if (greater == ((i & size) == 0)) {
    const uint64_t kk = keys[i];
    keys[i] = keys[j];
    keys[j] = kk;
    const int64_t ii = idx[i];
    idx[i] = idx[j];
    idx[j] = ii;
  }
}

// Output j (< k) of the row: self's element at the j-th sorted index.
template <typename T>
TD_HOST_DEVICE TD_INLINE void TopkStoreSlot(const TopkParams& p, const char* row, char* vrow, char* irow,
                                            const int64_t* idx, int64_t j) {
  using S = StorageT<T>;
  const int64_t src = idx[j];
  *reinterpret_cast<S*>(vrow + j * p.values_stride) = *reinterpret_cast<const S*>(row + src * p.self_stride);
  *reinterpret_cast<int64_t*>(irow + j * p.indices_stride) = src;
}

#if defined(__CUDACC__)

template <typename T, typename index_t>
__global__ void __launch_bounds__(kTopkThreads) TopkKernel(TopkParams p, OffsetCalculator<3, index_t> calc) {
  extern __shared__ uint64_t topk_shared[];
  uint64_t* keys = p.scratch == nullptr
                       ? topk_shared
                       : reinterpret_cast<uint64_t*>(p.scratch + static_cast<int64_t>(blockIdx.x) * p.padded * 16);
  int64_t* idx = reinterpret_cast<int64_t*>(keys + p.padded);
  const int64_t tid = threadIdx.x;
  for (uint64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const auto o = calc.get(static_cast<index_t>(r));
    const char* row = p.self + o[0];
    for (int64_t i = tid; i < p.padded; i += kTopkThreads) TopkLoadSlot<T>(p, row, keys, idx, i);
    __syncthreads();
    for (int64_t size = 2; size <= p.padded; size <<= 1) {
      for (int64_t stride = size / 2; stride > 0; stride >>= 1) {
        for (int64_t t = tid; t < p.padded / 2; t += kTopkThreads) BitonicPair(keys, idx, size, stride, t);
        __syncthreads();
      }
    }
    for (int64_t j = tid; j < p.k; j += kTopkThreads) TopkStoreSlot<T>(p, row, p.values + o[1], p.indices + o[2], idx, j);
    __syncthreads();  // the next row reuses keys and idx
  }
}

struct CudaTopkEngine {
  template <typename T>
  static int Run(const TopkCall& c, void* stream) {
    const TopkParams p = MakeTopkParams(c);
    if (p.rows == 0 || p.k == 0) return kLaunchOk;
    const unsigned int blocks = static_cast<unsigned int>(c.blocks);
    const size_t shared = c.scratch == nullptr ? static_cast<size_t>(c.padded) * 16 : 0;
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (Fits32BitIndexing(c.geometry)) {
      TopkKernel<T, uint32_t><<<blocks, kTopkThreads, shared, s>>>(p, OffsetCalculator<3, uint32_t>(c.geometry));
    } else {
      TopkKernel<T, uint64_t><<<blocks, kTopkThreads, shared, s>>>(p, OffsetCalculator<3, uint64_t>(c.geometry));
    }
    return static_cast<int>(cudaGetLastError());
  }
};

#endif  // defined(__CUDACC__)

// The kernel's blocks on the host (tests): each row's steps in the GPU's
// order, the pairs of a step one after another (a step's pairs are
// disjoint, so their order does not matter).
struct HostTopkEngine {
  template <typename T>
  static int Run(const TopkCall& c, void* /*stream*/) {
    const TopkParams p = MakeTopkParams(c);
    if (p.rows == 0 || p.k == 0) return kLaunchOk;
    std::vector<uint64_t> keys(static_cast<size_t>(p.padded));
    std::vector<int64_t> idx(static_cast<size_t>(p.padded));
    const OffsetCalculator<3, uint64_t> calc(c.geometry);
    for (uint64_t r = 0; r < p.rows; ++r) {
      const auto o = calc.get(r);
      const char* row = p.self + o[0];
      for (int64_t i = 0; i < p.padded; ++i) TopkLoadSlot<T>(p, row, keys.data(), idx.data(), i);
      for (int64_t size = 2; size <= p.padded; size <<= 1) {
        for (int64_t stride = size / 2; stride > 0; stride >>= 1) {
          for (int64_t t = 0; t < p.padded / 2; ++t) BitonicPair(keys.data(), idx.data(), size, stride, t);
        }
      }
      for (int64_t j = 0; j < p.k; ++j) TopkStoreSlot<T>(p, row, p.values + o[1], p.indices + o[2], idx.data(), j);
    }
    return kLaunchOk;
  }
};

// The kernel for `call.dtype` (the CPU kernel's set: integers and floats),
// run by Engine.
template <class Engine>
int DispatchTopk(const TopkCall& call, void* stream) {
  if (call.geometry.num_operands != 3 || call.self == nullptr || call.values == nullptr || call.indices == nullptr) {
    return kLaunchBadOperands;
  }
  if (call.n < 1 || call.k < 0 || call.k > call.n || call.padded < call.n || (call.padded & (call.padded - 1)) != 0 ||
      call.blocks < 1 || (call.padded > kTopkSharedSlots && call.scratch == nullptr)) {
    return kLaunchBadOperands;
  }
  return DispatchDtype<kSetInts | kSetFloats>(call.dtype, static_cast<int>(kLaunchBadDtype), [&](auto tag) -> int {
    return Engine::template Run<typename decltype(tag)::type>(call, stream);
  });
}

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_TOPK_CUH_
