// Reduction kernels against reference loops: dim lists, negative dims,
// keepdim, non-contiguous inputs, integer accumulation, NaN propagation,
// first-occurrence indices and the empty-reduction errors.
#include <cmath>
#include <cstring>
#include <limits>

#include "gtest/gtest.h"
#include "kernel_test_util.h"

namespace tensord::testing {
namespace {

const double kNan = std::numeric_limits<double>::quiet_NaN();

// Reference reduction: folds every element of `t` into its output slot.
std::vector<double> RefReduce(const Tensor& t, const std::vector<bool>& mask, double init,
                              const std::function<double(double, double)>& f,
                              std::vector<int64_t>* counts = nullptr) {
  Shape kept;
  for (int64_t d = 0; d < t.meta.dim(); ++d) {
    if (!mask[d]) kept.push_back(t.meta.sizes[d]);
  }
  int64_t n = 1;
  for (int64_t s : kept) n *= s;
  std::vector<double> acc(static_cast<size_t>(n), init);
  std::vector<int64_t> cnt(static_cast<size_t>(n), 0);
  const Shape ks = ContiguousStrides(kept);
  ForEachIndex(t.meta.sizes, [&](const Shape& i) {
    int64_t o = 0, k = 0;
    for (int64_t d = 0; d < t.meta.dim(); ++d)
      if (!mask[d]) o += i[d] * ks[k++];
    acc[o] = f(acc[o], ReadAt(t.element(i), t.meta.dtype));
    ++cnt[o];
  });
  if (counts) *counts = cnt;
  return acc;
}

std::vector<bool> MaskOf(int64_t rank, std::vector<int64_t> dims) {
  std::vector<bool> m(rank, dims.empty());
  for (int64_t d : dims) m[(d + rank) % rank] = true;
  return m;
}

TEST(SumTest, DimsLayoutsAndDtypes) {
  std::mt19937 rng(10);
  const std::vector<std::vector<int64_t>> dim_sets = {{}, {0}, {1}, {-1}, {0, 2}, {1, 2}, {0, 1, 2}};
  for (ScalarType dt : {ScalarType::kFloat32, ScalarType::kFloat64, ScalarType::kInt32,
                        ScalarType::kFloat16, ScalarType::kBool}) {
    const Tensor base = Random(dt, {4, 5, 6}, rng);
    for (Layout l : kAllLayouts) {
      const Tensor a = WithLayout(base, l);
      for (const auto& dims : dim_sets) {
        for (bool keepdim : {false, true}) {
          OpRun r = RunOp("sum", {In(a), Value(dims), Value(keepdim)});
          ASSERT_TRUE(r.status.ok()) << r.status;
          const ScalarType out_t = IsIntegral(dt, true) ? ScalarType::kInt64 : dt;
          EXPECT_EQ(r.outputs[0].meta.dtype, out_t);
          const auto expect = RefReduce(a, MaskOf(3, dims), 0, [](double x, double y) { return x + y; });
          ExpectValues(r.outputs[0], expect, Rtol(out_t) * 10, Rtol(out_t) * 100,
                       "sum " + std::string(DtypeName(dt)));
          EXPECT_EQ(r.outputs[0].meta.dim(), keepdim ? 3 : 3 - (dims.empty() ? 3 : static_cast<int64_t>(dims.size())));
        }
      }
    }
  }
}

// Long contiguous runs take the blocked path (fixed blocks of 32,768
// elements summed in double, split across threads, combined pairwise):
// float32 sums stay within one float32 ulp of the exact sum even where a
// float32 accumulator would drift, float64 within 1e-12, int64 exact.
TEST(SumTest, LongContiguousRunsAreAccurate) {
  std::mt19937 rng(12);
  const int64_t n = (int64_t{1} << 20) + 12345;  // not a whole number of blocks
  // Values near 1: a float32 running sum of ~1M of them loses ~3 digits.
  std::vector<double> v = RandomValues(ScalarType::kFloat32, n, rng, 0.5, 1.5);
  long double exact = 0;
  for (double x : v) exact += x;
  const Tensor f = FromValues(ScalarType::kFloat32, {n}, v);
  OpRun r = RunOp("sum", {In(f)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  const double got = Values(r.outputs[0])[0];
  const float ref = static_cast<float>(exact);
  EXPECT_LE(std::fabs(got - ref), std::nextafter(ref, INFINITY) - ref) << got << " vs " << ref;
  // The same through mean, and row sums of a [3, n / 3] view (runs per row).
  r = RunOp("mean", {In(f)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_NEAR(Values(r.outputs[0])[0], static_cast<double>(exact / n), 1e-6);
  const int64_t cols = n / 3;
  std::vector<double> rows_v(v.begin(), v.begin() + 3 * cols);
  const Tensor m = FromValues(ScalarType::kFloat32, {3, cols}, rows_v);
  r = RunOp("sum", {In(m), Value(std::vector<int64_t>{1})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  const std::vector<double> row_sums = Values(r.outputs[0]);
  for (int64_t i = 0; i < 3; ++i) {
    long double e = 0;
    for (int64_t j = 0; j < cols; ++j) e += rows_v[i * cols + j];
    const float fe = static_cast<float>(e);
    EXPECT_LE(std::fabs(row_sums[i] - fe), std::nextafter(fe, INFINITY) - fe) << "row " << i;
  }

  std::vector<double> d = RandomValues(ScalarType::kFloat64, n, rng, -1e3, 1e3);
  long double de = 0;
  for (double x : d) de += x;
  r = RunOp("sum", {In(FromValues(ScalarType::kFloat64, {n}, d))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_NEAR(Values(r.outputs[0])[0], static_cast<double>(de), 1e-12 * 1e3 * n);

  // int64 wraps like PyTorch's: exact modulo 2**64, whatever the blocking.
  uint64_t wrapped = 0;
  Tensor big = FromValues(ScalarType::kInt64, {n}, std::vector<double>(static_cast<size_t>(n), 0));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t x = static_cast<int64_t>(rng()) << 31;  // large: the sum overflows
    std::memcpy(big.element({i}), &x, 8);
    wrapped += static_cast<uint64_t>(x);
  }
  r = RunOp("sum", {In(big)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  int64_t got_i = 0;
  std::memcpy(&got_i, r.outputs[0].element({}), 8);
  EXPECT_EQ(static_cast<uint64_t>(got_i), wrapped);
}

TEST(SumTest, MeanAndDtypeArgument) {
  std::mt19937 rng(11);
  const Tensor a = Spread(Random(ScalarType::kFloat32, {6, 7}, rng));
  OpRun r = RunOp("mean", {In(a), Value(std::vector<int64_t>{1})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  std::vector<int64_t> cnt;
  auto s = RefReduce(a, MaskOf(2, {1}), 0, [](double x, double y) { return x + y; }, &cnt);
  for (size_t i = 0; i < s.size(); ++i) s[i] /= cnt[i];
  ExpectValues(r.outputs[0], s, 1e-6, 1e-6);
  // sum(float, dtype=int32) casts each element first: 1.5 + 2.5 -> 1 + 2.
  const Tensor f = FromValues(ScalarType::kFloat32, {2}, {1.5, 2.5});
  r = RunOp("sum", {In(f)}, {{"dtype", Value(ScalarType::kInt32)}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.dtype, ScalarType::kInt32);
  ExpectValues(r.outputs[0], {3});
  const Tensor i = FromValues(ScalarType::kInt64, {3}, {1, 2, 4});
  r = RunOp("mean", {In(i)}, {{"dtype", Value(ScalarType::kFloat64)}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {7.0 / 3});
  r = RunOp("mean", {In(i)});
  EXPECT_FALSE(r.status.ok());
}

TEST(SumTest, EmptyReductions) {
  const Tensor e = FromValues(ScalarType::kFloat32, {0, 3}, {});
  OpRun r = RunOp("sum", {In(e), Value(std::vector<int64_t>{0})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {0, 0, 0});
  r = RunOp("mean", {In(e), Value(std::vector<int64_t>{0})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {kNan, kNan, kNan});
  r = RunOp("amax", {In(e), Value(std::vector<int64_t>{0})});
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(std::string(r.status.message()), "amax(): Expected reduction dim 0 to have non-zero size.");
  r = RunOp("max", {In(e)});
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(std::string(r.status.message()),
            "max(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
            "reduction dim with the 'dim' argument.");
  r = RunOp("argmax", {In(e), Value(int64_t{0})});
  EXPECT_FALSE(r.status.ok());
  r = RunOp("sum", {In(e), Value(std::vector<int64_t>{1})});  // reduce the non-empty dim
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.sizes, (Shape{0}));
}

TEST(SumTest, LargeSumIsAccurate) {
  // 1e6 float32 values of 0.1: a float32 accumulator would be off by ~1%.
  const int n = 1000000;
  const Tensor a = FromValues(ScalarType::kFloat32, {n}, std::vector<double>(n, 0.1));
  OpRun r = RunOp("sum", {In(a)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {n * static_cast<double>(0.1f)}, 1e-6, 0);
}

TEST(ExtremeTest, AmaxAminMaxMin) {
  std::mt19937 rng(12);
  for (ScalarType dt : {ScalarType::kFloat32, ScalarType::kInt64, ScalarType::kUInt8,
                        ScalarType::kBFloat16}) {
    const Tensor a = ReversedLayout(Random(dt, {5, 4, 3}, rng));
    for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{}, {1}, {0, 2}, {-3}}) {
      OpRun r = RunOp("amax", {In(a), Value(dims)});
      ASSERT_TRUE(r.status.ok()) << r.status;
      ExpectValues(r.outputs[0], RefReduce(a, MaskOf(3, dims), -1e300, [](double x, double y) { return std::max(x, y); }));
      r = RunOp("amin", {In(a), Value(dims), Value(true)});
      ASSERT_TRUE(r.status.ok()) << r.status;
      ExpectValues(r.outputs[0], RefReduce(a, MaskOf(3, dims), 1e300, [](double x, double y) { return std::min(x, y); }));
    }
    OpRun r = RunOp("max", {In(a)});
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.outputs[0].meta.dim(), 0);
    ExpectValues(r.outputs[0], RefReduce(a, MaskOf(3, {}), -1e300, [](double x, double y) { return std::max(x, y); }));
    r = RunOp("min", {In(a)});
    ASSERT_TRUE(r.status.ok()) << r.status;
    ExpectValues(r.outputs[0], RefReduce(a, MaskOf(3, {}), 1e300, [](double x, double y) { return std::min(x, y); }));
  }
  const Tensor n = FromValues(ScalarType::kFloat32, {2, 3}, {1, kNan, 3, 4, 5, 6});
  OpRun r = RunOp("amax", {In(n), Value(std::vector<int64_t>{1})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {kNan, 6});
  r = RunOp("min", {In(n)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {kNan});
  const Tensor b = FromValues(ScalarType::kBool, {3}, {0, 1, 0});
  r = RunOp("amax", {In(b)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {1});
}

// Reference argmax/argmin along dim d: first extreme, NaN wins.
void RefArg(const Tensor& t, int64_t d, bool is_max, std::vector<double>* vals, std::vector<double>* idx) {
  Shape outer = t.meta.sizes;
  outer[d] = 1;
  ForEachIndex(outer, [&](const Shape& o) {
    Shape i = o;
    double best = 0;
    int64_t bi = -1;
    for (int64_t k = 0; k < t.meta.sizes[d]; ++k) {
      i[d] = k;
      const double v = ReadAt(t.element(i), t.meta.dtype);
      if (bi < 0 || (!std::isnan(best) && (std::isnan(v) || (is_max ? v > best : v < best)))) {
        best = v;
        bi = k;
      }
    }
    vals->push_back(best);
    idx->push_back(static_cast<double>(bi));
  });
}

TEST(ArgTest, ArgmaxMaxDimAllLayouts) {
  std::mt19937 rng(13);
  for (ScalarType dt : {ScalarType::kFloat32, ScalarType::kInt32, ScalarType::kFloat64}) {
    // Few distinct values so ties are common.
    const Tensor base = Random(dt, {6, 5, 40}, rng, -2, 2);
    for (Layout l : kAllLayouts) {
      const Tensor a = WithLayout(base, l);
      for (int64_t d = 0; d < 3; ++d) {
        for (bool is_max : {true, false}) {
          std::vector<double> vals, idx;
          RefArg(a, d, is_max, &vals, &idx);
          OpRun r = RunOp(is_max ? "argmax" : "argmin", {In(a), Value(d)});
          ASSERT_TRUE(r.status.ok()) << r.status;
          EXPECT_EQ(r.outputs[0].meta.dtype, ScalarType::kInt64);
          ExpectValues(r.outputs[0], idx, 0, 0, "arg");
          r = RunOp(is_max ? "max.dim" : "min.dim", {In(a), Value(d - 3), Value(true)});
          ASSERT_TRUE(r.status.ok()) << r.status;
          ASSERT_EQ(r.outputs.size(), 2u);
          EXPECT_EQ(r.outputs[0].meta.dim(), 3);
          ExpectValues(r.outputs[0], vals, 0, 0, "values");
          ExpectValues(r.outputs[1], idx, 0, 0, "indices");
        }
      }
    }
  }
}

TEST(ArgTest, FlattenedNanAndZeroDim) {
  const Tensor a = ReversedLayout(FromValues(ScalarType::kFloat32, {2, 3}, {1, 7, 3, 7, kNan, kNan}));
  OpRun r = RunOp("argmax", {In(a)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.dim(), 0);
  ExpectValues(r.outputs[0], {4});
  r = RunOp("argmin", {In(a)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {4});
  const Tensor b = FromValues(ScalarType::kInt64, {2, 3}, {1, 7, 3, 7, 0, 0});
  r = RunOp("argmax", {In(b)}, {{"keepdim", Value(true)}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.sizes, (Shape{1, 1}));
  ExpectValues(r.outputs[0], {1});
  r = RunOp("argmin", {In(b)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {4});
  const Tensor s = Scalar0d(ScalarType::kFloat64, 3);
  r = RunOp("max.dim", {In(s), Value(int64_t{0})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {3});
  ExpectValues(r.outputs[1], {0});
  const Tensor bo = FromValues(ScalarType::kBool, {3}, {0, 1, 1});
  r = RunOp("max.dim", {In(bo), Value(int64_t{0})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {1});
  ExpectValues(r.outputs[1], {1});
}

TEST(VectorPathTest, LongRowsWithNanAtEveryPosition) {
  // Rows long enough for the SIMD paths, odd lengths for their tails, and a
  // NaN (or a duplicated extreme) placed at every position in turn.
  for (ScalarType dt : {ScalarType::kFloat32, ScalarType::kFloat64}) {
    for (int64_t n : {37, 64}) {
      for (int64_t pos = 0; pos < n; pos += 5) {
        std::vector<double> v(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>((i * 7) % 11) - 5;
        v[pos] = kNan;
        const Tensor a = FromValues(dt, {2, n}, [&] {
          std::vector<double> w = v;
          w.insert(w.end(), v.begin(), v.end());
          w[n + pos] = 100;  // row 1: a unique maximum at pos instead of NaN
          return w;
        }());
        OpRun r = RunOp("amax", {In(a), Value(std::vector<int64_t>{1})});
        ASSERT_TRUE(r.status.ok()) << r.status;
        ExpectValues(r.outputs[0], {kNan, 100}, 0, 0, "amax");
        r = RunOp("amin", {In(a), Value(std::vector<int64_t>{1})});
        ASSERT_TRUE(r.status.ok()) << r.status;
        ExpectValues(r.outputs[0], {kNan, -5}, 0, 0, "amin");
        r = RunOp("max.dim", {In(a), Value(int64_t{1})});
        ASSERT_TRUE(r.status.ok()) << r.status;
        ExpectValues(r.outputs[0], {kNan, 100}, 0, 0, "max values");
        ExpectValues(r.outputs[1], {static_cast<double>(pos), static_cast<double>(pos)}, 0, 0, "max indices");
        r = RunOp("argmin", {In(a), Value(int64_t{1})});
        ASSERT_TRUE(r.status.ok()) << r.status;
        // Row 0: the NaN; row 1: the first -5 ((i * 7) % 11 == 0 at i = 0, 11, 22, ...).
        ExpectValues(r.outputs[0], {static_cast<double>(pos), pos == 0 ? 11.0 : 0.0}, 0, 0, "argmin");
      }
    }
  }
  for (ScalarType dt : {ScalarType::kInt64, ScalarType::kInt8, ScalarType::kInt32, ScalarType::kUInt8}) {
    std::mt19937 rng(14);
    const Tensor a = Random(dt, {3, 45}, rng, 0, 9);
    std::vector<double> vals, idx;
    RefArg(a, 1, true, &vals, &idx);
    OpRun r = RunOp("max.dim", {In(a), Value(int64_t{1})});
    ASSERT_TRUE(r.status.ok()) << r.status;
    ExpectValues(r.outputs[0], vals, 0, 0);
    ExpectValues(r.outputs[1], idx, 0, 0);
    r = RunOp("sum", {In(a), Value(std::vector<int64_t>{1})});
    ASSERT_TRUE(r.status.ok()) << r.status;
    ExpectValues(r.outputs[0], RefReduce(a, MaskOf(2, {1}), 0, [](double x, double y) { return x + y; }), 0, 0);
  }
  const Tensor big = FromValues(ScalarType::kInt64, {19}, std::vector<double>(19, 4e18));
  OpRun r = RunOp("sum", {In(big)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  // 19 * 4e18 wraps modulo 2^64, as PyTorch's int64 sum does.
  const uint64_t wrapped = static_cast<uint64_t>(4000000000000000000ULL) * 19u;
  EXPECT_EQ(*reinterpret_cast<const int64_t*>(r.outputs[0].element({})), static_cast<int64_t>(wrapped));
}

}  // namespace
}  // namespace tensord::testing
