// CPU kernels of the in-place ops and of the ops autograd and nn use: in-place ops
// write into self's storage (the harness, like the daemon, passes self as
// the output), including when another input overlaps self or the result
// dtype differs; copy_/zero_/fill_/uniform_/normal_; addcmul/addcdiv; erf,
// gelu, softmax, log_softmax; scatter_add, index_add, index_put,
// masked_scatter, select_backward, slice_backward with their index errors.
// Expected values are computed here from the definitions (or are literals
// PyTorch 1.13 printed, noted in comments).
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "kernel_test_util.h"

namespace tensord::testing {
namespace {

using S = ScalarType;

std::vector<double> Seq(int64_t n, double start = 0, double step = 1) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(start + step * static_cast<double>(i));
  return v;
}

void ExpectErrorContains(const OpRun& r, absl::string_view text) {
  ASSERT_FALSE(r.status.ok()) << "expected an error containing: " << text;
  EXPECT_TRUE(absl::StrContains(r.status.message(), text)) << r.status.message();
}

// ---- in-place ----------------------------------------------------------------------

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

// ---- nn forward ops ---------------------------------------------------------------------

TEST(NnOpsTest, ErfGelu) {
  const Tensor x = FromValues(S::kFloat64, {4}, {-2, -0.5, 0, 1.5});
  OpRun e = RunOp("erf", {In(x)});
  ASSERT_TRUE(e.status.ok()) << e.status;
  ExpectValues(e.outputs[0], {std::erf(-2.0), std::erf(-0.5), 0, std::erf(1.5)});
  OpRun g = RunOp("gelu", {In(x)});
  ASSERT_TRUE(g.status.ok()) << g.status;
  std::vector<double> exact, approx;
  for (double v : Values(x)) {
    exact.push_back(v * 0.5 * (1 + std::erf(v / std::sqrt(2.0))));
    approx.push_back(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
  }
  ExpectValues(g.outputs[0], exact);
  OpRun gt = RunOp("gelu", {In(x)}, {{"approximate", Value("tanh")}});
  ASSERT_TRUE(gt.status.ok()) << gt.status;
  ExpectValues(gt.outputs[0], approx);
  ExpectErrorContains(RunOp("gelu", {In(x)}, {{"approximate", Value("fast")}}),
                      "approximate argument must be either none or tanh");
  const Tensor i = FromValues(S::kInt64, {2}, {1, 2});
  ExpectErrorContains(RunOp("gelu", {In(i)}), "not implemented for 'Long'");
}

TEST(NnOpsTest, SoftmaxAndLogSoftmaxAlongEveryDim) {
  std::mt19937 rng(3);
  const Tensor x0 = Random(S::kFloat32, {2, 3, 4}, rng);
  for (Layout l : kAllLayouts) {
    const Tensor x = WithLayout(x0, l);
    for (int64_t dim = -3; dim < 3; ++dim) {
      OpRun s = RunOp("softmax.int", {In(x), Value(dim)});
      OpRun ls = RunOp("log_softmax.int", {In(x), Value(dim)});
      ASSERT_TRUE(s.status.ok() && ls.status.ok()) << s.status << ls.status;
      const int64_t d = (dim + 3) % 3;
      std::vector<double> es, els;
      ForEachIndex(x.meta.sizes, [&](const Shape& idx) {
        double mx = -INFINITY, sum = 0;
        Shape j = idx;
        for (int64_t k = 0; k < x.meta.sizes[d]; ++k) {
          j[d] = k;
          mx = std::max(mx, ReadAt(x.element(j), S::kFloat32));
        }
        for (int64_t k = 0; k < x.meta.sizes[d]; ++k) {
          j[d] = k;
          sum += std::exp(ReadAt(x.element(j), S::kFloat32) - mx);
        }
        const double v = ReadAt(x.element(idx), S::kFloat32);
        es.push_back(std::exp(v - mx) / sum);
        els.push_back(v - mx - std::log(sum));
      });
      ExpectValues(s.outputs[0], es, 1e-6, 1e-7, "softmax");
      ExpectValues(ls.outputs[0], els, 1e-6, 1e-6, "log_softmax");
    }
  }
  // dtype= converts first: int64 input with dtype=float64.
  const Tensor ints = FromValues(S::kInt64, {3}, {1, 2, 3});
  OpRun s = RunOp("softmax.int", {In(ints), Value(int64_t{0})}, {{"dtype", Value(S::kFloat64)}});
  ASSERT_TRUE(s.status.ok()) << s.status;
  EXPECT_EQ(s.outputs[0].meta.dtype, S::kFloat64);
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  ExpectValues(s.outputs[0], {std::exp(1.0) / z, std::exp(2.0) / z, std::exp(3.0) / z});
  ExpectErrorContains(RunOp("softmax.int", {In(ints), Value(int64_t{0})}), "not implemented for 'Long'");
  ExpectErrorContains(RunOp("softmax.int", {In(x0), Value(int64_t{3})}), "Dimension out of range");
  // A row of -inf gives NaN, as in PyTorch.
  const Tensor inf = FromValues(S::kFloat32, {2}, {-INFINITY, -INFINITY});
  OpRun si = RunOp("softmax.int", {In(inf), Value(int64_t{0})});
  ASSERT_TRUE(si.status.ok());
  EXPECT_TRUE(std::isnan(Values(si.outputs[0])[0]));
}

// ---- scatter-style ops ------------------------------------------------------------------

TEST(ScatterOpsTest, ScatterAdd) {
  // torch.zeros(3, 2).scatter_add(0, [[0, 1], [0, 2]], [[1, 2], [3, 4]]) -> [[4, 0], [0, 2], [0, 4]]
  const Tensor self = FromValues(S::kFloat32, {3, 2}, Seq(6, 0, 0));
  const Tensor index = FromValues(S::kInt64, {2, 2}, {0, 1, 0, 2});
  const Tensor src = FromValues(S::kFloat32, {2, 2}, {1, 2, 3, 4});
  OpRun r = RunOp("scatter_add", {In(ReversedLayout(self)), Value(int64_t{0}), In(index), In(src)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {4, 0, 0, 2, 0, 4});
  const Tensor bad = FromValues(S::kInt64, {1, 1}, {5});
  OpRun e = RunOp("scatter_add", {In(self), Value(int64_t{0}), In(bad), In(src)});
  ExpectErrorContains(e, "scatter_add(): index 5 is out of bounds for dimension 0 with size 3");
  EXPECT_EQ(KindOf(e.status), ErrorKind::kRuntime);  // as gather and PyTorch
}

TEST(ScatterOpsTest, IndexAdd) {
  // torch.ones(3, 2).index_add(0, [2, 0, 2], [[1, 2], [3, 4], [5, 6]], alpha=2)
  //   -> [[7, 9], [1, 1], [13, 17]]
  const Tensor self = FromValues(S::kFloat32, {3, 2}, std::vector<double>(6, 1));
  const Tensor index = FromValues(S::kInt32, {3}, {2, 0, 2});
  const Tensor src = FromValues(S::kFloat32, {3, 2}, Seq(6, 1));
  OpRun r = RunOp("index_add", {In(self), Value(int64_t{0}), In(index), In(Spread(src))},
                  {{"alpha", Value(Scalar::Int(2))}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {7, 9, 1, 1, 13, 17});
  // Along dim 1.
  const Tensor i1 = FromValues(S::kInt64, {1}, {1});
  const Tensor s1 = FromValues(S::kFloat32, {3, 1}, {5, 6, 7});
  OpRun r1 = RunOp("index_add", {In(self), Value(int64_t{-1}), In(i1), In(s1)});
  ASSERT_TRUE(r1.status.ok()) << r1.status;
  ExpectValues(r1.outputs[0], {1, 6, 1, 7, 1, 8});
  const Tensor bad = FromValues(S::kInt64, {3}, {0, -1, 0});
  ExpectErrorContains(RunOp("index_add", {In(self), Value(int64_t{0}), In(bad), In(src)}),
                      "index_add(): index -1 is out of bounds for dimension 0 with size 3");
}

TEST(ScatterOpsTest, IndexPut) {
  const Tensor self = FromValues(S::kFloat32, {3, 2}, Seq(6));
  // x[[0, 2]] = [10, 20] (broadcast over dim 1).
  const Tensor rows = FromValues(S::kInt64, {2}, {0, 2});
  const Tensor vals = FromValues(S::kFloat32, {2, 1}, {10, 20});
  OpRun r = RunOp("index_put", {In(ReversedLayout(self)), InList({&rows}), In(vals)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {10, 10, 2, 3, 20, 20});
  EXPECT_EQ(r.outputs[0].meta.strides, (Shape{1, 3}));  // clone keeps the layout
  // accumulate with duplicate indices: x[[1, 1], [0, 0]] += [1, 2].
  const Tensor i0 = FromValues(S::kInt64, {2}, {1, 1});
  const Tensor i1 = FromValues(S::kInt64, {2}, {0, -2});
  const Tensor v = FromValues(S::kFloat32, {2}, {1, 2});
  OpRun acc = RunOp("index_put", {In(self), InList({&i0, &i1}), In(v), Value(true)});
  ASSERT_TRUE(acc.status.ok()) << acc.status;
  ExpectValues(acc.outputs[0], {0, 1, 5, 3, 4, 5});
  // A boolean mask: x[x > 2] = 0 style.
  const Tensor mask = FromValues(S::kBool, {3, 2}, {0, 0, 0, 1, 1, 1});
  const Tensor zero = FromValues(S::kFloat32, {}, {-1});
  OpRun m = RunOp("index_put", {In(self), InList({&mask}), In(zero)});
  ASSERT_TRUE(m.status.ok()) << m.status;
  ExpectValues(m.outputs[0], {0, 1, 2, -1, -1, -1});
  // None then an index: x[:, [1]] = 7.
  const Tensor col = FromValues(S::kInt64, {1}, {1});
  const Tensor seven = FromValues(S::kFloat32, {1}, {7});
  OpRun n = RunOp("index_put", {In(self), InList({nullptr, &col}), In(seven)});
  ASSERT_TRUE(n.status.ok()) << n.status;
  ExpectValues(n.outputs[0], {0, 7, 2, 7, 4, 7});
  const Tensor far = FromValues(S::kInt64, {1}, {9});
  OpRun e = RunOp("index_put", {In(self), InList({&far}), In(seven)});
  ExpectErrorContains(e, "index 9 is out of bounds for dimension 0 with size 3");
  const Tensor three = FromValues(S::kFloat32, {3}, {1, 2, 3});
  ExpectErrorContains(RunOp("index_put", {In(self), InList({&rows}), In(three)}),
                      "shape mismatch: value tensor of shape [3] cannot be broadcast to indexing result of shape [2, 2]");
  const Tensor mask4 = FromValues(S::kBool, {3, 2}, {1, 1, 0, 1, 1, 0});
  ExpectErrorContains(RunOp("index_put", {In(self), InList({&mask4}), In(three)}),
                      "shape mismatch: value tensor of shape [3] cannot be broadcast to indexing result of shape [4]");
}

TEST(ScatterOpsTest, MaskedScatter) {
  // torch.zeros(2, 3).masked_scatter([[1, 0, 1], [0, 1, 1]], arange(1, 7)) -> [[1, 0, 2], [0, 3, 4]]
  const Tensor self = FromValues(S::kFloat32, {2, 3}, std::vector<double>(6, 0));
  const Tensor mask = FromValues(S::kBool, {2, 3}, {1, 0, 1, 0, 1, 1});
  const Tensor src = FromValues(S::kFloat32, {6}, Seq(6, 1));
  OpRun r = RunOp("masked_scatter", {In(self), In(ReversedLayout(mask)), In(Spread(src))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {1, 0, 2, 0, 3, 4});
  // self broadcast with the mask.
  const Tensor row = FromValues(S::kFloat32, {3}, {9, 9, 9});
  OpRun b = RunOp("masked_scatter", {In(row), In(mask), In(src)});
  ASSERT_TRUE(b.status.ok()) << b.status;
  ExpectValues(b.outputs[0], {1, 9, 2, 9, 3, 4});
  const Tensor few = FromValues(S::kFloat32, {3}, {1, 2, 3});
  ExpectErrorContains(RunOp("masked_scatter", {In(self), In(mask), In(few)}),
                      "Number of elements of source < number of ones in mask");
}

TEST(ScatterOpsTest, SelectAndSliceBackward) {
  const Tensor g = FromValues(S::kFloat32, {2}, {5, 6});
  OpRun s = RunOp("select_backward", {In(g), Value(std::vector<int64_t>{2, 4}), Value(int64_t{1}), Value(int64_t{-1})});
  ASSERT_TRUE(s.status.ok()) << s.status;
  ExpectValues(s.outputs[0], {0, 0, 0, 5, 0, 0, 0, 6});
  ExpectErrorContains(RunOp("select_backward", {In(g), Value(std::vector<int64_t>{2, 4}), Value(int64_t{1}),
                                                Value(int64_t{4})}),
                      "index 4 out of range");
  // torch.ops.aten.slice_backward(ones(2, 2), [2, 4], 1, 0, 4, 2) -> [[1, 0, 1, 0], [1, 0, 1, 0]]
  const Tensor g2 = FromValues(S::kFloat32, {2, 2}, {1, 2, 3, 4});
  OpRun sl = RunOp("slice_backward", {In(ReversedLayout(g2)), Value(std::vector<int64_t>{2, 4}), Value(int64_t{1}),
                                      Value(int64_t{0}), Value(int64_t{4}), Value(int64_t{2})});
  ASSERT_TRUE(sl.status.ok()) << sl.status;
  ExpectValues(sl.outputs[0], {1, 0, 2, 0, 3, 0, 4, 0});
  // Clamped bounds: start -1, end past the end.
  const Tensor g3 = FromValues(S::kFloat32, {2, 1}, {7, 8});
  OpRun c = RunOp("slice_backward", {In(g3), Value(std::vector<int64_t>{2, 4}), Value(int64_t{1}), Value(int64_t{-1}),
                                     Value(int64_t{100}), Value(int64_t{1})});
  ASSERT_TRUE(c.status.ok()) << c.status;
  ExpectValues(c.outputs[0], {0, 0, 0, 7, 0, 0, 0, 8});
  const Tensor g4 = FromValues(S::kFloat32, {2, 3}, Seq(6));
  EXPECT_FALSE(RunOp("slice_backward", {In(g4), Value(std::vector<int64_t>{2, 4}), Value(int64_t{1}),
                                        Value(int64_t{0}), Value(int64_t{4}), Value(int64_t{2})})
                   .status.ok());
}

TEST(NewOpsMetaAgreementTest, KernelAcceptsWhatMetaAcceptsForEveryDtype) {
  const S all[] = {S::kBool,    S::kUInt8,   S::kInt8,          S::kInt16,      S::kInt32,   S::kInt64,
                   S::kFloat16, S::kBFloat16, S::kFloat32,      S::kFloat64,    S::kFloat8_e4m3fn, S::kFloat8_e5m2};
  for (S dt : all) {
    const std::string dn(DtypeName(dt));
    auto ones = [dt](Shape sizes) {
      int64_t n = 1;
      for (int64_t s : sizes) n *= s;
      return FromValues(dt, sizes, std::vector<double>(static_cast<size_t>(n), 1.0));
    };
    auto check = [&](const std::string& op, std::vector<Value> args, std::vector<std::pair<std::string, Value>> kw) {
      const OpEntry* e = OpTable::Get().Find(op);
      ASSERT_NE(e, nullptr) << op;
      auto bound = BindArgs(e->schema, args, kw);
      if (!bound.ok()) return;
      if (!OpTable::Get().RunMeta(*e, *bound).ok()) return;
      OpRun r = RunOp(op, std::move(args), std::move(kw));
      EXPECT_TRUE(r.status.ok()) << op << " (" << dn << "): meta accepts but the kernel says " << r.status;
    };
    const Tensor a = ones({2, 3});
    const Tensor mask = FromValues(S::kBool, {2, 3}, {1, 0, 1, 0, 1, 1});
    const Tensor idx = FromValues(S::kInt64, {2, 3}, {0, 1, 1, 0, 1, 0});
    const Tensor idx1 = FromValues(S::kInt64, {2}, {1, 0});
    for (const char* op : {"add_.Tensor", "sub_.Tensor", "mul_.Tensor", "div_.Tensor"}) {
      Tensor self = ones({2, 3});
      check(op, {In(self), In(a)}, {});
    }
    for (const char* op : {"add_.Scalar", "sub_.Scalar", "mul_.Scalar", "div_.Scalar"}) {
      Tensor self = ones({2, 3});
      check(op, {In(self), Value(Scalar::Int(1))}, {});
    }
    Tensor c = ones({2, 3});
    check("clamp_", {In(c), Value(Scalar::Int(0)), Value(Scalar::Int(1))}, {});
    Tensor mf = ones({2, 3});
    check("masked_fill_.Scalar", {In(mf), In(mask), Value(Scalar::Int(0))}, {});
    for (const char* op : {"addcmul", "addcdiv", "addcmul_", "addcdiv_"}) {
      Tensor self = ones({2, 3});
      check(op, {In(self), In(a), In(a)}, {});
    }
    for (S src_dt : all) {
      Tensor dst = ones({2, 3});
      const Tensor src = FromValues(src_dt, {3}, {1, 1, 1});
      check("copy_", {In(dst), In(src)}, {});
    }
    Tensor z = ones({2, 3});
    check("zero_", {In(z)}, {});
    check("fill_.Scalar", {In(z), Value(Scalar::Int(1))}, {});
    check("uniform_", {In(z)}, {});
    check("normal_", {In(z)}, {});
    check("erf", {In(a)}, {});
    check("gelu", {In(a)}, {});
    check("softmax.int", {In(a), Value(int64_t{1})}, {});
    check("log_softmax.int", {In(a), Value(int64_t{0})}, {});
    check("scatter_add", {In(a), Value(int64_t{0}), In(idx), In(a)}, {});
    check("index_add", {In(a), Value(int64_t{1}), In(idx1), In(ones({2, 2}))}, {});
    check("index_put", {In(a), InList({&idx1}), In(ones({3})), Value(false)}, {});
    check("index_put", {In(a), InList({&idx1}), In(ones({3})), Value(true)}, {});
    check("index_put", {In(a), InList({&mask}), In(ones({1}))}, {});
    check("masked_scatter", {In(a), In(mask), In(ones({6}))}, {});
    check("select_backward", {In(ones({3})), Value(std::vector<int64_t>{2, 3}), Value(int64_t{0}), Value(int64_t{1})}, {});
    check("slice_backward", {In(a), Value(std::vector<int64_t>{4, 3}), Value(int64_t{0}), Value(int64_t{1}),
                             Value(int64_t{3}), Value(int64_t{1})}, {});
  }
}

}  // namespace
}  // namespace tensord::testing
