// The non-template parts of the CUDA advanced-indexing kernels' host side
// (advindex_kernels.h).
#include "advindex_kernels.h"

#include <algorithm>

namespace tensord::cuda::ew {

absl::Status BuildAdvGeometry(absl::string_view op, const Shape& shape, const Shape (&strides)[3],
                              AdvIndexCall* call) {
  Shape filled[3];
  for (int k = 0; k < 3; ++k) {
    filled[k] = strides[k].empty() ? Shape(shape.size(), 0) : strides[k];
    TD_INTERNAL_CHECK(filled[k].size() == shape.size(), op, ": index geometry strides");
  }
  const int64_t* ptrs[3] = {filled[0].data(), filled[1].data(), filled[2].data()};
  if (!BuildGeometry(static_cast<int>(shape.size()), shape.data(), 3, ptrs, &call->geometry)) {
    return NotImplementedErr(absl::StrCat(op, ": CUDA indexing supports at most ", kMaxDims,
                                          " dimensions after merging; got ", ShapeToString(shape)));
  }
  return absl::OkStatus();
}

Shape RowMajorByteStrides(const Shape& shape, int64_t item) {
  Shape s(shape.size());
  int64_t step = item;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = step;
    step *= std::max<int64_t>(shape[i], 1);
  }
  return s;
}

absl::Status SetAdvErrorWord(const KernelContext& ctx, AdvIndexCall* call) {
  TD_INTERNAL_CHECK(ctx.error_word != nullptr, ctx.op->full_name(), ": the stream gave no error word");
  call->error_word = static_cast<DeviceErrorWord*>(ctx.error_word);
  call->op_id = ctx.op->id;
  return absl::OkStatus();
}

}  // namespace tensord::cuda::ew
