// GPU discovery through the CUDA runtime API (cudart, linked statically).
#include "tensord/backends/cuda/discovery.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"

namespace tensord::backends {

namespace {

std::string CudaErrorText(const char* call, cudaError_t e) {
  return absl::StrCat(call, ": ", cudaGetErrorString(e), " (error ", static_cast<int>(e), ")");
}

}  // namespace

std::string CudaVersionString(int version) {
  return absl::StrCat(version / 1000, ".", (version % 1000) / 10);
}

CudaDiscovery DiscoverCudaDevices() {
  CudaDiscovery d;
  (void)cudaRuntimeGetVersion(&d.runtime_version);
  if (cudaDriverGetVersion(&d.driver_version) != cudaSuccess) d.driver_version = 0;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    // Without a driver the runtime says its version is insufficient (35);
    // with a driver and no GPU, that there is no device (100).
    if (e == cudaErrorInsufficientDriver && d.driver_version == 0) {
      d.why_none = absl::StrCat("no NVIDIA driver is loaded (", CudaErrorText("cudaGetDeviceCount", e), ")");
    } else if (e == cudaErrorInsufficientDriver) {
      d.why_none = absl::StrCat("the NVIDIA driver (CUDA ", CudaVersionString(d.driver_version),
                                ") is older than this build's CUDA runtime (", CudaVersionString(d.runtime_version),
                                ")");
    } else if (e == cudaErrorNoDevice) {
      d.why_none = "the NVIDIA driver sees no GPU";
    } else {
      d.why_none = CudaErrorText("cudaGetDeviceCount", e);
    }
    (void)cudaGetLastError();  // clear the runtime's sticky error state
    return d;
  }
  std::string last_error;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaError_t pe = cudaGetDeviceProperties(&prop, i); pe != cudaSuccess) {
      last_error = absl::StrCat("cuda:", i, ": ", CudaErrorText("cudaGetDeviceProperties", pe));
      (void)cudaGetLastError();
      continue;
    }
    CudaDeviceInfo g;
    g.index = i;
    g.name = prop.name;
    g.total_memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    g.major = prop.major;
    g.minor = prop.minor;
    d.devices.push_back(std::move(g));
  }
  if (d.devices.empty()) d.why_none = count == 0 ? "the NVIDIA driver sees no GPU" : last_error;
  return d;
}

}  // namespace tensord::backends
