// Meta functions of the matmul family (matmul, mm, bmm, addmm, baddbmm, dot,
// outer, linear): output dtype, sizes, every stride and errors, as PyTorch
// 1.13 gives them on CPU (its outputs are quoted in the comments).
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
using meta_test::KW;
using meta_test::Strided;

void ExpectOut(const absl::StatusOr<MetaResult>& r, const Shape& sizes, const Shape& strides, S dtype) {
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(r->outputs[0].sizes, sizes);
  EXPECT_EQ(r->outputs[0].strides, strides);
  EXPECT_EQ(r->outputs[0].storage_offset, 0);
  EXPECT_EQ(r->outputs[0].dtype, dtype);
  EXPECT_EQ(r->alias_of[0], -1);
}

void ExpectError(const absl::StatusOr<MetaResult>& r, absl::string_view text, ErrorKind kind = ErrorKind::kRuntime) {
  ASSERT_FALSE(r.ok()) << "expected: " << text;
  EXPECT_EQ(ErrorKindName(KindOf(r.status())), ErrorKindName(kind)) << r.status().message();
  EXPECT_TRUE(absl::StrContains(r.status().message(), text)) << r.status().message();
}

TEST(AddmmMetaTest, ContiguousOutputAndSameDtypeRule) {
  const TensorMeta m1 = Dense({2, 4}), m2 = Dense({4, 3});
  const TensorMeta self_t = Strided({2, 3}, {1, 2});  // a transposed self: still contiguous output
  ExpectOut(Call("addmm", {Value(&self_t), Value(&m1), Value(&m2)}), {2, 3}, {3, 1}, S::kFloat32);
  const TensorMeta row = Dense({3}), zero_dim = Dense({});
  ExpectOut(Call("addmm", {Value(&row), Value(&m1), Value(&m2)}), {2, 3}, {3, 1}, S::kFloat32);
  ExpectOut(Call("addmm", {Value(&zero_dim), Value(&m1), Value(&m2)}), {2, 3}, {3, 1}, S::kFloat32);
  // torch.addmm(int64 self, float mats): "self and mat2 must have the same dtype".
  const TensorMeta i64 = Dense({2, 3}, S::kInt64);
  ExpectError(Call("addmm", {Value(&i64), Value(&m1), Value(&m2)}), "addmm: self and mat2 must have the same dtype");
  const TensorMeta m1d = Dense({2, 4}, S::kFloat64);
  ExpectError(Call("addmm", {Value(&self_t), Value(&m1d), Value(&m2)}), "mat1 and mat2 must have the same dtype");
  const TensorMeta bad = Dense({5, 3});
  ExpectError(Call("addmm", {Value(&self_t), Value(&m1), Value(&bad)}),
              "mat1 and mat2 shapes cannot be multiplied (2x4 and 5x3)");
  const TensorMeta vec = Dense({4});
  ExpectError(Call("addmm", {Value(&self_t), Value(&vec), Value(&m2)}), "mat1 must be a matrix, got 1-D tensor");
  const TensorMeta wrong_self = Dense({4, 3});
  ExpectError(Call("addmm", {Value(&wrong_self), Value(&m1), Value(&m2)}),
              "The expanded size of the tensor (2) must match the existing size (4) at non-singleton dimension 0");
  const TensorMeta b1 = Dense({2, 3}, S::kBool), b2 = Dense({2, 4}, S::kBool), b3 = Dense({4, 3}, S::kBool);
  ExpectError(Call("addmm", {Value(&b1), Value(&b2), Value(&b3)}), "not implemented for 'Bool'");
  const TensorMeta e = Dense({0, 3}), e1 = Dense({0, 4});
  ExpectOut(Call("addmm", {Value(&e), Value(&e1), Value(&m2)}), {0, 3}, {3, 1}, S::kFloat32);
}

TEST(BaddbmmMetaTest, ResultTakesTheBatchesDtype) {
  const TensorMeta b1 = Dense({2, 3, 4}), b2 = Dense({2, 4, 5});
  // torch.baddbmm(int64 self, float32 batches) -> float32 [2, 3, 5] (15, 5, 1).
  for (S self_dt : {S::kInt64, S::kFloat64, S::kBool, S::kFloat16}) {
    const TensorMeta self = Dense({2, 3, 5}, self_dt);
    ExpectOut(Call("baddbmm", {Value(&self), Value(&b1), Value(&b2)}), {2, 3, 5}, {15, 5, 1}, S::kFloat32);
  }
  const TensorMeta perm = Strided({2, 3, 5}, {1, 10, 2});
  ExpectOut(Call("baddbmm", {Value(&perm), Value(&b1), Value(&b2)}, {{"beta", Value(Scalar::Int(0))}}), {2, 3, 5},
            {15, 5, 1}, S::kFloat32);
  const TensorMeta i32 = Dense({2, 3, 5}, S::kInt32), l1 = Dense({2, 3, 4}, S::kInt64),
                   l2 = Dense({2, 4, 5}, S::kInt64);
  ExpectOut(Call("baddbmm", {Value(&i32), Value(&l1), Value(&l2)}), {2, 3, 5}, {15, 5, 1}, S::kInt64);
  const TensorMeta size1 = Dense({1, 1, 5}), s1 = Dense({1, 1, 4}), s2 = Dense({1, 4, 5});
  ExpectOut(Call("baddbmm", {Value(&size1), Value(&s1), Value(&s2)}), {1, 1, 5}, {5, 5, 1}, S::kFloat32);
}

TEST(BaddbmmMetaTest, Errors) {
  const TensorMeta self = Dense({2, 3, 5}), b1 = Dense({2, 3, 4}), b2 = Dense({2, 4, 5});
  const TensorMeta h2 = Dense({2, 4, 5}, S::kFloat16);
  ExpectError(Call("baddbmm", {Value(&self), Value(&b1), Value(&h2)}), "expected scalar type Float but found Half");
  ExpectError(Call("baddbmm", {Value(&self), Value(&b1), Value(&h2)}), "float16");
  const TensorMeta bad_batch = Dense({3, 4, 5});
  ExpectError(Call("baddbmm", {Value(&self), Value(&b1), Value(&bad_batch)}),
              "Expected size for first two dimensions of batch2 tensor to be: [2, 4] but got: [3, 4].");
  const TensorMeta flat = Dense({3, 4});
  ExpectError(Call("baddbmm", {Value(&self), Value(&flat), Value(&b2)}), "batch1 must be a 3D tensor");
  const TensorMeta big_self = Dense({1, 2, 3, 5});
  ExpectError(
      Call("baddbmm", {Value(&big_self), Value(&b1), Value(&b2)}),
      "the number of sizes provided (3) must be greater or equal to the number of dimensions in the tensor (4)");
}

TEST(DotMetaTest, ZeroDimResultAndPyTorchMessages) {
  const TensorMeta a = Dense({3}), b = Strided({3}, {2});
  ExpectOut(Call("dot", {Value(&a), Value(&b)}), {}, {}, S::kFloat32);
  const TensorMeta i = Dense({3}, S::kInt8);
  ExpectOut(Call("dot", {Value(&i), Value(&i)}), {}, {}, S::kInt8);
  const TensorMeta m = Dense({3, 1});
  ExpectError(Call("dot", {Value(&m), Value(&a)}), "dot: 1D tensors expected, but got 2D and 1D tensors");
  const TensorMeta four = Dense({4});
  ExpectError(Call("dot", {Value(&a), Value(&four)}),
              "inconsistent tensor size, expected tensor [3] and src [4] to have the same number of elements, but got "
              "3 and 4 elements respectively");
  const TensorMeta d = Dense({4}, S::kFloat64);
  ExpectError(Call("dot", {Value(&a), Value(&d)}),
              "expected both vectors to have same dtype, but found Float and Double");
  const TensorMeta bl = Dense({3}, S::kBool);
  ExpectError(Call("dot", {Value(&bl), Value(&bl)}), "not implemented for 'Bool'");
}

TEST(OuterMetaTest, MulPromotionAndLayout) {
  const TensorMeta a = Dense({3}, S::kInt64), b = Dense({4});
  ExpectOut(Call("outer", {Value(&a), Value(&b)}), {3, 4}, {4, 1}, S::kFloat32);
  const TensorMeta bl = Dense({3}, S::kBool);
  ExpectOut(Call("outer", {Value(&bl), Value(&bl)}), {3, 3}, {3, 1}, S::kBool);
  const TensorMeta one = Dense({1}), stepped = Strided({3}, {2});
  ExpectOut(Call("outer", {Value(&stepped), Value(&one)}), {3, 1}, {1, 1}, S::kFloat32);  // torch: (1, 1)
  const TensorMeta m = Dense({3, 1});
  ExpectError(Call("outer", {Value(&m), Value(&b)}), "outer: Expected 1-D argument self, but got 2-D");
}

TEST(LinearMetaTest, FollowsAtLinearDecomposition) {
  const TensorMeta w = Dense({4, 3}), bias = Dense({4});
  const TensorMeta x2 = Dense({2, 3}), x3 = Dense({2, 5, 3}), x4 = Dense({2, 2, 5, 3});
  ExpectOut(Call("linear", {Value(&x2), Value(&w), Value(&bias)}), {2, 4}, {4, 1}, S::kFloat32);
  ExpectOut(Call("linear", {Value(&x3), Value(&w), Value(&bias)}), {2, 5, 4}, {20, 4, 1}, S::kFloat32);
  ExpectOut(Call("linear", {Value(&x4), Value(&w), Value(&bias)}), {2, 2, 5, 4}, {40, 20, 4, 1}, S::kFloat32);
  ExpectOut(Call("linear", {Value(&x4), Value(&w)}), {2, 2, 5, 4}, {40, 20, 4, 1}, S::kFloat32);
  const TensorMeta x3t = Strided({2, 5, 3}, {3, 6, 1});  // not contiguous: matmul, then add_
  const TensorMeta bias64 = Dense({4}, S::kFloat64);
  ExpectOut(Call("linear", {Value(&x3t), Value(&w), Value(&bias64)}), {2, 5, 4}, {20, 4, 1}, S::kFloat32);
  // ...while a contiguous 3-D input goes through addmm, which wants one dtype.
  ExpectError(Call("linear", {Value(&x3), Value(&w), Value(&bias64)}), "self and mat2 must have the same dtype");
  const TensorMeta x1 = Dense({3}), w1 = Dense({3});
  ExpectOut(Call("linear", {Value(&x1), Value(&w1)}), {}, {}, S::kFloat32);
  ExpectOut(Call("linear", {Value(&x1), Value(&w), Value(&bias)}), {4}, {1}, S::kFloat32);
  const TensorMeta e = Dense({2, 0, 3});
  ExpectOut(Call("linear", {Value(&e), Value(&w), Value(&bias)}), {2, 0, 4}, {4, 4, 1}, S::kFloat32);
  const TensorMeta w3 = Dense({2, 4, 3});
  ExpectError(Call("linear", {Value(&x2), Value(&w3)}), "t() expects a tensor with <= 2 dimensions, but self is 3D");
  const TensorMeta wk = Dense({4, 5});
  ExpectError(Call("linear", {Value(&x3), Value(&wk)}), "mat1 and mat2 shapes cannot be multiplied (10x3 and 5x4)");
  const TensorMeta xi = Dense({2, 2, 2, 3}, S::kInt64), wi = Dense({4, 3}, S::kInt64);
  ExpectError(Call("linear", {Value(&xi), Value(&wi), Value(&bias)}),
              "result type Float can't be cast to the desired output type Long");
  const TensorMeta grows = Dense({3, 2, 2, 5, 4});
  ExpectError(Call("linear", {Value(&x4), Value(&w), Value(&grows)}),
              "output with shape [2, 2, 5, 4] doesn't match the broadcast shape [3, 2, 2, 5, 4]");
}

TEST(MatmulMetaTest, StridesOfTheFoldedTransposedPath) {
  // torch.matmul(a [m, k], b [batch, k, n]) runs (b^T folded) @ a^T and
  // returns .mT().contiguous(), which keeps the transposed strides whenever
  // the view already counts as contiguous.
  struct Case {
    Shape a, b, sizes, strides;
  } cases[] = {
      {{0, 4}, {2, 4, 5}, {2, 0, 5}, {5, 1, 1}},  {{3, 4}, {2, 4, 0}, {2, 3, 0}, {3, 1, 3}},
      {{3, 4}, {0, 4, 5}, {0, 3, 5}, {15, 1, 3}}, {{3, 4}, {2, 0, 4, 2}, {2, 0, 3, 2}, {6, 6, 1, 3}},
      {{1, 4}, {2, 4, 5}, {2, 1, 5}, {5, 1, 1}},  {{3, 4}, {2, 4, 1}, {2, 3, 1}, {3, 1, 3}},
      {{3, 4}, {2, 4, 5}, {2, 3, 5}, {15, 5, 1}},
  };
  for (const Case& c : cases) {
    const TensorMeta a = Dense(c.a), b = Dense(c.b);
    ExpectOut(Call("matmul", {Value(&a), Value(&b)}), c.sizes, c.strides, S::kFloat32);
  }
  // b 3-D with its last two dims transposed: PyTorch runs bmm (contiguous output).
  const TensorMeta a = Dense({0, 4}), bt = Strided({2, 4, 5}, {20, 1, 4});
  ExpectOut(Call("matmul", {Value(&a), Value(&bt)}), {2, 0, 5}, {5, 5, 1}, S::kFloat32);
}

TEST(MatmulMetaTest, MixedDtypesAreErrorsNamingBoth) {
  const TensorMeta h = Dense({2, 3, 4}, S::kFloat16), f = Dense({2, 4, 5});
  ExpectError(Call("bmm", {Value(&h), Value(&f)}), "float16");
  ExpectError(Call("bmm", {Value(&h), Value(&f)}), "float32");
  const TensorMeta h2 = Dense({2, 5, 3}, S::kFloat16);
  ExpectError(Call("bmm", {Value(&f), Value(&h2)}), "expected scalar type Float but found Half");
  const TensorMeta a = Dense({3, 4}), d = Dense({4, 5}, S::kFloat64);
  ExpectError(Call("mm", {Value(&a), Value(&d)}), "expected scalar type Float but found Double");
  ExpectError(Call("matmul", {Value(&a), Value(&d)}), "expected scalar type Float but found Double");
}

TEST(MatmulFamilyMetaTest, HostileSizesGiveCleanErrors) {
  const int64_t huge = int64_t{1} << 40;
  const TensorMeta a = Strided({huge, 2}, {0, 0}), b = Strided({2, huge}, {0, 0});
  auto r = Call("mm", {Value(&a), Value(&b)});
  ASSERT_FALSE(r.ok());
  const TensorMeta self = Strided({huge, huge}, {0, 0});
  r = Call("addmm", {Value(&self), Value(&a), Value(&b)});
  ASSERT_FALSE(r.ok());
  const TensorMeta v = Strided({huge}, {0});
  r = Call("outer", {Value(&v), Value(&v)});
  ASSERT_FALSE(r.ok());
  const TensorMeta x = Strided({huge, huge, 2}, {0, 0, 1}), w = Dense({3, 2}), bias = Dense({3});
  r = Call("linear", {Value(&x), Value(&w), Value(&bias)});
  ASSERT_FALSE(r.ok());
}

}  // namespace
}  // namespace tensord
