// CudaLaunch (see cuda_launch.h): the CUDA runtime calls of the kernels'
// host side.
#include "cuda_launch.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "tensord/kernels/registry.h"
#include "tensord/meta/errors.h"

namespace tensord::cuda {

int LaunchElementwiseCuda(const ElementwiseCall& call, void* stream) {
  switch (call.family) {
    case EwFamily::kCopy: return LaunchCopyCuda(call, stream);
    case EwFamily::kUnary: return LaunchUnaryCuda(call, stream);
    case EwFamily::kFloatMath: return LaunchFloatMathCuda(call, stream);
    case EwFamily::kPredicate: return LaunchPredicateCuda(call, stream);
    case EwFamily::kArith: return LaunchArithCuda(call, stream);
    case EwFamily::kDivision: return LaunchDivisionCuda(call, stream);
    case EwFamily::kCompare: return LaunchCompareCuda(call, stream);
    case EwFamily::kTernary: return LaunchTernaryCuda(call, stream);
  }
  return kLaunchBadOp;
}

int CudaLaunch::Elementwise(const ElementwiseCall& call, void* stream) { return LaunchElementwiseCuda(call, stream); }

int CudaLaunch::Reduce(const ReduceCall& call, void* stream) { return LaunchReduceCuda(call, stream); }
int CudaLaunch::Scan(const ScanCall& call, void* stream) { return LaunchScanCuda(call, stream); }
int CudaLaunch::Topk(const TopkCall& call, void* stream) { return LaunchTopkCuda(call, stream); }

int CudaLaunch::Index(const IndexCall& call, void* stream) { return LaunchIndexCuda(call, stream); }

int CudaLaunch::Random(const RandomCall& call, void* stream) { return LaunchRandomCuda(call, stream); }

std::string CudaLaunch::ErrorString(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}

absl::StatusOr<std::shared_ptr<char>> CudaLaunch::Allocate(absl::string_view op, int64_t bytes, void* stream) {
  if (bytes < 0) return InternalErr(absl::StrCat("internal: ", op, ": negative scratch size ", bytes));
  if (ScratchAllocator* a = CurrentScratchAllocator(); a != nullptr) return a->Allocate(bytes);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  void* p = nullptr;
  const cudaError_t e = cudaMallocAsync(&p, static_cast<size_t>(bytes == 0 ? 1 : bytes), s);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: clear it so that the next launch's check does not see it
    return OutOfMemoryErr(absl::StrCat(op, ": cannot allocate ", bytes, " bytes of CUDA scratch: ",
                                       cudaGetErrorString(e)));
  }
  return std::shared_ptr<char>(static_cast<char*>(p), [s](char* q) { (void)cudaFreeAsync(q, s); });
}

int CudaLaunch::Memset(char* p, int64_t bytes, void* stream) {
  if (bytes <= 0) return cudaSuccess;
  return static_cast<int>(cudaMemsetAsync(p, 0, static_cast<size_t>(bytes), static_cast<cudaStream_t>(stream)));
}

}  // namespace tensord::cuda
