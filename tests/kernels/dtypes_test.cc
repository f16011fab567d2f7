// Element conversions (half, bfloat16, float8, float -> int casts), the
// StridedLoop iterator, and the kernel registry's coverage of the op table.
#include <cmath>
#include <limits>
#include <set>

#include "../../kernels/cpu/dtypes.h"
#include "../../kernels/cpu/strided_loop.h"
#include "gtest/gtest.h"
#include "kernel_test_util.h"

namespace tensord::testing {
namespace {

using cpu::BFloat16BitsToFloat;
using cpu::FloatToBFloat16Bits;
using cpu::FloatToHalfBits;
using cpu::HalfBitsToFloat;

TEST(HalfTest, EveryBitPatternRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = HalfBitsToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfBitsToFloat(FloatToHalfBits(f)))) << h;
      continue;
    }
    EXPECT_EQ(FloatToHalfBits(f), h) << "bits " << h << " value " << f;
  }
}

TEST(HalfTest, KnownValues) {
  EXPECT_EQ(HalfBitsToFloat(0x3C00), 1.0f);
  EXPECT_EQ(HalfBitsToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(HalfBitsToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(HalfBitsToFloat(0xC000), -2.0f);
  EXPECT_TRUE(std::isinf(HalfBitsToFloat(0x7C00)));
  EXPECT_EQ(FloatToHalfBits(65519.0f), 0x7BFF);  // below the rounding boundary
  EXPECT_EQ(FloatToHalfBits(65520.0f), 0x7C00);  // rounds to inf
  EXPECT_EQ(FloatToHalfBits(1e6f), 0x7C00);
  EXPECT_EQ(FloatToHalfBits(-0.0f), 0x8000);
}

TEST(HalfTest, RoundsToNearestEven) {
  // Between every pair of adjacent finite halves, the midpoint goes to the
  // one with an even mantissa, and points just off the midpoint go to the
  // nearer one.
  for (uint32_t h = 0; h < 0x7BFF; ++h) {
    const double lo = HalfBitsToFloat(static_cast<uint16_t>(h));
    const double hi = HalfBitsToFloat(static_cast<uint16_t>(h + 1));
    const double mid = (lo + hi) / 2;
    const uint16_t even = (h % 2 == 0) ? h : h + 1;
    ASSERT_EQ(FloatToHalfBits(static_cast<float>(mid)), even) << h;
    const float below = std::nextafter(static_cast<float>(mid), 0.0f);
    const float above = std::nextafter(static_cast<float>(mid), 1e9f);
    if (below > lo) {
      ASSERT_EQ(FloatToHalfBits(below), h) << h;
    }
    if (above < hi) {
      ASSERT_EQ(FloatToHalfBits(above), h + 1) << h;
    }
  }
}

TEST(BFloat16Test, RoundsToNearestEvenAndKeepsNan) {
  for (uint32_t b = 0; b < 0x7F80; b += 7) {
    const float lo = BFloat16BitsToFloat(static_cast<uint16_t>(b));
    const float hi = BFloat16BitsToFloat(static_cast<uint16_t>(b + 1));
    EXPECT_EQ(FloatToBFloat16Bits(lo), b);
    const float mid = cpu::BitsToFloat((cpu::FloatBits(lo) + cpu::FloatBits(hi)) / 2);
    const uint16_t even = (b % 2 == 0) ? b : b + 1;
    EXPECT_EQ(FloatToBFloat16Bits(mid), even) << b;
  }
  EXPECT_EQ(FloatToBFloat16Bits(1.00390625f), 0x3F80);  // tie -> 1.0 (even)
  EXPECT_EQ(FloatToBFloat16Bits(1.01171875f), 0x3F82);  // tie -> even above
  EXPECT_TRUE(std::isnan(BFloat16BitsToFloat(FloatToBFloat16Bits(std::nanf("")))));
  EXPECT_TRUE(std::isinf(BFloat16BitsToFloat(FloatToBFloat16Bits(3.4e38f * 10))));
}

TEST(Float8Test, E4M3FN) {
  for (int b = 0; b < 256; ++b) {
    const float f = cpu::Float8E4M3FNBitsToFloat(static_cast<uint8_t>(b));
    if ((b & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(f)) << b;
      continue;
    }
    EXPECT_FALSE(std::isinf(f));
    EXPECT_EQ(cpu::FloatToFloat8E4M3FNBits(f), b) << "bits " << b << " value " << f;
  }
  EXPECT_EQ(cpu::Float8E4M3FNBitsToFloat(0x7E), 448.0f);
  EXPECT_EQ(cpu::Float8E4M3FNBitsToFloat(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(cpu::FloatToFloat8E4M3FNBits(464.0f), 0x7E);  // tie -> even (448)
  EXPECT_EQ(cpu::FloatToFloat8E4M3FNBits(470.0f), 0x7F);  // rounds past 448 -> NaN
  EXPECT_EQ(cpu::FloatToFloat8E4M3FNBits(1e9f), 0x7F);
  EXPECT_EQ(cpu::FloatToFloat8E4M3FNBits(-1e9f), 0xFF);
  EXPECT_EQ(cpu::FloatToFloat8E4M3FNBits(1.0625f), 0x38);  // tie 1.0/1.125 -> 1.0
  EXPECT_EQ(cpu::FloatToFloat8E4M3FNBits(1.1875f), 0x3A);  // tie 1.125/1.25 -> 1.25
}

TEST(Float8Test, E5M2) {
  for (int b = 0; b < 256; ++b) {
    const float f = cpu::Float8E5M2BitsToFloat(static_cast<uint8_t>(b));
    if (std::isnan(f)) continue;
    EXPECT_EQ(cpu::FloatToFloat8E5M2Bits(f), b) << "bits " << b << " value " << f;
  }
  EXPECT_EQ(cpu::Float8E5M2BitsToFloat(0x7B), 57344.0f);
  EXPECT_TRUE(std::isinf(cpu::Float8E5M2BitsToFloat(0x7C)));
  EXPECT_EQ(cpu::FloatToFloat8E5M2Bits(61440.0f), 0x7C);  // tie past max -> inf
  EXPECT_EQ(cpu::FloatToFloat8E5M2Bits(60000.0f), 0x7B);
  EXPECT_TRUE(std::isnan(cpu::Float8E5M2BitsToFloat(cpu::FloatToFloat8E5M2Bits(std::nanf("")))));
}

TEST(ConvertTest, FloatToIntMatchesPyTorchOnX86) {
  EXPECT_EQ(cpu::FloatToInt<uint8_t>(-1.5), 255);
  EXPECT_EQ(cpu::FloatToInt<uint8_t>(300.0), 44);
  EXPECT_EQ(cpu::FloatToInt<int8_t>(300.0), 44);
  EXPECT_EQ(cpu::FloatToInt<int8_t>(std::nan("")), 0);
  EXPECT_EQ(cpu::FloatToInt<int32_t>(3e10), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(cpu::FloatToInt<int32_t>(-1.5), -1);
  EXPECT_EQ(cpu::FloatToInt<int64_t>(3e10), 30000000000LL);
  EXPECT_EQ(cpu::FloatToInt<int64_t>(std::nan("")), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(cpu::FloatToInt<int64_t>(1e30), std::numeric_limits<int64_t>::min());
  EXPECT_TRUE((cpu::ConvertValue<bool, float>(std::nanf(""))));
  EXPECT_FALSE((cpu::ConvertValue<bool, double>(0.0)));
}

TEST(ConvertTest, BoolBytesOtherThanOneLoadAsTrue) {
  const char bytes[3] = {0, 1, 7};
  EXPECT_FALSE(cpu::Load<bool>(&bytes[0]));
  EXPECT_TRUE(cpu::Load<bool>(&bytes[1]));
  EXPECT_TRUE(cpu::Load<bool>(&bytes[2]));
}

// ---- StridedLoop ----------------------------------------------------------------

TEST(StridedLoopTest, ContiguousCoalescesToOneRun) {
  std::vector<float> a(24), b(24);
  cpu::StridedLoop loop(Shape{2, 3, 4});
  loop.Add(reinterpret_cast<char*>(a.data()), {48, 16, 4});
  loop.Add(reinterpret_cast<char*>(b.data()), {48, 16, 4});
  loop.Build();
  int runs = 0;
  loop.Run([&](char* const*, const int64_t* s, int64_t n) {
    ++runs;
    EXPECT_EQ(n, 24);
    EXPECT_EQ(s[0], 4);
    EXPECT_EQ(s[1], 4);
  });
  EXPECT_EQ(runs, 1);
}

TEST(StridedLoopTest, TransposedOperandIsWalkedInMemoryOrder) {
  // Operand 0 is column-major [3, 4]: the loop must walk dim 0 innermost.
  std::vector<float> a(12);
  cpu::StridedLoop loop(Shape{3, 4});
  loop.Add(reinterpret_cast<char*>(a.data()), {4, 12});
  loop.Build();
  std::vector<int64_t> offsets;
  loop.Run([&](char* const* p, const int64_t* s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      offsets.push_back((p[0] + i * s[0] - reinterpret_cast<char*>(a.data())) / 4);
    }
  });
  ASSERT_EQ(offsets.size(), 12u);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(offsets[i], i);
}

TEST(StridedLoopTest, BroadcastAndLogicalOrder) {
  std::vector<float> a(6);
  cpu::StridedLoop loop(Shape{2, 3});
  loop.Add(reinterpret_cast<char*>(a.data()), {4, 8});  // transposed [2,3]
  loop.Add(nullptr, {0, 0});                              // broadcast scalar
  loop.Build(/*reorder=*/false);
  std::vector<int64_t> offsets;
  loop.Run([&](char* const* p, const int64_t* s, int64_t n) {
    EXPECT_EQ(s[1], 0);
    for (int64_t i = 0; i < n; ++i) {
      offsets.push_back((p[0] + i * s[0] - reinterpret_cast<char*>(a.data())) / 4);
    }
  });
  EXPECT_EQ(offsets, (std::vector<int64_t>{0, 2, 4, 1, 3, 5}));  // row-major logical order
}

TEST(StridedLoopTest, TransposedWalkVisitsEveryElementOnce) {
  // dst row-major [300, 200], src column-major.
  const int64_t r = 300, c = 200;
  std::vector<int32_t> src(r * c), dst(r * c, -1);
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) src[j * r + i] = static_cast<int32_t>(i * c + j);
  cpu::StridedLoop loop(Shape{r, c});
  loop.Add(reinterpret_cast<char*>(dst.data()), {c * 4, 4});
  loop.Add(reinterpret_cast<char*>(src.data()), {4, r * 4});
  loop.Build();
  int64_t visits = 0;
  loop.Run([&](char* const* p, const int64_t* s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      int32_t* d = reinterpret_cast<int32_t*>(p[0] + i * s[0]);
      EXPECT_EQ(*d, -1);  // not visited before
      *d = *reinterpret_cast<const int32_t*>(p[1] + i * s[1]);
      ++visits;
    }
  });
  EXPECT_EQ(visits, r * c);
  for (int64_t k = 0; k < r * c; ++k) ASSERT_EQ(dst[k], k);
}

TEST(StridedLoopTest, ZeroSizeAndZeroDim) {
  int calls = 0;
  cpu::StridedLoop empty(Shape{3, 0, 2});
  empty.Add(nullptr, {0, 0, 0});
  empty.Build();
  empty.Run([&](char* const*, const int64_t*, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
  cpu::StridedLoop scalar(Shape{});
  float x = 1;
  scalar.Add(reinterpret_cast<char*>(&x), {});
  scalar.Build();
  scalar.Run([&](char* const*, const int64_t*, int64_t n) {
    ++calls;
    EXPECT_EQ(n, 1);
  });
  EXPECT_EQ(calls, 1);
}

// ---- registry ------------------------------------------------------------------------

TEST(RegistryTest, EveryComputingOpHasACpuKernel) {
  // Pure views never reach a kernel (their outputs alias their input);
  // everything else, ops that may alias or copy (kMayCopy) included, must
  // have one.
  const KernelRegistry& reg = Registry();
  for (const OpEntry& e : OpTable::Get().entries()) {
    const bool has = reg.Find(DeviceType::kCPU, e.id) != nullptr;
    if (e.is_pure_view()) {
      EXPECT_FALSE(has) << e.full_name() << " is a view and should have no kernel";
    } else {
      EXPECT_TRUE(has) << "no CPU kernel for " << e.full_name();
    }
  }
}

TEST(RegistryTest, RejectsUnknownAndDuplicateNames) {
  KernelRegistry reg;
  auto k = [](KernelContext&) { return absl::OkStatus(); };
  EXPECT_FALSE(reg.Register(DeviceType::kCPU, "no_such_op", k).ok());
  EXPECT_TRUE(reg.Register(DeviceType::kCPU, "add.Tensor", k).ok());
  EXPECT_FALSE(reg.Register(DeviceType::kCPU, "add.Tensor", k).ok());
  EXPECT_EQ(reg.Find(DeviceType::kCPU, 1u << 30), nullptr);
  EXPECT_EQ(reg.Find(static_cast<DeviceType>(99), 0), nullptr);
}

}  // namespace
}  // namespace tensord::testing
