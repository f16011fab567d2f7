// The CUDA nn kernels (nn.cuh) for every op and dtype.
#include "nn.cuh"

namespace tensord::cuda {

int LaunchSoftmaxCuda(const SoftmaxCall& call, void* stream) { return DispatchSoftmax<CudaNnEngine>(call, stream); }
int LaunchAdamCuda(const AdamCall& call, void* stream) { return DispatchAdam<CudaNnEngine>(call, stream); }
int LaunchPoolCuda(const PoolCall& call, void* stream) { return DispatchPool<CudaNnEngine>(call, stream); }
int LaunchColCuda(const ColCall& call, void* stream) { return DispatchCol<CudaNnEngine>(call, stream); }

}  // namespace tensord::cuda
