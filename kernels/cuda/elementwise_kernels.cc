// The non-template helpers of elementwise_kernels.h.
#include "elementwise_kernels.h"

namespace tensord::cuda::ew {

absl::StatusOr<BinaryArgs> ReadBinaryArgs(const KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  BinaryArgs args;
  TD_ASSIGN_OR_RETURN(args.self, InputTensor(ctx, 0));
  if (ctx.args[1].is_tensor()) {
    TD_ASSIGN_OR_RETURN(args.other_tensor, InputTensor(ctx, 1));
  } else {
    args.other_scalar = ctx.args[1].scalar();
  }
  return args;
}

absl::StatusOr<ScalarType> CompareDtype(const char* name, const BinaryArgs& args) {
  PromotionOperand ops[2];
  ops[0].tensor = args.self.meta;
  if (args.other_scalar) {
    ops[1].scalar = &*args.other_scalar;
  } else {
    ops[1].tensor = args.other_tensor.meta;
  }
  return ResultType(name, ops);
}

absl::StatusOr<EwInput> TensorOrScalar(const KernelContext& ctx, size_t i, ScalarType dtype, TensorRef& holder) {
  if (ctx.args[i].is_tensor()) {
    TD_ASSIGN_OR_RETURN(holder, InputTensor(ctx, i));
    return EwInput::Of(holder);
  }
  return EwInput::Constant(ScalarBits(ctx.args[i].scalar(), dtype));
}

}  // namespace tensord::cuda::ew
