// Helpers shared by the meta functions: argument access, result builders,
// device agreement, dtype checks, PyTorch's layout predicates and the view
// algorithms (infer_size, computeStride).
#include "meta_common.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tensord/meta/shape_rules.h"

namespace tensord::meta {
namespace {

absl::Status WrongKind(absl::string_view op, size_t i, absl::string_view expected, const Value& v) {
  return TypeErr(absl::StrCat(op, ": argument ", i, " expected ", expected, ", got ", ValueKindName(v.kind())));
}

bool IsScalarKind(Value::Kind k) {
  return k == Value::Kind::kScalar || k == Value::Kind::kInt || k == Value::Kind::kFloat ||
         k == Value::Kind::kBool;
}

}  // namespace

absl::Status ExpectArgCount(absl::string_view op, absl::Span<const Value> args, size_t n) {
  if (args.size() < n) {
    return InternalErr(absl::StrCat(op, ": meta function expected ", n, " bound arguments, got ", args.size()));
  }
  return absl::OkStatus();
}

absl::Status CheckTensor(absl::string_view op, size_t i, const TensorMeta& t) {
  // Cheap (O(rank)) and it keeps every meta function's indexing in bounds,
  // even for a caller that built metadata by hand.
  absl::Status s = t.Validate("tensor");
  if (!s.ok()) return RuntimeErr(absl::StrCat(op, ": argument ", i, ": ", s.message()));
  return absl::OkStatus();
}

absl::StatusOr<const TensorMeta*> TensorArg(absl::string_view op, absl::Span<const Value> args, size_t i) {
  TD_RETURN_IF_ERROR(ExpectArgCount(op, args, i + 1));
  const Value& v = args[i];
  if (v.kind() != Value::Kind::kTensor || v.tensor_ptr() == nullptr) return WrongKind(op, i, "Tensor", v);
  TD_RETURN_IF_ERROR(CheckTensor(op, i, *v.tensor_ptr()));
  return v.tensor_ptr();
}

absl::StatusOr<int64_t> IntArg(absl::string_view op, absl::Span<const Value> args, size_t i) {
  TD_RETURN_IF_ERROR(ExpectArgCount(op, args, i + 1));
  const Value& v = args[i];
  if (v.kind() == Value::Kind::kInt) return v.to_int();
  if (v.kind() == Value::Kind::kScalar && v.scalar().is_int()) return v.scalar().to_int();
  return WrongKind(op, i, "int", v);
}

absl::StatusOr<std::optional<int64_t>> OptIntArg(absl::string_view op, absl::Span<const Value> args, size_t i) {
  TD_RETURN_IF_ERROR(ExpectArgCount(op, args, i + 1));
  if (args[i].is_none()) return std::optional<int64_t>();
  TD_ASSIGN_OR_RETURN(int64_t v, IntArg(op, args, i));
  return std::optional<int64_t>(v);
}

absl::StatusOr<bool> BoolArg(absl::string_view op, absl::Span<const Value> args, size_t i) {
  TD_RETURN_IF_ERROR(ExpectArgCount(op, args, i + 1));
  const Value& v = args[i];
  if (v.kind() == Value::Kind::kBool) return v.to_bool();
  if (v.kind() == Value::Kind::kScalar && v.scalar().is_bool()) return v.scalar().to_bool();
  return WrongKind(op, i, "bool", v);
}

absl::StatusOr<Scalar> ScalarArg(absl::string_view op, absl::Span<const Value> args, size_t i) {
  TD_RETURN_IF_ERROR(ExpectArgCount(op, args, i + 1));
  const Value& v = args[i];
  if (!IsScalarKind(v.kind())) return WrongKind(op, i, "Number", v);
  return v.scalar();
}

absl::StatusOr<std::optional<Scalar>> OptScalarArg(absl::string_view op, absl::Span<const Value> args, size_t i) {
  TD_RETURN_IF_ERROR(ExpectArgCount(op, args, i + 1));
  if (args[i].is_none()) return std::optional<Scalar>();
  TD_ASSIGN_OR_RETURN(Scalar s, ScalarArg(op, args, i));
  return std::optional<Scalar>(s);
}

absl::StatusOr<Shape> IntListArg(absl::string_view op, absl::Span<const Value> args, size_t i) {
  TD_RETURN_IF_ERROR(ExpectArgCount(op, args, i + 1));
  const Value& v = args[i];
  if (v.kind() == Value::Kind::kIntList) return v.int_list();
  if (v.kind() == Value::Kind::kInt) return Shape{v.to_int()};
  return WrongKind(op, i, "list of ints", v);
}

absl::StatusOr<std::optional<ScalarType>> OptDtypeArg(absl::string_view op, absl::Span<const Value> args, size_t i) {
  TD_RETURN_IF_ERROR(ExpectArgCount(op, args, i + 1));
  const Value& v = args[i];
  if (v.is_none()) return std::optional<ScalarType>();
  if (v.kind() != Value::Kind::kDtype) return WrongKind(op, i, "dtype", v);
  if (!IsValidScalarType(static_cast<int64_t>(v.dtype()))) {
    return RuntimeErr(absl::StrCat(op, ": invalid dtype ", static_cast<int64_t>(v.dtype())));
  }
  return std::optional<ScalarType>(v.dtype());
}

absl::StatusOr<std::optional<Device>> OptDeviceArg(absl::string_view op, absl::Span<const Value> args, size_t i) {
  TD_RETURN_IF_ERROR(ExpectArgCount(op, args, i + 1));
  const Value& v = args[i];
  if (v.is_none()) return std::optional<Device>();
  if (v.kind() != Value::Kind::kDevice) return WrongKind(op, i, "device", v);
  const Device d = v.device();
  if (!IsValidDeviceType(static_cast<int64_t>(d.type)) || d.index < 0) {
    return RuntimeErr(absl::StrCat(op, ": invalid device"));
  }
  return std::optional<Device>(d);
}

absl::StatusOr<std::vector<const TensorMeta*>> TensorListArg(absl::string_view op, absl::Span<const Value> args,
                                                             size_t i, bool allow_none) {
  TD_RETURN_IF_ERROR(ExpectArgCount(op, args, i + 1));
  const Value& v = args[i];
  if (v.kind() != Value::Kind::kTensorList) return WrongKind(op, i, "list of Tensors", v);
  const TensorList& list = v.tensor_list();
  for (size_t k = 0; k < list.size(); ++k) {
    if (list[k] == nullptr) {
      if (allow_none) continue;
      return TypeErr(absl::StrCat(op, ": expected a Tensor at position ", k, " of the list, got None"));
    }
    TD_RETURN_IF_ERROR(CheckTensor(op, i, *list[k]));
  }
  return std::vector<const TensorMeta*>(list.begin(), list.end());
}

TensorMeta MakeMeta(Shape sizes, Shape strides, int64_t storage_offset, ScalarType dtype, Device device) {
  TensorMeta m;
  m.sizes = std::move(sizes);
  m.strides = std::move(strides);
  m.storage_offset = storage_offset;
  m.dtype = dtype;
  m.device = device;
  return m;
}

MetaResult OneOutput(TensorMeta out, int alias_of) {
  MetaResult r;
  r.outputs.push_back(std::move(out));
  r.alias_of.push_back(alias_of);
  return r;
}

MetaResult TwoOutputs(TensorMeta a, TensorMeta b) {
  MetaResult r;
  r.outputs.push_back(std::move(a));
  r.outputs.push_back(std::move(b));
  r.alias_of = {-1, -1};
  return r;
}

absl::Status CheckRank(absl::string_view op, size_t rank) {
  if (rank > static_cast<size_t>(kMaxRank)) {
    return RuntimeErr(absl::StrCat(op, ": tensors with more than ", kMaxRank, " dimensions are not supported (got ",
                                   rank, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckNonNegativeSizes(absl::string_view op, absl::Span<const int64_t> sizes) {
  for (int64_t s : sizes) {
    if (s < 0) {
      return RuntimeErr(absl::StrCat(op, ": Trying to create tensor with negative dimension ", s, ": ",
                                     ShapeToString(sizes)));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckStrideCount(absl::string_view op, absl::Span<const int64_t> sizes,
                              absl::Span<const int64_t> strides) {
  if (sizes.size() != strides.size()) {
    return RuntimeErr(absl::StrCat(op, ": dimensionality of sizes (", sizes.size(),
                                   ") must match dimensionality of strides (", strides.size(), ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckNewSizes(absl::string_view op, absl::Span<const int64_t> sizes, ScalarType dtype) {
  TD_RETURN_IF_ERROR(CheckRank(op, sizes.size()));
  TD_RETURN_IF_ERROR(CheckNonNegativeSizes(op, sizes));
  // Contiguous strides multiply the sizes counting 0 as 1, so they must fit
  // even when the tensor is empty.
  int64_t bytes = ItemSize(dtype);
  for (int64_t s : sizes) {
    if (__builtin_mul_overflow(bytes, std::max<int64_t>(s, 1), &bytes)) {
      return RuntimeErr(absl::StrCat(op, ": Storage size calculation overflowed with sizes=", ShapeToString(sizes)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Device> CommonDevice(absl::string_view op, absl::Span<const TensorMeta* const> tensors,
                                    bool allow_cpu_scalars) {
  Device common = kCPU;
  for (const TensorMeta* t : tensors) {
    if (t != nullptr && !t->device.is_cpu()) {
      common = t->device;
      break;
    }
  }
  for (const TensorMeta* t : tensors) {
    if (t == nullptr || t->device == common) continue;
    if (allow_cpu_scalars && t->device.is_cpu() && t->dim() == 0) continue;
    return TwoDevicesError(op, common, t->device);
  }
  return common;
}

absl::Status NotImplementedForDtype(absl::string_view op, ScalarType t) {
  return RuntimeErr(absl::StrCat(op, ": \"", op, "\" not implemented for '", DtypeC10Name(t), "'"));
}

absl::Status CheckComputeDtype(absl::string_view op, ScalarType t) {
  if (IsFloat8(t)) return NotImplementedForDtype(op, t);
  return absl::OkStatus();
}

namespace {

struct DtypeRange {
  const char* c_name;  // as c10's checked_convert names it
  double lowest;
  double max;
  bool has_infinity;
  bool has_nan;
  bool is_unsigned;
};

DtypeRange RangeOf(ScalarType t) {
  switch (t) {
    case ScalarType::kUInt8: return {"uint8_t", 0, 255, false, false, true};
    case ScalarType::kInt8: return {"int8_t", -128, 127, false, false, false};
    case ScalarType::kInt16: return {"int16_t", -32768, 32767, false, false, false};
    case ScalarType::kInt32: return {"int", -2147483648.0, 2147483647.0, false, false, false};
    case ScalarType::kInt64: return {"int64_t", -9223372036854775808.0, 9223372036854775807.0, false, false, false};
    case ScalarType::kFloat16: return {"at::Half", -65504.0, 65504.0, true, true, false};
    case ScalarType::kBFloat16: return {"at::BFloat16", -3.38953138925153547590470800371487866880e+38,
                                        3.38953138925153547590470800371487866880e+38, true, true, false};
    case ScalarType::kFloat32: return {"float", -3.40282346638528859811704183484516925440e+38,
                                       3.40282346638528859811704183484516925440e+38, true, true, false};
    case ScalarType::kFloat64: return {"double", -1.7976931348623157e308, 1.7976931348623157e308, true, true, false};
    case ScalarType::kFloat8_e4m3fn: return {"at::Float8_e4m3fn", -448.0, 448.0, false, true, false};
    case ScalarType::kFloat8_e5m2: return {"at::Float8_e5m2", -57344.0, 57344.0, true, true, false};
    case ScalarType::kBool: break;
  }
  return {"bool", 0, 1, false, false, true};
}

}  // namespace

absl::Status CheckFillValue(absl::string_view op, const Scalar& value, ScalarType dtype) {
  if (dtype == ScalarType::kBool || value.is_bool()) return absl::OkStatus();
  const DtypeRange r = RangeOf(dtype);
  bool overflow = false;
  if (value.is_int()) {
    // c10::overflows<To, int64_t>: negative values wrap into unsigned types.
    const int64_t i = value.to_int();
    if (r.is_unsigned) {
      overflow = static_cast<double>(i) > r.max || (i < 0 && -static_cast<uint64_t>(i) > static_cast<uint64_t>(r.max));
    } else if (dtype == ScalarType::kInt64) {
      overflow = false;
    } else {
      overflow = static_cast<double>(i) < r.lowest || static_cast<double>(i) > r.max;
    }
  } else {
    // c10::overflows<To, double>.
    const double d = value.to_double();
    if (r.has_infinity && std::isinf(d)) {
      overflow = false;
    } else if (!r.has_nan && std::isnan(d)) {
      overflow = true;
    } else {
      overflow = d < r.lowest || d > r.max;
    }
  }
  if (overflow) {
    return RuntimeErr(absl::StrCat(op, ": value cannot be converted to type ", r.c_name, " without overflow"));
  }
  return absl::OkStatus();
}

bool IsChannelsLastContiguous(const TensorMeta& t) {
  if (t.dim() != 4) return false;
  int64_t expected = 1;
  for (int d : {1, 3, 2, 0}) {
    const int64_t size = t.sizes[d];
    if (size != 1) {
      if (t.strides[d] != expected) return false;
      expected *= size;
    }
  }
  return true;
}

bool IsNonOverlappingAndDense(const TensorMeta& t) {
  return t.is_contiguous() || IsChannelsLastContiguous(t) || t.is_non_overlapping_and_dense();
}

namespace {

// c10's is_channels_last_strides_2d_s4 / is_channels_last_strides_3d_s5.
bool StridesLikeChannelsLast(const TensorMeta& t, std::initializer_list<int> order) {
  if (t.strides[1] == 0) return false;
  int64_t min = 0;
  for (int d : order) {
    if (t.sizes[d] == 0) return false;
    if (t.strides[d] < min) return false;
    if (d == 0 && min == t.strides[1]) return false;
    min = t.strides[d];
    if (t.sizes[d] > 1) min *= t.sizes[d];
  }
  return true;
}

}  // namespace

MemoryFormat SuggestMemoryFormat(const TensorMeta& t) {
  if (t.dim() == 4 && StridesLikeChannelsLast(t, {1, 3, 2, 0})) return MemoryFormat::kChannelsLast;
  if (t.dim() == 5 && StridesLikeChannelsLast(t, {1, 4, 3, 2, 0})) return MemoryFormat::kChannelsLast3d;
  return MemoryFormat::kContiguous;
}

Shape StridesForFormat(absl::Span<const int64_t> sizes, MemoryFormat format) {
  // c10's get_channels_last_strides_{2d,3d}: sizes multiply as they are (a
  // 0-sized dim gives 0 strides), unlike contiguous strides.
  if (format == MemoryFormat::kChannelsLast && sizes.size() == 4) {
    Shape s(4);
    s[1] = 1;
    s[3] = sizes[1];
    s[2] = s[3] * sizes[3];
    s[0] = s[2] * sizes[2];
    return s;
  }
  if (format == MemoryFormat::kChannelsLast3d && sizes.size() == 5) {
    Shape s(5);
    s[1] = 1;
    s[4] = sizes[1];
    s[3] = s[4] * sizes[4];
    s[2] = s[3] * sizes[3];
    s[0] = s[2] * sizes[2];
    return s;
  }
  return ContiguousStrides(sizes);
}

absl::StatusOr<Shape> InferSize(absl::string_view op, absl::Span<const int64_t> shape, int64_t numel) {
  TD_RETURN_IF_ERROR(CheckRank(op, shape.size()));
  int64_t newsize = 1;
  bool overflow = false;
  std::optional<size_t> infer_dim;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1) {
      if (infer_dim) return RuntimeErr(absl::StrCat(op, ": only one dimension can be inferred"));
      infer_dim = d;
    } else if (shape[d] >= 0) {
      if (!overflow && __builtin_mul_overflow(newsize, shape[d], &newsize)) overflow = true;
    } else {
      return RuntimeErr(absl::StrCat(op, ": invalid shape dimension ", shape[d]));
    }
  }
  Shape res(shape.begin(), shape.end());
  if (!overflow && (numel == newsize || (infer_dim && newsize > 0 && numel % newsize == 0))) {
    if (infer_dim) {
      if (newsize == 0) {
        return RuntimeErr(absl::StrCat(op, ": cannot reshape tensor of 0 elements into shape ", ShapeToString(shape),
                                       " because the unspecified dimension size -1 can be any value and is ambiguous"));
      }
      res[*infer_dim] = numel / newsize;
    }
    return res;
  }
  return RuntimeErr(absl::StrCat(op, ": shape '", ShapeToString(shape), "' is invalid for input of size ", numel));
}

std::optional<Shape> ComputeViewStrides(absl::Span<const int64_t> old_sizes, absl::Span<const int64_t> old_strides,
                                        absl::Span<const int64_t> new_sizes) {
  const int64_t new_dim = static_cast<int64_t>(new_sizes.size());
  if (old_sizes.empty()) return Shape(new_sizes.size(), 1);

  int64_t numel = 1;
  for (int64_t s : old_sizes) numel *= s;  // validated metadata: no overflow
  if (numel == 0 && Shape(old_sizes.begin(), old_sizes.end()) == Shape(new_sizes.begin(), new_sizes.end())) {
    return Shape(old_strides.begin(), old_strides.end());
  }
  Shape new_strides(new_sizes.size());
  if (numel == 0) {
    for (int64_t d = new_dim - 1; d >= 0; --d) {
      if (d == new_dim - 1) {
        new_strides[d] = 1;
      } else if (__builtin_mul_overflow(std::max<int64_t>(new_sizes[d + 1], 1), new_strides[d + 1],
                                        &new_strides[d])) {
        return std::nullopt;
      }
    }
    return new_strides;
  }

  int64_t view_d = new_dim - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(old_sizes.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_sizes[tensor_d];
    bool chunk_end = tensor_d == 0;
    if (!chunk_end && old_sizes[tensor_d - 1] != 1) {
      int64_t contiguous_stride = 0;
      chunk_end = __builtin_mul_overflow(tensor_numel, chunk_base_stride, &contiguous_stride) ||
                  old_strides[tensor_d - 1] != contiguous_stride;
    }
    if (chunk_end) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        if (__builtin_mul_overflow(view_numel, chunk_base_stride, &new_strides[view_d])) return std::nullopt;
        if (__builtin_mul_overflow(view_numel, new_sizes[view_d], &view_numel)) return std::nullopt;
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

TensorMeta PreserveFormatCopy(const TensorMeta& t, ScalarType dtype, Device device) {
  return MakeMeta(t.sizes, PreserveFormatStrides(t), 0, dtype, device);
}

// A dtype as PyTorch prints a caffe2::TypeMeta in messages ("float",
// "long int", "c10::Half").
absl::string_view TypeMetaName(ScalarType t) {
  switch (t) {
    case ScalarType::kBool: return "bool";
    case ScalarType::kUInt8: return "unsigned char";
    case ScalarType::kInt8: return "signed char";
    case ScalarType::kInt16: return "short int";
    case ScalarType::kInt32: return "int";
    case ScalarType::kInt64: return "long int";
    case ScalarType::kFloat16: return "c10::Half";
    case ScalarType::kBFloat16: return "c10::BFloat16";
    case ScalarType::kFloat32: return "float";
    case ScalarType::kFloat64: return "double";
    case ScalarType::kFloat8_e4m3fn: return "c10::Float8_e4m3fn";
    case ScalarType::kFloat8_e5m2: return "c10::Float8_e5m2";
  }
  return "unknown";
}

}  // namespace tensord::meta
