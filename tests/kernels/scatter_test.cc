// CPU kernels of the scatter-style ops (scatter_add, index_add, index_put,
// masked_scatter) and of select_backward / slice_backward, with their
// index errors.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernel_test_util.h"

namespace tensord::testing {
namespace {

using S = ScalarType;

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

}  // namespace
}  // namespace tensord::testing
