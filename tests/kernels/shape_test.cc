// CPU kernels of the shape ops that copy: flip, roll, repeat,
// constant_pad_nd, tril/triu and scatter, for every input layout the harness
// has (contiguous, permuted-dense, spread with an offset) and several dtypes,
// against references computed here element by element from the definitions;
// scatter's index range errors (the kernel's, since meta cannot see values).
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "kernel_test_util.h"

namespace tensord::testing {
namespace {

using S = ScalarType;

int64_t RowMajor(const Shape& idx, const Shape& sizes) {
  int64_t k = 0;
  for (size_t d = 0; d < sizes.size(); ++d) k = k * sizes[d] + idx[d];
  return k;
}

int64_t Mod(int64_t a, int64_t n) { return ((a % n) + n) % n; }

// expected[i] = input[map(i)] (or `fill` when map gives -1 in some dim).
std::vector<double> Gather(const Tensor& in, const Shape& out_sizes,
                           const std::function<int64_t(int64_t d, int64_t j)>& map, double fill = 0) {
  const std::vector<double> v = Values(in);
  std::vector<double> out;
  ForEachIndex(out_sizes, [&](const Shape& i) {
    Shape src(i.size());
    for (size_t d = 0; d < i.size(); ++d) {
      src[d] = map(static_cast<int64_t>(d), i[d]);
      if (src[d] < 0) {
        out.push_back(fill);
        return;
      }
    }
    out.push_back(v[RowMajor(src, in.meta.sizes)]);
  });
  return out;
}

const S kDtypes[] = {S::kFloat32, S::kFloat64, S::kInt64, S::kInt8, S::kBool, S::kFloat16, S::kBFloat16};

TEST(ShapeKernelTest, FlipEveryLayoutAndDtype) {
  std::mt19937 rng(1);
  for (S dt : kDtypes) {
    for (Layout l : kAllLayouts) {
      const Tensor a = WithLayout(Random(dt, {2, 3, 4}, rng), l);
      OpRun r = RunOp("flip", {In(a), Value(Shape{0, -1})});
      ASSERT_TRUE(r.status.ok()) << r.status;
      const Shape& s = a.meta.sizes;
      ExpectValues(r.outputs[0], Gather(a, s, [&](int64_t d, int64_t j) { return d == 1 ? j : s[d] - 1 - j; }));
    }
  }
  const Tensor z = Scalar0d(S::kFloat32, 2.5);
  OpRun r = RunOp("flip", {In(z), Value(Shape{0})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {2.5});
}

TEST(ShapeKernelTest, RollAlongDimsAndFlattened) {
  std::mt19937 rng(2);
  for (Layout l : kAllLayouts) {
    const Tensor a = WithLayout(Random(S::kFloat32, {4, 5}, rng), l);
    // Two shifts of dim 0 add; a negative shift of dim 1.
    OpRun r = RunOp("roll", {In(a), Value(Shape{1, 2, -7}), Value(Shape{0, 0, 1})});
    ASSERT_TRUE(r.status.ok()) << r.status;
    ExpectValues(r.outputs[0], Gather(a, {4, 5}, [](int64_t d, int64_t j) {
                   return d == 0 ? Mod(j - 3, 4) : Mod(j + 7, 5);
                 }));
    OpRun f = RunOp("roll", {In(a), Value(Shape{INT64_MIN + 3})});  // flattened, a shift beyond any size
    ASSERT_TRUE(f.status.ok()) << f.status;
    const std::vector<double> v = Values(a);
    const int64_t shift = Mod(INT64_MIN + 3, 20);
    std::vector<double> expected;
    for (int64_t k = 0; k < 20; ++k) expected.push_back(v[Mod(k - shift, 20)]);
    ExpectValues(f.outputs[0], expected);
  }
}

TEST(ShapeKernelTest, RepeatTilesAndAddsLeadingDims) {
  std::mt19937 rng(3);
  for (Layout l : kAllLayouts) {
    const Tensor a = WithLayout(Random(S::kInt32, {2, 3}, rng), l);
    OpRun r = RunOp("repeat", {In(a), Value(Shape{2, 3, 2})});
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.outputs[0].meta.sizes, (Shape{2, 6, 6}));
    const std::vector<double> v = Values(a);
    std::vector<double> expected;
    ForEachIndex({2, 6, 6}, [&](const Shape& i) { expected.push_back(v[(i[1] % 2) * 3 + i[2] % 3]); });
    ExpectValues(r.outputs[0], expected);
  }
}

TEST(ShapeKernelTest, ConstantPadGrowsAndCrops) {
  std::mt19937 rng(4);
  for (S dt : {S::kFloat32, S::kInt64, S::kBool}) {
    for (Layout l : kAllLayouts) {
      const Tensor a = WithLayout(Random(dt, {3, 4}, rng), l);
      // Last dim: 2 in front, 1 cropped behind; dim 0: 1 cropped in front, 2 behind.
      OpRun r = RunOp("constant_pad_nd", {In(a), Value(Shape{2, -1, -1, 2}), Value(Scalar::Int(1))});
      ASSERT_TRUE(r.status.ok()) << r.status;
      EXPECT_EQ(r.outputs[0].meta.sizes, (Shape{4, 5}));
      ExpectValues(r.outputs[0], Gather(a, {4, 5}, [](int64_t d, int64_t j) -> int64_t {
                     const int64_t i = d == 0 ? j + 1 : j - 2;
                     const int64_t n = d == 0 ? 3 : 4;
                     return i >= 0 && i < (d == 0 ? n : n - 1) ? i : -1;
                   }, 1));
    }
  }
}

TEST(ShapeKernelTest, TrilTriuBatched) {
  std::mt19937 rng(5);
  for (Layout l : kAllLayouts) {
    const Tensor a = WithLayout(Random(S::kFloat64, {2, 3, 4}, rng), l);
    for (int64_t k : {int64_t{-1}, int64_t{0}, int64_t{2}, int64_t{1} << 62, int64_t{INT64_MIN}}) {
      for (const char* op : {"tril", "triu"}) {
        OpRun r = RunOp(op, {In(a), Value(k)});
        ASSERT_TRUE(r.status.ok()) << r.status;
        const std::vector<double> v = Values(a);
        std::vector<double> expected;
        ForEachIndex(a.meta.sizes, [&](const Shape& i) {
          const __int128 diff = static_cast<__int128>(i[2]) - i[1];
          const bool keep = std::string(op) == "tril" ? diff <= k : diff >= k;
          expected.push_back(keep ? v[RowMajor(i, a.meta.sizes)] : 0.0);
        });
        ExpectValues(r.outputs[0], expected);
      }
    }
  }
}

TEST(ShapeKernelTest, ScatterSrcAndValue) {
  std::mt19937 rng(6);
  for (Layout l : kAllLayouts) {
    const Tensor self = WithLayout(Random(S::kFloat32, {4, 3}, rng), l);
    const Tensor src = WithLayout(Random(S::kFloat32, {3, 3}, rng), l);
    const Tensor index = WithLayout(FromValues(S::kInt64, {2, 3}, {3, 0, 1, 1, 2, 0}), l);
    OpRun r = RunOp("scatter.src", {In(self), Value(int64_t{0}), In(index), In(src)});
    ASSERT_TRUE(r.status.ok()) << r.status;
    std::vector<double> expected = Values(self);
    const std::vector<double> sv = Values(src), iv = Values(index);
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < 3; ++j) expected[static_cast<int64_t>(iv[i * 3 + j]) * 3 + j] = sv[i * 3 + j];
    }
    ExpectValues(r.outputs[0], expected);
    OpRun v = RunOp("scatter.value", {In(self), Value(int64_t{-1}), In(index), Value(Scalar::Float(9.0))});
    EXPECT_FALSE(v.status.ok());  // index 3 along dim 1 of size 3
    EXPECT_TRUE(absl::StrContains(v.status.message(), "index 3 is out of bounds for dimension 1 with size 3"))
        << v.status.message();
  }
  const Tensor self = FromValues(S::kInt64, {2, 2}, {1, 2, 3, 4});
  const Tensor neg = FromValues(S::kInt64, {1, 1}, {-1});
  OpRun r = RunOp("scatter.value", {In(self), Value(int64_t{0}), In(neg), Value(Scalar::Int(7))});
  EXPECT_TRUE(absl::StrContains(r.status.message(), "index -1 is out of bounds for dimension 0 with size 2"))
      << r.status.message();
  const Tensor ok = FromValues(S::kInt64, {1, 2}, {1, 0});
  r = RunOp("scatter.value", {In(self), Value(int64_t{0}), In(ok), Value(Scalar::Float(7.9))});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {1, 7, 7, 4});  // 7.9 converted to int64 as fill_ does
}

}  // namespace
}  // namespace tensord::testing
