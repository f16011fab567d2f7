// The argument reading and checking of the copying kernels (copy_args.h),
// shared by the CPU kernels and the CUDA host side.
#include "copy_args.h"

#include "absl/strings/str_cat.h"
#include "kernel_util.h"

namespace tensord::cpu {

absl::StatusOr<TensorRef> ReadToDevice(const KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  // The copy between devices is the dispatcher's (the Backend copies): it
  // hands this kernel an input already on the kernel's device, whatever
  // device its meta names, so the kernel copies within its device's memory.
  // Only the output must be on the device the kernel runs on.
  if (ctx.outputs[0].meta->device != ctx.device) {
    return NotImplementedErr(absl::StrCat("to.device: a kernel running on ", ctx.device.ToString(),
                                          " cannot write an output on ", ctx.outputs[0].meta->device.ToString()));
  }
  TD_RETURN_IF_ERROR(ExpectOutputSizes("to", ctx.outputs[0], self.meta->sizes));
  return self;
}

namespace {

// PyTorch's legacy rule: a 1-D tensor of size 0 may appear in cat with any
// other shapes and is skipped.
bool SkippedInCat(const TensorMeta& t) { return t.dim() == 1 && t.sizes[0] == 0; }

}  // namespace

absl::StatusOr<std::vector<CopyPiece>> ReadCat(const KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  const TensorList& list = ctx.args[0].tensor_list();
  const TensorMeta& om = *ctx.outputs[0].meta;
  if (om.dim() == 0) return InternalErr("internal: cat: 0-dim output");
  TD_ASSIGN_OR_RETURN(int64_t dim, WrapDim("cat", ctx.args[1].to_int(), om.dim()));
  std::vector<CopyPiece> pieces;
  int64_t offset = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    TD_ASSIGN_OR_RETURN(TensorRef t, InputTensorOf(ctx, list[i]));
    if (SkippedInCat(*t.meta) && om.dim() != 1) continue;
    // Every write stays inside the output: shapes must agree off `dim` and
    // the slices must fit along it.
    if (t.meta->dim() != om.dim()) {
      return InternalErr(absl::StrCat("internal: cat: tensor ", i, " has ", t.meta->dim(), " dims, output has ",
                                      om.dim()));
    }
    for (int64_t d = 0; d < om.dim(); ++d) {
      if (d != dim && t.meta->sizes[d] != om.sizes[d]) {
        return InternalErr(absl::StrCat("internal: cat: tensor ", i, " has sizes ", ShapeToString(t.meta->sizes),
                                        ", output ", ShapeToString(om.sizes)));
      }
    }
    const int64_t len = t.meta->sizes[dim];
    if (offset + len > om.sizes[dim]) return InternalErr("internal: cat: inputs exceed the output along the cat dim");
    Shape sizes = om.sizes;
    sizes[dim] = len;
    pieces.push_back(CopyPiece{t, ViewMeta(om, sizes, om.strides, om.storage_offset + offset * om.strides[dim])});
    offset += len;
  }
  if (offset != om.sizes[dim]) {
    return InternalErr(absl::StrCat("internal: cat: inputs cover ", offset, " of ", om.sizes[dim]));
  }
  return pieces;
}

absl::StatusOr<std::vector<CopyPiece>> ReadStack(const KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  const TensorList& list = ctx.args[0].tensor_list();
  const TensorMeta& om = *ctx.outputs[0].meta;
  TD_ASSIGN_OR_RETURN(int64_t dim, WrapDim("stack", ctx.args[1].to_int(), om.dim()));
  if (om.sizes[dim] != static_cast<int64_t>(list.size())) {
    return InternalErr("internal: stack: output size does not match the number of tensors");
  }
  Shape sizes = om.sizes, strides = om.strides;
  sizes.erase(sizes.begin() + dim);
  strides.erase(strides.begin() + dim);
  std::vector<CopyPiece> pieces;
  for (size_t i = 0; i < list.size(); ++i) {
    TD_ASSIGN_OR_RETURN(TensorRef t, InputTensorOf(ctx, list[i]));
    if (t.meta->sizes != sizes) {
      return InternalErr(absl::StrCat("internal: stack: tensor ", i, " has sizes ", ShapeToString(t.meta->sizes),
                                      ", expected ", ShapeToString(sizes)));
    }
    pieces.push_back(
        CopyPiece{t, ViewMeta(om, sizes, strides, om.storage_offset + static_cast<int64_t>(i) * om.strides[dim])});
  }
  return pieces;
}

}  // namespace tensord::cpu
