// kernels/cuda/rounded_math.h — float and double products, sums,
// differences and quotients that round each step and that the compiler may
// not fuse into an FMA: nvcc contracts a * b + c into one rounding by
// default, while the CPU kernels (built for baseline x86-64) round each
// operation, so a kernel that must match the CPU bit for bit (the fused
// Adam step, linspace) uses these. Device code calls the round-to-nearest
// intrinsics, which nvcc never contracts; host code (the host tests) the
// plain operators. Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_ROUNDED_MATH_H_
#define TENSORD_KERNELS_CUDA_ROUNDED_MATH_H_

#include <type_traits>

#include "macros.h"

namespace tensord::cuda {

template <typename F>
TD_HOST_DEVICE TD_INLINE F MulRn(F a, F b) {
  static_assert(std::is_same_v<F, float> || std::is_same_v<F, double>);
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<F, float>) {
    return __fmul_rn(a, b);
  } else {
    return __dmul_rn(a, b);
  }
#else
  return a * b;
#endif
}

template <typename F>
TD_HOST_DEVICE TD_INLINE F AddRn(F a, F b) {
  static_assert(std::is_same_v<F, float> || std::is_same_v<F, double>);
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<F, float>) {
    return __fadd_rn(a, b);
  } else {
    return __dadd_rn(a, b);
  }
#else
  return a + b;
#endif
}

template <typename F>
TD_HOST_DEVICE TD_INLINE F SubRn(F a, F b) {
  static_assert(std::is_same_v<F, float> || std::is_same_v<F, double>);
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<F, float>) {
    return __fsub_rn(a, b);
  } else {
    return __dsub_rn(a, b);
  }
#else
  return a - b;
#endif
}

template <typename F>
TD_HOST_DEVICE TD_INLINE F DivRn(F a, F b) {
  static_assert(std::is_same_v<F, float> || std::is_same_v<F, double>);
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<F, float>) {
    return __fdiv_rn(a, b);
  } else {
    return __ddiv_rn(a, b);
  }
#else
  return a / b;
#endif
}

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_ROUNDED_MATH_H_
