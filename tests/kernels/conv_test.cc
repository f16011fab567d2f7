// CPU kernels of conv2d, convolution_backward, max_pool2d_with_indices(+backward)
// and avg_pool2d(+backward): forward values against a direct (naive) loop in
// this file, for several input/weight layouts; backward kernels against the
// adjoint identity <f(x), g> == <x, f^T(g)> (the forward ops are linear in
// the argument differentiated), which needs no second implementation.
#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "kernel_test_util.h"

namespace tensord::testing {
namespace {

using S = ScalarType;
using V = std::vector<int64_t>;

struct ConvCase {
  Shape x, w;
  bool bias;
  std::array<int64_t, 2> s, p, d;
  int64_t groups;
};

// out[n, o, y, x] = b[o] + sum_{c, i, j} in[n, g*cg + c, y*s - p + i*d, x*s - p + j*d] * w[o, c, i, j]
std::vector<double> NaiveConv(const std::vector<double>& in, const Shape& xs, const std::vector<double>& w,
                              const Shape& ws, const std::vector<double>* b, const ConvCase& k, Shape* out_sizes) {
  const int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3], o = ws[0], cg = ws[1], kh = ws[2], kw = ws[3];
  const int64_t oh = (h + 2 * k.p[0] - k.d[0] * (kh - 1) - 1) / k.s[0] + 1;
  const int64_t ow = (wd + 2 * k.p[1] - k.d[1] * (kw - 1) - 1) / k.s[1] + 1;
  *out_sizes = {n, o, oh, ow};
  const int64_t og = o / k.groups;
  std::vector<double> out(static_cast<size_t>(n * o * oh * ow));
  for (int64_t a = 0; a < n; ++a)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x) {
          double s = b ? (*b)[oc] : 0.0;
          const int64_t g = oc / og;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t iy = y * k.s[0] - k.p[0] + i * k.d[0], ix = x * k.s[1] - k.p[1] + j * k.d[1];
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                s += in[((a * c + g * cg + ci) * h + iy) * wd + ix] * w[((oc * cg + ci) * kh + i) * kw + j];
              }
          out[((a * o + oc) * oh + y) * ow + x] = s;
        }
  (void)c;
  return out;
}

double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// A channels-last restride of a 4-D tensor.
Tensor ChannelsLast(const Tensor& t) {
  const Shape& z = t.meta.sizes;
  return Restride(t, {z[1] * z[2] * z[3], 1, z[3] * z[1], z[1]});
}

const ConvCase kCases[] = {
    {{2, 3, 6, 7}, {4, 3, 3, 3}, false, {1, 1}, {0, 0}, {1, 1}, 1},
    {{2, 3, 6, 7}, {4, 3, 3, 2}, true, {2, 1}, {1, 1}, {1, 1}, 1},
    {{1, 4, 7, 7}, {6, 2, 3, 3}, true, {1, 1}, {2, 2}, {2, 2}, 2},
    {{2, 3, 4, 4}, {5, 3, 1, 1}, true, {1, 1}, {0, 0}, {1, 1}, 1},
    {{1, 4, 5, 5}, {4, 1, 3, 3}, false, {2, 2}, {1, 0}, {1, 2}, 4},
};

TEST(ConvKernelTest, ForwardMatchesNaiveLoopOnEveryLayout) {
  std::mt19937 rng(7);
  for (S dt : {S::kFloat32, S::kFloat64}) {
    for (const ConvCase& k : kCases) {
      Tensor x = Random(dt, k.x, rng, -1, 1), w = Random(dt, k.w, rng, -1, 1), b = Random(dt, {k.w[0]}, rng, -1, 1);
      Shape out_sizes;
      const std::vector<double> bv = Values(b);
      const std::vector<double> expect =
          NaiveConv(Values(x), k.x, Values(w), k.w, k.bias ? &bv : nullptr, k, &out_sizes);
      for (int layout = 0; layout < 4; ++layout) {
        const Tensor xl = layout == 1   ? ChannelsLast(x)
                          : layout == 2 ? Spread(x)
                          : layout == 3 ? ReversedLayout(x, 2)
                                        : x;
        const Tensor wl = layout == 1 ? Spread(w) : layout == 3 ? ChannelsLast(w) : w;
        OpRun r = RunOp("conv2d", {In(xl), In(wl), k.bias ? In(b) : Value(), Value(V{k.s[0], k.s[1]}),
                                   Value(V{k.p[0], k.p[1]}), Value(V{k.d[0], k.d[1]}), Value(k.groups)});
        ASSERT_TRUE(r.status.ok()) << r.status;
        EXPECT_EQ(r.outputs[0].meta.sizes, out_sizes);
        ExpectValues(r.outputs[0], expect, dt == S::kFloat32 ? 1e-5 : 1e-12, -1,
                     "conv2d layout " + std::to_string(layout));
      }
    }
  }
}

TEST(ConvKernelTest, UnbatchedAndEmptyBatch) {
  std::mt19937 rng(8);
  Tensor x = Random(S::kFloat32, {3, 5, 5}, rng, -1, 1), w = Random(S::kFloat32, {2, 3, 2, 2}, rng, -1, 1);
  Shape out_sizes;
  const ConvCase k{{1, 3, 5, 5}, {2, 3, 2, 2}, false, {1, 1}, {0, 0}, {1, 1}, 1};
  const std::vector<double> expect = NaiveConv(Values(x), k.x, Values(w), k.w, nullptr, k, &out_sizes);
  OpRun r = RunOp("conv2d", {In(x), In(w)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.sizes, (Shape{2, 4, 4}));
  ExpectValues(r.outputs[0], expect, 1e-5);
  Tensor x0 = Random(S::kFloat32, {0, 3, 5, 5}, rng);
  OpRun r0 = RunOp("conv2d", {In(x0), In(w)});
  ASSERT_TRUE(r0.status.ok()) << r0.status;
  EXPECT_EQ(r0.outputs[0].meta.sizes, (Shape{0, 2, 4, 4}));
}

TEST(ConvKernelTest, BackwardIsTheAdjoint) {
  std::mt19937 rng(9);
  for (const ConvCase& k : kCases) {
    Tensor x = Random(S::kFloat64, k.x, rng, -1, 1), w = Random(S::kFloat64, k.w, rng, -1, 1);
    const V s{k.s[0], k.s[1]}, p{k.p[0], k.p[1]}, d{k.d[0], k.d[1]};
    OpRun fwd = RunOp("conv2d", {In(x), In(w), Value(), Value(s), Value(p), Value(d), Value(k.groups)});
    ASSERT_TRUE(fwd.status.ok()) << fwd.status;
    Tensor g = Random(S::kFloat64, fwd.outputs[0].meta.sizes, rng, -1, 1);
    for (bool cl : {false, true}) {
      const Tensor xl = cl ? ChannelsLast(x) : x;
      OpRun bw = RunOp("convolution_backward", {In(Spread(g)), In(xl), In(w), Value(V{k.w[0]}), Value(s), Value(p),
                                                Value(d), Value(false), Value(V{0, 0}), Value(k.groups)});
      ASSERT_TRUE(bw.status.ok()) << bw.status;
      const double lhs = Dot(Values(fwd.outputs[0]), Values(g));
      // conv is linear in x and in w: <conv(x, w), g> = <x, dL/dx> = <w, dL/dw>
      EXPECT_NEAR(Dot(Values(x), Values(bw.outputs[0])), lhs, 1e-9 * (1 + std::fabs(lhs)));
      EXPECT_NEAR(Dot(Values(w), Values(bw.outputs[1])), lhs, 1e-9 * (1 + std::fabs(lhs)));
      // grad_bias: the sum of g over batch and space per output channel
      const std::vector<double> gv = Values(g);
      const Shape& gs = g.meta.sizes;
      std::vector<double> gb(static_cast<size_t>(gs[1]), 0.0);
      for (int64_t a = 0; a < gs[0]; ++a)
        for (int64_t o = 0; o < gs[1]; ++o)
          for (int64_t q = 0; q < gs[2] * gs[3]; ++q) gb[o] += gv[(a * gs[1] + o) * gs[2] * gs[3] + q];
      ExpectValues(bw.outputs[2], gb, 1e-12, 1e-12);
    }
  }
}

TEST(PoolKernelTest, MaxPoolValuesIndicesAndNaN) {
  // One 4x4 plane with a NaN: 2x2 windows, stride 2.
  Tensor x = FromValues(S::kFloat32, {1, 1, 4, 4}, {1, 5, 2, 0, 3, 4, NAN, 1, -1, -2, 7, 7, -3, -4, 7, 6});
  OpRun r = RunOp("max_pool2d_with_indices", {In(x), Value(V{2, 2})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {5, NAN, -1, 7});
  ExpectValues(r.outputs[1], {1, 6, 8, 10});  // ties keep the first; NaN wins
  // padding 1, ceil_mode, dilation 2 on a channels-last input
  std::mt19937 rng(3);
  Tensor y = Random(S::kFloat64, {2, 3, 7, 6}, rng);
  OpRun a = RunOp("max_pool2d_with_indices",
                  {In(y), Value(V{3, 3}), Value(V{2, 1}), Value(V{1, 1}), Value(V{2, 1}), Value(true)});
  OpRun b = RunOp("max_pool2d_with_indices",
                  {In(ChannelsLast(y)), Value(V{3, 3}), Value(V{2, 1}), Value(V{1, 1}), Value(V{2, 1}), Value(true)});
  ASSERT_TRUE(a.status.ok() && b.status.ok());
  ExpectValues(b.outputs[0], Values(a.outputs[0]));
  ExpectValues(b.outputs[1], Values(a.outputs[1]));
  // every value is the input at its index
  const std::vector<double> yv = Values(y), v = Values(a.outputs[0]), idx = Values(a.outputs[1]);
  const int64_t planes = 6, oplane = static_cast<int64_t>(v.size()) / planes;
  for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i) {
    EXPECT_EQ(v[i], yv[(i / oplane) * 42 + static_cast<int64_t>(idx[i])]);
  }
}

TEST(PoolKernelTest, AvgPoolDivisors) {
  Tensor x = FromValues(S::kFloat32, {1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto avg = [&](bool cip, Value div) {
    return RunOp("avg_pool2d", {In(x), Value(V{2, 2}), Value(V{2, 2}), Value(V{1, 1}), Value(false), Value(cip), div});
  };
  OpRun a = avg(true, Value());
  ASSERT_TRUE(a.status.ok()) << a.status;
  ExpectValues(a.outputs[0], {1 / 4.0, 5 / 4.0, 11 / 4.0, 28 / 4.0});
  OpRun b = avg(false, Value());
  ExpectValues(b.outputs[0], {1, 2.5, 5.5, 7});
  OpRun c = avg(true, Value(int64_t{3}));
  ExpectValues(c.outputs[0], {1 / 3.0, 5 / 3.0, 11 / 3.0, 28 / 3.0});
}

TEST(PoolKernelTest, BackwardsAreTheAdjoint) {
  std::mt19937 rng(11);
  Tensor x = Random(S::kFloat64, {2, 3, 7, 6}, rng);
  // avg_pool2d is linear: <avg(x), g> == <x, avg_backward(g)>
  for (bool cip : {true, false}) {
    const V k{3, 2}, s{2, 1}, p{1, 1};
    OpRun f = RunOp("avg_pool2d", {In(x), Value(k), Value(s), Value(p), Value(true), Value(cip)});
    ASSERT_TRUE(f.status.ok()) << f.status;
    Tensor g = Random(S::kFloat64, f.outputs[0].meta.sizes, rng);
    OpRun bw = RunOp("avg_pool2d_backward",
                     {In(g), In(ChannelsLast(x)), Value(k), Value(s), Value(p), Value(true), Value(cip), Value()});
    ASSERT_TRUE(bw.status.ok()) << bw.status;
    EXPECT_NEAR(Dot(Values(f.outputs[0]), Values(g)), Dot(Values(x), Values(bw.outputs[0])), 1e-9);
  }
  // max pooling with fixed indices is linear in x: <x[idx], g> == <x, scatter(g, idx)>
  const V k{2, 2}, s{1, 1}, p{0, 0}, d{1, 1};
  OpRun f = RunOp("max_pool2d_with_indices", {In(x), Value(k), Value(s), Value(p), Value(d)});
  ASSERT_TRUE(f.status.ok()) << f.status;
  Tensor g = Random(S::kFloat64, f.outputs[0].meta.sizes, rng);
  OpRun bw = RunOp("max_pool2d_with_indices_backward",
                   {In(Spread(g)), In(x), Value(k), Value(s), Value(p), Value(d), Value(false), In(f.outputs[1])});
  ASSERT_TRUE(bw.status.ok()) << bw.status;
  EXPECT_NEAR(Dot(Values(f.outputs[0]), Values(g)), Dot(Values(x), Values(bw.outputs[0])), 1e-9);
  // hostile indices: a clean IndexError, no write out of bounds
  Tensor bad = FromValues(S::kInt64, f.outputs[1].meta.sizes, std::vector<double>(f.outputs[1].numel(), 99.0));
  OpRun e = RunOp("max_pool2d_with_indices_backward",
                  {In(g), In(x), Value(k), Value(s), Value(p), Value(d), Value(false), In(bad)});
  ASSERT_FALSE(e.status.ok());
  EXPECT_EQ(KindOf(e.status), ErrorKind::kIndex) << e.status;
}

}  // namespace
}  // namespace tensord::testing
