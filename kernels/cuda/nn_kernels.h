// kernels/cuda/nn_kernels.h — the host side of the CUDA nn kernels:
// softmax.int, log_softmax.int, _fused_adam_, max_pool2d_with_indices(_backward),
// avg_pool2d(_backward), conv2d and convolution_backward. Each reads the
// call's arguments as the op's CPU kernel does (kernels/cpu/nn.cc, optim.cc,
// conv.cc: the same checks, errors and dtypes) and describes launches
// (nn_call.h; convolutions also GemmCalls and a ReduceCall) to `L`, the
// device (see elementwise_kernels.h):
//
//   RegisterNnKernels<CudaLaunch>(registry, DeviceType::kCUDA);
//
// Results may differ from the CPU's in the last bits where the order of a
// floating sum differs (softmax's row sums, the convolutions' GEMMs); the
// pooling kernels and _fused_adam_ give the CPU's bits. Host code only.
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_NN_KERNELS_H_
#define TENSORD_KERNELS_CUDA_NN_KERNELS_H_

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "../cpu/nn_args.h"
#include "elementwise_kernels.h"
#include "gemm_call.h"
#include "nn_call.h"
#include "reduce_kernels.h"
#include "tensord/kernels/device_error.h"

namespace tensord::cuda::nn {

using cpu::CheckContext;
using cpu::InputTensor;
using ew::CopyConvert;
using ew::DeviceTemp;
using ew::MakeTemp;

template <class L, class Call>
absl::Status LaunchNn(const KernelContext& ctx, const Call& call) {
  const int code = L::Nn(call, ctx.stream);
  if (code == kLaunchOk) return absl::OkStatus();
  return LaunchError(ctx.op->full_name(), code, code > 0 ? L::ErrorString(code) : std::string());
}

// ---- softmax ----------------------------------------------------------------------

// softmax.int / log_softmax.int (self, dim, dtype): self converted to the
// output's dtype, then along `dim` exp(x - max) / sum(exp(x - max))
// (log_softmax: x - max - log(sum)). One block per row, any strides.
template <class L, bool kLog>
absl::Status Softmax(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const cpu::SoftmaxArgs a, cpu::ReadSoftmax(ctx, kLog));
  const TensorRef& self = a.self;
  const TensorRef& out = ctx.outputs[0];
  const char* name = kLog ? "log_softmax" : "softmax";
  const int64_t rank = self.meta->dim();
  const int64_t dim = a.dim;
  const ScalarType dt = out.meta->dtype;
  if (!DtypeInSet(dt, kSetFloats)) return cpu::DtypeNotImplemented(name, dt);
  const int64_t in_item = self.meta->itemsize(), out_item = out.meta->itemsize();
  SoftmaxCall call;
  call.log = kLog;
  call.dtype = dt;
  call.in_dtype = self.meta->dtype;
  call.out = out.data_at_offset();
  call.in = self.data_at_offset();
  call.n = rank == 0 ? 1 : self.meta->sizes[dim];
  call.in_stride = rank == 0 ? 0 : self.meta->strides[dim] * in_item;
  call.out_stride = rank == 0 ? 0 : out.meta->strides[dim] * out_item;
  // Rows: every dim but `dim`.
  Shape rows, in_strides, out_strides;
  for (int64_t d = 0; d < rank; ++d) {
    if (d == dim) continue;
    rows.push_back(self.meta->sizes[d]);
    in_strides.push_back(self.meta->strides[d] * in_item);
    out_strides.push_back(out.meta->strides[d] * out_item);
  }
  const int64_t* ptrs[2] = {out_strides.data(), in_strides.data()};
  if (!BuildGeometry(static_cast<int>(rows.size()), rows.data(), 2, ptrs, &call.rows)) {
    return NotImplementedErr(absl::StrCat(name, ": CUDA softmax supports at most ", kMaxDims,
                                          " dimensions after merging; got ", ShapeToString(self.meta->sizes)));
  }
  return LaunchNn<L>(ctx, call);
}

// ---- fused Adam -------------------------------------------------------------------

// _fused_adam_(self, grad, exp_avg, exp_avg_sq, *, lr, beta1, beta2,
// weight_decay, eps, step, maximize, decoupled_weight_decay): one Adam
// (AdamW) step in place, with the constants and per-element rounding of
// kernels/cpu/optim.cc. The meta function guarantees one dense layout for
// the four tensors (element k of each is the k-th from its offset) and a
// float32 / float64 dtype.
template <class L>
absl::Status FusedAdam(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const cpu::AdamArgs a, cpu::ReadFusedAdam(ctx));
  const TensorRef& grad = a.grad;
  const TensorRef& param = ctx.outputs[0];
  const TensorRef& exp_avg = ctx.outputs[1];
  const TensorRef& exp_avg_sq = ctx.outputs[2];
  const double lr = a.lr, beta1 = a.beta1, beta2 = a.beta2, weight_decay = a.weight_decay, eps = a.eps;
  const bool maximize = a.maximize, decoupled = a.decoupled;
  const ScalarType dt = param.meta->dtype;
  if (!DtypeInSet(dt, kSetStdFloats)) return cpu::DtypeNotImplemented("_fused_adam_", dt);
  // The host-side constants exactly as the CPU kernel computes them.
  const double bias_correction1 = a.bias_correction1, bias_correction2 = a.bias_correction2;
  AdamCall call;
  call.dtype = dt;
  call.param = param.data_at_offset();
  call.grad = grad.data_at_offset();
  call.exp_avg = exp_avg.data_at_offset();
  call.exp_avg_sq = exp_avg_sq.data_at_offset();
  call.numel = param.meta->numel();
  call.sign = maximize ? -1 : 1;
  call.beta1 = beta1;
  call.one_minus_beta1 = 1 - beta1;
  call.beta2 = beta2;
  call.one_minus_beta2 = 1 - beta2;
  call.weight_decay = weight_decay;
  call.decay = 1 - lr * weight_decay;
  call.bias_correction2_sqrt = std::sqrt(bias_correction2);
  call.eps = eps;
  call.neg_step_size = -(lr / bias_correction1);
  call.l2 = weight_decay != 0 && !decoupled;
  call.decoupled = weight_decay != 0 && decoupled;
  return LaunchNn<L>(ctx, call);
}

// ---- pooling ----------------------------------------------------------------------

// `v` (an int[2] argument) as a pair: one value twice, `fallback` when empty.
inline void PairOf(const Value& v, int64_t (&out)[2], int64_t f0, int64_t f1) {
  const std::array<int64_t, 2> pair = cpu::IntPair(v, {f0, f1});
  out[0] = pair[0];
  out[1] = pair[1];
}

// Element strides of a 3-D (C, H, W) or 4-D (N, C, H, W) tensor as 4-D
// (stride 0 for the missing N).
inline void Strides4(const TensorMeta& m, int64_t (&st)[4]) {
  const int64_t nd = m.dim();
  st[0] = nd == 4 ? m.strides[0] : 0;
  for (int d = 1; d < 4; ++d) st[d] = m.strides[nd - 4 + d];
}

// The geometry of a pooling call from `self` (3-D or 4-D) and the output
// side `out` (the forward's output or grad_output); kernel, stride (empty:
// the kernel), padding and dilation as args k, s, p and d (d < 0: none).
inline PoolCall MakePoolCall(const KernelContext& ctx, PoolOp op, const TensorMeta& self, const TensorMeta& out,
                             int k, int s, int p, int d) {
  PoolCall g;
  g.op = op;
  g.dtype = self.dtype;
  const int64_t nd = self.dim();
  g.n = nd == 4 ? self.sizes[0] : 1;
  g.c = self.sizes[nd - 3];
  g.h = self.sizes[nd - 2];
  g.w = self.sizes[nd - 1];
  g.oh = out.sizes[nd - 2];
  g.ow = out.sizes[nd - 1];
  PairOf(ctx.args[k], g.k, 1, 1);
  PairOf(ctx.args[s], g.s, g.k[0], g.k[1]);
  PairOf(ctx.args[p], g.p, 0, 0);
  if (d >= 0) PairOf(ctx.args[d], g.d, 1, 1);
  return g;
}

// max_pool2d_with_indices(self, kernel_size, stride, padding, dilation,
// ceil_mode) -> (values, indices): each window's max (NaN wins) and its
// flat index h * W + w in the plane.
template <class L>
absl::Status MaxPool(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 2));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  const TensorRef &values = ctx.outputs[0], &indices = ctx.outputs[1];
  if (!DtypeInSet(self.meta->dtype, kSetStdFloats)) return cpu::DtypeNotImplemented("max_pool2d", self.meta->dtype);
  PoolCall g = MakePoolCall(ctx, PoolOp::kMaxForward, *self.meta, *values.meta, 1, 2, 3, 4);
  g.input = self.data_at_offset();
  g.output = values.data_at_offset();
  g.indices = indices.data_at_offset();
  Strides4(*self.meta, g.in_strides);
  Strides4(*values.meta, g.out_strides);
  Strides4(*indices.meta, g.idx_strides);
  return LaunchNn<L>(ctx, g);
}

// max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride,
// padding, dilation, ceil_mode, indices): grad_input[plane][indices[o]] +=
// grad_output[plane][o], computed per input element over the windows that
// cover it (deterministic, no atomics). An index outside its plane fails
// at the stream's next sync point with the CPU's IndexError; one inside the
// plane but outside its window adds nothing (PyTorch's CUDA kernel), where
// the CPU adds it there: indices from max_pool2d_with_indices never are.
template <class L>
absl::Status MaxPoolBackward(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef grad, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef indices, InputTensor(ctx, 7));
  const TensorRef& out = ctx.outputs[0];
  if (!DtypeInSet(grad.meta->dtype, kSetStdFloats)) {
    return cpu::DtypeNotImplemented("max_pool2d_with_indices_backward", grad.meta->dtype);
  }
  TD_INTERNAL_CHECK(ctx.error_word != nullptr, ctx.op->full_name(), ": the stream gave no error word");
  PoolCall g = MakePoolCall(ctx, PoolOp::kMaxBackward, *self.meta, *grad.meta, 2, 3, 4, 5);
  g.input = out.data_at_offset();
  g.output = grad.data_at_offset();
  g.indices = indices.data_at_offset();
  Strides4(*out.meta, g.in_strides);
  Strides4(*grad.meta, g.out_strides);
  Strides4(*indices.meta, g.idx_strides);
  g.error_word = static_cast<DeviceErrorWord*>(ctx.error_word);
  g.op_id = ctx.op->id;
  return LaunchNn<L>(ctx, g);
}

// avg_pool2d(self, kernel_size, stride, padding, ceil_mode,
// count_include_pad, divisor_override): window sums in double over
// PyTorch's divisor.
template <class L>
absl::Status AvgPool(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  const TensorRef& out = ctx.outputs[0];
  if (!DtypeInSet(self.meta->dtype, kSetStdFloats)) return cpu::DtypeNotImplemented("avg_pool2d", self.meta->dtype);
  PoolCall g = MakePoolCall(ctx, PoolOp::kAvgForward, *self.meta, *out.meta, 1, 2, 3, -1);
  g.count_include_pad = ctx.args[5].to_bool();
  g.divisor = ctx.args[6].is_none() ? 0 : ctx.args[6].to_int();
  TD_INTERNAL_CHECK(ctx.args[6].is_none() || g.divisor != 0, "avg_pool2d: divisor_override 0 was not refused");
  g.input = self.data_at_offset();
  g.output = out.data_at_offset();
  Strides4(*self.meta, g.in_strides);
  Strides4(*out.meta, g.out_strides);
  return LaunchNn<L>(ctx, g);
}

// avg_pool2d_backward(grad_output, self, kernel_size, stride, padding,
// ceil_mode, count_include_pad, divisor_override): each input element
// gathers grad / divisor from the windows that cover it, in the CPU's order.
template <class L>
absl::Status AvgPoolBackward(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef grad, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 1));
  const TensorRef& out = ctx.outputs[0];
  if (!DtypeInSet(grad.meta->dtype, kSetStdFloats)) {
    return cpu::DtypeNotImplemented("avg_pool2d_backward", grad.meta->dtype);
  }
  PoolCall g = MakePoolCall(ctx, PoolOp::kAvgBackward, *self.meta, *grad.meta, 2, 3, 4, -1);
  g.count_include_pad = ctx.args[6].to_bool();
  g.divisor = ctx.args[7].is_none() ? 0 : ctx.args[7].to_int();
  TD_INTERNAL_CHECK(ctx.args[7].is_none() || g.divisor != 0, "avg_pool2d_backward: divisor_override 0 was not refused");
  g.input = out.data_at_offset();
  g.output = grad.data_at_offset();
  Strides4(*out.meta, g.in_strides);
  Strides4(*grad.meta, g.out_strides);
  return LaunchNn<L>(ctx, g);
}

template <class L>
absl::Status RegisterNnKernels(KernelRegistry& r, DeviceType device) {
  struct Entry {
    const char* name;
    KernelFn fn;
  };
  const Entry entries[] = {
      {"softmax.int", Softmax<L, false>},
      {"log_softmax.int", Softmax<L, true>},
      {"_fused_adam_", FusedAdam<L>},
      {"max_pool2d_with_indices", MaxPool<L>},
      {"max_pool2d_with_indices_backward", MaxPoolBackward<L>},
      {"avg_pool2d", AvgPool<L>},
      {"avg_pool2d_backward", AvgPoolBackward<L>},
  };
  for (const Entry& e : entries) TD_RETURN_IF_ERROR(r.Register(device, e.name, e.fn));
  return absl::OkStatus();
}

}  // namespace tensord::cuda::nn

#endif  // TENSORD_KERNELS_CUDA_NN_KERNELS_H_
