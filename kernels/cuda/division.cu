// The CUDA kernels of the Division family (remainder, fmod, div with rounding_mode):
// the functors of elementwise_ops.h instantiated with CudaEngine. A file per
// family so that the build compiles them in parallel.
#include "cuda_launch.h"
#include "elementwise.cuh"
#include "elementwise_ops.h"

namespace tensord::cuda {

int LaunchDivisionCuda(const ElementwiseCall& call, void* stream) { return DispatchDivision<CudaEngine>(call, stream); }

}  // namespace tensord::cuda
