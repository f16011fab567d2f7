// The CUDA indexing kernels (index.cuh) for every op and dtype.
#include "index.cuh"

namespace tensord::cuda {

int LaunchIndexCuda(const IndexCall& call, void* stream) { return DispatchIndex<CudaIndexEngine>(call, stream); }

}  // namespace tensord::cuda
