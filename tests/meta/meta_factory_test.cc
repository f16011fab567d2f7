// Meta functions of the factories linspace, randint,
// randint.low and empty_strided — output metadata and PyTorch 1.13's errors
// (the expected texts are what torch 1.13 printed for the same call), and
// every dtype of the table on meta through the factories.
#include <string>
#include <utility>
#include <limits>
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
using Ints = std::vector<int64_t>;

void ExpectError(const absl::StatusOr<MetaResult>& r, absl::string_view text) {
  ASSERT_FALSE(r.ok()) << "expected: " << text;
  EXPECT_EQ(ErrorKindName(KindOf(r.status())), ErrorKindName(ErrorKind::kRuntime)) << r.status().message();
  EXPECT_TRUE(absl::StrContains(r.status().message(), text)) << r.status().message();
}

void ExpectMeta(const absl::StatusOr<MetaResult>& r, Shape sizes, Shape strides, S dtype, Device device = kCPU) {
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->outputs.size(), 1u);
  const TensorMeta& m = r->outputs[0];
  EXPECT_EQ(m.sizes, sizes);
  EXPECT_EQ(m.strides, strides);
  EXPECT_EQ(m.storage_offset, 0);
  EXPECT_EQ(m.dtype, dtype);
  EXPECT_EQ(m.device, device);
  EXPECT_EQ(r->alias_of[0], -1);
}

TEST(LinspaceMetaTest, DefaultFloatEvenForIntegerBounds) {
  // torch.linspace(0, 10, 5).dtype == torch.float32 (1.13: no inference).
  ExpectMeta(Call("linspace", {Value(Scalar::Int(0)), Value(Scalar::Int(10)), Value(int64_t{5})}), {5}, {1},
             S::kFloat32);
  ExpectMeta(Call("linspace", {Value(Scalar::Float(0)), Value(Scalar::Float(1)), Value(int64_t{0})},
                  {{"dtype", Value(S::kInt32)}}),
             {0}, {1}, S::kInt32);
  ExpectMeta(Call("linspace", {Value(Scalar::Float(0)), Value(Scalar::Float(1)), Value(int64_t{3})},
                  {{"device", Value(kMetaDevice)}}),
             {3}, {1}, S::kFloat32, kMetaDevice);
}

TEST(LinspaceMetaTest, ErrorsAsPyTorch) {
  ExpectError(Call("linspace", {Value(Scalar::Int(0)), Value(Scalar::Int(1)), Value(int64_t{-1})}),
              "linspace: number of steps must be non-negative");
  ExpectError(Call("linspace", {Value(Scalar::Int(0)), Value(Scalar::Int(300)), Value(int64_t{5})},
                   {{"dtype", Value(S::kUInt8)}}),
              "value cannot be converted to type uint8_t without overflow");
  ExpectError(Call("linspace", {Value(Scalar::Float(-1.5)), Value(Scalar::Int(3)), Value(int64_t{5})},
                   {{"dtype", Value(S::kUInt8)}}),
              "value cannot be converted to type uint8_t without overflow");
  ExpectError(Call("linspace", {Value(Scalar::Int(0)), Value(Scalar::Float(1e300)), Value(int64_t{5})}),
              "value cannot be converted to type float without overflow");
  ExpectError(Call("linspace", {Value(Scalar::Int(0)), Value(Scalar::Int(1)), Value(int64_t{2})},
                   {{"dtype", Value(S::kBool)}}),
              "not implemented for 'Bool'");
  ExpectError(Call("linspace", {Value(Scalar::Int(0)), Value(Scalar::Int(1)), Value(int64_t{2})},
                   {{"dtype", Value(S::kFloat8_e4m3fn)}}),
              "not implemented for 'Float8_e4m3fn'");
  // -1 wraps into uint8 (c10::overflows allows two's complement), and one
  // step only converts start, no steps convert nothing.
  EXPECT_TRUE(Call("linspace", {Value(Scalar::Int(-1)), Value(Scalar::Int(3)), Value(int64_t{5})},
                   {{"dtype", Value(S::kUInt8)}}).ok());
  EXPECT_TRUE(Call("linspace", {Value(Scalar::Int(0)), Value(Scalar::Int(300)), Value(int64_t{1})},
                   {{"dtype", Value(S::kUInt8)}}).ok());
  EXPECT_TRUE(Call("linspace", {Value(Scalar::Int(900)), Value(Scalar::Int(300)), Value(int64_t{0})},
                   {{"dtype", Value(S::kUInt8)}}).ok());
}

TEST(RandintMetaTest, Int64ByDefaultAnyDtype) {
  ExpectMeta(Call("randint", {Value(int64_t{5}), Value(Ints{2, 3})}), {2, 3}, {3, 1}, S::kInt64);
  ExpectMeta(Call("randint.low", {Value(int64_t{-3}), Value(int64_t{3}), Value(Ints{4, 1, 0})},
                  {{"dtype", Value(S::kFloat16)}}),
             {4, 1, 0}, {1, 1, 1}, S::kFloat16);
  ExpectMeta(Call("randint.low", {Value(int64_t{0}), Value(int64_t{2}), Value(Ints{})}, {{"dtype", Value(S::kBool)}}),
             {}, {}, S::kBool);
  ExpectMeta(Call("randint.low", {Value(std::numeric_limits<int64_t>::min()),
                                  Value(std::numeric_limits<int64_t>::max()), Value(Ints{3})}),
             {3}, {1}, S::kInt64);
}

TEST(RandintMetaTest, BoundsAsPyTorch) {
  ExpectError(Call("randint", {Value(int64_t{0}), Value(Ints{3})}),
              "expects 'from' to be less than 'to', but got from=0 >= to=0");
  ExpectError(Call("randint.low", {Value(int64_t{1}), Value(int64_t{1}), Value(Ints{0})}),
              "but got from=1 >= to=1");
  ExpectError(Call("randint", {Value(int64_t{3}), Value(Ints{-1})}),
              "Trying to create tensor with negative dimension -1: [-1]");
  ExpectError(Call("randint", {Value(int64_t{3}), Value(Ints{2})}, {{"dtype", Value(S::kBool)}}),
              "to - 1 is out of bounds for bool");
  ExpectError(Call("randint.low", {Value(int64_t{0}), Value(int64_t{300}), Value(Ints{2})}, {{"dtype", Value(S::kUInt8)}}),
              "to - 1 is out of bounds for unsigned char");
  ExpectError(Call("randint.low", {Value(int64_t{-5}), Value(int64_t{3}), Value(Ints{2})}, {{"dtype", Value(S::kUInt8)}}),
              "from is out of bounds for unsigned char");
  ExpectError(Call("randint.low", {Value(int64_t{0}), Value(int64_t{1} << 40), Value(Ints{2})},
                   {{"dtype", Value(S::kInt32)}}),
              "to - 1 is out of bounds for int");
  // update_from/update_to: 2^62 - 1 rounds up to 2^62 in float.
  ExpectError(Call("randint.low", {Value((int64_t{1} << 62) - 1), Value(int64_t{1} << 62), Value(Ints{2})},
                   {{"dtype", Value(S::kFloat32)}}),
              "but got from=4611686018427387903 >= to=4611685743549480960");
  ExpectError(Call("randint.low", {Value((int64_t{1} << 62) - 1), Value(int64_t{1} << 62), Value(Ints{2})},
                   {{"dtype", Value(S::kFloat16)}}),
              "from is out of bounds for c10::Half");
  ExpectError(Call("randint", {Value(int64_t{4}), Value(Ints{2})}, {{"dtype", Value(S::kFloat8_e5m2)}}),
              "not implemented for 'Float8_e5m2'");
  EXPECT_TRUE(Call("randint.low", {Value(int64_t{1} << 30), Value((int64_t{1} << 30) + 1), Value(Ints{2})},
                   {{"dtype", Value(S::kFloat32)}}).ok());
}

TEST(EmptyStridedMetaTest, GivesExactlyTheStrides) {
  ExpectMeta(Call("empty_strided", {Value(Ints{2, 3}), Value(Ints{1, 2})}), {2, 3}, {1, 2}, S::kFloat32);
  ExpectMeta(Call("empty_strided", {Value(Ints{2, 3}), Value(Ints{0, 0})}, {{"dtype", Value(S::kInt8)}}), {2, 3},
             {0, 0}, S::kInt8);
  ExpectMeta(Call("empty_strided", {Value(Ints{1, 3, 1}), Value(Ints{7, 1, 9})}, {{"device", Value(kMetaDevice)}}),
             {1, 3, 1}, {7, 1, 9}, S::kFloat32, kMetaDevice);
  ExpectMeta(Call("empty_strided", {Value(Ints{}), Value(Ints{})}), {}, {}, S::kFloat32);
  // The storage the daemon allocates: 1 + sum((size - 1) * stride) elements.
  absl::StatusOr<MetaResult> r = Call("empty_strided", {Value(Ints{2, 3}), Value(Ints{10, 2})},
                                      {{"dtype", Value(S::kInt32)}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r->outputs[0].StorageBytesNeeded(), (1 + 10 + 4) * 4);
  r = Call("empty_strided", {Value(Ints{2, 0}), Value(Ints{5, 7})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r->outputs[0].StorageBytesNeeded(), 0);
}

TEST(EmptyStridedMetaTest, ErrorsAsPyTorch) {
  ExpectError(Call("empty_strided", {Value(Ints{-2, 3}), Value(Ints{1, 2})}),
              "Trying to create tensor with negative dimension -2: [-2, 3]");
  ExpectError(Call("empty_strided", {Value(Ints{2, 3}), Value(Ints{1})}),
              "dimensionality of sizes (2) must match dimensionality of strides (1)");
  ExpectError(Call("empty_strided", {Value(Ints{2, 3}), Value(Ints{1, -2})}),
              "Storage size calculation overflowed with sizes=[2, 3] and strides=[1, -2]");
  ExpectError(Call("empty_strided", {Value(Ints{int64_t{1} << 40, int64_t{1} << 40}), Value(Ints{1, int64_t{1} << 40})}),
              "Storage size calculation overflowed");
  ExpectError(Call("empty_strided", {Value(Ints{2}), Value(Ints{int64_t{1} << 62})}, {{"dtype", Value(S::kFloat64)}}),
              "Storage size calculation overflowed");
  ExpectError(Call("empty_strided", {Value(Ints(65, 1)), Value(Ints(65, 1))}), "more than 64 dimensions");
}

// Every dtype of the table works on meta through the factories that accept
// it (empty, empty_strided, zeros, full, *_like) and the view ops.
TEST(AllDtypesMetaTest, FactoriesAndViewsOnEveryDtype) {
  for (int code = 0; code < kNumScalarTypes; ++code) {
    const S t = static_cast<S>(code);
    SCOPED_TRACE(DtypeName(t));
    ExpectMeta(Call("empty", {Value(Ints{2, 3})}, {{"dtype", Value(t)}, {"device", Value(kMetaDevice)}}), {2, 3}, {3, 1}, t,
               kMetaDevice);
    ExpectMeta(Call("zeros", {Value(Ints{4})}, {{"dtype", Value(t)}, {"device", Value(kMetaDevice)}}), {4}, {1}, t, kMetaDevice);
    ExpectMeta(Call("empty_strided", {Value(Ints{2, 3}), Value(Ints{1, 2})}, {{"dtype", Value(t)}, {"device", Value(kMetaDevice)}}),
               {2, 3}, {1, 2}, t, kMetaDevice);
    const TensorMeta x = TensorMeta::Contiguous({2, 3, 4}, t, kMetaDevice);
    absl::StatusOr<MetaResult> v = Call("transpose.int", {Value(&x), Value(int64_t{0}), Value(int64_t{2})});
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(v->outputs[0].strides, (Shape{1, 4, 12}));
    EXPECT_EQ(v->outputs[0].dtype, t);
    absl::StatusOr<MetaResult> like = Call("empty_like", {Value(&v->outputs[0])});
    ASSERT_TRUE(like.ok()) << like.status();
    EXPECT_EQ(like->outputs[0].strides, (Shape{1, 4, 12}));
  }
}

}  // namespace
}  // namespace tensord
