// Fused optimizer steps: _fused_adam_ (one Adam/AdamW update of one
// parameter in one pass over its four tensors, instead of eight ops and
// three temporaries). The meta function guarantees that self, grad, exp_avg
// and exp_avg_sq share one dense layout, so element k of each is the k-th
// element from its storage offset.
#include <cmath>

#include "kernel_util.h"
#include "nn_args.h"
#include "parallel.h"

namespace tensord::cpu {
namespace {

// The step's constants in the compute type C (float for half types).
template <typename C>
struct AdamConstants {
  C sign, b1, omb1, b2, omb2, wd, decay, bc2_sqrt, eps, neg_step;
};

// Per element, in the parameter's dtype, with the rounding of the op-by-op
// step of tensord.optim.Adam (PyTorch 1.13's single-tensor Adam):
//   g = -g (maximize); g = g + wd * p (Adam) or p = p * (1 - lr * wd) (AdamW)
//   m = m * beta1 + (1 - beta1) * g
//   v = v * beta2 + (1 - beta2) * g * g
//   p = p + (-lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
//
// Elements [begin, end) of one step, one case per (kL2, kDecay) so that the
// loop has no branch and GCC vectorises it, sqrt and division included (the
// kernels build with -fno-math-errno). Pointers and constants are passed by
// value: read through a lambda's captures they were reloaded per element and
// the loop stayed scalar. No __restrict: the four tensors may share storage,
// and GCC checks for overlap at run time instead.
template <typename T, typename C, bool kL2, bool kDecay>
void AdamSpan(T* p, const T* g, T* m, T* v, int64_t begin, int64_t end, const AdamConstants<C> c) {
  for (int64_t k = begin; k < end; ++k) {
    C gk = static_cast<C>(g[k]) * c.sign;
    C pk = static_cast<C>(p[k]);
    if constexpr (kDecay) pk = pk * c.decay;
    if constexpr (kL2) gk = gk + c.wd * pk;
    const C mk = static_cast<C>(m[k]) * c.b1 + c.omb1 * gk;
    const C vk = static_cast<C>(v[k]) * c.b2 + (c.omb2 * gk) * gk;
    const C denom = std::sqrt(vk) / c.bc2_sqrt + c.eps;
    m[k] = static_cast<T>(mk);
    v[k] = static_cast<T>(vk);
    p[k] = static_cast<T>(pk + c.neg_step * mk / denom);
  }
}

absl::Status FusedAdam(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const AdamArgs a, ReadFusedAdam(ctx));
  const TensorRef& grad = a.grad;
  const TensorRef& param = ctx.outputs[0];
  const TensorRef& exp_avg = ctx.outputs[1];
  const TensorRef& exp_avg_sq = ctx.outputs[2];
  const double lr = a.lr, beta1 = a.beta1, beta2 = a.beta2, weight_decay = a.weight_decay, eps = a.eps;
  const bool maximize = a.maximize, decoupled = a.decoupled;
  // Host-side constants exactly as the Python step computes them (doubles).
  const double bias_correction1 = a.bias_correction1, bias_correction2 = a.bias_correction2;
  const double step_size = lr / bias_correction1;
  const double bc2_sqrt = std::sqrt(bias_correction2);
  const int64_t n = param.meta->numel();
  return Dispatch<kSetStdFloats>(param.meta->dtype, "_fused_adam_", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = ComputeT<T>;
    {
      T* p = param.data<T>();
      const T* g = grad.data<T>();
      T* m = exp_avg.data<T>();
      T* v = exp_avg_sq.data<T>();
      AdamConstants<C> c;
      c.sign = maximize ? C(-1) : C(1);
      c.b1 = static_cast<C>(beta1);
      c.omb1 = static_cast<C>(1 - beta1);
      c.b2 = static_cast<C>(beta2);
      c.omb2 = static_cast<C>(1 - beta2);
      c.wd = static_cast<C>(weight_decay);
      c.decay = static_cast<C>(1 - lr * weight_decay);
      c.bc2_sqrt = static_cast<C>(bc2_sqrt);
      c.eps = static_cast<C>(eps);
      c.neg_step = static_cast<C>(-step_size);
      auto* span = &AdamSpan<T, C, false, false>;                     // Adam, AdamW without decay
      if (weight_decay != 0) span = decoupled ? &AdamSpan<T, C, false, true> : &AdamSpan<T, C, true, false>;
      ParallelFor(n, 8, [&](int64_t begin, int64_t end, int64_t) { span(p, g, m, v, begin, end, c); });
      return absl::OkStatus();
    }
  });
}

}  // namespace

absl::Status RegisterOptimKernels(KernelRegistry& r) {
  return r.Register(DeviceType::kCPU, "_fused_adam_", FusedAdam);
}

}  // namespace tensord::cpu
