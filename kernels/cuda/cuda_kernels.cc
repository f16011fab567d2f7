// RegisterCudaKernels: the elementwise, indexing, reduction, shape, random,
// matmul, nn and convolution kernels (elementwise_kernels.h, index_kernels.h,
// advindex_kernels.h, topk_kernels.h, reduce_kernels.h, shape_kernels.h, random_kernels.h,
// matmul_kernels.h, nn_kernels.h, conv_kernels.h) with the CUDA device
// behind them (cuda_launch.h).
#include "tensord/kernels/cuda/cuda_kernels.h"

#include "advindex_kernels.h"
#include "conv_kernels.h"
#include "cuda_launch.h"
#include "elementwise_kernels.h"
#include "index_kernels.h"
#include "matmul_kernels.h"
#include "nn_kernels.h"
#include "random_kernels.h"
#include "reduce_kernels.h"
#include "shape_kernels.h"
#include "topk_kernels.h"

namespace tensord {

absl::Status RegisterCudaKernels(KernelRegistry& registry) {
  TD_RETURN_IF_ERROR(cuda::ew::RegisterElementwiseKernels<cuda::CudaLaunch>(registry, DeviceType::kCUDA));
  TD_RETURN_IF_ERROR(cuda::ew::RegisterIndexKernels<cuda::CudaLaunch>(registry, DeviceType::kCUDA));
  TD_RETURN_IF_ERROR(cuda::ew::RegisterTopkKernels<cuda::CudaLaunch>(registry, DeviceType::kCUDA));
  TD_RETURN_IF_ERROR(cuda::ew::RegisterAdvIndexKernels<cuda::CudaLaunch>(registry, DeviceType::kCUDA));
  TD_RETURN_IF_ERROR(cuda::ew::RegisterReduceKernels<cuda::CudaLaunch>(registry, DeviceType::kCUDA));
  TD_RETURN_IF_ERROR(cuda::ew::RegisterShapeKernels<cuda::CudaLaunch>(registry, DeviceType::kCUDA));
  TD_RETURN_IF_ERROR(cuda::ew::RegisterRandomKernels<cuda::CudaLaunch>(registry, DeviceType::kCUDA));
  TD_RETURN_IF_ERROR(cuda::nn::RegisterNnKernels<cuda::CudaLaunch>(registry, DeviceType::kCUDA));
  TD_RETURN_IF_ERROR(cuda::nn::RegisterConvKernels<cuda::CudaLaunch>(registry, DeviceType::kCUDA));
  return cuda::mm::RegisterMatmulKernels<cuda::CudaLaunch>(registry, DeviceType::kCUDA);
}

}  // namespace tensord
