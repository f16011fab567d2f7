// dtypes: sizes, names and PyTorch's promotion lattice.
#include "tensord/meta/dtype.h"

#include <array>

#include "absl/strings/str_cat.h"
#include "tensord/meta/errors.h"

namespace tensord {
namespace {

struct DtypeInfo {
  const char* name;
  const char* torch_c10_name;  // as PyTorch prints it in messages ("Float")
  int64_t itemsize;
};

constexpr std::array<DtypeInfo, kNumScalarTypes> kInfo = {{
    {"bool", "Bool", 1},
    {"uint8", "Byte", 1},
    {"int8", "Char", 1},
    {"int16", "Short", 2},
    {"int32", "Int", 4},
    {"int64", "Long", 8},
    {"float16", "Half", 2},
    {"bfloat16", "BFloat16", 2},
    {"float32", "Float", 4},
    {"float64", "Double", 8},
    {"float8_e4m3fn", "Float8_e4m3fn", 1},
    {"float8_e5m2", "Float8_e5m2", 1},
}};

const DtypeInfo& Info(ScalarType t) { return kInfo[static_cast<int>(t)]; }

}  // namespace

bool IsValidScalarType(int64_t v) { return v >= 0 && v < kNumScalarTypes; }
int64_t ItemSize(ScalarType t) { return Info(t).itemsize; }
absl::string_view DtypeName(ScalarType t) { return Info(t).name; }
absl::string_view DtypeC10Name(ScalarType t) { return Info(t).torch_c10_name; }

absl::StatusOr<ScalarType> ParseDtype(absl::string_view name) {
  if (name.substr(0, 6) == "torch.") name.remove_prefix(6);
  if (name.substr(0, 8) == "tensord.") name.remove_prefix(8);
  for (int i = 0; i < kNumScalarTypes; ++i) {
    if (name == kInfo[i].name) return static_cast<ScalarType>(i);
  }
  struct Alias { const char* alias; ScalarType t; };
  static constexpr Alias kAliases[] = {
      {"float", ScalarType::kFloat32}, {"double", ScalarType::kFloat64},
      {"half", ScalarType::kFloat16},  {"long", ScalarType::kInt64},
      {"int", ScalarType::kInt32},     {"short", ScalarType::kInt16},
  };
  for (const auto& a : kAliases) {
    if (name == a.alias) return a.t;
  }
  return RuntimeErr(absl::StrCat("unknown dtype '", name, "'"));
}

bool IsFloat8(ScalarType t) {
  return t == ScalarType::kFloat8_e4m3fn || t == ScalarType::kFloat8_e5m2;
}

bool IsFloating(ScalarType t) {
  switch (t) {
    case ScalarType::kFloat16:
    case ScalarType::kBFloat16:
    case ScalarType::kFloat32:
    case ScalarType::kFloat64:
    case ScalarType::kFloat8_e4m3fn:
    case ScalarType::kFloat8_e5m2:
      return true;
    default:
      return false;
  }
}

bool IsIntegral(ScalarType t, bool include_bool) {
  switch (t) {
    case ScalarType::kBool:
      return include_bool;
    case ScalarType::kUInt8:
    case ScalarType::kInt8:
    case ScalarType::kInt16:
    case ScalarType::kInt32:
    case ScalarType::kInt64:
      return true;
    default:
      return false;
  }
}

bool IsSigned(ScalarType t) { return t != ScalarType::kBool && t != ScalarType::kUInt8; }

int Category(ScalarType t) {
  if (t == ScalarType::kBool) return 0;
  if (IsIntegral(t, false)) return 1;
  return 2;
}

absl::StatusOr<ScalarType> PromoteTypes(ScalarType a, ScalarType b) {
  using S = ScalarType;
  if (a == b) return a;
  if (IsFloat8(a) || IsFloat8(b)) {
    return RuntimeErr(absl::StrCat("Promotion for Float8 Types is not supported, attempted to promote ",
                                   DtypeC10Name(a), " and ", DtypeC10Name(b)));
  }
  if (a == S::kBool) return b;
  if (b == S::kBool) return a;
  const int ca = Category(a), cb = Category(b);
  if (ca != cb) return ca > cb ? a : b;  // integral with floating -> the floating one
  if (ca == 1) {
    // uint8 with a signed int: int16 at least.
    if (a == S::kUInt8 || b == S::kUInt8) {
      const S other = a == S::kUInt8 ? b : a;
      return other == S::kInt8 ? S::kInt16 : other;
    }
    return ItemSize(a) >= ItemSize(b) ? a : b;
  }
  // Both floating (not float8).
  const bool half_pair = (a == S::kFloat16 && b == S::kBFloat16) || (a == S::kBFloat16 && b == S::kFloat16);
  if (half_pair) return S::kFloat32;
  return ItemSize(a) >= ItemSize(b) ? a : b;
}

}  // namespace tensord
