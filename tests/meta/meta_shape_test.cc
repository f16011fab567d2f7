// Meta functions of the shape ops: the list-of-views ops (split,
// split.sizes, split_with_sizes, chunk, unbind) give one view per piece with
// the strides and storage offsets PyTorch 1.13 gives; the copying ops
// (flip, roll, repeat, tril, triu, constant_pad_nd, scatter) give the layout
// PyTorch printed for the same call (quoted in comments); errors name the op
// and the numbers; hostile arguments fail cleanly.
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
using meta_test::KW;

TensorMeta Strided(Shape sizes, Shape strides, int64_t offset = 0, S dtype = S::kFloat32) {
  TensorMeta m;
  m.sizes = std::move(sizes);
  m.strides = std::move(strides);
  m.storage_offset = offset;
  m.dtype = dtype;
  m.device = kCPU;
  return m;
}

struct Geo {
  Shape sizes, strides;
  int64_t offset;
};

void ExpectViews(const absl::StatusOr<MetaResult>& r, const std::vector<Geo>& expected) {
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->outputs.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(r->outputs[i].sizes, expected[i].sizes) << i;
    EXPECT_EQ(r->outputs[i].strides, expected[i].strides) << i;
    EXPECT_EQ(r->outputs[i].storage_offset, expected[i].offset) << i;
    EXPECT_EQ(r->alias_of[i], 0) << i;
  }
}

void ExpectOne(const absl::StatusOr<MetaResult>& r, const Shape& sizes, const Shape& strides) {
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(r->outputs[0].sizes, sizes);
  EXPECT_EQ(r->outputs[0].strides, strides);
  EXPECT_EQ(r->outputs[0].storage_offset, 0);
  EXPECT_EQ(r->alias_of[0], -1);
}

TEST(ShapeSchemaTest, ListReturnsAliasSelf) {
  for (const char* op : {"split.Tensor", "split.sizes", "split_with_sizes", "chunk", "unbind.int"}) {
    const OpEntry* e = OpTable::Get().Find(op);
    ASSERT_NE(e, nullptr) << op;
    EXPECT_TRUE(e->is_view()) << op;
    EXPECT_EQ(e->schema.returns[0].type, ArgType::kTensorList) << op;
    // The canonical text keeps PyTorch's annotation and parses back the same.
    EXPECT_TRUE(absl::StrContains(e->schema_text, "Tensor(a -> *) self")) << e->schema_text;
    absl::StatusOr<FunctionSchema> again = ParseSchema(e->schema_text);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->ToString(), e->schema_text);
    EXPECT_EQ(again->ReturnAliases(), std::vector<int>{0});
  }
  for (const char* op : {"flip", "roll", "repeat", "tril", "constant_pad_nd", "scatter.src"}) {
    EXPECT_FALSE(OpTable::Get().Find(op)->is_view()) << op;
  }
}

TEST(ShapeMetaTest, SplitGivesViews) {
  const TensorMeta x = Dense({5, 3});
  // torch.split(x, 2) -> [((2, 3), (3, 1), 0), ((2, 3), (3, 1), 6), ((1, 3), (3, 1), 12)]
  ExpectViews(Call("split.Tensor", {Value(&x), Value(int64_t{2})}),
              {{{2, 3}, {3, 1}, 0}, {{2, 3}, {3, 1}, 6}, {{1, 3}, {3, 1}, 12}});
  // torch.split(x, [5, 0]) -> [((5, 3), (3, 1), 0), ((0, 3), (3, 1), 15)]
  ExpectViews(Call("split_with_sizes", {Value(&x), Value(Shape{5, 0})}), {{{5, 3}, {3, 1}, 0}, {{0, 3}, {3, 1}, 15}});
  ExpectViews(Call("split.sizes", {Value(&x), Value(Shape{1, 2}), Value(int64_t{1})}),
              {{{5, 1}, {3, 1}, 0}, {{5, 2}, {3, 1}, 1}});
  const TensorMeta t = Strided({4, 6}, {1, 4}, 2);  // transposed, with an offset
  ExpectViews(Call("split.Tensor", {Value(&t), Value(int64_t{4}), Value(int64_t{-1})}),
              {{{4, 4}, {1, 4}, 2}, {{4, 2}, {1, 4}, 18}});
  const TensorMeta empty = Dense({0, 3});
  ExpectViews(Call("split.Tensor", {Value(&empty), Value(int64_t{0})}), {{{0, 3}, {3, 1}, 0}});
}

TEST(ShapeMetaTest, ChunkAndUnbind) {
  const TensorMeta x = Dense({5, 3});
  // torch.chunk(x, 4) -> three pieces: 2, 2, 1 rows.
  ExpectViews(Call("chunk", {Value(&x), Value(int64_t{4})}),
              {{{2, 3}, {3, 1}, 0}, {{2, 3}, {3, 1}, 6}, {{1, 3}, {3, 1}, 12}});
  const TensorMeta empty = Dense({0, 3});
  ExpectViews(Call("chunk", {Value(&empty), Value(int64_t{3})}),
              {{{0, 3}, {3, 1}, 0}, {{0, 3}, {3, 1}, 0}, {{0, 3}, {3, 1}, 0}});
  // torch.unbind(x, -1) -> [((5,), (3,), 0), ((5,), (3,), 1), ((5,), (3,), 2)]
  ExpectViews(Call("unbind.int", {Value(&x), Value(int64_t{-1})}), {{{5}, {3}, 0}, {{5}, {3}, 1}, {{5}, {3}, 2}});
  ExpectViews(Call("unbind.int", {Value(&empty)}), {});
}

TEST(ShapeMetaTest, ListErrors) {
  const TensorMeta x = Dense({5, 3});
  const TensorMeta scalar = Dense({});
  ExpectErrorContains(Call("split.Tensor", {Value(&x), Value(int64_t{0})}), ErrorKind::kRuntime,
                      "split_size can only be 0 if dimension size is 0, but got dimension size of 5");
  ExpectErrorContains(Call("split.Tensor", {Value(&x), Value(int64_t{-1})}), ErrorKind::kRuntime,
                      "split expects split_size be non-negative, but got split_size=-1");
  ExpectErrorContains(Call("split.Tensor", {Value(&scalar), Value(int64_t{1})}), ErrorKind::kRuntime,
                      "split expects at least a 1-dimensional tensor");
  ExpectErrorContains(Call("split_with_sizes", {Value(&x), Value(Shape{2, 2})}), ErrorKind::kRuntime,
                      "split_with_sizes expects split_sizes to sum exactly to 5 (input tensor's size at dimension 0), "
                      "but got split_sizes=[2, 2]");
  ExpectErrorContains(Call("split_with_sizes", {Value(&x), Value(Shape{INT64_MAX, INT64_MAX, 7})}),
                      ErrorKind::kRuntime, "sum exactly to 5");
  ExpectErrorContains(Call("chunk", {Value(&x), Value(int64_t{0})}), ErrorKind::kRuntime,
                      "chunk expects `chunks` to be greater than 0, got: 0");
  ExpectErrorContains(Call("unbind.int", {Value(&scalar)}), ErrorKind::kIndex,
                      "Dimension specified as 0 but tensor has no dimensions");
  ExpectErrorContains(Call("unbind.int", {Value(&x), Value(int64_t{2})}), ErrorKind::kIndex, "Dimension out of range");
  // Hostile: one output per element of a 2^40-element (expanded) dim.
  const TensorMeta huge = Strided({int64_t{1} << 40}, {0});
  ExpectErrorContains(Call("split.Tensor", {Value(&huge), Value(int64_t{1})}), ErrorKind::kRuntime, "at most 65536");
  ExpectErrorContains(Call("unbind.int", {Value(&huge)}), ErrorKind::kRuntime, "at most 65536");
  const TensorMeta empty = Dense({0, 3});
  ExpectErrorContains(Call("chunk", {Value(&empty), Value(int64_t{1} << 40)}), ErrorKind::kRuntime, "at most 65536");
}

TEST(ShapeMetaTest, CopyLayoutsFollowPyTorch) {
  const TensorMeta transposed = Strided({2, 3, 4}, {1, 2, 6});
  const TensorMeta cl = Strided({2, 3, 4, 5}, {60, 1, 15, 3});  // channels-last
  const TensorMeta sliced = Strided({2, 3, 4}, {96, 8, 2}, 9);
  // flip keeps a dense layout (empty_like): (1, 2, 6); a non-dense input gives contiguous.
  ExpectOne(Call("flip", {Value(&transposed), Value(Shape{0})}), {2, 3, 4}, {1, 2, 6});
  ExpectOne(Call("flip", {Value(&sliced), Value(Shape{0, 2})}), {2, 3, 4}, {12, 4, 1});
  // roll: cat's layout of the halves, so channels-last stays, a transposed 3-D input becomes contiguous;
  // a roll by 0 along the last dim of a channels-last input gives contiguous (60, 20, 5, 1) in PyTorch.
  ExpectOne(Call("roll", {Value(&cl), Value(Shape{1}), Value(Shape{1})}), {2, 3, 4, 5}, {60, 1, 15, 3});
  ExpectOne(Call("roll", {Value(&cl), Value(Shape{0}), Value(Shape{3})}), {2, 3, 4, 5}, {60, 20, 5, 1});
  ExpectOne(Call("roll", {Value(&transposed), Value(Shape{1}), Value(Shape{0})}), {2, 3, 4}, {12, 4, 1});
  ExpectOne(Call("roll", {Value(&cl), Value(Shape{3})}), {2, 3, 4, 5}, {60, 20, 5, 1});  // flattened
  ExpectOne(Call("repeat", {Value(&transposed), Value(Shape{2, 1, 1, 2})}), {2, 2, 3, 8}, {48, 24, 8, 1});
  ExpectOne(Call("tril", {Value(&transposed)}), {2, 3, 4}, {12, 4, 1});
  ExpectOne(Call("triu", {Value(&cl), Value(int64_t{1})}), {2, 3, 4, 5}, {60, 20, 5, 1});
  // constant_pad_nd: suggest_memory_format (channels-last -> (84, 1, 21, 3)); crops only: a preserve-format clone.
  ExpectOne(Call("constant_pad_nd", {Value(&cl), Value(Shape{1, 1})}), {2, 3, 4, 7}, {84, 1, 21, 3});
  ExpectOne(Call("constant_pad_nd", {Value(&cl), Value(Shape{-1, -1})}), {2, 3, 4, 3}, {36, 1, 9, 3});
  ExpectOne(Call("constant_pad_nd", {Value(&transposed), Value(Shape{0, 0})}), {2, 3, 4}, {1, 2, 6});
  ExpectOne(Call("constant_pad_nd", {Value(&transposed), Value(Shape{1, 1})}), {2, 3, 6}, {18, 6, 1});
  const TensorMeta index = Dense({1, 3, 4}, S::kInt64);
  const TensorMeta index4 = Dense({1, 1, 1, 1}, S::kInt64);
  ExpectOne(Call("scatter.value", {Value(&cl), Value(int64_t{0}), Value(&index4), Value(Scalar::Float(1.0))}),
            {2, 3, 4, 5}, {60, 20, 5, 1});
  const TensorMeta src = Dense({2, 3, 4});
  ExpectOne(Call("scatter.src", {Value(&transposed), Value(int64_t{0}), Value(&index), Value(&src)}), {2, 3, 4},
            {12, 4, 1});
}

TEST(ShapeMetaTest, CopyErrors) {
  const TensorMeta x = Dense({5, 3});
  const TensorMeta scalar = Dense({});
  ExpectErrorContains(Call("flip", {Value(&x), Value(Shape{0, -2})}), ErrorKind::kRuntime,
                      "dim 0 appears multiple times in the list of dims");
  ExpectErrorContains(Call("flip", {Value(&x), Value(Shape{2})}), ErrorKind::kIndex, "Dimension out of range");
  ExpectErrorContains(Call("roll", {Value(&x), Value(Shape{1, 2}), Value(Shape{0})}), ErrorKind::kRuntime,
                      "shifts and dimensions must align. shifts: 2, dims:1");
  ExpectErrorContains(Call("roll", {Value(&x), Value(Shape{}), Value(Shape{})}), ErrorKind::kRuntime,
                      "`shifts` required");
  ExpectErrorContains(Call("roll", {Value(&scalar), Value(Shape{1}), Value(Shape{0})}), ErrorKind::kIndex,
                      "Dimension specified as 0 but tensor has no dimensions");
  ExpectErrorContains(Call("repeat", {Value(&x), Value(Shape{2})}), ErrorKind::kRuntime,
                      "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
  ExpectErrorContains(Call("repeat", {Value(&x), Value(Shape{2, -1})}), ErrorKind::kRuntime,
                      "Trying to create tensor with negative dimension -3: [10, -3]");
  ExpectErrorContains(Call("repeat", {Value(&x), Value(Shape{INT64_MAX, 1})}), ErrorKind::kRuntime, "overflows int64");
  ExpectErrorContains(Call("repeat", {Value(&x), Value(Shape(65, 1))}), ErrorKind::kRuntime,
                      "more than 64 dimensions");
  ExpectErrorContains(Call("tril", {Value(&scalar)}), ErrorKind::kIndex,
                      "Dimension specified as -2 but tensor has no dimensions");
  const TensorMeta vec = Dense({3});
  ExpectErrorContains(Call("triu", {Value(&vec)}), ErrorKind::kIndex,
                      "Dimension out of range (expected to be in range of [-1, 0], but got -2)");
  ExpectErrorContains(Call("constant_pad_nd", {Value(&x), Value(Shape{1})}), ErrorKind::kRuntime,
                      "Length of pad must be even but instead it equals 1");
  ExpectErrorContains(Call("constant_pad_nd", {Value(&x), Value(Shape{1, 1, 1, 1, 1, 1})}), ErrorKind::kRuntime,
                      "Length of pad should be no more than twice the number of dimensions of the input");
  ExpectErrorContains(Call("constant_pad_nd", {Value(&x), Value(Shape{-3, -1})}), ErrorKind::kRuntime,
                      "start (0) + length (-1) exceeds dimension size (0).");
  ExpectErrorContains(Call("constant_pad_nd", {Value(&x), Value(Shape{-4, 1})}), ErrorKind::kIndex,
                      "Dimension out of range (expected to be in range of [-3, 2], but got 4)");
  ExpectErrorContains(Call("constant_pad_nd", {Value(&x), Value(Shape{INT64_MIN, 1})}), ErrorKind::kRuntime,
                      "out of range");
  ExpectErrorContains(Call("constant_pad_nd", {Value(&x), Value(Shape{INT64_MAX, 1})}), ErrorKind::kRuntime,
                      "overflows int64");
  const TensorMeta i8 = Dense({5, 3}, S::kInt8);
  ExpectErrorContains(Call("constant_pad_nd", {Value(&i8), Value(Shape{1, 1}), Value(Scalar::Int(1000))}),
                      ErrorKind::kRuntime, "value cannot be converted to type int8_t without overflow");
  const TensorMeta idx32 = Dense({2, 2}, S::kInt32);
  const TensorMeta idx = Dense({2, 2}, S::kInt64);
  const TensorMeta idx3 = Dense({2, 2, 2}, S::kInt64);
  const TensorMeta big = Dense({6, 2}, S::kInt64);
  const TensorMeta f64 = Dense({5, 3}, S::kFloat64);
  const Value one(Scalar::Float(1.0));
  ExpectErrorContains(Call("scatter.value", {Value(&x), Value(int64_t{0}), Value(&idx32), one}), ErrorKind::kRuntime,
                      "Expected dtype int64 for index");
  ExpectErrorContains(Call("scatter.value", {Value(&x), Value(int64_t{0}), Value(&idx3), one}), ErrorKind::kRuntime,
                      "Index tensor must have the same number of dimensions as self tensor");
  ExpectErrorContains(Call("scatter.value", {Value(&x), Value(int64_t{1}), Value(&big), one}), ErrorKind::kRuntime,
                      "Expected index [6, 2] to be smaller than self [5, 3] apart from dimension 1");
  ExpectErrorContains(Call("scatter.src", {Value(&x), Value(int64_t{0}), Value(&idx), Value(&f64)}),
                      ErrorKind::kRuntime, "Expected self.dtype to be equal to src.dtype");
  ExpectErrorContains(Call("scatter.value", {Value(&i8), Value(int64_t{0}), Value(&idx), Value(Scalar::Int(1000))}),
                      ErrorKind::kRuntime, "value cannot be converted to type int8_t without overflow");
}

}  // namespace
}  // namespace tensord
