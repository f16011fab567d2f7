// tensord/meta/dtype.h — the dtypes tensord knows, their sizes and names, and
// PyTorch's type-promotion lattice over them.
//
//   ScalarType t = ScalarType::kFloat32;
//   ItemSize(t) == 4; DtypeName(t) == "float32";
//   PromoteTypes(kBFloat16, kFloat16) -> kFloat32 (as in PyTorch).
#ifndef TENSORD_META_DTYPE_H_
#define TENSORD_META_DTYPE_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace tensord {

// The numeric values are part of the wire contract (proto carries them as
// int32): append only, never renumber.
enum class ScalarType : int32_t {
  kBool = 0,
  kUInt8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat16 = 6,
  kBFloat16 = 7,
  kFloat32 = 8,
  kFloat64 = 9,
  kFloat8_e4m3fn = 10,
  kFloat8_e5m2 = 11,
};
inline constexpr int kNumScalarTypes = 12;

// True when `v` names a ScalarType (for validating wire input).
bool IsValidScalarType(int64_t v);

// Bytes per element.
int64_t ItemSize(ScalarType t);

// PyTorch's name without the "torch." prefix: "float32", "bfloat16", ...
absl::string_view DtypeName(ScalarType t);

// The name PyTorch uses in its messages: "Float", "Long", "BFloat16", ...
absl::string_view DtypeC10Name(ScalarType t);

// Parses a PyTorch dtype name ("float32", "float", "int64", "long", "bool",
// "half", "bfloat16", "float8_e4m3fn", ...). InvalidArgument on anything else.
absl::StatusOr<ScalarType> ParseDtype(absl::string_view name);

bool IsFloating(ScalarType t);   // float16/bfloat16/float32/float64/float8_*
bool IsIntegral(ScalarType t, bool include_bool);
bool IsFloat8(ScalarType t);
bool IsSigned(ScalarType t);     // false for bool and uint8

// Category used by promotion: 0 bool, 1 integral, 2 floating.
int Category(ScalarType t);

// PyTorch's promote_types: the smallest dtype both convert to safely.
// bfloat16 with float16 -> float32; uint8 with int8 -> int16. Any float8 with a
// different dtype is an error with PyTorch's message:
// "Promotion for Float8 Types is not supported, attempted to promote Float8_e4m3fn and Float".
absl::StatusOr<ScalarType> PromoteTypes(ScalarType a, ScalarType b);

// The dtype PyTorch's default_dtype gives float factories / Python floats.
inline constexpr ScalarType kDefaultFloat = ScalarType::kFloat32;

}  // namespace tensord

#endif  // TENSORD_META_DTYPE_H_
