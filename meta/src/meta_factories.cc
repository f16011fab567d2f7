// Meta functions of factories: empty/zeros/ones/rand/randn, full, arange,
// eye and the *_like forms. Outputs are contiguous (the *_like forms keep
// self's layout, as PyTorch's preserve_format does); device None means cpu;
// dtype None means float32 for float factories, the fill value's kind for
// full, int64 or float32 for arange.
#include <cmath>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "meta_common.h"
#include "meta_functions.h"
#include "tensord/meta/shape_rules.h"

namespace tensord::meta {
namespace {

// rand/randn draw floating values only.
absl::Status CheckRandomDtype(absl::string_view op, ScalarType dtype) {
  if (!IsFloating(dtype) || IsFloat8(dtype)) return NotImplementedForDtype(op, dtype);
  return absl::OkStatus();
}

bool IsRandom(absl::string_view op) {
  return op == "rand" || op == "randn" || op == "rand_like" || op == "randn_like";
}

absl::StatusOr<MetaResult> FreshTensor(absl::string_view op, Shape sizes, ScalarType dtype, Device device) {
  TD_RETURN_IF_ERROR(CheckNewSizes(op, sizes, dtype));
  return OneOutput(TensorMeta::Contiguous(std::move(sizes), dtype, device));
}

// Scalar::to<int64_t>() (c10's checked conversion), as arange uses for
// integer dtypes.
absl::StatusOr<int64_t> ToInt64Checked(absl::string_view op, const Scalar& s) {
  if (!s.is_float()) return s.to_int();
  const double d = s.to_double();
  if (std::isnan(d) || d < -9223372036854775808.0 || d > 9223372036854775807.0) {
    return RuntimeErr(absl::StrCat(op, ": value cannot be converted to type int64_t without overflow"));
  }
  if (d >= 9223372036854775807.0) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(d);
}

// at::arange_out's size computation and checks (CPU accumulate types: int64
// for integer dtypes, double for floating ones).
absl::StatusOr<MetaResult> ArangeImpl(absl::string_view op, const Scalar& start, const Scalar& end, const Scalar& step,
                                      std::optional<ScalarType> dtype_opt, std::optional<Device> device) {
  ScalarType dtype = ScalarType::kInt64;
  if (dtype_opt) {
    dtype = *dtype_opt;
  } else if (start.is_float() || end.is_float() || step.is_float()) {
    dtype = kDefaultFloat;
  }
  if (dtype == ScalarType::kBool || IsFloat8(dtype)) return NotImplementedForDtype(op, dtype);

  double size_d = 0;
  if (IsIntegral(dtype, /*include_bool=*/false)) {
    TD_ASSIGN_OR_RETURN(int64_t xstart, ToInt64Checked(op, start));
    TD_ASSIGN_OR_RETURN(int64_t xend, ToInt64Checked(op, end));
    TD_ASSIGN_OR_RETURN(int64_t xstep, ToInt64Checked(op, step));
    if (dtype == ScalarType::kInt64) {
      int64_t diff = 0;
      if (__builtin_sub_overflow(xend, xstart, &diff)) {
        return RuntimeErr(absl::StrCat(op, ": invalid size, possible overflow?"));
      }
      size_d = std::ceil(static_cast<double>(diff) / static_cast<double>(xstep));
    } else {
      size_d = std::ceil((end.to_double() - start.to_double()) / step.to_double());
    }
    if (xstep == 0) return RuntimeErr(absl::StrCat(op, ": step must be nonzero"));
    if (!((xstep > 0 && xend >= xstart) || (xstep < 0 && xend <= xstart))) {
      return RuntimeErr(absl::StrCat(op, ": upper bound and larger bound inconsistent with step sign"));
    }
  } else {
    const double xstart = start.to_double(), xend = end.to_double(), xstep = step.to_double();
    size_d = std::ceil((xend - xstart) / xstep);
    if (!(xstep > 0 || xstep < 0)) return RuntimeErr(absl::StrCat(op, ": step must be nonzero"));
    if (!std::isfinite(xstart) || !std::isfinite(xend)) {
      return RuntimeErr(absl::StrCat(op, ": unsupported range: ", xstart, " -> ", xend));
    }
    if (!((xstep > 0 && xend >= xstart) || (xstep < 0 && xend <= xstart))) {
      return RuntimeErr(absl::StrCat(op, ": upper bound and larger bound inconsistent with step sign"));
    }
  }
  if (!(size_d >= 0 && size_d <= 9223372036854775807.0)) {
    return RuntimeErr(absl::StrCat(op, ": invalid size, possible overflow?"));
  }
  const int64_t size = size_d >= 9223372036854775807.0 ? std::numeric_limits<int64_t>::max()
                                                       : static_cast<int64_t>(size_d);
  return FreshTensor(op, {size}, dtype, device.value_or(kCPU));
}

}  // namespace

absl::StatusOr<MetaResult> Empty(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, IntListArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(std::optional<ScalarType> dtype, OptDtypeArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(std::optional<Device> device, OptDeviceArg(op, args, 2));
  const ScalarType t = dtype.value_or(kDefaultFloat);
  TD_RETURN_IF_ERROR(CheckNewSizes(op, sizes, t));
  if (IsRandom(op)) TD_RETURN_IF_ERROR(CheckRandomDtype(op, t));
  return FreshTensor(op, std::move(sizes), t, device.value_or(kCPU));
}

absl::StatusOr<MetaResult> Full(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, IntListArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(Scalar fill, ScalarArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(std::optional<ScalarType> dtype, OptDtypeArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(std::optional<Device> device, OptDeviceArg(op, args, 3));
  // bool -> bool, int -> int64, float -> float32.
  const ScalarType t = dtype.value_or(fill.dtype());
  TD_RETURN_IF_ERROR(CheckNewSizes(op, sizes, t));
  TD_RETURN_IF_ERROR(CheckFillValue(op, fill, t));
  return FreshTensor(op, std::move(sizes), t, device.value_or(kCPU));
}

absl::StatusOr<MetaResult> Arange(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(Scalar end, ScalarArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(std::optional<ScalarType> dtype, OptDtypeArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(std::optional<Device> device, OptDeviceArg(op, args, 2));
  return ArangeImpl(op, Scalar::Int(0), end, Scalar::Int(1), dtype, device);
}

absl::StatusOr<MetaResult> ArangeStart(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(Scalar start, ScalarArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(Scalar end, ScalarArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(Scalar step, ScalarArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(std::optional<ScalarType> dtype, OptDtypeArg(op, args, 3));
  TD_ASSIGN_OR_RETURN(std::optional<Device> device, OptDeviceArg(op, args, 4));
  return ArangeImpl(op, start, end, step, dtype, device);
}

absl::StatusOr<MetaResult> Eye(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(int64_t n, IntArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(std::optional<int64_t> m_opt, OptIntArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(std::optional<ScalarType> dtype, OptDtypeArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(std::optional<Device> device, OptDeviceArg(op, args, 3));
  if (n < 0) return RuntimeErr(absl::StrCat(op, ": n must be greater or equal to 0, got ", n));
  const int64_t m = m_opt.value_or(n);
  if (m < 0) return RuntimeErr(absl::StrCat(op, ": m must be greater or equal to 0, got ", m));
  const ScalarType t = dtype.value_or(kDefaultFloat);
  if (IsFloat8(t)) return NotImplementedForDtype(op, t);
  return FreshTensor(op, {n, m}, t, device.value_or(kCPU));
}

absl::StatusOr<MetaResult> EmptyLike(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(const TensorMeta* self, TensorArg(op, args, 0));
  const bool has_fill = op == "full_like";
  const size_t kw = has_fill ? 2 : 1;
  TD_ASSIGN_OR_RETURN(std::optional<ScalarType> dtype, OptDtypeArg(op, args, kw));
  TD_ASSIGN_OR_RETURN(std::optional<Device> device, OptDeviceArg(op, args, kw + 1));
  const ScalarType t = dtype.value_or(self->dtype);
  if (has_fill) {
    TD_ASSIGN_OR_RETURN(Scalar fill, ScalarArg(op, args, 1));
    TD_RETURN_IF_ERROR(CheckFillValue(op, fill, t));
  }
  if (IsRandom(op)) TD_RETURN_IF_ERROR(CheckRandomDtype(op, t));
  TD_RETURN_IF_ERROR(CheckNewSizes(op, self->sizes, t));
  return OneOutput(PreserveFormatCopy(*self, t, device.value_or(self->device)));
}

}  // namespace tensord::meta
