// Meta functions of factories: empty/zeros/ones/rand/randn, full, arange,
// linspace, randint, eye, empty_strided and the *_like forms. Outputs are
// contiguous (the *_like forms keep self's layout, as PyTorch's
// preserve_format does; empty_strided takes the given strides); device None
// means cpu; dtype None means float32 for float factories and linspace, the
// fill value's kind for full, int64 or float32 for arange, int64 for randint.
#include <algorithm>
#include <cmath>
#include <cstdlib>
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
  TD_ASSIGN_OR_RETURN(Shape sizes, IntListArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(std::optional<ScalarType> dtype, OptDtypeArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(std::optional<Device> device, OptDeviceArg(op, args, 2));
  const ScalarType t = dtype.value_or(kDefaultFloat);
  TD_RETURN_IF_ERROR(CheckNewSizes(op, sizes, t));
  if (IsRandom(op)) TD_RETURN_IF_ERROR(CheckRandomDtype(op, t));
  return FreshTensor(op, std::move(sizes), t, device.value_or(kCPU));
}

absl::StatusOr<MetaResult> Full(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(Shape sizes, IntListArg(op, args, 0));
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

// ---- linspace, randint, empty_strided ----------------------------------------

namespace {

// Precision (std::numeric_limits<T>::digits) and largest finite value of a
// floating dtype that randint accepts.
int FloatDigits(ScalarType t) {
  switch (t) {
    case ScalarType::kFloat16: return 11;
    case ScalarType::kBFloat16: return 8;
    case ScalarType::kFloat32: return 24;
    default: return 53;
  }
}

double FloatMax(ScalarType t) {
  switch (t) {
    case ScalarType::kFloat16: return 65504.0;
    case ScalarType::kBFloat16: return 3.38953138925153547590470800371487866880e+38;
    case ScalarType::kFloat32: return 3.40282346638528859811704183484516925440e+38;
    default: return 1.7976931348623157e308;
  }
}

// static_cast<int64_t>(static_cast<T>(v)) for a floating T of `digits`
// bits of precision (round to nearest even), for |v| within T's range.
int64_t RoundThroughFloat(int64_t v, int digits) {
  const double d = static_cast<double>(v);  // exact to 53 bits, then rounded once more below
  if (d == 0) return 0;
  int e = 0;
  const double m = std::frexp(d, &e);
  const double r = std::ldexp(std::nearbyint(std::ldexp(m, digits)), e - digits);
  if (r >= 9223372036854775807.0) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(r);
}

int FloorLog2(uint64_t v) {
  int n = 0;
  while (v >>= 1) ++n;
  return n;
}

// PyTorch's random_(from, to) checks (DistributionTemplates.h), in its order:
// from < to; for floating dtypes, from and to rounded to the dtype must
// still be ordered (update_from/update_to); then both ends within the
// dtype's range.
absl::Status CheckRandomBounds(absl::string_view op, int64_t from, int64_t to, ScalarType dtype) {
  if (!(from < to)) {
    return RuntimeErr(absl::StrCat(op, ": random_ expects 'from' to be less than 'to', but got from=", from,
                                   " >= to=", to));
  }
  if (IsFloating(dtype)) {
    const int digits = FloatDigits(dtype);
    const double max = FloatMax(dtype);
    const bool in_range = std::fabs(static_cast<double>(from)) < max && std::fabs(static_cast<double>(to)) < max;
    if (in_range) {
      // update_from: the first representable value >= from.
      const int64_t from_plus_1 = RoundThroughFloat(from + 1, digits);
      if (from_plus_1 < from) {
        const int n = FloorLog2(static_cast<uint64_t>(std::llabs(from + 1)));
        from = from_plus_1 + (int64_t{1} << std::max(0, n - digits + 1));
      }
      const int64_t to_minus_1 = RoundThroughFloat(to - 1, digits);
      if (to_minus_1 >= to) {
        const int n = FloorLog2(static_cast<uint64_t>(std::llabs(to - 1)));
        to = to_minus_1 - (int64_t{1} << std::max(0, n - digits + 1));
      }
      if (!(from < to)) {
        return RuntimeErr(absl::StrCat(op, ": random_ expects 'from' casted to dtype to be less than 'to' casted ",
                                       "to dtype, but got from=", from, " >= to=", to));
      }
    }
    const int64_t to_inc = to - 1;
    if (!(static_cast<double>(from) >= -max && static_cast<double>(from) <= max)) {
      return RuntimeErr(absl::StrCat(op, ": from is out of bounds for ", TypeMetaName(dtype)));
    }
    if (!(static_cast<double>(to_inc) >= -max && static_cast<double>(to_inc) <= max)) {
      return RuntimeErr(absl::StrCat(op, ": to - 1 is out of bounds for ", TypeMetaName(dtype)));
    }
    return absl::OkStatus();
  }
  int64_t lo = 0, hi = 1;
  switch (dtype) {
    case ScalarType::kUInt8: lo = 0; hi = 255; break;
    case ScalarType::kInt8: lo = -128; hi = 127; break;
    case ScalarType::kInt16: lo = -32768; hi = 32767; break;
    case ScalarType::kInt32: lo = std::numeric_limits<int32_t>::min(); hi = std::numeric_limits<int32_t>::max(); break;
    case ScalarType::kInt64: lo = std::numeric_limits<int64_t>::min(); hi = std::numeric_limits<int64_t>::max(); break;
    default: break;  // bool: [0, 1]
  }
  if (from < lo || from > hi) return RuntimeErr(absl::StrCat(op, ": from is out of bounds for ", TypeMetaName(dtype)));
  if (to - 1 < lo || to - 1 > hi) {
    return RuntimeErr(absl::StrCat(op, ": to - 1 is out of bounds for ", TypeMetaName(dtype)));
  }
  return absl::OkStatus();
}

absl::StatusOr<MetaResult> RandintImpl(absl::string_view op, int64_t low, int64_t high, Shape sizes,
                                       std::optional<ScalarType> dtype_opt, std::optional<Device> device) {
  const ScalarType t = dtype_opt.value_or(ScalarType::kInt64);
  // at::empty(size) runs first, then random_(low, high) checks its bounds
  // (even for an empty result).
  TD_RETURN_IF_ERROR(CheckNewSizes(op, sizes, t));
  if (IsFloat8(t)) return NotImplementedForDtype(op, t);
  TD_RETURN_IF_ERROR(CheckRandomBounds(op, low, high, t));
  return FreshTensor(op, std::move(sizes), t, device.value_or(kCPU));
}

}  // namespace

absl::StatusOr<MetaResult> Linspace(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(Scalar start, ScalarArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(Scalar end, ScalarArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(int64_t steps, IntArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(std::optional<ScalarType> dtype, OptDtypeArg(op, args, 3));
  TD_ASSIGN_OR_RETURN(std::optional<Device> device, OptDeviceArg(op, args, 4));
  if (steps < 0) return RuntimeErr(absl::StrCat(op, ": number of steps must be non-negative, got ", steps));
  // torch 1.13: the default float dtype whatever the kinds of start and end.
  const ScalarType t = dtype.value_or(kDefaultFloat);
  if (t == ScalarType::kBool || IsFloat8(t)) return NotImplementedForDtype(op, t);
  TD_RETURN_IF_ERROR(CheckNewSizes(op, {steps}, t));
  // The kernel converts start (and, for 2+ steps, end) with c10's checked
  // Scalar::to<T>(); steps == 0 converts nothing, steps == 1 is fill_(start).
  if (steps >= 1) TD_RETURN_IF_ERROR(CheckFillValue(op, start, t));
  if (steps >= 2) TD_RETURN_IF_ERROR(CheckFillValue(op, end, t));
  return FreshTensor(op, {steps}, t, device.value_or(kCPU));
}

absl::StatusOr<MetaResult> Randint(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(int64_t high, IntArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(Shape sizes, IntListArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(std::optional<ScalarType> dtype, OptDtypeArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(std::optional<Device> device, OptDeviceArg(op, args, 3));
  return RandintImpl(op, 0, high, std::move(sizes), dtype, device);
}

absl::StatusOr<MetaResult> RandintLow(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(int64_t low, IntArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(int64_t high, IntArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(Shape sizes, IntListArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(std::optional<ScalarType> dtype, OptDtypeArg(op, args, 3));
  TD_ASSIGN_OR_RETURN(std::optional<Device> device, OptDeviceArg(op, args, 4));
  return RandintImpl(op, low, high, std::move(sizes), dtype, device);
}

absl::StatusOr<MetaResult> EmptyStrided(absl::string_view op, absl::Span<const Value> args) {
  TD_ASSIGN_OR_RETURN(Shape sizes, IntListArg(op, args, 0));
  TD_ASSIGN_OR_RETURN(Shape strides, IntListArg(op, args, 1));
  TD_ASSIGN_OR_RETURN(std::optional<ScalarType> dtype, OptDtypeArg(op, args, 2));
  TD_ASSIGN_OR_RETURN(std::optional<Device> device, OptDeviceArg(op, args, 3));
  const ScalarType t = dtype.value_or(kDefaultFloat);
  // PyTorch's order: negative sizes, rank mismatch, then the storage size
  // (computeStorageNbytes), where a negative stride reads as an overflow.
  TD_RETURN_IF_ERROR(CheckRank(op, sizes.size()));
  TD_RETURN_IF_ERROR(CheckNonNegativeSizes(op, sizes));
  TD_RETURN_IF_ERROR(CheckStrideCount(op, sizes, strides));
  TensorMeta out = MakeMeta(sizes, strides, 0, t, device.value_or(kCPU));
  bool bad = false;
  for (int64_t s : strides) bad |= s < 0;
  if (!bad) bad = !out.StorageBytesNeeded().ok();
  if (bad) {
    return RuntimeErr(absl::StrCat(op, ": Storage size calculation overflowed with sizes=", ShapeToString(sizes),
                                   " and strides=", ShapeToString(strides)));
  }
  return OneOutput(std::move(out));
}

}  // namespace tensord::meta
