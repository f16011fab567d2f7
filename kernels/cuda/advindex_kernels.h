// kernels/cuda/advindex_kernels.h — the host side of the CUDA kernels for
// advanced indexing and masks: index.Tensor, index_put, masked_scatter,
// nonzero and masked_select. Each reads the call's arguments as the op's
// CPU kernel does (kernels/cpu/index.cc, scatter.cc: the same checks and
// errors) and describes its launches (AdvIndexCall) to `L`, the device
// (see elementwise_kernels.h and cuda_launch.h):
//
//   RegisterAdvIndexKernels<CudaLaunch>(registry, DeviceType::kCUDA);
//
// How they work on the device:
// - index.Tensor: one int64 per element of the broadcast index shape B
//   holds the source offset its indices select (one launch per index
//   tensor checks and adds its part), then a gather.
// - index_put: the same offsets into out, stably sorted with the values'
//   offsets (CUB), so that equal destinations are neighbours in row-major
//   order; one thread per destination then writes the last value (the
//   CPU's last write) or adds the run in order. No atomics: results are
//   deterministic and the CPU's bit for bit.
// - the mask ops: flags, their inclusive prefix sum (CUB) giving each set
//   element its row-major rank, and a fill. nonzero, masked_select and a
//   boolean mask of index_put need the count on the host (their output's
//   or indices' size): L::CopyToHost waits for the stream. masked_scatter
//   does not: a short source is recorded in the error word.
// Bad indices are recorded in ctx.error_word and raised at the stream's
// next sync point as the CPU's error (tensord/kernels/device_error_status.h);
// with several, the CPU reports the first in row-major order, the GPU one of
// them. Host code only. Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_ADVINDEX_KERNELS_H_
#define TENSORD_KERNELS_CUDA_ADVINDEX_KERNELS_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../cpu/index_args.h"
#include "advindex_call.h"
#include "elementwise_kernels.h"
#include "tensord/kernels/device_error.h"

namespace tensord::cuda::ew {

// Fills call->geometry for 3 operands over `shape` with the byte strides
// `strides[k]` of operand k (an empty Shape: 0 everywhere); NotImplemented
// naming `op` past kMaxDims dims after merging.
absl::Status BuildAdvGeometry(absl::string_view op, const Shape& shape, const Shape (&strides)[3],
                              AdvIndexCall* call);

// Byte strides of a contiguous (row-major) tensor of `shape` with elements
// of `item` bytes.
Shape RowMajorByteStrides(const Shape& shape, int64_t item);

// The index operands and their layout, and the reading and checking of
// the calls, are the CPU kernels' (kernels/cpu/index_args.h).
using cpu::AdvIndexOperand;
using cpu::AdvLayout;

// The call's error word and op (an internal error without a word).
absl::Status SetAdvErrorWord(const KernelContext& ctx, AdvIndexCall* call);

template <class L>
absl::Status LaunchAdv(const KernelContext& ctx, const AdvIndexCall& call) {
  const int code = L::AdvIndex(call, ctx.stream);
  if (code == kLaunchOk) return absl::OkStatus();
  return LaunchError(ctx.op->full_name(), code, code > 0 ? L::ErrorString(code) : std::string());
}

// offs (int64, contiguous over layout.b) := the byte offset into a tensor
// of byte strides `strides_bytes` (self's or out's) that each element's
// indices select; -1 where one is bad (recorded in the error word, op by op
// in order, as the CPU checks them).
template <class L>
absl::Status IndexOffsets(const KernelContext& ctx, const std::vector<AdvIndexOperand>& ops, const AdvLayout& layout,
                          const Shape& self_sizes, const Shape& strides_bytes, char* offs) {
  const std::string name = ctx.op->full_name();
  for (size_t k = 0; k < ops.size(); ++k) {
    const AdvIndexOperand& op = ops[k];
    TensorMeta im = TensorMeta::Contiguous(op.sizes, op.dtype, ctx.device);
    im.strides = op.strides;
    TD_ASSIGN_OR_RETURN(Shape bst, cpu::BroadcastByteStrides(im, layout.b));
    AdvIndexCall call;
    call.op = AdvOp::kIndexOffsets;
    call.index_dtype = op.dtype;
    call.out = offs;
    call.in = op.data;
    call.first = k == 0;
    call.dim = op.dim;
    call.dim_size = self_sizes[op.dim];
    call.dim_stride = strides_bytes[op.dim];
    TD_RETURN_IF_ERROR(BuildAdvGeometry(name, layout.b, {RowMajorByteStrides(layout.b, 8), bst, Shape()}, &call));
    TD_RETURN_IF_ERROR(SetAdvErrorWord(ctx, &call));
    TD_RETURN_IF_ERROR(LaunchAdv<L>(ctx, call));
  }
  return absl::OkStatus();
}

// The positions of `shape` (row-major) where `t` (broadcast to it, byte
// strides `bytes`, of `flag_dtype`: kUInt8 for masks) is nonzero: flags
// and their inclusive prefix sum, both int64 over the shape. `count` (when
// not null) gets the number set, read back from the device.
struct MaskRanks {
  std::unique_ptr<DeviceTemp> flags, incl;
  int64_t n = 0;
};

template <class L>
absl::StatusOr<MaskRanks> RankMask(const KernelContext& ctx, const Shape& shape, const char* data, const Shape& bytes,
                                   ScalarType flag_dtype, int64_t* count) {
  const std::string name = ctx.op->full_name();
  MaskRanks r;
  TD_ASSIGN_OR_RETURN(r.n, CheckedNumel(shape));
  if (count != nullptr) *count = 0;
  if (r.n == 0) return r;
  TD_ASSIGN_OR_RETURN(r.flags, MakeTemp<L>(ctx, {r.n}, ScalarType::kInt64));
  TD_ASSIGN_OR_RETURN(r.incl, MakeTemp<L>(ctx, {r.n}, ScalarType::kInt64));
  AdvIndexCall call;
  call.op = AdvOp::kMaskFlags;
  call.dtype = flag_dtype;
  call.out = r.flags->buffer.get();
  call.in = data;
  TD_RETURN_IF_ERROR(BuildAdvGeometry(name, shape, {RowMajorByteStrides(shape, 8), bytes, Shape()}, &call));
  TD_RETURN_IF_ERROR(LaunchAdv<L>(ctx, call));
  auto* flags = reinterpret_cast<const int64_t*>(r.flags->buffer.get());
  auto* incl = reinterpret_cast<int64_t*>(r.incl->buffer.get());
  TD_RETURN_IF_ERROR(L::InclusiveSum(name, flags, incl, r.n, ctx.stream));
  if (count != nullptr) TD_RETURN_IF_ERROR(L::CopyToHost(name, count, incl + (r.n - 1), 8, ctx.stream));
  return r;
}

// The coordinates of the set positions of `ranks` over `shape`, written
// into `out` (int64, element strides s0 per set position, s1 per dim).
template <class L>
absl::Status FillNonzero(const KernelContext& ctx, const Shape& shape, const MaskRanks& ranks, char* out, int64_t s0,
                         int64_t s1) {
  const std::string name = ctx.op->full_name();
  if (shape.size() > static_cast<size_t>(kMaxDims)) {
    return NotImplementedErr(absl::StrCat(name, ": CUDA supports at most ", kMaxDims, " dimensions; got ",
                                          ShapeToString(shape)));
  }
  AdvIndexCall call;
  call.op = AdvOp::kNonzeroFill;
  call.out = out;
  call.in = ranks.flags->buffer.get();
  call.vals = ranks.incl->buffer.get();
  call.count = ranks.n;
  call.out_stride0 = s0;
  call.out_stride1 = s1;
  call.ndim = static_cast<int32_t>(shape.size());
  std::copy(shape.begin(), shape.end(), call.sizes);
  TD_RETURN_IF_ERROR(BuildAdvGeometry(name, {ranks.n}, {Shape{8}, Shape(), Shape()}, &call));
  return LaunchAdv<L>(ctx, call);
}

// index.Tensor(self, indices): self[indices] for int64/int32 index tensors
// and None slots (the CPU refuses boolean masks: the client expands them).
template <class L>
absl::Status IndexTensor(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const cpu::IndexTensorArgs a, cpu::ReadIndexTensor(ctx));
  const TensorRef& self = a.self;
  const TensorRef& out = ctx.outputs[0];
  if (a.ops.empty()) return CopyConvert<L>(ctx, out, self);
  const TensorMeta& sm = *self.meta;
  const std::vector<AdvIndexOperand>& ops = a.ops;
  const AdvLayout& layout = a.layout;
  // The CPU checks the indices only of elements it writes.
  if (out.meta->numel() == 0) return absl::OkStatus();
  const int64_t item = sm.itemsize();
  Shape self_bytes = sm.strides;
  for (int64_t& v : self_bytes) v *= item;
  TD_ASSIGN_OR_RETURN(std::unique_ptr<DeviceTemp> offs, MakeTemp<L>(ctx, layout.b, ScalarType::kInt64));
  TD_RETURN_IF_ERROR(IndexOffsets<L>(ctx, ops, layout, sm.sizes, self_bytes, offs->buffer.get()));
  // The gather over the result: offs on B's dims, self on the others.
  const int64_t nd = static_cast<int64_t>(layout.sizes.size()), nb = static_cast<int64_t>(layout.b.size());
  const Shape b_bytes = RowMajorByteStrides(layout.b, 8);
  Shape strides[3] = {Shape(nd), Shape(nd, 0), Shape(nd, 0)};
  for (int64_t r = 0; r < nd; ++r) {
    strides[0][r] = out.meta->strides[r] * item;
    if (layout.self_dim_at[r] >= 0) strides[2][r] = self_bytes[layout.self_dim_at[r]];
  }
  for (int64_t i = 0; i < nb; ++i) strides[1][layout.first_b + i] = b_bytes[i];
  AdvIndexCall call;
  call.op = AdvOp::kGatherOffsets;
  call.itemsize = static_cast<int32_t>(item);
  call.out = out.data_at_offset();
  call.in = offs->buffer.get();
  call.src = self.data_at_offset();
  TD_RETURN_IF_ERROR(BuildAdvGeometry("index", layout.sizes, strides, &call));
  return LaunchAdv<L>(ctx, call);
}

// index_put(self, indices, values, accumulate): out = self, then
// out[indices] = values (or += with accumulate), values broadcast to the
// indexing result's shape. A boolean mask expands to the coordinates of its
// set elements (their count read back from the device), as on the CPU.
template <class L>
absl::Status IndexPut(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const cpu::IndexPutArgs a, cpu::ReadIndexPut(ctx));
  const TensorRef &self = a.self, &values = a.values;
  const bool accumulate = a.accumulate;
  const TensorRef& out = ctx.outputs[0];
  TD_RETURN_IF_ERROR(CopyConvert<L>(ctx, out, self));
  const TensorMeta& om = *out.meta;
  std::vector<AdvIndexOperand> ops;
  std::vector<std::unique_ptr<DeviceTemp>> coords;  // masks' coordinate lists
  int64_t pos = 0;
  for (const TensorMeta* m : *a.indices) {
    if (m == nullptr) {
      ++pos;
      continue;
    }
    TD_ASSIGN_OR_RETURN(TensorRef t, InputTensorOf(ctx, m));
    TD_RETURN_IF_ERROR(cpu::CheckIndexPutIndex(*m, pos, om.sizes));
    if (m->dtype == ScalarType::kBool || m->dtype == ScalarType::kUInt8) {
      // Row j of a [dim, count] temporary holds the mask's coordinates along its dim j.
      Shape mask_bytes = m->strides;
      for (int64_t& v : mask_bytes) v *= m->itemsize();
      int64_t count = 0;
      TD_ASSIGN_OR_RETURN(MaskRanks ranks,
                          RankMask<L>(ctx, m->sizes, t.data_at_offset(), mask_bytes, ScalarType::kUInt8, &count));
      TD_ASSIGN_OR_RETURN(std::unique_ptr<DeviceTemp> c, MakeTemp<L>(ctx, {m->dim(), count}, ScalarType::kInt64));
      if (count > 0) TD_RETURN_IF_ERROR(FillNonzero<L>(ctx, m->sizes, ranks, c->buffer.get(), 1, count));
      for (int64_t j = 0; j < m->dim(); ++j) {
        ops.push_back(AdvIndexOperand{pos + j, c->buffer.get() + j * count * 8, ScalarType::kInt64, {count}, {1}});
      }
      coords.push_back(std::move(c));
      pos += m->dim();
    } else {
      ops.push_back(AdvIndexOperand{pos++, t.data_at_offset(), m->dtype, m->sizes, m->strides});
    }
  }
  TD_ASSIGN_OR_RETURN(const AdvLayout layout, cpu::IndexPutLayout(ops, om.sizes));
  // values broadcast to the result's shape.
  const int64_t nr = static_cast<int64_t>(layout.sizes.size()), item = om.itemsize();
  TD_ASSIGN_OR_RETURN(Shape v_bytes, cpu::IndexPutValueStrides(*values.meta, layout.sizes));
  for (int64_t& v : v_bytes) v *= item;
  TD_ASSIGN_OR_RETURN(const int64_t nb, CheckedNumel(layout.b));
  if (nb == 0) return absl::OkStatus();
  // keys: each element of B's destination offset in out (checking every
  // index, as the CPU does before writing); vals: where its values start.
  Shape out_bytes = om.strides;
  for (int64_t& v : out_bytes) v *= item;
  TD_ASSIGN_OR_RETURN(std::unique_ptr<DeviceTemp> keys, MakeTemp<L>(ctx, {4, nb}, ScalarType::kInt64));
  char* k_in = keys->buffer.get();
  char* v_in = k_in + nb * 8;
  char* k_out = k_in + 2 * nb * 8;
  char* v_out = k_in + 3 * nb * 8;
  if (ops.empty()) {
    if (const int e = L::Memset(k_in, nb * 8, ctx.stream); e != 0) {
      return LaunchError(ctx.op->full_name(), e, L::ErrorString(e));
    }
  }
  TD_RETURN_IF_ERROR(IndexOffsets<L>(ctx, ops, layout, om.sizes, out_bytes, k_in));
  TD_ASSIGN_OR_RETURN(const int64_t result_numel, CheckedNumel(layout.sizes));
  if (result_numel == 0) return absl::OkStatus();
  const int64_t n_b_dims = static_cast<int64_t>(layout.b.size());
  {
    Shape b_values(n_b_dims);
    for (int64_t i = 0; i < n_b_dims; ++i) b_values[i] = v_bytes[layout.first_b + i];
    AdvIndexCall call;
    call.op = AdvOp::kOffsetOf;
    call.out = v_in;
    TD_RETURN_IF_ERROR(
        BuildAdvGeometry("index_put", layout.b, {RowMajorByteStrides(layout.b, 8), b_values, Shape()}, &call));
    TD_RETURN_IF_ERROR(LaunchAdv<L>(ctx, call));
  }
  TD_RETURN_IF_ERROR(L::SortPairs("index_put", reinterpret_cast<const int64_t*>(k_in), reinterpret_cast<int64_t*>(k_out),
                                  reinterpret_cast<const int64_t*>(v_in), reinterpret_cast<int64_t*>(v_out), nb,
                                  ctx.stream));
  // One thread per (sorted element of B, position in self's other dims).
  Shape shape = {nb}, strides[3] = {{0}, {8}, {0}};
  for (int64_t r = 0; r < nr; ++r) {
    if (layout.self_dim_at[r] < 0) continue;
    shape.push_back(layout.sizes[r]);
    strides[0].push_back(out_bytes[layout.self_dim_at[r]]);
    strides[1].push_back(0);
    strides[2].push_back(v_bytes[r]);
  }
  AdvIndexCall call;
  call.op = AdvOp::kPutSorted;
  call.dtype = om.dtype;
  call.itemsize = static_cast<int32_t>(item);
  call.accumulate = accumulate;
  call.out = out.data_at_offset();
  call.src = values.data_at_offset();
  call.keys = k_out;
  call.vals = v_out;
  call.count = nb;
  if (accumulate && !DtypeInSet(om.dtype, kSetAllButF8)) return DtypeNotImplemented("index_put", om.dtype);
  TD_RETURN_IF_ERROR(BuildAdvGeometry("index_put", shape, strides, &call));
  return LaunchAdv<L>(ctx, call);
}

// masked_scatter(self, mask, source): out = self broadcast with mask; the
// k-th set element of the broadcast mask (row-major) takes source's k-th
// element (row-major). A source shorter than the mask's count is recorded
// in the error word (kSourceTooShort): no read-back.
template <class L>
absl::Status MaskedScatter(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const cpu::MaskedScatterArgs a, cpu::ReadMaskedScatter(ctx));
  const TensorRef &self = a.self, &mask = a.mask, &source = a.source;
  const TensorRef& out = ctx.outputs[0];
  TD_RETURN_IF_ERROR(CopyConvert<L>(ctx, out, self));
  const TensorMeta& om = *out.meta;
  TD_ASSIGN_OR_RETURN(Shape mask_bytes, cpu::BroadcastByteStrides(*mask.meta, om.sizes));
  TD_ASSIGN_OR_RETURN(MaskRanks ranks,
                      RankMask<L>(ctx, om.sizes, mask.data_at_offset(), mask_bytes, ScalarType::kUInt8, nullptr));
  if (ranks.n == 0) return absl::OkStatus();
  // The source's elements in row-major order.
  std::unique_ptr<DeviceTemp> dense;
  const char* src = source.data_at_offset();
  if (!source.meta->is_contiguous()) {
    TD_ASSIGN_OR_RETURN(dense, MakeTemp<L>(ctx, source.meta->sizes, source.meta->dtype));
    TD_RETURN_IF_ERROR(CopyConvert<L>(ctx, dense->ref(), source));
    src = dense->buffer.get();
  }
  const int64_t item = om.itemsize();
  Shape out_bytes = om.strides;
  for (int64_t& v : out_bytes) v *= item;
  AdvIndexCall call;
  call.op = AdvOp::kMaskedScatterFill;
  call.itemsize = static_cast<int32_t>(item);
  call.out = out.data_at_offset();
  call.in = ranks.flags->buffer.get();
  call.vals = ranks.incl->buffer.get();
  call.src = src;
  call.count = ranks.n;
  call.src_numel = source.meta->numel();
  TD_RETURN_IF_ERROR(
      BuildAdvGeometry("masked_scatter", om.sizes, {RowMajorByteStrides(om.sizes, 8), out_bytes, Shape()}, &call));
  TD_RETURN_IF_ERROR(SetAdvErrorWord(ctx, &call));
  return LaunchAdv<L>(ctx, call);
}

// nonzero(self): the coordinates of self's nonzero elements in row-major
// order, as (count, ndim) int64 with strides (1, count) (the CPU's and
// PyTorch's transposed layout). The count is read back from the device.
template <class L>
absl::Status Nonzero(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, -1));
  TD_INTERNAL_CHECK(ctx.outputs.empty() && ctx.allocate_output, "nonzero: outputs preallocated");
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  const TensorMeta& m = *self.meta;
  if (!DtypeInSet(m.dtype, kSetAll)) return DtypeNotImplemented("nonzero", m.dtype);
  const int64_t nd = m.dim();
  Shape bytes = m.strides;
  for (int64_t& v : bytes) v *= m.itemsize();
  int64_t count = 0;
  TD_ASSIGN_OR_RETURN(MaskRanks ranks, RankMask<L>(ctx, m.sizes, self.data_at_offset(), bytes, m.dtype, &count));
  TensorMeta om = TensorMeta::Contiguous({count, nd}, ScalarType::kInt64, ctx.device);
  om.strides = {1, count};
  TD_ASSIGN_OR_RETURN(TensorRef out, ctx.allocate_output(om));
  if (count == 0 || nd == 0) return absl::OkStatus();
  return FillNonzero<L>(ctx, m.sizes, ranks, out.data_at_offset(), out.meta->strides[0], out.meta->strides[1]);
}

// masked_select(self, mask): self's elements where the mask (broadcast
// together with self) is set, in row-major order, as a 1-D tensor. The
// count is read back from the device.
template <class L>
absl::Status MaskedSelect(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const cpu::MaskedSelectArgs a, cpu::ReadMaskedSelect(ctx));
  const TensorRef &self = a.self, &mask = a.mask;
  const Shape& shape = a.shape;
  TD_ASSIGN_OR_RETURN(Shape mask_bytes, cpu::BroadcastByteStrides(*mask.meta, shape));
  int64_t count = 0;
  TD_ASSIGN_OR_RETURN(MaskRanks ranks,
                      RankMask<L>(ctx, shape, mask.data_at_offset(), mask_bytes, ScalarType::kUInt8, &count));
  TD_ASSIGN_OR_RETURN(TensorRef out,
                      ctx.allocate_output(TensorMeta::Contiguous({count}, self.meta->dtype, ctx.device)));
  if (count == 0) return absl::OkStatus();
  TD_ASSIGN_OR_RETURN(Shape self_bytes, cpu::BroadcastByteStrides(*self.meta, shape));
  const int64_t item = self.meta->itemsize();
  AdvIndexCall call;
  call.op = AdvOp::kMaskedSelectFill;
  call.itemsize = static_cast<int32_t>(item);
  call.out = out.data_at_offset();
  call.out_stride0 = out.meta->strides[0] * item;
  call.in = ranks.flags->buffer.get();
  call.vals = ranks.incl->buffer.get();
  call.src = self.data_at_offset();
  call.count = ranks.n;
  TD_RETURN_IF_ERROR(
      BuildAdvGeometry("masked_select", shape, {RowMajorByteStrides(shape, 8), self_bytes, Shape()}, &call));
  return LaunchAdv<L>(ctx, call);
}

template <class L>
absl::Status RegisterAdvIndexKernels(KernelRegistry& r, DeviceType device) {
  struct Entry {
    const char* name;
    KernelFn fn;
  };
  const Entry entries[] = {
      {"index.Tensor", IndexTensor<L>},
      {"index_put", IndexPut<L>},
      {"masked_scatter", MaskedScatter<L>},
      {"nonzero", Nonzero<L>},
      {"masked_select", MaskedSelect<L>},
  };
  for (const Entry& e : entries) TD_RETURN_IF_ERROR(r.Register(device, e.name, e.fn));
  return absl::OkStatus();
}

}  // namespace tensord::cuda::ew

#endif  // TENSORD_KERNELS_CUDA_ADVINDEX_KERNELS_H_
