// matmul / mm / bmm against a reference triple loop: every rank combination,
// broadcast batch dims, transposed / spread / expanded operands (BLAS in
// place, or packed), integer and reduced-precision dtypes, k = 0.
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

}  // namespace
}  // namespace tensord::testing
