// The CUDA kernels of the Ternary family (where, clamp, masked_fill, addcmul, addcdiv, lerp):
// the functors of elementwise_ops.h instantiated with CudaEngine. A file per
// family so that the build compiles them in parallel.
#include "cuda_launch.h"
#include "elementwise.cuh"
#include "elementwise_ops.h"

namespace tensord::cuda {

int LaunchTernaryCuda(const ElementwiseCall& call, void* stream) { return DispatchTernary<CudaEngine>(call, stream); }

}  // namespace tensord::cuda
