// kernels/cpu/nn_args.h — how the neural-network kernels (softmax,
// _fused_adam_, convolution) read a call's arguments and check them,
// shared by the CPU kernels (nn.cc, optim.cc, conv.cc) and the CUDA host
// side (cuda/nn_kernels.h, conv_kernels.h), so that both devices raise the
// same errors with the same texts and compute the same host-side values:
//
//   TD_ASSIGN_OR_RETURN(const SoftmaxArgs a, ReadSoftmax(ctx, /*log=*/false));
//
// Internal to kernels/.
#ifndef TENSORD_KERNELS_CPU_NN_ARGS_H_
#define TENSORD_KERNELS_CPU_NN_ARGS_H_

#include <array>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tensord/kernels/registry.h"
#include "tensord/meta/tensor_meta.h"

namespace tensord::cpu {

// An int[2] argument (kernel_size, stride, padding, dilation) as a pair:
// one value twice, `fallback` when empty.
std::array<int64_t, 2> IntPair(const Value& v, std::array<int64_t, 2> fallback);

// softmax.int / log_softmax.int (self, dim, dtype): self and `dim` wrapped
// (a 0-dim self counts as rank 1). Starts with CheckContext; outputs[0]
// must have self's sizes. IndexError for a dim out of range.
struct SoftmaxArgs {
  TensorRef self;
  int64_t dim = 0;
};
absl::StatusOr<SoftmaxArgs> ReadSoftmax(const KernelContext& ctx, bool log);

// _fused_adam_(self, grad, exp_avg, exp_avg_sq, *, lr, beta1, beta2,
// weight_decay, eps, step, maximize, decoupled_weight_decay): the
// arguments and the bias corrections 1 - beta^step (in double, as PyTorch's
// Python step computes them). Starts with CheckContext (3 outputs: self,
// exp_avg, exp_avg_sq). RuntimeError for a step below 1.
struct AdamArgs {
  TensorRef grad;
  double lr = 0, beta1 = 0, beta2 = 0, weight_decay = 0, eps = 0;
  int64_t step = 0;
  bool maximize = false, decoupled = false;
  double bias_correction1 = 0, bias_correction2 = 0;
};
absl::StatusOr<AdamArgs> ReadFusedAdam(const KernelContext& ctx);

// One 2-D convolution: input (N, C, H, W), weight (O, C / groups, kh, kw).
struct ConvGeom {
  int64_t n, c, h, w, o, kh, kw, oh, ow, groups;
  std::array<int64_t, 2> s, p, d;
  int64_t cg() const { return c / groups; }
  int64_t og() const { return o / groups; }
  int64_t kk() const { return cg() * kh * kw; }
  int64_t ohw() const { return oh * ow; }
};

// The geometry of a convolution of `in` (4-D) by `wt` (4-D) with stride,
// padding and dilation from those arguments. Internal error for other
// ranks or groups <= 0; RuntimeError naming `op` and `device` ("CPU",
// "CUDA") when the GEMMs' sizes exceed an int (BLAS's and cuBLAS's limit).
absl::StatusOr<ConvGeom> MakeConvGeom(absl::string_view op, const TensorMeta& in, const TensorMeta& wt,
                                      const Value& stride, const Value& padding, const Value& dilation,
                                      int64_t groups, absl::string_view device);

}  // namespace tensord::cpu

#endif  // TENSORD_KERNELS_CPU_NN_ARGS_H_
