// Copying CPU kernels: clone, and the copy half of ops whose meta function
// may alias or copy (contiguous, reshape, flatten, to.dtype, to.device — the
// dispatcher calls these only when the meta returned alias_of = -1); cat and
// stack; the in-place copy_, zero_ and fill_ (self is outputs[0]).
#include <memory>
#include <vector>

#include "copy_args.h"
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
  TD_ASSIGN_OR_RETURN(const TensorRef self, ReadToDevice(ctx));
  return CopyConvert(ctx.outputs[0], self);
}

// Each input copied into its part of the output.
absl::Status CopyPieces(const TensorRef& out, const std::vector<CopyPiece>& pieces) {
  for (const CopyPiece& p : pieces) TD_RETURN_IF_ERROR(CopyConvert(TensorRef{out.base, &p.view}, p.src));
  return absl::OkStatus();
}

absl::Status Cat(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const std::vector<CopyPiece> pieces, ReadCat(ctx));
  return CopyPieces(ctx.outputs[0], pieces);
}

absl::Status Stack(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const std::vector<CopyPiece> pieces, ReadStack(ctx));
  return CopyPieces(ctx.outputs[0], pieces);
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
