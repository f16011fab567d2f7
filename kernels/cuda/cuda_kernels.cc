// RegisterCudaKernels: the elementwise and reduction kernels
// (elementwise_kernels.h, reduce_kernels.h) with the CUDA device behind them
// (cuda_launch.h).
#include "tensord/kernels/cuda/cuda_kernels.h"

#include "cuda_launch.h"
#include "elementwise_kernels.h"
#include "reduce_kernels.h"

namespace tensord {

absl::Status RegisterCudaKernels(KernelRegistry& registry) {
  TD_RETURN_IF_ERROR(cuda::ew::RegisterElementwiseKernels<cuda::CudaLaunch>(registry, DeviceType::kCUDA));
  return cuda::ew::RegisterReduceKernels<cuda::CudaLaunch>(registry, DeviceType::kCUDA);
}

}  // namespace tensord
