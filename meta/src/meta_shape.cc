// Meta functions of the shape ops: the list-of-views ops (split,
// split_with_sizes, chunk, unbind: every output aliases self, its strides and
// storage_offset those of a narrow/select of self) and the shape ops that copy
// (flip, roll, repeat, tril/triu, constant_pad_nd, scatter). Each follows
// PyTorch 1.13's CPU implementation, including the layout of its output:
//   flip            self's layout when self is dense (empty_like, preserve)
//   roll            cat's layout of the two halves (suggest_memory_format),
//                   contiguous when no dims are given (the flattened roll)
//   repeat, tril, triu, scatter   contiguous
//   constant_pad_nd suggest_memory_format(self); only crops: a clone (preserve)
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "meta_common.h"
#include "meta_functions.h"
#include "tensord/meta/shape_rules.h"

namespace tensord::meta {
namespace {

constexpr int kAliasSelf = 0;

// The most outputs one list-returning call may produce: every output is a
// handle on the wire and an entry in the daemon's table, so a hostile
// split(x, 1) of an expanded dim of 2^40 elements is refused here.
constexpr int64_t kMaxListOutputs = int64_t{1} << 16;

absl::Status CheckOutputCount(absl::string_view op, int64_t n) {
  if (n > kMaxListOutputs) {
    return RuntimeErr(absl::StrCat(op, ": would return ", n, " tensors; tensord returns at most ", kMaxListOutputs,
                                   " tensors from one call"));
  }
  return absl::OkStatus();
}

// self.narrow(d, start, length) with validated arguments (0 <= start,
// start + length <= size(d)): a view with the offset moved along d.
TensorMeta NarrowMeta(const TensorMeta& self, int64_t d, int64_t start, int64_t length) {
  Shape sizes = self.sizes;
  sizes[d] = length;
  // start <= size(d): at most one stride past what self addresses; an
  // overflow can only happen for an empty view, which addresses nothing.
  int64_t offset = 0;
  if (__builtin_mul_overflow(start, self.strides[d], &offset) ||
      __builtin_add_overflow(offset, self.storage_offset, &offset)) {
    offset = self.storage_offset;
  }
  return MakeMeta(std::move(sizes), self.strides, offset, self.dtype, self.device);
}

// The views of split_with_sizes once `sizes` are validated (sum == size(d)).
MetaResult SplitViews(const TensorMeta& self, int64_t d, absl::Span<const int64_t> sizes) {
  MetaResult r;
  int64_t start = 0;
  for (int64_t len : sizes) {
    r.outputs.push_back(NarrowMeta(self, d, start, len));
    r.alias_of.push_back(kAliasSelf);
    start += len;
  }
  return r;
}

// split.Tensor's rule: chunks of split_size along d, the last one smaller.
absl::StatusOr<MetaResult> SplitBySize(absl::string_view op, const TensorMeta& self, int64_t split_size,
                                       int64_t dim) {
  if (self.dim() == 0) return RuntimeErr(absl::StrCat(op, " expects at least a 1-dimensional tensor"));
  if (split_size < 0) {
    return RuntimeErr(absl::StrCat(op, " expects split_size be non-negative, but got split_size=", split_size));
  }
  TD_ASSIGN_OR_RETURN(int64_t d, WrapDim(op, dim, self.dim()));
  const int64_t dim_size = self.sizes[d];
  if (split_size == 0 && dim_size != 0) {
    return RuntimeErr(absl::StrCat(op, ": split_size can only be 0 if dimension size is 0, but got dimension size of ",
                                   dim_size));
  }
  // num_splits = max(ceil(dim_size / split_size), 1), without overflow.
  const int64_t num_splits = (split_size == 0 || dim_size == 0) ? 1 : 1 + (dim_size - 1) / split_size;
  TD_RETURN_IF_ERROR(CheckOutputCount(op, num_splits));
  Shape sizes(num_splits, split_size);
  sizes.back() = dim_size - split_size * (num_splits - 1);  // fits: <= dim_size
  return SplitViews(self, d, sizes);
}

// The zero pattern of tril/triu needs the last two dims.
absl::Status CheckMatrixDims(absl::string_view op, const TensorMeta& self) {
  if (self.dim() == 0) {
    return IndexErr(absl::StrCat(op, ": Dimension specified as -2 but tensor has no dimensions"));
  }
  return WrapDim(op, -2, self.dim()).status();
}

// scatter's index checks shared by its two overloads (PyTorch's
// scatter_gather_dtype_check and scatter_shape_check without src).
absl::Status CheckScatterIndex(absl::string_view op, const TensorMeta& self, int64_t d, const TensorMeta& index) {
  if (index.dtype != ScalarType::kInt64) {
    return RuntimeErr(absl::StrCat(op, "(): Expected dtype int64 for index, got ", DtypeName(index.dtype)));
  }
  if (index.numel() == 0) return absl::OkStatus();
  const int64_t nd = std::max<int64_t>(self.dim(), 1);
  if (std::max<int64_t>(index.dim(), 1) != nd) {
    return RuntimeErr(absl::StrCat(op, ": Index tensor must have the same number of dimensions as self tensor (",
                                   index.dim(), " != ", self.dim(), ")"));
  }
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t n = index.dim() == 0 ? 1 : index.sizes[i];
    const int64_t s = self.dim() == 0 ? 1 : self.sizes[i];
    if (i != d && n > s) {
      return RuntimeErr(absl::StrCat(op, ": Expected index ", ShapeToString(index.sizes), " to be smaller than self ",
                                     ShapeToString(self.sizes), " apart from dimension ", d));
    }
  }
  return absl::OkStatus();
}

// One step of roll: roll_cpu's narrow + cat along `d` (or a clone when empty).
absl::StatusOr<TensorMeta> RollOne(absl::string_view op, const TensorMeta& self, int64_t shift, int64_t dim) {
  if (self.dim() == 0) {
    return IndexErr(absl::StrCat(op, ": Dimension specified as ", dim, " but tensor has no dimensions"));
  }
  TD_ASSIGN_OR_RETURN(int64_t d, WrapDim(op, dim, self.dim()));
  if (self.numel() == 0) return PreserveFormatCopy(self, self.dtype, self.device);
  const int64_t size = self.sizes[d];
  const int64_t start = (size - shift % size) % size;  // in [0, size): Python's (size - shift) % size
  const TensorMeta t0 = NarrowMeta(self, d, start, size - start);
  const TensorMeta t1 = NarrowMeta(self, d, 0, start);
  TD_ASSIGN_OR_RETURN(MetaResult r, Cat(op, std::vector<Value>{Value(TensorList{&t0, &t1}), Value(d)}));
  return std::move(r.outputs[0]);
}

}  // namespace

// split.Tensor(self, split_size, dim=0): views of `split_size` elements along
// dim (the last one holds the rest); one empty view when the dim is empty.
absl::StatusOr<MetaResult> Split(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(int64_t split_size, IntArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(int64_t dim, IntArg(op, args, 2));
  return SplitBySize(op, *self, split_size, dim);
}

// split_with_sizes(self, split_sizes, dim=0) and split.sizes: one view per
// entry; the entries must be non-negative and sum to self.size(dim).
absl::StatusOr<MetaResult> SplitWithSizes(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(Shape sizes, IntListArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(int64_t dim, IntArg(op, args, 2));
  // PyTorch names split_with_sizes in these messages for both overloads.
  if (self->dim() == 0) return RuntimeErr("split expects at least a 1-dimensional tensor");
  TD_ASSIGN_OR_RETURN(int64_t d, WrapDim(op, dim, self->dim()));
  const int64_t dim_size = self->sizes[d];
  int64_t sum = 0;
  bool overflow = false;
  for (int64_t s : sizes) {
    if (s < 0) {
      return RuntimeErr(absl::StrCat(
          "split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes=",
          ShapeToString(sizes)));
    }
    overflow |= __builtin_add_overflow(sum, s, &sum);
  }
  if (overflow || sum != dim_size) {
    return RuntimeErr(absl::StrCat("split_with_sizes expects split_sizes to sum exactly to ", dim_size,
                                   " (input tensor's size at dimension ", d, "), but got split_sizes=",
                                   ShapeToString(sizes)));
  }
  TD_RETURN_IF_ERROR(CheckOutputCount(op, static_cast<int64_t>(sizes.size())));
  return SplitViews(*self, d, sizes);
}

// chunk(self, chunks, dim=0): split with ceil(size / chunks) per view (so
// fewer than `chunks` views may come back); an empty dim gives `chunks`
// empty views.
absl::StatusOr<MetaResult> Chunk(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(int64_t chunks, IntArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(int64_t dim, IntArg(op, args, 2));
  if (self->dim() == 0) return RuntimeErr(absl::StrCat(op, " expects at least a 1-dimensional tensor"));
  if (chunks <= 0) return RuntimeErr(absl::StrCat(op, " expects `chunks` to be greater than 0, got: ", chunks));
  TD_ASSIGN_OR_RETURN(int64_t d, WrapDim(op, dim, self->dim()));
  const int64_t dim_size = self->sizes[d];
  const int64_t split_size = dim_size == 0 ? 0 : 1 + (dim_size - 1) / chunks;
  if (dim_size == 0) {
    TD_RETURN_IF_ERROR(CheckOutputCount(op, chunks));
    return SplitViews(*self, d, Shape(chunks, 0));
  }
  return SplitBySize(op, *self, split_size, d);
}

// unbind.int(self, dim=0): self.select(dim, i) for every i (none for an
// empty dim).
absl::StatusOr<MetaResult> Unbind(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(int64_t dim, IntArg(op, args, 1));
  if (self->dim() == 0) {
    return IndexErr(absl::StrCat(op, ": Dimension specified as ", dim, " but tensor has no dimensions"));
  }
  TD_ASSIGN_OR_RETURN(int64_t d, WrapDim(op, dim, self->dim()));
  const int64_t n = self->sizes[d];
  TD_RETURN_IF_ERROR(CheckOutputCount(op, n));
  Shape sizes = self->sizes;
  Shape strides = self->strides;
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  MetaResult r;
  for (int64_t i = 0; i < n; ++i) {
    r.outputs.push_back(MakeMeta(sizes, strides, self->storage_offset + i * self->strides[d], self->dtype,
                                 self->device));
    r.alias_of.push_back(kAliasSelf);
  }
  return r;
}

// flip(self, dims): a copy with the order of elements reversed along each
// dim of `dims` (distinct dims). Layout: empty_like(self) (preserve format).
absl::StatusOr<MetaResult> Flip(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_RETURN_IF_ERROR(ReductionMask(op, args[1], self->dim()).status());  // wraps, refuses repeats
  return OneOutput(PreserveFormatCopy(*self, self->dtype, self->device));
}

// roll(self, shifts, dims=[]): elements shifted circularly along each dim of
// dims by the matching shift (dims empty: over the flattened tensor, one
// shift only).
absl::StatusOr<MetaResult> Roll(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(Shape shifts, IntListArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(Shape dims, IntListArg(op, args, 2));
  if (shifts.empty()) return RuntimeErr(absl::StrCat(op, ": `shifts` required"));
  if (dims.empty() && shifts.size() == 1) {
    return OneOutput(TensorMeta::Contiguous(self->sizes, self->dtype, self->device));
  }
  if (shifts.size() != dims.size()) {
    return RuntimeErr(absl::StrCat(op, ": shifts and dimensions must align. shifts: ", shifts.size(),
                                   ", dims:", dims.size()));
  }
  TensorMeta cur = *self;
  for (size_t i = 0; i < dims.size(); ++i) {
    TD_ASSIGN_OR_RETURN(cur, RollOne(op, cur, shifts[i], dims[i]));
  }
  return OneOutput(std::move(cur));
}

// repeat(self, repeats): self tiled repeats[i] times along each dim (leading
// extra repeats add dims). Contiguous.
absl::StatusOr<MetaResult> Repeat(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(Shape repeats, IntListArg(op, args, 1));
  if (static_cast<int64_t>(repeats.size()) < self->dim()) {
    return RuntimeErr(absl::StrCat(op, ": Number of dimensions of repeat dims can not be smaller than number of "
                                       "dimensions of tensor (repeats has ",
                                   repeats.size(), ", the tensor has ", self->dim(), ")"));
  }
  TD_RETURN_IF_ERROR(CheckRank(op, repeats.size()));
  const size_t lead = repeats.size() - self->sizes.size();
  Shape sizes(repeats.size());
  for (size_t i = 0; i < repeats.size(); ++i) {
    const int64_t s = i < lead ? 1 : self->sizes[i - lead];
    if (__builtin_mul_overflow(s, repeats[i], &sizes[i])) {
      return RuntimeErr(absl::StrCat(op, ": the repeated size ", s, " * ", repeats[i], " overflows int64"));
    }
  }
  TD_RETURN_IF_ERROR(CheckNewSizes(op, sizes, self->dtype));
  return OneOutput(TensorMeta::Contiguous(std::move(sizes), self->dtype, self->device));
}

// tril / triu(self, diagonal=0): a contiguous copy of self (at least 2-D)
// with the elements above / below `diagonal` of each matrix zeroed.
absl::StatusOr<MetaResult> TrilTriu(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(int64_t diagonal, IntArg(op, args, 1));
  (void)diagonal;  // any value: all or nothing is kept
  TD_RETURN_IF_ERROR(CheckMatrixDims(op, *self));
  return OneOutput(TensorMeta::Contiguous(self->sizes, self->dtype, self->device));
}

// constant_pad_nd(self, pad, value=0): pad = (before, after) pairs from the
// last dim backwards; negative entries crop. Layout: suggest_memory_format
// of self; when nothing grows, a clone (preserve format) of the cropped view.
absl::StatusOr<MetaResult> ConstantPadNd(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(Shape pad, IntListArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(Scalar value, ScalarArg(op, args, 2));
  if (pad.size() % 2 != 0) {
    return RuntimeErr(absl::StrCat(op, ": Length of pad must be even but instead it equals ", pad.size()));
  }
  const int64_t l_inp = self->dim();
  const int64_t l_pad = static_cast<int64_t>(pad.size() / 2);
  if (l_inp < l_pad) {
    return RuntimeErr(absl::StrCat(op, ": Length of pad should be no more than twice the number of dimensions of the "
                                       "input. Pad length is ",
                                   pad.size(), " while the input has ", l_inp, " dimensions."));
  }
  const int64_t l_diff = l_inp - l_pad;
  // The crops first, as PyTorch's narrow calls (their errors included).
  TensorMeta cropped = *self;
  bool all_pads_non_positive = true;
  auto narrow = [&](int64_t d, int64_t start, int64_t length) -> absl::Status {
    TD_ASSIGN_OR_RETURN(MetaResult r, Narrow(op, std::vector<Value>{Value(&cropped), Value(d), Value(start),
                                                                    Value(length)}));
    cropped = std::move(r.outputs[0]);
    return absl::OkStatus();
  };
  for (int64_t i = l_diff; i < l_inp; ++i) {
    const int64_t before = pad[2 * (l_inp - i - 1)];
    const int64_t after = pad[2 * (l_inp - i - 1) + 1];
    if (before < 0) {
      if (before == INT64_MIN) return RuntimeErr(absl::StrCat(op, ": pad ", before, " is out of range"));
      TD_RETURN_IF_ERROR(narrow(i, -before, cropped.sizes[i] + before));
    } else if (before != 0) {
      all_pads_non_positive = false;
    }
    if (after < 0) {
      TD_RETURN_IF_ERROR(narrow(i, 0, cropped.sizes[i] + after));
    } else if (after != 0) {
      all_pads_non_positive = false;
    }
  }
  if (all_pads_non_positive) return OneOutput(PreserveFormatCopy(cropped, self->dtype, self->device));
  TD_RETURN_IF_ERROR(CheckFillValue(op, value, self->dtype));
  Shape sizes(self->sizes.begin(), self->sizes.begin() + l_diff);
  for (int64_t i = 0; i < l_pad; ++i) {
    const size_t idx = pad.size() - static_cast<size_t>((i + 1) * 2);
    const int64_t in = self->sizes[l_diff + i];
    int64_t n = 0;
    if (__builtin_add_overflow(in, pad[idx], &n) || __builtin_add_overflow(n, pad[idx + 1], &n)) {
      return RuntimeErr(absl::StrCat(op, ": the padded size of dimension ", l_diff + i, " overflows int64"));
    }
    if (n <= 0) {
      return RuntimeErr(absl::StrCat(op, ": The input size ", in, ", plus negative padding ", pad[idx], " and ",
                                     pad[idx + 1], " resulted in a negative output size, which is invalid. Check "
                                     "dimension ",
                                     l_diff + i, " of your input."));
    }
    sizes.push_back(n);
  }
  TD_RETURN_IF_ERROR(CheckNewSizes(op, sizes, self->dtype));
  Shape strides = StridesForFormat(sizes, SuggestMemoryFormat(*self));
  return OneOutput(MakeMeta(std::move(sizes), std::move(strides), 0, self->dtype, self->device));
}

// scatter.src(self, dim, index, src): scatter_add's checks (int64 index,
// src of self's dtype, index no larger than src, nor than self outside dim).
absl::StatusOr<MetaResult> ScatterSrc(absl::string_view op, absl::Span<const Value> args) {
  return ScatterAdd(op, args);
}

// scatter.value(self, dim, index, value): a contiguous copy of self with
// out[index[i][j]][j] = value (dim 0); value converted as fill_ does.
absl::StatusOr<MetaResult> ScatterValue(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(int64_t dim, IntArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(const TensorMeta* index, TensorArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(Scalar value, ScalarArg(op, args, 3));
  const TensorMeta* tensors[] = {self, index};
  TD_ASSIGN_OR_RETURN(Device device, CommonDevice(op, tensors, /*allow_cpu_scalars=*/false));
  TD_ASSIGN_OR_RETURN(int64_t d, WrapDim(op, dim, self->dim()));
  TD_RETURN_IF_ERROR(CheckScatterIndex(op, *self, d, *index));
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, self->dtype));
  TD_RETURN_IF_ERROR(CheckFillValue(op, value, self->dtype));
  return OneOutput(TensorMeta::Contiguous(self->sizes, self->dtype, device));
}

}  // namespace tensord::meta
