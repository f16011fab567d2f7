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

bool MakeAdvLayout(const std::vector<AdvIndexOperand>& ops, const Shape& self_sizes, AdvLayout* layout) {
  Shape& b = layout->b;
  b.clear();
  for (const AdvIndexOperand& op : ops) b.resize(std::max(b.size(), op.sizes.size()), 1);
  for (const AdvIndexOperand& op : ops) {
    const size_t off = b.size() - op.sizes.size();
    for (size_t i = 0; i < op.sizes.size(); ++i) {
      const int64_t s = op.sizes[i];
      int64_t& bs = b[off + i];
      if (s == bs || s == 1) continue;
      if (bs != 1) return false;
      bs = s;
    }
  }
  bool adjacent = true;
  for (size_t k = 1; k < ops.size(); ++k) adjacent &= ops[k].dim == ops[k - 1].dim + 1;
  layout->sizes.clear();
  layout->self_dim_at.clear();
  auto push_b = [&] {
    layout->first_b = static_cast<int64_t>(layout->sizes.size());
    for (int64_t s : b) {
      layout->sizes.push_back(s);
      layout->self_dim_at.push_back(-1);
    }
  };
  if (!adjacent || ops.empty()) push_b();
  for (int64_t d = 0; d < static_cast<int64_t>(self_sizes.size()); ++d) {
    if (adjacent && !ops.empty() && d == ops.front().dim) push_b();
    if (std::any_of(ops.begin(), ops.end(), [d](const AdvIndexOperand& o) { return o.dim == d; })) continue;
    layout->sizes.push_back(self_sizes[d]);
    layout->self_dim_at.push_back(d);
  }
  return true;
}

absl::Status SetAdvErrorWord(const KernelContext& ctx, AdvIndexCall* call) {
  TD_INTERNAL_CHECK(ctx.error_word != nullptr, ctx.op->full_name(), ": the stream gave no error word");
  call->error_word = static_cast<DeviceErrorWord*>(ctx.error_word);
  call->op_id = ctx.op->id;
  return absl::OkStatus();
}

}  // namespace tensord::cuda::ew
