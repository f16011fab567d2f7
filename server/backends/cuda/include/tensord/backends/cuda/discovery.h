// tensord/backends/cuda/discovery.h — which NVIDIA GPUs this machine has, as
// the CUDA runtime sees them, and why there are none when there are none (no
// driver, no GPU, a driver older than the runtime). Never fails and never
// aborts: a machine without CUDA is an answer, not an error.
//
//   CudaDiscovery d = DiscoverCudaDevices();
//   if (d.devices.empty()) Log(kInfo, "no CUDA device: ", d.why_none);
//   for (const CudaDeviceInfo& g : d.devices) ... g.name, g.total_memory_bytes ...
#ifndef TENSORD_BACKENDS_CUDA_DISCOVERY_H_
#define TENSORD_BACKENDS_CUDA_DISCOVERY_H_

#include <cstdint>
#include <string>
#include <vector>

namespace tensord::backends {

// One GPU, as cudaGetDeviceProperties reports it.
struct CudaDeviceInfo {
  int index = 0;                  // cuda:<index>
  std::string name;               // "NVIDIA H100 80GB HBM3"
  // Free memory is not asked here: cudaMemGetInfo would create a context
  // (hundreds of MiB) on every GPU just to start the daemon.
  int64_t total_memory_bytes = 0;
  int major = 0;                  // compute capability major.minor
  int minor = 0;
};

struct CudaDiscovery {
  std::vector<CudaDeviceInfo> devices;
  // CUDA versions as the runtime API encodes them (13000 = 13.0); the driver's
  // is 0 when there is no driver.
  int driver_version = 0;
  int runtime_version = 0;
  // Why `devices` is empty, as a phrase for the daemon's log and for errors
  // ("no NVIDIA driver is loaded (cudaGetDeviceCount: CUDA driver version is
  // insufficient for CUDA runtime version)"); empty when there are devices.
  std::string why_none;
};

// Asks the CUDA runtime once, on the calling thread. A device whose
// properties cannot be read is left out, with the reason in why_none when
// none is left.
CudaDiscovery DiscoverCudaDevices();

// "13.0" for 13000.
std::string CudaVersionString(int version);

}  // namespace tensord::backends

#endif  // TENSORD_BACKENDS_CUDA_DISCOVERY_H_
