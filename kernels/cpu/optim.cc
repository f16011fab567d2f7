// Fused optimizer steps: _fused_adam_ (one Adam/AdamW update of one
// parameter in one pass over its four tensors, instead of eight ops and
// three temporaries). The meta function guarantees that self, grad, exp_avg
// and exp_avg_sq share one dense layout, so element k of each is the k-th
// element from its storage offset.
#include <cmath>

#include "kernel_util.h"
#include "parallel.h"

namespace tensord::cpu {
namespace {

// Per element, in the parameter's dtype, with the rounding of the op-by-op
// step of tensord.optim.Adam (PyTorch 1.13's single-tensor Adam):
//   g = -g (maximize); g = g + wd * p (Adam) or p = p * (1 - lr * wd) (AdamW)
//   m = m * beta1 + (1 - beta1) * g
//   v = v * beta2 + (1 - beta2) * g * g
//   p = p + (-lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
absl::Status FusedAdam(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 3));
  TD_ASSIGN_OR_RETURN(TensorRef grad, InputTensor(ctx, 1));
  const TensorRef& param = ctx.outputs[0];
  const TensorRef& exp_avg = ctx.outputs[1];
  const TensorRef& exp_avg_sq = ctx.outputs[2];
  const double lr = ctx.args[4].to_double(), beta1 = ctx.args[5].to_double(), beta2 = ctx.args[6].to_double();
  const double weight_decay = ctx.args[7].to_double(), eps = ctx.args[8].to_double();
  const int64_t step = ctx.args[9].to_int();
  const bool maximize = ctx.args[10].to_bool(), decoupled = ctx.args[11].to_bool();
  if (step < 1) return RuntimeErr(absl::StrCat("_fused_adam_: step must be at least 1, got ", step));
  // Host-side constants exactly as the Python step computes them (doubles).
  const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(step));
  const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(step));
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
      const C b1 = static_cast<C>(beta1), omb1 = static_cast<C>(1 - beta1);
      const C b2 = static_cast<C>(beta2), omb2 = static_cast<C>(1 - beta2);
      const C wd = static_cast<C>(weight_decay), decay = static_cast<C>(1 - lr * weight_decay);
      const C c_bc2_sqrt = static_cast<C>(bc2_sqrt), c_eps = static_cast<C>(eps);
      const C neg_step = static_cast<C>(-step_size);
      const bool l2 = weight_decay != 0 && !decoupled, decay_p = weight_decay != 0 && decoupled;
      ParallelFor(n, 8, [&](int64_t begin, int64_t end, int64_t) {
        for (int64_t k = begin; k < end; ++k) {
          C gk = g[k];
          C pk = p[k];
          if (maximize) gk = -gk;
          if (decay_p) pk = pk * decay;
          if (l2) gk = gk + wd * pk;
          const C mk = m[k] * b1 + omb1 * gk;
          const C vk = v[k] * b2 + (omb2 * gk) * gk;
          const C denom = std::sqrt(vk) / c_bc2_sqrt + c_eps;
          m[k] = mk;
          v[k] = vk;
          p[k] = pk + neg_step * mk / denom;
        }
      });
      return absl::OkStatus();
    }
  });
}

}  // namespace

absl::Status RegisterOptimKernels(KernelRegistry& r) {
  return r.Register(DeviceType::kCPU, "_fused_adam_", FusedAdam);
}

}  // namespace tensord::cpu
