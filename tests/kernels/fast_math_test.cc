// ExpF (kernels/cpu/fast_math.h), the vectorisable float32 exp of the exp and
// softmax kernels, against double-precision exp rounded to float: at most
// 2 ulp apart over the whole float range, and std::exp's special values.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "../../kernels/cpu/fast_math.h"
#include "gtest/gtest.h"

namespace tensord::cpu {
namespace {

// Distance in units in the last place between two finite non-negative floats.
int64_t UlpDistance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return ia > ib ? int64_t{ia} - ib : int64_t{ib} - ia;
}

TEST(ExpF, WithinTwoUlpOfDoubleExpEverywhere) {
  int64_t worst = 0;
  float worst_x = 0;
  // Every 37th float bit pattern from -110 to 95: ~1.7M values, all magnitudes.
  auto check = [&](float x) {
    const float want = static_cast<float>(std::exp(static_cast<double>(x)));
    const float got = ExpF(x);
    if (std::isinf(want)) {
      EXPECT_TRUE(std::isinf(got) && got > 0) << "x = " << x << " got " << got;
      return;
    }
    const int64_t d = UlpDistance(got, want);
    if (d > worst) {
      worst = d;
      worst_x = x;
    }
  };
  for (uint32_t u = 0; u < 0x42DC0000u; u += 37) {  // +0 .. 110
    float x;
    std::memcpy(&x, &u, 4);
    if (x <= 95.0f) check(x);
    check(-x);
  }
  EXPECT_LE(worst, 2) << "worst at x = " << worst_x;
}

TEST(ExpF, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(ExpF(0.0f), 1.0f);
  EXPECT_EQ(ExpF(-0.0f), 1.0f);
  EXPECT_EQ(ExpF(inf), inf);
  EXPECT_EQ(ExpF(-inf), 0.0f);
  EXPECT_EQ(ExpF(88.8f), inf);    // overflows, as expf
  EXPECT_EQ(ExpF(-104.0f), 0.0f);  // underflows below the smallest subnormal
  EXPECT_GT(ExpF(-100.0f), 0.0f);  // a subnormal, not flushed
  EXPECT_TRUE(std::isnan(ExpF(std::numeric_limits<float>::quiet_NaN())));
}

// Every vector width this CPU runs (4; 8 with AVX2 and 16 with AVX-512F on
// x86-64), and ExpFArray's own pick, give ExpF's bits in every lane and in
// the tails after the last whole vector.
TEST(ExpF, ArrayLanesEqualTheScalarFunction) {
  std::vector<float> in;
  for (float x = -120.0f; x < 100.0f; x += 0.173f) in.push_back(x);
  in.push_back(std::numeric_limits<float>::quiet_NaN());
  in.push_back(-std::numeric_limits<float>::infinity());
  in.push_back(std::numeric_limits<float>::infinity());
  in.push_back(-0.0f);
  in.push_back(1e-30f);  // 1,276 values; the cuts below leave tails of 0..15
  std::vector<int> widths = ExpFArrayLaneCounts();
  ASSERT_FALSE(widths.empty());
  EXPECT_EQ(widths.front(), 4);
  std::string tested;
  for (int lanes : widths) tested += " " + std::to_string(lanes);
  std::cout << "[          ] vector widths on this CPU:" << tested << " floats\n";
  widths.push_back(0);  // 0: ExpFArray itself
  auto run = [](int lanes, const float* x, float* y, size_t n) {
    if (lanes == 0) {
      ExpFArray(x, y, static_cast<int64_t>(n));
    } else {
      ExpFArrayOnLanes(lanes, x, y, static_cast<int64_t>(n));
    }
  };
  for (int lanes : widths) {
    for (size_t cut = in.size() - 16; cut <= in.size(); ++cut) {
      std::vector<float> out(cut, -1.0f);
      run(lanes, in.data(), out.data(), cut);
      for (size_t i = 0; i < cut; ++i) {
        const float want = ExpF(in[i]);
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(out[i])) << in[i];
        } else {
          ASSERT_EQ(out[i], want) << "x = " << in[i] << " lanes " << lanes << " element " << i << " of " << cut;
        }
      }
    }
    std::vector<float> same = in;  // in place
    run(lanes, same.data(), same.data(), same.size());
    for (size_t i = 0; i < same.size(); ++i) {
      const float want = ExpF(in[i]);
      ASSERT_TRUE(std::isnan(want) ? std::isnan(same[i]) : same[i] == want) << "in place, x = " << in[i] << " lanes " << lanes;
    }
  }
}

}  // namespace
}  // namespace tensord::cpu
