// CPU kernels of erf, gelu, softmax and log_softmax against their
// definitions, along every dim.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernel_test_util.h"

namespace tensord::testing {
namespace {

using S = ScalarType;

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

}  // namespace
}  // namespace tensord::testing
