// The CUDA reduction kernels (reduce.cuh) for every fold and dtype.
#include "reduce.cuh"

namespace tensord::cuda {

int LaunchReduceCuda(const ReduceCall& call, void* stream) { return DispatchReduce<CudaReduceEngine>(call, stream); }

}  // namespace tensord::cuda
