// HostLaunch's indexing kernels (host_launch.h): the CUDA kernels' per-element
// code (index.cuh), bounds checks and error word included, run on the host.
#include "../../../kernels/cuda/index.cuh"
#include "host_launch.h"

namespace tensord::testing::cudatest {

int HostLaunch::Index(const cuda::IndexCall& call, void* stream) {
  ++launches;
  return cuda::DispatchIndex<cuda::HostIndexEngine>(call, stream);
}

}  // namespace tensord::testing::cudatest
