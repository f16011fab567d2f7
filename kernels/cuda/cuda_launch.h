// kernels/cuda/cuda_launch.h — what the CUDA kernels' host side
// (elementwise_kernels.h, reduce_kernels.h) asks of the device: launch an
// elementwise call or a reduction, name a CUDA error, allocate scratch and
// zero bytes, all on the call's stream. The host side takes this as a
// template parameter (CudaLaunch here); the host tests pass one that runs
// the same calls on host memory, so everything above the launch is tested
// without a GPU.
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_CUDA_LAUNCH_H_
#define TENSORD_KERNELS_CUDA_CUDA_LAUNCH_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/status/status.h"
#include "advindex_call.h"
#include "elementwise_call.h"
#include "gemm_call.h"
#include "index_call.h"
#include "random_call.h"
#include "nn_call.h"
#include "reduce_call.h"
#include "shape_call.h"
#include "topk_call.h"

namespace tensord::cuda {

// One per family, each in its .cu file (the functors instantiated with
// CudaEngine).
int LaunchCopyCuda(const ElementwiseCall& call, void* stream);
int LaunchUnaryCuda(const ElementwiseCall& call, void* stream);
int LaunchFloatMathCuda(const ElementwiseCall& call, void* stream);
int LaunchPredicateCuda(const ElementwiseCall& call, void* stream);
int LaunchArithCuda(const ElementwiseCall& call, void* stream);
int LaunchDivisionCuda(const ElementwiseCall& call, void* stream);
int LaunchCompareCuda(const ElementwiseCall& call, void* stream);
int LaunchTernaryCuda(const ElementwiseCall& call, void* stream);

struct CudaLaunch {
  // LaunchElementwiseCuda: a LaunchCode or the launch's cudaError_t.
  static int Elementwise(const ElementwiseCall& call, void* stream);
  // LaunchReduceCuda.
  static int Reduce(const ReduceCall& call, void* stream);
  // LaunchIndexCuda.
  static int Index(const IndexCall& call, void* stream);
  // LaunchScanCuda.
  static int Scan(const ScanCall& call, void* stream);
  // LaunchRemapCuda / LaunchSequenceCuda (defined in shape_kernels.cc).
  static int Remap(const RemapCall& call, void* stream);
  static int Sequence(const SequenceCall& call, void* stream);
  // LaunchTopkCuda.
  static int Topk(const TopkCall& call, void* stream);
  // LaunchRandomCuda.
  static int Random(const RandomCall& call, void* stream);
  // The nn kernels (nn.cu; defined in nn_kernels.cc): softmax rows, a fused
  // Adam step, pooling, im2col / col2im.
  static int Nn(const SoftmaxCall& call, void* stream);
  static int Nn(const AdamCall& call, void* stream);
  static int Nn(const PoolCall& call, void* stream);
  static int Nn(const ColCall& call, void* stream);
  // LaunchAdvIndexCuda.
  static int AdvIndex(const AdvIndexCall& call, void* stream);
  // The following three are in advindex_launch.cc; each returns an
  // internal error naming `op` when CUDA fails, OutOfMemory when its
  // temporaries do not fit.
  // out[i] = in[0] + ... + in[i] for the n int64s at `in` (device memory).
  static absl::Status InclusiveSum(absl::string_view op, const int64_t* in, int64_t* out, int64_t n, void* stream);
  // keys_out: the n int64 keys ascending; vals_out: their values, in their
  // input order among equal keys (stable).
  static absl::Status SortPairs(absl::string_view op, const int64_t* keys_in, int64_t* keys_out,
                                const int64_t* vals_in, int64_t* vals_out, int64_t n, void* stream);
  // Copies `bytes` of device memory at `src` to the host's `dst` once the
  // work before it on `stream` is done, and waits for it: what a kernel
  // whose output size depends on the data (nonzero) reads back.
  static absl::Status CopyToHost(absl::string_view op, void* dst, const void* src, int64_t bytes, void* stream);
  // cudaGetErrorString of a cudaError_t.
  static std::string ErrorString(int code);
  // `bytes` of device memory for a kernel's temporaries, usable by work
  // issued to `stream` until the last copy of the pointer goes (see
  // elementwise_kernels.h). From the calling thread's ScratchAllocator
  // (the daemon's, charged to the session, on the kernel's device) when one
  // is installed, else cudaMallocAsync on `stream`, freed with
  // cudaFreeAsync on it. OutOfMemory naming `op` when none is left.
  static absl::StatusOr<std::shared_ptr<char>> Allocate(absl::string_view op, int64_t bytes, void* stream);
  // Zeroes `bytes` bytes at `p` on `stream` (cudaMemsetAsync); a cudaError_t.
  static int Memset(char* p, int64_t bytes, void* stream);
  // The batched GEMM `call` on `stream`, on `device` (the current device):
  // cuBLAS (cublas_gemm.cc, loaded at the first call; without it a
  // RuntimeError naming `op` and the library) for floating dtypes, the
  // kernel of gemm_int.cu for integers. An internal error naming `op` when
  // cuBLAS refuses the call or the launch fails.
  static absl::Status Gemm(absl::string_view op, const GemmCall& call, void* stream, int device);
};

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_CUDA_LAUNCH_H_
