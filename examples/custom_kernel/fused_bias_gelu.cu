// The CUDA kernels of mylib::fused_bias_gelu and its backward (the ops are
// declared in fused_bias_gelu.cc), float32. Enqueued on the session's stream
// the daemon passes in env->stream; the daemon's sync points wait for it.
#include <tensord_kernel.h>

#include <cstdint>

namespace {

constexpr int kMaxDims = 8;

// A tensor's shape and strides by value, for the kernel's index arithmetic.
struct View {
  int ndim;
  int64_t shape[kMaxDims];
  int64_t strides[kMaxDims];
};

bool MakeView(const DLTensor* t, View* v) {
  if (t->ndim > kMaxDims) return false;
  v->ndim = t->ndim;
  for (int d = 0; d < t->ndim; ++d) {
    v->shape[d] = t->shape[d];
    v->strides[d] = t->strides[d];
  }
  return true;
}

__device__ int64_t Offset(const View& v, int64_t flat) {
  int64_t off = 0;
  for (int d = v.ndim - 1; d >= 0; --d) {
    off += (flat % v.shape[d]) * v.strides[d];
    flat /= v.shape[d];
  }
  return off;
}

// y = gelu(x + b); with g, y = g * gelu'(x + b). y is contiguous.
__global__ void FusedBiasGeluKernel(const float* g, View gv, const float* x, View xv, const float* b,
                                    int64_t b_stride, float* y, int64_t n, int64_t cols) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = x[Offset(xv, i)] + b[(i % cols) * b_stride];
  const float cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752f));
  if (g == nullptr) {
    y[i] = v * cdf;
  } else {
    y[i] = g[Offset(gv, i)] * (cdf + v * expf(-0.5f * v * v) * 0.39894228040143268f);
  }
}

int32_t Launch(TdKernelEnv* env, bool backward) {
  const int first = backward ? 1 : 0;
  const DLTensor* g = backward ? env->args[0].value.tensor : nullptr;
  const DLTensor* x = env->args[first].value.tensor;
  const DLTensor* b = env->args[first + 1].value.tensor;
  DLTensor* y = &env->outputs[0];
  if (x->dtype.code != kDLFloat || x->dtype.bits != 32) return td_fail(env, "the CUDA kernel takes float32");
  View xv{}, gv{};
  if (!MakeView(x, &xv) || (g != nullptr && !MakeView(g, &gv))) return td_fail(env, "more than 8 dims");
  int64_t n = 1;
  for (int d = 0; d < x->ndim; ++d) n *= x->shape[d];
  if (n == 0) return TD_OK;
  const int threads = 256;
  const unsigned blocks = static_cast<unsigned>((n + threads - 1) / threads);
  FusedBiasGeluKernel<<<blocks, threads, 0, static_cast<cudaStream_t>(env->stream)>>>(
      g != nullptr ? static_cast<const float*>(g->data) : nullptr, gv, static_cast<const float*>(x->data), xv,
      static_cast<const float*>(b->data), b->strides[0], static_cast<float*>(y->data), n, x->shape[x->ndim - 1]);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? TD_OK : td_fail(env, cudaGetErrorString(e));
}

}  // namespace

TD_EXPORT int32_t mylib_fused_bias_gelu_cuda(TdKernelEnv* env) { return Launch(env, /*backward=*/false); }
TD_EXPORT int32_t mylib_fused_bias_gelu_backward_cuda(TdKernelEnv* env) { return Launch(env, /*backward=*/true); }
