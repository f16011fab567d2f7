// HostLaunch's reductions (host_launch.h): the CUDA kernels' folds and
// tree, run on the host.
#include "../../../kernels/cuda/reduce.cuh"
#include "host_launch.h"

namespace tensord::testing::cudatest {

int HostLaunch::Reduce(const cuda::ReduceCall& call, void* stream) {
  ++launches;
  return cuda::DispatchReduce<cuda::HostReduceEngine>(call, stream);
}

}  // namespace tensord::testing::cudatest
