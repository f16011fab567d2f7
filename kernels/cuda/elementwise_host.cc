// Host-side helpers of the CUDA elementwise kernels (see elementwise_host.h).
#include "elementwise_host.h"

#include <cstring>
#include <vector>

#include "../cpu/dtypes.h"
#include "../cpu/strided_loop.h"
#include "absl/strings/str_cat.h"
#include "tensord/meta/errors.h"

namespace tensord::cuda {

absl::StatusOr<ElementwiseIter> MakeIter(absl::string_view op, const TensorRef& out,
                                         std::initializer_list<EwInput> inputs) {
  const int num_operands = 1 + static_cast<int>(inputs.size());
  if (num_operands > kMaxOperands) {
    return InternalErr(absl::StrCat("internal: ", op, ": ", inputs.size(), " inputs, at most ",
                                    kMaxOperands - 1, " supported"));
  }
  const Shape& shape = out.meta->sizes;
  std::vector<Shape> strides;
  strides.reserve(static_cast<size_t>(num_operands));
  ElementwiseIter it;
  it.num_operands = num_operands;
  // The output, whose own strides (in bytes) walk its shape.
  {
    TD_ASSIGN_OR_RETURN(Shape s, cpu::BroadcastByteStrides(*out.meta, shape));
    strides.push_back(std::move(s));
    it.operands[0].data = out.data_at_offset();
    it.operands[0].dtype = out.meta->dtype;
  }
  int k = 1;
  for (const EwInput& in : inputs) {
    ElementwiseOperand& o = it.operands[k++];
    if (in.tensor == nullptr) {
      strides.push_back(Shape(shape.size(), 0));
      o.is_constant = true;
      o.value = in.value;
      continue;
    }
    TD_ASSIGN_OR_RETURN(Shape s, cpu::BroadcastByteStrides(*in.tensor->meta, shape));
    strides.push_back(std::move(s));
    o.data = in.tensor->data_at_offset();
    o.dtype = in.tensor->meta->dtype;
  }
  std::vector<const int64_t*> ptrs;
  for (const Shape& s : strides) ptrs.push_back(s.data());
  if (!BuildGeometry(static_cast<int>(shape.size()), shape.data(), num_operands, ptrs.data(), &it.geometry)) {
    return NotImplementedErr(absl::StrCat(op, ": CUDA elementwise kernels support at most ", kMaxDims,
                                          " dimensions after merging contiguous ones; got a tensor of sizes ",
                                          ShapeToString(shape)));
  }
  return it;
}

uint64_t ScalarBits(const Scalar& s, ScalarType t) {
  uint64_t bits = 0;
  (void)cpu::Dispatch<cpu::kSetAll>(t, "scalar", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const cpu::ComputeT<T> v = cpu::ScalarTo<T>(s);
    static_assert(sizeof(v) <= sizeof(bits), "a compute value fits a constant's bits");
    std::memcpy(&bits, &v, sizeof(v));
    return absl::OkStatus();
  });
  return bits;
}

absl::Status LaunchError(absl::string_view op, int code, absl::string_view cuda_message) {
  switch (code) {
    case kLaunchOk: return absl::OkStatus();
    case kLaunchBadOperands:
      return InternalErr(absl::StrCat("internal: ", op, ": the CUDA elementwise launch does not match its functor's operands"));
    case kLaunchBadDtype:
      return InternalErr(absl::StrCat("internal: ", op, ": no CUDA functor instance for this dtype"));
    case kLaunchBadOp:
      return InternalErr(absl::StrCat("internal: ", op, ": unknown CUDA elementwise functor"));
    default:
      return InternalErr(absl::StrCat(op, ": CUDA kernel launch failed: ", cuda_message, " (CUDA error ", code, ")"));
  }
}

}  // namespace tensord::cuda
