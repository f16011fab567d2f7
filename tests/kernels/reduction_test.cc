// Reduction and scan kernels (reduce.cc, scan.cc) against reference loops:
// sum/mean, amax/amin/max/min, argmax/argmin, prod, nansum, var/std, norm,
// logsumexp, all/any, cumsum/cumprod; over dim lists, negative dims,
// keepdim and every layout (contiguous, reversed strides, spread with an
// offset); integer accumulation and wrap-around, NaN propagation,
// first-occurrence indices, and the edge values PyTorch defines: empty
// reductions and their errors, infinities in logsumexp, the divisor of var
// at N <= correction, uint8 all/any.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "gtest/gtest.h"
#include "kernel_test_util.h"

namespace tensord::testing {
namespace {

const double kNan = std::numeric_limits<double>::quiet_NaN();

// The elements of `t` that reduce into each output slot, in row-major
// order over the kept dims, each group in the order the elements come:
// `mask[d]` says whether dim d is reduced.
std::vector<std::vector<double>> GroupsByMask(const Tensor& t, const std::vector<bool>& mask) {
  Shape kept;
  for (int64_t d = 0; d < t.meta.dim(); ++d) {
    if (!mask[d]) kept.push_back(t.meta.sizes[d]);
  }
  int64_t n = 1;
  for (int64_t s : kept) n *= s;
  std::vector<std::vector<double>> g(static_cast<size_t>(n));
  const Shape ks = ContiguousStrides(kept);
  ForEachIndex(t.meta.sizes, [&](const Shape& i) {
    int64_t o = 0, k = 0;
    for (int64_t d = 0; d < t.meta.dim(); ++d)
      if (!mask[d]) o += i[d] * ks[k++];
    g[o].push_back(ReadAt(t.element(i), t.meta.dtype));
  });
  return g;
}

// The same by a list of dims (negative ones count from the end; none: all).
std::vector<std::vector<double>> Groups(const Tensor& t, const std::vector<int64_t>& dims) {
  const int64_t rank = t.meta.dim();
  std::vector<bool> mask(rank, dims.empty());
  for (int64_t d : dims) mask[(d + rank) % rank] = true;
  return GroupsByMask(t, mask);
}

// Reference reduction: folds each output slot's elements, in order, from `init`.
std::vector<double> RefReduce(const Tensor& t, const std::vector<bool>& mask, double init,
                              const std::function<double(double, double)>& f,
                              std::vector<int64_t>* counts = nullptr) {
  std::vector<double> acc;
  if (counts) counts->clear();
  for (const std::vector<double>& g : GroupsByMask(t, mask)) {
    double a = init;
    for (double x : g) a = f(a, x);
    acc.push_back(a);
    if (counts) counts->push_back(static_cast<int64_t>(g.size()));
  }
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

const double kInf = std::numeric_limits<double>::infinity();

std::vector<double> Map(const std::vector<std::vector<double>>& g,
                        const std::function<double(const std::vector<double>&)>& f) {
  std::vector<double> out;
  for (const auto& v : g) out.push_back(f(v));
  return out;
}

double VarOf(const std::vector<double>& v, double correction) {
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double m2 = 0;
  for (double x : v) m2 += (x - mean) * (x - mean);
  return m2 / std::max(static_cast<double>(v.size()) - correction, 0.0);
}

const std::vector<std::vector<int64_t>> kDimSets = {{}, {0}, {-1}, {0, 2}, {1, 2}};

TEST(VarStdKernelTest, DimsLayoutsCorrections) {
  std::mt19937 rng(41);
  for (ScalarType dt : {ScalarType::kFloat32, ScalarType::kFloat64}) {
    const Tensor base = Random(dt, {3, 4, 5}, rng);
    for (Layout l : kAllLayouts) {
      const Tensor a = WithLayout(base, l);
      for (const auto& dims : kDimSets) {
        for (int64_t corr : {0, 1, 2}) {
          for (const char* op : {"var.correction", "std.correction"}) {
            OpRun r = RunOp(op, {In(a), Value(dims)}, {{"correction", Value(corr)}, {"keepdim", Value(true)}});
            ASSERT_TRUE(r.status.ok()) << r.status;
            const bool std = op[0] == 's';
            ExpectValues(r.outputs[0], Map(Groups(a, dims), [&](const std::vector<double>& v) {
                           const double var = VarOf(v, static_cast<double>(corr));
                           return std ? std::sqrt(var) : var;
                         }), Rtol(dt) * 20, Rtol(dt) * 20, op);
          }
        }
      }
    }
  }
}

TEST(VarStdKernelTest, UnbiasedOverloadsAndSmallN) {
  const Tensor a = FromValues(ScalarType::kFloat64, {2, 3}, {1, 2, 4, 3, 3, 3});
  OpRun r = RunOp("var.dim", {In(a), Value(std::vector<int64_t>{1}), Value(false)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {14.0 / 9.0, 0.0});
  r = RunOp("std", {In(a)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {std::sqrt(VarOf({1, 2, 4, 3, 3, 3}, 1))});
  // One element with correction 1: 0 / 0 is NaN; correction 2 > N: x / 0 (inf) or 0 / 0.
  const Tensor one = FromValues(ScalarType::kFloat32, {1, 2}, {5, 7});
  r = RunOp("var.correction", {In(one), Value(std::vector<int64_t>{0})}, {{"correction", Value()}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {kNan, kNan});
  r = RunOp("var.correction", {In(one), Value(std::vector<int64_t>{1})}, {{"correction", Value(int64_t{3})}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {kInf});
  // Empty: NaN.
  const Tensor empty = FromValues(ScalarType::kFloat32, {0, 2}, {});
  r = RunOp("var.correction", {In(empty), Value(std::vector<int64_t>{0})}, {{"correction", Value()}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {kNan, kNan});
  EXPECT_FALSE(RunOp("var", {In(FromValues(ScalarType::kInt64, {2}, {1, 2}))}).status.ok());
}

TEST(ProdKernelTest, DimsLayoutsAndIntegers) {
  std::mt19937 rng(42);
  for (ScalarType dt : {ScalarType::kFloat32, ScalarType::kFloat64, ScalarType::kInt32, ScalarType::kBool}) {
    const Tensor base = Random(dt, {3, 4, 2}, rng, -2, 2);
    for (Layout l : kAllLayouts) {
      const Tensor a = WithLayout(base, l);
      for (int64_t d : {0, 1, -1}) {
        OpRun r = RunOp("prod.dim_int", {In(a), Value(d), Value(false)});
        ASSERT_TRUE(r.status.ok()) << r.status;
        EXPECT_EQ(r.outputs[0].meta.dtype, IsIntegral(dt, true) ? ScalarType::kInt64 : dt);
        ExpectValues(r.outputs[0], Map(Groups(a, {d}), [](const std::vector<double>& v) {
                       double p = 1;
                       for (double x : v) p *= x;
                       return p;
                     }), Rtol(dt) * 10, 1e-6);
      }
    }
  }
  // int64 products wrap like PyTorch's integer arithmetic.
  const Tensor big = FromValues(ScalarType::kInt64, {3}, {4294967296.0, 4294967296.0, 3});
  OpRun r = RunOp("prod", {In(big)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {0});
  // Empty product is 1.
  r = RunOp("prod", {In(FromValues(ScalarType::kFloat32, {0}, {}))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {1});
}

TEST(NansumKernelTest, SkipsNaNsAndSumsIntegers) {
  const Tensor a = FromValues(ScalarType::kFloat32, {2, 3}, {1, kNan, 2, kNan, kNan, 4});
  OpRun r = RunOp("nansum", {In(Restride(a, {1, 2}))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {7});
  r = RunOp("nansum", {In(a), Value(std::vector<int64_t>{1}), Value(true)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {3, 4});
  const Tensor i = FromValues(ScalarType::kInt32, {2, 2}, {1, 2, 3, 4});
  r = RunOp("nansum", {In(i), Value(std::vector<int64_t>{0})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.dtype, ScalarType::kInt64);
  ExpectValues(r.outputs[0], {4, 6});
}

TEST(NormKernelTest, OrdersDimsAndLayouts) {
  std::mt19937 rng(43);
  const Tensor base = Random(ScalarType::kFloat64, {3, 4, 5}, rng);
  for (Layout l : kAllLayouts) {
    const Tensor a = WithLayout(base, l);
    for (const auto& dims : kDimSets) {
      for (double p : {2.0, 1.0, 0.0, 3.0, 0.5, kInf, -kInf}) {
        OpRun r = RunOp("linalg_vector_norm", {In(a), Value(Scalar::Float(p)), Value(dims)});
        ASSERT_TRUE(r.status.ok()) << r.status;
        ExpectValues(r.outputs[0], Map(Groups(a, dims), [p](const std::vector<double>& v) {
                       double acc = p == -kInf ? kInf : 0;
                       for (double x : v) {
                         const double ax = std::fabs(x);
                         if (p == kInf) acc = std::max(acc, ax);
                         else if (p == -kInf) acc = std::min(acc, ax);
                         else if (p == 0) acc += ax != 0;
                         else acc += std::pow(ax, p);
                       }
                       return (std::isinf(p) || p == 0) ? acc : std::pow(acc, 1.0 / p);
                     }), 1e-10, 1e-10, "norm");
      }
    }
  }
  // NaN propagates through the max norm; an empty norm is 0.
  OpRun r = RunOp("norm.Scalar", {In(FromValues(ScalarType::kFloat32, {3}, {1, kNan, -5})), Value(Scalar::Float(kInf))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {kNan});
  r = RunOp("norm.Scalar", {In(FromValues(ScalarType::kFloat32, {0, 2}, {})), Value(Scalar::Float(kInf))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {0});
}

TEST(LogsumexpKernelTest, StableWithInfinities) {
  std::mt19937 rng(44);
  const Tensor base = Random(ScalarType::kFloat64, {3, 4, 5}, rng, -800, 800);
  for (Layout l : kAllLayouts) {
    const Tensor a = WithLayout(base, l);
    for (const auto& dims : {std::vector<int64_t>{0}, std::vector<int64_t>{-1}, std::vector<int64_t>{0, 2}}) {
      OpRun r = RunOp("logsumexp", {In(a), Value(dims), Value(false)});
      ASSERT_TRUE(r.status.ok()) << r.status;
      ExpectValues(r.outputs[0], Map(Groups(a, dims), [](const std::vector<double>& v) {
                     double m = -kInf;
                     for (double x : v) m = std::max(m, x);
                     double s = 0;
                     for (double x : v) s += std::exp(x - m);
                     return m + std::log(s);
                   }), 1e-12, 1e-9);
    }
  }
  const Tensor specials = FromValues(ScalarType::kFloat32, {3, 2}, {-kInf, -kInf, kInf, 1, kNan, 0});
  OpRun r = RunOp("logsumexp", {In(specials), Value(std::vector<int64_t>{1})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {-kInf, kInf, kNan});
  // Integers give float32.
  r = RunOp("logsumexp", {In(FromValues(ScalarType::kInt64, {2}, {0, 0})), Value(std::vector<int64_t>{0})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.dtype, ScalarType::kFloat32);
  ExpectValues(r.outputs[0], {std::log(2.0)});
}

TEST(AllAnyKernelTest, DtypesLayoutsAndEmpty) {
  std::mt19937 rng(45);
  for (ScalarType dt : {ScalarType::kBool, ScalarType::kUInt8, ScalarType::kFloat32, ScalarType::kInt64}) {
    const Tensor base = Random(dt, {3, 4}, rng, 0, 2);
    for (Layout l : kAllLayouts) {
      const Tensor a = WithLayout(base, l);
      for (int64_t d : {0, 1}) {
        for (bool all : {true, false}) {
          OpRun r = RunOp(all ? "all.dim" : "any.dim", {In(a), Value(d)});
          ASSERT_TRUE(r.status.ok()) << r.status;
          EXPECT_EQ(r.outputs[0].meta.dtype, dt == ScalarType::kUInt8 ? ScalarType::kUInt8 : ScalarType::kBool);
          ExpectValues(r.outputs[0], Map(Groups(a, {d}), [all](const std::vector<double>& v) {
                         bool acc = all;
                         for (double x : v) acc = all ? (acc && x != 0) : (acc || x != 0);
                         return acc ? 1.0 : 0.0;
                       }));
        }
      }
    }
  }
  const Tensor nan = FromValues(ScalarType::kFloat32, {2}, {kNan, 1});
  OpRun r = RunOp("all", {In(nan)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {1});  // NaN is true
  const Tensor empty = FromValues(ScalarType::kFloat32, {0, 3}, {});
  r = RunOp("all", {In(empty)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {1});
  r = RunOp("any.dim", {In(empty), Value(int64_t{0})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {0, 0, 0});
}

TEST(ScanKernelTest, CumsumCumprodLayoutsAndDtypes) {
  std::mt19937 rng(46);
  for (ScalarType dt : {ScalarType::kFloat32, ScalarType::kFloat64, ScalarType::kInt32, ScalarType::kBFloat16}) {
    const Tensor base = Random(dt, {3, 4, 5}, rng, -2, 2);
    for (Layout l : kAllLayouts) {
      const Tensor a = WithLayout(base, l);
      for (int64_t d : {0, 1, 2, -1}) {
        for (bool prod : {false, true}) {
          OpRun r = RunOp(prod ? "cumprod" : "cumsum", {In(a), Value(d)});
          ASSERT_TRUE(r.status.ok()) << r.status;
          const Tensor& o = r.outputs[0];
          EXPECT_EQ(o.meta.dtype, dt == ScalarType::kInt32 ? ScalarType::kInt64 : dt);
          EXPECT_EQ(o.meta.strides, ContiguousStrides(a.meta.sizes));
          const int64_t dd = (d + 3) % 3;
          std::vector<double> expect;
          ForEachIndex(a.meta.sizes, [&](const Shape& i) {
            Shape j = i;
            double acc = prod ? 1 : 0;
            for (int64_t k = 0; k <= i[dd]; ++k) {
              j[dd] = k;
              const double x = ReadAt(a.element(j), dt);
              acc = prod ? acc * x : acc + x;
            }
            expect.push_back(acc);
          });
          ExpectValues(o, expect, Rtol(dt) * 20, Rtol(dt) * 20);
        }
      }
    }
  }
  // A 0-dim input scans as one element; dtype= converts first.
  OpRun r = RunOp("cumsum", {In(Scalar0d(ScalarType::kInt32, 7)), Value(int64_t{-1})},
                  {{"dtype", Value(ScalarType::kFloat64)}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.dtype, ScalarType::kFloat64);
  EXPECT_EQ(r.outputs[0].meta.dim(), 0);
  ExpectValues(r.outputs[0], {7});
  r = RunOp("cumsum", {In(FromValues(ScalarType::kFloat32, {0, 3}, {})), Value(int64_t{0})});
  ASSERT_TRUE(r.status.ok()) << r.status;
}

}  // namespace
}  // namespace tensord::testing
