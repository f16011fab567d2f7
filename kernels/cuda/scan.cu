// The CUDA scan kernels (cumsum, cumprod: reduce.cuh) for every dtype.
#include "reduce.cuh"

namespace tensord::cuda {

int LaunchScanCuda(const ScanCall& call, void* stream) { return DispatchScan<CudaScanEngine>(call, stream); }

}  // namespace tensord::cuda
