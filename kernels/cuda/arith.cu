// The CUDA kernels of the Arith family (add, sub, mul, div, maximum, minimum, bitwise and/or/xor, shifts, atan2, pow):
// the functors of elementwise_ops.h instantiated with CudaEngine. A file per
// family so that the build compiles them in parallel.
#include "cuda_launch.h"
#include "elementwise.cuh"
#include "elementwise_ops.h"

namespace tensord::cuda {

int LaunchArithCuda(const ElementwiseCall& call, void* stream) { return DispatchArith<CudaEngine>(call, stream); }

}  // namespace tensord::cuda
