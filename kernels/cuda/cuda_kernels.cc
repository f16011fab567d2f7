// RegisterCudaKernels: the elementwise, indexing (advindex_kernels.h too), reduction and matmul kernels
// (elementwise_kernels.h, index_kernels.h, reduce_kernels.h, matmul_kernels.h) with the CUDA device behind them
// (cuda_launch.h).
#include "tensord/kernels/cuda/cuda_kernels.h"

#include "advindex_kernels.h"
#include "cuda_launch.h"
#include "elementwise_kernels.h"
#include "index_kernels.h"
#include "matmul_kernels.h"
#include "reduce_kernels.h"

namespace tensord {

absl::Status RegisterCudaKernels(KernelRegistry& registry) {
  TD_RETURN_IF_ERROR(cuda::ew::RegisterElementwiseKernels<cuda::CudaLaunch>(registry, DeviceType::kCUDA));
  TD_RETURN_IF_ERROR(cuda::ew::RegisterIndexKernels<cuda::CudaLaunch>(registry, DeviceType::kCUDA));
  TD_RETURN_IF_ERROR(cuda::ew::RegisterAdvIndexKernels<cuda::CudaLaunch>(registry, DeviceType::kCUDA));
  TD_RETURN_IF_ERROR(cuda::ew::RegisterReduceKernels<cuda::CudaLaunch>(registry, DeviceType::kCUDA));
  return cuda::mm::RegisterMatmulKernels<cuda::CudaLaunch>(registry, DeviceType::kCUDA);
}

}  // namespace tensord
