// Size arithmetic a client can make wrap, spoken to raw. A view may count
// far more elements than its storage holds bytes (expand of one element to
// [2**31, 2**31] is 2**62 elements over 4 bytes), so numel * itemsize and
// scratch sizes taken from such a view can overflow int64 even though the
// view itself is valid. Each request is refused with an error naming the
// numbers, the daemon keeps serving, and another session is unharmed.
// (The fetch into a shared-memory segment is in shm_test.cc, next to its
// side-channel helpers.)
#include <cstdint>
#include <string>
#include <vector>

#include "raw_client.h"

namespace tensord::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class OverflowTest : public DaemonFixture {
 protected:
  // Another session's upload and fetch still round-trip.
  void ExpectAnotherSessionWorks() {
    RawSession other(stub_.get());
    other.Upload<float>(1, {3}, ScalarType::kFloat32, {1.5f, 2.5f, 3.5f});
    EXPECT_THAT(other.FetchValues<float>(1), ElementsAre(1.5f, 2.5f, 3.5f));
    EXPECT_TRUE(other.Sync().empty());
  }
};

constexpr int64_t k2To31 = int64_t{1} << 31;

// A Fetch streams numel * itemsize bytes: for [2**31, 2**31] float32 that is
// 2**64, which wrapped to 0 and the daemon streamed 2**62 elements (for ever,
// to this session) after announcing 0 bytes.
TEST_F(OverflowTest, FetchOfAViewWhoseBytesOverflowIsRefused) {
  RawSession s(stub_.get());
  s.Upload<float>(1, {1}, ScalarType::kFloat32, {7.0f});
  s.Send(Call(1, "expand", {T(1), IL({k2To31, k2To31}), B(false)}, {2}));
  // float64: 2**62 * 8 wraps too.
  s.Upload<double>(3, {1}, ScalarType::kFloat64, {7.0});
  s.Send(Call(2, "expand", {T(3), IL({k2To31, k2To31}), B(false)}, {4}));
  EXPECT_TRUE(s.Sync().empty());  // the views themselves are valid
  FetchResult r = s.Fetch(2);
  ASSERT_FALSE(r.ok);
  EXPECT_THAT(r.error.message(), HasSubstr("fetch: tensor of 4611686018427387904 elements x 4 bytes overflows int64"));
  r = s.Fetch(4);
  ASSERT_FALSE(r.ok);
  EXPECT_THAT(r.error.message(), HasSubstr("fetch: tensor of 4611686018427387904 elements x 8 bytes overflows int64"));
  // The session goes on: its other tensors, a sync, a new round trip.
  EXPECT_THAT(s.FetchValues<float>(1), ElementsAre(7.0f));
  EXPECT_TRUE(s.Sync().empty());
  s.Upload<float>(5, {2}, ScalarType::kFloat32, {1, 2});
  EXPECT_THAT(s.FetchValues<float>(5), ElementsAre(1, 2));
  ExpectAnotherSessionWorks();
}

// topk's scratch holds one (value, index) slot per element of the topk dim:
// 2**60 slots of 16 bytes wrapped to 0 bytes, and filling them wrote past
// the heap block.
TEST_F(OverflowTest, KernelScratchWhoseBytesOverflowIsRefused) {
  RawSession s(stub_.get());
  s.Upload<float>(1, {1}, ScalarType::kFloat32, {7.0f});
  s.Send(Call(1, "expand", {T(1), IL({int64_t{1} << 60}), B(false)}, {2}));
  s.Send(Call(2, "topk", {T(2), I(1), I(0), B(true), B(true)}, {3, 4}));
  std::vector<v1::Error> errors = s.Sync();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].op(), "topk");
  EXPECT_THAT(errors[0].message(), HasSubstr("topk: scratch of 1152921504606846976 elements x 16 bytes overflows int64"));
  FetchResult r = s.Fetch(3);
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(s.FetchValues<float>(1), ElementsAre(7.0f));
  ExpectAnotherSessionWorks();
}

}  // namespace
}  // namespace tensord::testing
