// Indexing and selection CPU kernels: gather, index_select, index.Tensor
// (advanced integer indexing), topk, and the data-dependent nonzero and
// masked_select. Every index read from a tensor is range-checked before the
// element it names is touched: a bad index is an error, never a read outside
// the tensor.
#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "index_args.h"
#include "kernel_util.h"

namespace tensord::cpu {
namespace {

// The first out-of-range index met by a gather-like loop.
struct BadIndex {
  bool found = false;
  int64_t value = 0;
};

// out[...] = src[... + idx[...] * src_dim_stride] over a loop of operands
// (out, index, src-with-stride-0-on-the-dim); idx must be in [0, dim_size).
absl::Status GatherLoop(const StridedLoop& loop, int64_t itemsize, ScalarType index_t,
                        int64_t dim_size, int64_t dim_stride_bytes, BadIndex& bad) {
  return DispatchBySize(itemsize, [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    loop.RunUntil([&](char* const* p, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t idx = LoadIndex(p[1] + i * s[1], index_t);
        if (idx < 0 || idx >= dim_size) {
          bad.found = true;
          bad.value = idx;
          return false;
        }
        std::memcpy(p[0] + i * s[0], p[2] + i * s[2] + idx * dim_stride_bytes, sizeof(U));
      }
      return true;
    });
    return absl::OkStatus();
  });
}

absl::Status Gather(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const GatherArgs a, ReadGather(ctx));
  const TensorRef &self_in = a.self, &index_in = a.index, &out_in = ctx.outputs[0];
  const TensorMeta &self = a.self1d, &index = a.index1d, &out = a.out1d;
  const int64_t dim = a.dim;
  const int64_t item = self.itemsize();
  Shape src_strides(self.dim());
  for (int64_t d = 0; d < self.dim(); ++d) src_strides[d] = d == dim ? 0 : self.strides[d] * item;
  StridedLoop loop(index.sizes);
  TD_RETURN_IF_ERROR(loop.AddTensor(TensorRef{out_in.base, &out}));
  TD_RETURN_IF_ERROR(loop.AddTensor(TensorRef{index_in.base, &index}));
  loop.Add(self_in.base + self.storage_offset * item, src_strides);
  loop.Build();
  BadIndex bad;
  TD_RETURN_IF_ERROR(GatherLoop(loop, item, index.dtype, self.sizes[dim],
                                self.strides[dim] * item, bad));
  if (bad.found) {
    return RuntimeErr(absl::StrCat("index ", bad.value, " is out of bounds for dimension ", dim,
                                   " with size ", self.sizes[dim]));
  }
  return absl::OkStatus();
}

absl::Status IndexSelect(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const IndexSelectArgs a, ReadIndexSelect(ctx));
  const TensorRef &self_in = a.self, &index_in = a.index;
  const TensorMeta &self = a.self1d, &out = a.out;
  const Shape& expect = a.sizes;
  const int64_t dim = a.dim;
  const int64_t item = self.itemsize();
  Shape src_strides(self.dim()), idx_strides(self.dim(), 0);
  for (int64_t d = 0; d < self.dim(); ++d) src_strides[d] = d == dim ? 0 : self.strides[d] * item;
  idx_strides[dim] = index_in.meta->dim() == 1 ? index_in.meta->strides[0] * index_in.meta->itemsize() : 0;
  StridedLoop loop(expect);
  TD_RETURN_IF_ERROR(loop.AddTensor(TensorRef{ctx.outputs[0].base, &out}));
  loop.Add(index_in.data_at_offset(), idx_strides);
  loop.Add(self_in.base + self.storage_offset * item, src_strides);
  loop.Build();
  BadIndex bad;
  TD_RETURN_IF_ERROR(GatherLoop(loop, item, index_in.meta->dtype, self.sizes[dim],
                                self.strides[dim] * item, bad));
  if (bad.found) {
    return IndexErr(absl::StrCat("index_select(): index ", bad.value,
                                 " is out of bounds for dimension ", dim, " with size ",
                                 self.sizes[dim]));
  }
  return absl::OkStatus();
}

// self[indices]: PyTorch advanced indexing with integer index tensors (None
// entries keep a dim). The index tensors broadcast to one shape B; when the
// indexed dims are adjacent B replaces them in place, else B comes first.
absl::Status IndexTensor(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const IndexTensorArgs a, ReadIndexTensor(ctx));
  const TensorRef& self = a.self;
  const TensorRef& out = ctx.outputs[0];
  if (a.ops.empty()) return CopyConvert(out, self);
  const TensorMeta& sm = *self.meta;
  const std::vector<AdvIndexOperand>& idx = a.ops;
  const Shape& out_sizes = a.layout.sizes;
  const int64_t nd = static_cast<int64_t>(out_sizes.size());
  const int64_t nb = static_cast<int64_t>(a.layout.b.size());
  const int64_t item = sm.itemsize();
  // Operands: out, self (stride 0 on B dims), then one per index tensor
  // (broadcast over B, stride 0 elsewhere).
  Shape src_strides(nd, 0);
  for (int64_t o = 0; o < nd; ++o) {
    if (a.layout.self_dim_at[o] >= 0) src_strides[o] = sm.strides[a.layout.self_dim_at[o]] * item;
  }
  StridedLoop loop(out_sizes);
  TD_RETURN_IF_ERROR(loop.AddTensor(out));
  loop.Add(self.data_at_offset(), src_strides);
  Shape dim_size, dim_stride;
  std::vector<ScalarType> idx_type;
  for (size_t k = 0; k < idx.size(); ++k) {
    TensorMeta im = TensorMeta::Contiguous(idx[k].sizes, idx[k].dtype, sm.device);
    im.strides = idx[k].strides;
    TD_ASSIGN_OR_RETURN(Shape bst, BroadcastByteStrides(im, a.layout.b));
    Shape st(nd, 0);
    for (int64_t i = 0; i < nb; ++i) st[a.layout.first_b + i] = bst[i];
    loop.Add(const_cast<char*>(idx[k].data), st);  // only read
    dim_size.push_back(sm.sizes[idx[k].dim]);
    dim_stride.push_back(sm.strides[idx[k].dim] * item);
    idx_type.push_back(idx[k].dtype);
  }
  loop.Build();
  BadIndex bad;
  size_t bad_k = 0;
  const size_t nidx = idx.size();
  TD_RETURN_IF_ERROR(DispatchBySize(item, [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    // The source offset that element i's indices select, or false (with
    // bad and bad_k set) when one is out of bounds.
    auto offset_of = [&](char* const* p, const int64_t* s, int64_t i, int64_t* off) {
      *off = 0;
      for (size_t k = 0; k < nidx; ++k) {
        int64_t v = LoadIndex(p[2 + k] + i * s[2 + k], idx_type[k]);
        if (v < -dim_size[k] || v >= dim_size[k]) {
          bad = BadIndex{true, v};
          bad_k = k;
          return false;
        }
        if (v < 0) v += dim_size[k];
        *off += v * dim_stride[k];
      }
      return true;
    };
    loop.RunUntil([&](char* const* p, const int64_t* s, int64_t n) {
      // Along a run where no index moves (x[rows] with the row as the inner
      // dim: a batch taken from a dataset, an embedding lookup) the source
      // offset is the same for the whole run: one lookup, then a row copy.
      bool idx_fixed = true;
      for (size_t k = 0; k < nidx; ++k) idx_fixed &= s[2 + k] == 0;
      if (idx_fixed) {
        int64_t off;
        if (!offset_of(p, s, 0, &off)) return false;
        const char* src = p[1] + off;
        if (s[0] == static_cast<int64_t>(sizeof(U)) && s[1] == static_cast<int64_t>(sizeof(U))) {
          std::memcpy(p[0], src, static_cast<size_t>(n) * sizeof(U));
        } else {
          for (int64_t i = 0; i < n; ++i) std::memcpy(p[0] + i * s[0], src + i * s[1], sizeof(U));
        }
        return true;
      }
      for (int64_t i = 0; i < n; ++i) {
        int64_t off;
        if (!offset_of(p, s, i, &off)) return false;
        std::memcpy(p[0] + i * s[0], p[1] + i * s[1] + off, sizeof(U));
      }
      return true;
    });
    return absl::OkStatus();
  }));
  if (bad.found) {
    return IndexErr(absl::StrCat("index ", bad.value, " is out of bounds for dimension ",
                                 idx[bad_k].dim, " with size ", dim_size[bad_k]));
  }
  return absl::OkStatus();
}

// ---- topk -----------------------------------------------------------------------

absl::Status Topk(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const TopkArgs a, ReadTopk(ctx));
  const TensorRef& self_in = a.self;
  const TensorMeta &self = a.self1d, &values = a.values1d, &indices = a.indices1d;
  const int64_t k = a.k, dim = a.dim;
  const bool largest = a.largest;
  const int64_t n = self.sizes[dim];
  // One slice per position of the other dims: loop over the shape with the
  // topk dim set to 1.
  Shape outer = self.sizes;
  outer[dim] = 1;
  const int64_t in_k_stride = self.strides[dim] * self.itemsize();
  const int64_t v_k_stride = values.strides[dim] * values.itemsize();
  const int64_t i_k_stride = indices.strides[dim] * 8;
  if (k == 0 || self.numel() == 0) return absl::OkStatus();
  // Byte strides of each tensor over `outer` (the topk dim has size 1 there).
  auto byte_strides = [](const TensorMeta& m) {
    Shape s = m.strides;
    for (int64_t& v : s) v *= m.itemsize();
    return s;
  };
  StridedLoop loop(outer);
  loop.Add(self_in.base + self.storage_offset * self.itemsize(), byte_strides(self));
  loop.Add(ctx.outputs[0].base + values.storage_offset * values.itemsize(), byte_strides(values));
  loop.Add(ctx.outputs[1].base + indices.storage_offset * 8, byte_strides(indices));
  loop.Build();
  return Dispatch<kSetInts | kSetFloats>(self.dtype, "topk", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = ComputeT<T>;
    using Slot = std::pair<C, int64_t>;
    static_assert(std::is_trivially_destructible_v<Slot>);
    TD_ASSIGN_OR_RETURN(std::shared_ptr<char> mem, AllocateScratchArray("topk", n, sizeof(Slot)));
    Slot* buf = reinterpret_cast<Slot*>(mem.get());
    std::uninitialized_default_construct_n(buf, n);
    // A strict total order: by value (NaN above everything, as PyTorch), then
    // by index, so ties come out lower index first.
    auto before = [largest](const Slot& a, const Slot& b) {
      const bool an = IsNan(a.first), bn = IsNan(b.first);
      if (an != bn) return largest ? an : bn;
      if (!an && a.first != b.first) return largest ? a.first > b.first : a.first < b.first;
      return a.second < b.second;
    };
    loop.Run([&](char* const* p, const int64_t* s, int64_t cnt) {
      for (int64_t j = 0; j < cnt; ++j) {
        const char* x = p[0] + j * s[0];
        for (int64_t i = 0; i < n; ++i) buf[i] = {Load<T>(x + i * in_k_stride), i};
        Slot* b = buf;
        if (k < n) {
          std::partial_sort(b, b + k, b + n, before);
        } else {
          std::sort(b, b + n, before);
        }
        char* v = p[1] + j * s[1];
        char* ix = p[2] + j * s[2];
        for (int64_t i = 0; i < k; ++i) {
          Store<T>(v + i * v_k_stride, buf[i].first);
          *reinterpret_cast<int64_t*>(ix + i * i_k_stride) = buf[i].second;
        }
      }
    });
    return absl::OkStatus();
  });
}

// ---- data-dependent ---------------------------------------------------------------

absl::Status Nonzero(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, -1));
  TD_INTERNAL_CHECK(ctx.outputs.empty() && ctx.allocate_output, "nonzero: outputs preallocated");
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  const TensorMeta& m = *self.meta;
  const int64_t nd = m.dim();
  const int64_t item = m.itemsize();
  return Dispatch<kSetAll>(m.dtype, "nonzero", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = ComputeT<T>;
    int64_t count = 0;
    {
      StridedLoop loop(m.sizes);
      TD_RETURN_IF_ERROR(loop.AddTensor(self));
      loop.Build();
      loop.Run([&](char* const* p, const int64_t* s, int64_t n) {
        for (int64_t i = 0; i < n; ++i) count += Load<T>(p[0] + i * s[0]) != C(0);
      });
    }
    // PyTorch's CPU nonzero fills a (ndim, count) tensor and returns its
    // transpose: sizes (count, ndim), strides (1, count). Same here.
    TensorMeta om = TensorMeta::Contiguous({count, nd}, ScalarType::kInt64, kCPU);
    om.strides = {1, count};
    TD_ASSIGN_OR_RETURN(TensorRef out, ctx.allocate_output(om));
    if (count == 0 || m.numel() == 0) return absl::OkStatus();
    const int64_t os0 = out.meta->strides[0], os1 = out.meta->strides[1];
    int64_t* o = out.data<int64_t>();
    int64_t row = 0;
    const char* base = self.data_at_offset();
    if (nd == 0) {
      return absl::OkStatus();  // one nonzero element, zero coordinates
    }
    // Row-major walk with explicit coordinates; the last dim is the inner loop.
    Shape pos(nd, 0);
    const int64_t last = m.sizes[nd - 1], last_stride = m.strides[nd - 1] * item;
    int64_t offset = 0;  // bytes, of pos with pos[nd-1] = 0
    while (true) {
      for (int64_t j = 0; j < last; ++j) {
        if (Load<T>(base + offset + j * last_stride) != C(0)) {
          if (row >= count) return InternalErr("internal: nonzero: count changed");
          for (int64_t d = 0; d < nd - 1; ++d) o[row * os0 + d * os1] = pos[d];
          o[row * os0 + (nd - 1) * os1] = j;
          ++row;
        }
      }
      int64_t d = nd - 2;
      for (; d >= 0; --d) {
        if (++pos[d] < m.sizes[d]) {
          offset += m.strides[d] * item;
          break;
        }
        offset -= m.strides[d] * item * (m.sizes[d] - 1);
        pos[d] = 0;
      }
      if (d < 0) break;
    }
    return absl::OkStatus();
  });
}

absl::Status MaskedSelect(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const MaskedSelectArgs a, ReadMaskedSelect(ctx));
  const TensorRef &self = a.self, &mask = a.mask;
  const Shape& shape = a.shape;
  TD_ASSIGN_OR_RETURN(int64_t total, CheckedNumel(shape));
  (void)total;
  int64_t count = 0;
  {
    StridedLoop loop(shape);
    TD_RETURN_IF_ERROR(loop.AddTensor(mask));
    loop.Build();
    loop.Run([&](char* const* p, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) count += p[0][i * s[0]] != 0;
    });
  }
  TD_ASSIGN_OR_RETURN(TensorRef out, ctx.allocate_output(TensorMeta::Contiguous(
                                         {count}, self.meta->dtype, kCPU)));
  if (count == 0) return absl::OkStatus();
  const int64_t item = self.meta->itemsize();
  const int64_t ostride = out.meta->strides[0] * item;
  char* o = out.data_at_offset();
  StridedLoop loop(shape);
  TD_RETURN_IF_ERROR(loop.AddTensor(self));
  TD_RETURN_IF_ERROR(loop.AddTensor(mask));
  loop.Build(/*reorder=*/false);  // the result is in row-major order
  int64_t written = 0;
  loop.RunUntil([&](char* const* p, const int64_t* s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      if (p[1][i * s[1]] != 0) {
        if (written >= count) return false;
        std::memcpy(o + written * ostride, p[0] + i * s[0], static_cast<size_t>(item));
        ++written;
      }
    }
    return true;
  });
  if (written != count) return InternalErr("internal: masked_select: count changed");
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterIndexKernels(KernelRegistry& r) {
  struct Entry {
    const char* name;
    KernelFn fn;
  };
  const Entry entries[] = {
      {"gather", Gather},
      {"index_select", IndexSelect},
      {"index.Tensor", IndexTensor},
      {"topk", Topk},
      {"nonzero", Nonzero},
      {"masked_select", MaskedSelect},
  };
  for (const Entry& e : entries) TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, e.name, e.fn));
  return absl::OkStatus();
}

}  // namespace tensord::cpu
