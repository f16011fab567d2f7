// Meta functions of in-place ops (schemas `Tensor(a!) self ... -> Tensor(a!)`):
// the generic wrapper that turns an out-of-place op's meta function into its
// in-place form (add_, mul_, clamp_, masked_fill_, addcmul_, ...), and the
// in-place-only ops copy_, zero_, fill_, uniform_ and normal_. Every one
// returns self's metadata aliasing argument 0; the daemon hands self's storage
// to the kernel as its output.
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "meta_common.h"
#include "meta_functions.h"
#include "tensord/meta/shape_rules.h"

namespace tensord::meta {
namespace {

// PyTorch's canCast(from, to) for real dtypes: floating results cannot be
// written into integer or bool tensors, and non-bool results cannot be
// written into bool tensors.
bool CanCast(ScalarType from, ScalarType to) {
  if (IsFloating(from) && IsIntegral(to, /*include_bool=*/true)) return false;
  if (from != ScalarType::kBool && to == ScalarType::kBool) return false;
  return true;
}

// PyTorch's assert_no_internal_overlap: a dim of size > 1 with stride 0 means
// several elements of `self` share one memory location. An empty tensor has
// no elements to share one (PyTorch accepts zeros(1, 0).expand(4, 0).relu_()).
absl::Status CheckNoInternalOverlap(absl::string_view op, const TensorMeta& self) {
  if (self.numel() == 0) return absl::OkStatus();
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (self.sizes[d] > 1 && self.strides[d] == 0) {
      return RuntimeErr(absl::StrCat(op,
                                     ": unsupported operation: more than one element of the written-to tensor refers "
                                     "to a single memory location. Please clone() the tensor before performing the "
                                     "operation."));
    }
  }
  return absl::OkStatus();
}

// A `float` argument (an int is accepted, as Python does).
absl::StatusOr<double> FloatArg(absl::string_view op, absl::Span<const Value> args, size_t i) {
  if (i >= args.size()) return TypeErr(absl::StrCat(op, ": missing argument ", i));
  const Value& v = args[i];
  if (v.kind() == Value::Kind::kFloat || v.kind() == Value::Kind::kInt) return v.to_double();
  if (v.kind() == Value::Kind::kScalar) return v.scalar().to_double();
  return TypeErr(absl::StrCat(op, ": argument ", i, " expected float, got ", ValueKindName(v.kind())));
}

absl::Status SameDevice(const TensorMeta& self, Device other) {
  if (other == self.device) return absl::OkStatus();
  return TwoDevicesError("", other, self.device);
}

}  // namespace

absl::StatusOr<MetaResult> InPlaceResult(absl::string_view op, absl::Span<const Value> args, MetaFn base) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_RETURN_IF_ERROR(CheckNoInternalOverlap(op, *self));
  TD_ASSIGN_OR_RETURN(MetaResult r, base(op, args));
  if (r.outputs.size() != 1) {
    return InternalErr(absl::StrCat("internal: ", op, ": the out-of-place meta function gave ", r.outputs.size(),
                                    " outputs, expected 1"));
  }
  const TensorMeta& out = r.outputs[0];
  if (out.sizes != self->sizes) {
    return RuntimeErr(absl::StrCat(op, ": output with shape ", ShapeToString(self->sizes),
                                   " doesn't match the broadcast shape ", ShapeToString(out.sizes)));
  }
  TD_RETURN_IF_ERROR(SameDevice(*self, out.device));
  if (!CanCast(out.dtype, self->dtype)) {
    return RuntimeErr(absl::StrCat(op, ": result type ", DtypeC10Name(out.dtype),
                                   " can't be cast to the desired output type ", DtypeC10Name(self->dtype)));
  }
  return OneOutput(*self, 0);
}

// copy_(self, src, non_blocking): src broadcasts to self's shape; any pair of
// dtypes; src may live on another device, except that nothing is copied out
// of a meta tensor into a real one.
absl::StatusOr<MetaResult> CopyInPlace(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(const TensorMeta* src, TensorArg(op, args, 1));
  TD_RETURN_IF_ERROR(CheckNoInternalOverlap(op, *self));
  if (src->device.is_meta() && !self->device.is_meta()) {
    return NotImplementedErr(absl::StrCat(op, ": Cannot copy out of meta tensor; no data!"));
  }
  const Shape shapes[] = {self->sizes, src->sizes};
  TD_ASSIGN_OR_RETURN(Shape sizes, BroadcastShapes(op, shapes));
  if (sizes != self->sizes) {
    return RuntimeErr(absl::StrCat(op, ": output with shape ", ShapeToString(self->sizes),
                                   " doesn't match the broadcast shape ", ShapeToString(sizes)));
  }
  return OneOutput(*self, 0);
}

// zero_(self) / fill_.Scalar(self, value): every element of self (expanded
// tensors included, as PyTorch allows) becomes 0 / value; value must fit
// self's dtype (CheckFillValue).
absl::StatusOr<MetaResult> FillInPlace(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  if (args.size() > 1) {
    TD_ASSIGN_OR_RETURN(Scalar value, ScalarArg(op, args, 1));
    TD_RETURN_IF_ERROR(CheckFillValue(op, value, self->dtype));
  }
  return OneOutput(*self, 0);
}

// uniform_(self, from, to) / normal_(self, mean, std): floating self (not
// float8), no internal overlap; uniform_ needs from <= to, normal_ std >= 0,
// both finite parameters.
absl::StatusOr<MetaResult> RandomInPlace(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(double a, FloatArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(double b, FloatArg(op, args, 2));
  TD_RETURN_IF_ERROR(CheckNoInternalOverlap(op, *self));
  if (!IsFloating(self->dtype) || IsFloat8(self->dtype)) return NotImplementedForDtype(op, self->dtype);
  const bool uniform = op == "uniform_";
  if (!std::isfinite(a) || !std::isfinite(b)) {
    return RuntimeErr(absl::StrCat(op, ": expects finite parameters, but got ", uniform ? "from=" : "mean=", a,
                                   uniform ? ", to=" : ", std=", b));
  }
  if (uniform && a > b) {
    return RuntimeErr(
        absl::StrCat(op, ": uniform_ expects to return a [from, to) range, but found from=", a, " > to=", b));
  }
  if (!uniform && b < 0) return RuntimeErr(absl::StrCat(op, ": normal expects std >= 0.0, but found std ", b));
  return OneOutput(*self, 0);
}

}  // namespace tensord::meta

namespace tensord::meta {

absl::StatusOr<MetaResult> FusedAdam(absl::string_view op, absl::Span<const Value> args) {
  static constexpr size_t kTensors[] = {0, 1, 2, 3};
  static constexpr const char* kNames[] = {"self", "grad", "exp_avg", "exp_avg_sq"};
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  if (self->dtype != ScalarType::kFloat32 && self->dtype != ScalarType::kFloat64) {
    return RuntimeErr(absl::StrCat(op, ": expected a float32 or float64 parameter, got ", DtypeName(self->dtype)));
  }
  if (self->numel() > 0 && !self->is_non_overlapping_and_dense()) {
    return RuntimeErr(absl::StrCat(op, ": self must be dense (non-overlapping, no gaps), got strides ",
                                   ShapeToString(self->strides), " for sizes ", ShapeToString(self->sizes)));
  }
  for (size_t k = 1; k < 4; ++k) {
    TD_ASSIGN_OR_RETURN(const TensorMeta* t, TensorArg(op, args, kTensors[k]));
    if (t->sizes != self->sizes) {
      return RuntimeErr(absl::StrCat(op, ": ", kNames[k], " has sizes ", ShapeToString(t->sizes), ", self has ",
                                     ShapeToString(self->sizes)));
    }
    if (t->dtype != self->dtype) {
      return RuntimeErr(absl::StrCat(op, ": ", kNames[k], " is ", DtypeName(t->dtype), ", self is ",
                                     DtypeName(self->dtype)));
    }
    TD_RETURN_IF_ERROR(SameDevice(*self, t->device));
    if (self->numel() > 0 && t->strides != self->strides) {
      return RuntimeErr(absl::StrCat(op, ": ", kNames[k], " has strides ", ShapeToString(t->strides),
                                     ", self has ", ShapeToString(self->strides), " (all four need one layout)"));
    }
  }
  MetaResult r;
  for (size_t a : {size_t{0}, size_t{2}, size_t{3}}) {
    r.outputs.push_back(args[a].tensor());
    r.alias_of.push_back(static_cast<int>(a));
  }
  return r;
}

}  // namespace tensord::meta
