// Ops that return a list of views (split, chunk, unbind) straight at the
// gRPC service: the daemon runs the meta function to learn how many views
// there are, and refuses a call that names a different number of output
// handles (a client whose meta disagrees, or a hostile one) with a clear
// error instead of dropping or inventing handles.
#include "raw_client.h"

namespace tensord::testing {
namespace {

using ::testing::ElementsAre;

class ShapeListTest : public DaemonFixture {};

TEST_F(ShapeListTest, OneHandlePerView) {
  RawSession s(stub_.get());
  s.Upload<float>(1, {5}, ScalarType::kFloat32, {1, 2, 3, 4, 5});
  s.Send(Call(1, "split.Tensor", {T(1), I(2), I(0)}, {2, 3, 4}));
  ASSERT_TRUE(s.Sync().empty());
  EXPECT_THAT(s.FetchValues<float>(2), ElementsAre(1, 2));
  EXPECT_THAT(s.FetchValues<float>(3), ElementsAre(3, 4));
  EXPECT_THAT(s.FetchValues<float>(4), ElementsAre(5));
  s.Send(Call(2, "unbind.int", {T(1), I(0)}, {5, 6, 7, 8, 9}));
  ASSERT_TRUE(s.Sync().empty());
  EXPECT_THAT(s.FetchValues<float>(9), ElementsAre(5));
}

TEST_F(ShapeListTest, WrongHandleCountsAreRefused) {
  RawSession s(stub_.get());
  s.Upload<float>(1, {4}, ScalarType::kFloat32, {1, 2, 3, 4});
  s.Send(Call(1, "chunk", {T(1), I(2), I(0)}, {2}));
  ExpectOneError(s.Sync(), "chunk: returns 2 tensors, but the call names 1 output handles");
  EXPECT_FALSE(s.Fetch(2).ok);
  s.Send(Call(2, "split.Tensor", {T(1), I(3), I(0)}, {3, 4, 5}));
  ExpectOneError(s.Sync(), "split.Tensor: returns 2 tensors, but the call names 3 output handles");
  EXPECT_FALSE(s.Fetch(5).ok);
  // A hostile split size: refused by the meta function before anything is allocated.
  s.Send(Call(3, "split.Tensor", {T(1), I(0), I(0)}, {6}));
  ExpectOneError(s.Sync(), "split_size can only be 0 if dimension size is 0");
}

}  // namespace
}  // namespace tensord::testing
