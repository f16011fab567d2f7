// The CUDA kernels of the Unary family (neg, abs, sign, floor, ceil, round, trunc, relu, bitwise_not, square):
// the functors of elementwise_ops.h instantiated with CudaEngine. A file per
// family so that the build compiles them in parallel.
#include "cuda_launch.h"
#include "elementwise.cuh"
#include "elementwise_ops.h"

namespace tensord::cuda {

int LaunchUnaryCuda(const ElementwiseCall& call, void* stream) { return DispatchUnary<CudaEngine>(call, stream); }

}  // namespace tensord::cuda
