// mylib::fused_bias_gelu(x, bias) = gelu(x + bias), bias broadcast over the
// last dim of x: one pass over x instead of two ops and a temporary; and
// mylib::fused_bias_gelu_backward(grad, x, bias) = grad * gelu'(x + bias),
// the kernel its derivative calls. The CPU kernels (float32 and float64) are
// here, the CUDA ones (float32) in fused_bias_gelu.cu (built in when nvcc is
// present, with -DMYLIB_WITH_CUDA), and so is each op's declaration: its
// schema, its shape rule (which clients run in meta mode with no daemon) and
// its derivative (which the daemon's autograd runs).
#include <tensord_kernel.h>

#include <cmath>
#include <cstdint>

namespace {

// GELU, the erf form PyTorch's F.gelu computes by default, and its derivative
// Phi(v) + v * phi(v).
template <typename T>
T Gelu(T v) {
  return T(0.5) * v * (T(1) + std::erf(v * T(0.70710678118654752)));
}
template <typename T>
T GeluGrad(T v) {
  const T cdf = T(0.5) * (T(1) + std::erf(v * T(0.70710678118654752)));
  const T pdf = std::exp(T(-0.5) * v * v) * T(0.39894228040143268);
  return cdf + v * pdf;
}

// The offset of element `flat` (row-major over `t`'s shape) under t's strides.
int64_t Offset(const DLTensor* t, int64_t flat) {
  int64_t off = 0;
  for (int d = t->ndim - 1; d >= 0; --d) {
    off += (flat % t->shape[d]) * t->strides[d];
    flat /= t->shape[d];
  }
  return off;
}

bool IsFloat(const DLTensor* t, int bits) { return t->dtype.code == kDLFloat && t->dtype.bits == bits; }

// y = gelu(x + bias); with `grad`, y = grad * gelu'(x + bias). Any strides
// for the inputs; y is contiguous (the shape rule's default layout).
template <typename T>
void Run(const DLTensor* grad, const DLTensor* x, const DLTensor* b, DLTensor* y) {
  int64_t n = 1;
  for (int d = 0; d < x->ndim; ++d) n *= x->shape[d];
  const int64_t cols = x->shape[x->ndim - 1];
  const T* xs = static_cast<const T*>(x->data);
  const T* bs = static_cast<const T*>(b->data);
  const T* gs = grad != nullptr ? static_cast<const T*>(grad->data) : nullptr;
  T* ys = static_cast<T*>(y->data);
  for (int64_t i = 0; i < n; ++i) {
    const T v = xs[Offset(x, i)] + bs[(i % cols) * b->strides[0]];
    ys[i] = gs == nullptr ? Gelu(v) : gs[Offset(grad, i)] * GeluGrad(v);
  }
}

int32_t FusedBiasGelu(TdKernelEnv* env, bool backward) {
  const int first = backward ? 1 : 0;
  const DLTensor* grad = backward ? env->args[0].value.tensor : nullptr;
  const DLTensor* x = env->args[first].value.tensor;
  const DLTensor* b = env->args[first + 1].value.tensor;
  DLTensor* y = &env->outputs[0];
  // The shape rule checked the shapes and that every input has x's dtype.
  if (IsFloat(x, 32)) {
    Run<float>(grad, x, b, y);
  } else if (IsFloat(x, 64)) {
    Run<double>(grad, x, b, y);
  } else {
    return td_fail(env, "expected float32 or float64");
  }
  return TD_OK;
}

}  // namespace

TD_EXPORT int32_t mylib_fused_bias_gelu_cpu(TdKernelEnv* env) {
  TD_KERNEL_TRY
  return FusedBiasGelu(env, /*backward=*/false);
  TD_KERNEL_CATCH(env)
}

TD_EXPORT int32_t mylib_fused_bias_gelu_backward_cpu(TdKernelEnv* env) {
  TD_KERNEL_TRY
  return FusedBiasGelu(env, /*backward=*/true);
  TD_KERNEL_CATCH(env)
}

#ifdef MYLIB_WITH_CUDA
#define MYLIB_CUDA_SYMBOL(name) name
#else
#define MYLIB_CUDA_SYMBOL(name) NULL
#endif

// The checks both ops' shape rules make on x and bias.
#define MYLIB_CHECK_X_BIAS                                                                                     \
  "check x.dim() >= 1, \"x must have at least one dim\"\n"                                                    \
  "check bias.dim() == 1 and bias.size(0) == x.size(-1), \"bias must be [{x.size(-1)}], got {bias.shape}\"\n" \
  "check x.dtype == bias.dtype and (x.dtype == float32 or x.dtype == float64), "                              \
  "\"expected float32 or float64 x and bias of one dtype, got {x.dtype} and {bias.dtype}\"\n"

static const TdOpDecl kOps[] = {
    {"mylib::fused_bias_gelu(Tensor x, Tensor bias) -> Tensor",
     MYLIB_CHECK_X_BIAS "return empty(x.shape, dtype=x.dtype)",
     // The derivative, in table ops and this library's own: d is the
     // gradient of x + bias; bias's is d summed to bias's shape by autograd.
     "d = mylib::fused_bias_gelu_backward(grad, x, bias)\n"
     "x: d\n"
     "bias: d",
     "mylib_fused_bias_gelu_cpu", MYLIB_CUDA_SYMBOL("mylib_fused_bias_gelu_cuda")},
    {"mylib::fused_bias_gelu_backward(Tensor grad, Tensor x, Tensor bias) -> Tensor",
     MYLIB_CHECK_X_BIAS
     "check grad.shape == x.shape and grad.dtype == x.dtype, \"grad must be like x, got {grad.shape} {grad.dtype}\"\n"
     "return empty(x.shape, dtype=x.dtype)",
     NULL,  // no second derivative
     "mylib_fused_bias_gelu_backward_cpu", MYLIB_CUDA_SYMBOL("mylib_fused_bias_gelu_backward_cuda")},
};
TD_DEFINE_LIBRARY("mylib", kOps)
