// HostLaunch's nn kernels (host_launch.h): the CUDA kernels' work items
// (nn.cuh), softmax's per-thread folds and trees included, run on the host.
#include "../../../kernels/cuda/nn.cuh"
#include "host_launch.h"

namespace tensord::testing::cudatest {

int HostLaunch::Nn(const cuda::SoftmaxCall& call, void* stream) {
  ++launches;
  return cuda::DispatchSoftmax<cuda::HostNnEngine>(call, stream);
}
int HostLaunch::Nn(const cuda::AdamCall& call, void* stream) {
  ++launches;
  return cuda::DispatchAdam<cuda::HostNnEngine>(call, stream);
}
int HostLaunch::Nn(const cuda::PoolCall& call, void* stream) {
  ++launches;
  return cuda::DispatchPool<cuda::HostNnEngine>(call, stream);
}
int HostLaunch::Nn(const cuda::ColCall& call, void* stream) {
  ++launches;
  return cuda::DispatchCol<cuda::HostNnEngine>(call, stream);
}

}  // namespace tensord::testing::cudatest
