// Meta functions of softmax, log_softmax, gelu and the scatter-style ops
// (scatter_add, index_add, index_put, masked_scatter): output layouts (what
// PyTorch 1.13 printed for the same call, quoted in comments), error kinds
// and texts.
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
using meta_test::Strided;

TEST(NnAndScatterMetaTest, Layouts) {
  const TensorMeta t = Strided({2, 3}, {1, 2});  // torch.zeros(3, 2).t()
  // softmax / log_softmax / scatter_add / index_add / masked_scatter give
  // contiguous outputs (PyTorch 1.13: stride (3, 1)); index_put keeps the
  // layout (clone: stride (1, 2)).
  auto r = Call("softmax.int", {Value(&t), Value(int64_t{0})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].strides, (Shape{3, 1}));
  r = Call("log_softmax.int", {Value(&t), Value(int64_t{1})}, {{"dtype", Value(S::kFloat64)}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].dtype, S::kFloat64);
  const TensorMeta idx = Dense({1, 1}, S::kInt64), src = Dense({1, 1});
  r = Call("scatter_add", {Value(&t), Value(int64_t{0}), Value(&idx), Value(&src)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].strides, (Shape{3, 1}));
  EXPECT_EQ(r->alias_of[0], -1);
  const TensorMeta idx1 = Dense({1}, S::kInt64), src13 = Dense({1, 3});
  r = Call("index_add", {Value(&t), Value(int64_t{0}), Value(&idx1), Value(&src13)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].strides, (Shape{3, 1}));
  const TensorMeta one = Dense({1});
  r = Call("index_put", {Value(&t), Value(TensorList{&idx1}), Value(&one)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].strides, (Shape{1, 2}));
  const TensorMeta mask = Dense({2, 3}, S::kBool), six = Dense({6});
  r = Call("masked_scatter", {Value(&t), Value(&mask), Value(&six)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].strides, (Shape{3, 1}));
  const TensorMeta g = Dense({2});
  r = Call("select_backward", {Value(&g), Value(std::vector<int64_t>{2, 4}), Value(int64_t{1}), Value(int64_t{0})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0], Dense({2, 4}));
  const TensorMeta g22 = Strided({2, 2}, {1, 2});
  r = Call("slice_backward", {Value(&g22), Value(std::vector<int64_t>{2, 4}), Value(int64_t{1}), Value(int64_t{0}),
                              Value(int64_t{4}), Value(int64_t{2})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].strides, (Shape{4, 1}));
  r = Call("detach", {Value(&t)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0], t);
  EXPECT_EQ(r->alias_of[0], 0);
  const TensorMeta ints = Dense({3}, S::kInt64);
  r = Call("erf", {Value(&ints)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].dtype, S::kFloat32);
  r = Call("addcmul", {Value(&ints), Value(&t), Value(&ints)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].sizes, (Shape{2, 3}));
  EXPECT_EQ(r->outputs[0].dtype, S::kFloat32);
}

TEST(NnAndScatterMetaTest, Errors) {
  const TensorMeta x = Dense({3, 2}), l = Dense({3}, S::kInt64);
  ExpectErrorContains(Call("gelu", {Value(&x)}, {{"approximate", Value("x")}}), ErrorKind::kRuntime,
                      "approximate argument must be either none or tanh");
  ExpectErrorContains(Call("gelu", {Value(&l)}), ErrorKind::kRuntime, "not implemented for 'Long'");
  ExpectErrorContains(Call("softmax.int", {Value(&l), Value(int64_t{0})}), ErrorKind::kRuntime,
                      "not implemented for 'Long'");
  ExpectErrorContains(Call("softmax.int", {Value(&x), Value(int64_t{2})}), ErrorKind::kIndex,
                      "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
  const TensorMeta i32 = Dense({1, 1}, S::kInt32), src = Dense({1, 1}), src64 = Dense({1, 1}, S::kFloat64);
  const TensorMeta i11 = Dense({1, 1}, S::kInt64), i13 = Dense({1, 3}, S::kInt64), i1 = Dense({1}, S::kInt64);
  ExpectErrorContains(Call("scatter_add", {Value(&x), Value(int64_t{0}), Value(&i32), Value(&src)}),
                      ErrorKind::kRuntime, "Expected dtype int64 for index");
  ExpectErrorContains(Call("scatter_add", {Value(&x), Value(int64_t{0}), Value(&i11), Value(&src64)}),
                      ErrorKind::kRuntime, "Expected self.dtype to be equal to src.dtype");
  ExpectErrorContains(Call("scatter_add", {Value(&x), Value(int64_t{0}), Value(&i1), Value(&src)}),
                      ErrorKind::kRuntime, "Index tensor must have the same number of dimensions as self tensor");
  const TensorMeta src13 = Dense({1, 3});
  ExpectErrorContains(Call("scatter_add", {Value(&x), Value(int64_t{0}), Value(&i13), Value(&src13)}),
                      ErrorKind::kRuntime,
                      "Expected index [1, 3] to be smaller than self [3, 2] apart from dimension 0 and to be smaller "
                      "size than src [1, 3]");
  const TensorMeta s12 = Dense({1, 2}), s12d = Dense({1, 2}, S::kFloat64), fidx = Dense({1});
  ExpectErrorContains(Call("index_add", {Value(&x), Value(int64_t{0}), Value(&fidx), Value(&s12)}),
                      ErrorKind::kRuntime, "index_add(): Expected dtype int32/int64 for index but got: Float");
  ExpectErrorContains(Call("index_add", {Value(&x), Value(int64_t{0}), Value(&i11), Value(&s12)}), ErrorKind::kIndex,
                      "index_add(): Index is supposed to be a vector, but got dim: 2 with type: Long and size: [1, 1]");
  const TensorMeta i2 = Dense({2}, S::kInt64);
  ExpectErrorContains(Call("index_add", {Value(&x), Value(int64_t{0}), Value(&i2), Value(&s12)}), ErrorKind::kRuntime,
                      "index_add(): Number of indices (2) should be equal to source.size(dim): (1), for dim: 0");
  ExpectErrorContains(Call("index_add", {Value(&x), Value(int64_t{0}), Value(&i1), Value(&s12d)}), ErrorKind::kRuntime,
                      "index_add(): self (Float) and source (Double) must have the same scalar type");
  const TensorMeta d1 = Dense({1}, S::kFloat64), three = Dense({3});
  ExpectErrorContains(Call("index_put", {Value(&x), Value(TensorList{&i1}), Value(&d1)}), ErrorKind::kRuntime,
                      "Index put requires the source and destination dtypes match, got Float for the destination and "
                      "Double for the source.");
  ExpectErrorContains(Call("index_put", {Value(&x), Value(TensorList{&i1}), Value(&three)}), ErrorKind::kRuntime,
                      "shape mismatch: value tensor of shape [3] cannot be broadcast to indexing result of shape [1, 2]");
  const TensorMeta bad_mask = Dense({2, 2}, S::kBool);
  ExpectErrorContains(Call("index_put", {Value(&x), Value(TensorList{&bad_mask}), Value(&three)}), ErrorKind::kIndex,
                      "The shape of the mask [2, 2] at index 0 does not match the shape of the indexed tensor [3, 2]");
  const TensorMeta m = Dense({3, 2}, S::kBool), mi = Dense({3, 2}, S::kInt64), six = Dense({6}),
                   six64 = Dense({6}, S::kFloat64);
  ExpectErrorContains(Call("masked_scatter", {Value(&x), Value(&mi), Value(&six)}), ErrorKind::kRuntime,
                      "masked_scatter_ only supports boolean masks");
  ExpectErrorContains(Call("masked_scatter", {Value(&x), Value(&m), Value(&six64)}), ErrorKind::kRuntime,
                      "expected self and source to have same dtypes but got Float and Double");
  const TensorMeta g3 = Dense({3});
  ExpectErrorContains(Call("select_backward", {Value(&g3), Value(std::vector<int64_t>{2, 4}), Value(int64_t{1}),
                                               Value(int64_t{0})}),
                      ErrorKind::kRuntime, "The size of tensor a (2) must match the size of tensor b (3)");
  const TensorMeta g2 = Dense({2});
  ExpectErrorContains(Call("select_backward", {Value(&g2), Value(std::vector<int64_t>{2, 4}), Value(int64_t{1}),
                                               Value(int64_t{5})}),
                      ErrorKind::kIndex, "index 5 out of range");
  const TensorMeta g23 = Dense({2, 3});
  ExpectErrorContains(Call("slice_backward", {Value(&g23), Value(std::vector<int64_t>{2, 4}), Value(int64_t{1}),
                                              Value(int64_t{0}), Value(int64_t{4}), Value(int64_t{2})}),
                      ErrorKind::kRuntime, "must match");
}

}  // namespace
}  // namespace tensord
