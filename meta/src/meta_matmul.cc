// Meta functions of matmul (every rank combination, with batch
// broadcasting), mm and bmm. Outputs are contiguous. Both operands must have
// the same dtype (PyTorch's CPU kernels refuse a mix, and meta is never more
// lenient than a backend); bool and float8 have no GEMM.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "meta_common.h"
#include "meta_functions.h"
#include "tensord/meta/shape_rules.h"

namespace tensord::meta {
namespace {

absl::Status SizeMismatch(absl::string_view op, absl::string_view other_name, const TensorMeta& a, const TensorMeta& b,
                          int64_t ka, int64_t kb) {
  return RuntimeErr(absl::StrCat(op, ": size mismatch, self is ", ShapeToString(a.sizes), ", ", other_name, " is ",
                                 ShapeToString(b.sizes), " (", ka, " != ", kb, ")"));
}

// The dtype checks PyTorch's GEMM kernels make, done up front.
absl::Status CheckMatmulDtypes(absl::string_view op, absl::string_view other_name, const TensorMeta& a,
                               const TensorMeta& b) {
  if (a.dtype != b.dtype) {
    return RuntimeErr(absl::StrCat(op, ": expected scalar type ", DtypeC10Name(a.dtype), " but found ",
                                   DtypeC10Name(b.dtype), " (self is ", DtypeName(a.dtype), ", ", other_name, " is ",
                                   DtypeName(b.dtype), "; both operands must have the same dtype)"));
  }
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, a.dtype));
  if (a.dtype == ScalarType::kBool) return NotImplementedForDtype(op, a.dtype);
  return absl::OkStatus();
}

absl::StatusOr<MetaResult> Finish(absl::string_view op, Shape sizes, const TensorMeta& a, Device device) {
  TD_RETURN_IF_ERROR(CheckNewSizes(op, sizes, a.dtype));
  return OneOutput(TensorMeta::Contiguous(std::move(sizes), a.dtype, device));
}

}  // namespace

absl::StatusOr<MetaResult> Matmul(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* a, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(const TensorMeta* b, TensorArg(op, args, 1));
  const TensorMeta* tensors[] = {a, b};
  TD_ASSIGN_OR_RETURN(Device device, CommonDevice(op, tensors, /*allow_cpu_scalars=*/false));
  const int64_t da = a->dim(), db = b->dim();
  if (da == 0 || db == 0) {
    return RuntimeErr(absl::StrCat(op, ": both arguments to matmul need to be at least 1D, but they are ", da, "D and ",
                                   db, "D"));
  }
  // self is [*batch_a, n, k] (n absent when 1-D), other is [*batch_b, k, p]
  // (p absent when 1-D); the batch dims broadcast.
  const int64_t ka = a->sizes[da - 1];
  const int64_t kb = db == 1 ? b->sizes[0] : b->sizes[db - 2];
  const Shape batch_a(a->sizes.begin(), a->sizes.begin() + std::max<int64_t>(da - 2, 0));
  const Shape batch_b(b->sizes.begin(), b->sizes.begin() + std::max<int64_t>(db - 2, 0));
  const Shape batches[] = {batch_a, batch_b};
  TD_ASSIGN_OR_RETURN(Shape sizes, BroadcastShapes(op, batches));
  if (ka != kb) return SizeMismatch(op, "other", *a, *b, ka, kb);
  TD_RETURN_IF_ERROR(CheckMatmulDtypes(op, "other", *a, *b));
  if (da >= 2) sizes.push_back(a->sizes[da - 2]);
  if (db >= 2) sizes.push_back(b->sizes[db - 1]);
  TD_ASSIGN_OR_RETURN(MetaResult r, Finish(op, sizes, *a, device));
  // PyTorch computes 2-D @ (>=3-D) as (other^T folded) @ self^T and returns
  // the transpose made contiguous; contiguous() keeps an empty result as it
  // is, so an empty output has the transposed layout. PyTorch skips that
  // path when other is 3-D with its last two dims transposed.
  const bool other_transposed = db == 3 && b->strides[2] != 1 && b->strides[0] == b->sizes[1] * b->sizes[2];
  if (da == 2 && db >= 3 && !other_transposed && r.outputs[0].numel() == 0) {
    const int64_t n = static_cast<int64_t>(sizes.size());
    std::swap(sizes[n - 1], sizes[n - 2]);
    Shape strides = ContiguousStrides(sizes);
    std::swap(strides[n - 1], strides[n - 2]);
    r.outputs[0].strides = std::move(strides);
  }
  return r;
}

absl::StatusOr<MetaResult> Mm(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* a, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(const TensorMeta* b, TensorArg(op, args, 1));
  const TensorMeta* tensors[] = {a, b};
  TD_ASSIGN_OR_RETURN(Device device, CommonDevice(op, tensors, /*allow_cpu_scalars=*/false));
  if (a->dim() != 2) return RuntimeErr(absl::StrCat(op, ": self must be a matrix, got a ", a->dim(), "D tensor"));
  if (b->dim() != 2) return RuntimeErr(absl::StrCat(op, ": mat2 must be a matrix, got a ", b->dim(), "D tensor"));
  if (a->sizes[1] != b->sizes[0]) return SizeMismatch(op, "mat2", *a, *b, a->sizes[1], b->sizes[0]);
  TD_RETURN_IF_ERROR(CheckMatmulDtypes(op, "mat2", *a, *b));
  return Finish(op, {a->sizes[0], b->sizes[1]}, *a, device);
}

absl::StatusOr<MetaResult> Bmm(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* a, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(const TensorMeta* b, TensorArg(op, args, 1));
  const TensorMeta* tensors[] = {a, b};
  TD_ASSIGN_OR_RETURN(Device device, CommonDevice(op, tensors, /*allow_cpu_scalars=*/false));
  if (a->dim() != 3) return RuntimeErr(absl::StrCat(op, ": self must be a 3D tensor, got a ", a->dim(), "D tensor"));
  if (b->dim() != 3) return RuntimeErr(absl::StrCat(op, ": mat2 must be a 3D tensor, got a ", b->dim(), "D tensor"));
  if (a->sizes[0] != b->sizes[0]) {
    return RuntimeErr(absl::StrCat(op, ": batch size mismatch, self is ", ShapeToString(a->sizes), ", mat2 is ",
                                   ShapeToString(b->sizes), " (", a->sizes[0], " != ", b->sizes[0], ")"));
  }
  if (a->sizes[2] != b->sizes[1]) return SizeMismatch(op, "mat2", *a, *b, a->sizes[2], b->sizes[1]);
  TD_RETURN_IF_ERROR(CheckMatmulDtypes(op, "mat2", *a, *b));
  return Finish(op, {a->sizes[0], a->sizes[1], b->sizes[2]}, *a, device);
}

}  // namespace tensord::meta
