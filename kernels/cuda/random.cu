// The CUDA random kernels (random.cuh) for every op and dtype.
#include "random.cuh"

namespace tensord::cuda {

int LaunchRandomCuda(const RandomCall& call, void* stream) { return DispatchRandom<CudaRandomEngine>(call, stream); }

}  // namespace tensord::cuda
