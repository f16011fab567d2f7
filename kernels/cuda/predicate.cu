// The CUDA kernels of the Predicate family (logical_not, isnan, isinf, isfinite):
// the functors of elementwise_ops.h instantiated with CudaEngine. A file per
// family so that the build compiles them in parallel.
#include "cuda_launch.h"
#include "elementwise.cuh"
#include "elementwise_ops.h"

namespace tensord::cuda {

int LaunchPredicateCuda(const ElementwiseCall& call, void* stream) { return DispatchPredicate<CudaEngine>(call, stream); }

}  // namespace tensord::cuda
