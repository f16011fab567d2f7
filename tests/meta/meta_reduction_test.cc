// Meta functions of prod, nansum, var/std, norm / linalg_vector_norm,
// logsumexp, all/any and cumsum/cumprod through the op table (BindArgs +
// RunMeta), and sum/mean over dim=() / []. Expected values are what PyTorch
// 1.13 printed for the same call on CPU (the torch expression is in the
// comment): dtype, sizes, every stride (reductions and scans give contiguous
// outputs whatever the input layout), and the error conditions and words.
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
using Dims = std::vector<int64_t>;

TensorMeta Strided(Shape sizes, Shape strides, S dtype = S::kFloat32, int64_t offset = 0) {
  TensorMeta m;
  m.sizes = std::move(sizes);
  m.strides = std::move(strides);
  m.storage_offset = offset;
  m.dtype = dtype;
  m.device = kCPU;
  return m;
}

void Expect(absl::StatusOr<MetaResult> r, Shape sizes, Shape strides, S dtype) {
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(r->outputs[0].sizes, sizes);
  EXPECT_EQ(r->outputs[0].strides, strides);
  EXPECT_EQ(r->outputs[0].storage_offset, 0);
  EXPECT_EQ(r->outputs[0].dtype, dtype);
  EXPECT_EQ(r->alias_of[0], -1);
}

void ExpectError(absl::StatusOr<MetaResult> r, ErrorKind kind, absl::string_view text) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(KindOf(r.status()), kind) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), text)) << r.status();
}

// An (N, C, H, W) = (4, 3, 2, 5) activation stored as (N, W, H, C): a transposed input.
TensorMeta Bn() { return Strided({4, 3, 2, 5}, {30, 1, 3, 6}); }

TEST(MetaReductionTest, SumMeanOverEmptyDimList) {
  const TensorMeta x = Strided({3, 4}, {1, 3});
  Expect(Call("sum", {&x, Dims{}}), {}, {}, S::kFloat32);                        // x.sum(())
  Expect(Call("sum", {&x, Dims{}, true}), {1, 1}, {1, 1}, S::kFloat32);          // x.sum((), keepdim=True)
  Expect(Call("nansum", {&x, Dims{}, true}), {1, 1}, {1, 1}, S::kFloat32);       // torch.nansum(x, (), True)
  Expect(Call("mean", {&x, Dims{}, true}), {1, 1}, {1, 1}, S::kFloat32);
  const TensorMeta b = Bn();
  Expect(Call("mean", {&b, Dims{0, 2, 3}, true}), {1, 3, 1, 1}, {3, 1, 1, 1}, S::kFloat32);
}

TEST(MetaReductionTest, Prod) {
  const TensorMeta x = Strided({3, 4}, {1, 3});
  Expect(Call("prod", {&x}), {}, {}, S::kFloat32);
  Expect(Call("prod.dim_int", {&x, int64_t{0}, true}), {1, 4}, {4, 1}, S::kFloat32);
  const TensorMeta i = Dense({3, 4}, S::kInt32);
  Expect(Call("prod.dim_int", {&i, int64_t{1}, true}), {3, 1}, {1, 1}, S::kInt64);  // torch.prod(i, 1, True)
  const TensorMeta b = Dense({4}, S::kBool);
  Expect(Call("prod", {&b}), {}, {}, S::kInt64);
  Expect(Call("prod", {&x}, {{"dtype", Value(S::kFloat64)}}), {}, {}, S::kFloat64);
  const TensorMeta s = Dense({});
  Expect(Call("prod.dim_int", {&s, int64_t{-1}, true}), {}, {}, S::kFloat32);
  ExpectError(Call("prod.dim_int", {&s, int64_t{1}}), ErrorKind::kIndex, "Dimension out of range");
  const TensorMeta h = Dense({3}, S::kFloat16);
  ExpectError(Call("prod", {&h}), ErrorKind::kRuntime, "not implemented for 'Half'");
  ExpectError(Call("prod", {&x}, {{"dtype", Value(S::kBFloat16)}}), ErrorKind::kRuntime,
              "not implemented for 'BFloat16'");
}

TEST(MetaReductionTest, VarStdOverloads) {
  const TensorMeta b = Bn();
  // torch.var(x, [0, 2, 3], correction=0, keepdim=True) of the transposed activation.
  Expect(Call("var.correction", {&b, Dims{0, 2, 3}}, {{"correction", Value(int64_t{0})}, {"keepdim", Value(true)}}),
         {1, 3, 1, 1}, {3, 1, 1, 1}, S::kFloat32);
  Expect(Call("std.dim", {&b, Dims{0, 2, 3}, false}), {3}, {1}, S::kFloat32);
  Expect(Call("var", {&b, false}), {}, {}, S::kFloat32);
  Expect(Call("std.correction", {&b, Value()}, {{"correction", Value()}, {"keepdim", Value(true)}}), {1, 1, 1, 1},
         {1, 1, 1, 1},
         S::kFloat32);
  const TensorMeta h = Dense({3, 4}, S::kBFloat16);
  Expect(Call("var.dim", {&h, Dims{0}}), {4}, {1}, S::kBFloat16);
  const TensorMeta i = Dense({3, 4}, S::kInt64);
  ExpectError(Call("var.correction", {&i, Dims{0}}, {{"correction", Value(int64_t{1})}}), ErrorKind::kRuntime,
              "std and var only support floating point and complex dtypes");
  ExpectError(Call("std", {&i}), ErrorKind::kRuntime, "std and var only support floating point");
  ExpectError(Call("var.dim", {&b, Dims{1, -3}}), ErrorKind::kRuntime, "appears multiple times");
  ExpectError(Call("var.dim", {&b, Dims{4}}), ErrorKind::kIndex, "Dimension out of range");
  // var.correction has no default dim nor correction (PyTorch 1.13's schema):
  // var(x) and var(x, 1) bind to the plain and .dim overloads.
  EXPECT_FALSE(Call("var.correction", {&b}).ok());
  EXPECT_FALSE(Call("var.correction", {&b, Dims{0}}).ok());
}

TEST(MetaReductionTest, Norms) {
  const TensorMeta x = Strided({3, 4}, {1, 3});
  Expect(Call("norm.Scalar", {&x}), {}, {}, S::kFloat32);
  Expect(Call("norm.ScalarOpt_dim", {&x, Value(), Dims{1}, true}), {3, 1}, {1, 1}, S::kFloat32);
  Expect(Call("norm.ScalarOpt_dim_dtype", {&x, Scalar::Int(2), Dims{0}, false}, {{"dtype", Value(S::kFloat64)}}),
         {4}, {1}, S::kFloat64);
  Expect(Call("linalg_vector_norm", {&x, Scalar::Float(0.5), Dims{0, 1}, true}), {1, 1}, {1, 1}, S::kFloat32);
  const TensorMeta e = Dense({0, 3});
  Expect(Call("linalg_vector_norm", {&e, Scalar::Float(std::numeric_limits<double>::infinity()), Dims{1}}), {0},
         {1}, S::kFloat32);
  Expect(Call("norm.Scalar", {&e, Scalar::Float(std::numeric_limits<double>::infinity())}), {}, {}, S::kFloat32);
  ExpectError(Call("linalg_vector_norm", {&e, Scalar::Float(std::numeric_limits<double>::infinity())}),
              ErrorKind::kRuntime, "cannot compute the inf norm on an empty tensor");
  ExpectError(Call("linalg_vector_norm", {&e, Scalar::Int(-1), Dims{0}}), ErrorKind::kRuntime,
              "cannot compute the -1 norm on the dimension 0");
  const TensorMeta i = Dense({3}, S::kInt64);
  ExpectError(Call("norm.Scalar", {&i}), ErrorKind::kRuntime,
              "norm(): input dtype should be either floating point or complex. Got Long instead.");
  ExpectError(Call("linalg_vector_norm", {&i}), ErrorKind::kRuntime,
              "linalg.vector_norm: Expected a floating point or complex tensor as input. Got Long");
  const TensorMeta d = Dense({3}, S::kFloat64);
  ExpectError(Call("linalg_vector_norm", {&d}, {{"dtype", Value(S::kFloat32)}}), ErrorKind::kRuntime,
              "should be convertible without narrowing to the specified dtype (Float)");
  ExpectError(Call("norm.ScalarOpt_dim_dtype", {&d, Scalar::Int(2), Dims{0}, false}, {{"dtype", Value(S::kInt64)}}),
              ErrorKind::kRuntime, "desired output dtype should be either floating point or complex. Got Long");
}

TEST(MetaReductionTest, Logsumexp) {
  const TensorMeta x = Strided({3, 4}, {1, 3});
  Expect(Call("logsumexp", {&x, Dims{1}}), {3}, {1}, S::kFloat32);
  Expect(Call("logsumexp", {&x, Dims{}, true}), {1, 1}, {1, 1}, S::kFloat32);     // torch.logsumexp(x, (), True)
  const TensorMeta i = Dense({3, 4}, S::kInt64);
  Expect(Call("logsumexp", {&i, Dims{0}}), {4}, {1}, S::kFloat32);
  const TensorMeta s = Dense({}, S::kFloat64);
  Expect(Call("logsumexp", {&s, Dims{}}), {}, {}, S::kFloat64);
  ExpectError(Call("logsumexp", {&x, Dims{}}), ErrorKind::kRuntime,
              "output with shape [] doesn't match the broadcast shape [1, 1]");
  const TensorMeta h = Dense({3}, S::kFloat16);
  ExpectError(Call("logsumexp", {&h, Dims{0}}), ErrorKind::kRuntime, "not implemented for 'Half'");
  EXPECT_FALSE(Call("logsumexp", {&x}).ok());  // dim is required
}

TEST(MetaReductionTest, AllAny) {
  const TensorMeta h = Strided({3, 4}, {1, 3}, S::kFloat16);
  Expect(Call("all.dim", {&h, int64_t{0}, true}), {1, 4}, {4, 1}, S::kBool);       // torch.all(h, 0, True)
  const TensorMeta u = Dense({3, 4}, S::kUInt8);
  Expect(Call("all", {&u}), {}, {}, S::kUInt8);
  Expect(Call("any.dim", {&u, int64_t{1}}), {3}, {1}, S::kUInt8);
  const TensorMeta s = Dense({});
  Expect(Call("any.dim", {&s, int64_t{0}}), {}, {}, S::kBool);
  ExpectError(Call("any.dim", {&u, int64_t{2}}), ErrorKind::kIndex, "Dimension out of range");
  const TensorMeta f8 = Dense({3}, S::kFloat8_e4m3fn);
  EXPECT_FALSE(Call("all", {&f8}).ok());
}

TEST(MetaReductionTest, ScansAreContiguous) {
  // torch.cumsum(torch.randn(3, 4).t(), 0): sizes [4, 3], strides (3, 1).
  const TensorMeta t = Strided({4, 3}, {1, 4});
  Expect(Call("cumsum", {&t, int64_t{0}}), {4, 3}, {3, 1}, S::kFloat32);
  Expect(Call("cumprod", {&t, int64_t{1}}), {4, 3}, {3, 1}, S::kFloat32);
  // Expanded (stride 0) and permuted 3-D inputs.
  const TensorMeta ex = Strided({4, 5}, {1, 0});
  Expect(Call("cumsum", {&ex, int64_t{1}}), {4, 5}, {5, 1}, S::kFloat32);
  const TensorMeta p = Strided({3, 1, 4}, {1, 4, 3});
  Expect(Call("cumsum", {&p, int64_t{0}}), {3, 1, 4}, {4, 4, 1}, S::kFloat32);
  const TensorMeta i = Dense({3, 4}, S::kInt32);
  Expect(Call("cumsum", {&i, int64_t{1}}), {3, 4}, {4, 1}, S::kInt64);            // int32 -> int64
  Expect(Call("cumsum", {&i, int64_t{1}}, {{"dtype", Value(S::kInt16)}}), {3, 4}, {4, 1}, S::kInt16);
  const TensorMeta b = Dense({3}, S::kBool);
  Expect(Call("cumprod", {&b, int64_t{0}}), {3}, {1}, S::kInt64);
  const TensorMeta s = Dense({});
  Expect(Call("cumsum", {&s, int64_t{-1}}), {}, {}, S::kFloat32);
  ExpectError(Call("cumsum", {&t, int64_t{2}}), ErrorKind::kIndex, "Dimension out of range");
  const TensorMeta h = Dense({3}, S::kFloat16);
  ExpectError(Call("cumsum", {&h, int64_t{0}}), ErrorKind::kRuntime, "not implemented for 'Half'");
  ExpectError(Call("cumsum", {&t, int64_t{0}}, {{"dtype", Value(S::kBool)}}), ErrorKind::kRuntime,
              "not implemented for 'Bool'");
}

TEST(MetaReductionTest, HostileArguments) {
  const TensorMeta x = Dense({3, 4});
  ExpectError(Call("prod.dim_int", {&x, std::numeric_limits<int64_t>::min()}), ErrorKind::kIndex,
              "Dimension out of range");
  ExpectError(Call("cumsum", {&x, std::numeric_limits<int64_t>::max()}), ErrorKind::kIndex, "Dimension out of range");
  ExpectError(Call("logsumexp", {&x, Dims{std::numeric_limits<int64_t>::min()}}), ErrorKind::kIndex,
              "Dimension out of range");
  ExpectError(Call("norm.ScalarOpt_dim", {&x, Scalar::Int(2), Dims{-3}}), ErrorKind::kIndex, "Dimension out of range");
}

}  // namespace
}  // namespace tensord
