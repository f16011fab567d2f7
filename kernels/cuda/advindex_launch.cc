// CudaLaunch's parts for the advanced-indexing and mask kernels (see
// cuda_launch.h): their launch, CUB's scan and sort with scratch from
// CudaLaunch::Allocate, and the read-back of a count.
#include <cuda_runtime_api.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "cuda_launch.h"
#include "tensord/meta/errors.h"

namespace tensord::cuda {
namespace {

absl::Status CudaErr(absl::string_view op, const char* what, int code) {
  return InternalErr(absl::StrCat(op, ": ", what, " failed: ",
                                  cudaGetErrorString(static_cast<cudaError_t>(code))));
}

// Runs `call(temp, &bytes)` twice, CUB's way: first for the scratch size,
// then with that much scratch from CudaLaunch::Allocate.
template <typename F>
absl::Status WithCubScratch(absl::string_view op, const char* what, void* stream, F&& call) {
  size_t bytes = 0;
  if (const int e = call(nullptr, &bytes); e != 0) return CudaErr(op, what, e);
  TD_ASSIGN_OR_RETURN(std::shared_ptr<char> temp,
                      CudaLaunch::Allocate(op, static_cast<int64_t>(bytes), stream));
  if (const int e = call(temp.get(), &bytes); e != 0) return CudaErr(op, what, e);
  return absl::OkStatus();
}

}  // namespace

int CudaLaunch::AdvIndex(const AdvIndexCall& call, void* stream) { return LaunchAdvIndexCuda(call, stream); }

absl::Status CudaLaunch::InclusiveSum(absl::string_view op, const int64_t* in, int64_t* out, int64_t n,
                                      void* stream) {
  if (n <= 0) return absl::OkStatus();
  return WithCubScratch(op, "cub::DeviceScan::InclusiveSum", stream, [&](void* temp, size_t* bytes) {
    return InclusiveSumCuda(temp, bytes, in, out, n, stream);
  });
}

absl::Status CudaLaunch::SortPairs(absl::string_view op, const int64_t* keys_in, int64_t* keys_out,
                                   const int64_t* vals_in, int64_t* vals_out, int64_t n, void* stream) {
  if (n <= 0) return absl::OkStatus();
  return WithCubScratch(op, "cub::DeviceRadixSort::SortPairs", stream, [&](void* temp, size_t* bytes) {
    return SortPairsCuda(temp, bytes, keys_in, keys_out, vals_in, vals_out, n, stream);
  });
}

absl::Status CudaLaunch::CopyToHost(absl::string_view op, void* dst, const void* src, int64_t bytes, void* stream) {
  if (bytes <= 0) return absl::OkStatus();
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  if (e != cudaSuccess) return CudaErr(op, "reading a count back from the device", static_cast<int>(e));
  return absl::OkStatus();
}

}  // namespace tensord::cuda
