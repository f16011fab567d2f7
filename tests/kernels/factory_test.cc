// CPU kernels of the factories linspace (PyTorch's two-sided
// rule and integer truncation; expected values are torch 1.13's output for
// the same call), randint / randint.low (range, dtypes, seeding) and
// empty_strided (exact strides, zero-filled storage of the right size).
#include <cmath>
#include <set>

#include "gtest/gtest.h"
#include "kernel_test_util.h"

namespace tensord::testing {
namespace {

using Ints = std::vector<int64_t>;

TEST(LinspaceKernelTest, FloatAndIntegerRules) {
  OpRun r = RunOp("linspace", {Value(Scalar::Int(0)), Value(Scalar::Int(10)), Value(int64_t{5})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {0, 2.5, 5, 7.5, 10}, 0, 0);
  // torch.linspace(-1.7, 10.3, 7, dtype=torch.int32) -> [-1, 0, 2, 4, 6, 8, 10]
  r = RunOp("linspace", {Value(Scalar::Float(-1.7)), Value(Scalar::Float(10.3)), Value(int64_t{7})},
            {{"dtype", Value(ScalarType::kInt32)}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {-1, 0, 2, 4, 6, 8, 10}, 0, 0);
  // torch.linspace(0, 10, 4, dtype=torch.int64) -> [0, 3, 6, 10]
  r = RunOp("linspace", {Value(Scalar::Int(0)), Value(Scalar::Int(10)), Value(int64_t{4})},
            {{"dtype", Value(ScalarType::kInt64)}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {0, 3, 6, 10}, 0, 0);
  // torch.linspace(-1, 3, 5, dtype=torch.uint8) -> [255, 192, 129, 66, 3] (-1 wraps first)
  r = RunOp("linspace", {Value(Scalar::Int(-1)), Value(Scalar::Int(3)), Value(int64_t{5})},
            {{"dtype", Value(ScalarType::kUInt8)}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {255, 192, 129, 66, 3}, 0, 0);
  // one step is start; zero steps is empty; both ends are exact
  r = RunOp("linspace", {Value(Scalar::Float(2.5)), Value(Scalar::Int(9)), Value(int64_t{1})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {2.5}, 0, 0);
  r = RunOp("linspace", {Value(Scalar::Int(3)), Value(Scalar::Int(1)), Value(int64_t{0})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.numel(), 0);
  r = RunOp("linspace", {Value(Scalar::Float(0.1)), Value(Scalar::Float(0.7)), Value(int64_t{1001})},
            {{"dtype", Value(ScalarType::kFloat64)}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  const std::vector<double> v = Values(r.outputs[0]);
  EXPECT_EQ(v.front(), 0.1);
  EXPECT_EQ(v.back(), 0.7);
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(v[i], 0.1 + 0.6 * i / 1000.0, 1e-15);
}

TEST(RandintKernelTest, RangeDtypesAndSeeding) {
  Generator g1, g2;
  g1.engine.seed(5);
  g2.engine.seed(5);
  OpRun a = RunOp("randint.low", {Value(int64_t{-3}), Value(int64_t{4}), Value(Ints{40, 25})}, {}, &g1);
  OpRun b = RunOp("randint.low", {Value(int64_t{-3}), Value(int64_t{4}), Value(Ints{40, 25})}, {}, &g2);
  ASSERT_TRUE(a.status.ok()) << a.status;
  EXPECT_EQ(a.outputs[0].meta.dtype, ScalarType::kInt64);
  EXPECT_EQ(Values(a.outputs[0]), Values(b.outputs[0]));
  std::set<double> seen;
  for (double x : Values(a.outputs[0])) {
    ASSERT_GE(x, -3);
    ASSERT_LT(x, 4);
    seen.insert(x);
  }
  EXPECT_EQ(seen.size(), 7u);
  for (ScalarType dt : {ScalarType::kBool, ScalarType::kUInt8, ScalarType::kInt8, ScalarType::kInt16,
                        ScalarType::kInt32, ScalarType::kFloat16, ScalarType::kBFloat16, ScalarType::kFloat32,
                        ScalarType::kFloat64}) {
    OpRun r = RunOp("randint", {Value(int64_t{2}), Value(Ints{300})}, {{"dtype", Value(dt)}}, &g1);
    ASSERT_TRUE(r.status.ok()) << r.status;
    std::set<double> s;
    for (double x : Values(r.outputs[0])) s.insert(x);
    EXPECT_EQ(s, (std::set<double>{0, 1})) << DtypeName(dt);
  }
  // The full int64 range does not overflow.
  OpRun w = RunOp("randint.low", {Value(std::numeric_limits<int64_t>::min()), Value(std::numeric_limits<int64_t>::max()),
                                  Value(Ints{64})}, {}, &g1);
  ASSERT_TRUE(w.status.ok()) << w.status;
  // Bounds errors come from the meta function, before any kernel.
  OpRun bad = RunOp("randint", {Value(int64_t{0}), Value(Ints{3})});
  EXPECT_FALSE(bad.status.ok());
}

TEST(EmptyStridedKernelTest, ExactStridesZeroFilled) {
  OpRun r = RunOp("empty_strided", {Value(Ints{2, 3}), Value(Ints{10, 2})}, {{"dtype", Value(ScalarType::kInt32)}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.strides, (Shape{10, 2}));
  ExpectValues(r.outputs[0], std::vector<double>(6, 0), 0, 0);
  r = RunOp("empty_strided", {Value(Ints{3, 4}), Value(Ints{0, 0})}, {{"dtype", Value(ScalarType::kFloat8_e5m2)}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], std::vector<double>(12, 0), 0, 0);
  r = RunOp("empty_strided", {Value(Ints{0, 4}), Value(Ints{9, 1})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.numel(), 0);
}

}  // namespace
}  // namespace tensord::testing
