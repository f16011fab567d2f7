// kernels/cuda/macros.h — annotations for code that both nvcc (device and
// host) and the host compiler read: the offset calculator, the dtype
// conversions and the elementwise functors are compiled for the GPU in the
// .cu files and for the host in the tests, which run them without a GPU.
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_MACROS_H_
#define TENSORD_KERNELS_CUDA_MACROS_H_

#if defined(__CUDACC__)
#define TD_HOST_DEVICE __host__ __device__
#define TD_INLINE __forceinline__
#else
#define TD_HOST_DEVICE
#define TD_INLINE inline
#endif

#endif  // TENSORD_KERNELS_CUDA_MACROS_H_
