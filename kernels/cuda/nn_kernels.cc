// CudaLaunch::Nn (cuda_launch.h): the nn kernels' launches (nn.cu).
#include "cuda_launch.h"
#include "nn_call.h"

namespace tensord::cuda {

int CudaLaunch::Nn(const SoftmaxCall& call, void* stream) { return LaunchSoftmaxCuda(call, stream); }
int CudaLaunch::Nn(const AdamCall& call, void* stream) { return LaunchAdamCuda(call, stream); }
int CudaLaunch::Nn(const PoolCall& call, void* stream) { return LaunchPoolCuda(call, stream); }
int CudaLaunch::Nn(const ColCall& call, void* stream) { return LaunchColCuda(call, stream); }

}  // namespace tensord::cuda
