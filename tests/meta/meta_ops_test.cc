// Meta functions through the op table, the way the client and the daemon call
// them (BindArgs + OpTable::RunMeta): view strides/offsets and aliasing,
// reshape's alias-or-copy rule, matmul in every rank combination, reductions,
// factories, devices (meta in -> meta out), the exact text of shape errors,
// and what tensord deliberately refuses. Expected values are literals that
// PyTorch 1.13 printed for the same call (see the torch expression in the
// comments); torch_reference_test.cc covers thousands more generated calls.
#include <limits>
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

TensorMeta Strided(Shape sizes, Shape strides, int64_t offset = 0, S dtype = S::kFloat32, Device device = kCPU) {
  TensorMeta m;
  m.sizes = std::move(sizes);
  m.strides = std::move(strides);
  m.storage_offset = offset;
  m.dtype = dtype;
  m.device = device;
  return m;
}

// Runs `op` and expects one output with these sizes, strides, offset and alias.
void ExpectView(absl::StatusOr<MetaResult> r, Shape sizes, Shape strides, int64_t offset, int alias) {
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(r->outputs[0].sizes, sizes);
  EXPECT_EQ(r->outputs[0].strides, strides);
  EXPECT_EQ(r->outputs[0].storage_offset, offset);
  EXPECT_EQ(r->alias_of[0], alias);
}

void ExpectError(absl::StatusOr<MetaResult> r, ErrorKind kind, absl::string_view message) {
  ASSERT_FALSE(r.ok()) << "expected: " << message;
  EXPECT_EQ(ErrorKindName(KindOf(r.status())), ErrorKindName(kind)) << r.status().message();
  EXPECT_EQ(r.status().message(), message);
}

// ---- views -----------------------------------------------------------------

TEST(Views, SliceSelectNarrowSetStridesAndOffsets) {
  const TensorMeta x = Dense({5, 6});
  // aten.slice(x, 0, 1, 4) / aten.slice(x, 1, -4, None, 2) / x[-100:100] / x[4:2]
  ExpectView(Call("slice.Tensor", {&x, 0, 1, 4}), {3, 6}, {6, 1}, 6, 0);
  ExpectView(Call("slice.Tensor", {&x, 1, -4, Value(), 2}), {5, 2}, {6, 2}, 2, 0);
  ExpectView(Call("slice.Tensor", {&x, 0, -100, 100}), {5, 6}, {6, 1}, 0, 0);
  ExpectView(Call("slice.Tensor", {&x, 0, 4, 2}), {0, 6}, {6, 1}, 24, 0);
  ExpectView(Call("slice.Tensor", {&x, 0, 10, 20}), {0, 6}, {6, 1}, 30, 0);
  // x[1:].select(1, 2): offsets accumulate
  const TensorMeta tail = Strided({4, 6}, {6, 1}, 6);
  ExpectView(Call("select.int", {&tail, 1, 2}), {4}, {6}, 8, 0);
  ExpectView(Call("select.int", {&x, 0, 2}), {6}, {1}, 12, 0);
  ExpectView(Call("select.int", {&x, 1, -1}), {5}, {6}, 5, 0);
  ExpectView(Call("narrow", {&x, 0, 1, 3}), {3, 6}, {6, 1}, 6, 0);
  ExpectView(Call("narrow", {&x, 1, -2, 2}), {5, 2}, {6, 1}, 4, 0);
  ExpectView(Call("narrow", {&x, 0, 5, 0}), {0, 6}, {6, 1}, 30, 0);
}

TEST(Views, TransposePermuteExpandSqueezeUnsqueeze) {
  const TensorMeta x = Dense({2, 3, 4});
  ExpectView(Call("transpose.int", {&x, 0, -1}), {4, 3, 2}, {1, 4, 12}, 0, 0);
  ExpectView(Call("permute", {&x, std::vector<int64_t>{2, 0, 1}}), {4, 2, 3}, {1, 12, 4}, 0, 0);
  const TensorMeta m23 = Dense({2, 3});
  ExpectView(Call("t", {&m23}), {3, 2}, {1, 3}, 0, 0);
  const TensorMeta col = Dense({3, 1});
  // empty(3, 1).expand(2, 3, 4) / .expand(-1, 4) / .expand(1, 3, 1) / .expand(2, 1, 3, 1)
  ExpectView(Call("expand", {&col, std::vector<int64_t>{2, 3, 4}}), {2, 3, 4}, {0, 1, 0}, 0, 0);
  ExpectView(Call("expand", {&col, std::vector<int64_t>{-1, 4}}), {3, 4}, {1, 0}, 0, 0);
  ExpectView(Call("expand", {&col, std::vector<int64_t>{1, 3, 1}}), {1, 3, 1}, {3, 1, 1}, 0, 0);
  ExpectView(Call("expand", {&col, std::vector<int64_t>{2, 1, 3, 1}}), {2, 1, 3, 1}, {0, 3, 1, 1}, 0, 0);
  const TensorMeta z = Strided({1, 3, 1, 2}, {6, 2, 2, 1});
  ExpectView(Call("squeeze", {&z}), {3, 2}, {2, 1}, 0, 0);
  ExpectView(Call("squeeze.dim", {&z, 2}), {1, 3, 2}, {6, 2, 1}, 0, 0);
  ExpectView(Call("squeeze.dim", {&z, 1}), {1, 3, 1, 2}, {6, 2, 2, 1}, 0, 0);
  const TensorMeta xt = Strided({6, 5}, {1, 6});  // empty(5, 6).t()
  ExpectView(Call("unsqueeze", {&xt, 1}), {6, 1, 5}, {1, 30, 6}, 0, 0);
  ExpectView(Call("unsqueeze", {&xt, -1}), {6, 5, 1}, {1, 6, 1}, 0, 0);
}

TEST(Views, ViewComputesStridesOrRefuses) {
  const TensorMeta x = Dense({2, 3, 4});
  ExpectView(Call("view", {&x, std::vector<int64_t>{6, 4}}), {6, 4}, {4, 1}, 0, 0);
  ExpectView(Call("view", {&x, std::vector<int64_t>{-1}}), {24}, {1}, 0, 0);
  const TensorMeta tr = Strided({3, 2, 4}, {4, 12, 1});  // x.transpose(0, 1)
  ExpectView(Call("view", {&tr, std::vector<int64_t>{3, 2, 2, 2}}), {3, 2, 2, 2}, {4, 12, 2, 1}, 0, 0);
  const TensorMeta sliced = Strided({12}, {1}, 12);  // x[1:].view(12)
  ExpectView(Call("view", {&sliced, std::vector<int64_t>{3, 4}}), {3, 4}, {4, 1}, 12, 0);
  const TensorMeta p = Strided({4, 2, 3}, {1, 12, 4});
  ExpectError(Call("view", {&p, std::vector<int64_t>{24}}), ErrorKind::kRuntime,
              "view: view size is not compatible with input tensor's size and stride (at least one dimension spans "
              "across two contiguous subspaces). Use .reshape(...) instead.");
  const TensorMeta m = Dense({3, 4});
  ExpectError(Call("view", {&m, std::vector<int64_t>{3, 5}}), ErrorKind::kRuntime,
              "view: shape '[3, 5]' is invalid for input of size 12");
  ExpectError(Call("view", {&m, std::vector<int64_t>{-1, -1}}), ErrorKind::kRuntime,
              "view: only one dimension can be inferred");
  const TensorMeta empty = Dense({0, 3});
  ExpectError(Call("view", {&empty, std::vector<int64_t>{-1, 0}}), ErrorKind::kRuntime,
              "view: cannot reshape tensor of 0 elements into shape [-1, 0] because the unspecified dimension size -1 "
              "can be any value and is ambiguous");
}

TEST(Views, ReshapeAndFlattenAliasWhenTheyCanAndCopyOtherwise) {
  const TensorMeta x = Dense({2, 3, 4});
  const TensorMeta p = Strided({4, 2, 3}, {1, 12, 4});
  ExpectView(Call("reshape", {&x, std::vector<int64_t>{4, 6}}), {4, 6}, {6, 1}, 0, 0);
  ExpectView(Call("reshape", {&p, std::vector<int64_t>{4, 6}}), {4, 6}, {1, 4}, 0, 0);     // a view of p
  ExpectView(Call("reshape", {&p, std::vector<int64_t>{24}}), {24}, {1}, 0, -1);           // a contiguous copy
  ExpectView(Call("reshape", {&p, std::vector<int64_t>{4, 2, 3}}), {4, 2, 3}, {1, 12, 4}, 0, 0);
  const TensorMeta w = Dense({2, 3, 4, 5});
  const TensorMeta wp = Strided({2, 4, 3, 5}, {60, 5, 20, 1});  // w.permute(0, 2, 1, 3)
  ExpectView(Call("flatten.using_ints", {&w, 1, 2}), {2, 12, 5}, {60, 5, 1}, 0, 0);
  ExpectView(Call("flatten.using_ints", {&wp, 1, 2}), {2, 12, 5}, {60, 5, 1}, 0, -1);
  ExpectView(Call("flatten.using_ints", {&wp, 1, 1}), {2, 4, 3, 5}, {60, 5, 20, 1}, 0, 0);
  const TensorMeta scalar = Dense({});
  ExpectView(Call("flatten.using_ints", {&scalar}), {1}, {1}, 0, 0);
  ExpectError(Call("flatten.using_ints", {&w, 2, 1}), ErrorKind::kRuntime,
              "flatten() has invalid args: start_dim cannot come after end_dim");
}

TEST(Views, IndexErrorsAsPyTorch) {
  const TensorMeta v = Dense({3});
  ExpectError(Call("select.int", {&v, 0, 5}), ErrorKind::kIndex,
              "select(): index 5 out of range for tensor of size [3] at dimension 0");
  const TensorMeta x = Dense({5, 6});
  ExpectError(Call("select.int", {&x, 2, 0}), ErrorKind::kIndex,
              "select: Dimension out of range (expected to be in range of [-2, 1], but got 2)");
  const TensorMeta scalar = Dense({});
  ExpectError(Call("select.int", {&scalar, 0, 0}), ErrorKind::kIndex, "select() cannot be applied to a 0-dim tensor.");
  ExpectError(Call("slice.Tensor", {&x, 0, 0, 5, 0}), ErrorKind::kRuntime, "slice: slice step must be positive");
  ExpectError(Call("narrow", {&x, 0, 3, 3}), ErrorKind::kRuntime,
              "narrow: start (3) + length (3) exceeds dimension size (5).");
  const TensorMeta col = Dense({3, 1});
  ExpectError(Call("expand", {&col, std::vector<int64_t>{4, 4}}), ErrorKind::kRuntime,
              "expand: The expanded size of the tensor (4) must match the existing size (3) at non-singleton "
              "dimension 0.  Target sizes: [4, 4].  Tensor sizes: [3, 1]");
  const TensorMeta x3 = Dense({2, 3, 4});
  ExpectError(Call("permute", {&x3, std::vector<int64_t>{0, 0, 1}}), ErrorKind::kRuntime,
              "permute(): duplicate dims are not allowed.");
  ExpectError(Call("t", {&x3}), ErrorKind::kRuntime, "t() expects a tensor with <= 2 dimensions, but self is 3D");
}

// ---- matmul ----------------------------------------------------------------

Shape MatmulShape(Shape a, Shape b) {
  const TensorMeta ta = Dense(std::move(a)), tb = Dense(std::move(b));
  absl::StatusOr<MetaResult> r = Call("matmul", {&ta, &tb});
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {-1};
  EXPECT_EQ(r->outputs[0].strides, ContiguousStrides(r->outputs[0].sizes));
  return r->outputs[0].sizes;
}

TEST(Matmul, EveryRankCombination) {
  EXPECT_EQ(MatmulShape({3}, {3}), Shape{});                 // dot -> 0-dim
  EXPECT_EQ(MatmulShape({3}, {3, 5}), (Shape{5}));           // vector @ matrix
  EXPECT_EQ(MatmulShape({2, 3}, {3}), (Shape{2}));           // matrix @ vector
  EXPECT_EQ(MatmulShape({8, 4}, {4, 2}), (Shape{8, 2}));
  EXPECT_EQ(MatmulShape({5, 2, 3}, {3}), (Shape{5, 2}));
  EXPECT_EQ(MatmulShape({3}, {5, 3, 2}), (Shape{5, 2}));
  EXPECT_EQ(MatmulShape({5, 2, 3}, {3, 4}), (Shape{5, 2, 4}));
  EXPECT_EQ(MatmulShape({2, 3}, {5, 3, 4}), (Shape{5, 2, 4}));
  EXPECT_EQ(MatmulShape({5, 2, 3}, {5, 3, 4}), (Shape{5, 2, 4}));
  EXPECT_EQ(MatmulShape({5, 1, 2, 3}, {4, 3, 2}), (Shape{5, 4, 2, 2}));  // batch dims broadcast
  EXPECT_EQ(MatmulShape({0, 3}, {3, 0}), (Shape{0, 0}));
  EXPECT_EQ(MatmulShape({2, 0}, {0, 3}), (Shape{2, 3}));
}

TEST(Matmul, ErrorsNameTheShapes) {
  const TensorMeta a = Dense({8, 4}), b = Dense({3, 2});
  ExpectError(Call("matmul", {&a, &b}), ErrorKind::kRuntime,
              "matmul: size mismatch, self is [8, 4], other is [3, 2] (4 != 3)");
  ExpectError(Call("mm", {&a, &b}), ErrorKind::kRuntime, "mm: size mismatch, self is [8, 4], mat2 is [3, 2] (4 != 3)");
  const TensorMeta v3 = Dense({3}), v4 = Dense({4});
  ExpectError(Call("matmul", {&v3, &v4}), ErrorKind::kRuntime,
              "matmul: size mismatch, self is [3], other is [4] (3 != 4)");
  const TensorMeta b1 = Dense({5, 2, 2, 3}), b2 = Dense({4, 3, 2});
  ExpectError(Call("matmul", {&b1, &b2}), ErrorKind::kRuntime,
              "matmul: The size of tensor a (2) must match the size of tensor b (4) at non-singleton dimension 1 "
              "(shapes [5, 2] and [4])");  // the batch dims
  const TensorMeta s = Dense({});
  ExpectError(Call("matmul", {&s, &v3}), ErrorKind::kRuntime,
              "matmul: both arguments to matmul need to be at least 1D, but they are 0D and 1D");
  const TensorMeta d = Dense({3, 4}, S::kFloat64), f = Dense({2, 3});
  ExpectError(Call("matmul", {&f, &d}), ErrorKind::kRuntime,
              "matmul: expected scalar type Float but found Double (self is float32, other is float64; both operands "
              "must have the same dtype)");
  const TensorMeta x = Dense({2, 2, 3}), y = Dense({3, 3, 4}), y2 = Dense({2, 4, 4});
  ExpectError(Call("bmm", {&x, &y}), ErrorKind::kRuntime,
              "bmm: batch size mismatch, self is [2, 2, 3], mat2 is [3, 3, 4] (2 != 3)");
  ExpectError(Call("bmm", {&x, &y2}), ErrorKind::kRuntime,
              "bmm: size mismatch, self is [2, 2, 3], mat2 is [2, 4, 4] (3 != 4)");
  ExpectError(Call("bmm", {&f, &y}), ErrorKind::kRuntime, "bmm: self must be a 3D tensor, got a 2D tensor");
  ExpectError(Call("mm", {&x, &f}), ErrorKind::kRuntime, "mm: self must be a matrix, got a 3D tensor");
}

// ---- reductions ----------------------------------------------------------------

TEST(Reductions, DimListsNegativeDimsKeepdim) {
  const TensorMeta x = Dense({2, 3, 4});
  ExpectView(Call("sum", {&x}), {}, {}, 0, -1);
  ExpectView(Call("sum", {&x, std::vector<int64_t>{0, -1}}), {3}, {1}, 0, -1);
  ExpectView(Call("sum", {&x, std::vector<int64_t>{0, -1}, true}), {1, 3, 1}, {3, 1, 1}, 0, -1);
  ExpectView(Call("sum", {&x, 1, true}), {2, 1, 4}, {4, 4, 1}, 0, -1);
  ExpectView(Call("sum", {&x, std::vector<int64_t>{}}, {{"keepdim", true}}), {1, 1, 1}, {1, 1, 1}, 0, -1);
  const TensorMeta p = Strided({4, 2, 3}, {1, 12, 4});
  ExpectView(Call("sum", {&p, 0}), {2, 3}, {3, 1}, 0, -1);  // reductions are contiguous
  ExpectView(Call("amax", {&x, std::vector<int64_t>{0, 2}, true}), {1, 3, 1}, {3, 1, 1}, 0, -1);
  ExpectView(Call("argmax", {&x, 1, true}), {2, 1, 4}, {4, 4, 1}, 0, -1);
  ExpectView(Call("argmax", {&x, Value(), true}), {1, 1, 1}, {1, 1, 1}, 0, -1);

  const TensorMeta i8 = Dense({2, 3}, S::kInt8), b = Dense({2}, S::kBool);
  EXPECT_EQ(Call("sum", {&i8})->outputs[0].dtype, S::kInt64);
  EXPECT_EQ(Call("sum", {&b})->outputs[0].dtype, S::kInt64);
  EXPECT_EQ(Call("sum", {&i8}, {{"dtype", S::kInt8}})->outputs[0].dtype, S::kInt8);
  EXPECT_EQ(Call("mean", {&i8}, {{"dtype", S::kFloat64}})->outputs[0].dtype, S::kFloat64);
  EXPECT_EQ(Call("argmin", {&x})->outputs[0].dtype, S::kInt64);

  absl::StatusOr<MetaResult> r = Call("max.dim", {&x, -1, true});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->outputs.size(), 2u);
  EXPECT_EQ(r->outputs[0].sizes, (Shape{2, 3, 1}));
  EXPECT_EQ(r->outputs[0].dtype, S::kFloat32);
  EXPECT_EQ(r->outputs[1].sizes, (Shape{2, 3, 1}));
  EXPECT_EQ(r->outputs[1].dtype, S::kInt64);
}

TEST(Reductions, Errors) {
  const TensorMeta l = Dense({2, 3}, S::kInt64);
  ExpectError(Call("mean", {&l}), ErrorKind::kRuntime,
              "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
              "Got: Long");
  const TensorMeta x = Dense({2, 3});
  ExpectError(Call("mean", {&x}, {{"dtype", S::kInt64}}), ErrorKind::kRuntime,
              "mean(): could not infer output dtype. Optional dtype must be either a floating point or complex dtype. "
              "Got: Long");
  ExpectError(Call("sum", {&x, std::vector<int64_t>{0, 0}}), ErrorKind::kRuntime,
              "sum: dim 0 appears multiple times in the list of dims");
  const TensorMeta e = Dense({0, 3});
  ExpectError(Call("amax", {&e, 0}), ErrorKind::kIndex, "amax(): Expected reduction dim 0 to have non-zero size.");
  ExpectError(Call("amax", {&e}), ErrorKind::kRuntime,
              "amax(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with "
              "the 'dim' argument.");
  ExpectView(Call("amax", {&e, 1}), {0}, {1}, 0, -1);
  ExpectError(Call("argmax", {&e}), ErrorKind::kIndex,
              "argmax(): Expected reduction dim to be specified for input.numel() == 0.");
  ExpectError(Call("max.dim", {&e, 0}), ErrorKind::kIndex, "max(): Expected reduction dim 0 to have non-zero size.");
  ExpectError(Call("max", {&e}), ErrorKind::kRuntime,
              "max(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with "
              "the 'dim' argument.");
}

// ---- factories -------------------------------------------------------------------

TEST(Factories, DtypeAndDeviceDefaults) {
  absl::StatusOr<MetaResult> r = Call("zeros", {std::vector<int64_t>{3, 4}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0], Dense({3, 4}));
  r = Call("empty", {std::vector<int64_t>{2, 0, 3}}, {{"device", kMetaDevice}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0], Strided({2, 0, 3}, {3, 3, 1}, 0, S::kFloat32, kMetaDevice));
  EXPECT_EQ(Call("full", {std::vector<int64_t>{2}, true})->outputs[0].dtype, S::kBool);
  EXPECT_EQ(Call("full", {std::vector<int64_t>{2}, 3})->outputs[0].dtype, S::kInt64);
  EXPECT_EQ(Call("full", {std::vector<int64_t>{2}, 3.0})->outputs[0].dtype, S::kFloat32);
  EXPECT_EQ(Call("eye", {3, 4})->outputs[0].sizes, (Shape{3, 4}));
  // arange: int64 unless a bound is a float; ceil((end - start) / step) elements
  r = Call("arange", {5});
  EXPECT_EQ(r->outputs[0], Strided({5}, {1}, 0, S::kInt64));
  EXPECT_EQ(Call("arange.start", {0, 5, 0.5})->outputs[0], Strided({10}, {1}, 0, S::kFloat32));
  EXPECT_EQ(Call("arange.start", {0, 10, 3})->outputs[0].sizes, (Shape{4}));
  EXPECT_EQ(Call("arange.start", {5, 0, -1})->outputs[0].sizes, (Shape{5}));
  EXPECT_EQ(Call("arange.start", {-1.5, 2.5, 1}, {{"dtype", S::kInt64}})->outputs[0].sizes, (Shape{3}));
  // *_like keeps self's layout and device
  const TensorMeta p = Strided({4, 2, 3}, {1, 12, 4}, 5, S::kFloat32, kMetaDevice);
  r = Call("zeros_like", {&p});
  EXPECT_EQ(r->outputs[0], Strided({4, 2, 3}, {1, 12, 4}, 0, S::kFloat32, kMetaDevice));
  r = Call("empty_like", {&p}, {{"device", kCPU}, {"dtype", S::kInt8}});
  EXPECT_EQ(r->outputs[0], Strided({4, 2, 3}, {1, 12, 4}, 0, S::kInt8, kCPU));
}

TEST(Factories, Errors) {
  ExpectError(Call("empty", {std::vector<int64_t>{2, -1}}), ErrorKind::kRuntime,
              "empty: Trying to create tensor with negative dimension -1: [2, -1]");
  ExpectError(Call("zeros", {std::vector<int64_t>{int64_t{1} << 40, int64_t{1} << 40}}), ErrorKind::kRuntime,
              "zeros: Storage size calculation overflowed with sizes=[1099511627776, 1099511627776]");
  ExpectError(Call("arange.start", {0, 5, 0}), ErrorKind::kRuntime, "arange: step must be nonzero");
  ExpectError(Call("arange.start", {5, 0, 1}), ErrorKind::kRuntime,
              "arange: upper bound and larger bound inconsistent with step sign");
  ExpectError(Call("arange", {std::numeric_limits<double>::infinity()}), ErrorKind::kRuntime,
              "arange: unsupported range: 0 -> inf");
  ExpectError(Call("eye", {-1}), ErrorKind::kRuntime, "eye: n must be greater or equal to 0, got -1");
  ExpectError(Call("full", {std::vector<int64_t>{2}, 1000}, {{"dtype", S::kInt8}}), ErrorKind::kRuntime,
              "full: value cannot be converted to type int8_t without overflow");
  ExpectError(Call("rand", {std::vector<int64_t>{2}}, {{"dtype", S::kInt64}}), ErrorKind::kRuntime,
              "rand: \"rand\" not implemented for 'Long'");
}

// ---- elementwise dtype rules and errors -------------------------------------------

TEST(Elementwise, DtypesAndErrors) {
  const TensorMeta i8 = Dense({2}, S::kInt8), b = Dense({2}, S::kBool), f = Dense({2});
  EXPECT_EQ(Call("div.Tensor", {&i8, &i8})->outputs[0].dtype, S::kFloat32);  // true division
  EXPECT_EQ(Call("exp", {&i8})->outputs[0].dtype, S::kFloat32);
  EXPECT_EQ(Call("lt.Tensor", {&i8, &f})->outputs[0].dtype, S::kBool);
  EXPECT_EQ(Call("add.Scalar", {&i8, 2.5})->outputs[0].dtype, S::kFloat32);
  EXPECT_EQ(Call("pow.Scalar", {2, &b})->outputs[0].dtype, S::kInt64);
  EXPECT_EQ(Call("bitwise_and.Scalar", {&b, 1})->outputs[0].dtype, S::kInt64);
  ExpectError(Call("neg", {&b}), ErrorKind::kRuntime,
              "neg: Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a "
              "mask, use the `~` or `logical_not()` operator instead.");
  ExpectError(Call("sub.Tensor", {&b, &b}), ErrorKind::kRuntime,
              "sub: Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
              "`logical_xor()` operator instead.");
  ExpectError(Call("sub.Scalar", {&f, true}), ErrorKind::kRuntime,
              "sub: Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert "
              "a mask, use the `~` or `logical_not()` operator instead.");
  ExpectError(Call("bitwise_not", {&f}), ErrorKind::kRuntime, "bitwise_not: \"bitwise_not\" not implemented for 'Float'");
  ExpectError(Call("pow.Tensor_Scalar", {&i8, -1}), ErrorKind::kRuntime,
              "pow: Integers to negative integer powers are not allowed.");
  ExpectError(Call("add.Tensor", {&i8, &i8}, {{"alpha", 2.5}}), ErrorKind::kRuntime,
              "add: For integral input tensors, argument alpha must not be a floating point number.");
  const TensorMeta c = Dense({2}, S::kInt8);
  ExpectError(Call("where.self", {&c, &f, &f}), ErrorKind::kRuntime,
              "where expected condition to be a boolean tensor, but got a tensor with dtype Char");
  const TensorMeta u8 = Dense({2}, S::kUInt8);
  EXPECT_TRUE(Call("where.self", {&u8, &f, &f}).ok());  // deprecated in PyTorch, still accepted
  ExpectError(Call("clamp", {&f}), ErrorKind::kRuntime, "clamp: At least one of 'min' or 'max' must not be None");
}

// ---- devices ---------------------------------------------------------------------

TEST(Devices, MetaInMetaOutAndMixedDevicesRefused) {
  const TensorMeta m = Dense({2, 3}, S::kFloat32, kMetaDevice), c = Dense({2, 3});
  const TensorMeta c0 = Dense({}, S::kFloat32, kCPU);
  absl::StatusOr<MetaResult> r = Call("add.Scalar", {&m, 1});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->outputs[0].device.is_meta());
  const TensorMeta w = Dense({3, 4}, S::kFloat32, kMetaDevice);
  r = Call("matmul", {&m, &w});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0], Dense({2, 4}, S::kFloat32, kMetaDevice));
  EXPECT_TRUE(Call("sum", {&m, 0})->outputs[0].device.is_meta());
  // torch.ones(3, device="meta") + torch.ones(3): the first non-cpu device is named first
  ExpectError(Call("add.Tensor", {&c, &m}), ErrorKind::kRuntime,
              "add: Expected all tensors to be on the same device, but found at least two devices, meta and cpu!");
  // ... but a 0-dim cpu tensor may join an op on another device.
  r = Call("mul.Tensor", {&m, &c0});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->outputs[0].device.is_meta());
  ExpectError(Call("cat", {TensorList{&m, &c}}), ErrorKind::kRuntime,
              "cat: Expected all tensors to be on the same device, but found at least two devices, meta and cpu!");
}

// What a client with a CUDA daemon runs before streaming: a cuda tensor with
// a cpu one is PyTorch's error at the call site, the cuda device named first
// (whichever side it is on); a 0-dim cpu tensor joins as a scalar; a cuda
// factory and a move to cuda give cuda metas.
TEST(Devices, CudaMetasMixedWithCpuAreRefused) {
  const Device cuda0{DeviceType::kCUDA, 0}, cuda1{DeviceType::kCUDA, 1};
  const TensorMeta g = Dense({2, 3}, S::kFloat32, cuda0), c = Dense({2, 3});
  const TensorMeta c0 = Dense({}, S::kFloat32, kCPU), g1 = Dense({2, 3}, S::kFloat32, cuda1);
  const std::string two = "Expected all tensors to be on the same device, but found at least two devices, ";
  ExpectError(Call("add.Tensor", {&g, &c}), ErrorKind::kRuntime, "add: " + two + "cuda:0 and cpu!");
  ExpectError(Call("add.Tensor", {&c, &g}), ErrorKind::kRuntime, "add: " + two + "cuda:0 and cpu!");
  ExpectError(Call("add.Tensor", {&g, &g1}), ErrorKind::kRuntime, "add: " + two + "cuda:0 and cuda:1!");
  const TensorMeta w = Dense({3, 4});
  meta_test::ExpectErrorContains(Call("matmul", {&g, &w}), ErrorKind::kRuntime, two + "cuda:0 and cpu!");
  absl::StatusOr<MetaResult> r = Call("mul.Tensor", {&g, &c0});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].device, cuda0);
  r = Call("to.device", {&c, cuda0});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0], Dense({2, 3}, S::kFloat32, cuda0));
}

TEST(Devices, CopiesBetweenDevices) {
  const TensorMeta m = Strided({4, 2, 3}, {1, 12, 4}, 0, S::kFloat32, kMetaDevice);
  absl::StatusOr<MetaResult> r = Call("to.device", {&m, kCPU});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(KindOf(r.status()), ErrorKind::kNotImplemented);  // as PyTorch; a RuntimeError subclass in Python
  EXPECT_TRUE(absl::StrContains(r.status().message(), "Cannot copy out of meta tensor; no data!"));
  EXPECT_TRUE(absl::StrContains(r.status().message(), "tensord.empty_like(t, device=\"cpu\")"));
  const TensorMeta c = Strided({4, 2, 3}, {1, 12, 4});
  ExpectView(Call("to.device", {&c, kMetaDevice}), {4, 2, 3}, {1, 12, 4}, 0, -1);
  EXPECT_TRUE(Call("to.device", {&c, kMetaDevice})->outputs[0].device.is_meta());
  ExpectView(Call("to.device", {&m, kMetaDevice}), {4, 2, 3}, {1, 12, 4}, 0, 0);  // nothing to do: alias
  ExpectView(Call("to.dtype", {&c, S::kFloat32}), {4, 2, 3}, {1, 12, 4}, 0, 0);
  ExpectView(Call("to.dtype", {&c, S::kFloat32, false, true}), {4, 2, 3}, {1, 12, 4}, 0, -1);
  const TensorMeta sl = Strided({4, 2, 2}, {1, 12, 4}, 1);
  ExpectView(Call("to.dtype", {&sl, S::kFloat64}), {4, 2, 2}, {1, 8, 4}, 0, -1);
  ExpectView(Call("contiguous", {&c}), {4, 2, 3}, {6, 3, 1}, 0, -1);
  const TensorMeta d = Strided({3, 4}, {4, 1}, 12);
  ExpectView(Call("contiguous", {&d}), {3, 4}, {4, 1}, 12, 0);
  ExpectView(Call("clone", {&c}), {4, 2, 3}, {1, 12, 4}, 0, -1);
}

// ---- data-dependent ops and advanced indexing ------------------------------------

TEST(DataDependent, RefusedWithTheOpsNameAndTheReason) {
  const TensorMeta m = Dense({4}, S::kFloat32, kMetaDevice), mask = Dense({4}, S::kBool, kMetaDevice);
  absl::StatusOr<MetaResult> r = Call("nonzero", {&m});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(KindOf(r.status()), ErrorKind::kNotImplemented);
  EXPECT_TRUE(absl::StartsWith(r.status().message(), "nonzero: "));
  EXPECT_TRUE(absl::StrContains(r.status().message(), "depends on the data"));
  r = Call("masked_select", {&m, &mask});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StartsWith(r.status().message(), "masked_select: "));
  r = Call("index.Tensor", {&m, TensorList{&mask}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(KindOf(r.status()), ErrorKind::kNotImplemented);
  EXPECT_TRUE(absl::StartsWith(r.status().message(), "index: boolean mask indexing has an output shape that depends "
                                                     "on the data"));
}

TEST(Index, IntegerIndexTensorsPlaceTheirDimsAsPyTorch) {
  const TensorMeta x = Dense({5, 6, 7, 8});
  const TensorMeta i2 = Dense({2}, S::kInt64), i3 = Dense({3, 1}, S::kInt64);
  // x[[i2]], x[:, i2], x[i2, i3] (adjacent: in place), x[i2, :, i3] (split: to the front)
  ExpectView(Call("index.Tensor", {&x, TensorList{&i2}}), {2, 6, 7, 8}, {336, 56, 8, 1}, 0, -1);
  ExpectView(Call("index.Tensor", {&x, TensorList{nullptr, &i2}}), {5, 2, 7, 8}, {112, 56, 8, 1}, 0, -1);
  ExpectView(Call("index.Tensor", {&x, TensorList{nullptr, &i2, &i3}}), {5, 3, 2, 8}, {48, 16, 8, 1}, 0, -1);
  ExpectView(Call("index.Tensor", {&x, TensorList{&i2, nullptr, &i3}}), {3, 2, 6, 8}, {96, 48, 8, 1}, 0, -1);
  // the output follows self's layout: x.permute(3, 2, 1, 0)[:, i2]
  const TensorMeta xp = Strided({8, 7, 6, 5}, {1, 8, 56, 336});
  ExpectView(Call("index.Tensor", {&xp, TensorList{nullptr, &i2}}), {8, 2, 6, 5}, {1, 48, 8, 96}, 0, -1);
  const TensorMeta i32 = Dense({2}, S::kInt32), i3b = Dense({3}, S::kInt64);
  ExpectError(Call("index.Tensor", {&x, TensorList{&i32}}), ErrorKind::kIndex,
              "index: tensors used as indices must be long, byte or bool tensors");
  ExpectError(Call("index.Tensor", {&x, TensorList{&i2, &i3b}}), ErrorKind::kIndex,
              "index: shape mismatch: indexing tensors could not be broadcast together with shapes [2], [3]");
  ExpectError(Call("index.Tensor", {&x, TensorList{&i2, &i2, &i2, &i2, &i2}}), ErrorKind::kIndex,
              "index: too many indices for tensor of dimension 4 (got 5)");
}

// ---- selection and joining -------------------------------------------------------

TEST(SelectionAndJoining, ShapesDtypesAndPromotion) {
  const TensorMeta x = Dense({2, 3, 4});
  absl::StatusOr<MetaResult> r = Call("topk", {&x, 2});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0], Dense({2, 3, 2}));
  EXPECT_EQ(r->outputs[1], Dense({2, 3, 2}, S::kInt64));
  ExpectError(Call("topk", {&x, 5}), ErrorKind::kRuntime,
              "topk: selected index k out of range (k is 5, dimension 2 has size 4)");
  const TensorMeta idx = Dense({2, 2, 4}, S::kInt64);
  ExpectView(Call("gather", {&x, 1, &idx}), {2, 2, 4}, {8, 4, 1}, 0, -1);
  const TensorMeta bad = Dense({3, 2, 4}, S::kInt64);
  ExpectError(Call("gather", {&x, 1, &bad}), ErrorKind::kRuntime,
              "gather: Size does not match at dimension 0 expected index [3, 2, 4] to be smaller than self [2, 3, 4] "
              "apart from dimension 1");
  const TensorMeta sel = Dense({2}, S::kInt32);
  ExpectView(Call("index_select", {&x, 1, &sel}), {2, 2, 4}, {8, 4, 1}, 0, -1);

  const TensorMeta a = Dense({2, 3}), d = Dense({4, 3}, S::kFloat64), legacy = Dense({0});
  ExpectView(Call("cat", {TensorList{&a, &d}}), {6, 3}, {3, 1}, 0, -1);
  EXPECT_EQ(Call("cat", {TensorList{&a, &d}})->outputs[0].dtype, S::kFloat64);
  ExpectView(Call("cat", {TensorList{&a, &legacy}, 1}), {2, 3}, {3, 1}, 0, -1);  // legacy [0] tensors are skipped
  const TensorMeta i8 = Dense({2, 3}, S::kInt8), u8 = Dense({2, 3}, S::kUInt8);
  EXPECT_EQ(Call("cat", {TensorList{&i8, &u8}})->outputs[0].dtype, S::kInt16);
  EXPECT_EQ(Call("cat", {TensorList{&a, &i8}, 1})->outputs[0], Dense({2, 6}));
  const TensorMeta b24 = Dense({2, 4});
  ExpectError(Call("cat", {TensorList{&a, &b24}}), ErrorKind::kRuntime,
              "cat: Sizes of tensors must match except in dimension 0. Expected size 3 but got size 4 for tensor "
              "number 1 in the list.");
  ExpectView(Call("stack", {TensorList{&a, &a}}), {2, 2, 3}, {6, 3, 1}, 0, -1);
  ExpectView(Call("stack", {TensorList{&a, &a}, -1}), {2, 3, 2}, {6, 2, 1}, 0, -1);
  const TensorMeta t32 = Dense({3, 2});
  ExpectError(Call("stack", {TensorList{&a, &t32}}), ErrorKind::kRuntime,
              "stack expects each tensor to be equal size, but got [2, 3] at entry 0 and [3, 2] at entry 1");
}

// ---- what tensord refuses on purpose -------------------------------------------------

TEST(Refusals, Float8StoresButDoesNotCompute) {
  const TensorMeta e = Dense({2, 3}, S::kFloat8_e4m3fn);
  EXPECT_TRUE(Call("empty", {std::vector<int64_t>{2}}, {{"dtype", S::kFloat8_e5m2}}).ok());
  EXPECT_TRUE(Call("transpose.int", {&e, 0, 1}).ok());
  EXPECT_TRUE(Call("cat", {TensorList{&e, &e}}).ok());
  EXPECT_TRUE(Call("to.dtype", {&e, S::kFloat32}).ok());
  ExpectError(Call("add.Tensor", {&e, &e}), ErrorKind::kRuntime, "add: \"add\" not implemented for 'Float8_e4m3fn'");
  ExpectError(Call("sum", {&e}), ErrorKind::kRuntime, "sum: \"sum\" not implemented for 'Float8_e4m3fn'");
  const TensorMeta e32 = Dense({3, 2}, S::kFloat8_e4m3fn);
  ExpectError(Call("matmul", {&e, &e32}), ErrorKind::kRuntime,
              "matmul: \"matmul\" not implemented for 'Float8_e4m3fn'");
  const TensorMeta f = Dense({2, 3});
  ExpectError(Call("add.Tensor", {&e, &f}), ErrorKind::kRuntime,
              "add: Promotion for Float8 Types is not supported, attempted to promote Float8_e4m3fn and Float");
}

TEST(Refusals, StricterThanPyTorch113WhereItWasLenient) {
  // torch 1.13 returns a 0-dim tensor for tensor(1.).index_select(0, tensor([0, 0])); newer PyTorch refuses.
  const TensorMeta s = Dense({}), two = Dense({2}, S::kInt64);
  ExpectError(Call("index_select", {&s, 0, &two}), ErrorKind::kRuntime,
              "index_select(): Index to scalar can have only 1 value, got 2 value(s)");
  // torch 1.13 accepts a float mask in masked_fill; newer PyTorch (and tensord) want bool.
  const TensorMeta x = Dense({2, 3}), fmask = Dense({2, 3});
  ExpectError(Call("masked_fill.Scalar", {&x, &fmask, 1.0}), ErrorKind::kRuntime,
              "masked_fill: masked_fill_ only supports boolean masks, but got mask with dtype float32");
  const TensorMeta b = Dense({2, 2}, S::kBool);
  ExpectError(Call("matmul", {&b, &b}), ErrorKind::kRuntime, "matmul: \"matmul\" not implemented for 'Bool'");
}

}  // namespace
}  // namespace tensord
