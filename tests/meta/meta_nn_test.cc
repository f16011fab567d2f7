// Meta functions of the nn family (conv2d, convolution_backward, max/avg
// pooling and their backwards): output sizes, every stride (PyTorch 1.13 CPU
// printed the layouts quoted in comments), and error kinds and texts.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "meta_test_util.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/op_table.h"
#include "tensord/meta/schema.h"

namespace tensord {
namespace {

using S = ScalarType;
using meta_test::Call;
using meta_test::Dense;
using meta_test::ExpectErrorContains;
using meta_test::Strided;
using V = std::vector<int64_t>;

void ExpectOut(const absl::StatusOr<MetaResult>& r, size_t i, Shape sizes, Shape strides, S dtype = S::kFloat32) {
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_GT(r->outputs.size(), i);
  EXPECT_EQ(r->outputs[i].sizes, sizes);
  EXPECT_EQ(r->outputs[i].strides, strides);
  EXPECT_EQ(r->outputs[i].storage_offset, 0);
  EXPECT_EQ(r->outputs[i].dtype, dtype);
  EXPECT_EQ(r->alias_of[i], -1);
}

TEST(Conv2dMetaTest, SizesAndLayouts) {
  const TensorMeta x = Dense({2, 3, 6, 7}), w = Dense({4, 3, 3, 3}), b = Dense({4});
  // torch: conv2d(x, w) -> [2, 4, 4, 5] (80, 20, 5, 1)
  ExpectOut(Call("conv2d", {Value(&x), Value(&w)}), 0, {2, 4, 4, 5}, {80, 20, 5, 1});
  // stride 2, padding 1 -> [2, 4, 3, 4]
  ExpectOut(Call("conv2d", {Value(&x), Value(&w), Value(&b), Value(V{2, 2}), Value(V{1, 1})}), 0, {2, 4, 3, 4},
            {48, 12, 4, 1});
  // channels-last input or weight -> channels-last output (80, 1, 20, 4)
  const TensorMeta xcl = Strided({2, 3, 6, 7}, {126, 1, 21, 3});
  const TensorMeta wcl = Strided({4, 3, 3, 3}, {27, 1, 9, 3});
  ExpectOut(Call("conv2d", {Value(&xcl), Value(&w)}), 0, {2, 4, 4, 5}, {80, 1, 20, 4});
  ExpectOut(Call("conv2d", {Value(&x), Value(&wcl)}), 0, {2, 4, 4, 5}, {80, 1, 20, 4});
  // transposed H/W input -> contiguous
  const TensorMeta xt = Strided({2, 3, 6, 7}, {126, 42, 1, 6});
  ExpectOut(Call("conv2d", {Value(&xt), Value(&w)}), 0, {2, 4, 4, 5}, {80, 20, 5, 1});
  // size-1 spatial channels-last (3, 1, 3, 3) -> (4, 1, 4, 4)
  const TensorMeta x1 = Strided({2, 3, 1, 1}, {3, 1, 3, 3});
  const TensorMeta w1 = Dense({4, 3, 1, 1});
  ExpectOut(Call("conv2d", {Value(&x1), Value(&w1)}), 0, {2, 4, 1, 1}, {4, 1, 4, 4});
  // unbatched [3, 6, 7] -> [4, 4, 5] (20, 5, 1); an HWC-permuted one too: unsqueeze(0) gives it
  // N-stride 3, which PyTorch does not read as channels-last
  const TensorMeta xu = Dense({3, 6, 7});
  ExpectOut(Call("conv2d", {Value(&xu), Value(&w)}), 0, {4, 4, 5}, {20, 5, 1});
  const TensorMeta xuhwc = Strided({3, 6, 7}, {1, 21, 3});
  ExpectOut(Call("conv2d", {Value(&xuhwc), Value(&w)}), 0, {4, 4, 5}, {20, 5, 1});
  // empty batch, groups + dilation
  const TensorMeta x0 = Dense({0, 3, 5, 5});
  ExpectOut(Call("conv2d", {Value(&x0), Value(&w)}), 0, {0, 4, 3, 3}, {36, 9, 3, 1});
  const TensorMeta xg = Dense({1, 4, 7, 7}, S::kFloat64), wg = Dense({6, 2, 3, 3}, S::kFloat64);
  ExpectOut(Call("conv2d", {Value(&xg), Value(&wg), Value(), Value(int64_t{1}), Value(int64_t{2}), Value(int64_t{2}),
                            Value(int64_t{2})}),
            0, {1, 6, 7, 7}, {294, 49, 7, 1}, S::kFloat64);
}

TEST(Conv2dMetaTest, Errors) {
  const TensorMeta x = Dense({2, 3, 6, 7}), w = Dense({4, 3, 3, 3});
  const TensorMeta w2 = Dense({4, 2, 3, 3}), b3 = Dense({3}), small = Dense({2, 3, 2, 2}), x2d = Dense({3, 6});
  const TensorMeta xi = Dense({2, 3, 6, 7}, S::kInt64), wi = Dense({4, 3, 3, 3}, S::kInt64);
  const TensorMeta xd = Dense({2, 3, 6, 7}, S::kFloat64), w3 = Dense({4, 3, 3});
  ExpectErrorContains(Call("conv2d", {Value(&x), Value(&w2)}), ErrorKind::kRuntime,
              "Given groups=1, weight of size [4, 2, 3, 3], expected input[2, 3, 6, 7] to have 2 channels, but got 3 "
              "channels instead");
  ExpectErrorContains(Call("conv2d", {Value(&x), Value(&w), Value(), Value(int64_t{1}), Value(int64_t{0}), Value(int64_t{1}),
                              Value(int64_t{2})}),
              ErrorKind::kRuntime, "to have 6 channels, but got 3 channels instead");
  ExpectErrorContains(Call("conv2d", {Value(&x), Value(&w), Value(&b3)}), ErrorKind::kRuntime,
              "Given weight of size [4, 3, 3, 3], expected bias to be 1-dimensional with 4 elements, but got bias of "
              "size [3] instead");
  ExpectErrorContains(Call("conv2d", {Value(&small), Value(&w)}), ErrorKind::kRuntime,
              "Calculated padded input size per channel: (2 x 2). Kernel size: (3 x 3). Kernel size can't be greater "
              "than actual input size");
  ExpectErrorContains(Call("conv2d", {Value(&x2d), Value(&w)}), ErrorKind::kRuntime,
              "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [3, 6]");
  ExpectErrorContains(Call("conv2d", {Value(&x), Value(&w), Value(), Value(V{1, 1, 1})}), ErrorKind::kRuntime,
              "expected stride to be a single integer value or a list of 2 values to match the convolution "
              "dimensions, but got stride=[1, 1, 1]");
  ExpectErrorContains(Call("conv2d", {Value(&x), Value(&w), Value(), Value(int64_t{0})}), ErrorKind::kRuntime,
              "non-positive stride is not supported");
  ExpectErrorContains(Call("conv2d", {Value(&x), Value(&w), Value(), Value(int64_t{1}), Value(int64_t{-1})}),
              ErrorKind::kRuntime, "negative padding is not supported");
  ExpectErrorContains(Call("conv2d", {Value(&xi), Value(&wi)}), ErrorKind::kRuntime, "not implemented for 'Long'");
  ExpectErrorContains(Call("conv2d", {Value(&xd), Value(&w)}), ErrorKind::kRuntime,
              "expected scalar type Double but found Float");
  ExpectErrorContains(Call("conv2d", {Value(&x), Value(&w3)}), ErrorKind::kRuntime, "Expected 4-dimensional weight");
  // Hostile numbers: overflow is a clean error.
  ExpectErrorContains(Call("conv2d", {Value(&x), Value(&w), Value(), Value(int64_t{1}), Value(int64_t{INT64_MAX / 2})}),
              ErrorKind::kRuntime, "overflows");
}

TEST(ConvolutionBackwardMetaTest, ThreeGradientsInTheForwardsLayout) {
  const TensorMeta g = Dense({2, 4, 4, 5}), x = Dense({2, 3, 6, 7}), w = Dense({4, 3, 3, 3});
  const TensorMeta xcl = Strided({2, 3, 6, 7}, {126, 1, 21, 3});
  auto call = [&](const TensorMeta& in, bool transposed) {
    return Call("convolution_backward", {Value(&g), Value(&in), Value(&w), Value(V{4}), Value(V{1, 1}), Value(V{0, 0}),
                                         Value(V{1, 1}), Value(transposed), Value(V{0, 0}), Value(int64_t{1})});
  };
  auto r = call(x, false);
  ExpectOut(r, 0, {2, 3, 6, 7}, {126, 42, 7, 1});
  ExpectOut(r, 1, {4, 3, 3, 3}, {27, 9, 3, 1});
  ExpectOut(r, 2, {4}, {1});
  // torch: channels-last input -> (126, 1, 21, 3), (27, 1, 9, 3), (1,)
  auto rc = call(xcl, false);
  ExpectOut(rc, 0, {2, 3, 6, 7}, {126, 1, 21, 3});
  ExpectOut(rc, 1, {4, 3, 3, 3}, {27, 1, 9, 3});
  ExpectErrorContains(call(x, true), ErrorKind::kNotImplemented, "transposed convolution is not supported");
  const TensorMeta gbad = Dense({2, 4, 4, 4});
  ExpectErrorContains(Call("convolution_backward", {Value(&gbad), Value(&x), Value(&w), Value(), Value(V{1, 1}), Value(V{0, 0}),
                                            Value(V{1, 1}), Value(false), Value(V{0, 0}), Value(int64_t{1})}),
              ErrorKind::kRuntime, "expected grad_output of size [2, 4, 4, 5]");
}

TEST(PoolMetaTest, OutputSizesCeilModeAndLayouts) {
  const TensorMeta x = Dense({2, 3, 6, 7});
  auto mp = [](const TensorMeta& t, V k, V s, V p, V d, bool ceil) {
    return Call("max_pool2d_with_indices", {Value(&t), Value(k), Value(s), Value(p), Value(d), Value(ceil)});
  };
  auto r = mp(x, {2, 2}, {}, {0, 0}, {1, 1}, false);
  ExpectOut(r, 0, {2, 3, 3, 3}, {27, 9, 3, 1});
  ExpectOut(r, 1, {2, 3, 3, 3}, {27, 9, 3, 1}, S::kInt64);
  ExpectOut(mp(x, {3, 3}, {2, 2}, {0, 0}, {1, 1}, true), 0, {2, 3, 3, 3}, {27, 9, 3, 1});
  // ceil_mode: the last window must start inside the input or its left padding
  const TensorMeta x5 = Dense({1, 1, 5, 5});
  ExpectOut(mp(x5, {2, 2}, {2, 2}, {1, 1}, {1, 1}, true), 0, {1, 1, 3, 3}, {9, 9, 3, 1});
  ExpectOut(mp(x5, {3, 3}, {1, 1}, {1, 1}, {2, 2}, false), 0, {1, 1, 3, 3}, {9, 9, 3, 1});
  // channels-last -> (27, 1, 9, 3) for values and indices
  const TensorMeta xcl = Strided({2, 3, 6, 7}, {126, 1, 21, 3});
  auto rc = mp(xcl, {2, 2}, {}, {0, 0}, {1, 1}, false);
  ExpectOut(rc, 0, {2, 3, 3, 3}, {27, 1, 9, 3});
  ExpectOut(rc, 1, {2, 3, 3, 3}, {27, 1, 9, 3}, S::kInt64);
  const TensorMeta xu = Dense({3, 5, 5});
  ExpectOut(mp(xu, {2, 2}, {1, 1}, {0, 0}, {1, 1}, false), 0, {3, 4, 4}, {16, 4, 1});
  ExpectOut(Call("avg_pool2d", {Value(&xcl), Value(V{2, 2})}), 0, {2, 3, 3, 3}, {27, 1, 9, 3});
  ExpectOut(Call("avg_pool2d", {Value(&x), Value(V{3, 3}), Value(V{2, 2}), Value(V{1, 1}), Value(true)}), 0,
            {2, 3, 4, 4}, {48, 16, 4, 1});
}

TEST(PoolMetaTest, Errors) {
  const TensorMeta x = Dense({2, 3, 6, 7}), small = Dense({3, 2, 2}), x2d = Dense({6, 7}), xc0 = Dense({2, 0, 6, 7});
  const TensorMeta xi = Dense({2, 3, 6, 7}, S::kInt32);
  auto mp = [](const TensorMeta& t, V k, V s, V p) {
    return Call("max_pool2d_with_indices", {Value(&t), Value(k), Value(s), Value(p)});
  };
  ExpectErrorContains(mp(x, {3, 3}, {1, 1}, {2, 2}), ErrorKind::kRuntime,
              "pad should be at most half of kernel size, but got pad=2 and kernel_size=3");
  ExpectErrorContains(mp(small, {4, 4}, {1, 1}, {0, 0}), ErrorKind::kRuntime,
              "Given input size: (3x2x2). Calculated output size: (3x-1x-1). Output size is too small");
  ExpectErrorContains(mp(x, {2, 2}, {0, 0}, {0, 0}), ErrorKind::kRuntime, "stride should not be zero");
  ExpectErrorContains(mp(x, {2, 2}, {-1, -1}, {0, 0}), ErrorKind::kRuntime,
              "stride should be greater than zero, but got dH: -1 dW: -1");
  ExpectErrorContains(mp(x2d, {2, 2}, {}, {0, 0}), ErrorKind::kRuntime, "non-empty 3D or 4D (batch mode) tensor expected");
  ExpectErrorContains(mp(xc0, {2, 2}, {}, {0, 0}), ErrorKind::kRuntime,
              "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but got:[2, 0, 6, 7]");
  ExpectErrorContains(mp(x, {2, 2, 2}, {}, {0, 0}), ErrorKind::kRuntime,
              "kernel_size must either be a single int, or a tuple of two ints");
  ExpectErrorContains(mp(xi, {2, 2}, {}, {0, 0}), ErrorKind::kRuntime, "not implemented for 'Int'");
  ExpectErrorContains(mp(x, {INT64_MAX, INT64_MAX}, {1, 1}, {0, 0}), ErrorKind::kRuntime, "Output size is too small");
  ExpectErrorContains(Call("avg_pool2d", {Value(&x), Value(V{2, 2}), Value(V{}), Value(V{0, 0}), Value(false), Value(true),
                                  Value(int64_t{0})}),
              ErrorKind::kRuntime, "divisor must be not zero");
  ExpectErrorContains(Call("avg_pool2d", {Value(&x2d), Value(V{2, 2})}), ErrorKind::kIndex, "Dimension out of range");
}

TEST(PoolBackwardMetaTest, InputLayoutAndChecks) {
  const TensorMeta x = Dense({2, 3, 6, 7}), xcl = Strided({2, 3, 6, 7}, {126, 1, 21, 3});
  const TensorMeta g = Dense({2, 3, 3, 3}), idx = Dense({2, 3, 3, 3}, S::kInt64), gbad = Dense({2, 3, 2, 2});
  auto mb = [&](const TensorMeta& gr, const TensorMeta& in, const TensorMeta& ix) {
    return Call("max_pool2d_with_indices_backward", {Value(&gr), Value(&in), Value(V{2, 2}), Value(V{2, 2}),
                                                     Value(V{0, 0}), Value(V{1, 1}), Value(false), Value(&ix)});
  };
  ExpectOut(mb(g, x, idx), 0, {2, 3, 6, 7}, {126, 42, 7, 1});
  ExpectOut(mb(g, xcl, idx), 0, {2, 3, 6, 7}, {126, 1, 21, 3});
  ExpectErrorContains(mb(gbad, x, idx), ErrorKind::kRuntime, "expected grad_output of size [2, 3, 3, 3]");
  ExpectErrorContains(mb(g, x, g), ErrorKind::kRuntime, "expected indices of dtype int64");
  auto ab = [&](const TensorMeta& gr, const TensorMeta& in) {
    return Call("avg_pool2d_backward", {Value(&gr), Value(&in), Value(V{2, 2}), Value(V{2, 2}), Value(V{0, 0}),
                                        Value(false), Value(true), Value()});
  };
  ExpectOut(ab(g, xcl), 0, {2, 3, 6, 7}, {126, 1, 21, 3});
  ExpectErrorContains(ab(gbad, x), ErrorKind::kRuntime, "expected grad_output of size [2, 3, 3, 3]");
}

}  // namespace
}  // namespace tensord
