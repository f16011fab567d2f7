// Shape ops that copy: flip, roll, repeat, tril, triu, constant pad, scatter. Outputs arrive allocated with the
// meta function's sizes and strides (kernels never decide a shape).
//
// flip, roll, repeat and constant_pad_nd are one "gather by per-dim maps"
// copy: for each output dim d, a DimMap gives the element offset in the
// source that output coordinate j reads along d (or none: the fill value).
// The source element of an output coordinate is the sum over dims, so any
// input and output strides work; the maps are closed forms (no per-element
// tables, so memory stays O(rank) however large a dim is). Elements are
// copied as bytes (the output has the input's dtype), so every dtype works.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "kernel_util.h"
#include "shape_args.h"

namespace tensord::cpu {
namespace {

// Where output coordinate j along one dim reads the source: source index
// i = (j + shift) mod modulo for a wrapping dim (roll, repeat, flip via
// `reverse`), or i = j - before for a padded dim (no element when i falls
// outside [0, size)); the element offset is i * stride.
struct DimMap {
  enum Kind { kWrap, kPadded } kind = kWrap;
  int64_t size = 1;     // source size along the dim
  int64_t stride = 0;   // source stride (elements)
  int64_t shift = 0;    // kWrap: in [0, size)
  bool reverse = false; // kWrap: i = size - 1 - j
  int64_t before = 0;   // kPadded

  static DimMap Identity(int64_t size, int64_t stride) { return DimMap{kWrap, size, stride, 0, false, 0}; }

  // Source element offset of output coordinate j, or false when j reads the fill value.
  bool At(int64_t j, int64_t* off) const {
    if (kind == kPadded) {
      // j < output size <= size + before + after: no overflow (meta checked the sizes).
      const int64_t i = j - before;
      if (i < 0 || i >= size) return false;
      *off = i * stride;
      return true;
    }
    int64_t i = reverse ? size - 1 - j : j;
    if (shift != 0 || i >= size) i = (i % size + shift) % size;
    *off = i * stride;
    return true;
  }
};

// Calls row(coords, n) once per row of `sizes` (all dims but the last; coords
// holds their values), n being the last dim's size; a 0-dim shape is one row
// of one element. Nothing is called when an element count is 0.
template <typename F>
void ForEachRow(absl::Span<const int64_t> sizes, F&& row) {
  for (int64_t s : sizes) {
    if (s == 0) return;
  }
  if (sizes.empty()) {
    row(static_cast<const int64_t*>(nullptr), int64_t{1});
    return;
  }
  const size_t outer = sizes.size() - 1;
  Shape c(outer, 0);
  while (true) {
    row(c.data(), sizes.back());
    size_t d = outer;
    while (true) {
      if (d == 0) return;
      --d;
      if (++c[d] < sizes[d]) break;
      c[d] = 0;
    }
  }
}

// out[j...] = src[sum_d maps[d](j_d)] (or `fill` where a map gives none).
absl::Status GatherByMaps(const TensorRef& out, const TensorRef& src, const std::vector<DimMap>& maps,
                          const char* fill) {
  const TensorMeta& om = *out.meta;
  const int64_t item = om.itemsize();
  TD_INTERNAL_CHECK(src.meta->itemsize() == item && maps.size() == om.sizes.size(),
                    "shape kernel: source and output do not match");
  for (const DimMap& m : maps) {
    TD_INTERNAL_CHECK(m.size > 0 || m.kind == DimMap::kPadded || om.numel() == 0, "shape kernel: empty source dim");
  }
  char* const obase = out.data_at_offset();
  const char* const sbase = src.data_at_offset();
  const size_t nd = om.sizes.size();
  ForEachRow(om.sizes, [&](const int64_t* c, int64_t n) {
    if (nd == 0) {
      std::memcpy(obase, sbase, item);
      return;
    }
    int64_t ooff = 0, soff = 0;
    bool pad = false;
    for (size_t d = 0; d + 1 < nd; ++d) {
      ooff += c[d] * om.strides[d];
      int64_t o = 0;
      if (maps[d].At(c[d], &o)) {
        soff += o;
      } else {
        pad = true;
      }
    }
    const DimMap& last = maps[nd - 1];
    const int64_t ostride = om.strides[nd - 1];
    for (int64_t j = 0; j < n; ++j) {
      char* dst = obase + (ooff + j * ostride) * item;
      int64_t o = 0;
      if (pad || !last.At(j, &o)) {
        std::memcpy(dst, fill, item);
      } else {
        std::memcpy(dst, sbase + (soff + o) * item, item);
      }
    }
  });
  return absl::OkStatus();
}

// flip(self, dims)
absl::Status Flip(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const FlipArgs a, ReadFlip(ctx));
  const TensorRef& self = a.self;
  const TensorRef& out = ctx.outputs[0];
  const int64_t nd = self.meta->dim();
  const std::vector<bool>& flipped = a.flipped;
  std::vector<DimMap> maps;
  for (int64_t d = 0; d < nd; ++d) {
    maps.push_back(DimMap::Identity(self.meta->sizes[d], self.meta->strides[d]));
    maps.back().reverse = flipped[d];
  }
  return GatherByMaps(out, self, maps, nullptr);
}

// roll(self, shifts, dims): output j along a rolled dim reads (j - shift) mod
// size; repeated dims add their shifts. No dims: the flattened roll.
absl::Status Roll(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const RollArgs a, ReadRoll(ctx));
  const TensorRef& self = a.self;
  const TensorRef& out = ctx.outputs[0];
  const int64_t numel = self.meta->numel();
  if (numel == 0) return absl::OkStatus();
  if (a.flat) {
    std::unique_ptr<TempTensor> holder;
    TD_ASSIGN_OR_RETURN(TensorRef flat_src, AsContiguous(self, holder));
    const TensorMeta src1 = ViewMeta(*flat_src.meta, {numel}, {1}, flat_src.meta->storage_offset);
    const TensorMeta out1 = ViewMeta(*out.meta, {numel}, {1}, out.meta->storage_offset);
    DimMap m = DimMap::Identity(numel, 1);
    m.shift = a.shift[0];
    return GatherByMaps(TensorRef{out.base, &out1}, TensorRef{flat_src.base, &src1}, {m}, nullptr);
  }
  std::vector<DimMap> maps;
  for (int64_t d = 0; d < self.meta->dim(); ++d) {
    maps.push_back(DimMap::Identity(self.meta->sizes[d], self.meta->strides[d]));
    maps.back().shift = a.shift[d];
  }
  return GatherByMaps(out, self, maps, nullptr);
}

// repeat(self, repeats): output j along dim d reads j mod self.size(d) (the
// leading added dims read element 0).
absl::Status Repeat(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const RepeatArgs a, ReadRepeat(ctx));
  const TensorRef& self = a.self;
  const TensorRef& out = ctx.outputs[0];
  const int64_t nd = out.meta->dim(), lead = a.lead;
  if (out.meta->numel() == 0) return absl::OkStatus();  // and so every source size is > 0
  std::vector<DimMap> maps;
  for (int64_t d = 0; d < nd; ++d) {
    maps.push_back(d < lead ? DimMap::Identity(1, 0)
                            : DimMap::Identity(self.meta->sizes[d - lead], self.meta->strides[d - lead]));
  }
  return GatherByMaps(out, self, maps, nullptr);
}

// constant_pad_nd(self, pad, value): output j along a padded dim reads
// j - before when that is inside self, else value (negative pads crop).
absl::Status ConstantPadNd(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  const TensorRef& out = ctx.outputs[0];
  const Shape pad = IntList(ctx.args[1]);
  const int64_t nd = self.meta->dim();
  TD_INTERNAL_CHECK(out.meta->dim() == nd && pad.size() % 2 == 0 && static_cast<int64_t>(pad.size()) <= 2 * nd,
                    "constant_pad_nd: pad was not checked");
  // The fill value in the output's dtype.
  TD_ASSIGN_OR_RETURN(std::unique_ptr<TempTensor> fill, TempTensor::Make({}, out.meta->dtype));
  TD_RETURN_IF_ERROR(Fill(fill->ref(), ctx.args[2].scalar()));
  std::vector<DimMap> maps;
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t k = nd - 1 - d;  // pairs count from the last dim
    DimMap m = DimMap::Identity(self.meta->sizes[d], self.meta->strides[d]);
    m.kind = DimMap::kPadded;
    m.before = 2 * k < static_cast<int64_t>(pad.size()) ? pad[2 * k] : 0;
    maps.push_back(m);
  }
  return GatherByMaps(out, self, maps, fill->data());
}

// tril / triu(self, diagonal): element (i, j) of each matrix is kept when
// j - i <= diagonal (tril) / j - i >= diagonal (triu), else 0.
absl::Status TrilTriu(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  const TensorRef& out = ctx.outputs[0];
  TD_RETURN_IF_ERROR(ExpectOutputSizes(ctx.op->name(), out, self.meta->sizes));
  const bool lower = ctx.op->name() == "tril";
  // Clamped so that i + diagonal cannot overflow; beyond +-2^62 the result
  // does not change for any representable size.
  const int64_t k = std::clamp<int64_t>(ctx.args[1].to_int(), -(int64_t{1} << 62), int64_t{1} << 62);
  const TensorMeta& sm = *self.meta;
  const TensorMeta& om = *out.meta;
  const size_t nd = sm.sizes.size();
  TD_INTERNAL_CHECK(nd >= 2, "tril/triu: self has fewer than 2 dims");
  const int64_t item = om.itemsize();
  char* const obase = out.data_at_offset();
  const char* const sbase = self.data_at_offset();
  static const char kZero[16] = {};
  ForEachRow(om.sizes, [&](const int64_t* c, int64_t n) {
    int64_t ooff = 0, soff = 0;
    for (size_t d = 0; d + 1 < nd; ++d) {
      ooff += c[d] * om.strides[d];
      soff += c[d] * sm.strides[d];
    }
    const int64_t i = c[nd - 2];
    for (int64_t j = 0; j < n; ++j) {
      const bool keep = lower ? j <= i + k : j >= i + k;
      char* dst = obase + (ooff + j * om.strides[nd - 1]) * item;
      std::memcpy(dst, keep ? sbase + (soff + j * sm.strides[nd - 1]) * item : kZero, item);
    }
  });
  return absl::OkStatus();
}

// scatter.src / scatter.value(self, dim, index, src|value): out = self, then
// out[i with i_dim = index[i]] = src[i] (or value) for every i over index's
// shape. Every index is checked before anything is written.
absl::Status Scatter(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(TensorRef index, InputTensor(ctx, 2));
  const TensorRef& out = ctx.outputs[0];
  TD_RETURN_IF_ERROR(ExpectOutputSizes("scatter", out, self.meta->sizes));
  TD_RETURN_IF_ERROR(CopyConvert(out, self));
  if (index.meta->numel() == 0) return absl::OkStatus();
  TD_INTERNAL_CHECK(index.meta->dtype == ScalarType::kInt64, "scatter: index dtype was not checked");
  const bool from_src = ctx.args[3].is_tensor();
  std::unique_ptr<TempTensor> fill;
  TensorRef src{};
  if (from_src) {
    TD_ASSIGN_OR_RETURN(src, InputTensor(ctx, 3));
    TD_INTERNAL_CHECK(src.meta->dtype == out.meta->dtype, "scatter: src dtype was not checked");
  } else {
    TD_ASSIGN_OR_RETURN(fill, TempTensor::Make({}, out.meta->dtype));
    TD_RETURN_IF_ERROR(Fill(fill->ref(), ctx.args[3].scalar()));
  }
  // 0-dim tensors are 1-D of size 1 here (PyTorch's ensure_nonempty_*).
  auto sizes1 = [](const TensorMeta& m) { return m.dim() == 0 ? Shape{1} : m.sizes; };
  auto strides1 = [](const TensorMeta& m) { return m.dim() == 0 ? Shape{1} : m.strides; };
  const Shape osz = sizes1(*out.meta), ost = strides1(*out.meta);
  const Shape isz = sizes1(*index.meta), ist = strides1(*index.meta);
  const Shape sst = from_src ? strides1(*src.meta) : Shape(osz.size(), 0);
  const int64_t nd = static_cast<int64_t>(osz.size());
  const int64_t dim = WrapDimUnchecked(ctx.args[1].to_int(), out.meta->dim());
  TD_INTERNAL_CHECK(dim >= 0 && dim < nd && static_cast<int64_t>(isz.size()) == nd, "scatter: shapes were not checked");
  for (int64_t d = 0; d < nd; ++d) {
    TD_INTERNAL_CHECK(d == dim || isz[d] <= osz[d], "scatter: index larger than self");
    if (from_src) TD_INTERNAL_CHECK(isz[d] <= sizes1(*src.meta)[d], "scatter: index larger than src");
  }
  const int64_t dim_size = osz[dim];
  const char* ibase = index.data_at_offset();
  // Pass 1: every index in range.
  absl::Status bad;
  ForEachRow(isz, [&](const int64_t* c, int64_t n) {
    if (!bad.ok()) return;
    int64_t ioff = 0;
    for (int64_t d = 0; d + 1 < nd; ++d) ioff += c[d] * ist[d];
    for (int64_t j = 0; j < n; ++j) {
      const int64_t v = LoadIndex(ibase + (ioff + j * ist[nd - 1]) * 8, ScalarType::kInt64);
      if (v < 0 || v >= dim_size) {
        bad = RuntimeErr(absl::StrCat("scatter(): index ", v, " is out of bounds for dimension ", dim, " with size ",
                                      dim_size));
        return;
      }
    }
  });
  TD_RETURN_IF_ERROR(bad);
  // Pass 2: the writes (in index order: the last write to a position wins).
  const int64_t item = out.meta->itemsize();
  char* const obase = out.data_at_offset();
  const char* const sbase = from_src ? src.data_at_offset() : nullptr;
  ForEachRow(isz, [&](const int64_t* c, int64_t n) {
    int64_t ioff = 0, ooff = 0, soff = 0;
    for (int64_t d = 0; d + 1 < nd; ++d) {
      ioff += c[d] * ist[d];
      if (d != dim) ooff += c[d] * ost[d];
      soff += c[d] * sst[d];
    }
    for (int64_t j = 0; j < n; ++j) {
      const int64_t v = LoadIndex(ibase + (ioff + j * ist[nd - 1]) * 8, ScalarType::kInt64);
      int64_t o = ooff + v * ost[dim];
      if (nd - 1 != dim) o += j * ost[nd - 1];
      const char* from = from_src ? sbase + (soff + j * sst[nd - 1]) * item : fill->data();
      std::memcpy(obase + o * item, from, item);
    }
  });
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterShapeKernels(KernelRegistry& r) {
  struct Entry {
    const char* name;
    KernelFn fn;
  };
  const Entry entries[] = {
      {"flip", Flip},   {"roll", Roll},       {"repeat", Repeat},         {"constant_pad_nd", ConstantPadNd},
      {"tril", TrilTriu}, {"triu", TrilTriu}, {"scatter.src", Scatter}, {"scatter.value", Scatter},
  };
  for (const Entry& e : entries) TD_RETURN_IF_ERROR(r.Register(DeviceType::kCPU, e.name, e.fn));
  return absl::OkStatus();
}

}  // namespace tensord::cpu
