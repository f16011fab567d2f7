// The matmul family's CPU kernels (matmul, mm, bmm, addmm, baddbmm, dot,
// outer, linear) against reference loops in double: every rank combination
// and broadcast batch dims, every operand layout (contiguous, transposed,
// reversed, spread with an offset, expanded: BLAS in place, or packed),
// broadcast and expanded self/bias, beta/alpha (beta = 0 ignores NaN; integer
// dtypes truncate them), integer and reduced-precision dtypes, k = 0.
#include <cmath>
#include <limits>
#include <random>

#include "gtest/gtest.h"
#include "kernel_test_util.h"

namespace tensord::testing {
namespace {

// Reference matmul with NumPy/PyTorch semantics, in double.
std::vector<double> RefMatmul(const Tensor& a, const Tensor& b, Shape* out_shape) {
  Shape as = a.meta.sizes, bs = b.meta.sizes;
  const bool a1 = as.size() == 1, b1 = bs.size() == 1;
  if (a1) as.insert(as.begin(), 1);
  if (b1) bs.push_back(1);
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  Shape batch(std::max(ab.size(), bb.size()), 1);
  for (size_t i = 0; i < batch.size(); ++i) {
    const int64_t ia = static_cast<int64_t>(i) - static_cast<int64_t>(batch.size() - ab.size());
    const int64_t ib = static_cast<int64_t>(i) - static_cast<int64_t>(batch.size() - bb.size());
    const int64_t x = ia >= 0 ? ab[ia] : 1, y = ib >= 0 ? bb[ib] : 1;
    batch[i] = x == 1 ? y : x;
  }
  *out_shape = batch;
  if (!a1) out_shape->push_back(m);
  if (!b1) out_shape->push_back(n);
  std::vector<double> out;
  ForEachIndex(batch, [&](const Shape& bi) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          Shape ia = BroadcastIndex(bi, ab), ib = BroadcastIndex(bi, bb);
          if (!a1) ia.push_back(i);
          ia.push_back(p);
          ib.push_back(p);
          if (!b1) ib.push_back(j);
          acc += ReadAt(a.element(ia), a.meta.dtype) * ReadAt(b.element(ib), b.meta.dtype);
        }
        out.push_back(acc);
      }
    }
  });
  return out;
}

void CheckMatmul(const Tensor& a, const Tensor& b, const char* op = "matmul") {
  Shape shape;
  const std::vector<double> expect = RefMatmul(a, b, &shape);
  OpRun r = RunOp(op, {In(a), In(b)});
  ASSERT_TRUE(r.status.ok()) << op << " " << ShapeToString(a.meta.sizes) << " @ "
                             << ShapeToString(b.meta.sizes) << ": " << r.status;
  EXPECT_EQ(r.outputs[0].meta.sizes, shape);
  const ScalarType t = r.outputs[0].meta.dtype;
  ExpectValues(r.outputs[0], expect, Rtol(t) * 50, Rtol(t) * 50,
               ShapeToString(a.meta.sizes) + " @ " + ShapeToString(b.meta.sizes));
}

TEST(MatmulTest, EveryRankCombination) {
  std::mt19937 rng(20);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{5}, {5}},          {{5}, {5, 3}},       {{4, 5}, {5}},        {{4, 5}, {5, 3}},
      {{2, 4, 5}, {5, 3}}, {{4, 5}, {2, 5, 3}}, {{5}, {2, 5, 3}},     {{2, 4, 5}, {5}},
      {{3, 1, 4, 5}, {2, 5, 3}}, {{2, 4, 5}, {2, 5, 3}}, {{1, 4, 5}, {3, 5, 2}},
      {{4, 0}, {0, 3}},    {{0, 5}, {5, 3}},    {{2, 0, 5}, {5, 3}},
  };
  for (ScalarType dt : {ScalarType::kFloat32, ScalarType::kFloat64}) {
    for (const auto& [as, bs] : cases) {
      CheckMatmul(Random(dt, as, rng), Random(dt, bs, rng));
    }
  }
}

TEST(MatmulTest, TransposedSpreadAndExpandedOperands) {
  std::mt19937 rng(21);
  for (ScalarType dt : {ScalarType::kFloat32, ScalarType::kFloat64}) {
    const Tensor a = Random(dt, {6, 7}, rng), b = Random(dt, {7, 5}, rng);
    for (Layout la : kAllLayouts) {
      for (Layout lb : kAllLayouts) {
        CheckMatmul(WithLayout(a, la), WithLayout(b, lb));
        CheckMatmul(WithLayout(a, la), WithLayout(b, lb), "mm");
      }
    }
    // Batched with permuted batch layouts.
    const Tensor x = Random(dt, {3, 4, 6}, rng), y = Random(dt, {3, 6, 2}, rng);
    for (Layout l : kAllLayouts) {
      CheckMatmul(WithLayout(x, l), y, "bmm");
      CheckMatmul(x, WithLayout(y, l), "bmm");
    }
    // Expanded operands (stride 0 rows / batch), vector with stride 2.
    const Tensor row = Random(dt, {6}, rng);
    std::vector<double> rows;
    for (int i = 0; i < 4; ++i)
      for (double v : Values(row)) rows.push_back(v);
    const Tensor expanded = MakeStrided(dt, {4, 6}, {0, 1}, 1, rows);
    CheckMatmul(expanded, Random(dt, {6, 3}, rng));
    const Tensor exp_batch = MakeStrided(dt, {3, 6, 2}, {0, 2, 1}, 0, [&] {
      std::vector<double> v, one = RandomValues(dt, 12, rng);
      for (int i = 0; i < 3; ++i) v.insert(v.end(), one.begin(), one.end());
      return v;
    }());
    CheckMatmul(x, exp_batch);
    CheckMatmul(Spread(Random(dt, {6}, rng)), Random(dt, {6, 3}, rng));
    CheckMatmul(Random(dt, {5, 6}, rng), MakeStrided(dt, {6}, {0}, 0, std::vector<double>(6, 1.5)));
  }
}

TEST(MatmulTest, IntegerAndReducedPrecision) {
  std::mt19937 rng(22);
  for (ScalarType dt : {ScalarType::kInt64, ScalarType::kInt32, ScalarType::kUInt8,
                        ScalarType::kFloat16, ScalarType::kBFloat16}) {
    CheckMatmul(Random(dt, {3, 4}, rng), ReversedLayout(Random(dt, {4, 5}, rng)));
    CheckMatmul(Random(dt, {2, 3, 4}, rng), Random(dt, {4}, rng));
  }
}

TEST(MatmulTest, BoolIsNotImplemented) {
  const Tensor a = FromValues(ScalarType::kBool, {1, 1}, {1});
  OpRun r = RunOp("mm", {In(a), In(a)});
  EXPECT_FALSE(r.status.ok());
}

using S = ScalarType;
using KW = std::vector<std::pair<std::string, Value>>;

// mat1 [n, k] @ mat2 [k, m] (batched when 3-D) in double, row-major.
std::vector<double> RefProduct(const Tensor& a, const Tensor& b) {
  const bool batched = a.meta.dim() == 3;
  const int64_t nb = batched ? a.meta.sizes[0] : 1;
  const int64_t n = a.meta.sizes[a.meta.dim() - 2], k = a.meta.sizes[a.meta.dim() - 1];
  const int64_t m = b.meta.sizes[b.meta.dim() - 1];
  std::vector<double> out;
  for (int64_t q = 0; q < nb; ++q) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < m; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          Shape ia = batched ? Shape{q, i, p} : Shape{i, p};
          Shape ib = batched ? Shape{q, p, j} : Shape{p, j};
          acc += ReadAt(a.element(ia), a.meta.dtype) * ReadAt(b.element(ib), b.meta.dtype);
        }
        out.push_back(acc);
      }
    }
  }
  return out;
}

// beta * self (broadcast to `shape`) + alpha * product.
std::vector<double> RefAddmm(const Tensor& self, const Tensor& a, const Tensor& b, double beta, double alpha,
                             const Shape& shape) {
  std::vector<double> prod = RefProduct(a, b);
  size_t k = 0;
  ForEachIndex(shape, [&](const Shape& idx) {
    double s = beta == 0 ? 0 : beta * ReadAt(self.element(BroadcastIndex(idx, self.meta.sizes)), self.meta.dtype);
    prod[k] = s + alpha * prod[k];
    ++k;
  });
  return prod;
}

TEST(AddmmKernelTest, EveryLayoutAndBroadcastSelf) {
  std::mt19937 rng(11);
  for (S dt : {S::kFloat32, S::kFloat64, S::kInt64, S::kInt32, S::kBFloat16}) {
    const Tensor a = Random(dt, {3, 4}, rng), b = Random(dt, {4, 5}, rng);
    for (const Shape& self_shape : {Shape{3, 5}, Shape{5}, Shape{1, 5}, Shape{3, 1}, Shape{}}) {
      const Tensor self = Random(dt, self_shape, rng);
      for (Layout la : kAllLayouts) {
        for (Layout ls : kAllLayouts) {
          const Tensor al = WithLayout(a, la), bl = WithLayout(b, la == Layout::kSpread ? Layout::kReversed : la);
          const Tensor sl = WithLayout(self, ls);
          const bool is_int = IsIntegral(dt, false);
          const double beta = is_int ? 2 : 0.5, alpha = is_int ? -3 : 1.5;
          OpRun r = RunOp("addmm", {In(sl), In(al), In(bl)},
                          KW{{"beta", is_int ? Value(Scalar::Int(2)) : Value(Scalar::Float(0.5))},
                             {"alpha", is_int ? Value(Scalar::Int(-3)) : Value(Scalar::Float(1.5))}});
          ASSERT_TRUE(r.status.ok()) << r.status;
          EXPECT_EQ(r.outputs[0].meta.dtype, dt);
          ExpectValues(r.outputs[0], RefAddmm(sl, al, bl, beta, alpha, {3, 5}), Rtol(dt) * 50, Rtol(dt) * 50,
                       std::string(DtypeName(dt)) + " self " + ShapeToString(self_shape));
        }
      }
    }
  }
}

TEST(AddmmKernelTest, ExpandedSelfAndDefaults) {
  std::mt19937 rng(12);
  const Tensor a = Random(S::kFloat32, {2, 3}, rng), b = Random(S::kFloat32, {3, 4}, rng);
  const Tensor row = Random(S::kFloat32, {1, 4}, rng);
  const Tensor expanded = Restride(row, {0, 1});  // [1, 4] seen as stride 0 over rows
  Tensor self = expanded;
  self.meta.sizes = {2, 4};
  OpRun r = RunOp("addmm", {In(self), In(a), In(b)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], RefAddmm(self, a, b, 1, 1, {2, 4}), 1e-5, 1e-5);
}

TEST(AddmmKernelTest, BetaZeroIgnoresNanAndAlphaZeroStillMultipliesInf) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const Tensor self = FromValues(S::kFloat32, {2, 2}, {nan, nan, nan, nan});
  const Tensor ones23 = FromValues(S::kFloat32, {2, 3}, {1, 1, 1, 1, 1, 1});
  const Tensor ones32 = FromValues(S::kFloat32, {3, 2}, {1, 1, 1, 1, 1, 1});
  OpRun r = RunOp("addmm", {In(self), In(ones23), In(ones32)},
                  KW{{"beta", Value(Scalar::Int(0))}, {"alpha", Value(Scalar::Float(2.0))}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {6, 6, 6, 6});
  const Tensor infs = FromValues(S::kFloat32, {2, 3}, {inf, 1, 1, 1, 1, 1});
  const Tensor ones22 = FromValues(S::kFloat32, {2, 2}, {1, 1, 1, 1});
  r = RunOp("addmm", {In(ones22), In(infs), In(ones32)}, KW{{"alpha", Value(Scalar::Int(0))}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  const std::vector<double> v = Values(r.outputs[0]);
  EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]));  // 0 * inf, as PyTorch
  EXPECT_EQ(v[2], 1);
  EXPECT_EQ(v[3], 1);
}

TEST(AddmmKernelTest, IntegerOutputsTruncateFloatAlphaAndBeta) {
  const Tensor self = FromValues(S::kInt64, {1, 1}, {3});
  const Tensor a = FromValues(S::kInt64, {1, 2}, {1, 1});
  const Tensor b = FromValues(S::kInt64, {2, 1}, {1, 1});
  OpRun r = RunOp("addmm", {In(self), In(a), In(b)},
                  KW{{"beta", Value(Scalar::Float(0.5))}, {"alpha", Value(Scalar::Float(1.5))}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {2});  // 0 * 3 + 1 * 2 (PyTorch gives the same)
}

TEST(BaddbmmKernelTest, SelfOfAnotherDtypeLayoutsAndKZero) {
  std::mt19937 rng(13);
  for (S self_dt : {S::kInt64, S::kFloat64, S::kBool, S::kFloat32}) {
    for (Layout l : kAllLayouts) {
      const Tensor a = WithLayout(Random(S::kFloat32, {2, 3, 4}, rng), l);
      const Tensor b = WithLayout(Random(S::kFloat32, {2, 4, 5}, rng), l);
      const Tensor self = WithLayout(Random(self_dt, {3, 5}, rng), l);
      OpRun r = RunOp("baddbmm", {In(self), In(a), In(b)},
                      KW{{"beta", Value(Scalar::Float(2.0))}, {"alpha", Value(Scalar::Float(-1.0))}});
      ASSERT_TRUE(r.status.ok()) << r.status;
      EXPECT_EQ(r.outputs[0].meta.dtype, S::kFloat32);
      EXPECT_EQ(r.outputs[0].meta.strides, (Shape{15, 5, 1}));
      ExpectValues(r.outputs[0], RefAddmm(self, a, b, 2.0, -1.0, {2, 3, 5}), 1e-5, 1e-5,
                   std::string(DtypeName(self_dt)));
    }
  }
  const Tensor self = FromValues(S::kFloat32, {1, 1, 2}, {1, 2});
  const Tensor a = FromValues(S::kFloat32, {1, 1, 0}, {});
  const Tensor b = FromValues(S::kFloat32, {1, 0, 2}, {});
  OpRun r = RunOp("baddbmm", {In(self), In(a), In(b)}, KW{{"beta", Value(Scalar::Int(3))}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {3, 6});
}

TEST(DotKernelTest, DtypesLayoutsAndEmpty) {
  std::mt19937 rng(14);
  for (S dt : {S::kFloat32, S::kFloat64, S::kInt64, S::kInt8, S::kBFloat16}) {
    const Tensor a = Random(dt, {7}, rng, -3, 3), b = Random(dt, {7}, rng, -3, 3);
    for (Layout l : kAllLayouts) {
      const Tensor al = WithLayout(a, l), bl = WithLayout(b, l);
      OpRun r = RunOp("dot", {In(al), In(bl)});
      ASSERT_TRUE(r.status.ok()) << r.status;
      EXPECT_EQ(r.outputs[0].meta.sizes, Shape{});
      double acc = 0;
      for (int64_t i = 0; i < 7; ++i) acc += ReadAt(al.element({i}), dt) * ReadAt(bl.element({i}), dt);
      ExpectValues(r.outputs[0], {acc}, Rtol(dt) * 50, Rtol(dt) * 50, std::string(DtypeName(dt)));
    }
  }
  const Tensor e = FromValues(S::kFloat32, {0}, {});
  OpRun r = RunOp("dot", {In(e), In(e)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {0});
}

TEST(OuterKernelTest, PromotionBoolAndLayouts) {
  std::mt19937 rng(15);
  const std::pair<S, S> pairs[] = {{S::kFloat32, S::kFloat32},
                                   {S::kInt64, S::kFloat32},
                                   {S::kInt32, S::kInt64},
                                   {S::kBool, S::kBool},
                                   {S::kBFloat16, S::kFloat32}};
  for (const auto& [da, db] : pairs) {
    const Tensor a = Random(da, {3}, rng), b = Random(db, {4}, rng);
    for (Layout l : kAllLayouts) {
      const Tensor al = WithLayout(a, l), bl = WithLayout(b, l);
      OpRun r = RunOp("outer", {In(al), In(bl)});
      ASSERT_TRUE(r.status.ok()) << r.status;
      std::vector<double> expect;
      for (int64_t i = 0; i < 3; ++i) {
        for (int64_t j = 0; j < 4; ++j) expect.push_back(ReadAt(al.element({i}), da) * ReadAt(bl.element({j}), db));
      }
      ExpectValues(r.outputs[0], expect, 1e-2, 1e-2, std::string(DtypeName(da)) + "," + std::string(DtypeName(db)));
    }
  }
}

TEST(LinearKernelTest, RanksBiasAndLayouts) {
  std::mt19937 rng(16);
  struct Case {
    Shape x, w, bias;  // bias {-1}: none
  };
  const Case cases[] = {
      {{2, 3}, {4, 3}, {4}},          {{2, 3}, {4, 3}, {-1}}, {{3}, {4, 3}, {4}},       {{2, 5, 3}, {4, 3}, {4}},
      {{2, 2, 5, 3}, {4, 3}, {5, 4}}, {{2, 3}, {3}, {-1}},    {{2, 2, 2, 3}, {3}, {2}}, {{3}, {3}, {}},
      {{2, 0}, {4, 0}, {4}}};
  for (const Case& c : cases) {
    for (Layout l : kAllLayouts) {
      const Tensor x = WithLayout(Random(S::kFloat64, c.x, rng), l);
      const Tensor w = WithLayout(Random(S::kFloat64, c.w, rng), l);
      const bool has_bias = c.bias != Shape{-1};
      const Tensor bias = Random(S::kFloat64, has_bias ? c.bias : Shape{1}, rng);
      OpRun r = RunOp("linear", {In(x), In(w), has_bias ? In(bias) : Value()});
      ASSERT_TRUE(r.status.ok()) << ShapeToString(c.x) << ": " << r.status;
      // Reference: out[..., j] = sum_p x[..., p] * w[j, p] (+ bias).
      const int64_t k = c.x.back();
      Shape lead(c.x.begin(), c.x.end() - 1);
      const bool w1 = c.w.size() == 1;
      const int64_t n = w1 ? 1 : c.w[0];
      Shape shape = lead;
      if (!w1) shape.push_back(n);
      EXPECT_EQ(r.outputs[0].meta.sizes, shape);
      EXPECT_TRUE(r.outputs[0].meta.is_contiguous());
      std::vector<double> expect;
      ForEachIndex(shape, [&](const Shape& idx) {
        Shape xi(idx.begin(), idx.begin() + static_cast<int64_t>(lead.size()));
        const int64_t j = w1 ? 0 : idx.back();
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          Shape xx = xi;
          xx.push_back(p);
          acc += ReadAt(x.element(xx), S::kFloat64) * ReadAt(w.element(w1 ? Shape{p} : Shape{j, p}), S::kFloat64);
        }
        if (has_bias) acc += ReadAt(bias.element(BroadcastIndex(idx, bias.meta.sizes)), S::kFloat64);
        expect.push_back(acc);
      });
      ExpectValues(r.outputs[0], expect, 1e-12, 1e-12, ShapeToString(c.x));
    }
  }
}

TEST(MatmulFamilyKernelTest, RefusedCallsAreErrorsNotCrashes) {
  const Tensor a = FromValues(S::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor b = FromValues(S::kFloat64, {3, 2}, {1, 2, 3, 4, 5, 6});
  EXPECT_FALSE(RunOp("addmm", {In(a), In(a), In(b)}).status.ok());
  const Tensor h = FromValues(S::kFloat16, {1, 2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor f = FromValues(S::kFloat32, {1, 3, 2}, {1, 2, 3, 4, 5, 6});
  EXPECT_FALSE(RunOp("bmm", {In(h), In(f)}).status.ok());
  EXPECT_FALSE(RunOp("baddbmm", {In(f), In(f), In(h)}).status.ok());
  EXPECT_FALSE(RunOp("dot", {In(a), In(a)}).status.ok());
  EXPECT_FALSE(RunOp("outer", {In(a), In(a)}).status.ok());
  EXPECT_FALSE(RunOp("linear", {In(a), In(h)}).status.ok());
}

}  // namespace
}  // namespace tensord::testing
