// topk, gather, index_select, advanced indexing, nonzero and masked_select
// against reference loops, including every out-of-range index (an error,
// never a read outside the tensor).
#include <algorithm>
#include <cmath>
#include <limits>

#include "gtest/gtest.h"
#include "kernel_test_util.h"

namespace tensord::testing {
namespace {

const double kNan = std::numeric_limits<double>::quiet_NaN();

TEST(TopkTest, LargestSmallestTiesAndNan) {
  const Tensor a = FromValues(ScalarType::kFloat32, {4}, {1, 3, 3, 1});
  OpRun r = RunOp("topk", {In(a), Value(int64_t{3})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {3, 3, 1});
  ExpectValues(r.outputs[1], {1, 2, 0});
  r = RunOp("topk", {In(a), Value(int64_t{3})}, {{"largest", Value(false)}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {1, 1, 3});
  ExpectValues(r.outputs[1], {0, 3, 1});
  const Tensor n = FromValues(ScalarType::kFloat64, {4}, {1, kNan, 3, kNan});
  r = RunOp("topk", {In(n), Value(int64_t{2})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {kNan, kNan});
  ExpectValues(r.outputs[1], {1, 3});
  r = RunOp("topk", {In(n), Value(int64_t{2})}, {{"largest", Value(false)}});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {1, 3});
  ExpectValues(r.outputs[1], {0, 2});
}

TEST(TopkTest, AlongEveryDimAndLayout) {
  std::mt19937 rng(30);
  for (ScalarType dt : {ScalarType::kFloat32, ScalarType::kInt64, ScalarType::kFloat16}) {
    const Tensor base = Random(dt, {5, 6, 7}, rng, -3, 3);
    for (Layout l : kAllLayouts) {
      const Tensor a = WithLayout(base, l);
      for (int64_t d = 0; d < 3; ++d) {
        for (bool largest : {true, false}) {
          const int64_t k = 3;
          OpRun r = RunOp("topk", {In(a), Value(k), Value(d), Value(largest)});
          ASSERT_TRUE(r.status.ok()) << r.status;
          Shape os = a.meta.sizes;
          os[d] = k;
          ASSERT_EQ(r.outputs[0].meta.sizes, os);
          // Reference: stable sort of each slice.
          std::vector<double> ev(static_cast<size_t>(5 * 6 * 7 / a.meta.sizes[d] * k)), ei(ev.size());
          const Shape ostr = ContiguousStrides(os);
          Shape outer = a.meta.sizes;
          outer[d] = 1;
          ForEachIndex(outer, [&](const Shape& o) {
            std::vector<std::pair<double, int64_t>> s;
            Shape i = o;
            for (int64_t j = 0; j < a.meta.sizes[d]; ++j) {
              i[d] = j;
              s.push_back({ReadAt(a.element(i), dt), j});
            }
            std::stable_sort(s.begin(), s.end(), [&](auto x, auto y) {
              return largest ? x.first > y.first : x.first < y.first;
            });
            for (int64_t j = 0; j < k; ++j) {
              Shape oi = o;
              oi[d] = j;
              int64_t flat = 0;
              for (size_t q = 0; q < oi.size(); ++q) flat += oi[q] * ostr[q];
              ev[flat] = s[j].first;
              ei[flat] = static_cast<double>(s[j].second);
            }
          });
          ExpectValues(r.outputs[0], ev, 0, 0, "topk values");
          ExpectValues(r.outputs[1], ei, 0, 0, "topk indices");
        }
      }
    }
  }
}

TEST(TopkTest, KOutOfRangeAndEdgeCases) {
  const Tensor a = FromValues(ScalarType::kInt32, {3}, {1, 2, 3});
  OpRun r = RunOp("topk", {In(a), Value(int64_t{4})});
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(std::string(r.status.message()), "topk: selected index k out of range (k is 4, dimension 0 has size 3)");
  r = RunOp("topk", {In(a), Value(int64_t{-1})});
  EXPECT_FALSE(r.status.ok());
  r = RunOp("topk", {In(a), Value(int64_t{0})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.sizes, (Shape{0}));
  r = RunOp("topk", {In(a), Value(int64_t{3})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {3, 2, 1});
  ExpectValues(r.outputs[1], {2, 1, 0});
}

TEST(GatherTest, MatchesReference) {
  std::mt19937 rng(31);
  const Tensor self = ReversedLayout(Random(ScalarType::kFloat64, {4, 5, 6}, rng));
  for (int64_t d = 0; d < 3; ++d) {
    Shape is = {3, 4, 5};
    std::vector<double> iv;
    ForEachIndex(is, [&](const Shape&) { iv.push_back(rng() % self.meta.sizes[d]); });
    const Tensor index = Spread(FromValues(ScalarType::kInt64, is, iv));
    OpRun r = RunOp("gather", {In(self), Value(d), In(index)});
    ASSERT_TRUE(r.status.ok()) << r.status;
    std::vector<double> expect;
    size_t q = 0;
    ForEachIndex(is, [&](const Shape& i) {
      Shape s = i;
      s[d] = static_cast<int64_t>(iv[q++]);
      expect.push_back(ReadAt(self.element(s), self.meta.dtype));
    });
    ExpectValues(r.outputs[0], expect, 0, 0);
  }
}

TEST(GatherTest, OutOfRangeIndexIsAnError) {
  const Tensor self = FromValues(ScalarType::kFloat32, {2, 3}, {0, 1, 2, 3, 4, 5});
  for (double bad : {3.0, -1.0, 1e12}) {
    const Tensor index = FromValues(ScalarType::kInt64, {2, 2}, {0, 1, bad, 2});
    OpRun r = RunOp("gather", {In(self), Value(int64_t{1}), In(index)});
    ASSERT_FALSE(r.status.ok());
    EXPECT_EQ(std::string(r.status.message()), "index " + std::to_string(static_cast<int64_t>(bad)) +
                                      " is out of bounds for dimension 1 with size 3");
  }
}

TEST(IndexSelectTest, MatchesReferenceAndChecksRange) {
  std::mt19937 rng(32);
  const Tensor self = Spread(Random(ScalarType::kInt32, {4, 5, 3}, rng));
  const Tensor index = FromValues(ScalarType::kInt64, {6}, {4, 0, 0, 2, 3, 1});
  OpRun r = RunOp("index_select", {In(self), Value(int64_t{1}), In(index)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.sizes, (Shape{4, 6, 3}));
  std::vector<double> expect;
  ForEachIndex({4, 6, 3}, [&](const Shape& i) {
    Shape s = i;
    s[1] = static_cast<int64_t>(Values(index)[i[1]]);
    expect.push_back(ReadAt(self.element(s), self.meta.dtype));
  });
  ExpectValues(r.outputs[0], expect, 0, 0);

  const Tensor ten = FromValues(ScalarType::kFloat32, {10}, std::vector<double>(10, 1));
  const Tensor bad = FromValues(ScalarType::kInt64, {2}, {3, 12});
  r = RunOp("index_select", {In(ten), Value(int64_t{0}), In(bad)});
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(std::string(r.status.message()), "index_select(): index 12 is out of bounds for dimension 0 with size 10");
  EXPECT_EQ(KindOf(r.status), ErrorKind::kIndex);
  const Tensor neg = FromValues(ScalarType::kInt64, {1}, {-1});
  r = RunOp("index_select", {In(ten), Value(int64_t{0}), In(neg)});
  EXPECT_FALSE(r.status.ok());
}

TEST(IndexTensorTest, AdvancedIndexing) {
  std::mt19937 rng(33);
  const Tensor self = ReversedLayout(Random(ScalarType::kFloat32, {4, 5, 6}, rng));
  const Tensor i0 = FromValues(ScalarType::kInt64, {2, 1}, {0, -1});
  const Tensor i1 = FromValues(ScalarType::kInt64, {3}, {4, 0, 2});
  // Adjacent indexed dims 0 and 1: result [2, 3, 6].
  OpRun r = RunOp("index.Tensor", {In(self), InList({&i0, &i1})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.sizes, (Shape{2, 3, 6}));
  std::vector<double> expect;
  ForEachIndex({2, 3, 6}, [&](const Shape& i) {
    int64_t a = static_cast<int64_t>(Values(i0)[i[0]]);
    if (a < 0) a += 4;
    const int64_t b = static_cast<int64_t>(Values(i1)[i[1]]);
    expect.push_back(ReadAt(self.element({a, b, i[2]}), self.meta.dtype));
  });
  ExpectValues(r.outputs[0], expect, 0, 0, "adjacent");
  // Non-adjacent (dims 0 and 2): the broadcast dims go first: [2, 3, 5].
  r = RunOp("index.Tensor", {In(self), InList({&i0, nullptr, &i1})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.sizes, (Shape{2, 3, 5}));
  expect.clear();
  ForEachIndex({2, 3, 5}, [&](const Shape& i) {
    int64_t a = static_cast<int64_t>(Values(i0)[i[0]]);
    if (a < 0) a += 4;
    const int64_t c = static_cast<int64_t>(Values(i1)[i[1]]);
    expect.push_back(ReadAt(self.element({a, i[2], c}), self.meta.dtype));
  });
  ExpectValues(r.outputs[0], expect, 0, 0, "separated");
  // A middle dim only: [4, 3, 6].
  r = RunOp("index.Tensor", {In(self), InList({nullptr, &i1})});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.sizes, (Shape{4, 3, 6}));
  expect.clear();
  ForEachIndex({4, 3, 6}, [&](const Shape& i) {
    const int64_t b = static_cast<int64_t>(Values(i1)[i[1]]);
    expect.push_back(ReadAt(self.element({i[0], b, i[2]}), self.meta.dtype));
  });
  ExpectValues(r.outputs[0], expect, 0, 0, "middle");
}

TEST(IndexTensorTest, OutOfRangeIsAnIndexError) {
  const Tensor self = FromValues(ScalarType::kInt64, {3}, {0, 1, 2});
  for (double bad : {3.0, -4.0, 1e15}) {
    const Tensor i = FromValues(ScalarType::kInt64, {2}, {0, bad});
    OpRun r = RunOp("index.Tensor", {In(self), InList({&i})});
    ASSERT_FALSE(r.status.ok());
    EXPECT_EQ(KindOf(r.status), ErrorKind::kIndex);
    EXPECT_EQ(std::string(r.status.message()), "index " + std::to_string(static_cast<int64_t>(bad)) +
                                      " is out of bounds for dimension 0 with size 3");
  }
}

TEST(DataDependentTest, Nonzero) {
  const Tensor a = ReversedLayout(FromValues(ScalarType::kFloat32, {2, 3}, {0, 1, 0, kNan, 0, -2}));
  OpRun r = RunOp("nonzero", {In(a)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].meta.sizes, (Shape{3, 2}));
  EXPECT_EQ(r.outputs[0].meta.dtype, ScalarType::kInt64);
  ExpectValues(r.outputs[0], {0, 1, 1, 0, 1, 2});
  const Tensor z = FromValues(ScalarType::kInt32, {4}, {0, 0, 0, 0});
  r = RunOp("nonzero", {In(z)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.sizes, (Shape{0, 1}));
  const Tensor s = Scalar0d(ScalarType::kBool, 1);
  r = RunOp("nonzero", {In(s)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.outputs[0].meta.sizes, (Shape{1, 0}));
}

TEST(DataDependentTest, MaskedSelectBroadcasts) {
  const Tensor self = FromValues(ScalarType::kInt64, {2, 2}, {1, 2, 3, 4});
  const Tensor mask = FromValues(ScalarType::kBool, {2}, {1, 0});
  OpRun r = RunOp("masked_select", {In(ReversedLayout(self)), In(mask)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {1, 3});
  const Tensor v = FromValues(ScalarType::kFloat32, {2}, {1.5, 2.5});
  const Tensor m2 = FromValues(ScalarType::kBool, {2, 2}, {1, 0, 1, 1});
  r = RunOp("masked_select", {In(v), In(m2)});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectValues(r.outputs[0], {1.5, 1.5, 2.5});
  const Tensor im = FromValues(ScalarType::kInt64, {2}, {1, 0});
  r = RunOp("masked_select", {In(v), In(im)});
  ASSERT_FALSE(r.status.ok());
  const Tensor m3 = FromValues(ScalarType::kBool, {3}, {1, 0, 1});
  r = RunOp("masked_select", {In(v), In(m3)});
  EXPECT_FALSE(r.status.ok());
}

}  // namespace
}  // namespace tensord::testing
