// The advanced-indexing and mask kernels (advindex.cuh), and the CUB
// device-wide primitives their host side orders through CudaLaunch
// (cuda_launch.h): an inclusive prefix sum and a stable sort of pairs.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "advindex.cuh"

namespace tensord::cuda {

int LaunchAdvIndexCuda(const AdvIndexCall& call, void* stream) {
  return DispatchAdvIndex<CudaAdvIndexEngine>(call, stream);
}

int InclusiveSumCuda(void* temp, size_t* temp_bytes, const int64_t* in, int64_t* out, int64_t n, void* stream) {
  return static_cast<int>(
      cub::DeviceScan::InclusiveSum(temp, *temp_bytes, in, out, n, static_cast<cudaStream_t>(stream)));
}

int SortPairsCuda(void* temp, size_t* temp_bytes, const int64_t* keys_in, int64_t* keys_out, const int64_t* vals_in,
                  int64_t* vals_out, int64_t n, void* stream) {
  return static_cast<int>(cub::DeviceRadixSort::SortPairs(temp, *temp_bytes, keys_in, keys_out, vals_in, vals_out, n,
                                                          0, static_cast<int>(sizeof(int64_t) * 8),
                                                          static_cast<cudaStream_t>(stream)));
}

}  // namespace tensord::cuda
