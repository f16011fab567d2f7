// kernels/cpu/index_args.h — how the indexing kernels (gather,
// index_select, index.Tensor, index_put, topk, masked_select) read a call's
// arguments and check them, shared by the CPU kernels (index.cc,
// scatter.cc) and the CUDA host side (cuda/index_kernels.h,
// advindex_kernels.h, topk_kernels.h), so that both devices raise the same
// errors with the same texts:
//
//   TD_ASSIGN_OR_RETURN(const GatherArgs a, ReadGather(ctx));
//
// The Read* functions start with CheckContext and check the outputs'
// sizes and dtypes (internal errors: the meta function decides them); the
// errors the user can cause are listed with each. Internal to kernels/.
#ifndef TENSORD_KERNELS_CPU_INDEX_ARGS_H_
#define TENSORD_KERNELS_CPU_INDEX_ARGS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensord/kernels/registry.h"
#include "tensord/meta/tensor_meta.h"

namespace tensord::cpu {

// A 0-dim tensor viewed as [1] (ops that take a dim treat it so).
TensorMeta AtLeast1dMeta(const TensorMeta& m);

// RuntimeError "gather(): Expected dtype int64 for index, got Float" (with
// `name`) unless `index` is int64 or int32.
absl::Status CheckIndexDtype(const char* name, const TensorMeta& index);

// gather(self, dim, index): self and index as given, `dim` wrapped, and
// self, index and outputs[0] with a 0-dim tensor viewed as [1]. Errors:
// CheckIndexDtype's, WrapDim's IndexError, RuntimeError when index's rank
// differs from self's or index is larger than self in a dim but `dim`.
struct GatherArgs {
  TensorRef self, index;
  int64_t dim = 0;
  TensorMeta self1d, index1d, out1d;
};
absl::StatusOr<GatherArgs> ReadGather(const KernelContext& ctx);

// index_select(self, dim, index): self and index as given, `dim` wrapped,
// self with a 0-dim tensor viewed as [1], `sizes` the result's (self's with
// dim `dim` the index's length) and `out` outputs[0] viewed with them.
// Errors: CheckIndexDtype's, IndexError for an index of rank > 1, WrapDim's.
struct IndexSelectArgs {
  TensorRef self, index;
  int64_t dim = 0;
  TensorMeta self1d, out;
  Shape sizes;
};
absl::StatusOr<IndexSelectArgs> ReadIndexSelect(const KernelContext& ctx);

// topk(self, k, dim, largest, sorted) -> (values, indices): `dim` wrapped
// and self, values and indices with a 0-dim tensor viewed as [1]. Errors:
// WrapDim's, RuntimeError for k outside [0, self's size along dim].
struct TopkArgs {
  TensorRef self;
  int64_t k = 0, dim = 0;
  bool largest = true;
  TensorMeta self1d, values1d, indices1d;
};
absl::StatusOr<TopkArgs> ReadTopk(const KernelContext& ctx);

// masked_select(self, mask) (a data-dependent op: no preallocated output):
// self, mask and `shape`, the two broadcast together. RuntimeError for a
// mask neither bool nor uint8 and for shapes that do not broadcast.
struct MaskedSelectArgs {
  TensorRef self, mask;
  Shape shape;
};
absl::StatusOr<MaskedSelectArgs> ReadMaskedSelect(const KernelContext& ctx);

// masked_scatter(self, mask, source): the arguments; internal errors when
// source's dtype is not outputs[0]'s or the mask is neither bool nor uint8
// (the meta function checked them).
struct MaskedScatterArgs {
  TensorRef self, mask, source;
};
absl::StatusOr<MaskedScatterArgs> ReadMaskedScatter(const KernelContext& ctx);

// index_add(self, dim, index, source, alpha) with out the output: `dim`
// (argument 1) wrapped over out (a 0-dim tensor counts as [1]). Internal
// errors when index is not an int64 / int32 vector, source's dtype is not
// out's or the shapes do not fit (the meta function checked them).
absl::StatusOr<int64_t> CheckIndexAdd(const KernelContext& ctx, const TensorMeta& out, const TensorMeta& index,
                                      const TensorMeta& source);

// ---- advanced indexing (index.Tensor, index_put) ----------------------------------

// One index of index.Tensor / index_put after masks are expanded: an int32
// or int64 tensor at `data` (host or device memory) with element strides,
// indexing dim `dim` of self.
struct AdvIndexOperand {
  int64_t dim = 0;
  const char* data = nullptr;
  ScalarType dtype = ScalarType::kInt64;
  Shape sizes, strides;
};

// PyTorch's advanced-indexing layout: B, the index shapes broadcast,
// replaces the indexed dims when they are adjacent, else comes first;
// self's other dims follow in order.
struct AdvLayout {
  Shape b;            // the broadcast index shape
  Shape sizes;        // the indexing result's
  Shape self_dim_at;  // result dim -> self's dim, or -1 for B's dims
  int64_t first_b = 0;
};

// The layout of `ops` (in order of dims) over self's `self_sizes` (no ops:
// an empty B first, then self's dims); false when the index shapes do not
// broadcast.
bool MakeAdvLayout(const std::vector<AdvIndexOperand>& ops, const Shape& self_sizes, AdvLayout* layout);

// index.Tensor(self, indices) with int64 / int32 index tensors and None
// slots: `ops` the index tensors in order of dims, `layout` theirs over
// self (unset when there are none: the result is self). Checks outputs[0]
// against the result. Errors: IndexError for more indices than self has
// dims, for an index dtype not long/int/byte/bool and for index shapes that
// do not broadcast; NotImplemented for boolean masks (data-dependent).
struct IndexTensorArgs {
  TensorRef self;
  std::vector<AdvIndexOperand> ops;
  AdvLayout layout;
};
absl::StatusOr<IndexTensorArgs> ReadIndexTensor(const KernelContext& ctx);

// index_put(self, indices, values, accumulate): the arguments, outputs[0]
// checked to have self's sizes and values' dtype.
struct IndexPutArgs {
  TensorRef self, values;
  const TensorList* indices = nullptr;
  bool accumulate = false;
};
absl::StatusOr<IndexPutArgs> ReadIndexPut(const KernelContext& ctx);

// Checks index tensor `m` of index_put met at dim `pos` of self (sizes
// `self_sizes`): an int64 / int32 index takes one dim, a bool / uint8 mask
// as many as it has, which must match self's there. IndexError for too
// many indices, a mask's shape mismatch or another dtype; NotImplemented
// for a 0-dim mask.
absl::Status CheckIndexPutIndex(const TensorMeta& m, int64_t pos, const Shape& self_sizes);

// The layout of index_put's operands (masks expanded); IndexError when the
// index shapes do not broadcast.
absl::StatusOr<AdvLayout> IndexPutLayout(const std::vector<AdvIndexOperand>& ops, const Shape& self_sizes);

// index_put's values broadcast to the indexing result's `result_sizes`:
// their element strides over it (0 along broadcast dims). RuntimeError
// when they do not broadcast.
absl::StatusOr<Shape> IndexPutValueStrides(const TensorMeta& values, const Shape& result_sizes);

}  // namespace tensord::cpu

#endif  // TENSORD_KERNELS_CPU_INDEX_ARGS_H_
