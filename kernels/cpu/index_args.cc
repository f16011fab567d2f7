// The argument reading and checking of the indexing kernels
// (index_args.h), shared by the CPU kernels and the CUDA host side.
#include "index_args.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernel_util.h"
#include "tensord/meta/shape_rules.h"

namespace tensord::cpu {

TensorMeta AtLeast1dMeta(const TensorMeta& m) {
  if (m.dim() > 0) return m;
  return ViewMeta(m, {1}, {1}, m.storage_offset);
}

absl::Status CheckIndexDtype(const char* name, const TensorMeta& index) {
  if (index.dtype != ScalarType::kInt64 && index.dtype != ScalarType::kInt32) {
    return RuntimeErr(absl::StrCat(name, "(): Expected dtype int64 for index, got ", DtypeName(index.dtype)));
  }
  return absl::OkStatus();
}

absl::StatusOr<GatherArgs> ReadGather(const KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  GatherArgs a;
  TD_ASSIGN_OR_RETURN(a.self, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(a.index, InputTensor(ctx, 2));
  TD_RETURN_IF_ERROR(CheckIndexDtype("gather", *a.index.meta));
  TD_ASSIGN_OR_RETURN(a.dim, WrapDim("gather", ctx.args[1].to_int(), a.self.meta->dim()));
  a.self1d = AtLeast1dMeta(*a.self.meta);
  a.index1d = AtLeast1dMeta(*a.index.meta);
  a.out1d = AtLeast1dMeta(*ctx.outputs[0].meta);
  const TensorMeta &self = a.self1d, &index = a.index1d;
  if (index.dim() != self.dim()) {
    return RuntimeErr("Index tensor must have the same number of dimensions as input tensor");
  }
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (d != a.dim && index.sizes[d] > self.sizes[d]) {
      return RuntimeErr(absl::StrCat("Size does not match at dimension ", d, " expected index ",
                                     ShapeToString(a.index.meta->sizes), " to be smaller than self ",
                                     ShapeToString(a.self.meta->sizes), " apart from dimension ", a.dim));
    }
  }
  TD_RETURN_IF_ERROR(ExpectOutputSizes("gather", TensorRef{nullptr, &a.out1d}, index.sizes));
  TD_INTERNAL_CHECK(a.out1d.dtype == self.dtype, "gather: output dtype");
  return a;
}

absl::StatusOr<IndexSelectArgs> ReadIndexSelect(const KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  IndexSelectArgs a;
  TD_ASSIGN_OR_RETURN(a.self, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(a.index, InputTensor(ctx, 2));
  TD_RETURN_IF_ERROR(CheckIndexDtype("index_select", *a.index.meta));
  if (a.index.meta->dim() > 1) return IndexErr("index_select(): Index is supposed to be a vector");
  TD_ASSIGN_OR_RETURN(a.dim, WrapDim("index_select", ctx.args[1].to_int(), a.self.meta->dim()));
  a.self1d = AtLeast1dMeta(*a.self.meta);
  a.sizes = a.self1d.sizes;
  a.sizes[a.dim] = a.index.meta->numel();
  // A 0-dim self gives a 0-dim result: view the output as [n] (n is 1).
  a.out = *ctx.outputs[0].meta;
  if (a.self.meta->dim() == 0 && a.out.dim() == 0) a.out = ViewMeta(a.out, {1}, {1}, a.out.storage_offset);
  TD_RETURN_IF_ERROR(ExpectOutputSizes("index_select", TensorRef{nullptr, &a.out}, a.sizes));
  TD_INTERNAL_CHECK(a.out.dtype == a.self1d.dtype, "index_select: output dtype");
  return a;
}

absl::StatusOr<TopkArgs> ReadTopk(const KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 2));
  TopkArgs a;
  TD_ASSIGN_OR_RETURN(a.self, InputTensor(ctx, 0));
  a.k = ctx.args[1].to_int();
  TD_ASSIGN_OR_RETURN(a.dim, WrapDim("topk", ctx.args[2].to_int(), a.self.meta->dim()));
  a.largest = ctx.args[3].to_bool();
  a.self1d = AtLeast1dMeta(*a.self.meta);
  const int64_t n = a.self1d.sizes[a.dim];
  if (a.k < 0 || a.k > n) {
    return RuntimeErr(absl::StrCat("topk: selected index k out of range (k is ", a.k, ", dimension ", a.dim,
                                   " has size ", n, ")"));
  }
  a.values1d = AtLeast1dMeta(*ctx.outputs[0].meta);
  a.indices1d = AtLeast1dMeta(*ctx.outputs[1].meta);
  Shape expect = a.self1d.sizes;
  expect[a.dim] = a.k;
  TD_RETURN_IF_ERROR(ExpectOutputSizes("topk", TensorRef{nullptr, &a.values1d}, expect));
  TD_RETURN_IF_ERROR(ExpectOutputSizes("topk", TensorRef{nullptr, &a.indices1d}, expect));
  TD_INTERNAL_CHECK(a.indices1d.dtype == ScalarType::kInt64, "topk: indices dtype");
  TD_INTERNAL_CHECK(a.values1d.dtype == a.self1d.dtype, "topk: values dtype");
  return a;
}

absl::StatusOr<MaskedSelectArgs> ReadMaskedSelect(const KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, -1));
  TD_INTERNAL_CHECK(ctx.outputs.empty() && ctx.allocate_output, "masked_select: outputs preallocated");
  MaskedSelectArgs a;
  TD_ASSIGN_OR_RETURN(a.self, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(a.mask, InputTensor(ctx, 1));
  if (a.mask.meta->dtype != ScalarType::kBool && a.mask.meta->dtype != ScalarType::kUInt8) {
    return RuntimeErr("masked_select: expected BoolTensor or ByteTensor for mask");
  }
  // Broadcast self and mask (NumPy rules, PyTorch's message).
  TD_ASSIGN_OR_RETURN(a.shape, BroadcastShapes("masked_select", {a.self.meta->sizes, a.mask.meta->sizes}));
  return a;
}

absl::StatusOr<MaskedScatterArgs> ReadMaskedScatter(const KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  MaskedScatterArgs a;
  TD_ASSIGN_OR_RETURN(a.self, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(a.mask, InputTensor(ctx, 1));
  TD_ASSIGN_OR_RETURN(a.source, InputTensor(ctx, 2));
  TD_INTERNAL_CHECK(a.source.meta->dtype == ctx.outputs[0].meta->dtype, "masked_scatter: source dtype");
  TD_INTERNAL_CHECK(a.mask.meta->dtype == ScalarType::kBool || a.mask.meta->dtype == ScalarType::kUInt8,
                    "masked_scatter: mask dtype");
  return a;
}

absl::StatusOr<int64_t> CheckIndexAdd(const KernelContext& ctx, const TensorMeta& out, const TensorMeta& index,
                                      const TensorMeta& source) {
  TD_INTERNAL_CHECK(index.dtype == ScalarType::kInt64 || index.dtype == ScalarType::kInt32,
                    "index_add: index dtype");
  TD_INTERNAL_CHECK(source.dtype == out.dtype, "index_add: source dtype");
  TD_INTERNAL_CHECK(index.dim() <= 1, "index_add: index is not a vector");
  const TensorMeta om = AtLeast1dMeta(out), sm = AtLeast1dMeta(source);
  const int64_t nd = om.dim();
  int64_t dim = ctx.args[1].to_int();
  if (dim < 0) dim += nd;
  TD_INTERNAL_CHECK(dim >= 0 && dim < nd && sm.dim() == nd, "index_add: shapes were not checked");
  TD_INTERNAL_CHECK(index.numel() == sm.sizes[dim], "index_add: index length");
  for (int64_t d = 0; d < nd; ++d) {
    TD_INTERNAL_CHECK(d == dim || sm.sizes[d] == om.sizes[d], "index_add: source shape");
  }
  return dim;
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

absl::StatusOr<IndexTensorArgs> ReadIndexTensor(const KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  IndexTensorArgs a;
  TD_ASSIGN_OR_RETURN(a.self, InputTensor(ctx, 0));
  const TensorList& list = ctx.args[1].tensor_list();
  const TensorRef& out = ctx.outputs[0];
  const TensorMeta& sm = *a.self.meta;
  if (static_cast<int64_t>(list.size()) > sm.dim()) {
    return IndexErr(absl::StrCat("too many indices for tensor of dimension ", sm.dim(), " (got ", list.size(), ")"));
  }
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i] == nullptr) continue;
    TD_ASSIGN_OR_RETURN(TensorRef t, InputTensorOf(ctx, list[i]));
    if (t.meta->dtype == ScalarType::kBool || t.meta->dtype == ScalarType::kUInt8) {
      return NotImplementedErr(
          "index.Tensor: boolean mask indices give a data-dependent shape; use masked_select or nonzero");
    }
    if (t.meta->dtype != ScalarType::kInt64 && t.meta->dtype != ScalarType::kInt32) {
      return IndexErr("tensors used as indices must be long, int, byte or bool tensors");
    }
    a.ops.push_back(AdvIndexOperand{static_cast<int64_t>(i), t.data_at_offset(), t.meta->dtype, t.meta->sizes,
                                    t.meta->strides});
  }
  if (a.ops.empty()) {
    TD_RETURN_IF_ERROR(ExpectOutputSizes("index", out, sm.sizes));
    return a;
  }
  if (!MakeAdvLayout(a.ops, sm.sizes, &a.layout)) {
    std::string text;
    for (size_t k = 0; k < a.ops.size(); ++k) absl::StrAppend(&text, k ? ", " : "", ShapeToString(a.ops[k].sizes));
    return IndexErr(
        absl::StrCat("shape mismatch: indexing tensors could not be broadcast together with shapes ", text));
  }
  TD_RETURN_IF_ERROR(ExpectOutputSizes("index", out, a.layout.sizes));
  TD_INTERNAL_CHECK(out.meta->dtype == sm.dtype, "index: output dtype");
  return a;
}

absl::StatusOr<IndexPutArgs> ReadIndexPut(const KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  IndexPutArgs a;
  TD_ASSIGN_OR_RETURN(a.self, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(a.values, InputTensor(ctx, 2));
  a.accumulate = ctx.args[3].to_bool();
  a.indices = &ctx.args[1].tensor_list();
  const TensorRef& out = ctx.outputs[0];
  TD_RETURN_IF_ERROR(ExpectOutputSizes("index_put", out, a.self.meta->sizes));
  TD_INTERNAL_CHECK(a.values.meta->dtype == out.meta->dtype, "index_put: values dtype");
  return a;
}

absl::Status CheckIndexPutIndex(const TensorMeta& m, int64_t pos, const Shape& self_sizes) {
  const int64_t nd = static_cast<int64_t>(self_sizes.size());
  if (m.dtype == ScalarType::kBool || m.dtype == ScalarType::kUInt8) {
    if (pos + m.dim() > nd) {
      return IndexErr(absl::StrCat("index_put: too many indices for tensor of dimension ", nd));
    }
    for (int64_t j = 0; j < m.dim(); ++j) {
      if (m.sizes[j] != self_sizes[pos + j]) {
        return IndexErr(absl::StrCat("index_put: The shape of the mask ", ShapeToString(m.sizes), " at index ", j,
                                     " does not match the shape of the indexed tensor ", ShapeToString(self_sizes),
                                     " at index ", pos + j));
      }
    }
    if (m.dim() == 0) {
      // A 0-dim mask adds a dim of size 1 (true) or 0 (false): not supported.
      return NotImplementedErr("index_put: 0-dim boolean mask indices are not supported");
    }
    return absl::OkStatus();
  }
  if (m.dtype == ScalarType::kInt64 || m.dtype == ScalarType::kInt32) {
    if (pos >= nd) return IndexErr(absl::StrCat("index_put: too many indices for tensor of dimension ", nd));
    return absl::OkStatus();
  }
  return IndexErr("index_put: tensors used as indices must be long, int, byte or bool tensors");
}

absl::StatusOr<AdvLayout> IndexPutLayout(const std::vector<AdvIndexOperand>& ops, const Shape& self_sizes) {
  AdvLayout layout;
  if (!MakeAdvLayout(ops, self_sizes, &layout)) {
    return IndexErr("index_put: shape mismatch: indexing tensors could not be broadcast together");
  }
  return layout;
}

absl::StatusOr<Shape> IndexPutValueStrides(const TensorMeta& values, const Shape& result_sizes) {
  const int64_t nr = static_cast<int64_t>(result_sizes.size());
  Shape strides(nr, 0);
  bool fits = values.dim() <= nr;
  for (int64_t i = 0; fits && i < values.dim(); ++i) {
    const int64_t r = nr - values.dim() + i;
    if (values.sizes[i] == result_sizes[r]) {
      strides[r] = values.strides[i];
    } else if (values.sizes[i] != 1) {
      fits = false;
    }
  }
  if (!fits) {
    return RuntimeErr(absl::StrCat("index_put: shape mismatch: value tensor of shape ", ShapeToString(values.sizes),
                                   " cannot be broadcast to indexing result of shape ", ShapeToString(result_sizes)));
  }
  return strides;
}

}  // namespace tensord::cpu
