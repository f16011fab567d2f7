// HostLaunch's reductions and scans (host_launch.h): the CUDA kernels'
// folds and tree, and their line scans, run on the host.
#include "../../../kernels/cuda/reduce.cuh"
#include "host_launch.h"

namespace tensord::testing::cudatest {

int HostLaunch::Reduce(const cuda::ReduceCall& call, void* stream) {
  ++launches;
  return cuda::DispatchReduce<cuda::HostReduceEngine>(call, stream);
}

int HostLaunch::Scan(const cuda::ScanCall& call, void* stream) {
  ++launches;
  return cuda::DispatchScan<cuda::HostScanEngine>(call, stream);
}

}  // namespace tensord::testing::cudatest
