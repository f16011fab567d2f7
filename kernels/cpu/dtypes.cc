// float8 conversions and dtype names for kernels/cpu/dtypes.h.
#include "dtypes.h"

#include <array>
#include <cmath>

namespace tensord::cpu {
namespace {

// A float8 format: `exp_bits` exponent bits with `bias`, `man_bits` mantissa
// bits. `has_inf` is the IEEE-like e5m2; e4m3fn ("finite") has no inf and a
// single NaN pattern per sign (all ones).
struct F8Format {
  int exp_bits;
  int man_bits;
  int bias;
  bool has_inf;
};

constexpr F8Format kE4M3FN{4, 3, 7, false};
constexpr F8Format kE5M2{5, 2, 15, true};

float DecodeF8(uint8_t b, const F8Format& f) {
  const bool neg = (b & 0x80) != 0;
  const int exp_field = (b >> f.man_bits) & ((1 << f.exp_bits) - 1);
  const int man_field = b & ((1 << f.man_bits) - 1);
  const int exp_max = (1 << f.exp_bits) - 1;
  float v;
  if (f.has_inf && exp_field == exp_max) {
    v = man_field == 0 ? std::numeric_limits<float>::infinity()
                       : std::numeric_limits<float>::quiet_NaN();
  } else if (!f.has_inf && exp_field == exp_max && man_field == (1 << f.man_bits) - 1) {
    v = std::numeric_limits<float>::quiet_NaN();
  } else if (exp_field == 0) {
    v = std::ldexp(static_cast<float>(man_field), 1 - f.bias - f.man_bits);  // subnormal
  } else {
    v = std::ldexp(static_cast<float>(man_field + (1 << f.man_bits)),
                   exp_field - f.bias - f.man_bits);
  }
  return neg ? -v : v;
}

// Largest finite value of the format.
double MaxFinite(const F8Format& f) {
  const int exp_max = (1 << f.exp_bits) - 1;
  if (f.has_inf) {
    return std::ldexp((2 << f.man_bits) - 1, exp_max - 1 - f.bias - f.man_bits);
  }
  // e4m3fn: the top exponent is usable except for the all-ones mantissa.
  return std::ldexp((2 << f.man_bits) - 2, exp_max - f.bias - f.man_bits);
}

uint8_t EncodeF8(float x, const F8Format& f) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const uint8_t nan_bits = 0x7F;  // both formats (c10 uses S.1111111 for e5m2 too)
  const uint8_t inf_bits = static_cast<uint8_t>(((1 << f.exp_bits) - 1) << f.man_bits);
  if (std::isnan(x)) return sign | nan_bits;
  const uint8_t overflow = f.has_inf ? inf_bits : nan_bits;
  double a = std::fabs(static_cast<double>(x));
  if (std::isinf(a)) return sign | overflow;
  if (a == 0.0) return sign;
  // Quantum (spacing of representable values) at a's binade, never finer
  // than the subnormal spacing.
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int unbiased = e - 1;
  const int min_normal_exp = 1 - f.bias;
  if (unbiased < min_normal_exp) unbiased = min_normal_exp;
  const double quantum = std::ldexp(1.0, unbiased - f.man_bits);
  // a / quantum is exact (a power-of-two scaling); nearbyint rounds half to
  // even under the default rounding mode.
  const double r = std::nearbyint(a / quantum) * quantum;
  if (r > MaxFinite(f)) return sign | overflow;
  if (r == 0.0) return sign;
  int re;
  const double rm = std::frexp(r, &re);  // r = rm * 2^re
  int exp_field = re - 1 + f.bias;
  int man_field;
  if (exp_field <= 0) {  // subnormal
    exp_field = 0;
    man_field = static_cast<int>(std::ldexp(r, f.bias - 1 + f.man_bits));
  } else {
    man_field = static_cast<int>(std::ldexp(rm * 2.0 - 1.0, f.man_bits));
  }
  return sign | static_cast<uint8_t>((exp_field << f.man_bits) | man_field);
}

template <const F8Format* F>
const std::array<float, 256>& DecodeTable() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[i] = DecodeF8(static_cast<uint8_t>(i), *F);
    return t;
  }();
  return table;
}

}  // namespace

float Float8E4M3FNBitsToFloat(uint8_t b) { return DecodeTable<&kE4M3FN>()[b]; }
uint8_t FloatToFloat8E4M3FNBits(float f) { return EncodeF8(f, kE4M3FN); }
float Float8E5M2BitsToFloat(uint8_t b) { return DecodeTable<&kE5M2>()[b]; }
uint8_t FloatToFloat8E5M2Bits(float f) { return EncodeF8(f, kE5M2); }

const char* TorchTypeName(ScalarType t) {
  switch (t) {
    case ScalarType::kBool: return "Bool";
    case ScalarType::kUInt8: return "Byte";
    case ScalarType::kInt8: return "Char";
    case ScalarType::kInt16: return "Short";
    case ScalarType::kInt32: return "Int";
    case ScalarType::kInt64: return "Long";
    case ScalarType::kFloat16: return "Half";
    case ScalarType::kBFloat16: return "BFloat16";
    case ScalarType::kFloat32: return "Float";
    case ScalarType::kFloat64: return "Double";
    case ScalarType::kFloat8_e4m3fn: return "Float8_e4m3fn";
    case ScalarType::kFloat8_e5m2: return "Float8_e5m2";
  }
  return "Unknown";
}

absl::Status DtypeNotImplemented(absl::string_view op, ScalarType t) {
  return NotImplementedErr(absl::StrCat("\"", op, "\" not implemented for '", TorchTypeName(t), "'"));
}

}  // namespace tensord::cpu
