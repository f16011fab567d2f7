// HostLaunch's indexing kernels (host_launch.h): the CUDA kernels' per-element
// code (index.cuh), bounds checks and error word included, and topk's
// bitonic network (topk.cuh), run on the host.
#include "../../../kernels/cuda/index.cuh"
#include "../../../kernels/cuda/topk.cuh"
#include "host_launch.h"

namespace tensord::testing::cudatest {

int HostLaunch::Index(const cuda::IndexCall& call, void* stream) {
  ++launches;
  return cuda::DispatchIndex<cuda::HostIndexEngine>(call, stream);
}

int HostLaunch::Topk(const cuda::TopkCall& call, void* stream) {
  ++launches;
  return cuda::DispatchTopk<cuda::HostTopkEngine>(call, stream);
}

}  // namespace tensord::testing::cudatest
