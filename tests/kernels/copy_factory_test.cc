// Copies and conversions (clone, contiguous, reshape/flatten copies,
// to.dtype including float8, to.device), cat, stack, and the factories
// (zeros, ones, full, arange, eye, empty, rand, randn and *_like).
#include <cmath>
#include <limits>

#include "gtest/gtest.h"
#include "kernel_test_util.h"

namespace tensord::testing {
namespace {

const double kNan = std::numeric_limits<double>::quiet_NaN();

TEST(CopyTest, CloneAndContiguousKeepValues) {
  std::mt19937 rng(40);
  for (ScalarType dt : {ScalarType::kFloat32, ScalarType::kInt16, ScalarType::kBool,
                        ScalarType::kBFloat16, ScalarType::kFloat8_e4m3fn}) {
    const Tensor base = Random(dt, {3, 4, 5}, rng, -3, 3);
    for (Layout l : kAllLayouts) {
      const Tensor a = WithLayout(base, l);
      OpRun r = RunOp("clone", {In(a)});
      ASSERT_TRUE(r.status.ok()) << r.status;
      ExpectValues(r.outputs[0], Values(base), 0, 0, "clone");
      r = RunOp("contiguous", {In(a)});
      ASSERT_TRUE(r.status.ok()) << r.status;
      EXPECT_TRUE(r.outputs[0].meta.is_contiguous());
      EXPECT_EQ(r.aliased, l == Layout::kContiguous);
      ExpectValues(r.outputs[0], Values(base), 0, 0, "contiguous");
    }
  }
}

TEST(CopyTest, LargeTransposedCopiesAndAdds) {
  std::mt19937 rng(43);
  const Tensor base = Random(ScalarType::kFloat32, {300, 170}, rng);
  const Tensor t = ReversedLayout(base);
  OpRun r = RunOp("contiguous", {In(t)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], Values(base), 0, 0);
  const Tensor other = Random(ScalarType::kFloat32, {300, 170}, rng);
  r = RunOp("add.Tensor", {In(other), In(t)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  std::vector<double> expect = Values(other);
  const std::vector<double> bv = Values(base);
  for (size_t i = 0; i < expect.size(); ++i) expect[i] = static_cast<float>(expect[i] + bv[i]);
  ExpectValues(r.outputs[0], expect, 0, 0);
}

TEST(CopyTest, ReshapeAndFlattenCopyInRowMajorOrder) {
  std::mt19937 rng(41);
  const Tensor base = Random(ScalarType::kFloat64, {4, 6}, rng);
  const Tensor t = ReversedLayout(base);  // cannot be viewed as [3, 8]
  OpRun r = RunOp("reshape", {In(t), Value(std::vector<int64_t>{3, 8})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_FALSE(r.aliased);
  EXPECT_EQ(r.outputs[0].meta.sizes, (Shape{3, 8}));
  ExpectValues(r.outputs[0], Values(base), 0, 0);
  r = RunOp("flatten.using_ints", {In(Spread(base))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.sizes, (Shape{24}));
  ExpectValues(r.outputs[0], Values(base), 0, 0);
}

TEST(CopyTest, ToDtypeConversions) {
  const Tensor f = FromValues(ScalarType::kFloat32, {6}, {-1.5, 300, kNan, 0.1, 2.5, -0.0});
  struct Case {
    ScalarType to;
    std::vector<double> expect;
  } cases[] = {
      {ScalarType::kUInt8, {255, 44, 0, 0, 2, 0}},
      {ScalarType::kInt8, {-1, 44, 0, 0, 2, 0}},
      {ScalarType::kInt64, {-1, 300, static_cast<double>(std::numeric_limits<int64_t>::min()), 0, 2, 0}},
      {ScalarType::kBool, {1, 1, 1, 1, 1, 0}},
      {ScalarType::kFloat16, {-1.5, 300, kNan, 0.0999755859375, 2.5, 0}},
      {ScalarType::kBFloat16, {-1.5, 300, kNan, 0.10009765625, 2.5, 0}},
      {ScalarType::kFloat8_e4m3fn, {-1.5, 288, kNan, 0.1015625, 2.5, 0}},
      {ScalarType::kFloat8_e5m2, {-1.5, 320, kNan, 0.09375, 2.5, 0}},
      {ScalarType::kFloat64, {-1.5, 300, kNan, static_cast<double>(0.1f), 2.5, 0}},
  };
  for (const Case& c : cases) {
    OpRun r = RunOp("to.dtype", {In(Spread(f)), Value(c.to)});
    ASSERT_TRUE(r.status.ok()) << DtypeName(c.to) << ": " << r.status;
    EXPECT_EQ(r.outputs[0].meta.dtype, c.to);
    ExpectValues(r.outputs[0], c.expect, 0, 0, std::string(DtypeName(c.to)));
  }
  // Integer narrowing wraps; bool becomes 0/1.
  const Tensor i = FromValues(ScalarType::kInt64, {3}, {257, -1, 0});
  OpRun r = RunOp("to.dtype", {In(i), Value(ScalarType::kUInt8)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {1, 255, 0});
  r = RunOp("to.dtype", {In(i), Value(ScalarType::kBool)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {1, 1, 0});
  // Same dtype without copy=True aliases.
  r = RunOp("to.dtype", {In(i), Value(ScalarType::kInt64)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_TRUE(r.aliased);
}

TEST(CopyTest, ToDeviceCopiesOnCpu) {
  const Tensor f = FromValues(ScalarType::kFloat32, {3}, {1, 2, 3});
  OpRun r = RunOp("to.device", {In(f), Value(kCPU), Value(ScalarType::kFloat64)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.dtype, ScalarType::kFloat64);
  ExpectValues(r.outputs[0], {1, 2, 3});
}

TEST(CopyTest, CatAndStack) {
  std::mt19937 rng(42);
  const Tensor a = Random(ScalarType::kFloat32, {2, 3}, rng);
  const Tensor b = ReversedLayout(Random(ScalarType::kFloat32, {4, 3}, rng));
  const Tensor empty = FromValues(ScalarType::kFloat32, {0}, {});
  OpRun r = RunOp("cat", {InList({&a, &empty, &b})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.sizes, (Shape{6, 3}));
  std::vector<double> expect = Values(a);
  for (double v : Values(b)) expect.push_back(v);
  ExpectValues(r.outputs[0], expect, 0, 0, "cat dim 0");
  const Tensor c = Spread(Random(ScalarType::kFloat32, {2, 2}, rng));
  r = RunOp("cat", {InList({&a, &c}), Value(int64_t{-1})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.sizes, (Shape{2, 5}));
  expect.clear();
  const auto av = Values(a), cv = Values(c);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) expect.push_back(av[i * 3 + j]);
    for (int j = 0; j < 2; ++j) expect.push_back(cv[i * 2 + j]);
  }
  ExpectValues(r.outputs[0], expect, 0, 0, "cat dim 1");
  // Mixed dtypes promote.
  const Tensor ints = FromValues(ScalarType::kInt64, {2}, {1, 2});
  const Tensor floats = FromValues(ScalarType::kFloat32, {2}, {1.5, 2});
  r = RunOp("cat", {InList({&ints, &floats})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.dtype, ScalarType::kFloat32);
  ExpectValues(r.outputs[0], {1, 2, 1.5, 2});
  for (int64_t d : {0, 1, 2, -1}) {
    const Tensor x = Random(ScalarType::kInt32, {2, 3}, rng), y = ReversedLayout(Random(ScalarType::kInt32, {2, 3}, rng));
    r = RunOp("stack", {InList({&x, &y}), Value(d)});
    ASSERT_TRUE(r.status.ok()) << r.status;
    const int64_t dd = d < 0 ? d + 3 : d;
    Shape os = {2, 3};
    os.insert(os.begin() + dd, 2);
    EXPECT_EQ(r.outputs[0].meta.sizes, os);
    expect.clear();
    ForEachIndex(os, [&](const Shape& i) {
      Shape s = i;
      s.erase(s.begin() + dd);
      expect.push_back(ReadAt((i[dd] == 0 ? x : y).element(s), ScalarType::kInt32));
    });
    ExpectValues(r.outputs[0], expect, 0, 0, "stack");
  }
}

TEST(FactoryTest, FillsAndRanges) {
  const std::vector<int64_t> size = {2, 3};
  OpRun r = RunOp("zeros", {Value(size)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], std::vector<double>(6, 0));
  r = RunOp("empty", {Value(size)}, {{"dtype", Value(ScalarType::kInt32)}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], std::vector<double>(6, 0));  // never leaks old bytes
  r = RunOp("ones", {Value(size)}, {{"dtype", Value(ScalarType::kFloat16)}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], std::vector<double>(6, 1));
  r = RunOp("full", {Value(size), Value(Scalar::Float(2.5))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.dtype, ScalarType::kFloat32);
  ExpectValues(r.outputs[0], std::vector<double>(6, 2.5));
  r = RunOp("full", {Value(size), Value(Scalar::Bool(true))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.dtype, ScalarType::kBool);
  ExpectValues(r.outputs[0], std::vector<double>(6, 1));
  r = RunOp("arange", {Value(Scalar::Int(5))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.dtype, ScalarType::kInt64);
  ExpectValues(r.outputs[0], {0, 1, 2, 3, 4});
  r = RunOp("arange.start", {Value(Scalar::Int(0)), Value(Scalar::Int(1)), Value(Scalar::Float(0.1))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.sizes, (Shape{10}));
  std::vector<double> expect;
  for (int i = 0; i < 10; ++i) expect.push_back(static_cast<float>(0.1 * i));
  ExpectValues(r.outputs[0], expect, 0, 0);
  r = RunOp("arange.start", {Value(Scalar::Int(10)), Value(Scalar::Int(0)), Value(Scalar::Int(-3))},
            {{"dtype", Value(ScalarType::kInt16)}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {10, 7, 4, 1});
  r = RunOp("eye", {Value(int64_t{3}), Value(int64_t{4})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0});
  r = RunOp("eye", {Value(int64_t{2})}, {{"dtype", Value(ScalarType::kBool)}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {1, 0, 0, 1});
}

TEST(FactoryTest, LikeForms) {
  const Tensor t = ReversedLayout(FromValues(ScalarType::kFloat64, {2, 3}, {1, 2, 3, 4, 5, 6}));
  OpRun r = RunOp("full_like", {In(t), Value(Scalar::Int(7))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.dtype, ScalarType::kFloat64);
  ExpectValues(r.outputs[0], std::vector<double>(6, 7));
  for (const char* op : {"zeros_like", "empty_like"}) {
    r = RunOp(op, {In(t)});
    ASSERT_TRUE(r.status.ok()) << r.status;
    ExpectValues(r.outputs[0], std::vector<double>(6, 0));
  }
  r = RunOp("ones_like", {In(t)}, {{"dtype", Value(ScalarType::kInt8)}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.dtype, ScalarType::kInt8);
  ExpectValues(r.outputs[0], std::vector<double>(6, 1));
}

TEST(FactoryTest, RandomOpsUseTheSessionGenerator) {
  Generator g1, g2;
  g1.engine.seed(123);
  g2.engine.seed(123);
  const std::vector<int64_t> size = {100, 50};
  OpRun a = RunOp("rand", {Value(size)}, {}, &g1);
  OpRun b = RunOp("rand", {Value(size)}, {}, &g2);
  ASSERT_TRUE(a.status.ok()) << a.status;
  ASSERT_TRUE(b.status.ok()) << b.status;
  const auto av = Values(a.outputs[0]), bv = Values(b.outputs[0]);
  EXPECT_EQ(av, bv);  // same seed, same values
  double mean = 0;
  for (double v : av) {
    ASSERT_GE(v, 0.0);
    ASSERT_LT(v, 1.0);
    mean += v;
  }
  mean /= av.size();
  EXPECT_NEAR(mean, 0.5, 0.02);
  OpRun c = RunOp("rand", {Value(size)}, {}, &g1);
  EXPECT_NE(Values(c.outputs[0]), av);  // the generator advanced
  for (ScalarType dt : {ScalarType::kFloat16, ScalarType::kBFloat16, ScalarType::kFloat64}) {
    OpRun h = RunOp("rand", {Value(size)}, {{"dtype", Value(dt)}}, &g1);
    ASSERT_TRUE(h.status.ok()) << h.status;
    for (double v : Values(h.outputs[0])) {
      ASSERT_GE(v, 0.0);
      ASSERT_LT(v, 1.0);
    }
  }
  OpRun n = RunOp("randn", {Value(std::vector<int64_t>{20000})}, {{"dtype", Value(ScalarType::kFloat64)}}, &g1);
  ASSERT_TRUE(n.status.ok()) << n.status;
  double m = 0, var = 0;
  const auto nv = Values(n.outputs[0]);
  for (double v : nv) m += v;
  m /= nv.size();
  for (double v : nv) var += (v - m) * (v - m);
  var /= nv.size();
  EXPECT_NEAR(m, 0.0, 0.05);
  EXPECT_NEAR(var, 1.0, 0.05);
  const Tensor t = FromValues(ScalarType::kFloat32, {3, 4}, std::vector<double>(12, 9));
  OpRun l = RunOp("randn_like", {In(t)}, {}, &g1);
  ASSERT_TRUE(l.status.ok()) << l.status;
  EXPECT_EQ(l.outputs[0].meta.sizes, (Shape{3, 4}));
  OpRun u = RunOp("rand_like", {In(t)}, {}, &g1);
  ASSERT_TRUE(u.status.ok()) << u.status;
  for (double v : Values(u.outputs[0])) EXPECT_LT(v, 1.0);
}

}  // namespace
}  // namespace tensord::testing
