// Meta functions of matmul (every rank combination, with batch
// broadcasting), mm, bmm, addmm, baddbmm, dot, outer and linear. Outputs are
// contiguous (outer follows mul's layout rule, which gives contiguous
// strides). The GEMM operands must have the same dtype (PyTorch's CPU
// kernels refuse a mix, and meta is never more lenient than a backend); bool
// and float8 have no GEMM. float16 is accepted (the CPU kernel computes it in
// float32) where PyTorch 1.13's CPU kernels refuse Half.
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
  // the transpose made contiguous; contiguous() keeps a view that already
  // counts as contiguous (empty, or only size-1 dims out of order), so such a
  // result has the transposed strides. PyTorch skips that path when other is
  // 3-D with its last two dims transposed (it runs bmm).
  int64_t inner = 0;
  const bool inner_ok = db == 3 && !__builtin_mul_overflow(b->sizes[1], b->sizes[2], &inner);
  const bool other_transposed = inner_ok && b->strides[2] != 1 && b->strides[0] == inner;
  if (da == 2 && db >= 3 && !other_transposed) {
    const int64_t n = static_cast<int64_t>(sizes.size());
    Shape swapped = sizes;
    std::swap(swapped[n - 1], swapped[n - 2]);
    Shape strides = ContiguousStrides(swapped);
    std::swap(strides[n - 1], strides[n - 2]);
    TensorMeta view = r.outputs[0];
    view.strides = std::move(strides);
    if (view.is_contiguous()) r.outputs[0] = std::move(view);
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

namespace {

// PyTorch's expand_size(self, target, op): the errors expand() gives when
// `self` does not broadcast to `target` (the result is not needed).
absl::Status CheckExpandsTo(absl::string_view op, const TensorMeta& self, const Shape& target) {
  const Value args[] = {Value(&self), Value(Shape(target.begin(), target.end())), Value(false)};
  return Expand(op, args).status();
}

// The dtype checks of PyTorch's addmm kernel that follow the shape checks:
// no bool, no float8.
absl::Status CheckGemmDtype(absl::string_view op, ScalarType t) {
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, t));
  if (t == ScalarType::kBool) return NotImplementedForDtype(op, t);
  return absl::OkStatus();
}

// addmm's rule on metadata: self [*] broadcasts to [n, m], mat1 [n, k],
// mat2 [k, m], all three of one dtype; a contiguous [n, m] output of that
// dtype. Errors in PyTorch's order and words.
absl::StatusOr<MetaResult> AddmmMeta(absl::string_view op, const TensorMeta& self, const TensorMeta& mat1,
                                     const TensorMeta& mat2) {
  const TensorMeta* tensors[] = {&self, &mat1, &mat2};
  TD_ASSIGN_OR_RETURN(Device device, CommonDevice(op, tensors, /*allow_cpu_scalars=*/false));
  if (self.dtype != mat2.dtype) {
    return RuntimeErr(absl::StrCat(op, ": self and mat2 must have the same dtype (self is ", DtypeName(self.dtype),
                                   ", mat2 is ", DtypeName(mat2.dtype), ")"));
  }
  if (mat1.dtype != mat2.dtype) {
    return RuntimeErr(absl::StrCat(op, ": mat1 and mat2 must have the same dtype (mat1 is ", DtypeName(mat1.dtype),
                                   ", mat2 is ", DtypeName(mat2.dtype), ")"));
  }
  if (mat1.dim() != 2) return RuntimeErr(absl::StrCat(op, ": mat1 must be a matrix, got ", mat1.dim(), "-D tensor"));
  if (mat2.dim() != 2) return RuntimeErr(absl::StrCat(op, ": mat2 must be a matrix, got ", mat2.dim(), "-D tensor"));
  if (mat1.sizes[1] != mat2.sizes[0]) {
    return RuntimeErr(absl::StrCat(op, ": mat1 and mat2 shapes cannot be multiplied (", mat1.sizes[0], "x",
                                   mat1.sizes[1], " and ", mat2.sizes[0], "x", mat2.sizes[1], ")"));
  }
  const Shape sizes = {mat1.sizes[0], mat2.sizes[1]};
  TD_RETURN_IF_ERROR(CheckExpandsTo(op, self, sizes));
  TD_RETURN_IF_ERROR(CheckGemmDtype(op, mat1.dtype));
  return Finish(op, sizes, mat1, device);
}

// `t` (at most 2-D) as t() gives it: the last two dims swapped.
absl::StatusOr<TensorMeta> TransposedWeight(absl::string_view op, const TensorMeta& w) {
  if (w.dim() > 2) {
    return RuntimeErr(absl::StrCat(op, ": t() expects a tensor with <= 2 dimensions, but self is ", w.dim(), "D"));
  }
  TensorMeta t = w;
  if (w.dim() == 2) {
    std::swap(t.sizes[0], t.sizes[1]);
    std::swap(t.strides[0], t.strides[1]);
  }
  return t;
}

}  // namespace

absl::StatusOr<MetaResult> Addmm(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(const TensorMeta* mat1, TensorArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(const TensorMeta* mat2, TensorArg(op, args, 2));
  return AddmmMeta(op, *self, *mat1, *mat2);
}

absl::StatusOr<MetaResult> Baddbmm(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(const TensorMeta* b1, TensorArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(const TensorMeta* b2, TensorArg(op, args, 2));
  const TensorMeta* tensors[] = {self, b1, b2};
  TD_ASSIGN_OR_RETURN(Device device, CommonDevice(op, tensors, /*allow_cpu_scalars=*/false));
  if (b1->dim() != 3) {
    return RuntimeErr(absl::StrCat(op, ": batch1 must be a 3D tensor, got a ", b1->dim(), "D tensor"));
  }
  if (b2->dim() != 3) {
    return RuntimeErr(absl::StrCat(op, ": batch2 must be a 3D tensor, got a ", b2->dim(), "D tensor"));
  }
  // PyTorch 1.13: self is expanded to [b, n, m] first; the result takes the
  // batches' dtype whatever self's is (an int64 self with float32 batches
  // gives float32; self is converted).
  const Shape sizes = {b1->sizes[0], b1->sizes[1], b2->sizes[2]};
  TD_RETURN_IF_ERROR(CheckExpandsTo(op, *self, sizes));
  if (b2->sizes[0] != b1->sizes[0] || b2->sizes[1] != b1->sizes[2]) {
    return RuntimeErr(absl::StrCat(op, ": Expected size for first two dimensions of batch2 tensor to be: [",
                                   b1->sizes[0], ", ", b1->sizes[2], "] but got: [", b2->sizes[0], ", ",
                                   b2->sizes[1], "]."));
  }
  if (b1->dtype != b2->dtype) {
    return RuntimeErr(absl::StrCat(op, ": expected scalar type ", DtypeC10Name(b1->dtype), " but found ",
                                   DtypeC10Name(b2->dtype), " (batch1 is ", DtypeName(b1->dtype), ", batch2 is ",
                                   DtypeName(b2->dtype), "; both batches must have the same dtype)"));
  }
  TD_RETURN_IF_ERROR(CheckGemmDtype(op, b1->dtype));
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, self->dtype));
  return Finish(op, sizes, *b1, device);
}

absl::StatusOr<MetaResult> Dot(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* a, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(const TensorMeta* b, TensorArg(op, args, 1));
  const TensorMeta* tensors[] = {a, b};
  TD_ASSIGN_OR_RETURN(Device device, CommonDevice(op, tensors, /*allow_cpu_scalars=*/false));
  if (a->dim() != 1 || b->dim() != 1) {
    return RuntimeErr(absl::StrCat(op, ": 1D tensors expected, but got ", a->dim(), "D and ", b->dim(), "D tensors"));
  }
  if (a->dtype != b->dtype) {
    return RuntimeErr(absl::StrCat(op, ": expected both vectors to have same dtype, but found ",
                                   DtypeC10Name(a->dtype), " and ", DtypeC10Name(b->dtype)));
  }
  if (a->sizes[0] != b->sizes[0]) {
    return RuntimeErr(absl::StrCat(op, ": inconsistent tensor size, expected tensor [", a->sizes[0], "] and src [",
                                   b->sizes[0], "] to have the same number of elements, but got ", a->sizes[0],
                                   " and ", b->sizes[0], " elements respectively"));
  }
  TD_RETURN_IF_ERROR(CheckGemmDtype(op, a->dtype));
  return Finish(op, {}, *a, device);
}

absl::StatusOr<MetaResult> Outer(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* a, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(const TensorMeta* b, TensorArg(op, args, 1));
  if (a->dim() != 1) return RuntimeErr(absl::StrCat(op, ": Expected 1-D argument self, but got ", a->dim(), "-D"));
  if (b->dim() != 1) return RuntimeErr(absl::StrCat(op, ": Expected 1-D argument vec2, but got ", b->dim(), "-D"));
  // PyTorch: self.reshape({n, 1}) * vec2 — mul's promotion, devices and layout.
  TensorMeta col = *a;
  col.sizes = {a->sizes[0], 1};
  col.strides = ComputeViewStrides(a->sizes, a->strides, col.sizes).value_or(Shape{a->strides[0], a->strides[0]});
  const TensorMeta* tensors[] = {&col, b};
  TD_ASSIGN_OR_RETURN(Device device, CommonDevice(op, tensors, /*allow_cpu_scalars=*/false));
  PromotionOperand operands[2] = {{&col, nullptr}, {b, nullptr}};
  TD_ASSIGN_OR_RETURN(ScalarType dtype, ResultType(op, operands));
  TD_RETURN_IF_ERROR(CheckComputeDtype(op, dtype));
  const Shape sizes = {a->sizes[0], b->sizes[0]};
  TD_RETURN_IF_ERROR(CheckNewSizes(op, sizes, dtype));
  Shape strides = ElementwiseOutputStrides(sizes, tensors);
  return OneOutput(MakeMeta(sizes, std::move(strides), 0, dtype, device));
}

absl::StatusOr<MetaResult> Linear(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* input, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(const TensorMeta* weight, TensorArg(op, args, 1));
  const TensorMeta* bias = nullptr;
  if (args.size() > 2 && !args[2].is_none()) {
    TD_ASSIGN_OR_RETURN(bias, TensorArg(op, args, 2));
  }
  TD_ASSIGN_OR_RETURN(TensorMeta wt, TransposedWeight(op, *weight));
  // PyTorch 1.13's at::linear: a 2-D input with a bias is addmm(bias, input,
  // weight.t()); a contiguous 3-D input with a bias is the same on the
  // input folded to 2-D; everything else is matmul(input, weight.t()) followed
  // by an in-place add_ of the bias (so the bias may then be of another dtype
  // that casts to the output's).
  if (bias != nullptr && input->dim() == 2) return AddmmMeta(op, *bias, *input, wt);
  if (bias != nullptr && input->dim() == 3 && input->is_contiguous()) {
    int64_t rows = 0;
    if (__builtin_mul_overflow(input->sizes[0], input->sizes[1], &rows)) {
      return RuntimeErr(absl::StrCat(op, ": input sizes ", ShapeToString(input->sizes), " overflow"));
    }
    const TensorMeta flat = TensorMeta::Contiguous({rows, input->sizes[2]}, input->dtype, input->device);
    TD_ASSIGN_OR_RETURN(MetaResult r, AddmmMeta(op, *bias, flat, wt));
    return Finish(op, {input->sizes[0], input->sizes[1], r.outputs[0].sizes[1]}, r.outputs[0], r.outputs[0].device);
  }
  if (wt.dim() == 2 && input->dim() >= 1 && input->sizes[input->dim() - 1] != wt.sizes[0]) {
    // matmul folds the input's leading dims into the rows of an mm.
    int64_t rows = 1;
    for (int64_t d = 0; d + 1 < input->dim(); ++d) {
      if (__builtin_mul_overflow(rows, input->sizes[d], &rows)) rows = -1;
    }
    return RuntimeErr(absl::StrCat(op, ": mat1 and mat2 shapes cannot be multiplied (", rows, "x",
                                   input->sizes[input->dim() - 1], " and ", wt.sizes[0], "x", wt.sizes[1], ")"));
  }
  const Value margs[] = {Value(input), Value(&wt)};
  TD_ASSIGN_OR_RETURN(MetaResult r, Matmul(op, margs));
  if (bias == nullptr) return r;
  const TensorMeta out = r.outputs[0];
  const Value add_args[] = {Value(&out), Value(bias), Value(Scalar::Int(1))};
  TD_RETURN_IF_ERROR(InPlaceResult(op, add_args, BinaryArith).status());
  return r;
}

}  // namespace tensord::meta
