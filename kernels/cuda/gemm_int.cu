// The integer GEMM (gemm_call.h): cuBLAS has no wrapping integer product, so
// integer matmul runs this plain kernel, one thread per output element, for
// parity with the CPU kernels (PyTorch's CUDA refuses integer matmul; its
// CPU wraps, and so do we on both).
#include <cuda_runtime.h>

#include <cstdint>

#include "elementwise_call.h"
#include "gemm_call.h"

namespace tensord::cuda {
namespace {

constexpr int kTile = 16;

// C_p(i, j) = alpha * sum_l A_p(i, l) B_p(l, j) (+ beta * C_p(i, j)), in
// uint64 arithmetic (wraps), truncated to T on the store. blockIdx.y and
// blockIdx.z walk the rows and the batch in grid-stride loops.
template <typename T>
__global__ void IntGemmKernel(GemmCall call) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;
  if (j >= call.n) return;
  const T* a = reinterpret_cast<const T*>(call.a);
  const T* b = reinterpret_cast<const T*>(call.b);
  T* c = reinterpret_cast<T*>(call.c);
  const int64_t a_i = call.trans_a ? 1 : call.lda, a_l = call.trans_a ? call.lda : 1;
  const int64_t b_l = call.trans_b ? 1 : call.ldb, b_j = call.trans_b ? call.ldb : 1;
  for (int64_t p = blockIdx.z; p < call.batch; p += gridDim.z) {
    for (int64_t i = static_cast<int64_t>(blockIdx.y) * kTile + threadIdx.y; i < call.m;
         i += static_cast<int64_t>(gridDim.y) * kTile) {
      const T* ap = a + p * call.stride_a + i * a_i;
      const T* bp = b + p * call.stride_b + j * b_j;
      uint64_t acc = 0;
      for (int64_t l = 0; l < call.k; ++l) {
        acc += static_cast<uint64_t>(static_cast<int64_t>(ap[l * a_l])) *
               static_cast<uint64_t>(static_cast<int64_t>(bp[l * b_l]));
      }
      T* cp = c + p * call.stride_c + i * call.ldc + j;
      uint64_t v = static_cast<uint64_t>(call.alpha_int) * acc;
      if (call.beta_int != 0) v += static_cast<uint64_t>(call.beta_int) * static_cast<uint64_t>(static_cast<int64_t>(*cp));
      *cp = static_cast<T>(v);
    }
  }
}

template <typename T>
int Launch(const GemmCall& call, void* stream) {
  if (call.m == 0 || call.n == 0 || call.batch == 0) return kLaunchOk;
  const dim3 block(kTile, kTile);
  // gridDim.y and .z are at most 65535: rows and batch beyond loop.
  const int64_t row_blocks = (call.m + kTile - 1) / kTile;
  const dim3 grid(static_cast<unsigned>((call.n + kTile - 1) / kTile), static_cast<unsigned>(row_blocks < 65535 ? row_blocks : 65535),
                  static_cast<unsigned>(call.batch < 65535 ? call.batch : 65535));
  IntGemmKernel<T><<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(call);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int LaunchIntGemmCuda(const GemmCall& call, void* stream) {
  switch (call.dtype) {
    case ScalarType::kUInt8: return Launch<uint8_t>(call, stream);
    case ScalarType::kInt8: return Launch<int8_t>(call, stream);
    case ScalarType::kInt16: return Launch<int16_t>(call, stream);
    case ScalarType::kInt32: return Launch<int32_t>(call, stream);
    case ScalarType::kInt64: return Launch<int64_t>(call, stream);
    default: return kLaunchBadDtype;
  }
}

}  // namespace tensord::cuda
