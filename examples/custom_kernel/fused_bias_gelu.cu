// The CUDA kernel of mylib::fused_bias_gelu (the op is declared in
// fused_bias_gelu.cc). Enqueued on the session's stream the daemon passes in
// env->stream; the daemon's sync points wait for it.
#include <tensord_kernel.h>

#include <cstdint>

namespace {

__global__ void FusedBiasGeluKernel(const float* x, const float* b, float* y, int64_t rows, int64_t cols,
                                    int64_t x_row_stride, int64_t x_col_stride, int64_t b_stride) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const int64_t r = i / cols, c = i % cols;
  const float v = x[r * x_row_stride + c * x_col_stride] + b[c * b_stride];
  y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}

}  // namespace

TD_EXPORT int32_t mylib_fused_bias_gelu_cuda(TdKernelEnv* env) {
  const DLTensor* x = env->args[0].value.tensor;
  const DLTensor* b = env->args[1].value.tensor;
  DLTensor* y = &env->outputs[0];
  if (x->dtype.code != kDLFloat || x->dtype.bits != 32) return td_fail(env, "expected float32 x and bias");
  const int nd = x->ndim;
  const int64_t cols = x->shape[nd - 1];
  int64_t rows = 1;
  for (int d = 0; d < nd - 1; ++d) rows *= x->shape[d];
  // The rows (x's leading dims flattened) must be one stride apart, as in a
  // contiguous or row-sliced x; other layouts are refused, not read wrong.
  const int64_t row_stride = nd >= 2 ? x->strides[nd - 2] : 0;
  int64_t expect = nd >= 2 ? row_stride * x->shape[nd - 2] : 0;
  for (int d = nd - 3; d >= 0; --d) {
    if (x->shape[d] != 1 && x->strides[d] != expect) return td_fail(env, "the CUDA kernel needs x's rows evenly spaced");
    expect *= x->shape[d];
  }
  const int64_t n = rows * cols;
  if (n == 0) return TD_OK;
  const int threads = 256;
  const unsigned blocks = static_cast<unsigned>((n + threads - 1) / threads);
  FusedBiasGeluKernel<<<blocks, threads, 0, static_cast<cudaStream_t>(env->stream)>>>(
      static_cast<const float*>(x->data), static_cast<const float*>(b->data), static_cast<float*>(y->data), rows, cols,
      row_stride, x->strides[nd - 1], b->strides[0]);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? TD_OK : td_fail(env, cudaGetErrorString(e));
}
