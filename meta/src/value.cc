// Scalar and Value: conversions and printing.
#include "tensord/meta/value.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace tensord {

ScalarType Scalar::dtype() const {
  switch (kind_) {
    case Kind::kBool: return ScalarType::kBool;
    case Kind::kInt: return ScalarType::kInt64;
    case Kind::kFloat: return kDefaultFloat;
  }
  return ScalarType::kInt64;
}

std::string Scalar::ToString() const {
  switch (kind_) {
    case Kind::kBool: return i_ ? "True" : "False";
    case Kind::kInt: return absl::StrCat(i_);
    case Kind::kFloat: {
      std::string s = absl::StrFormat("%.17g", d_);
      // Python prints floats with a decimal point.
      if (s.find_first_of(".eEna") == std::string::npos) s += ".0";
      return s;
    }
  }
  return "?";
}

bool Scalar::operator==(const Scalar& o) const {
  if (kind_ != o.kind_) return false;
  return kind_ == Kind::kFloat ? d_ == o.d_ : i_ == o.i_;
}

Scalar Value::scalar() const {
  switch (kind()) {
    case Kind::kScalar: return std::get<Scalar>(v_);
    case Kind::kInt: return Scalar::Int(std::get<int64_t>(v_));
    case Kind::kFloat: return Scalar::Float(std::get<double>(v_));
    case Kind::kBool: return Scalar::Bool(std::get<bool>(v_));
    default: return Scalar();
  }
}

double Value::to_double() const {
  if (kind() == Kind::kInt) return static_cast<double>(std::get<int64_t>(v_));
  if (kind() == Kind::kScalar) return std::get<Scalar>(v_).to_double();
  return std::get<double>(v_);
}

absl::string_view ValueKindName(Value::Kind k) {
  switch (k) {
    case Value::Kind::kNone: return "None";
    case Value::Kind::kTensor: return "Tensor";
    case Value::Kind::kTensorList: return "list of Tensors";
    case Value::Kind::kScalar: return "Scalar";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kIntList: return "list of ints";
    case Value::Kind::kFloatList: return "list of floats";
    case Value::Kind::kString: return "str";
    case Value::Kind::kDtype: return "dtype";
    case Value::Kind::kDevice: return "device";
  }
  return "?";
}

std::string Value::ToString() const {
  switch (kind()) {
    case Kind::kNone: return "None";
    case Kind::kTensor: {
      const TensorMeta* t = tensor_ptr();
      return t ? absl::StrCat("Tensor", ShapeToString(t->sizes)) : "None";
    }
    case Kind::kTensorList: {
      std::vector<std::string> parts;
      for (const TensorMeta* t : tensor_list()) parts.push_back(t ? absl::StrCat("Tensor", ShapeToString(t->sizes)) : "None");
      return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
    }
    case Kind::kScalar: return std::get<Scalar>(v_).ToString();
    case Kind::kInt: return absl::StrCat(to_int());
    case Kind::kFloat: return Scalar::Float(std::get<double>(v_)).ToString();
    case Kind::kBool: return to_bool() ? "True" : "False";
    case Kind::kIntList: return ShapeToString(int_list());
    case Kind::kFloatList: return absl::StrCat("[", absl::StrJoin(float_list(), ", "), "]");
    case Kind::kString: return absl::StrCat("'", str(), "'");
    case Kind::kDtype: return std::string(DtypeName(dtype()));
    case Kind::kDevice: return device().ToString();
  }
  return "?";
}

}  // namespace tensord
