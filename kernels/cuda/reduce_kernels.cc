// The non-template helpers of reduce_kernels.h.
#include "reduce_kernels.h"

namespace tensord::cuda::ew {

absl::Status BuildReduceGeometry(absl::string_view op, const TensorRef& in, const std::vector<bool>& mask,
                                 bool keepdim, const TensorRef* values, const TensorRef* indices, ReduceCall* call) {
  const TensorMeta& m = *in.meta;
  const int64_t nd = m.dim();
  TD_INTERNAL_CHECK(static_cast<int64_t>(mask.size()) == nd, op, ": reduction mask of the wrong rank");
  const TensorRef* first = values != nullptr ? values : indices;
  TD_INTERNAL_CHECK(first != nullptr, op, ": a reduction without outputs");
  Shape kept_sizes, reduced_sizes;
  Shape in_kept, in_reduced, values_kept, indices_kept;
  int64_t out_dim = 0;  // the output dim of the next kept dim
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t in_stride = m.strides[d] * m.itemsize();
    if (mask[static_cast<size_t>(d)]) {
      reduced_sizes.push_back(m.sizes[d]);
      in_reduced.push_back(in_stride);
      if (keepdim) ++out_dim;
      continue;
    }
    kept_sizes.push_back(m.sizes[d]);
    in_kept.push_back(in_stride);
    for (int k = 0; k < 2; ++k) {
      const TensorRef* o = k == 0 ? values : indices;
      Shape& dst = k == 0 ? values_kept : indices_kept;
      if (o == nullptr) {
        dst.push_back(0);
        continue;
      }
      TD_INTERNAL_CHECK(out_dim < o->meta->dim() && o->meta->sizes[out_dim] == m.sizes[d], op,
                        ": output sizes ", ShapeToString(o->meta->sizes), " do not match the reduction of ",
                        ShapeToString(m.sizes));
      dst.push_back(o->meta->strides[out_dim] * o->meta->itemsize());
    }
    ++out_dim;
  }
  for (const TensorRef* o : {values, indices}) {
    if (o != nullptr) {
      TD_INTERNAL_CHECK(o->meta->dim() == out_dim, op, ": output sizes ", ShapeToString(o->meta->sizes),
                        " do not match the reduction of ", ShapeToString(m.sizes));
    }
  }
  const int64_t* kept_strides[] = {values_kept.data(), indices_kept.data(), in_kept.data()};
  const int64_t* reduced_strides[] = {in_reduced.data()};
  if (!BuildGeometry(static_cast<int>(kept_sizes.size()), kept_sizes.data(), 3, kept_strides, &call->kept) ||
      !BuildLogicalGeometry(static_cast<int>(reduced_sizes.size()), reduced_sizes.data(), 1, reduced_strides,
                            &call->reduced)) {
    return NotImplementedErr(absl::StrCat(op, ": CUDA reductions support at most ", kMaxDims,
                                          " kept and ", kMaxDims, " reduced dimensions after merging; got ",
                                          ShapeToString(m.sizes)));
  }
  call->in = in.data_at_offset();
  call->in_dtype = m.dtype;
  if (values != nullptr) {
    call->values = values->data_at_offset();
    call->values_dtype = values->meta->dtype;
  }
  if (indices != nullptr) call->indices = indices->data_at_offset();
  call->count = call->reduced.numel();
  return absl::OkStatus();
}

}  // namespace tensord::cuda::ew
