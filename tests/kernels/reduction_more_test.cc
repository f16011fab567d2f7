// Kernels of prod, nansum, var/std, norm, logsumexp, all/any (reduce.cc) and
// cumsum/cumprod (scan.cc) against reference loops over every layout
// (contiguous, reversed strides, spread with an offset), dim sets and
// keepdim; plus the edge values PyTorch defines: empty reductions, NaN,
// infinities in logsumexp, the divisor of var at N <= correction, integer
// wrap-around and uint8 all/any.
#include <cmath>
#include <functional>
#include <limits>

#include "gtest/gtest.h"
#include "kernel_test_util.h"

namespace tensord::testing {
namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNan = std::numeric_limits<double>::quiet_NaN();

// Groups the elements of `t` by output slot (row-major over the kept dims).
std::vector<std::vector<double>> Groups(const Tensor& t, const std::vector<int64_t>& dims) {
  const int64_t rank = t.meta.dim();
  std::vector<bool> mask(rank, dims.empty());
  for (int64_t d : dims) mask[(d + rank) % rank] = true;
  Shape kept;
  for (int64_t d = 0; d < rank; ++d) {
    if (!mask[d]) kept.push_back(t.meta.sizes[d]);
  }
  int64_t n = 1;
  for (int64_t s : kept) n *= s;
  std::vector<std::vector<double>> g(static_cast<size_t>(n));
  const Shape ks = ContiguousStrides(kept);
  ForEachIndex(t.meta.sizes, [&](const Shape& i) {
    int64_t o = 0, k = 0;
    for (int64_t d = 0; d < rank; ++d)
      if (!mask[d]) o += i[d] * ks[k++];
    g[o].push_back(ReadAt(t.element(i), t.meta.dtype));
  });
  return g;
}

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
