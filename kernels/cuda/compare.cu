// The CUDA kernels of the Compare family (eq, ne, lt, le, gt, ge, logical_and/or/xor):
// the functors of elementwise_ops.h instantiated with CudaEngine. A file per
// family so that the build compiles them in parallel.
#include "cuda_launch.h"
#include "elementwise.cuh"
#include "elementwise_ops.h"

namespace tensord::cuda {

int LaunchCompareCuda(const ElementwiseCall& call, void* stream) { return DispatchCompare<CudaEngine>(call, stream); }

}  // namespace tensord::cuda
