// Elementwise kernels against reference loops: every layout (contiguous,
// permuted, spread with an offset, broadcast with stride 0), several dtypes,
// scalar operands, type promotion, and PyTorch's edge semantics.
#include <cmath>
#include <limits>

#include "gtest/gtest.h"
#include "kernel_test_util.h"

namespace tensord::testing {
namespace {

const double kNan = std::numeric_limits<double>::quiet_NaN();

// Reference for a binary op over broadcast inputs (row-major values).
std::vector<double> RefBinary(const Tensor& a, const Tensor& b, const Shape& out,
                              const std::function<double(double, double)>& f) {
  std::vector<double> r;
  ForEachIndex(out, [&](const Shape& i) {
    const double x = ReadAt(a.element(BroadcastIndex(i, a.meta.sizes)), a.meta.dtype);
    const double y = ReadAt(b.element(BroadcastIndex(i, b.meta.sizes)), b.meta.dtype);
    r.push_back(f(x, y));
  });
  return r;
}

std::vector<double> RefUnary(const Tensor& a, const std::function<double(double)>& f) {
  std::vector<double> r;
  for (double v : Values(a)) r.push_back(f(v));
  return r;
}

// Rounds a double to what dtype `t` stores.
double As(ScalarType t, double v) {
  char buf[8];
  WriteAt(buf, t, v);
  return ReadAt(buf, t);
}

class BinaryLayoutTest : public ::testing::TestWithParam<ScalarType> {};

TEST_P(BinaryLayoutTest, AddSubMulAllLayouts) {
  const ScalarType dt = GetParam();
  std::mt19937 rng(1);
  const Tensor a0 = Random(dt, {3, 5, 4}, rng), b0 = Random(dt, {3, 5, 4}, rng);
  for (Layout la : kAllLayouts) {
    for (Layout lb : kAllLayouts) {
      const Tensor a = WithLayout(a0, la), b = WithLayout(b0, lb);
      OpRun r = RunOp("add.Tensor", {In(a), In(b)}, {{"alpha", Value(Scalar::Int(2))}});
      ASSERT_TRUE(r.status.ok()) << r.status;
      ASSERT_EQ(r.outputs[0].meta.dtype, dt);
      ExpectValues(r.outputs[0], RefBinary(a, b, {3, 5, 4}, [&](double x, double y) { return As(dt, x + 2 * y); }),
                   Rtol(dt), Rtol(dt) * 10, "add");
      r = RunOp("sub.Tensor", {In(a), In(b)});
      ASSERT_TRUE(r.status.ok()) << r.status;
      ExpectValues(r.outputs[0], RefBinary(a, b, {3, 5, 4}, [&](double x, double y) { return As(dt, x - y); }),
                   Rtol(dt), Rtol(dt) * 10, "sub");
      r = RunOp("mul.Tensor", {In(a), In(b)});
      ASSERT_TRUE(r.status.ok()) << r.status;
      ExpectValues(r.outputs[0], RefBinary(a, b, {3, 5, 4}, [&](double x, double y) { return As(dt, x * y); }),
                   Rtol(dt), Rtol(dt) * 10, "mul");
    }
  }
}

TEST_P(BinaryLayoutTest, BroadcastAndExpandedInputs) {
  const ScalarType dt = GetParam();
  std::mt19937 rng(2);
  const Tensor a = Random(dt, {4, 1, 3}, rng);
  const Tensor b = Random(dt, {5, 1}, rng);
  // An expanded (stride 0) view of a [3] tensor as [5, 3] with an offset.
  const Tensor c0 = Random(dt, {3}, rng);
  const Tensor c = MakeStrided(dt, {5, 3}, {0, 1}, 2, [&] {
    std::vector<double> v;
    for (int i = 0; i < 5; ++i)
      for (double x : Values(c0)) v.push_back(x);
    return v;
  }());
  OpRun r = RunOp("maximum", {In(a), In(b)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.sizes, (Shape{4, 5, 3}));
  ExpectValues(r.outputs[0], RefBinary(a, b, {4, 5, 3}, [](double x, double y) { return std::max(x, y); }));
  r = RunOp("mul.Tensor", {In(a), In(c)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], RefBinary(a, c, {4, 5, 3}, [&](double x, double y) { return As(dt, x * y); }),
               Rtol(dt), Rtol(dt) * 10);
  r = RunOp("minimum", {In(c), In(c)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], RefBinary(c, c, {5, 3}, [](double x, double) { return x; }));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, BinaryLayoutTest,
                         ::testing::Values(ScalarType::kFloat32, ScalarType::kFloat64,
                                           ScalarType::kInt64, ScalarType::kInt32, ScalarType::kInt16,
                                           ScalarType::kInt8, ScalarType::kUInt8,
                                           ScalarType::kFloat16, ScalarType::kBFloat16),
                         [](const auto& info) { return std::string(DtypeName(info.param)); });

TEST(BinaryTest, ZeroDimAndEmpty) {
  const Tensor s = Scalar0d(ScalarType::kFloat32, 2.5);
  const Tensor t = FromValues(ScalarType::kFloat32, {0, 3}, {});
  OpRun r = RunOp("add.Tensor", {In(s), In(s)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.dim(), 0);
  ExpectValues(r.outputs[0], {5.0});
  r = RunOp("mul.Tensor", {In(t), In(s)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.sizes, (Shape{0, 3}));
}

TEST(BinaryTest, TypePromotion) {
  // int tensor + float scalar -> float32, computed in float.
  const Tensor i = FromValues(ScalarType::kInt32, {3}, {1, 2, 3});
  OpRun r = RunOp("add.Scalar", {In(i), Value(Scalar::Float(0.5))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.dtype, ScalarType::kFloat32);
  ExpectValues(r.outputs[0], {1.5, 2.5, 3.5});
  // int8 * float64 0-dim tensor -> float64: a 0-dim tensor of a higher
  // category decides the dtype.
  const Tensor d = Scalar0d(ScalarType::kFloat64, 0.25);
  const Tensor i8 = FromValues(ScalarType::kInt8, {2}, {4, -4});
  r = RunOp("mul.Tensor", {In(i8), In(d)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.dtype, ScalarType::kFloat64);
  ExpectValues(r.outputs[0], {1, -1});
  // uint8 + int8 -> int16.
  const Tensor u = FromValues(ScalarType::kUInt8, {2}, {200, 100});
  r = RunOp("add.Tensor", {In(u), In(i8)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.dtype, ScalarType::kInt16);
  ExpectValues(r.outputs[0], {204, 96});
  // true division of ints is float.
  const Tensor n = FromValues(ScalarType::kInt64, {3}, {5, 7, -1});
  const Tensor z = FromValues(ScalarType::kInt64, {3}, {0, 2, 0});
  r = RunOp("div.Tensor", {In(n), In(z)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.dtype, ScalarType::kFloat32);
  ExpectValues(r.outputs[0], {INFINITY, 3.5, -INFINITY});
}

TEST(BinaryTest, IntegerWrapsAndRsub) {
  const Tensor a = FromValues(ScalarType::kInt8, {2}, {127, -128});
  OpRun r = RunOp("add.Scalar", {In(a), Value(Scalar::Int(1))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {-128, -127});
  r = RunOp("rsub.Scalar", {In(a), Value(Scalar::Int(10))}, {{"alpha", Value(Scalar::Int(2))}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  // 10 - 2*127 = -244 -> wraps to 12 in int8; 10 + 256 = 266 -> 10.
  ExpectValues(r.outputs[0], {12, 10});
  const Tensor b = FromValues(ScalarType::kBool, {4}, {0, 1, 0, 1});
  const Tensor c = FromValues(ScalarType::kBool, {4}, {0, 0, 1, 1});
  r = RunOp("add.Tensor", {In(b), In(c)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.dtype, ScalarType::kBool);
  ExpectValues(r.outputs[0], {0, 1, 1, 1});
  r = RunOp("mul.Tensor", {In(b), In(c)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {0, 0, 0, 1});
}

TEST(BinaryTest, RemainderFollowsPythonSign) {
  const Tensor a = FromValues(ScalarType::kInt64, {4}, {-5, 5, -5, 5});
  const Tensor b = FromValues(ScalarType::kInt64, {4}, {3, -3, -3, 3});
  OpRun r = RunOp("remainder.Tensor", {In(a), In(b)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {1, -1, -2, 2});
  const Tensor af = FromValues(ScalarType::kFloat32, {4}, {-5, 5, -5.5, 5});
  const Tensor bf = FromValues(ScalarType::kFloat32, {4}, {3, -3, 2, 0});
  r = RunOp("remainder.Tensor", {In(af), In(bf)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {1, -1, 0.5, kNan});
  const Tensor m = FromValues(ScalarType::kInt8, {1}, {-128});
  r = RunOp("remainder.Scalar", {In(m), Value(Scalar::Int(-1))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {0});
}

TEST(BinaryTest, IntegerRemainderByZeroIsAnError) {
  const Tensor a = FromValues(ScalarType::kInt32, {3}, {1, 2, 3});
  const Tensor b = FromValues(ScalarType::kInt32, {3}, {1, 0, 3});
  OpRun r = RunOp("remainder.Tensor", {In(a), In(b)});
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(std::string(r.status.message()), "ZeroDivisionError");
  EXPECT_EQ(KindOf(r.status), ErrorKind::kRuntime);
  r = RunOp("remainder.Scalar", {In(a), Value(Scalar::Int(0))});
  EXPECT_FALSE(r.status.ok());
}

TEST(BinaryTest, Pow) {
  const Tensor base = FromValues(ScalarType::kInt64, {5}, {2, -1, 1, 0, 3});
  const Tensor ex = FromValues(ScalarType::kInt64, {5}, {-1, -1, -2, 3, 4});
  OpRun r = RunOp("pow.Tensor_Tensor", {In(base), In(ex)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {0, -1, 1, 0, 81});
  r = RunOp("pow.Tensor_Scalar", {In(base), Value(Scalar::Int(-1))});
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(std::string(r.status.message()), "pow: Integers to negative integer powers are not allowed.");
  r = RunOp("pow.Tensor_Scalar", {In(base), Value(Scalar::Float(0.5))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.dtype, ScalarType::kFloat32);
  ExpectValues(r.outputs[0], {std::sqrt(2.0), kNan, 1, 0, std::sqrt(3.0)});
  r = RunOp("pow.Scalar", {Value(Scalar::Int(2)), In(ex)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {0, 0, 0, 8, 16});
  const Tensor i8 = FromValues(ScalarType::kInt8, {1}, {5});
  r = RunOp("pow.Tensor_Scalar", {In(i8), Value(Scalar::Int(4))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {113});  // 625 wraps in int8
}

TEST(BinaryTest, ComparisonsPromoteOperands) {
  const Tensor i = FromValues(ScalarType::kInt64, {4}, {1, 2, 3, 4});
  OpRun r = RunOp("lt.Scalar", {In(i), Value(Scalar::Float(2.5))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.dtype, ScalarType::kBool);
  ExpectValues(r.outputs[0], {1, 1, 0, 0});
  r = RunOp("eq.Scalar", {In(i), Value(Scalar::Float(2.0))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {0, 1, 0, 0});
  const Tensor f = FromValues(ScalarType::kFloat32, {4}, {1, kNan, 3.5, 4});
  const char* ops[] = {"eq.Tensor", "ne.Tensor", "lt.Tensor", "le.Tensor", "gt.Tensor", "ge.Tensor"};
  const std::function<bool(double, double)> fns[] = {
      [](double x, double y) { return x == y; }, [](double x, double y) { return x != y; },
      [](double x, double y) { return x < y; },  [](double x, double y) { return x <= y; },
      [](double x, double y) { return x > y; },  [](double x, double y) { return x >= y; }};
  for (int k = 0; k < 6; ++k) {
    r = RunOp(ops[k], {In(i), In(f)});
    ASSERT_TRUE(r.status.ok()) << ops[k] << ": " << r.status;
    ExpectValues(r.outputs[0], RefBinary(i, f, {4}, [&](double x, double y) { return fns[k](x, y) ? 1.0 : 0.0; }),
                 0, 0, ops[k]);
  }
}

TEST(BinaryTest, LogicalAndBitwise) {
  const Tensor a = FromValues(ScalarType::kFloat32, {4}, {0, 2, kNan, 0});
  const Tensor b = FromValues(ScalarType::kInt32, {4}, {0, 0, 5, 7});
  OpRun r = RunOp("logical_and", {In(a), In(b)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {0, 0, 1, 0});
  r = RunOp("logical_or", {In(a), In(b)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {0, 1, 1, 1});
  r = RunOp("logical_xor", {In(a), In(b)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {0, 1, 0, 1});
  const Tensor x = FromValues(ScalarType::kInt32, {3}, {12, -1, 5});
  const Tensor y = FromValues(ScalarType::kInt32, {3}, {10, 6, 3});
  r = RunOp("bitwise_and.Tensor", {In(x), In(y)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {8, 6, 1});
  r = RunOp("bitwise_or.Scalar", {In(x), Value(Scalar::Int(1))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {13, -1, 5});
  r = RunOp("bitwise_xor.Tensor", {In(x), In(y)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {6, -7, 6});
  const Tensor t = FromValues(ScalarType::kBool, {2}, {1, 0});
  r = RunOp("bitwise_xor.Scalar", {In(t), Value(Scalar::Bool(true))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {0, 1});
}

TEST(BinaryTest, MaximumPropagatesNan) {
  const Tensor a = FromValues(ScalarType::kFloat64, {3}, {kNan, 1, 2});
  const Tensor b = FromValues(ScalarType::kFloat64, {3}, {1, kNan, 3});
  OpRun r = RunOp("maximum", {In(a), In(b)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {kNan, kNan, 3});
  r = RunOp("minimum", {In(a), In(b)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {kNan, kNan, 2});
}

TEST(TernaryTest, WhereAllForms) {
  std::mt19937 rng(3);
  const Tensor cond = Random(ScalarType::kBool, {4, 3}, rng);
  const Tensor a = Spread(Random(ScalarType::kFloat32, {4, 3}, rng));
  const Tensor b = Random(ScalarType::kFloat32, {3}, rng);
  OpRun r = RunOp("where.self", {In(cond), In(a), In(b)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  std::vector<double> expect;
  const auto cv = Values(cond), av = Values(a), bv = Values(b);
  for (int i = 0; i < 12; ++i) expect.push_back(cv[i] ? av[i] : bv[i % 3]);
  ExpectValues(r.outputs[0], expect);
  r = RunOp("where.ScalarOther", {In(cond), In(a), Value(Scalar::Float(-7.0))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  for (int i = 0; i < 12; ++i) expect[i] = cv[i] ? av[i] : -7.0;
  ExpectValues(r.outputs[0], expect);
  r = RunOp("where.ScalarSelf", {In(cond), Value(Scalar::Float(9.0)), In(b)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  for (int i = 0; i < 12; ++i) expect[i] = cv[i] ? 9.0 : bv[i % 3];
  ExpectValues(r.outputs[0], expect);
  r = RunOp("where.Scalar", {In(cond), Value(Scalar::Int(1)), Value(Scalar::Int(0))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], cv);
}

TEST(TernaryTest, ClampAndMaskedFill) {
  const Tensor a = FromValues(ScalarType::kFloat32, {4}, {kNan, 1, 5, 2.5});
  OpRun r = RunOp("clamp", {In(a), Value(Scalar::Int(2)), Value(Scalar::Int(3))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {kNan, 2, 3, 2.5});
  r = RunOp("clamp", {In(a)}, {{"max", Value(Scalar::Float(2.0))}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {kNan, 1, 2, 2});
  r = RunOp("clamp", {In(a), Value(Scalar::Int(4)), Value(Scalar::Int(2))});  // min > max -> max
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {kNan, 2, 2, 2});
  const Tensor i = FromValues(ScalarType::kInt64, {3}, {-5, 0, 9});
  r = RunOp("clamp", {In(i), Value(Scalar::Int(-1)), Value(Scalar::Int(3))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {-1, 0, 3});

  std::mt19937 rng(4);
  const Tensor x = ReversedLayout(Random(ScalarType::kInt32, {3, 4}, rng));
  const Tensor mask = FromValues(ScalarType::kBool, {4}, {1, 0, 0, 1});
  r = RunOp("masked_fill.Scalar", {In(x), In(mask), Value(Scalar::Float(7.9))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.dtype, ScalarType::kInt32);
  std::vector<double> expect = Values(x);
  for (int k = 0; k < 12; ++k)
    if (k % 4 == 0 || k % 4 == 3) expect[k] = 7;  // 7.9 truncates in int32
  ExpectValues(r.outputs[0], expect);
}

// ---- unary -----------------------------------------------------------------------

TEST(UnaryTest, RoundingAndSign) {
  const Tensor a = FromValues(ScalarType::kFloat32, {8}, {0.5, 1.5, 2.5, -0.5, -1.7, 2.2, kNan, -0.0});
  struct Case {
    const char* op;
    std::vector<double> expect;
  } cases[] = {
      {"round", {0, 2, 2, -0.0, -2, 2, kNan, -0.0}},
      {"floor", {0, 1, 2, -1, -2, 2, kNan, -0.0}},
      {"ceil", {1, 2, 3, -0.0, -1, 3, kNan, -0.0}},
      {"trunc", {0, 1, 2, -0.0, -1, 2, kNan, -0.0}},
      {"sign", {1, 1, 1, -1, -1, 1, 0, 0}},
      {"relu", {0.5, 1.5, 2.5, 0, 0, 2.2, kNan, 0}},
      {"abs", {0.5, 1.5, 2.5, 0.5, 1.7, 2.2, kNan, 0}},
      {"neg", {-0.5, -1.5, -2.5, 0.5, 1.7, -2.2, kNan, 0}},
  };
  for (const Case& c : cases) {
    OpRun r = RunOp(c.op, {In(Spread(a))});
    ASSERT_TRUE(r.status.ok()) << c.op << ": " << r.status;
    ExpectValues(r.outputs[0], c.expect, 1e-6, 1e-6, c.op);
  }
}

TEST(UnaryTest, IntegerUnary) {
  const Tensor a = FromValues(ScalarType::kInt8, {4}, {-128, -3, 0, 7});
  OpRun r = RunOp("abs", {In(a)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {-128, 3, 0, 7});  // abs(INT8_MIN) wraps
  r = RunOp("neg", {In(a)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {-128, 3, 0, -7});
  r = RunOp("sign", {In(a)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {-1, -1, 0, 1});
  r = RunOp("bitwise_not", {In(a)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {127, 2, -1, -8});
  r = RunOp("relu", {In(a)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {0, 0, 0, 7});
  const Tensor u = FromValues(ScalarType::kUInt8, {2}, {1, 200});
  r = RunOp("neg", {In(u)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {255, 56});
  const Tensor b = FromValues(ScalarType::kBool, {2}, {1, 0});
  r = RunOp("bitwise_not", {In(b)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {0, 1});
}

TEST(UnaryTest, FloatMathOnEveryFloatDtypeAndInts) {
  std::mt19937 rng(5);
  struct Case {
    const char* op;
    double (*f)(double);
  } cases[] = {
      {"exp", [](double x) { return std::exp(x); }},
      {"log", [](double x) { return std::log(x); }},
      {"sqrt", [](double x) { return std::sqrt(x); }},
      {"rsqrt", [](double x) { return 1 / std::sqrt(x); }},
      {"sin", [](double x) { return std::sin(x); }},
      {"cos", [](double x) { return std::cos(x); }},
      {"tanh", [](double x) { return std::tanh(x); }},
      {"sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }},
      {"reciprocal", [](double x) { return 1 / x; }},
  };
  for (ScalarType dt : {ScalarType::kFloat32, ScalarType::kFloat64, ScalarType::kFloat16,
                        ScalarType::kBFloat16, ScalarType::kInt32}) {
    const Tensor a = ReversedLayout(Random(dt, {3, 7}, rng, 0.1, 4));
    for (const Case& c : cases) {
      OpRun r = RunOp(c.op, {In(a)});
      ASSERT_TRUE(r.status.ok()) << c.op << ": " << r.status;
      const ScalarType out = dt == ScalarType::kInt32 ? ScalarType::kFloat32 : dt;
      EXPECT_EQ(r.outputs[0].meta.dtype, out);
      ExpectValues(r.outputs[0], RefUnary(a, c.f), Rtol(out) * 4, Rtol(out) * 4,
                   std::string(c.op) + "/" + std::string(DtypeName(dt)));
    }
  }
}

TEST(UnaryTest, Predicates) {
  const Tensor a = FromValues(ScalarType::kFloat64, {5}, {0, kNan, INFINITY, -INFINITY, 2});
  const struct {
    const char* op;
    std::vector<double> expect;
  } cases[] = {{"isnan", {0, 1, 0, 0, 0}},
               {"isinf", {0, 0, 1, 1, 0}},
               {"isfinite", {1, 0, 0, 0, 1}},
               {"logical_not", {1, 0, 0, 0, 0}}};
  for (const auto& c : cases) {
    OpRun r = RunOp(c.op, {In(a)});
    ASSERT_TRUE(r.status.ok()) << c.op << ": " << r.status;
    EXPECT_EQ(r.outputs[0].meta.dtype, ScalarType::kBool);
    ExpectValues(r.outputs[0], c.expect, 0, 0, c.op);
  }
  const Tensor i = FromValues(ScalarType::kInt16, {2}, {0, 3});
  OpRun r = RunOp("isfinite", {In(i)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {1, 1});
}

}  // namespace
}  // namespace tensord::testing
