// The CUDA kernels of the FloatMath family (exp, log, sqrt, rsqrt, sin, cos, tanh, sigmoid, reciprocal, erf, exp2, expm1, log2, log1p, silu, gelu):
// the functors of elementwise_ops.h instantiated with CudaEngine. A file per
// family so that the build compiles them in parallel.
#include "cuda_launch.h"
#include "elementwise.cuh"
#include "elementwise_ops.h"

namespace tensord::cuda {

int LaunchFloatMathCuda(const ElementwiseCall& call, void* stream) { return DispatchFloatMath<CudaEngine>(call, stream); }

}  // namespace tensord::cuda
