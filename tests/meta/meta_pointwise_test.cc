// Meta functions of the pointwise ops (exp2, expm1, log2, log1p,
// silu, square, relu_, div with rounding_mode, floor_divide, fmod, atan2,
// bitwise shifts, lerp): dtypes, output layouts (what PyTorch 1.13 printed
// for the same call, quoted in comments) and errors.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
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

TensorMeta Strided(Shape sizes, Shape strides, S dtype = S::kFloat32, int64_t offset = 0) {
  TensorMeta m;
  m.sizes = std::move(sizes);
  m.strides = std::move(strides);
  m.storage_offset = offset;
  m.dtype = dtype;
  m.device = kCPU;
  return m;
}

void ExpectOut(const absl::StatusOr<MetaResult>& r, const Shape& sizes, const Shape& strides, S dtype) {
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(r->outputs[0].sizes, sizes);
  EXPECT_EQ(r->outputs[0].strides, strides);
  EXPECT_EQ(r->outputs[0].storage_offset, 0);
  EXPECT_EQ(DtypeName(r->outputs[0].dtype), DtypeName(dtype));
  EXPECT_EQ(r->alias_of[0], -1);
}

void ExpectError(const absl::StatusOr<MetaResult>& r, ErrorKind kind, absl::string_view text) {
  ASSERT_FALSE(r.ok()) << "expected: " << text;
  EXPECT_EQ(ErrorKindName(KindOf(r.status())), ErrorKindName(kind)) << r.status().message();
  EXPECT_TRUE(absl::StrContains(r.status().message(), text)) << r.status().message();
}

// ---- unary ---------------------------------------------------------------------

TEST(PointwiseMetaTest, UnaryFloatOpsPromoteIntegersAndKeepLayouts) {
  const TensorMeta i = Strided({3, 4}, {1, 3}, S::kInt64);  // transposed int64
  for (const char* op : {"exp2", "expm1", "log2", "log1p"}) {
    SCOPED_TRACE(op);
    ExpectOut(Call(op, {Value(&i)}), {3, 4}, {1, 3}, S::kFloat32);
    const TensorMeta b = Dense({2}, S::kBool);
    ExpectOut(Call(op, {Value(&b)}), {2}, {1}, S::kFloat32);
    const TensorMeta d = Strided({2, 3, 4}, {1, 8, 2}, S::kFloat64);
    ExpectOut(Call(op, {Value(&d)}), {2, 3, 4}, {1, 8, 2}, S::kFloat64);
  }
}

TEST(PointwiseMetaTest, UnaryOnNC11Layout) {
  // torch.exp2(torch.empty_strided((2,3,1,1),(3,1,3,3))).stride() == (3, 1, 1, 1)
  const TensorMeta x = Strided({2, 3, 1, 1}, {3, 1, 3, 3});
  for (const char* op : {"exp2", "expm1", "log2", "log1p", "silu", "square"}) {
    SCOPED_TRACE(op);
    ExpectOut(Call(op, {Value(&x)}), {2, 3, 1, 1}, {3, 1, 1, 1}, S::kFloat32);
  }
  // torch.atan2(x, x).stride() == (3, 1, 1, 1); torch.fmod(x, 2).stride() == (3, 1, 3, 3)
  ExpectOut(Call("atan2", {Value(&x), Value(&x)}), {2, 3, 1, 1}, {3, 1, 1, 1}, S::kFloat32);
  ExpectOut(Call("fmod.Scalar", {Value(&x), Value(Scalar::Int(2))}), {2, 3, 1, 1}, {3, 1, 3, 3}, S::kFloat32);
}

TEST(PointwiseMetaTest, Float16IsRefusedWhereTheCpuKernelLacksIt) {
  const TensorMeta h = Dense({3}, S::kFloat16);
  ExpectError(Call("expm1", {Value(&h)}), ErrorKind::kRuntime, "\"expm1_vml_cpu\" not implemented for 'Half'");
  ExpectError(Call("log2", {Value(&h)}), ErrorKind::kRuntime, "\"log2_vml_cpu\" not implemented for 'Half'");
  ExpectError(Call("log1p", {Value(&h)}), ErrorKind::kRuntime, "\"log1p_vml_cpu\" not implemented for 'Half'");
  ExpectError(Call("silu", {Value(&h)}), ErrorKind::kRuntime, "\"silu_cpu\" not implemented for 'Half'");
  ExpectError(Call("atan2", {Value(&h), Value(&h)}), ErrorKind::kRuntime, "\"atan2_cpu\" not implemented for 'Half'");
  ExpectError(Call("lerp.Scalar", {Value(&h), Value(&h), Value(Scalar::Float(0.5))}), ErrorKind::kRuntime,
              "\"lerp_kernel_scalar\" not implemented for 'Half'");
  ExpectOut(Call("exp2", {Value(&h)}), {3}, {1}, S::kFloat16);
  const TensorMeta bf = Dense({3}, S::kBFloat16);
  ExpectOut(Call("expm1", {Value(&bf)}), {3}, {1}, S::kBFloat16);
  ExpectOut(Call("silu", {Value(&bf)}), {3}, {1}, S::kBFloat16);
  const TensorMeta f8 = Dense({3}, S::kFloat8_e4m3fn);
  ASSERT_FALSE(Call("exp2", {Value(&f8)}).ok());
  ASSERT_FALSE(Call("square", {Value(&f8)}).ok());
}

TEST(PointwiseMetaTest, SiluRefusesIntegers) {
  const TensorMeta i = Dense({3}, S::kInt64);
  ExpectError(Call("silu", {Value(&i)}), ErrorKind::kRuntime, "\"silu_cpu\" not implemented for 'Long'");
}

TEST(PointwiseMetaTest, SquareIsPowTwo) {
  const TensorMeta b = Dense({2, 3}, S::kBool);
  ExpectOut(Call("square", {Value(&b)}), {2, 3}, {3, 1}, S::kInt64);  // torch.square(bool) is int64
  const TensorMeta u = Strided({3, 2}, {1, 3}, S::kUInt8);
  ExpectOut(Call("square", {Value(&u)}), {3, 2}, {1, 3}, S::kUInt8);
  // An expanded bool input is copied to int64 first (pow's self.to(dtype)): contiguous.
  const TensorMeta be = Strided({3, 4}, {1, 0}, S::kBool);
  ExpectOut(Call("square", {Value(&be)}), {3, 4}, {4, 1}, S::kInt64);
}

TEST(PointwiseMetaTest, ReluInPlace) {
  const TensorMeta x = Strided({3, 4}, {1, 3});
  absl::StatusOr<MetaResult> r = Call("relu_", {Value(&x)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0], x);
  EXPECT_EQ(r->alias_of[0], 0);
  const TensorMeta b = Dense({3}, S::kBool);
  ExpectError(Call("relu_", {Value(&b)}), ErrorKind::kRuntime, "Boolean inputs not supported for relu");
  const TensorMeta e = Strided({3, 4}, {1, 0});
  ExpectError(Call("relu_", {Value(&e)}), ErrorKind::kRuntime, "more than one element of the written-to tensor");
}

// ---- div, floor_divide, fmod ------------------------------------------------------

TEST(PointwiseMetaTest, DivRoundingModes) {
  const TensorMeta a = Dense({2, 3}, S::kInt32);
  const TensorMeta b = Dense({3}, S::kInt64);
  ExpectOut(Call("div.Tensor_mode", {Value(&a), Value(&b)}, {{"rounding_mode", Value("floor")}}), {2, 3}, {3, 1},
            S::kInt64);
  ExpectOut(Call("div.Tensor_mode", {Value(&a), Value(&b)}, {{"rounding_mode", Value("trunc")}}), {2, 3}, {3, 1},
            S::kInt64);
  ExpectOut(Call("div.Tensor_mode", {Value(&a), Value(&b)}, {{"rounding_mode", Value()}}), {2, 3}, {3, 1},
            S::kFloat32);
  ExpectOut(Call("div.Scalar_mode", {Value(&a), Value(Scalar::Int(2))}, {{"rounding_mode", Value("floor")}}), {2, 3},
            {3, 1}, S::kInt32);
  ExpectOut(Call("div.Scalar_mode", {Value(&a), Value(Scalar::Float(2.5))}, {{"rounding_mode", Value("floor")}}),
            {2, 3}, {3, 1}, S::kFloat32);
  ExpectOut(Call("floor_divide", {Value(&a), Value(&b)}), {2, 3}, {3, 1}, S::kInt64);
  ExpectOut(Call("floor_divide.Scalar", {Value(&a), Value(Scalar::Int(-3))}), {2, 3}, {3, 1}, S::kInt32);
  // A bool tensor with an int scalar is int64 (valid); bool with bool is refused.
  const TensorMeta bo = Dense({4}, S::kBool);
  ExpectOut(Call("div.Scalar_mode", {Value(&bo), Value(Scalar::Int(2))}, {{"rounding_mode", Value("trunc")}}), {4},
            {1}, S::kInt64);
  ExpectError(Call("div.Tensor_mode", {Value(&bo), Value(&bo)}, {{"rounding_mode", Value("floor")}}),
              ErrorKind::kRuntime, "\"div_floor_cpu\" not implemented for 'Bool'");
  ExpectError(Call("div.Tensor_mode", {Value(&bo), Value(&bo)}, {{"rounding_mode", Value("trunc")}}),
              ErrorKind::kRuntime, "\"div_trunc_cpu\" not implemented for 'Bool'");
  ExpectError(Call("floor_divide", {Value(&bo), Value(&bo)}), ErrorKind::kRuntime,
              "\"div_floor_cpu\" not implemented for 'Bool'");
}

TEST(PointwiseMetaTest, DivRejectsAnUnknownRoundingModeBeforeShapes) {
  const TensorMeta a = Dense({2, 3});
  const TensorMeta b = Dense({4});
  ExpectError(Call("div.Tensor_mode", {Value(&a), Value(&b)}, {{"rounding_mode", Value("round")}}),
              ErrorKind::kRuntime,
              "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found 'round'");
  ExpectError(Call("div.Tensor_mode", {Value(&a), Value(&b)}, {{"rounding_mode", Value("floor")}}),
              ErrorKind::kRuntime, "must match the size");
}

TEST(PointwiseMetaTest, BinaryLayoutsFollowTensorIterator) {
  // torch.fmod(torch.empty(4, 3).t(), torch.empty(3, 4)).stride() == (1, 3)
  const TensorMeta t = Strided({3, 4}, {1, 3});
  const TensorMeta c = Dense({3, 4});
  ExpectOut(Call("fmod.Tensor", {Value(&t), Value(&c)}), {3, 4}, {1, 3}, S::kFloat32);
  ExpectOut(Call("fmod.Tensor", {Value(&c), Value(&t)}), {3, 4}, {4, 1}, S::kFloat32);
  // Sliced with steps and an offset: the output is dense in the same order.
  const TensorMeta s = Strided({3, 3}, {16, 3}, S::kFloat32, 9);
  ExpectOut(Call("atan2", {Value(&s), Value(&s)}), {3, 3}, {3, 1}, S::kFloat32);
  // Broadcasting (3, 1) with (1, 4).
  const TensorMeta col = Dense({3, 1}, S::kInt64), row = Dense({1, 4}, S::kInt64);
  ExpectOut(Call("bitwise_left_shift.Tensor", {Value(&col), Value(&row)}), {3, 4}, {4, 1}, S::kInt64);
  // Size-0 dims.
  const TensorMeta z = Dense({0, 3});
  ExpectOut(Call("atan2", {Value(&z), Value(&z)}), {0, 3}, {3, 1}, S::kFloat32);
  ExpectError(Call("atan2", {Value(&z), Value(&c)}), ErrorKind::kRuntime, "must match the size");
}

TEST(PointwiseMetaTest, FmodAndAtan2Dtypes) {
  const TensorMeta i8 = Dense({3}, S::kInt8);
  const TensorMeta i64z = Dense({}, S::kInt64);
  ExpectOut(Call("fmod.Tensor", {Value(&i8), Value(&i64z)}), {3}, {1}, S::kInt8);  // 0-dim does not widen
  ExpectOut(Call("fmod.Scalar", {Value(&i8), Value(Scalar::Float(2.5))}), {3}, {1}, S::kFloat32);
  const TensorMeta bo = Dense({3}, S::kBool);
  ExpectOut(Call("fmod.Scalar", {Value(&bo), Value(Scalar::Int(2))}), {3}, {1}, S::kInt64);
  ExpectError(Call("fmod.Tensor", {Value(&bo), Value(&bo)}), ErrorKind::kRuntime,
              "\"fmod_cpu\" not implemented for 'Bool'");
  ExpectOut(Call("atan2", {Value(&i8), Value(&bo)}), {3}, {1}, S::kFloat32);
  const TensorMeta d0 = Dense({}, S::kFloat64);
  ExpectOut(Call("atan2", {Value(&i8), Value(&d0)}), {3}, {1}, S::kFloat64);  // int with 0-dim float64
}

TEST(PointwiseMetaTest, ShiftsAreIntegerOnly) {
  const TensorMeta i8 = Dense({2, 3}, S::kInt8);
  ExpectOut(Call("bitwise_left_shift.Tensor_Scalar", {Value(&i8), Value(Scalar::Int(3))}), {2, 3}, {3, 1}, S::kInt8);
  const TensorMeta i64z = Dense({}, S::kInt64);
  ExpectOut(Call("bitwise_right_shift.Tensor", {Value(&i8), Value(&i64z)}), {2, 3}, {3, 1}, S::kInt8);
  const TensorMeta f = Dense({3});
  ExpectError(Call("bitwise_left_shift.Tensor", {Value(&f), Value(&f)}), ErrorKind::kRuntime,
              "\"lshift_cpu\" not implemented for 'Float'");
  ExpectError(Call("bitwise_right_shift.Tensor_Scalar", {Value(&i8), Value(Scalar::Float(1.5))}), ErrorKind::kRuntime,
              "\"rshift_cpu\" not implemented for 'Float'");
  const TensorMeta bo = Dense({3}, S::kBool);
  ExpectError(Call("bitwise_left_shift.Tensor", {Value(&bo), Value(&bo)}), ErrorKind::kRuntime,
              "\"lshift_cpu\" not implemented for 'Bool'");
}

// ---- lerp ---------------------------------------------------------------------------

TEST(PointwiseMetaTest, LerpNeedsOneDtype) {
  const TensorMeta f = Dense({3});
  const TensorMeta d = Dense({3}, S::kFloat64);
  ExpectError(Call("lerp.Scalar", {Value(&f), Value(&d), Value(Scalar::Float(0.5))}), ErrorKind::kRuntime,
              "expected dtype float for `end` but got dtype double");
  ExpectError(Call("lerp.Tensor", {Value(&f), Value(&f), Value(&d)}), ErrorKind::kRuntime,
              "expected dtype float for `weight` but got dtype double");
  const TensorMeta h = Dense({3}, S::kFloat16);
  ExpectError(Call("lerp.Tensor", {Value(&h), Value(&f), Value(&f)}), ErrorKind::kRuntime,
              "expected dtype c10::Half for `end` but got dtype float");
  const TensorMeta i = Dense({3}, S::kInt64);
  ExpectError(Call("lerp.Scalar", {Value(&i), Value(&i), Value(Scalar::Int(1))}), ErrorKind::kRuntime,
              "\"lerp_kernel_scalar\" not implemented for 'Long'");
  ExpectError(Call("lerp.Tensor", {Value(&h), Value(&h), Value(&h)}), ErrorKind::kRuntime,
              "\"lerp_kernel_tensor\" not implemented for 'Half'");
}

TEST(PointwiseMetaTest, LerpBroadcastsAllThree) {
  const TensorMeta a = Dense({2, 1, 3}), b = Dense({4, 1}), w = Dense({1, 1});
  ExpectOut(Call("lerp.Tensor", {Value(&a), Value(&b), Value(&w)}), {2, 4, 3}, {12, 3, 1}, S::kFloat32);
  const TensorMeta t = Strided({3, 4}, {1, 3});
  const TensorMeta w0 = Dense({});
  ExpectOut(Call("lerp.Tensor", {Value(&t), Value(&t), Value(&w0)}), {3, 4}, {1, 3}, S::kFloat32);
  ExpectOut(Call("lerp.Scalar", {Value(&t), Value(&t), Value(Scalar::Float(0.25))}), {3, 4}, {1, 3}, S::kFloat32);
  const TensorMeta bad = Dense({5});
  ExpectError(Call("lerp.Tensor", {Value(&a), Value(&b), Value(&bad)}), ErrorKind::kRuntime, "must match the size");
}

}  // namespace
}  // namespace tensord
