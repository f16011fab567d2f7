// tensord/meta/value.h — Scalar and Value: the argument values of an op call.
//
// A Value is what one schema argument holds once bound: None, a tensor
// (by its metadata), a list of tensors, a Scalar, an int, a float, a bool, an
// int list, a float list, a string, a dtype or a device. Tensors are held by
// pointer to TensorMeta owned by the caller (client handle or daemon table);
// every other kind is owned by value.
#ifndef TENSORD_META_VALUE_H_
#define TENSORD_META_VALUE_H_

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "tensord/meta/device.h"
#include "tensord/meta/dtype.h"
#include "tensord/meta/tensor_meta.h"

namespace tensord {

// A Python number: bool, int or float. Type promotion treats it as a
// "wrapped number" (it only raises the category, never the width).
class Scalar {
 public:
  enum class Kind { kBool, kInt, kFloat };
  Scalar() : kind_(Kind::kInt), i_(0) {}
  static Scalar Bool(bool v) { Scalar s; s.kind_ = Kind::kBool; s.i_ = v; return s; }
  static Scalar Int(int64_t v) { Scalar s; s.kind_ = Kind::kInt; s.i_ = v; return s; }
  static Scalar Float(double v) { Scalar s; s.kind_ = Kind::kFloat; s.d_ = v; return s; }

  Kind kind() const { return kind_; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool to_bool() const { return kind_ == Kind::kFloat ? d_ != 0.0 : i_ != 0; }
  int64_t to_int() const { return kind_ == Kind::kFloat ? static_cast<int64_t>(d_) : i_; }
  double to_double() const { return kind_ == Kind::kFloat ? d_ : static_cast<double>(i_); }
  // The dtype PyTorch gives a tensor made from this scalar alone: bool, int64
  // or the default float dtype (float32).
  ScalarType dtype() const;
  std::string ToString() const;  // "True", "3", "2.5"
  bool operator==(const Scalar& o) const;

 private:
  Kind kind_;
  union {
    int64_t i_;
    double d_;
  };
};

struct NoneValue {
  bool operator==(const NoneValue&) const { return true; }
};

// A list of optional tensors (Tensor?[]); nullptr means None.
using TensorList = std::vector<const TensorMeta*>;

class Value {
 public:
  enum class Kind {
    kNone, kTensor, kTensorList, kScalar, kInt, kFloat, kBool,
    kIntList, kFloatList, kString, kDtype, kDevice,
  };
  Value() : v_(NoneValue{}) {}
  Value(const TensorMeta* t) : v_(t) {}                    // NOLINT
  Value(TensorList ts) : v_(std::move(ts)) {}              // NOLINT
  Value(Scalar s) : v_(s) {}                               // NOLINT
  Value(int64_t i) : v_(i) {}                              // NOLINT
  Value(int i) : v_(static_cast<int64_t>(i)) {}            // NOLINT
  Value(double d) : v_(d) {}                               // NOLINT
  Value(bool b) : v_(b) {}                                 // NOLINT
  // Int lists are copied in, not moved: moving an inline Shape copies its
  // whole buffer, which GCC 12 reports as a read of uninitialized memory.
  Value(const Shape& l) : v_(std::in_place_type<Shape>, l.begin(), l.end()) {}              // NOLINT
  Value(const std::vector<int64_t>& l) : v_(std::in_place_type<Shape>, l.begin(), l.end()) {}  // NOLINT
  Value(std::vector<double> l) : v_(std::move(l)) {}       // NOLINT
  Value(std::string s) : v_(std::move(s)) {}               // NOLINT
  Value(const char* s) : v_(std::string(s)) {}             // NOLINT
  Value(ScalarType t) : v_(t) {}                           // NOLINT
  Value(Device d) : v_(d) {}                               // NOLINT

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_tensor() const { return kind() == Kind::kTensor; }

  // Accessors; calling the wrong one is an internal bug (std::bad_variant_access)
  // — request paths check kind() first (ValidateArgs does).
  const TensorMeta& tensor() const { return *std::get<const TensorMeta*>(v_); }
  const TensorMeta* tensor_ptr() const { return std::get<const TensorMeta*>(v_); }
  const TensorList& tensor_list() const { return std::get<TensorList>(v_); }
  // Scalar view of kScalar, kInt, kFloat or kBool values.
  Scalar scalar() const;
  int64_t to_int() const { return std::get<int64_t>(v_); }
  double to_double() const;  // kFloat or kInt
  bool to_bool() const { return std::get<bool>(v_); }
  const Shape& int_list() const { return std::get<Shape>(v_); }
  const std::vector<double>& float_list() const { return std::get<std::vector<double>>(v_); }
  const std::string& str() const { return std::get<std::string>(v_); }
  ScalarType dtype() const { return std::get<ScalarType>(v_); }
  Device device() const { return std::get<Device>(v_); }

  std::string ToString() const;  // for error messages and repr

 private:
  std::variant<NoneValue, const TensorMeta*, TensorList, Scalar, int64_t, double, bool, Shape,
               std::vector<double>, std::string, ScalarType, Device>
      v_;
};

absl::string_view ValueKindName(Value::Kind k);

}  // namespace tensord

#endif  // TENSORD_META_VALUE_H_
