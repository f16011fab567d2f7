// kernels/cuda/gemm_call.h — one batched matrix product as the host side of
// the matmul kernels (matmul_kernels.h) describes it to the device layer
// (CudaLaunch::Gemm: cuBLAS for floating dtypes, gemm_int.cu for integers;
// the host tests' HostLaunch::Gemm computes it on the host). Plain C++ (no
// CUDA header), so host code builds calls and the host tests check them.
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_GEMM_CALL_H_
#define TENSORD_KERNELS_CUDA_GEMM_CALL_H_

#include <cstdint>

#include "tensord/meta/dtype.h"

namespace tensord::cuda {

// For each p in [0, batch):
//
//   C_p = alpha * A_p @ B_p + beta * C_p      (beta == 0: C_p is not read)
//
// with A_p m x k, B_p k x n and C_p m x n, all of `dtype`, described in
// row-major terms (element strides, not bytes):
//   A_p(i, l) = a[p * stride_a + i * lda + l]   (trans_a false)
//             = a[p * stride_a + l * lda + i]   (trans_a true)
// likewise B with ldb, and C_p(i, j) = c[p * stride_c + i * ldc + j].
// Leading dimensions are at least 1 and at least the row length they
// skip (lda >= k without trans_a, >= m with it; ldc >= n); m, n, k, lda,
// ldb, ldc and batch fit an int (cuBLAS's limits); k may be 0 (C = beta * C).
// float16 and bfloat16 accumulate in float32, integers wrap (uint64
// arithmetic, truncated), as the CPU kernels do.
struct GemmCall {
  ScalarType dtype = ScalarType::kFloat32;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  const char* a = nullptr;
  int64_t lda = 1, stride_a = 0;
  const char* b = nullptr;
  int64_t ldb = 1, stride_b = 0;
  char* c = nullptr;
  int64_t ldc = 1, stride_c = 0;
  int64_t batch = 1;
  // alpha and beta: floating dtypes use the doubles (already rounded to the
  // compute type as the CPU rounds them), integer dtypes the int64s.
  double alpha = 1, beta = 0;
  int64_t alpha_int = 1, beta_int = 0;
  // float32 only: whether cuBLAS may use TF32 tensor cores
  // (the session's MathMode::matmul_allow_tf32 for the matmul family, off by
  // default; conv_allow_tf32 for convolutions, on by default; as PyTorch).
  bool allow_tf32 = false;
};

// Launches the integer GEMM of `call` (uint8, int8, int16, int32, int64) on
// the CUDA stream `stream`; a cudaError_t, or a LaunchCode for a dtype it
// has no instance for. Defined in gemm_int.cu, built only with CUDA.
int LaunchIntGemmCuda(const GemmCall& call, void* stream);

}  // namespace tensord::cuda

#endif  // TENSORD_KERNELS_CUDA_GEMM_CALL_H_
