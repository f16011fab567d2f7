// Meta functions of view ops: view, reshape, transpose, permute, t, slice,
// select, narrow, expand, squeeze, unsqueeze, flatten. A view aliases its
// input (alias_of = 0) and only changes sizes, strides and storage_offset;
// reshape and flatten alias when PyTorch's computeStride finds view strides
// and otherwise make a contiguous copy (alias_of = -1).
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "meta_common.h"
#include "meta_functions.h"
#include "tensord/meta/shape_rules.h"

namespace tensord::meta {
namespace {

constexpr int kAliasSelf = 0;

MetaResult ViewOf(const TensorMeta& self, Shape sizes, Shape strides, int64_t storage_offset) {
  return OneOutput(MakeMeta(std::move(sizes), std::move(strides), storage_offset, self.dtype, self.device), kAliasSelf);
}

MetaResult SameView(const TensorMeta& self) { return ViewOf(self, self.sizes, self.strides, self.storage_offset); }

// reshape's rule: a view when computeStride succeeds, else a contiguous copy.
absl::StatusOr<MetaResult> ReshapeTo(absl::string_view op, const TensorMeta& self, absl::Span<const int64_t> shape) {
  TD_ASSIGN_OR_RETURN(Shape sizes, InferSize(op, shape, self.numel()));
  std::optional<Shape> strides = ComputeViewStrides(self.sizes, self.strides, sizes);
  if (strides) return ViewOf(self, std::move(sizes), std::move(*strides), self.storage_offset);
  TD_RETURN_IF_ERROR(CheckNewSizes(op, sizes, self.dtype));
  return OneOutput(TensorMeta::Contiguous(std::move(sizes), self.dtype, self.device), -1);
}

// at::slice on validated metadata; `start`/`end` are clamped as PyTorch does.
absl::StatusOr<MetaResult> SliceImpl(absl::string_view op, const TensorMeta& self, int64_t dim,
                                     std::optional<int64_t> start_opt, std::optional<int64_t> end_opt, int64_t step) {
  if (self.dim() == 0) return IndexErr(absl::StrCat(op, "() cannot be applied to a 0-dim tensor."));
  TD_ASSIGN_OR_RETURN(int64_t d, WrapDim(op, dim, self.dim()));
  if (step <= 0) return RuntimeErr(absl::StrCat(op, ": slice step must be positive"));
  const int64_t size = self.sizes[d];
  int64_t start = start_opt.value_or(0);
  int64_t end = end_opt.value_or(INT64_MAX);
  if (start < 0) start += size;
  if (end < 0) end += size;
  if (start < 0) {
    start = 0;
  } else if (start >= size) {
    start = size;
  }
  if (end < start) {
    end = start;
  } else if (end >= size) {
    end = size;
  }
  Shape sizes = self.sizes;
  Shape strides = self.strides;
  const int64_t len = end - start;
  sizes[d] = len == 0 ? 0 : 1 + (len - 1) / step;  // round up without overflow
  int64_t offset = 0;
  if (__builtin_mul_overflow(start, strides[d], &offset) ||
      __builtin_add_overflow(offset, self.storage_offset, &offset)) {
    return RuntimeErr(absl::StrCat(op, ": storage offset overflows int64"));
  }
  // A step larger than the dim leaves at most one element: its stride is
  // never used to address memory, but keep PyTorch's product when it fits.
  if (__builtin_mul_overflow(strides[d], step, &strides[d])) {
    if (sizes[d] > 1) return RuntimeErr(absl::StrCat(op, ": stride overflows int64"));
    strides[d] = self.strides[d];
  }
  return ViewOf(self, std::move(sizes), std::move(strides), offset);
}

}  // namespace

absl::StatusOr<MetaResult> View(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(Shape shape, IntListArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(Shape sizes, InferSize(op, shape, self->numel()));
  std::optional<Shape> strides = ComputeViewStrides(self->sizes, self->strides, sizes);
  if (!strides) {
    return RuntimeErr(absl::StrCat(op, ": view size is not compatible with input tensor's size and stride (at least one "
                                       "dimension spans across two contiguous subspaces). Use .reshape(...) instead."));
  }
  return ViewOf(*self, std::move(sizes), std::move(*strides), self->storage_offset);
}

absl::StatusOr<MetaResult> Reshape(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(Shape shape, IntListArg(op, args, 1));
  return ReshapeTo(op, *self, shape);
}

absl::StatusOr<MetaResult> Transpose(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(int64_t dim0, IntArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(int64_t dim1, IntArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(int64_t d0, WrapDim(op, dim0, self->dim()));
  TD_ASSIGN_OR_RETURN(int64_t d1, WrapDim(op, dim1, self->dim()));
  if (self->dim() == 0 || d0 == d1) return SameView(*self);
  Shape sizes = self->sizes;
  Shape strides = self->strides;
  std::swap(sizes[d0], sizes[d1]);
  std::swap(strides[d0], strides[d1]);
  return ViewOf(*self, std::move(sizes), std::move(strides), self->storage_offset);
}

absl::StatusOr<MetaResult> Permute(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(Shape dims, IntListArg(op, args, 1));
  const int64_t n = self->dim();
  if (static_cast<int64_t>(dims.size()) != n) {
    return RuntimeErr(absl::StrCat(op, "(): number of dimensions in the tensor input does not match the length of the "
                                       "desired ordering of dimensions i.e. input.dim() = ",
                                   n, " is not equal to len(dims) = ", dims.size()));
  }
  Shape sizes(n), strides(n);
  std::vector<bool> seen(n, false);
  for (int64_t i = 0; i < n; ++i) {
    TD_ASSIGN_OR_RETURN(int64_t d, WrapDim(op, dims[i], n));
    if (seen[d]) return RuntimeErr(absl::StrCat(op, "(): duplicate dims are not allowed."));
    seen[d] = true;
    sizes[i] = self->sizes[d];
    strides[i] = self->strides[d];
  }
  return ViewOf(*self, std::move(sizes), std::move(strides), self->storage_offset);
}

absl::StatusOr<MetaResult> T(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  if (self->dim() > 2) {
    return RuntimeErr(absl::StrCat(op, "() expects a tensor with <= 2 dimensions, but self is ", self->dim(), "D"));
  }
  if (self->dim() < 2) return SameView(*self);
  return ViewOf(*self, {self->sizes[1], self->sizes[0]}, {self->strides[1], self->strides[0]}, self->storage_offset);
}

absl::StatusOr<MetaResult> Slice(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(int64_t dim, IntArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(std::optional<int64_t> start, OptIntArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(std::optional<int64_t> end, OptIntArg(op, args, 3));
  TD_ASSIGN_OR_RETURN(int64_t step, IntArg(op, args, 4));
  return SliceImpl(op, *self, dim, start, end, step);
}

absl::StatusOr<MetaResult> Select(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(int64_t dim, IntArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(int64_t index, IntArg(op, args, 2));
  if (self->dim() == 0) return IndexErr(absl::StrCat(op, "() cannot be applied to a 0-dim tensor."));
  TD_ASSIGN_OR_RETURN(int64_t d, WrapDim(op, dim, self->dim()));
  const int64_t size = self->sizes[d];
  if (index < -size || index >= size) {
    return IndexErr(absl::StrCat(op, "(): index ", index, " out of range for tensor of size ",
                                 ShapeToString(self->sizes), " at dimension ", d));
  }
  if (index < 0) index += size;
  Shape sizes = self->sizes;
  Shape strides = self->strides;
  const int64_t offset = self->storage_offset + index * strides[d];  // within validated storage
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  return ViewOf(*self, std::move(sizes), std::move(strides), offset);
}

// diagonal(self, offset=0, dim1=0, dim2=1): a view (shape_rules' DiagonalView).
absl::StatusOr<MetaResult> Diagonal(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(int64_t offset, IntArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(int64_t dim1, IntArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(int64_t dim2, IntArg(op, args, 3));
  TD_ASSIGN_OR_RETURN(TensorMeta v, DiagonalView(op, *self, offset, dim1, dim2));
  return ViewOf(*self, std::move(v.sizes), std::move(v.strides), v.storage_offset);
}

absl::StatusOr<MetaResult> Narrow(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(int64_t dim, IntArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(int64_t start, IntArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(int64_t length, IntArg(op, args, 3));
  if (self->dim() == 0) return RuntimeErr(absl::StrCat(op, "() cannot be applied to a 0-dim tensor."));
  TD_ASSIGN_OR_RETURN(int64_t d, WrapDim(op, dim, self->dim()));
  const int64_t size = self->sizes[d];
  // start == size is a valid (empty) start, but not a valid dim index.
  if (start != size) {
    TD_ASSIGN_OR_RETURN(start, WrapDim(op, start, size));
  }
  if (length < 0 || start > size - length) {
    return RuntimeErr(absl::StrCat(op, ": start (", start, ") + length (", length, ") exceeds dimension size (", size,
                                   ")."));
  }
  return SliceImpl(op, *self, d, start, start + length, 1);
}

absl::StatusOr<MetaResult> Expand(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(Shape target, IntListArg(op, args, 1));
  const int64_t ndim = static_cast<int64_t>(target.size());
  const int64_t tensor_dim = self->dim();
  TD_RETURN_IF_ERROR(CheckRank(op, target.size()));
  if (ndim < tensor_dim) {
    return RuntimeErr(absl::StrCat(op, ": the number of sizes provided (", ndim,
                                   ") must be greater or equal to the number of dimensions in the tensor (", tensor_dim,
                                   ")"));
  }
  // at::inferExpandGeometry.
  Shape sizes(ndim), strides(ndim);
  if (tensor_dim == 0) {
    // A 0-dim tensor expands to the target sizes with all strides 0.
    for (int64_t i = 0; i < ndim; ++i) {
      if (target[i] < 0) {
        return RuntimeErr(absl::StrCat(op, ": The expanded size of the tensor (", target[i],
                                       ") isn't allowed in a leading, non-existing dimension ", i));
      }
    }
    TD_RETURN_IF_ERROR(CheckedNumel(target).status());
    return ViewOf(*self, Shape(target.begin(), target.end()), Shape(ndim, 0), self->storage_offset);
  }
  for (int64_t i = ndim - 1; i >= 0; --i) {
    const int64_t offset = ndim - 1 - i;
    const int64_t dim = tensor_dim - 1 - offset;
    int64_t size = dim >= 0 ? self->sizes[dim] : 1;
    int64_t stride = 0;
    if (dim >= 0) {
      stride = self->strides[dim];
    } else if (i + 1 < ndim) {
      if (__builtin_mul_overflow(sizes[i + 1], strides[i + 1], &stride)) stride = 0;
    } else {
      stride = 1;
    }
    int64_t target_size = target[i];
    if (target_size == -1) {
      if (dim < 0) {
        return RuntimeErr(absl::StrCat(op, ": The expanded size of the tensor (-1) isn't allowed in a leading, "
                                           "non-existing dimension ", i));
      }
      target_size = size;
    }
    if (target_size < 0) {
      return RuntimeErr(absl::StrCat(op, ": The expanded size of the tensor (", target_size,
                                     ") must be non-negative (or -1 to keep the size) at dimension ", i));
    }
    if (size != target_size) {
      if (size != 1) {
        return RuntimeErr(absl::StrCat(op, ": The expanded size of the tensor (", target_size,
                                       ") must match the existing size (", size, ") at non-singleton dimension ", i,
                                       ".  Target sizes: ", ShapeToString(target),
                                       ".  Tensor sizes: ", ShapeToString(self->sizes)));
      }
      size = target_size;
      stride = 0;
    }
    sizes[i] = size;
    strides[i] = stride;
  }
  TD_RETURN_IF_ERROR(CheckedNumel(sizes).status());
  return ViewOf(*self, std::move(sizes), std::move(strides), self->storage_offset);
}

absl::StatusOr<MetaResult> Squeeze(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  Shape sizes, strides;
  for (int64_t i = 0; i < self->dim(); ++i) {
    if (self->sizes[i] != 1) {
      sizes.push_back(self->sizes[i]);
      strides.push_back(self->strides[i]);
    }
  }
  return ViewOf(*self, std::move(sizes), std::move(strides), self->storage_offset);
}

absl::StatusOr<MetaResult> SqueezeDim(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(int64_t dim, IntArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(int64_t d, WrapDim(op, dim, self->dim()));
  if (self->dim() == 0 || self->sizes[d] != 1) return SameView(*self);
  Shape sizes = self->sizes;
  Shape strides = self->strides;
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  return ViewOf(*self, std::move(sizes), std::move(strides), self->storage_offset);
}

absl::StatusOr<MetaResult> Unsqueeze(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(int64_t dim, IntArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(int64_t d, WrapDim(op, dim, self->dim() + 1));
  TD_RETURN_IF_ERROR(CheckRank(op, self->sizes.size() + 1));
  Shape sizes = self->sizes;
  Shape strides = self->strides;
  int64_t new_stride = 1;
  if (d < self->dim() && __builtin_mul_overflow(sizes[d], strides[d], &new_stride)) new_stride = 0;
  sizes.insert(sizes.begin() + d, 1);
  strides.insert(strides.begin() + d, new_stride);
  return ViewOf(*self, std::move(sizes), std::move(strides), self->storage_offset);
}

absl::StatusOr<MetaResult> Flatten(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(int64_t start_dim, IntArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(int64_t end_dim, IntArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(int64_t start, WrapDim(op, start_dim, self->dim()));
  TD_ASSIGN_OR_RETURN(int64_t end, WrapDim(op, end_dim, self->dim()));
  if (start > end) {
    return RuntimeErr(absl::StrCat(op, "() has invalid args: start_dim cannot come after end_dim"));
  }
  if (self->dim() == 0) return ReshapeTo(op, *self, {1});
  if (start == end) return SameView(*self);
  Shape shape(self->sizes.begin(), self->sizes.begin() + start);
  int64_t slice_numel = 1;
  for (int64_t i = start; i <= end; ++i) slice_numel *= self->sizes[i];  // validated: fits
  shape.push_back(slice_numel);
  shape.insert(shape.end(), self->sizes.begin() + end + 1, self->sizes.end());
  return ReshapeTo(op, *self, shape);
}

}  // namespace tensord::meta
