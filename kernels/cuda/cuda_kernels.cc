// RegisterCudaKernels: the elementwise kernels (elementwise_kernels.h) with
// the CUDA device behind them (cuda_launch.h).
#include "tensord/kernels/cuda/cuda_kernels.h"

#include "cuda_launch.h"
#include "elementwise_kernels.h"

namespace tensord {

absl::Status RegisterCudaKernels(KernelRegistry& registry) {
  return cuda::ew::RegisterElementwiseKernels<cuda::CudaLaunch>(registry, DeviceType::kCUDA);
}

}  // namespace tensord
