// The daemon's per-session meta cache (tensord/runtime/meta_cache.h): repeated
// calls get exactly what the meta function gives for their own arguments
// (layouts, scalar kinds, identical tensors), and errors are never cached.
#include "raw_client.h"

namespace tensord::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class MetaCacheTest : public DaemonFixture {
 protected:
  // The daemon's metadata of `h` (Describe).
  TensorMeta MetaOf(RawSession& s, uint64_t h) {
    v1::Ack ack = s.Describe({h});
    EXPECT_EQ(ack.metas_size(), 1);
    absl::StatusOr<TensorMeta> m = wire::FromProto(ack.metas(0), "test");
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *m : TensorMeta{};
  }
};

TEST_F(MetaCacheTest, RepeatedCallsFollowEachCallsLayout) {
  RawSession s(stub_.get());
  s.Upload<float>(1, {2, 3}, ScalarType::kFloat32, {1, 2, 3, 4, 5, 6});
  s.Upload<float>(2, {3, 2}, ScalarType::kFloat32, {10, 20, 30, 40, 50, 60});
  s.Send({Call(1, "t", {T(2)}, {3})});  // [2, 3] with strides [1, 2]
  // Same op and dtypes, three layouts, each one twice (the second is a hit).
  s.Send({Call(2, "add.Tensor", {T(1), T(1), I(1)}, {10}), Call(3, "add.Tensor", {T(1), T(1), I(1)}, {11}),
          Call(4, "add.Tensor", {T(3), T(3), I(1)}, {12}), Call(5, "add.Tensor", {T(3), T(3), I(1)}, {13}),
          Call(6, "add.Tensor", {T(1), T(3), I(1)}, {14}), Call(7, "add.Tensor", {T(1), T(3), I(1)}, {15})});
  ASSERT_TRUE(s.Sync().empty());
  for (uint64_t h : {10, 11, 14, 15}) {
    EXPECT_EQ(MetaOf(s, h), TensorMeta::Contiguous({2, 3}, ScalarType::kFloat32, kCPU)) << h;
  }
  for (uint64_t h : {12, 13}) {
    const TensorMeta m = MetaOf(s, h);
    EXPECT_EQ(m.sizes, (Shape{2, 3})) << h;
    EXPECT_EQ(m.strides, (Shape{1, 2})) << h;  // elementwise keeps the transposed layout
  }
  EXPECT_THAT(s.FetchValues<float>(11), ElementsAre(2, 4, 6, 8, 10, 12));
  EXPECT_THAT(s.FetchValues<float>(15), ElementsAre(11, 32, 53, 24, 45, 66));
}

TEST_F(MetaCacheTest, ScalarKindsAndArgumentValuesAreToldApart) {
  RawSession s(stub_.get());
  s.Upload<int64_t>(1, {3}, ScalarType::kInt64, {1, 2, 3});
  const v1::Value two_int = I(2), two_float = F(2.5);
  // int64 * int stays int64; int64 * float becomes float32: alternated, so a
  // key that ignored the scalar's kind would answer one with the other.
  s.Send({Call(1, "mul.Scalar", {T(1), two_int}, {10}), Call(2, "mul.Scalar", {T(1), two_float}, {11}),
          Call(3, "mul.Scalar", {T(1), two_int}, {12}), Call(4, "mul.Scalar", {T(1), two_float}, {13})});
  ASSERT_TRUE(s.Sync().empty());
  EXPECT_EQ(MetaOf(s, 10).dtype, ScalarType::kInt64);
  EXPECT_EQ(MetaOf(s, 12).dtype, ScalarType::kInt64);
  EXPECT_EQ(MetaOf(s, 11).dtype, ScalarType::kFloat32);
  EXPECT_EQ(MetaOf(s, 13).dtype, ScalarType::kFloat32);
  EXPECT_THAT(s.FetchValues<int64_t>(12), ElementsAre(2, 4, 6));
  EXPECT_THAT(s.FetchValues<float>(13), ElementsAre(2.5, 5, 7.5));
  // Int-list arguments are part of the key too.
  s.Send({Call(5, "sum", {T(10), IL({0}), B(false), None()}, {20}),
          Call(6, "sum", {T(10), IL({0}), B(true), None()}, {21})});
  ASSERT_TRUE(s.Sync().empty());
  EXPECT_EQ(MetaOf(s, 20).sizes, Shape{});
  EXPECT_EQ(MetaOf(s, 21).sizes, Shape{1});
}

TEST_F(MetaCacheTest, ErrorsAreNeverCached) {
  RawSession s(stub_.get());
  s.Upload<float>(1, {2, 3}, ScalarType::kFloat32, {1, 2, 3, 4, 5, 6});
  s.Upload<float>(2, {4}, ScalarType::kFloat32, {1, 2, 3, 4});
  s.Upload<float>(3, {3}, ScalarType::kFloat32, {1, 1, 1});
  s.Send({Call(1, "add.Tensor", {T(1), T(2), I(1)}, {10}), Call(2, "add.Tensor", {T(1), T(3), I(1)}, {11}),
          Call(3, "add.Tensor", {T(1), T(2), I(1)}, {12}), Call(4, "add.Tensor", {T(1), T(3), I(1)}, {13})});
  std::vector<v1::Error> errors = s.Sync();
  ASSERT_EQ(errors.size(), 2u);
  for (const v1::Error& e : errors) {
    EXPECT_THAT(e.message(), HasSubstr("size of tensor a (3) must match the size of tensor b (4)"));
  }
  EXPECT_EQ(errors[0].call_id(), 1u);
  EXPECT_EQ(errors[1].call_id(), 3u);
  EXPECT_THAT(s.FetchValues<float>(13), ElementsAre(2, 3, 4, 5, 6, 7));
}

}  // namespace
}  // namespace tensord::testing
