// mylib::fused_bias_gelu(x, bias) = gelu(x + bias), bias broadcast over the
// last dim of x: one pass over x instead of two ops and a temporary. The CPU
// kernel is here, the CUDA one in fused_bias_gelu.cu (built in when nvcc is
// present, with -DMYLIB_WITH_CUDA), and so is the op's declaration: its
// schema and its shape rule, which clients run in meta mode with no daemon.
#include <tensord_kernel.h>

#include <cmath>
#include <cstdint>

namespace {

// GELU, the erf form PyTorch's F.gelu computes by default.
inline float Gelu(float v) { return 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f)); }

int32_t FusedBiasGelu(TdKernelEnv* env) {
  const DLTensor* x = env->args[0].value.tensor;
  const DLTensor* b = env->args[1].value.tensor;
  DLTensor* y = &env->outputs[0];
  if (x->dtype.code != kDLFloat || x->dtype.bits != 32 || b->dtype.code != kDLFloat || b->dtype.bits != 32) {
    return td_fail(env, "expected float32 x and bias");
  }
  const int nd = x->ndim;
  int64_t n = 1;
  for (int d = 0; d < nd; ++d) n *= x->shape[d];
  if (n == 0) return TD_OK;
  const int64_t cols = x->shape[nd - 1];
  const float* xs = static_cast<const float*>(x->data);
  const float* bs = static_cast<const float*>(b->data);
  float* ys = static_cast<float*>(y->data);  // contiguous: the shape rule's default layout
  // Row by row over x's leading dims (any strides), the last dim inner.
  for (int64_t row = 0; row < n / cols; ++row) {
    int64_t rest = row, xo = 0;
    for (int d = nd - 2; d >= 0; --d) {
      xo += (rest % x->shape[d]) * x->strides[d];
      rest /= x->shape[d];
    }
    const int64_t xs_last = x->strides[nd - 1], bs0 = b->strides[0];
    float* out = ys + row * cols;
    for (int64_t c = 0; c < cols; ++c) out[c] = Gelu(xs[xo + c * xs_last] + bs[c * bs0]);
  }
  return TD_OK;
}

}  // namespace

TD_EXPORT int32_t mylib_fused_bias_gelu_cpu(TdKernelEnv* env) {
  TD_KERNEL_TRY
  return FusedBiasGelu(env);
  TD_KERNEL_CATCH(env)
}

#ifdef MYLIB_WITH_CUDA
#define MYLIB_CUDA_SYMBOL "mylib_fused_bias_gelu_cuda"
#else
#define MYLIB_CUDA_SYMBOL NULL
#endif

static const TdOpDecl kOps[] = {
    {"mylib::fused_bias_gelu(Tensor x, Tensor bias) -> Tensor",
     "check x.dim() >= 1, \"x must have at least one dim\"\n"
     "check bias.dim() == 1 and bias.size(0) == x.size(-1), \"bias must be [{x.size(-1)}], got {bias.shape}\"\n"
     "check x.dtype == float32 and bias.dtype == float32, \"expected float32, got {x.dtype} and {bias.dtype}\"\n"
     "return empty(x.shape, dtype=float32)",
     NULL, "mylib_fused_bias_gelu_cpu", MYLIB_CUDA_SYMBOL},
};
TD_DEFINE_LIBRARY("mylib", kOps)
