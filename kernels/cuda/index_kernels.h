// kernels/cuda/index_kernels.h — the host side of the CUDA indexing kernels:
// gather, index_select, scatter.src, scatter.value, scatter_add and
// index_add. Each
// reads the call's arguments as the op's CPU kernel does
// (kernels/cpu/index.cc, shape.cc, scatter.cc: the same checks and errors)
// and describes one launch (IndexCall) to `L`, the device (see
// elementwise_kernels.h):
//
//   RegisterIndexKernels<CudaLaunch>(registry, DeviceType::kCUDA);
//
// The indices themselves are on the device: the kernels check each one and
// record a bad one in ctx.error_word, and the op's call returns OK; the
// stream raises the CPU kernel's error for it at its next sync point
// (tensord/kernels/device_error_status.h). With several bad indices the CPU
// reports the first in row-major order, the GPU one of them. Host code only.
// Internal to kernels/cuda.
#ifndef TENSORD_KERNELS_CUDA_INDEX_KERNELS_H_
#define TENSORD_KERNELS_CUDA_INDEX_KERNELS_H_

#include <cstring>
#include <memory>
#include <string>

#include "../cpu/index_args.h"
#include "elementwise_kernels.h"
#include "index_call.h"
#include "tensord/kernels/device_error.h"

namespace tensord::cuda::ew {

// Fills call->geometry for 3 operands over `shape` with the byte strides
// `strides[k]` of operand k; NotImplemented naming `op` past kMaxDims dims.
absl::Status BuildIndexGeometry(absl::string_view op, const Shape& shape, const Shape (&strides)[3],
                                IndexCall* call);

// call->alpha: the bytes of `alpha` as dtype's compute value, converted as
// the CPU kernels convert it (ScalarTo).
absl::Status SetAlpha(const char* name, ScalarType dtype, const Scalar& alpha, IndexCall* call);

// The call's error word and op, from the context (an internal error
// without a word: the stream gives every kernel one).
absl::Status SetErrorWord(const KernelContext& ctx, IndexCall* call);

template <class L>
absl::Status LaunchIndex(const KernelContext& ctx, const IndexCall& call) {
  const int code = L::Index(call, ctx.stream);
  if (code == kLaunchOk) return absl::OkStatus();
  return LaunchError(ctx.op->full_name(), code, code > 0 ? L::ErrorString(code) : std::string());
}

using cpu::AtLeast1dMeta;

// gather(self, dim, index): out[i] = self[i with i_dim = index[i]].
template <class L>
absl::Status Gather(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const cpu::GatherArgs a, cpu::ReadGather(ctx));
  const TensorRef &self_in = a.self, &index_in = a.index, &out_in = ctx.outputs[0];
  const TensorMeta &self = a.self1d, &index = a.index1d, &out = a.out1d;
  const int64_t dim = a.dim;
  const int64_t item = self.itemsize(), iitem = index.itemsize();
  Shape strides[3] = {Shape(out.dim()), Shape(out.dim()), Shape(out.dim())};
  for (int64_t d = 0; d < self.dim(); ++d) {
    strides[0][d] = out.strides[d] * item;
    strides[1][d] = index.strides[d] * iitem;
    strides[2][d] = d == dim ? 0 : self.strides[d] * item;
  }
  IndexCall call;
  call.op = IndexOp::kGather;
  call.dtype = self.dtype;
  call.index_dtype = index.dtype;
  call.out = out_in.base + out.storage_offset * item;
  call.index = index_in.base + index.storage_offset * iitem;
  call.src = self_in.base + self.storage_offset * item;
  call.dim = dim;
  call.dim_size = self.sizes[dim];
  call.dim_stride = self.strides[dim] * item;
  TD_RETURN_IF_ERROR(BuildIndexGeometry("gather", index.sizes, strides, &call));
  TD_RETURN_IF_ERROR(SetErrorWord(ctx, &call));
  return LaunchIndex<L>(ctx, call);
}

// index_select(self, dim, index): out = self with dim `dim` taken at the
// (1-D or 0-dim) index's entries.
template <class L>
absl::Status IndexSelect(KernelContext& ctx) {
  TD_ASSIGN_OR_RETURN(const cpu::IndexSelectArgs a, cpu::ReadIndexSelect(ctx));
  const TensorRef &self_in = a.self, &index_in = a.index;
  const TensorMeta &self = a.self1d, &out = a.out;
  const Shape& expect = a.sizes;
  const int64_t dim = a.dim;
  const int64_t item = self.itemsize(), iitem = index_in.meta->itemsize();
  Shape strides[3] = {Shape(self.dim()), Shape(self.dim(), 0), Shape(self.dim())};
  for (int64_t d = 0; d < self.dim(); ++d) {
    strides[0][d] = out.strides[d] * item;
    strides[2][d] = d == dim ? 0 : self.strides[d] * item;
  }
  strides[1][dim] = index_in.meta->dim() == 1 ? index_in.meta->strides[0] * iitem : 0;
  IndexCall call;
  call.op = IndexOp::kGather;
  call.dtype = self.dtype;
  call.index_dtype = index_in.meta->dtype;
  call.out = ctx.outputs[0].base + out.storage_offset * item;
  call.index = index_in.data_at_offset();
  call.src = self_in.base + self.storage_offset * item;
  call.dim = dim;
  call.dim_size = self.sizes[dim];
  call.dim_stride = self.strides[dim] * item;
  TD_RETURN_IF_ERROR(BuildIndexGeometry("index_select", expect, strides, &call));
  TD_RETURN_IF_ERROR(SetErrorWord(ctx, &call));
  return LaunchIndex<L>(ctx, call);
}

// scatter.src / scatter.value / scatter_add (self, dim, index, src|value):
// out = self, then each index entry's element of src (or value) goes to
// out at that entry's position with its dim-`dim` coordinate replaced by
// the entry: stored (the last one wins), or added (kAdd).
template <class L, bool kAdd>
absl::Status ScatterKernel(KernelContext& ctx) {
  const char* name = kAdd ? "scatter_add" : "scatter";
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(TensorRef index, InputTensor(ctx, 2));
  const TensorRef& out = ctx.outputs[0];
  TD_RETURN_IF_ERROR(cpu::ExpectOutputSizes(name, out, self.meta->sizes));
  const ScalarType dt = out.meta->dtype;
  // The CPU's scatter_add adds in its dtype set; scatter moves bytes.
  if (kAdd && !DtypeInSet(dt, kSetAllButF8)) return DtypeNotImplemented(name, dt);
  TD_RETURN_IF_ERROR(CopyConvert<L>(ctx, out, self));
  if (index.meta->numel() == 0) return absl::OkStatus();
  if (kAdd) {
    TD_INTERNAL_CHECK(index.meta->dtype == ScalarType::kInt64 || index.meta->dtype == ScalarType::kInt32,
                      "scatter_add: index dtype");
  } else {
    TD_INTERNAL_CHECK(index.meta->dtype == ScalarType::kInt64, "scatter: index dtype was not checked");
  }
  const bool from_src = ctx.args[3].is_tensor();
  TensorRef src{};
  IndexCall call;
  if (from_src) {
    TD_ASSIGN_OR_RETURN(src, InputTensor(ctx, 3));
    TD_INTERNAL_CHECK(src.meta->dtype == dt, name, ": src dtype was not checked");
  } else {
    TD_INTERNAL_CHECK(!kAdd, "scatter_add: src is a tensor");
    TD_ASSIGN_OR_RETURN(std::unique_ptr<cpu::TempTensor> fill, cpu::TempTensor::Make({}, dt));
    TD_RETURN_IF_ERROR(cpu::Fill(fill->ref(), ctx.args[3].scalar()));
    TD_INTERNAL_CHECK(out.meta->itemsize() <= static_cast<int64_t>(sizeof(call.value)), "scatter: element size");
    std::memcpy(&call.value, fill->data(), static_cast<size_t>(out.meta->itemsize()));
  }
  const TensorMeta om = AtLeast1dMeta(*out.meta), im = AtLeast1dMeta(*index.meta);
  const int64_t nd = om.dim();
  int64_t dim = ctx.args[1].to_int();  // checked by the meta function; a 0-dim self has rank 1 here
  if (dim < 0) dim += nd;
  const TensorMeta sm = from_src ? AtLeast1dMeta(*src.meta) : TensorMeta{};
  TD_INTERNAL_CHECK(dim >= 0 && dim < nd && im.dim() == nd && (!from_src || sm.dim() == nd), name,
                    ": shapes were not checked");
  for (int64_t d = 0; d < nd; ++d) {
    TD_INTERNAL_CHECK(d == dim || im.sizes[d] <= om.sizes[d], name, ": index larger than self");
    if (from_src) TD_INTERNAL_CHECK(im.sizes[d] <= sm.sizes[d], name, ": index larger than src");
  }
  const int64_t item = om.itemsize(), iitem = im.itemsize();
  // Rows: index's shape without `dim`, which each thread walks.
  Shape rows, strides[3];
  for (int64_t d = 0; d < nd; ++d) {
    if (d == dim) continue;
    rows.push_back(im.sizes[d]);
    strides[0].push_back(om.strides[d] * item);
    strides[1].push_back(im.strides[d] * iitem);
    strides[2].push_back(from_src ? sm.strides[d] * item : 0);
  }
  if (kAdd) TD_RETURN_IF_ERROR(SetAlpha(name, dt, Scalar::Int(1), &call));
  call.op = kAdd ? IndexOp::kScatterAdd : IndexOp::kScatter;
  call.dtype = dt;
  call.index_dtype = im.dtype;
  call.out = out.base + om.storage_offset * item;
  call.index = index.base + im.storage_offset * iitem;
  call.src = from_src ? src.base + sm.storage_offset * item : nullptr;
  call.dim = dim;
  call.dim_size = om.sizes[dim];
  call.dim_stride = om.strides[dim] * item;
  call.scan_count = im.sizes[dim];
  call.scan_index_stride = im.strides[dim] * iitem;
  call.scan_src_stride = from_src ? sm.strides[dim] * item : 0;
  TD_RETURN_IF_ERROR(BuildIndexGeometry(name, rows, strides, &call));
  TD_RETURN_IF_ERROR(SetErrorWord(ctx, &call));
  return LaunchIndex<L>(ctx, call);
}

// index_add(self, dim, index, source, alpha): out = self; for every element
// of source at i, out[i with i_dim = index[i_dim]] += alpha * source[i].
// Every row of out along `dim` scans the whole index vector, so each one
// reports the vector's first bad entry: the CPU's.
template <class L>
absl::Status IndexAdd(KernelContext& ctx) {
  TD_RETURN_IF_ERROR(CheckContext(ctx, 1));
  TD_ASSIGN_OR_RETURN(TensorRef self, InputTensor(ctx, 0));
  TD_ASSIGN_OR_RETURN(TensorRef index, InputTensor(ctx, 2));
  TD_ASSIGN_OR_RETURN(TensorRef source, InputTensor(ctx, 3));
  const TensorRef& out = ctx.outputs[0];
  TD_RETURN_IF_ERROR(cpu::ExpectOutputSizes("index_add", out, self.meta->sizes));
  const ScalarType dt = out.meta->dtype;
  if (!DtypeInSet(dt, kSetAllButF8)) return DtypeNotImplemented("index_add", dt);
  TD_RETURN_IF_ERROR(CopyConvert<L>(ctx, out, self));
  TD_ASSIGN_OR_RETURN(const int64_t dim, cpu::CheckIndexAdd(ctx, *out.meta, *index.meta, *source.meta));
  const TensorMeta om = AtLeast1dMeta(*out.meta), sm = AtLeast1dMeta(*source.meta);
  const int64_t nd = om.dim();
  if (index.meta->numel() == 0) return absl::OkStatus();
  const int64_t item = om.itemsize(), iitem = index.meta->itemsize();
  Shape rows, strides[3];
  for (int64_t d = 0; d < nd; ++d) {
    if (d == dim) continue;
    rows.push_back(sm.sizes[d]);
    strides[0].push_back(om.strides[d] * item);
    strides[1].push_back(0);
    strides[2].push_back(sm.strides[d] * item);
  }
  IndexCall call;
  TD_RETURN_IF_ERROR(SetAlpha("index_add", dt, ctx.args[4].scalar(), &call));
  call.op = IndexOp::kScatterAdd;
  call.dtype = dt;
  call.index_dtype = index.meta->dtype;
  call.out = out.base + om.storage_offset * item;
  call.index = index.data_at_offset();
  call.src = source.base + sm.storage_offset * item;
  call.dim = dim;
  call.dim_size = om.sizes[dim];
  call.dim_stride = om.strides[dim] * item;
  call.scan_count = index.meta->numel();
  call.scan_index_stride = index.meta->dim() == 1 ? index.meta->strides[0] * iitem : 0;
  call.scan_src_stride = sm.strides[dim] * item;
  TD_RETURN_IF_ERROR(BuildIndexGeometry("index_add", rows, strides, &call));
  TD_RETURN_IF_ERROR(SetErrorWord(ctx, &call));
  return LaunchIndex<L>(ctx, call);
}

template <class L>
absl::Status RegisterIndexKernels(KernelRegistry& r, DeviceType device) {
  struct Entry {
    const char* name;
    KernelFn fn;
  };
  const Entry entries[] = {
      {"gather", Gather<L>},
      {"index_select", IndexSelect<L>},
      {"scatter.src", ScatterKernel<L, false>},
      {"scatter.value", ScatterKernel<L, false>},
      {"scatter_add", ScatterKernel<L, true>},
      {"index_add", IndexAdd<L>},
  };
  for (const Entry& e : entries) TD_RETURN_IF_ERROR(r.Register(device, e.name, e.fn));
  return absl::OkStatus();
}

}  // namespace tensord::cuda::ew

#endif  // TENSORD_KERNELS_CUDA_INDEX_KERNELS_H_
