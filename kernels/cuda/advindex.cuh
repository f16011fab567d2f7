// kernels/cuda/advindex.cuh — the kernels of an AdvIndexCall
// (advindex_call.h): one thread per element of the call's geometry, a
// grid-stride loop, 64-bit offsets. An index is checked before the element
// it names is touched; a bad one is recorded in the stream's error word and
// its element is left alone, so no access ever leaves a tensor.
// HostAdvIndexEngine runs the same per-element code on the host (tests).
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_ADVINDEX_CUH_
#define TENSORD_KERNELS_CUDA_ADVINDEX_CUH_

#include <cstdint>
#include <type_traits>

#include "advindex_call.h"
#include "cuda_dtypes.h"
#include "elementwise_call.h"
#include "index.cuh"
#include "macros.h"
#include "offset_calculator.h"
#include "tensord/kernels/device_error.h"

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

namespace tensord::cuda {

using AdvCalc = OffsetCalculator<3, uint64_t>;

// Claims `w` for masked_scatter's short source (see RecordIndexError).
TD_HOST_DEVICE TD_INLINE void RecordSourceTooShort(DeviceErrorWord* w, uint32_t op_id, int64_t ones, int64_t size) {
#if defined(__CUDA_ARCH__)
  if (atomicCAS(reinterpret_cast<int*>(&w->code), 0, static_cast<int>(kSourceTooShort)) != 0) return;
#else
  if (w->code != kNoDeviceError) return;
  w->code = kSourceTooShort;
#endif
  w->op_id = op_id;
  w->value = ones;
  w->dim = -1;
  w->size = size;
}

TD_HOST_DEVICE TD_INLINE int64_t& At64(char* base, uint64_t off) { return *reinterpret_cast<int64_t*>(base + off); }
TD_HOST_DEVICE TD_INLINE int64_t At64(const char* base, uint64_t off) {
  return *reinterpret_cast<const int64_t*>(base + off);
}

struct IndexOffsetsBody {
  static TD_HOST_DEVICE TD_INLINE void Run(const AdvIndexCall& c, const AdvCalc& calc, int64_t i) {
    const auto o = calc.get(static_cast<uint64_t>(i));
    int64_t& offs = At64(c.out, o[0]);
    if (!c.first && offs < 0) return;  // an earlier index of this element was bad
    int64_t v = LoadIndexValue(c.in + o[1], c.index_dtype == ScalarType::kInt32);
    if (v < -c.dim_size || v >= c.dim_size) {
      RecordIndexError(c.error_word, c.op_id, v, c.dim, c.dim_size);
      offs = -1;
      return;
    }
    if (v < 0) v += c.dim_size;
    offs = (c.first ? 0 : offs) + v * c.dim_stride;
  }
};

struct OffsetOfBody {
  static TD_HOST_DEVICE TD_INLINE void Run(const AdvIndexCall& c, const AdvCalc& calc, int64_t i) {
    const auto o = calc.get(static_cast<uint64_t>(i));
    At64(c.out, o[0]) = static_cast<int64_t>(o[1]);
  }
};

// U: an unsigned integer of the element's size (the gathers move bytes).
template <typename U>
struct GatherOffsetsBody {
  static TD_HOST_DEVICE TD_INLINE void Run(const AdvIndexCall& c, const AdvCalc& calc, int64_t i) {
    const auto o = calc.get(static_cast<uint64_t>(i));
    const int64_t off = At64(c.in, o[1]);
    if (off < 0) return;
    *reinterpret_cast<U*>(c.out + o[0]) = *reinterpret_cast<const U*>(c.src + o[2] + off);
  }
};

// T: the element's type with kAdd (added in its compute type and rounded to
// T at each step, as the CPU's loop), else an unsigned integer of its size.
template <typename T, bool kAdd>
struct PutSortedBody {
  static TD_HOST_DEVICE TD_INLINE void Run(const AdvIndexCall& c, const AdvCalc& calc, int64_t i) {
    const auto o = calc.get(static_cast<uint64_t>(i));
    const int64_t j = static_cast<int64_t>(o[1] / 8);
    const int64_t* keys = reinterpret_cast<const int64_t*>(c.keys);
    const int64_t* vals = reinterpret_cast<const int64_t*>(c.vals);
    const int64_t key = keys[j];
    if (key < 0) return;
    char* dst = c.out + o[0] + key;
    const char* src = c.src + o[2];
    if constexpr (kAdd) {
      if (j > 0 && keys[j - 1] == key) return;  // not the run's first
      using C = ComputeT<T>;
      for (int64_t k = j; k < c.count && keys[k] == key; ++k) {
        const C s = Load<T>(src + vals[k]);
        if constexpr (std::is_same_v<C, bool>) {
          Store<T>(dst, Load<T>(dst) || s);
        } else {
          Store<T>(dst, WrapAdd<C>(Load<T>(dst), WrapMul<C>(C(1), s)));
        }
      }
    } else {
      if (j + 1 < c.count && keys[j + 1] == key) return;  // not the run's last
      *reinterpret_cast<T*>(dst) = *reinterpret_cast<const T*>(src + vals[j]);
    }
  }
};

// T: the element's type (nonzero compares values: -0.0 is zero, NaN is
// not); uint8_t for masks, whose bytes are compared, as the CPU does.
template <typename T>
struct MaskFlagsBody {
  static TD_HOST_DEVICE TD_INLINE void Run(const AdvIndexCall& c, const AdvCalc& calc, int64_t i) {
    const auto o = calc.get(static_cast<uint64_t>(i));
    At64(c.out, o[0]) = Load<T>(c.in + o[1]) != ComputeT<T>(0) ? 1 : 0;
  }
};

struct NonzeroFillBody {
  static TD_HOST_DEVICE TD_INLINE void Run(const AdvIndexCall& c, const AdvCalc& calc, int64_t i) {
    const auto o = calc.get(static_cast<uint64_t>(i));
    if (At64(c.in, o[0]) == 0) return;
    const int64_t row = At64(c.vals, o[0]) - 1;
    int64_t* dst = reinterpret_cast<int64_t*>(c.out) + row * c.out_stride0;
    int64_t p = static_cast<int64_t>(o[0] / 8);
    for (int d = c.ndim - 1; d >= 0; --d) {
      dst[d * c.out_stride1] = p % c.sizes[d];
      p /= c.sizes[d];
    }
  }
};

template <typename U>
struct MaskedSelectFillBody {
  static TD_HOST_DEVICE TD_INLINE void Run(const AdvIndexCall& c, const AdvCalc& calc, int64_t i) {
    const auto o = calc.get(static_cast<uint64_t>(i));
    if (At64(c.in, o[0]) == 0) return;
    const int64_t row = At64(c.vals, o[0]) - 1;
    *reinterpret_cast<U*>(c.out + row * c.out_stride0) = *reinterpret_cast<const U*>(c.src + o[1]);
  }
};

template <typename U>
struct MaskedScatterFillBody {
  static TD_HOST_DEVICE TD_INLINE void Run(const AdvIndexCall& c, const AdvCalc& calc, int64_t i) {
    const auto o = calc.get(static_cast<uint64_t>(i));
    if (static_cast<int64_t>(o[0] / 8) == c.count - 1) {
      const int64_t ones = At64(c.vals, o[0]);
      if (ones > c.src_numel) RecordSourceTooShort(c.error_word, c.op_id, ones, c.src_numel);
    }
    if (At64(c.in, o[0]) == 0) return;
    const int64_t r = At64(c.vals, o[0]) - 1;
    if (r >= c.src_numel) return;
    *reinterpret_cast<U*>(c.out + o[1]) = *reinterpret_cast<const U*>(c.src + r * static_cast<int64_t>(sizeof(U)));
  }
};

#if defined(__CUDACC__)

inline constexpr int kAdvIndexThreads = 256;

template <class Body>
__global__ void __launch_bounds__(kAdvIndexThreads) AdvIndexKernel(AdvIndexCall c, AdvCalc calc, int64_t numel) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * kAdvIndexThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kAdvIndexThreads + threadIdx.x; i < numel; i += step) {
    Body::Run(c, calc, i);
  }
}

struct CudaAdvIndexEngine {
  template <class Body>
  static int Run(const AdvIndexCall& c, void* stream) {
    const int64_t numel = c.geometry.numel();
    if (numel == 0) return kLaunchOk;
    const int64_t want = (numel + kAdvIndexThreads - 1) / kAdvIndexThreads;
    const unsigned int blocks = static_cast<unsigned int>(want < (int64_t{1} << 16) ? want : (int64_t{1} << 16));
    AdvIndexKernel<Body><<<blocks, kAdvIndexThreads, 0, static_cast<cudaStream_t>(stream)>>>(c, AdvCalc(c.geometry),
                                                                                             numel);
    return static_cast<int>(cudaGetLastError());
  }
};

#endif  // defined(__CUDACC__)

// The kernel's work items one after another on the host (tests).
struct HostAdvIndexEngine {
  template <class Body>
  static int Run(const AdvIndexCall& c, void* /*stream*/) {
    const int64_t numel = c.geometry.numel();
    const AdvCalc calc(c.geometry);
    for (int64_t i = 0; i < numel; ++i) Body::Run(c, calc, i);
    return kLaunchOk;
  }
};

// The body of `call.op`, run by Engine.
template <class Engine>
int DispatchAdvIndex(const AdvIndexCall& call, void* stream) {
  if (call.geometry.num_operands != 3 || call.out == nullptr) return kLaunchBadOperands;
  auto by_size = [&](auto body_of) -> int {
    switch (call.itemsize) {
      case 1: return body_of(uint8_t{});
      case 2: return body_of(uint16_t{});
      case 4: return body_of(uint32_t{});
      case 8: return body_of(uint64_t{});
      default: return kLaunchBadDtype;
    }
  };
  switch (call.op) {
    case AdvOp::kIndexOffsets:
      if (call.error_word == nullptr) return kLaunchBadOperands;
      if (call.index_dtype != ScalarType::kInt64 && call.index_dtype != ScalarType::kInt32) return kLaunchBadOperands;
      return Engine::template Run<IndexOffsetsBody>(call, stream);
    case AdvOp::kOffsetOf: return Engine::template Run<OffsetOfBody>(call, stream);
    case AdvOp::kGatherOffsets:
      return by_size([&](auto u) { return Engine::template Run<GatherOffsetsBody<decltype(u)>>(call, stream); });
    case AdvOp::kPutSorted:
      if (call.keys == nullptr || call.vals == nullptr) return kLaunchBadOperands;
      if (!call.accumulate) {
        return by_size([&](auto u) { return Engine::template Run<PutSortedBody<decltype(u), false>>(call, stream); });
      }
      return DispatchDtype<kSetAllButF8>(call.dtype, static_cast<int>(kLaunchBadDtype), [&](auto tag) -> int {
        using T = typename decltype(tag)::type;
        return Engine::template Run<PutSortedBody<T, true>>(call, stream);
      });
    case AdvOp::kMaskFlags:
      return DispatchDtype<kSetAll>(call.dtype, static_cast<int>(kLaunchBadDtype), [&](auto tag) -> int {
        using T = typename decltype(tag)::type;
        return Engine::template Run<MaskFlagsBody<T>>(call, stream);
      });
    case AdvOp::kNonzeroFill:
      if (call.vals == nullptr || call.ndim < 0 || call.ndim > kMaxDims) return kLaunchBadOperands;
      return Engine::template Run<NonzeroFillBody>(call, stream);
    case AdvOp::kMaskedSelectFill:
      if (call.vals == nullptr) return kLaunchBadOperands;
      return by_size([&](auto u) { return Engine::template Run<MaskedSelectFillBody<decltype(u)>>(call, stream); });
    case AdvOp::kMaskedScatterFill:
      if (call.vals == nullptr || call.error_word == nullptr) return kLaunchBadOperands;
      return by_size([&](auto u) { return Engine::template Run<MaskedScatterFillBody<decltype(u)>>(call, stream); });
  }
  return kLaunchBadOp;
}

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_ADVINDEX_CUH_
