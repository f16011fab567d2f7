// The CUDA kernels' element conversions (kernels/cuda/cuda_dtypes.h), run
// on the host, against the CPU kernels' (kernels/cpu/dtypes.h): the same
// bits for float16, bfloat16 and float8 (a NaN's payload aside), and the
// same value for every cast between the twelve dtypes, special values
// included (NaN, infinities, out-of-range values cast to integers).
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "../../../kernels/cpu/dtypes.h"
#include "../../../kernels/cuda/cuda_dtypes.h"
#include "../kernel_test_util.h"
#include "gtest/gtest.h"

namespace tensord::testing {
namespace {

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Floats to narrow: a stride through every bit pattern, every float16
// value and the midpoints next to it, and float8's edges.
std::vector<float> NarrowingInputs() {
  std::vector<float> v;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 7919) v.push_back(FromBits(static_cast<uint32_t>(u)));
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = cpu::HalfBitsToFloat(static_cast<uint16_t>(h));
    v.push_back(f);
    v.push_back(std::nextafter(f, std::numeric_limits<float>::infinity()));
    v.push_back(std::nextafter(f, -std::numeric_limits<float>::infinity()));
    const float next = cpu::HalfBitsToFloat(static_cast<uint16_t>(h + 1));
    if (std::isfinite(f) && std::isfinite(next)) v.push_back((f + next) / 2);  // ties
  }
  for (float f : {448.0f, 464.0f, 465.0f, 480.0f, 57344.0f, 61440.0f, 61441.0f, 65536.0f, 0x1p-10f, 0x1p-9f,
                  0x1p-17f, 0x1p-16f, 0x1.8p-17f, 0x1.8p-10f}) {
    v.push_back(f);
    v.push_back(-f);
  }
  return v;
}

template <typename C, typename N>
void ExpectSameNarrowing(const char* what, C cuda_bits, N cpu_bits, float in, float cuda_back, float cpu_back) {
  if (std::isnan(cpu_back)) {
    EXPECT_TRUE(std::isnan(cuda_back)) << what << " of " << in;
  } else {
    EXPECT_EQ(static_cast<uint32_t>(cuda_bits), static_cast<uint32_t>(cpu_bits)) << what << " of " << in;
  }
}

TEST(CudaDtypesTest, NarrowingMatchesTheCpuBitForBit) {
  int failures = 0;
  for (float f : NarrowingInputs()) {
    const __half h = cuda::Encode<__half>(f);
    const uint16_t hb = static_cast<__half_raw>(h).x;
    const __nv_bfloat16 b = cuda::Encode<__nv_bfloat16>(f);
    const uint16_t bb = static_cast<__nv_bfloat16_raw>(b).x;
    const uint8_t e4 = cuda::Encode<cuda::Float8E4M3FN>(f).x;
    const uint8_t e5 = cuda::Encode<cuda::Float8E5M2>(f).x;
    ExpectSameNarrowing("float16", hb, cpu::FloatToHalfBits(f), f, cuda::Decode<__half>(h),
                        cpu::HalfBitsToFloat(cpu::FloatToHalfBits(f)));
    ExpectSameNarrowing("bfloat16", bb, cpu::FloatToBFloat16Bits(f), f, cuda::Decode<__nv_bfloat16>(b),
                        cpu::BFloat16BitsToFloat(cpu::FloatToBFloat16Bits(f)));
    ExpectSameNarrowing("float8_e4m3fn", e4, cpu::FloatToFloat8E4M3FNBits(f), f,
                        cuda::Decode<cuda::Float8E4M3FN>(cuda::Float8E4M3FN{e4}),
                        cpu::Float8E4M3FNBitsToFloat(cpu::FloatToFloat8E4M3FNBits(f)));
    ExpectSameNarrowing("float8_e5m2", e5, cpu::FloatToFloat8E5M2Bits(f), f,
                        cuda::Decode<cuda::Float8E5M2>(cuda::Float8E5M2{e5}),
                        cpu::Float8E5M2BitsToFloat(cpu::FloatToFloat8E5M2Bits(f)));
    if (::testing::Test::HasFailure() && ++failures > 20) break;
  }
}

TEST(CudaDtypesTest, WideningMatchesTheCpu) {
  for (uint32_t u = 0; u < 65536; ++u) {
    const uint16_t bits = static_cast<uint16_t>(u);
    __half_raw hr_bits;
    hr_bits.x = bits;
    const __half h = hr_bits;
    __nv_bfloat16_raw br_bits;
    br_bits.x = bits;
    const __nv_bfloat16 b = br_bits;
    const float hc = cuda::Decode<__half>(h), hr = cpu::HalfBitsToFloat(bits);
    const float bc = cuda::Decode<__nv_bfloat16>(b), br = cpu::BFloat16BitsToFloat(bits);
    ASSERT_TRUE((std::isnan(hc) && std::isnan(hr)) || std::memcmp(&hc, &hr, 4) == 0) << "float16 bits " << u;
    ASSERT_TRUE((std::isnan(bc) && std::isnan(br)) || std::memcmp(&bc, &br, 4) == 0) << "bfloat16 bits " << u;
    if (u < 256) {
      const uint8_t b8 = static_cast<uint8_t>(u);
      const float e4c = cuda::Decode<cuda::Float8E4M3FN>(cuda::Float8E4M3FN{b8});
      const float e4r = cpu::Float8E4M3FNBitsToFloat(b8);
      const float e5c = cuda::Decode<cuda::Float8E5M2>(cuda::Float8E5M2{b8});
      const float e5r = cpu::Float8E5M2BitsToFloat(b8);
      ASSERT_TRUE((std::isnan(e4c) && std::isnan(e4r)) || std::memcmp(&e4c, &e4r, 4) == 0) << "e4m3fn bits " << u;
      ASSERT_TRUE((std::isnan(e5c) && std::isnan(e5r)) || std::memcmp(&e5c, &e5r, 4) == 0) << "e5m2 bits " << u;
    }
  }
}

constexpr ScalarType kAll[] = {
    ScalarType::kBool,    ScalarType::kUInt8,   ScalarType::kInt8,          ScalarType::kInt16,
    ScalarType::kInt32,   ScalarType::kInt64,   ScalarType::kFloat16,       ScalarType::kBFloat16,
    ScalarType::kFloat32, ScalarType::kFloat64, ScalarType::kFloat8_e4m3fn, ScalarType::kFloat8_e5m2,
};

// What the CPU kernels read after casting the element at `p` (of `from`) to
// `to` (AsDtype: ConvertValue, then Store and Load as `to`), as a double.
double CpuCast(const char* p, ScalarType from, ScalarType to) {
  alignas(8) char buf[8] = {};
  double out = 0;
  (void)cpu::Dispatch<cpu::kSetAll>(to, "cast", [&](auto ttag) -> absl::Status {
    using To = typename decltype(ttag)::type;
    return cpu::Dispatch<cpu::kSetAll>(from, "cast", [&](auto ftag) -> absl::Status {
      using From = typename decltype(ftag)::type;
      cpu::Store<To>(buf, cpu::ConvertValue<To, From>(cpu::Load<From>(p)));
      out = static_cast<double>(cpu::Load<To>(buf));
      return absl::OkStatus();
    });
  });
  return out;
}

double CudaCast(const char* p, ScalarType from, ScalarType to) {
  return cuda::DispatchDtype<cuda::kSetAll>(to, 0.0, [&](auto tag) -> double {
    using T = typename decltype(tag)::type;
    return static_cast<double>(cuda::LoadCast<T>(p, from));
  });
}

TEST(CudaDtypesTest, EveryCastBetweenDtypesMatchesTheCpu) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> values = {0, -0.0, 1, -1, 0.5, -0.5, 1.5, 2.5, -2.5, 127, 128, 255, 256, -129, 300, -300,
                                32767, 32768, -32769, 65504, 65520, 1e5, 2147483647.0, 2147483648.0, -2147483649.0,
                                3e9, -3e9, 1e10, 9.2e18, 9.3e18, -9.3e18, 1e30, -1e30, 3.4e38, 1e300, inf, -inf,
                                std::nan(""), 1e-3, 1e-8, 1e-40, 448, 464, 465, 57344, 61440};
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-1e6, 1e6);
  for (int i = 0; i < 200; ++i) values.push_back(u(rng));
  int failures = 0;
  for (ScalarType from : kAll) {
    for (double v : values) {
      if (IsIntegral(from, /*include_bool=*/true) && !std::isfinite(v)) continue;
      alignas(8) char src[8] = {};
      WriteAt(src, from, IsIntegral(from, /*include_bool=*/true) ? std::fmod(v, 1e18) : v);
      for (ScalarType to : kAll) {
        const double want = CpuCast(src, from, to), got = CudaCast(src, from, to);
        if (!(want == got || (std::isnan(want) && std::isnan(got)))) {
          ADD_FAILURE() << DtypeName(from) << " " << ReadAt(src, from) << " -> " << DtypeName(to) << ": CPU " << want
                        << ", CUDA " << got;
          if (++failures > 20) return;
        }
      }
    }
  }
}

TEST(CudaDtypesTest, FloatToIntFollowsX86) {
  EXPECT_EQ(cuda::FloatToInt<uint8_t>(-1.5), 255);
  EXPECT_EQ(cuda::FloatToInt<int8_t>(300.0), 44);
  EXPECT_EQ(cuda::FloatToInt<int8_t>(std::nan("")), 0);
  EXPECT_EQ(cuda::FloatToInt<int32_t>(3e10), INT32_MIN);
  EXPECT_EQ(cuda::FloatToInt<int64_t>(1e19), INT64_MIN);
  EXPECT_EQ(cuda::FloatToInt<int64_t>(-9223372036854775808.0), INT64_MIN);
  EXPECT_EQ(cuda::FloatToInt<int16_t>(-2.9), -2);
}

}  // namespace
}  // namespace tensord::testing
