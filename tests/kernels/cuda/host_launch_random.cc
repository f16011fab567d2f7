// HostLaunch's random kernels (host_launch.h): the CUDA kernels' per-element
// code (random.cuh), Philox included, run on the host in the GPU's
// grid-stride order (or another launch shape a test picks).
#include "../../../kernels/cuda/random.cuh"
#include "host_launch.h"

namespace tensord::testing::cudatest {

int HostLaunch::Random(const cuda::RandomCall& call, void* stream) {
  ++launches;
  return cuda::DispatchRandom<cuda::HostRandomEngine>(call, stream);
}

}  // namespace tensord::testing::cudatest
