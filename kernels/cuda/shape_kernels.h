// kernels/cuda/shape_kernels.h — the host side of the CUDA shape kernels:
//   - select_backward, slice_backward, diagonal_backward: the output zeroed
//     (L::Memset), then the gradient copied into a strided view of it by the
//     elementwise copy engine;
//   - flip, roll, repeat, constant_pad_nd, tril, triu: one remap launch
//     (RemapCall: per output dim, where its coordinate reads the source);
//   - arange, arange.start, linspace: one sequence launch (SequenceCall);
//     eye: zeros, then ones on the diagonal view (the copy engine).
// Each reads the call's arguments as the op's CPU kernel does
// (kernels/cpu/scatter.cc, shape.cc, factory.cc: the same checks and
// errors) and describes its launches to `L`, the device (see
// elementwise_kernels.h):
//
//   RegisterShapeKernels<CudaLaunch>(registry, DeviceType::kCUDA);
//
// Host code only. Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_SHAPE_KERNELS_H_
#define TENSORD_KERNELS_CUDA_SHAPE_KERNELS_H_

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>

#include "../cpu/shape_args.h"
#include "elementwise_kernels.h"
#include "shape_call.h"

namespace tensord::cuda::ew {

// The Status of a shape launch or a memset that returned `code`.
template <class L>
absl::Status ShapeLaunchStatus(const KernelContext& ctx, int code) {
  if (code == kLaunchOk) return absl::OkStatus();
  return LaunchError(ctx.op->full_name(), code, code > 0 ? L::ErrorString(code) : std::string());
}

// Every element of `out` = 0: one memset when out is contiguous (a fresh
// output is), else a fill by the copy engine.
template <class L>
absl::Status ZeroOutput(const KernelContext& ctx, const TensorRef& out) {
  if (out.meta->numel() == 0) return absl::OkStatus();
  if (!out.meta->is_contiguous()) return Fill<L>(ctx, out, Scalar::Int(0));
  return ShapeLaunchStatus<L>(ctx, L::Memset(out.data_at_offset(), out.meta->numel() * out.meta->itemsize(), ctx.stream));
}

// out = zeros, then the view a.view of out (its metadata) = a.grad, grad
// broadcast to the view's shape (an internal error when it does not).
template <class L>
absl::Status ZeroThenCopyInto(const KernelContext& ctx, const TensorRef& out, const cpu::ViewBackwardArgs& a) {
  TD_RETURN_IF_ERROR(ZeroOutput<L>(ctx, out));
  TD_ASSIGN_OR_RETURN(Shape unused, cpu::BroadcastByteStrides(*a.grad.meta, a.view.sizes));
  (void)unused;
  return CopyConvert<L>(ctx, TensorRef{out.base, &a.view}, a.grad);
}

// ---- select_backward / slice_backward / diagonal_backward --------------------------

// select_backward(grad_output, input_sizes, dim, index): out =
// zeros(input_sizes); out.select(dim, index) = grad_output.
template <class L>
absl::Status SelectBackward(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const cpu::ViewBackwardArgs a, cpu::ReadSelectBackward(ctx));
  return ZeroThenCopyInto<L>(ctx, ctx.outputs[0], a);
}

// slice_backward(grad_output, input_sizes, dim, start, end, step): out =
// zeros(input_sizes); out.slice(dim, start, end, step) = grad_output.
template <class L>
absl::Status SliceBackward(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const cpu::ViewBackwardArgs a, cpu::ReadSliceBackward(ctx));
  return ZeroThenCopyInto<L>(ctx, ctx.outputs[0], a);
}

// diagonal_backward(grad_output, input_sizes, offset, dim1, dim2): out =
// zeros(input_sizes); out.diagonal(offset, dim1, dim2) = grad_output.
template <class L>
absl::Status DiagonalBackward(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const cpu::ViewBackwardArgs a, cpu::ReadDiagonalBackward(ctx));
  return ZeroThenCopyInto<L>(ctx, ctx.outputs[0], a);
}

// ---- remaps: flip, roll, repeat, constant_pad_nd, tril, triu -------------------------

// A remap from `src` into `out` (same element size), its dims to be filled
// by the caller. NotImplemented past kMaxRemapDims dims (more than the
// meta functions let a tensor have).
absl::StatusOr<RemapCall> NewRemap(absl::string_view op, const TensorRef& out, const TensorRef& src);

// Dim d of a remap with the identity map: out coordinate j reads source j.
inline RemapDim IdentityDim(const TensorMeta& out, const TensorMeta& src, int64_t d) {
  return RemapDim::Wrap(out.sizes[d], out.strides[d] * out.itemsize(), src.sizes[d], src.strides[d] * src.itemsize());
}

// flip(self, dims): the listed dims read backwards.
template <class L>
absl::Status Flip(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const cpu::FlipArgs a, cpu::ReadFlip(ctx));
  const TensorRef& self = a.self;
  const TensorRef& out = ctx.outputs[0];
  TD_ASSIGN_OR_RETURN(RemapCall call, NewRemap("flip", out, self));
  for (int64_t d = 0; d < self.meta->dim(); ++d) {
    call.dims[d] = IdentityDim(*out.meta, *self.meta, d);
    call.dims[d].reverse = a.flipped[d];
  }
  return ShapeLaunchStatus<L>(ctx, L::Remap(call, ctx.stream));
}

// roll(self, shifts, dims): output j along a rolled dim reads
// (j - shift) mod size; repeated dims add their shifts. No dims: the
// flattened roll, over a contiguous copy of self when self is not.
template <class L>
absl::Status Roll(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const cpu::RollArgs a, cpu::ReadRoll(ctx));
  const TensorRef& self = a.self;
  const TensorRef& out = ctx.outputs[0];
  const int64_t numel = self.meta->numel();
  if (numel == 0) return absl::OkStatus();
  if (a.flat) {
    std::unique_ptr<DeviceTemp> holder;
    TensorRef flat = self;
    if (!self.meta->is_contiguous()) {
      TD_ASSIGN_OR_RETURN(holder, MakeTemp<L>(ctx, self.meta->sizes, self.meta->dtype));
      TD_RETURN_IF_ERROR(CopyConvert<L>(ctx, holder->ref(), self));
      flat = holder->ref();
    }
    const TensorMeta src1 = cpu::ViewMeta(*flat.meta, {numel}, {1}, flat.meta->storage_offset);
    const TensorMeta out1 = cpu::ViewMeta(*out.meta, {numel}, {1}, out.meta->storage_offset);
    TD_ASSIGN_OR_RETURN(RemapCall call, NewRemap("roll", TensorRef{out.base, &out1}, TensorRef{flat.base, &src1}));
    call.dims[0] = IdentityDim(out1, src1, 0);
    call.dims[0].shift = a.shift[0];
    return ShapeLaunchStatus<L>(ctx, L::Remap(call, ctx.stream));
  }
  TD_ASSIGN_OR_RETURN(RemapCall call, NewRemap("roll", out, self));
  for (int64_t d = 0; d < self.meta->dim(); ++d) {
    call.dims[d] = IdentityDim(*out.meta, *self.meta, d);
    call.dims[d].shift = a.shift[d];
  }
  return ShapeLaunchStatus<L>(ctx, L::Remap(call, ctx.stream));
}

// repeat(self, repeats): output j along dim d reads j mod self.size(d); the
// leading added dims read element 0.
template <class L>
absl::Status Repeat(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const cpu::RepeatArgs a, cpu::ReadRepeat(ctx));
  const TensorRef& self = a.self;
  const TensorRef& out = ctx.outputs[0];
  const int64_t nd = out.meta->dim(), lead = a.lead;
  if (out.meta->numel() == 0) return absl::OkStatus();  // and so every source size is > 0
  TD_ASSIGN_OR_RETURN(RemapCall call, NewRemap("repeat", out, self));
  const int64_t item = out.meta->itemsize();
  for (int64_t d = 0; d < nd; ++d) {
    call.dims[d] = d < lead ? RemapDim::Wrap(out.meta->sizes[d], out.meta->strides[d] * item, 1, 0)
                            : RemapDim::Wrap(out.meta->sizes[d], out.meta->strides[d] * item,
                                             self.meta->sizes[d - lead], self.meta->strides[d - lead] * item);
  }
  return ShapeLaunchStatus<L>(ctx, L::Remap(call, ctx.stream));
}

// `value` converted to `dtype` as the CPU's Fill converts it: the
// element's bytes, little end first.
absl::StatusOr<uint64_t> ElementBits(const Scalar& value, ScalarType dtype);

// constant_pad_nd(self, pad, value): output j along a padded dim reads
// j - before when that is inside self, else value (negative pads crop).
template <class L>
absl::Status ConstantPadNd(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  const TensorRef& out = ctx.outputs[0];
  const Shape pad = cpu::IntList(ctx.args[1]);
  const int64_t nd = self.meta->dim();
  TD_INTERNAL_CHECK(out.meta->dim() == nd && pad.size() % 2 == 0 && static_cast<int64_t>(pad.size()) <= 2 * nd,
                    "constant_pad_nd: pad was not checked");
  TD_ASSIGN_OR_RETURN(RemapCall call, NewRemap("constant_pad_nd", out, self));
  TD_ASSIGN_OR_RETURN(call.fill, ElementBits(ctx.args[2].scalar(), out.meta->dtype));
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t k = nd - 1 - d;  // pairs count from the last dim
    call.dims[d] = IdentityDim(*out.meta, *self.meta, d);
    call.dims[d].padded = true;
    call.dims[d].before = 2 * k < static_cast<int64_t>(pad.size()) ? pad[2 * k] : 0;
  }
  return ShapeLaunchStatus<L>(ctx, L::Remap(call, ctx.stream));
}

// tril / triu(self, diagonal): element (r, c) of each matrix is kept when
// c - r <= diagonal (tril) / c - r >= diagonal (triu), else 0.
template <class L>
absl::Status TrilTriu(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  const TensorRef& out = ctx.outputs[0];
  TD_RETURN_IF_ERROR(cpu::ExpectOutputSizes(ctx.op->name(), out, self.meta->sizes));
  const bool lower = ctx.op->name() == "tril";
  const int64_t nd = self.meta->dim();
  TD_INTERNAL_CHECK(nd >= 2, "tril/triu: self has fewer than 2 dims");
  TD_ASSIGN_OR_RETURN(RemapCall call, NewRemap(ctx.op->name(), out, self));
  call.op = lower ? RemapOp::kTril : RemapOp::kTriu;
  // Clamped so that r + diagonal cannot overflow; beyond +-2^62 the result
  // does not change for any representable size.
  call.diagonal = std::clamp<int64_t>(ctx.args[1].to_int(), -(int64_t{1} << 62), int64_t{1} << 62);
  for (int64_t d = 0; d < nd; ++d) call.dims[d] = IdentityDim(*out.meta, *self.meta, d);
  return ShapeLaunchStatus<L>(ctx, L::Remap(call, ctx.stream));
}

// ---- factories: arange, linspace, eye ----------------------------------------------

// arange(end) / arange.start(start, end, step): element i is start + i * step,
// in double for floating outputs and wrapping int64 for integral ones, then
// converted (the CPU kernel's formula; the meta function sized the output).
template <class L>
absl::Status ArangeImpl(KernelContext& ctx, const Scalar& start, const Scalar& step) {
  const TensorRef& out = ctx.outputs[0];
  if (out.meta->dim() != 1) return InternalErr("internal: arange: output is not 1-D");
  const ScalarType dt = out.meta->dtype;
  if (!DtypeInSet(dt, kSetNumeric)) return DtypeNotImplemented("arange", dt);
  SequenceCall call;
  call.op = SequenceOp::kArange;
  call.dtype = dt;
  call.out = out.data_at_offset();
  call.n = out.meta->sizes[0];
  call.stride = out.meta->strides[0] * out.meta->itemsize();
  if (IsFloating(dt)) {
    const double s = start.to_double(), st = step.to_double();
    std::memcpy(&call.start, &s, sizeof(s));
    std::memcpy(&call.step, &st, sizeof(st));
  } else {
    call.start = static_cast<uint64_t>(cpu::ScalarTo<int64_t>(start));
    call.step = static_cast<uint64_t>(cpu::ScalarTo<int64_t>(step));
  }
  return ShapeLaunchStatus<L>(ctx, L::Sequence(call, ctx.stream));
}

template <class L>
absl::Status Arange(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  return ArangeImpl<L>(ctx, Scalar::Int(0), Scalar::Int(1));
}

template <class L>
absl::Status ArangeStart(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  return ArangeImpl<L>(ctx, ctx.args[0].scalar(), ctx.args[2].scalar());
}

// linspace's start, end and step in the type it computes in, as the CPU
// kernel computes them (LinspaceStepT: double for float64 and integers,
// float otherwise), in call's bits. NotImplemented for a dtype the CPU
// refuses.
absl::Status SetLinspaceBounds(const Scalar& start, const Scalar& end, SequenceCall* call);

// linspace(start, end, steps): PyTorch's two-sided formula (see
// SequenceOp::kLinspace), bit for bit the CPU kernel's values.
template <class L>
absl::Status Linspace(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  const TensorRef& out = ctx.outputs[0];
  if (out.meta->dim() != 1) return InternalErr("internal: linspace: output is not 1-D");
  SequenceCall call;
  call.op = SequenceOp::kLinspace;
  call.dtype = out.meta->dtype;
  call.out = out.data_at_offset();
  call.n = out.meta->sizes[0];
  call.stride = out.meta->strides[0] * out.meta->itemsize();
  TD_RETURN_IF_ERROR(SetLinspaceBounds(ctx.args[0].scalar(), ctx.args[1].scalar(), &call));
  return ShapeLaunchStatus<L>(ctx, L::Sequence(call, ctx.stream));
}

// eye(n, m): zeros, then 1 (converted as the CPU's ScalarTo) on the
// diagonal, a strided view of the output.
template <class L>
absl::Status Eye(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  const TensorRef& out = ctx.outputs[0];
  const TensorMeta& om = *out.meta;
  if (om.dim() != 2) return InternalErr("internal: eye: output is not 2-D");
  TD_RETURN_IF_ERROR(ZeroOutput<L>(ctx, out));
  const int64_t n = std::min(om.sizes[0], om.sizes[1]);
  if (n == 0) return absl::OkStatus();
  const TensorMeta diag = cpu::ViewMeta(om, {n}, {om.strides[0] + om.strides[1]}, om.storage_offset);
  return Fill<L>(ctx, TensorRef{out.base, &diag}, Scalar::Int(1));
}

template <class L>
absl::Status RegisterShapeKernels(KernelRegistry& r, DeviceType device) {
  struct Entry {
    const char* name;
    KernelFn fn;
  };
  const Entry entries[] = {
      {"select_backward", SelectBackward<L>},
      {"slice_backward", SliceBackward<L>},
      {"diagonal_backward", DiagonalBackward<L>},
      {"flip", Flip<L>},
      {"roll", Roll<L>},
      {"repeat", Repeat<L>},
      {"constant_pad_nd", ConstantPadNd<L>},
      {"tril", TrilTriu<L>},
      {"triu", TrilTriu<L>},
      {"arange", Arange<L>},
      {"arange.start", ArangeStart<L>},
      {"linspace", Linspace<L>},
      {"eye", Eye<L>},
  };
  for (const Entry& e : entries) TD_RETURN_IF_ERROR(r.Register(device, e.name, e.fn));
  return absl::OkStatus();
}

}  // namespace tensord::cuda::ew

#endif  // TENSORD_KERNELS_CUDA_SHAPE_KERNELS_H_
