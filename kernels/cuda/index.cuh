// kernels/cuda/index.cuh — the indexing kernels of an IndexCall
// (index_call.h): one thread per output element, a grid-stride loop, 64-bit
// offsets. Every index is checked before the element it names is touched;
// a bad one is recorded in the stream's error word (RecordIndexError) and
// its thread writes nothing, so no access ever leaves a tensor. The host
// side (index_kernels.h) returns OK and the error surfaces at the stream's
// next sync point as the CPU kernel's (DeviceErrorToStatus). HostIndexEngine
// runs the same per-element code on the host (the host tests).
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_INDEX_CUH_
#define TENSORD_KERNELS_CUDA_INDEX_CUH_

#include <cstdint>
#include <type_traits>

#include "cuda_dtypes.h"
#include "elementwise_call.h"
#include "index_call.h"
#include "macros.h"
#include "offset_calculator.h"
#include "tensord/kernels/device_error.h"

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

namespace tensord::cuda {

// Claims `w` for the first bad index (compare-and-swap on `code`, see
// device_error.h); later ones leave it alone. The fields after `code` are
// read only at the stream's sync point, after every thread has finished.
TD_HOST_DEVICE TD_INLINE void RecordIndexError(DeviceErrorWord* w, uint32_t op_id, int64_t value, int64_t dim,
                                               int64_t size) {
#if defined(__CUDA_ARCH__)
  if (atomicCAS(reinterpret_cast<int*>(&w->code), 0, static_cast<int>(kIndexOutOfBounds)) != 0) return;
#else
  if (w->code != kNoDeviceError) return;
  w->code = kIndexOutOfBounds;
#endif
  w->op_id = op_id;
  w->value = value;
  w->dim = dim;
  w->size = size;
}

TD_HOST_DEVICE TD_INLINE int64_t LoadIndexValue(const char* p, bool is_int32) {
  return is_int32 ? static_cast<int64_t>(*reinterpret_cast<const int32_t*>(p)) : *reinterpret_cast<const int64_t*>(p);
}

// What a kernel receives (by value) besides its offset calculator.
struct IndexParams {
  char* out;
  const char* index;
  const char* src;
  uint64_t value;
  uint64_t alpha;
  bool index_int32;
  int64_t numel;  // threads' work items
  int64_t dim, dim_size, dim_stride;
  int64_t scan_count, scan_index_stride, scan_src_stride;
  int64_t positions;  // the scatters: work items per row (dim_size, at least 1)
  DeviceErrorWord* error_word;
  uint32_t op_id;
};

inline IndexParams MakeIndexParams(const IndexCall& c) {
  IndexParams p{c.out, c.index, c.src, c.value, c.alpha, c.index_dtype == ScalarType::kInt32, 0, c.dim, c.dim_size,
                c.dim_stride, c.scan_count, c.scan_index_stride, c.scan_src_stride, 0, c.error_word, c.op_id};
  const int64_t rows = c.geometry.numel();
  if (c.op == IndexOp::kGather) {
    p.numel = rows;
  } else {
    // One extra position when dim_size is 0: its thread checks the row's
    // indices (every one is bad) and writes nothing.
    p.positions = c.dim_size > 0 ? c.dim_size : 1;
    p.numel = rows * p.positions;
  }
  return p;
}

// out[i] = src[i + index[i] * dim_stride], bytes of the element's size U.
template <typename U>
struct GatherBody {
  static TD_HOST_DEVICE TD_INLINE void Run(const IndexParams& p, const OffsetCalculator<3, uint64_t>& calc,
                                           int64_t i) {
    const auto o = calc.get(static_cast<uint64_t>(i));
    const int64_t v = LoadIndexValue(p.index + o[1], p.index_int32);
    if (v < 0 || v >= p.dim_size) {
      RecordIndexError(p.error_word, p.op_id, v, p.dim, p.dim_size);
      return;
    }
    *reinterpret_cast<U*>(p.out + o[0]) = *reinterpret_cast<const U*>(p.src + o[2] + v * p.dim_stride);
  }
};

// The thread of position j in a row: scans the row's indices in order.
// Position 0 also checks them (one check per index, in the CPU's order
// within the row). kAdd: out += alpha * src for each match, rounded to T at
// each step as the CPU's loop does; else the last match's src (or value) is
// stored (T: an unsigned integer of the element's size).
template <typename T, bool kAdd>
struct ScatterBody {
  static TD_HOST_DEVICE TD_INLINE void Run(const IndexParams& p, const OffsetCalculator<3, uint64_t>& calc,
                                           int64_t t) {
    const int64_t row = t / p.positions, j = t % p.positions;
    const auto o = calc.get(static_cast<uint64_t>(row));
    const char* idx = p.index + o[1];
    const char* src = p.src == nullptr ? nullptr : p.src + o[2];
    bool bad = false;
    if (j == 0) {
      for (int64_t k = 0; k < p.scan_count; ++k) {
        const int64_t v = LoadIndexValue(idx + k * p.scan_index_stride, p.index_int32);
        if (v < 0 || v >= p.dim_size) {
          RecordIndexError(p.error_word, p.op_id, v, p.dim, p.dim_size);
          bad = true;
          break;
        }
      }
    }
    // A row with a bad index is left alone by its checker; the other
    // positions of the row still write (the CPU stops at the bad index:
    // either way the op fails and its output is not used).
    if (bad || j >= p.dim_size) return;
    char* dst = p.out + o[0] + j * p.dim_stride;
    if constexpr (kAdd) {
      using C = ComputeT<T>;
      static_assert(sizeof(C) <= sizeof(uint64_t), "alpha's bytes fit");
      C alpha;
      unsigned char* a = reinterpret_cast<unsigned char*>(&alpha);
      for (int b = 0; b < static_cast<int>(sizeof(C)); ++b) a[b] = static_cast<unsigned char>(p.alpha >> (8 * b));
      for (int64_t k = 0; k < p.scan_count; ++k) {
        if (LoadIndexValue(idx + k * p.scan_index_stride, p.index_int32) != j) continue;
        const C s = Load<T>(src + k * p.scan_src_stride);
        if constexpr (std::is_same_v<C, bool>) {
          Store<T>(dst, Load<T>(dst) || (alpha && s));
        } else {
          Store<T>(dst, WrapAdd<C>(Load<T>(dst), WrapMul<C>(alpha, s)));
        }
      }
    } else {
      int64_t last = -1;
      for (int64_t k = 0; k < p.scan_count; ++k) {
        if (LoadIndexValue(idx + k * p.scan_index_stride, p.index_int32) == j) last = k;
      }
      if (last < 0) return;
      // `value` holds the element's bytes, little end first (the host's order and the GPU's).
      *reinterpret_cast<T*>(dst) = src != nullptr ? *reinterpret_cast<const T*>(src + last * p.scan_src_stride)
                                                  : static_cast<T>(p.value);
    }
  }
};

#if defined(__CUDACC__)

inline constexpr int kIndexThreads = 256;

template <class Body>
__global__ void __launch_bounds__(kIndexThreads) IndexKernel(IndexParams p, OffsetCalculator<3, uint64_t> calc) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * kIndexThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kIndexThreads + threadIdx.x; i < p.numel; i += step) {
    Body::Run(p, calc, i);
  }
}

struct CudaIndexEngine {
  template <class Body>
  static int Run(const IndexCall& c, void* stream) {
    const IndexParams p = MakeIndexParams(c);
    if (p.numel == 0) return kLaunchOk;
    const int64_t want = (p.numel + kIndexThreads - 1) / kIndexThreads;
    const unsigned int blocks = static_cast<unsigned int>(want < (int64_t{1} << 16) ? want : (int64_t{1} << 16));
    IndexKernel<Body><<<blocks, kIndexThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        p, OffsetCalculator<3, uint64_t>(c.geometry));
    return static_cast<int>(cudaGetLastError());
  }
};

#endif  // defined(__CUDACC__)

// The kernel's work items one after another on the host (tests).
struct HostIndexEngine {
  template <class Body>
  static int Run(const IndexCall& c, void* /*stream*/) {
    const IndexParams p = MakeIndexParams(c);
    const OffsetCalculator<3, uint64_t> calc(c.geometry);
    for (int64_t i = 0; i < p.numel; ++i) Body::Run(p, calc, i);
    return kLaunchOk;
  }
};

// The body of `call.op` for `call.dtype`, run by Engine.
template <class Engine>
int DispatchIndex(const IndexCall& call, void* stream) {
  if (call.geometry.num_operands != 3 || call.error_word == nullptr || call.out == nullptr) return kLaunchBadOperands;
  if (call.index_dtype != ScalarType::kInt64 && call.index_dtype != ScalarType::kInt32) return kLaunchBadOperands;
  // gather and scatter move bytes: one instance per element size.
  if (call.op == IndexOp::kGather || call.op == IndexOp::kScatter) {
    const bool gather = call.op == IndexOp::kGather;
    switch (ItemSize(call.dtype)) {
      case 1: return gather ? Engine::template Run<GatherBody<uint8_t>>(call, stream)
                            : Engine::template Run<ScatterBody<uint8_t, false>>(call, stream);
      case 2: return gather ? Engine::template Run<GatherBody<uint16_t>>(call, stream)
                            : Engine::template Run<ScatterBody<uint16_t, false>>(call, stream);
      case 4: return gather ? Engine::template Run<GatherBody<uint32_t>>(call, stream)
                            : Engine::template Run<ScatterBody<uint32_t, false>>(call, stream);
      case 8: return gather ? Engine::template Run<GatherBody<uint64_t>>(call, stream)
                            : Engine::template Run<ScatterBody<uint64_t, false>>(call, stream);
      default: return kLaunchBadDtype;
    }
  }
  if (call.op != IndexOp::kScatterAdd) return kLaunchBadOp;
  if (call.src == nullptr) return kLaunchBadOperands;
  return DispatchDtype<kSetAllButF8>(call.dtype, static_cast<int>(kLaunchBadDtype), [&](auto tag) -> int {
    using T = typename decltype(tag)::type;
    return Engine::template Run<ScatterBody<T, true>>(call, stream);
  });
}

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_INDEX_CUH_
