// Meta functions of copies (contiguous, clone, to), selection (topk, gather,
// index_select, advanced indexing), joining (cat, stack) and the ops whose
// output shape depends on data (nonzero, masked_select).
#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "meta_common.h"
#include "meta_functions.h"
#include "tensord/meta/shape_rules.h"

namespace tensord::meta {
namespace {

// PyTorch's ensure_nonempty_dim / ensure_nonempty_size (0-dim counts as [1]).
int64_t NonemptyDim(const TensorMeta& t) { return std::max<int64_t>(t.dim(), 1); }
int64_t NonemptySize(const TensorMeta& t, int64_t d) { return t.dim() == 0 ? 1 : t.sizes[d]; }

// at::cat's "legacy" empty tensors: 1-D with size 0, skipped when joining.
bool CatSkips(const TensorMeta& t) { return t.dim() == 1 && t.sizes[0] == 0; }

absl::StatusOr<TensorMeta> CatMeta(absl::string_view op, absl::Span<const TensorMeta* const> tensors, int64_t dim) {
  if (tensors.empty()) return RuntimeErr(absl::StrCat(op, ": expected a non-empty list of Tensors"));
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i]->dim() == 0) {
      return RuntimeErr(absl::StrCat(op, ": zero-dimensional tensor (at position ", i, ") cannot be concatenated"));
    }
  }
  TD_ASSIGN_OR_RETURN(Device device, CommonDevice(op, tensors, /*allow_cpu_scalars=*/false));
  // legacy_cat_wrap_dim: wrap against the first tensor that is not skipped.
  std::optional<size_t> valid;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!CatSkips(*tensors[i])) {
      valid = i;
      break;
    }
  }
  if (valid) {
    TD_ASSIGN_OR_RETURN(dim, WrapDim(op, dim, tensors[*valid]->dim()));
  }
  std::vector<PromotionOperand> operands;
  for (const TensorMeta* t : tensors) operands.push_back({t, nullptr});
  TD_ASSIGN_OR_RETURN(ScalarType dtype, ResultType(op, operands));

  // cat_compute_output_memory_format over every input (skipped ones too).
  MemoryFormat format = SuggestMemoryFormat(*tensors[0]);
  for (const TensorMeta* t : tensors) {
    const MemoryFormat f = SuggestMemoryFormat(*t);
    if (f == MemoryFormat::kContiguous || f != format) {
      format = MemoryFormat::kContiguous;
      break;
    }
  }
  if (!valid) return TensorMeta::Contiguous({0}, dtype, device);

  const TensorMeta& first = *tensors[*valid];
  int64_t size_at_dim = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorMeta& t = *tensors[i];
    if (CatSkips(t)) continue;
    if (t.dim() != first.dim()) {
      return RuntimeErr(absl::StrCat(op, ": Tensors must have same number of dimensions: got ", first.dim(), " and ",
                                     t.dim()));
    }
    for (int64_t d = 0; d < first.dim(); ++d) {
      if (d == dim) continue;
      if (first.sizes[d] != t.sizes[d]) {
        return RuntimeErr(absl::StrCat(op, ": Sizes of tensors must match except in dimension ", dim, ". Expected size ",
                                       first.sizes[d], " but got size ", t.sizes[d], " for tensor number ", i,
                                       " in the list."));
      }
    }
    if (__builtin_add_overflow(size_at_dim, t.sizes[dim], &size_at_dim)) {
      return RuntimeErr(absl::StrCat(op, ": the concatenated size overflows int64"));
    }
  }
  Shape sizes = first.sizes;
  sizes[dim] = size_at_dim;
  TD_RETURN_IF_ERROR(CheckNewSizes(op, sizes, dtype));
  Shape strides = StridesForFormat(sizes, format);
  return MakeMeta(std::move(sizes), std::move(strides), 0, dtype, device);
}

// Advanced indexing (at::native::make_info + AdvancedIndex + the index
// TensorIterator), for integer index tensors.
absl::StatusOr<TensorMeta> IndexMeta(absl::string_view op, const TensorMeta& self,
                                     const std::vector<const TensorMeta*>& given) {
  if (static_cast<int64_t>(given.size()) > self.dim()) {
    return IndexErr(absl::StrCat(op, ": too many indices for tensor of dimension ", self.dim(), " (got ", given.size(),
                                 ")"));
  }
  std::vector<const TensorMeta*> present;
  for (const TensorMeta* t : given) {
    if (t != nullptr) present.push_back(t);
  }
  // Index tensors on the cpu are accepted for any self device (PyTorch allows
  // dev_tensor[cpu_tensor]); otherwise they must be on self's device.
  for (const TensorMeta* t : present) {
    if (t->device != self.device && !t->device.is_cpu()) {
      return RuntimeErr(absl::StrCat(op, ": indices should be either on cpu or on the same device as the indexed tensor (",
                                     self.device.ToString(), ")"));
    }
  }
  bool has_mask = false;
  for (const TensorMeta* t : present) {
    if (t->dtype == ScalarType::kBool || t->dtype == ScalarType::kUInt8) {
      has_mask = true;
    } else if (t->dtype != ScalarType::kInt64) {
      return IndexErr(absl::StrCat(op, ": tensors used as indices must be long, byte or bool tensors"));
    }
  }
  if (has_mask) {
    // Check the mask's shape against the dims it covers, then refuse: the
    // number of selected elements is only known from the data.
    int64_t pos = 0;
    for (const TensorMeta* t : given) {
      if (t != nullptr && (t->dtype == ScalarType::kBool || t->dtype == ScalarType::kUInt8)) {
        for (int64_t j = 0; j < t->dim(); ++j) {
          if (pos + j >= self.dim()) {
            return IndexErr(absl::StrCat(op, ": too many indices for tensor of dimension ", self.dim()));
          }
          if (t->sizes[j] != self.sizes[pos + j]) {
            return IndexErr(absl::StrCat(op, ": The shape of the mask ", ShapeToString(t->sizes), " at index ", j,
                                         " does not match the shape of the indexed tensor ", ShapeToString(self.sizes),
                                         " at index ", pos + j));
          }
        }
        pos += t->dim();
      } else {
        ++pos;
      }
    }
    return NotImplementedErr(absl::StrCat(
        op, ": boolean mask indexing has an output shape that depends on the data of the mask, so it cannot be "
            "computed on the meta device (use masked_select, or index with integer tensors)"));
  }
  if (present.empty()) {
    return RuntimeErr(absl::StrCat(op, ": expected at least one index tensor, but every index is None"));
  }

  // Broadcast the index tensors together (expand_outplace).
  std::vector<Shape> shapes;
  for (const TensorMeta* t : present) shapes.push_back(t->sizes);
  absl::StatusOr<Shape> bshape = BroadcastShapes(op, shapes);
  if (!bshape.ok()) {
    std::vector<std::string> parts;
    for (const Shape& s : shapes) parts.push_back(ShapeToString(s));
    return IndexErr(absl::StrCat(op, ": shape mismatch: indexing tensors could not be broadcast together with shapes ",
                                 absl::StrJoin(parts, ", ")));
  }
  const Shape& replacement = *bshape;

  // Pad to self.dim() with None; expanded index tensors (same strides, 0 for
  // broadcast dims, as at::expand gives).
  const int64_t ndim = self.dim();
  std::vector<std::optional<TensorMeta>> indices(ndim);
  for (size_t i = 0; i < given.size(); ++i) {
    if (given[i] == nullptr) continue;
    const TensorMeta& t = *given[i];
    const Value expand_args[] = {Value(&t), Value(replacement), Value(false)};
    TD_ASSIGN_OR_RETURN(MetaResult e, Expand(op, expand_args));
    indices[i] = std::move(e.outputs[0]);
  }

  // hasContiguousSubspace: are the indexed dims adjacent? If not, move them to
  // the front (transposeToFront).
  int64_t first = -1, last = -1;
  for (int64_t i = 0; i < ndim; ++i) {
    if (indices[i]) {
      if (first < 0) first = i;
      last = i;
    }
  }
  bool contiguous_subspace = true;
  for (int64_t i = first; i <= last; ++i) contiguous_subspace &= indices[i].has_value();
  TensorMeta src = self;
  if (!contiguous_subspace) {
    Shape order;
    std::vector<std::optional<TensorMeta>> moved;
    for (int64_t i = 0; i < ndim; ++i) {
      if (indices[i]) {
        order.push_back(i);
        moved.push_back(indices[i]);
      }
    }
    for (int64_t i = 0; i < ndim; ++i) {
      if (!indices[i]) {
        order.push_back(i);
        moved.emplace_back();
      }
    }
    for (int64_t i = 0; i < ndim; ++i) {
      src.sizes[i] = self.sizes[order[i]];
      src.strides[i] = self.strides[order[i]];
    }
    indices = std::move(moved);
  }

  // AdvancedIndex: dims before/after the indexed block.
  int64_t dims_before = 0, dims_after = 0, dims_indexed = 0;
  bool indexed_has_zero = false;
  for (int64_t i = 0; i < ndim; ++i) {
    if (!indices[i]) {
      (dims_indexed == 0 ? dims_before : dims_after)++;
    } else {
      ++dims_indexed;
      indexed_has_zero |= src.sizes[i] == 0;
    }
  }
  if (indexed_has_zero && std::find(replacement.begin(), replacement.end(), 0) == replacement.end()) {
    return IndexErr(absl::StrCat(op, ": index is out of bounds for dimension with size 0"));
  }
  // restride_src: the indexed dims replaced by the index shape with stride 0.
  TensorMeta restrided = src;
  restrided.sizes.erase(restrided.sizes.begin() + dims_before, restrided.sizes.begin() + dims_before + dims_indexed);
  restrided.strides.erase(restrided.strides.begin() + dims_before,
                          restrided.strides.begin() + dims_before + dims_indexed);
  restrided.sizes.insert(restrided.sizes.begin() + dims_before, replacement.begin(), replacement.end());
  restrided.strides.insert(restrided.strides.begin() + dims_before, replacement.size(), 0);
  TD_RETURN_IF_ERROR(CheckNewSizes(op, restrided.sizes, self.dtype));

  // reshape_indexer: each index gets dims_before leading and dims_after
  // trailing 1s (a view of the expanded index).
  std::vector<TensorMeta> reshaped;
  reshaped.reserve(ndim);
  for (const auto& idx : indices) {
    if (!idx) continue;
    Shape shape(dims_before, 1);
    shape.insert(shape.end(), idx->sizes.begin(), idx->sizes.end());
    shape.insert(shape.end(), dims_after, 1);
    std::optional<Shape> strides = ComputeViewStrides(idx->sizes, idx->strides, shape);
    TensorMeta r = *idx;
    r.strides = strides ? *strides : ContiguousStrides(shape);
    r.sizes = std::move(shape);
    reshaped.push_back(std::move(r));
  }
  std::vector<const TensorMeta*> operands = {&restrided};
  for (const TensorMeta& r : reshaped) operands.push_back(&r);
  Shape strides = ElementwiseOutputStrides(restrided.sizes, operands);
  return MakeMeta(restrided.sizes, std::move(strides), 0, self.dtype, self.device);
}

}  // namespace

// ---- copies ----------------------------------------------------------------

absl::StatusOr<MetaResult> Contiguous(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  if (self->is_contiguous()) return OneOutput(*self, 0);
  return OneOutput(TensorMeta::Contiguous(self->sizes, self->dtype, self->device), -1);
}

absl::StatusOr<MetaResult> Clone(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  return OneOutput(PreserveFormatCopy(*self, self->dtype, self->device), -1);
}

absl::StatusOr<MetaResult> ToDtype(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(std::optional<ScalarType> dtype, OptDtypeArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(bool copy, BoolArg(op, args, 3));
  const ScalarType target = dtype.value_or(self->dtype);
  if (target == self->dtype && !copy) return OneOutput(*self, 0);
  TD_RETURN_IF_ERROR(CheckNewSizes(op, self->sizes, target));
  return OneOutput(PreserveFormatCopy(*self, target, self->device), -1);
}

absl::StatusOr<MetaResult> ToDevice(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(std::optional<Device> device_opt, OptDeviceArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(std::optional<ScalarType> dtype, OptDtypeArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(bool copy, BoolArg(op, args, 4));
  const Device device = device_opt.value_or(self->device);
  const ScalarType target = dtype.value_or(self->dtype);
  if (device == self->device && target == self->dtype && !copy) return OneOutput(*self, 0);
  if (self->device.is_meta() && !device.is_meta()) {
    return NotImplementedErr(absl::StrCat(
        op, ": Cannot copy out of meta tensor; no data! A meta tensor has only sizes, strides and a dtype, so there is "
            "nothing to copy to ",
        device.ToString(), ". To make a tensor of the same shape there, use tensord.empty_like(t, device=\"",
        device.ToString(), "\")"));
  }
  TD_RETURN_IF_ERROR(CheckNewSizes(op, self->sizes, target));
  return OneOutput(PreserveFormatCopy(*self, target, device), -1);
}

// ---- selection -------------------------------------------------------------

absl::StatusOr<MetaResult> Topk(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(int64_t k, IntArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(int64_t dim, IntArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(int64_t d, WrapDim(op, dim, self->dim()));
  const int64_t slice = self->dim() > 0 ? self->sizes[d] : 1;
  if (k < 0 || k > slice) {
    return RuntimeErr(absl::StrCat(op, ": selected index k out of range (k is ", k, ", dimension ", d, " has size ",
                                   slice, ")"));
  }
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, self->dtype));
  if (self->dtype == ScalarType::kBool) return NotImplementedForDtype(op, self->dtype);
  Shape sizes = self->sizes;
  if (!sizes.empty()) sizes[d] = k;
  TensorMeta values = TensorMeta::Contiguous(sizes, self->dtype, self->device);
  TensorMeta indices = TensorMeta::Contiguous(std::move(sizes), ScalarType::kInt64, self->device);
  return TwoOutputs(std::move(values), std::move(indices));
}

absl::StatusOr<MetaResult> Gather(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(int64_t dim, IntArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(const TensorMeta* index, TensorArg(op, args, 2));
  const TensorMeta* tensors[] = {self, index};
  TD_ASSIGN_OR_RETURN(Device device, CommonDevice(op, tensors, /*allow_cpu_scalars=*/false));
  TD_ASSIGN_OR_RETURN(int64_t d, WrapDim(op, dim, self->dim()));
  if (index->dtype != ScalarType::kInt64) {
    return RuntimeErr(absl::StrCat(op, "(): Expected dtype int64 for index, got ", DtypeName(index->dtype)));
  }
  if (index->numel() != 0) {
    if (NonemptyDim(*self) != NonemptyDim(*index)) {
      return RuntimeErr(absl::StrCat(op, ": Index tensor must have the same number of dimensions as input tensor (",
                                     index->dim(), " != ", self->dim(), ")"));
    }
    for (int64_t i = 0; i < NonemptyDim(*self); ++i) {
      if (i == d) continue;
      if (NonemptySize(*index, i) > NonemptySize(*self, i)) {
        return RuntimeErr(absl::StrCat(op, ": Size does not match at dimension ", i, " expected index ",
                                       ShapeToString(index->sizes), " to be smaller than self ",
                                       ShapeToString(self->sizes), " apart from dimension ", d));
      }
    }
  }
  return OneOutput(TensorMeta::Contiguous(index->sizes, self->dtype, device));
}

absl::StatusOr<MetaResult> IndexSelect(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(int64_t dim, IntArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(const TensorMeta* index, TensorArg(op, args, 2));
  const TensorMeta* tensors[] = {self, index};
  TD_ASSIGN_OR_RETURN(Device device, CommonDevice(op, tensors, /*allow_cpu_scalars=*/false));
  TD_ASSIGN_OR_RETURN(int64_t d, WrapDim(op, dim, self->dim()));
  if (index->dim() > 1) {
    return IndexErr(absl::StrCat(op, "(): Index is supposed to be a vector, got a ", index->dim(), "D tensor"));
  }
  const int64_t n = index->numel();
  if (self->dim() == 0 && n != 1) {
    return RuntimeErr(absl::StrCat(op, "(): Index to scalar can have only 1 value, got ", n, " value(s)"));
  }
  if (index->dtype != ScalarType::kInt64 && index->dtype != ScalarType::kInt32) {
    return RuntimeErr(absl::StrCat(op, "(): Expected dtype int32 or int64 for index, got ", DtypeName(index->dtype)));
  }
  Shape sizes = self->sizes;
  if (!sizes.empty()) sizes[d] = n;
  return OneOutput(TensorMeta::Contiguous(std::move(sizes), self->dtype, device));
}

absl::StatusOr<MetaResult> Index(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(std::vector<const TensorMeta*> indices, TensorListArg(op, args, 1, /*allow_none=*/true));
  TD_ASSIGN_OR_RETURN(TensorMeta out, IndexMeta(op, *self, indices));
  return OneOutput(std::move(out));
}

// index_put(self, indices, values, accumulate=False): a copy of self (layout
// preserved, as clone) with self[indices] = values (or += with accumulate).
// values has self's dtype and broadcasts to the indexing result's shape; with
// a boolean mask among the indices that shape depends on the data, so only
// the mask's shape is checked here and the kernel checks the rest.
absl::StatusOr<MetaResult> IndexPut(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(std::vector<const TensorMeta*> indices, TensorListArg(op, args, 1, /*allow_none=*/true));
  TD_ASSIGN_OR_RETURN(const TensorMeta* values, TensorArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(bool accumulate, BoolArg(op, args, 3));
  const TensorMeta* tensors[] = {self, values};
  TD_ASSIGN_OR_RETURN(Device device, CommonDevice(op, tensors, /*allow_cpu_scalars=*/false));
  if (values->dtype != self->dtype) {
    return RuntimeErr(absl::StrCat(op, ": Index put requires the source and destination dtypes match, got ",
                                   DtypeC10Name(self->dtype), " for the destination and ", DtypeC10Name(values->dtype),
                                   " for the source."));
  }
  if (accumulate) TD_RETURN_IF_ERROR(CheckComputeDtype(op, self->dtype));
  bool has_mask = false;
  for (const TensorMeta* t : indices) {
    has_mask |= t != nullptr && (t->dtype == ScalarType::kBool || t->dtype == ScalarType::kUInt8);
  }
  absl::StatusOr<TensorMeta> result = IndexMeta(op, *self, indices);
  if (!result.ok()) {
    // IndexMeta refuses masks (data-dependent) after checking their shapes.
    if (!(has_mask && KindOf(result.status()) == ErrorKind::kNotImplemented)) return result.status();
  } else {
    const Shape shapes[] = {result->sizes, values->sizes};
    absl::StatusOr<Shape> b = BroadcastShapes(op, shapes);
    if (!b.ok() || *b != result->sizes) {
      return RuntimeErr(absl::StrCat(op, ": shape mismatch: value tensor of shape ", ShapeToString(values->sizes),
                                     " cannot be broadcast to indexing result of shape ",
                                     ShapeToString(result->sizes)));
    }
  }
  return OneOutput(PreserveFormatCopy(*self, self->dtype, device), -1);
}

// ---- joining ---------------------------------------------------------------

absl::StatusOr<MetaResult> Cat(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(std::vector<const TensorMeta*> tensors, TensorListArg(op, args, 0, /*allow_none=*/false));
  TD_ASSIGN_OR_RETURN(int64_t dim, IntArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(TensorMeta out, CatMeta(op, tensors, dim));
  return OneOutput(std::move(out));
}

absl::StatusOr<MetaResult> Stack(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(std::vector<const TensorMeta*> tensors, TensorListArg(op, args, 0, /*allow_none=*/false));
  TD_ASSIGN_OR_RETURN(int64_t dim, IntArg(op, args, 1));
  if (tensors.empty()) return RuntimeErr(absl::StrCat(op, " expects a non-empty TensorList"));
  const TensorMeta& first = *tensors[0];
  TD_ASSIGN_OR_RETURN(int64_t d, WrapDim(op, dim, first.dim() + 1));
  for (size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i]->sizes != first.sizes) {
      return RuntimeErr(absl::StrCat(op, " expects each tensor to be equal size, but got ", ShapeToString(first.sizes),
                                     " at entry 0 and ", ShapeToString(tensors[i]->sizes), " at entry ", i));
    }
  }
  if (d < first.dim()) {
    // PyTorch: cat along d, then view with the new dim split out.
    TD_ASSIGN_OR_RETURN(TensorMeta catted, CatMeta(op, tensors, d));
    Shape sizes = first.sizes;
    sizes.insert(sizes.begin() + d, static_cast<int64_t>(tensors.size()));
    std::optional<Shape> strides = ComputeViewStrides(catted.sizes, catted.strides, sizes);
    if (!strides) return InternalErr(absl::StrCat(op, ": stacked result cannot be viewed as ", ShapeToString(sizes)));
    catted.sizes = std::move(sizes);
    catted.strides = std::move(*strides);
    return OneOutput(std::move(catted));
  }
  // d == dim: cat of the inputs unsqueezed at d.
  std::vector<TensorMeta> unsqueezed;
  unsqueezed.reserve(tensors.size());
  for (const TensorMeta* t : tensors) {
    const Value uargs[] = {Value(t), Value(d)};
    TD_ASSIGN_OR_RETURN(MetaResult u, Unsqueeze(op, uargs));
    unsqueezed.push_back(std::move(u.outputs[0]));
  }
  std::vector<const TensorMeta*> ptrs;
  for (const TensorMeta& t : unsqueezed) ptrs.push_back(&t);
  TD_ASSIGN_OR_RETURN(TensorMeta out, CatMeta(op, ptrs, d));
  return OneOutput(std::move(out));
}

// ---- data-dependent --------------------------------------------------------

absl::StatusOr<MetaResult> DataDependent(absl::string_view op, absl::Span<const Value> args) {
  return NotImplementedErr(absl::StrCat(op, ": the output shape depends on the data of the input, so it cannot be "
                                            "computed on the meta device (no data there); run it on a real device"));
}

}  // namespace tensord::meta
