// Scatter-style CPU kernels (what derivative formulas call): scatter_add,
// index_add, index_put, masked_scatter, select_backward and slice_backward.
// Each output is fresh storage (the meta function's layout): it starts as a
// copy of self (or zeros) and then receives values at positions read from an
// index or mask tensor. Every index is range-checked before the element it
// names is touched: a bad index is an error naming the op, never a write
// outside the tensor.
#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "index_args.h"
#include "kernel_util.h"
#include "shape_args.h"
#include "tensord/meta/shape_rules.h"

namespace tensord::cpu {
namespace {

// Visits every coordinate of `sizes` in row-major order, calling f(coords).
// A 0-dim shape is visited once; a shape with a 0 size not at all.
template <typename F>
void ForEachCoord(absl::Span<const int64_t> sizes, F&& f) {
  const size_t nd = sizes.size();
  for (int64_t s : sizes) {
    if (s == 0) return;
  }
  Shape c(nd, 0);
  while (true) {
    f(c.data());
    size_t d = nd;
    while (true) {
      if (d == 0) return;
      --d;
      if (++c[d] < sizes[d]) break;
      c[d] = 0;
    }
  }
}

// Shape and strides (elements) of `m`, a 0-dim tensor viewed as [1].
struct Geometry {
  Shape sizes;
  Shape strides;
};
Geometry AtLeast1d(const TensorMeta& m) {
  if (m.dim() > 0) return {m.sizes, m.strides};
  return {{1}, {1}};
}

// Element offset of `coords` (over `strides`).
inline int64_t Offset(const int64_t* coords, absl::Span<const int64_t> strides) {
  int64_t off = 0;
  for (size_t k = 0; k < strides.size(); ++k) off += coords[k] * strides[k];
  return off;
}

// *dst += alpha * src in T's compute type (bool: or; integers wrap).
template <typename T>
inline void AccumulateScaled(char* dst, const char* src, ComputeT<T> alpha) {
  using C = ComputeT<T>;
  if constexpr (std::is_same_v<C, bool>) {
    Store<T>(dst, Load<T>(dst) || (alpha && Load<T>(src)));
  } else {
    Store<T>(dst, WrapAdd<C>(Load<T>(dst), WrapMul<C>(alpha, Load<T>(src))));
  }
}

// "<op>(): index 5 is out of bounds for dimension 0 with size 3": a
// RuntimeError for scatter_add (as PyTorch and gather), IndexError for the
// index_* ops (as PyTorch).
absl::Status OutOfBounds(const char* op, int64_t value, int64_t dim, int64_t size, ErrorKind kind) {
  return MakeError(kind, absl::StrCat(op, "(): index ", value, " is out of bounds for dimension ", dim, " with size ",
                                      size));
}

// ---- scatter_add / index_add ----------------------------------------------------

// scatter_add(self, dim, index, src): out = self; out[i with i_dim = index[i]]
// += src[i] for every i over index's shape.
absl::Status ScatterAdd(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(TensorRef index, InputTensor(ctx, 2));
  TD_ASSIGN_OR_RETURN(TensorRef src, InputTensor(ctx, 3));
  const TensorRef& out = ctx.outputs[0];
  TD_RETURN_IF_ERROR(ExpectOutputSizes("scatter_add", out, self.meta->sizes));
  TD_RETURN_IF_ERROR(CopyConvert(out, self));
  if (index.meta->numel() == 0) return absl::OkStatus();
  TD_INTERNAL_CHECK(index.meta->dtype == ScalarType::kInt64 || index.meta->dtype == ScalarType::kInt32,
                    "scatter_add: index dtype");
  TD_INTERNAL_CHECK(src.meta->dtype == out.meta->dtype, "scatter_add: src dtype");
  const Geometry og = AtLeast1d(*out.meta), ig = AtLeast1d(*index.meta), sg = AtLeast1d(*src.meta);
  const int64_t nd = static_cast<int64_t>(og.sizes.size());
  int64_t dim = ctx.args[1].to_int();
  if (dim < 0) dim += nd;
  TD_INTERNAL_CHECK(dim >= 0 && dim < nd && ig.sizes.size() == og.sizes.size() &&
                        sg.sizes.size() == og.sizes.size(),
                    "scatter_add: shapes were not checked");
  for (int64_t d = 0; d < nd; ++d) {
    TD_INTERNAL_CHECK(ig.sizes[d] <= sg.sizes[d] && (d == dim || ig.sizes[d] <= og.sizes[d]),
                      "scatter_add: index larger than src/self");
  }
  const int64_t item = out.meta->itemsize();
  const int64_t dim_size = og.sizes[dim];
  Shape out_strides = og.strides;
  out_strides[dim] = 0;  // the dim's position comes from the index
  bool bad = false;
  int64_t bad_value = 0;
  TD_RETURN_IF_ERROR(Dispatch<kSetAllButF8>(out.meta->dtype, "scatter_add", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const ComputeT<T> one = ScalarTo<T>(Scalar::Int(1));
    ForEachCoord(ig.sizes, [&](const int64_t* c) {
      if (bad) return;
      const int64_t v = LoadIndex(index.data_at_offset() + Offset(c, ig.strides) * index.meta->itemsize(),
                                  index.meta->dtype);
      if (v < 0 || v >= dim_size) {
        bad = true;
        bad_value = v;
        return;
      }
      char* dst = out.data_at_offset() + (Offset(c, out_strides) + v * og.strides[dim]) * item;
      AccumulateScaled<T>(dst, src.data_at_offset() + Offset(c, sg.strides) * item, one);
    });
    return absl::OkStatus();
  }));
  if (bad) return OutOfBounds("scatter_add", bad_value, dim, dim_size, ErrorKind::kRuntime);
  return absl::OkStatus();
}

// index_add(self, dim, index, source, alpha): out = self; for every element
// of source at i, out[i with i_dim = index[i_dim]] += alpha * source[i].
absl::Status IndexAdd(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(TensorRef index, InputTensor(ctx, 2));
  TD_ASSIGN_OR_RETURN(TensorRef source, InputTensor(ctx, 3));
  const Scalar alpha = ctx.args[4].scalar();
  const TensorRef& out = ctx.outputs[0];
  TD_RETURN_IF_ERROR(ExpectOutputSizes("index_add", out, self.meta->sizes));
  TD_RETURN_IF_ERROR(CopyConvert(out, self));
  TD_ASSIGN_OR_RETURN(const int64_t dim, CheckIndexAdd(ctx, *out.meta, *index.meta, *source.meta));
  const Geometry og = AtLeast1d(*out.meta), sg = AtLeast1d(*source.meta);
  const int64_t item = out.meta->itemsize();
  const int64_t dim_size = og.sizes[dim];
  const int64_t index_stride = index.meta->dim() == 1 ? index.meta->strides[0] : 0;
  // Check every index first (cheap, and the loop below then cannot fail).
  for (int64_t i = 0; i < index.meta->numel(); ++i) {
    const int64_t v = LoadIndex(index.data_at_offset() + i * index_stride * index.meta->itemsize(),
                                index.meta->dtype);
    if (v < 0 || v >= dim_size) return OutOfBounds("index_add", v, dim, dim_size, ErrorKind::kIndex);
  }
  Shape out_strides = og.strides;
  out_strides[dim] = 0;
  return Dispatch<kSetAllButF8>(out.meta->dtype, "index_add", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const ComputeT<T> a = ScalarTo<T>(alpha);
    ForEachCoord(sg.sizes, [&](const int64_t* c) {
      const int64_t v = LoadIndex(index.data_at_offset() + c[dim] * index_stride * index.meta->itemsize(),
                                  index.meta->dtype);
      char* dst = out.data_at_offset() + (Offset(c, out_strides) + v * og.strides[dim]) * item;
      AccumulateScaled<T>(dst, source.data_at_offset() + Offset(c, sg.strides) * item, a);
    });
    return absl::OkStatus();
  });
}

// ---- index_put --------------------------------------------------------------------

// index_put(self, indices, values, accumulate): out = self; then
// out[indices] = values (or += with accumulate), values broadcast to the
// indexing result's shape (PyTorch's advanced-indexing layout rules).
absl::Status IndexPut(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const IndexPutArgs a, ReadIndexPut(ctx));
  const TensorRef &self = a.self, &values = a.values;
  const bool accumulate = a.accumulate;
  const TensorRef& out = ctx.outputs[0];
  TD_RETURN_IF_ERROR(CopyConvert(out, self));
  const TensorMeta& om = *out.meta;

  // Index operands; masks expand to one coordinate list per dim they cover.
  std::vector<AdvIndexOperand> ops;
  std::deque<Shape> owned;  // the masks' coordinates (int64), one list per dim
  int64_t pos = 0;
  for (const TensorMeta* m : *a.indices) {
    if (m == nullptr) {
      ++pos;
      continue;
    }
    TD_ASSIGN_OR_RETURN(TensorRef t, InputTensorOf(ctx, m));
    TD_RETURN_IF_ERROR(CheckIndexPutIndex(*m, pos, om.sizes));
    if (m->dtype == ScalarType::kBool || m->dtype == ScalarType::kUInt8) {
      const size_t first = owned.size();
      owned.resize(first + static_cast<size_t>(m->dim()));
      int64_t count = 0;
      ForEachCoord(m->sizes, [&](const int64_t* c) {
        if (t.data_at_offset()[Offset(c, m->strides)] == 0) return;
        for (int64_t j = 0; j < m->dim(); ++j) owned[first + j].push_back(c[j]);
        ++count;
      });
      for (int64_t j = 0; j < m->dim(); ++j) {
        ops.push_back(AdvIndexOperand{pos + j, reinterpret_cast<const char*>(owned[first + j].data()),
                                      ScalarType::kInt64, {count}, {1}});
      }
      pos += m->dim();
    } else {
      ops.push_back(AdvIndexOperand{pos++, t.data_at_offset(), m->dtype, m->sizes, m->strides});
    }
  }
  TD_ASSIGN_OR_RETURN(const AdvLayout layout, IndexPutLayout(ops, om.sizes));
  const Shape& b = layout.b;
  // Broadcast strides of each index over b.
  for (AdvIndexOperand& op : ops) {
    Shape st(b.size(), 0);
    const size_t off = b.size() - op.sizes.size();
    for (size_t i = 0; i < op.sizes.size(); ++i) st[off + i] = op.sizes[i] == 1 ? 0 : op.strides[i];
    op.strides = std::move(st);
  }
  const Shape& res_sizes = layout.sizes;
  const int64_t nr = static_cast<int64_t>(res_sizes.size());
  // values broadcast to the result shape.
  TD_ASSIGN_OR_RETURN(const Shape v_strides, IndexPutValueStrides(*values.meta, res_sizes));
  // Check every index, then write.
  for (const AdvIndexOperand& op : ops) {
    const int64_t size = om.sizes[op.dim];
    bool bad = false;
    int64_t bad_value = 0;
    ForEachCoord(b, [&](const int64_t* c) {
      if (bad) return;
      const int64_t v = LoadIndex(op.data + Offset(c, op.strides) * ItemSize(op.dtype), op.dtype);
      if (v < -size || v >= size) {
        bad = true;
        bad_value = v;
      }
    });
    if (bad) return OutOfBounds("index_put", bad_value, op.dim, size, ErrorKind::kIndex);
  }
  const int64_t item = om.itemsize();
  auto target = [&](const int64_t* c) -> char* {
    int64_t off = 0;
    for (int64_t r = 0; r < nr; ++r) {
      if (layout.self_dim_at[r] >= 0) off += c[r] * om.strides[layout.self_dim_at[r]];
    }
    const int64_t* bc = c + layout.first_b;
    for (const AdvIndexOperand& op : ops) {
      int64_t v = LoadIndex(op.data + Offset(bc, op.strides) * ItemSize(op.dtype), op.dtype);
      if (v < 0) v += om.sizes[op.dim];
      off += v * om.strides[op.dim];
    }
    return out.data_at_offset() + off * item;
  };
  if (!accumulate) {
    ForEachCoord(res_sizes, [&](const int64_t* c) {
      std::memcpy(target(c), values.data_at_offset() + Offset(c, v_strides) * item, static_cast<size_t>(item));
    });
    return absl::OkStatus();
  }
  return Dispatch<kSetAllButF8>(om.dtype, "index_put", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const ComputeT<T> one = ScalarTo<T>(Scalar::Int(1));
    ForEachCoord(res_sizes, [&](const int64_t* c) {
      AccumulateScaled<T>(target(c), values.data_at_offset() + Offset(c, v_strides) * item, one);
    });
    return absl::OkStatus();
  });
}

// ---- masked_scatter -----------------------------------------------------------------

// masked_scatter(self, mask, source): out = self broadcast with mask; the
// k-th true element of the broadcast mask (row-major) takes source's k-th
// element (row-major).
absl::Status MaskedScatter(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const MaskedScatterArgs a, ReadMaskedScatter(ctx));
  const TensorRef &self = a.self, &mask = a.mask, &source = a.source;
  const TensorRef& out = ctx.outputs[0];
  TD_RETURN_IF_ERROR(CopyConvert(out, self));
  const TensorMeta& om = *out.meta;
  TD_ASSIGN_OR_RETURN(Shape mask_bytes, BroadcastByteStrides(*mask.meta, om.sizes));
  std::unique_ptr<TempTensor> hs;
  TD_ASSIGN_OR_RETURN(TensorRef src, AsContiguous(source, hs));
  const int64_t item = om.itemsize();
  int64_t count = 0;
  ForEachCoord(om.sizes, [&](const int64_t* c) { count += mask.data_at_offset()[Offset(c, mask_bytes)] != 0; });
  if (count > src.meta->numel()) {
    return RuntimeErr(absl::StrCat("masked_scatter: Number of elements of source < number of ones in mask (",
                                   src.meta->numel(), " < ", count, ")"));
  }
  int64_t k = 0;
  ForEachCoord(om.sizes, [&](const int64_t* c) {
    if (mask.data_at_offset()[Offset(c, mask_bytes)] == 0) return;
    std::memcpy(out.data_at_offset() + Offset(c, om.strides) * item, src.data_at_offset() + k * item,
                static_cast<size_t>(item));
    ++k;
  });
  return absl::OkStatus();
}

// ---- select_backward / slice_backward -----------------------------------------------

// out = zeros; then the view a.view of out = a.grad, grad broadcast to the
// view's shape (an internal error when it does not).
absl::Status ZeroThenCopyInto(const TensorRef& out, const ViewBackwardArgs& a) {
  TD_RETURN_IF_ERROR(Fill(out, Scalar::Int(0)));
  TD_ASSIGN_OR_RETURN(Shape unused, BroadcastByteStrides(*a.grad.meta, a.view.sizes));
  (void)unused;
  return CopyConvert(TensorRef{out.base, &a.view}, a.grad);
}

// out = zeros(input_sizes); out.select(dim, index) = grad_output.
absl::Status SelectBackward(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const ViewBackwardArgs a, ReadSelectBackward(ctx));
  return ZeroThenCopyInto(ctx.outputs[0], a);
}

// out = zeros(input_sizes); out.slice(dim, start, end, step) = grad_output.
absl::Status SliceBackward(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const ViewBackwardArgs a, ReadSliceBackward(ctx));
  return ZeroThenCopyInto(ctx.outputs[0], a);
}

// out = zeros(input_sizes); out.diagonal(offset, dim1, dim2) = grad_output.
absl::Status DiagonalBackward(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const ViewBackwardArgs a, ReadDiagonalBackward(ctx));
  return ZeroThenCopyInto(ctx.outputs[0], a);
}

}  // namespace

absl::Status RegisterScatterKernels(KernelRegistry& r) {
  struct Entry {
    const char* name;
    KernelFn fn;
  };
  const Entry entries[] = {
      {"scatter_add", ScatterAdd},     {"index_add", IndexAdd},          {"index_put", IndexPut},
      {"masked_scatter", MaskedScatter}, {"select_backward", SelectBackward}, {"slice_backward", SliceBackward},
      {"diagonal_backward", DiagonalBackward},
  };
  for (const Entry& e : entries) TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, e.name, e.fn));
  return absl::OkStatus();
}

}  // namespace tensord::cpu
