// CPU kernels of the pointwise ops exp2, expm1, log2, log1p, silu,
// square, relu_, div with rounding_mode, floor_divide, fmod, atan2, bitwise
// shifts and lerp, over every layout of the harness and several dtypes.
// Expected values are computed here from the definitions (or are literals
// PyTorch 1.13 printed, noted in comments).
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "kernel_test_util.h"

namespace tensord::testing {
namespace {

using S = ScalarType;

void ExpectNear(const Tensor& t, const std::vector<double>& want, double tol) {
  const std::vector<double> got = Values(t);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << i;
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << i;
    } else {
      EXPECT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << i;
    }
  }
}

TEST(PointwiseKernelTest, UnaryFloatMathOnEveryLayout) {
  std::mt19937 rng(3);
  struct Case {
    const char* op;
    double (*f)(double);
    double lo, hi;
  };
  const Case cases[] = {
      {"exp2", [](double x) { return std::exp2(x); }, -4, 4},
      {"expm1", [](double x) { return std::expm1(x); }, -2, 2},
      {"log2", [](double x) { return std::log2(x); }, 0.1, 9},
      {"log1p", [](double x) { return std::log1p(x); }, -0.9, 9},
      {"silu", [](double x) { return x / (1 + std::exp(-x)); }, -6, 6},
      {"square", [](double x) { return x * x; }, -5, 5},
  };
  for (const Case& c : cases) {
    for (S dt : {S::kFloat32, S::kFloat64}) {
      for (Layout l : kAllLayouts) {
        SCOPED_TRACE(std::string(c.op) + " " + std::string(DtypeName(dt)));
        const Tensor a = WithLayout(Random(dt, {3, 4}, rng, c.lo, c.hi), l);
        OpRun r = RunOp(c.op, {In(a)});
        ASSERT_TRUE(r.status.ok()) << r.status;
        std::vector<double> want;
        for (double v : Values(a)) want.push_back(c.f(v));
        ExpectNear(r.outputs[0], want, dt == S::kFloat32 ? 1e-6 : 1e-12);
      }
    }
  }
}

TEST(PointwiseKernelTest, UnaryIntegerInputs) {
  const Tensor i = FromValues(S::kInt64, {4}, {0, 1, 3, 10});
  OpRun r = RunOp("exp2", {In(i)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {1, 2, 8, 1024});
  r = RunOp("log2", {In(i)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectNear(r.outputs[0], {-INFINITY, 0, std::log2(3.0), std::log2(10.0)}, 1e-6);
  // square keeps integers (wrapping like PyTorch), bool gives int64.
  const Tensor i8 = FromValues(S::kInt8, {3}, {-11, 12, 100});
  r = RunOp("square", {In(i8)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {121, static_cast<int8_t>(144), static_cast<int8_t>(10000 % 256)});
  const Tensor b = FromValues(S::kBool, {2}, {1, 0});
  r = RunOp("square", {In(b)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.dtype, S::kInt64);
  ExpectValues(r.outputs[0], {1, 0});
}

TEST(PointwiseKernelTest, ReluInPlaceWritesSelf) {
  std::mt19937 rng(5);
  for (Layout l : kAllLayouts) {
    Tensor a = WithLayout(Random(S::kFloat32, {3, 4}, rng), l);
    std::vector<double> want;
    for (double v : Values(a)) want.push_back(v > 0 ? v : 0);
    OpRun r = RunOp("relu_", {In(a)});
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.outputs[0].storage, a.storage);
    ExpectValues(a, want);
  }
}

TEST(PointwiseKernelTest, DivRoundingModesOnFloats) {
  // torch.div(a, b, rounding_mode=...) for these values in float64.
  const Tensor a = FromValues(S::kFloat64, {6}, {7.5, -7.5, 7.5, -7.5, 1.0, -1.0});
  const Tensor b = FromValues(S::kFloat64, {6}, {2, 2, -2, -2, 0, 0});
  OpRun f = RunOp("div.Tensor_mode", {In(a), In(b)}, {{"rounding_mode", Value("floor")}});
  ASSERT_TRUE(f.status.ok()) << f.status;
  ExpectNear(f.outputs[0], {3, -4, -4, 3, INFINITY, -INFINITY}, 0);
  OpRun t = RunOp("div.Tensor_mode", {In(a), In(b)}, {{"rounding_mode", Value("trunc")}});
  ASSERT_TRUE(t.status.ok()) << t.status;
  ExpectNear(t.outputs[0], {3, -3, -3, 3, INFINITY, -INFINITY}, 0);
  OpRun n = RunOp("div.Tensor_mode", {In(a), In(b)}, {{"rounding_mode", Value()}});
  ASSERT_TRUE(n.status.ok()) << n.status;
  ExpectNear(n.outputs[0], {3.75, -3.75, -3.75, 3.75, INFINITY, -INFINITY}, 0);
  // floor of an exact quotient near a representable boundary: -0.0 for a negative zero quotient.
  const Tensor z = FromValues(S::kFloat64, {1}, {0.0});
  const Tensor m = FromValues(S::kFloat64, {1}, {-3.0});
  OpRun fz = RunOp("div.Tensor_mode", {In(z), In(m)}, {{"rounding_mode", Value("floor")}});
  ASSERT_TRUE(fz.status.ok()) << fz.status;
  EXPECT_TRUE(std::signbit(Values(fz.outputs[0])[0]));
}

TEST(PointwiseKernelTest, IntegerDivisionRoundsAndReportsZeroDivision) {
  std::mt19937 rng(9);
  for (Layout l : kAllLayouts) {
    const Tensor a = WithLayout(FromValues(S::kInt64, {2, 3}, {7, -7, 7, -7, 0, 9}), l);
    const Tensor b = FromValues(S::kInt64, {2, 3}, {2, 2, -2, -2, 5, -1});
    OpRun f = RunOp("div.Tensor_mode", {In(a), In(b)}, {{"rounding_mode", Value("floor")}});
    ASSERT_TRUE(f.status.ok()) << f.status;
    std::vector<double> av = Values(a), want_f, want_t, want_fmod;
    const std::vector<double> bv = Values(b);
    for (size_t i = 0; i < av.size(); ++i) {
      want_f.push_back(std::floor(av[i] / bv[i]));
      want_t.push_back(std::trunc(av[i] / bv[i]));
      want_fmod.push_back(std::fmod(av[i], bv[i]));
    }
    ExpectValues(f.outputs[0], want_f);
    OpRun t = RunOp("div.Tensor_mode", {In(a), In(b)}, {{"rounding_mode", Value("trunc")}});
    ASSERT_TRUE(t.status.ok()) << t.status;
    ExpectValues(t.outputs[0], want_t);
    OpRun fd = RunOp("floor_divide", {In(a), In(b)});
    ASSERT_TRUE(fd.status.ok()) << fd.status;
    ExpectValues(fd.outputs[0], want_f);
    OpRun fm = RunOp("fmod.Tensor", {In(a), In(b)});
    ASSERT_TRUE(fm.status.ok()) << fm.status;
    ExpectValues(fm.outputs[0], want_fmod);
  }
  const Tensor a = FromValues(S::kInt32, {3}, {1, 2, 3});
  const Tensor zero = FromValues(S::kInt32, {3}, {1, 0, 1});
  ExpectErrorContains(RunOp("div.Tensor_mode", {In(a), In(zero)}, {{"rounding_mode", Value("trunc")}}),
                      "ZeroDivisionError");
  ExpectErrorContains(RunOp("div.Scalar_mode", {In(a), Value(Scalar::Int(0))}, {{"rounding_mode", Value("floor")}}),
                      "ZeroDivisionError");
  ExpectErrorContains(RunOp("floor_divide.Scalar", {In(a), Value(Scalar::Int(0))}), "ZeroDivisionError");
  ExpectErrorContains(RunOp("fmod.Tensor", {In(a), In(zero)}), "ZeroDivisionError");
  ExpectErrorContains(RunOp("fmod.Scalar", {In(a), Value(Scalar::Int(0))}), "ZeroDivisionError");
}

TEST(PointwiseKernelTest, MinimumIntegerDividedByMinusOneWraps) {
  const double kMin = static_cast<double>(std::numeric_limits<int8_t>::min());
  const Tensor a = FromValues(S::kInt8, {2}, {kMin, 5});
  OpRun f = RunOp("div.Scalar_mode", {In(a), Value(Scalar::Int(-1))}, {{"rounding_mode", Value("floor")}});
  ASSERT_TRUE(f.status.ok()) << f.status;
  ExpectValues(f.outputs[0], {kMin, -5});
  OpRun m = RunOp("fmod.Scalar", {In(a), Value(Scalar::Int(-1))});
  ASSERT_TRUE(m.status.ok()) << m.status;
  ExpectValues(m.outputs[0], {0, 0});
}

TEST(PointwiseKernelTest, FmodTakesTheSignOfSelf) {
  const Tensor a = FromValues(S::kFloat32, {4}, {5.5, -5.5, 5.5, -5.5});
  const Tensor b = FromValues(S::kFloat32, {4}, {2, 2, -2, -2});
  OpRun r = RunOp("fmod.Tensor", {In(a), In(b)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {1.5, -1.5, 1.5, -1.5});
  OpRun s = RunOp("fmod.Scalar", {In(a), Value(Scalar::Float(-2.0))});
  ASSERT_TRUE(s.status.ok()) << s.status;
  ExpectValues(s.outputs[0], {1.5, -1.5, 1.5, -1.5});
}

TEST(PointwiseKernelTest, Atan2Quadrants) {
  const Tensor y = FromValues(S::kFloat64, {4}, {1, 1, -1, -1});
  const Tensor x = FromValues(S::kFloat64, {4}, {1, -1, -1, 1});
  OpRun r = RunOp("atan2", {In(y), In(x)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectNear(r.outputs[0], {M_PI / 4, 3 * M_PI / 4, -3 * M_PI / 4, -M_PI / 4}, 1e-15);
  // Integers become float32.
  const Tensor yi = FromValues(S::kInt64, {2}, {0, 1});
  const Tensor xi = FromValues(S::kInt64, {2}, {-1, 0});
  OpRun ri = RunOp("atan2", {In(yi), In(xi)});
  ASSERT_TRUE(ri.status.ok()) << ri.status;
  EXPECT_EQ(ri.outputs[0].meta.dtype, S::kFloat32);
  ExpectNear(ri.outputs[0], {M_PI, M_PI / 2}, 1e-7);
}

TEST(PointwiseKernelTest, Shifts) {
  const Tensor a = FromValues(S::kInt64, {4}, {1, -8, 100, -1});
  const Tensor n = FromValues(S::kInt64, {4}, {3, 1, 0, 63});
  OpRun l = RunOp("bitwise_left_shift.Tensor", {In(a), In(n)});
  ASSERT_TRUE(l.status.ok()) << l.status;
  ExpectValues(l.outputs[0], {8, -16, 100, static_cast<double>(std::numeric_limits<int64_t>::min())});
  OpRun r = RunOp("bitwise_right_shift.Tensor", {In(a), In(n)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {0, -4, 100, -1});
  // Out-of-range counts: << gives 0, >> the sign fill.
  const Tensor big = FromValues(S::kInt64, {4}, {64, -1, 200, 70});
  OpRun lb = RunOp("bitwise_left_shift.Tensor", {In(a), In(big)});
  ASSERT_TRUE(lb.status.ok()) << lb.status;
  ExpectValues(lb.outputs[0], {0, 0, 0, 0});
  OpRun rb = RunOp("bitwise_right_shift.Tensor", {In(a), In(big)});
  ASSERT_TRUE(rb.status.ok()) << rb.status;
  ExpectValues(rb.outputs[0], {0, -1, 0, -1});
  // int8 wraps: (int8)(100 << 2) == -112 (torch.tensor([100], dtype=torch.int8) << 2 printed -112).
  const Tensor i8 = FromValues(S::kInt8, {2}, {100, -100});
  OpRun l8 = RunOp("bitwise_left_shift.Tensor_Scalar", {In(i8), Value(Scalar::Int(2))});
  ASSERT_TRUE(l8.status.ok()) << l8.status;
  ExpectValues(l8.outputs[0], {-112, 112});
  const Tensor u8 = FromValues(S::kUInt8, {2}, {200, 3});
  OpRun r8 = RunOp("bitwise_right_shift.Tensor_Scalar", {In(u8), Value(Scalar::Int(9))});
  ASSERT_TRUE(r8.status.ok()) << r8.status;
  ExpectValues(r8.outputs[0], {0, 0});
}

TEST(PointwiseKernelTest, LerpScalarAndTensorWeights) {
  std::mt19937 rng(11);
  for (Layout l : kAllLayouts) {
    const Tensor a = WithLayout(Random(S::kFloat32, {3, 4}, rng), l);
    const Tensor b = Random(S::kFloat32, {1, 4}, rng);
    const Tensor w = Random(S::kFloat32, {3, 1}, rng, -1, 2);
    const std::vector<double> av = Values(a), bv = Values(b), wv = Values(w);
    OpRun rs = RunOp("lerp.Scalar", {In(a), In(b), Value(Scalar::Float(0.75))});
    ASSERT_TRUE(rs.status.ok()) << rs.status;
    OpRun rt = RunOp("lerp.Tensor", {In(a), In(b), In(w)});
    ASSERT_TRUE(rt.status.ok()) << rt.status;
    std::vector<double> want_s, want_t;
    for (int64_t i = 0; i < 12; ++i) {
      const double e = bv[i % 4];
      want_s.push_back(av[i] + 0.75 * (e - av[i]));
      want_t.push_back(av[i] + wv[i / 4] * (e - av[i]));
    }
    ExpectNear(rs.outputs[0], want_s, 1e-6);
    ExpectNear(rt.outputs[0], want_t, 1e-6);
  }
  // weight 1 gives end exactly.
  const Tensor a = FromValues(S::kFloat32, {2}, {1e8, -3});
  const Tensor e = FromValues(S::kFloat32, {2}, {1, 0.1});
  OpRun one = RunOp("lerp.Scalar", {In(a), In(e), Value(Scalar::Int(1))});
  ASSERT_TRUE(one.status.ok()) << one.status;
  ExpectValues(one.outputs[0], Values(e));
}

TEST(PointwiseKernelTest, HalfTypes) {
  const Tensor a = FromValues(S::kBFloat16, {3}, {1.5, -2.5, 3.0});
  OpRun s = RunOp("silu", {In(a)});
  ASSERT_TRUE(s.status.ok()) << s.status;
  EXPECT_EQ(s.outputs[0].meta.dtype, S::kBFloat16);
  ExpectNear(s.outputs[0], {1.5 / (1 + std::exp(-1.5)), -2.5 / (1 + std::exp(2.5)), 3.0 / (1 + std::exp(-3.0))}, 1e-2);
  const Tensor h = FromValues(S::kFloat16, {3}, {7.5, -7.5, 3.0});
  OpRun f = RunOp("div.Scalar_mode", {In(h), Value(Scalar::Int(2))}, {{"rounding_mode", Value("floor")}});
  ASSERT_TRUE(f.status.ok()) << f.status;
  ExpectValues(f.outputs[0], {3, -4, 1});
  OpRun m = RunOp("fmod.Scalar", {In(h), Value(Scalar::Int(2))});
  ASSERT_TRUE(m.status.ok()) << m.status;
  ExpectValues(m.outputs[0], {1.5, -1.5, 1});
}

}  // namespace
}  // namespace tensord::testing
