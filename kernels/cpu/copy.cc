// Copying CPU kernels: clone, and the copy half of ops whose meta function
// may alias or copy (contiguous, reshape, flatten, to.dtype, to.device — the
// dispatcher calls these only when the meta returned alias_of = -1); cat and
// stack; the in-place copy_, zero_ and fill_ (self is outputs[0]).
#include <memory>

#include "kernel_util.h"

namespace tensord::cpu {
namespace {

// out = convert(self) with the same shape (clone, contiguous, to.dtype).
absl::Status CopyOp(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  TD_RETURN_IF_ERROR(ExpectOutputSizes(ctx.op->full_name(), ctx.outputs[0], self.meta->sizes));
  return CopyConvert(ctx.outputs[0], self);
}

// reshape / flatten when the result cannot be a view: copy in row-major order.
absl::Status ReshapeCopy(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  return CopyReshape(ctx.outputs[0], self);
}

absl::Status ToDevice(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  // The copy between devices is the dispatcher's (the Backend copies): it
  // hands this kernel an input already on the kernel's device, whatever
  // device its meta names, so the kernel copies within host memory. Only
  // the output must be on the device the kernel runs on.
  if (ctx.outputs[0].meta->device != ctx.device) {
    return NotImplementedErr(absl::StrCat("to.device: a kernel running on ", ctx.device.ToString(),
                                          " cannot write an output on ", ctx.outputs[0].meta->device.ToString()));
  }
  TD_RETURN_IF_ERROR(ExpectOutputSizes("to", ctx.outputs[0], self.meta->sizes));
  return CopyConvert(ctx.outputs[0], self);
}

// PyTorch's legacy rule: a 1-D tensor of size 0 may appear in cat with any
// other shapes and is skipped.
bool SkippedInCat(const TensorMeta& t) { return t.dim() == 1 && t.sizes[0] == 0; }

absl::Status Cat(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  const TensorList& list = ctx.args[0].tensor_list();
  const TensorRef& out = ctx.outputs[0];
  const TensorMeta& om = *out.meta;
  if (om.dim() == 0) return InternalErr("internal: cat: 0-dim output");
  TD_ASSIGN_OR_RETURN(int64_t dim, WrapDim("cat", ctx.args[1].to_int(), om.dim()));
  int64_t offset = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    TD_ASSIGN_OR_RETURN(TensorRef t, InputTensorOf(ctx, list[i]));
    if (SkippedInCat(*t.meta) && om.dim() != 1) continue;
    // Every write below stays inside `out`: shapes must agree off `dim` and
    // the slices must fit along it.
    if (t.meta->dim() != om.dim()) {
      return InternalErr(absl::StrCat("internal: cat: tensor ", i, " has ", t.meta->dim(),
                                      " dims, output has ", om.dim()));
    }
    for (int64_t d = 0; d < om.dim(); ++d) {
      if (d != dim && t.meta->sizes[d] != om.sizes[d]) {
        return InternalErr(absl::StrCat("internal: cat: tensor ", i, " has sizes ",
                                        ShapeToString(t.meta->sizes), ", output ",
                                        ShapeToString(om.sizes)));
      }
    }
    const int64_t len = t.meta->sizes[dim];
    if (offset + len > om.sizes[dim]) {
      return InternalErr("internal: cat: inputs exceed the output along the cat dim");
    }
    Shape sizes = om.sizes;
    sizes[dim] = len;
    TensorMeta view = ViewMeta(om, sizes, om.strides, om.storage_offset + offset * om.strides[dim]);
    TD_RETURN_IF_ERROR(CopyConvert(TensorRef{out.base, &view}, t));
    offset += len;
  }
  if (offset != om.sizes[dim]) {
    return InternalErr(absl::StrCat("internal: cat: inputs cover ", offset, " of ", om.sizes[dim]));
  }
  return absl::OkStatus();
}

absl::Status Stack(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  const TensorList& list = ctx.args[0].tensor_list();
  const TensorRef& out = ctx.outputs[0];
  const TensorMeta& om = *out.meta;
  TD_ASSIGN_OR_RETURN(int64_t dim, WrapDim("stack", ctx.args[1].to_int(), om.dim()));
  if (om.sizes[dim] != static_cast<int64_t>(list.size())) {
    return InternalErr("internal: stack: output size does not match the number of tensors");
  }
  Shape sizes = om.sizes, strides = om.strides;
  sizes.erase(sizes.begin() + dim);
  strides.erase(strides.begin() + dim);
  for (size_t i = 0; i < list.size(); ++i) {
    TD_ASSIGN_OR_RETURN(TensorRef t, InputTensorOf(ctx, list[i]));
    if (t.meta->sizes != sizes) {
      return InternalErr(absl::StrCat("internal: stack: tensor ", i, " has sizes ",
                                      ShapeToString(t.meta->sizes), ", expected ",
                                      ShapeToString(sizes)));
    }
    TensorMeta view = ViewMeta(om, sizes, strides,
                               om.storage_offset + static_cast<int64_t>(i) * om.strides[dim]);
    TD_RETURN_IF_ERROR(CopyConvert(TensorRef{out.base, &view}, t));
  }
  return absl::OkStatus();
}

// copy_(self, src, non_blocking): self = src converted to self's dtype and
// broadcast to its shape. self is outputs[0]. When src lies in self's storage
// in another layout, src is first copied out so no element is read after it
// was overwritten; src identical to self is a no-op.
absl::Status CopyInPlace(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef src, InputTensor(ctx, 1));
  const TensorRef& out = ctx.outputs[0];
  if (src.base == out.base && out.meta->numel() > 0) {
    if (*src.meta == *out.meta) return absl::OkStatus();
    TD_ASSIGN_OR_RETURN(std::unique_ptr<TempTensor> tmp, TempTensor::Make(src.meta->sizes, src.meta->dtype));
    TD_RETURN_IF_ERROR(CopyConvert(tmp->ref(), src));
    return CopyConvert(out, tmp->ref());
  }
  return CopyConvert(out, src);
}

// zero_(self) / fill_.Scalar(self, value): every element of self (outputs[0]).
absl::Status FillInPlace(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  const Scalar value = ctx.args.size() > 1 ? ctx.args[1].scalar() : Scalar::Int(0);
  return Fill(ctx.outputs[0], value);
}

}  // namespace

absl::Status RegisterCopyKernels(KernelRegistry& r) {
  struct Entry {
    const char* name;
    KernelFn fn;
  };
  const Entry entries[] = {
      {"clone", CopyOp},       {"contiguous", CopyOp},
      {"to.dtype", CopyOp},    {"to.device", ToDevice},
      {"reshape", ReshapeCopy}, {"flatten.using_ints", ReshapeCopy},
      {"cat", Cat},            {"stack", Stack},
      {"copy_", CopyInPlace},  {"zero_", FillInPlace},   {"fill_.Scalar", FillInPlace},
  };
  for (const Entry& e : entries) TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, e.name, e.fn));
  return absl::OkStatus();
}

}  // namespace tensord::cpu
