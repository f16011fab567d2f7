// The CUDA kernels of the Copy family (copies, casts and fills (CopyFn, every dtype pair)):
// the functors of elementwise_ops.h instantiated with CudaEngine. A file per
// family so that the build compiles them in parallel.
#include "cuda_launch.h"
#include "elementwise.cuh"
#include "elementwise_ops.h"

namespace tensord::cuda {

int LaunchCopyCuda(const ElementwiseCall& call, void* stream) { return DispatchCopy<CudaEngine>(call, stream); }

}  // namespace tensord::cuda
