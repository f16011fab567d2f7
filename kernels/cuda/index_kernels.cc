// The non-template parts of the CUDA indexing kernels' host side
// (index_kernels.h).
#include "index_kernels.h"

#include <cstring>
#include <vector>

#include "../cpu/dtypes.h"

namespace tensord::cuda::ew {

absl::Status BuildIndexGeometry(absl::string_view op, const Shape& shape, const Shape (&strides)[3],
                                IndexCall* call) {
  for (const Shape& s : strides) TD_INTERNAL_CHECK(s.size() == shape.size(), op, ": index geometry strides");
  const int64_t* ptrs[3] = {strides[0].data(), strides[1].data(), strides[2].data()};
  if (!BuildGeometry(static_cast<int>(shape.size()), shape.data(), 3, ptrs, &call->geometry)) {
    return NotImplementedErr(absl::StrCat(op, ": CUDA indexing supports at most ", kMaxDims,
                                          " dimensions after merging; got ", ShapeToString(shape)));
  }
  return absl::OkStatus();
}

absl::Status SetAlpha(const char* name, ScalarType dtype, const Scalar& alpha, IndexCall* call) {
  return cpu::Dispatch<cpu::kSetAllButF8>(dtype, name, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    // The CPU's compute types (float for the narrow floats) have the same
    // bytes as the GPU's (cuda_dtypes.h).
    const cpu::ComputeT<T> a = cpu::ScalarTo<T>(alpha);
    static_assert(sizeof(a) <= sizeof(call->alpha), "alpha's bytes fit");
    call->alpha = 0;
    std::memcpy(&call->alpha, &a, sizeof(a));
    return absl::OkStatus();
  });
}

absl::Status SetErrorWord(const KernelContext& ctx, IndexCall* call) {
  TD_INTERNAL_CHECK(ctx.error_word != nullptr, ctx.op->full_name(), ": the stream gave no error word");
  call->error_word = static_cast<DeviceErrorWord*>(ctx.error_word);
  call->op_id = ctx.op->id;
  return absl::OkStatus();
}

}  // namespace tensord::cuda::ew
