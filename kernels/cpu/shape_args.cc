// The argument reading and checking of the view-backward kernels and roll
// (shape_args.h), shared by the CPU kernels and the CUDA host side.
#include "shape_args.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernel_util.h"
#include "tensord/meta/shape_rules.h"

namespace tensord::cpu {

namespace {

// select_backward / slice_backward (`name`, the backward of `view`): grad
// into `a`, outputs[0] checked against input_sizes, and the dim argument
// wrapped. IndexError for a 0-dim input.
absl::StatusOr<int64_t> ReadViewBackwardDim(const KernelContext& ctx, const char* name, const char* view,
                                            ViewBackwardArgs* a) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(a->grad, InputTensor(ctx, 0));
  TD_RETURN_IF_ERROR(ExpectOutputSizes(name, ctx.outputs[0], IntList(ctx.args[1])));
  const int64_t nd = ctx.outputs[0].meta->dim();
  if (nd == 0) return IndexErr(absl::StrCat(name, ": ", view, "() cannot be applied to a 0-dim tensor."));
  int64_t dim = ctx.args[2].to_int();
  if (dim < 0) dim += nd;
  TD_INTERNAL_CHECK(dim >= 0 && dim < nd, name, ": dim");
  return dim;
}

}  // namespace

absl::StatusOr<ViewBackwardArgs> ReadSelectBackward(const KernelContext& ctx) {
  ViewBackwardArgs a;
  TD_ASSIGN_OR_RETURN(const int64_t dim, ReadViewBackwardDim(ctx, "select_backward", "select", &a));
  int64_t index = ctx.args[3].to_int();
  const TensorMeta& om = *ctx.outputs[0].meta;
  const int64_t size = om.sizes[dim];
  if (index < -size || index >= size) {
    return IndexErr(absl::StrCat("select_backward: select(): index ", index, " out of range for tensor of size ",
                                 ShapeToString(om.sizes), " at dimension ", dim));
  }
  if (index < 0) index += size;
  Shape vs = om.sizes, vst = om.strides;
  vs.erase(vs.begin() + dim);
  vst.erase(vst.begin() + dim);
  a.view = ViewMeta(om, vs, vst, om.storage_offset + index * om.strides[dim]);
  return a;
}

absl::StatusOr<ViewBackwardArgs> ReadSliceBackward(const KernelContext& ctx) {
  ViewBackwardArgs a;
  TD_ASSIGN_OR_RETURN(const int64_t dim, ReadViewBackwardDim(ctx, "slice_backward", "slice", &a));
  int64_t start = ctx.args[3].to_int();
  int64_t end = ctx.args[4].to_int();
  const int64_t step = ctx.args[5].to_int();
  const TensorMeta& om = *ctx.outputs[0].meta;
  if (step <= 0) return RuntimeErr("slice_backward: slice step must be positive");
  const int64_t size = om.sizes[dim];
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::min(std::max<int64_t>(start, 0), size);
  end = std::min(std::max(end, start), size);
  const int64_t len = end - start;
  Shape vs = om.sizes, vst = om.strides;
  vs[dim] = len == 0 ? 0 : 1 + (len - 1) / step;
  vst[dim] = om.strides[dim] * step;
  a.view = ViewMeta(om, vs, vst, om.storage_offset + start * om.strides[dim]);
  return a;
}

absl::StatusOr<ViewBackwardArgs> ReadDiagonalBackward(const KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  ViewBackwardArgs a;
  TD_ASSIGN_OR_RETURN(a.grad, InputTensor(ctx, 0));
  const Shape sizes = IntList(ctx.args[1]);
  const TensorRef& out = ctx.outputs[0];
  TD_RETURN_IF_ERROR(ExpectOutputSizes("diagonal_backward", out, sizes));
  TD_ASSIGN_OR_RETURN(a.view, DiagonalView("diagonal_backward", *out.meta, ctx.args[2].to_int(),
                                           ctx.args[3].to_int(), ctx.args[4].to_int()));
  return a;
}

absl::StatusOr<FlipArgs> ReadFlip(const KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  FlipArgs a;
  TD_ASSIGN_OR_RETURN(a.self, InputTensor(ctx, 0));
  TD_RETURN_IF_ERROR(ExpectOutputSizes("flip", ctx.outputs[0], a.self.meta->sizes));
  const int64_t nd = a.self.meta->dim();
  a.flipped.assign(static_cast<size_t>(nd), false);
  for (int64_t d : IntList(ctx.args[1])) {
    d = WrapDimUnchecked(d, nd);
    if (d >= 0 && d < nd) a.flipped[d] = true;
  }
  return a;
}

absl::StatusOr<RepeatArgs> ReadRepeat(const KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  RepeatArgs a;
  TD_ASSIGN_OR_RETURN(a.self, InputTensor(ctx, 0));
  a.lead = ctx.outputs[0].meta->dim() - a.self.meta->dim();
  TD_INTERNAL_CHECK(a.lead >= 0, "repeat: output has fewer dims than self");
  return a;
}

absl::StatusOr<RollArgs> ReadRoll(const KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  RollArgs a;
  TD_ASSIGN_OR_RETURN(a.self, InputTensor(ctx, 0));
  const TensorRef& out = ctx.outputs[0];
  TD_RETURN_IF_ERROR(ExpectOutputSizes("roll", out, a.self.meta->sizes));
  const Shape shifts = IntList(ctx.args[1]);
  const Shape dims = IntList(ctx.args[2]);
  const int64_t numel = a.self.meta->numel();
  const int64_t nd = a.self.meta->dim();
  a.flat = dims.empty();
  a.shift.assign(a.flat ? 1 : static_cast<size_t>(nd), 0);
  if (numel == 0) return a;
  if (a.flat) {
    TD_INTERNAL_CHECK(shifts.size() == 1 && out.meta->is_contiguous(), "roll: flattened roll needs a contiguous output");
    a.shift[0] = (numel - ((shifts[0] % numel) + numel) % numel) % numel;  // out[j] = in[j - shift]
    return a;
  }
  TD_INTERNAL_CHECK(shifts.size() == dims.size(), "roll: shifts and dims were not checked");
  Shape total(nd, 0);  // net shift per dim, in [0, size)
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = WrapDimUnchecked(dims[i], nd);
    TD_INTERNAL_CHECK(d >= 0 && d < nd, "roll: dim was not checked");
    const int64_t n = a.self.meta->sizes[d];
    total[d] = (total[d] + (shifts[i] % n) + n) % n;
  }
  for (int64_t d = 0; d < nd; ++d) {
    a.shift[d] = (a.self.meta->sizes[d] - total[d]) % a.self.meta->sizes[d];  // out[j] = in[j - total]
  }
  return a;
}

}  // namespace tensord::cpu
