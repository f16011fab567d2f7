// CPU kernels of the in-place ops: they write into self's storage (the
// harness, like the daemon, passes self as the output), including when
// another input overlaps self or the result dtype differs;
// copy_/zero_/fill_/uniform_/normal_; clamp_, masked_fill_, addcmul_,
// addcdiv_. Expected values are computed here from the definitions (or are
// literals PyTorch 1.13 printed, noted in comments).
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernel_test_util.h"

namespace tensord::testing {
namespace {

using S = ScalarType;

TEST(InPlaceTest, WritesIntoSelfStorageForEveryLayout) {
  std::mt19937 rng(7);
  for (Layout l : kAllLayouts) {
    const Tensor a0 = Random(S::kFloat32, {3, 4}, rng);
    const Tensor b = Random(S::kFloat32, {1, 4}, rng);
    Tensor a = WithLayout(a0, l);
    const std::vector<double> av = Values(a), bv = Values(b);
    OpRun r = RunOp("add_.Tensor", {In(a), In(b)}, {{"alpha", Value(Scalar::Int(2))}});
    ASSERT_TRUE(r.status.ok()) << r.status;
    ASSERT_TRUE(r.aliased);
    EXPECT_EQ(r.outputs[0].storage, a.storage);  // the same memory
    std::vector<double> expected;
    for (int64_t i = 0; i < 12; ++i) expected.push_back(av[i] + 2 * bv[i % 4]);
    ExpectValues(a, expected);
  }
}

TEST(InPlaceTest, EveryBinaryFormMatchesItsOutOfPlaceOp) {
  std::mt19937 rng(8);
  const Tensor x = Random(S::kFloat32, {2, 3}, rng, 0.5, 3);
  const Tensor y = Random(S::kFloat32, {2, 3}, rng, 0.5, 3);
  const char* pairs[][2] = {{"add_.Tensor", "add.Tensor"}, {"sub_.Tensor", "sub.Tensor"},
                            {"mul_.Tensor", "mul.Tensor"}, {"div_.Tensor", "div.Tensor"}};
  for (const auto& p : pairs) {
    OpRun want = RunOp(p[1], {In(x), In(y)});
    ASSERT_TRUE(want.status.ok()) << want.status;
    Tensor self = Restride(x, ContiguousStrides(x.meta.sizes));
    OpRun got = RunOp(p[0], {In(self), In(y)});
    ASSERT_TRUE(got.status.ok()) << p[0] << ": " << got.status;
    ExpectValues(self, Values(want.outputs[0]), -1, -1, p[0]);
  }
  const char* scalar_pairs[][2] = {{"add_.Scalar", "add.Scalar"}, {"sub_.Scalar", "sub.Scalar"},
                                   {"mul_.Scalar", "mul.Scalar"}, {"div_.Scalar", "div.Scalar"}};
  for (const auto& p : scalar_pairs) {
    OpRun want = RunOp(p[1], {In(x), Value(Scalar::Float(1.5))});
    ASSERT_TRUE(want.status.ok()) << want.status;
    Tensor self = Restride(x, ContiguousStrides(x.meta.sizes));
    OpRun got = RunOp(p[0], {In(self), Value(Scalar::Float(1.5))});
    ASSERT_TRUE(got.status.ok()) << p[0] << ": " << got.status;
    ExpectValues(self, Values(want.outputs[0]), -1, -1, p[0]);
  }
}

TEST(InPlaceTest, ResultIsCastToSelfDtype) {
  // float32 self += float64 tensor: computed in float64, stored as float32.
  Tensor self = FromValues(S::kFloat32, {3}, {1, 2, 3});
  const Tensor other = FromValues(S::kFloat64, {3}, {0.25, 0.5, 0.75});
  OpRun r = RunOp("add_.Tensor", {In(self), In(other)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(self.meta.dtype, S::kFloat32);
  ExpectValues(self, {1.25, 2.5, 3.75});
  // int64 self *= int: stays exact.
  Tensor ints = FromValues(S::kInt64, {2}, {3, -4});
  ASSERT_TRUE(RunOp("mul_.Scalar", {In(ints), Value(Scalar::Int(3))}).status.ok());
  ExpectValues(ints, {9, -12});
}

TEST(InPlaceTest, OverlappingInputsAreReadBeforeSelfIsWritten) {
  // self += self.t(): reads of the transposed view must see the old values.
  Tensor a = FromValues(S::kFloat32, {3, 3}, Seq(9));
  Tensor at;
  at.storage = a.storage;
  at.meta = a.meta;
  at.meta.strides = {1, 3};
  OpRun r = RunOp("add_.Tensor", {In(a), In(at)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  std::vector<double> expected;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) expected.push_back((i * 3 + j) + (j * 3 + i));
  }
  ExpectValues(a, expected);
  // self *= self (same layout) is elementwise safe.
  Tensor b = FromValues(S::kFloat32, {4}, {1, 2, 3, 4});
  ASSERT_TRUE(RunOp("mul_.Tensor", {In(b), In(b)}).status.ok());
  ExpectValues(b, {1, 4, 9, 16});
}

TEST(InPlaceTest, ErrorsFollowPyTorch) {
  Tensor l = FromValues(S::kInt64, {3}, {1, 2, 3});
  const Tensor f = FromValues(S::kFloat32, {3}, {1, 2, 3});
  ExpectErrorContains(RunOp("add_.Tensor", {In(l), In(f)}), "result type Float can't be cast to the desired output type Long");
  ExpectErrorContains(RunOp("div_.Scalar", {In(l), Value(Scalar::Int(2))}), "result type Float can't be cast");
  const Tensor wide = FromValues(S::kFloat32, {2, 3}, Seq(6));
  Tensor small = FromValues(S::kFloat32, {3}, {0, 0, 0});
  ExpectErrorContains(RunOp("add_.Tensor", {In(small), In(wide)}),
                      "output with shape [3] doesn't match the broadcast shape [2, 3]");
  Tensor expanded = FromValues(S::kFloat32, {1}, {0});
  expanded.meta.sizes = {3};
  expanded.meta.strides = {0};
  ExpectErrorContains(RunOp("add_.Scalar", {In(expanded), Value(Scalar::Int(1))}),
                      "more than one element of the written-to tensor refers to a single memory location");
  ExpectErrorContains(RunOp("uniform_", {In(expanded)}), "more than one element");
  ExpectErrorContains(RunOp("copy_", {In(expanded), In(f)}), "more than one element");
  // fill_ and zero_ accept expanded tensors (PyTorch does too).
  EXPECT_TRUE(RunOp("fill_.Scalar", {In(expanded), Value(Scalar::Int(4))}).status.ok());
  ExpectValues(expanded, {4, 4, 4});
}

TEST(InPlaceTest, ClampMaskedFillAddcmulAddcdiv) {
  Tensor a = FromValues(S::kFloat32, {4}, {-2, -0.5, 0.5, 2});
  ASSERT_TRUE(RunOp("clamp_", {In(a), Value(Scalar::Int(-1)), Value(Scalar::Int(1))}).status.ok());
  ExpectValues(a, {-1, -0.5, 0.5, 1});
  Tensor b = FromValues(S::kInt64, {2, 2}, {1, 2, 3, 4});
  const Tensor mask = FromValues(S::kBool, {2}, {1, 0});
  ASSERT_TRUE(RunOp("masked_fill_.Scalar", {In(b), In(mask), Value(Scalar::Int(9))}).status.ok());
  ExpectValues(b, {9, 2, 9, 4});
  const Tensor t1 = FromValues(S::kFloat32, {3}, {1, 2, 3});
  const Tensor t2 = FromValues(S::kFloat32, {3}, {4, 5, 6});
  const Tensor s = FromValues(S::kFloat32, {3}, {1, 1, 1});
  OpRun m = RunOp("addcmul", {In(s), In(t1), In(t2)}, {{"value", Value(Scalar::Float(0.5))}});
  ASSERT_TRUE(m.status.ok()) << m.status;
  ExpectValues(m.outputs[0], {3, 6, 10});
  OpRun d = RunOp("addcdiv", {In(s), In(t1), In(t2)}, {{"value", Value(Scalar::Int(2))}});
  ASSERT_TRUE(d.status.ok()) << d.status;
  ExpectValues(d.outputs[0], {1.5, 1.8, 2});
  Tensor self = FromValues(S::kFloat32, {3}, {1, 1, 1});
  ASSERT_TRUE(RunOp("addcdiv_", {In(self), In(t1), In(t2)}).status.ok());
  ExpectValues(self, {1.25, 1.4, 1.5});
  Tensor self2 = FromValues(S::kFloat32, {3}, {1, 1, 1});
  ASSERT_TRUE(RunOp("addcmul_", {In(self2), In(t1), In(t2)}).status.ok());
  ExpectValues(self2, {5, 11, 19});
  const Tensor i1 = FromValues(S::kInt64, {3}, {1, 2, 3});
  ExpectErrorContains(RunOp("addcdiv", {In(s), In(i1), In(i1)}), "Integer division with addcdiv is no longer supported");
}

TEST(InPlaceTest, CopyZeroFill) {
  // copy_ broadcasts and converts.
  Tensor dst = FromValues(S::kInt32, {2, 3}, Seq(6));
  const Tensor src = FromValues(S::kFloat64, {3}, {1.7, -2.2, 3});
  ASSERT_TRUE(RunOp("copy_", {In(dst), In(src)}).status.ok());
  ExpectValues(dst, {1, -2, 3, 1, -2, 3});
  // copy_ from an overlapping view: self = self.t() on a 3x3.
  Tensor a = FromValues(S::kFloat32, {3, 3}, Seq(9));
  Tensor at;
  at.storage = a.storage;
  at.meta = a.meta;
  at.meta.strides = {1, 3};
  ASSERT_TRUE(RunOp("copy_", {In(a), In(at)}).status.ok());
  ExpectValues(a, {0, 3, 6, 1, 4, 7, 2, 5, 8});
  Tensor z = Spread(FromValues(S::kFloat16, {2, 2}, {1, 2, 3, 4}));
  ASSERT_TRUE(RunOp("zero_", {In(z)}).status.ok());
  ExpectValues(z, {0, 0, 0, 0});
  ASSERT_TRUE(RunOp("fill_.Scalar", {In(z), Value(Scalar::Float(2.5))}).status.ok());
  ExpectValues(z, {2.5, 2.5, 2.5, 2.5});
  Tensor i8 = FromValues(S::kInt8, {2}, {0, 0});
  ExpectErrorContains(RunOp("fill_.Scalar", {In(i8), Value(Scalar::Int(300))}), "without overflow");
}

TEST(InPlaceTest, UniformAndNormalFillSelfFromTheGenerator) {
  Generator g1, g2;
  Tensor a = ReversedLayout(FromValues(S::kFloat32, {50, 40}, std::vector<double>(2000, 0)));
  ASSERT_TRUE(RunOp("uniform_", {In(a), Value(-2.0), Value(3.0)}, {}, &g1).status.ok());
  const std::vector<double> v = Values(a);
  double mean = 0;
  for (double x : v) {
    EXPECT_GE(x, -2.0);
    EXPECT_LT(x, 3.0);
    mean += x / 2000;
  }
  EXPECT_NEAR(mean, 0.5, 0.2);  // 2000 draws: the standard error is ~0.03
  Tensor b = FromValues(S::kFloat64, {4000}, std::vector<double>(4000, 0));
  ASSERT_TRUE(RunOp("normal_", {In(b), Value(10.0), Value(2.0)}, {}, &g2).status.ok());
  double m = 0, sq = 0;
  for (double x : Values(b)) {
    m += x / 4000;
    sq += x * x / 4000;
  }
  EXPECT_NEAR(m, 10.0, 0.2);
  EXPECT_NEAR(std::sqrt(sq - m * m), 2.0, 0.2);
  Tensor l = FromValues(S::kInt64, {2}, {0, 0});
  ExpectErrorContains(RunOp("normal_", {In(l)}), "not implemented for 'Long'");
  Tensor f = FromValues(S::kFloat32, {2}, {0, 0});
  ExpectErrorContains(RunOp("uniform_", {In(f), Value(1.0), Value(0.0)}), "from=1 > to=0");
  ExpectErrorContains(RunOp("normal_", {In(f), Value(0.0), Value(-1.0)}), "normal expects std >= 0.0, but found std -1");
}

}  // namespace
}  // namespace tensord::testing
