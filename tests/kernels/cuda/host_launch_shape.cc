// HostLaunch's shape kernels (host_launch.h): the CUDA kernels' per-element
// code (shape.cuh) run on the host.
#include "../../../kernels/cuda/shape.cuh"
#include "host_launch.h"

namespace tensord::testing::cudatest {

int HostLaunch::Remap(const cuda::RemapCall& call, void* stream) {
  ++launches;
  return cuda::DispatchRemap<cuda::HostShapeEngine>(call, stream);
}

int HostLaunch::Sequence(const cuda::SequenceCall& call, void* stream) {
  ++launches;
  return cuda::DispatchSequence<cuda::HostShapeEngine>(call, stream);
}

}  // namespace tensord::testing::cudatest
