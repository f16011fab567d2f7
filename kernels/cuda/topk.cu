// The CUDA topk kernel (topk.cuh) for every dtype.
#include "topk.cuh"

namespace tensord::cuda {

int LaunchTopkCuda(const TopkCall& call, void* stream) { return DispatchTopk<CudaTopkEngine>(call, stream); }

}  // namespace tensord::cuda
