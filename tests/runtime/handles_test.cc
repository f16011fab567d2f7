// The handle table on its own: what its entries are charged, what a failed
// entry costs past the limit, and the handles the daemon names.
#include <memory>

#include "gtest/gtest.h"
#include "tensord/meta/errors.h"
#include "tensord/runtime/handles.h"

namespace tensord::runtime {
namespace {

Tensor Computed(Shape sizes) {
  Tensor t;
  t.meta.sizes = sizes;
  t.meta.strides = ContiguousStrides(sizes);
  t.ag = std::make_shared<AutogradMeta>();
  return t;
}

TEST(HandleTable, EntriesAreChargedUntilErasedOrTaken) {
  auto account = MemoryAccount::Create(int64_t{1} << 20);
  HandleTable table(account);
  const Tensor a = Computed({2, 3});
  const Tensor b = Computed({1, 2, 3, 4, 5, 6, 7, 8, 9});  // dims past the inline ones cost more
  const int64_t bytes = HandleTable::EntryBytes(a.meta) + HandleTable::EntryBytes(b.meta);
  EXPECT_GT(HandleTable::EntryBytes(b.meta), HandleTable::EntryBytes(a.meta));
  ASSERT_TRUE(table.Charge(2, bytes, "add").ok());
  table.Insert(1, a);
  table.Insert(2, b);
  EXPECT_EQ(account->bookkeeping_bytes(), bytes);
  EXPECT_EQ(table.size(), 2u);
  ASSERT_NE(table.Find(2), nullptr);
  EXPECT_EQ(table.Find(2)->meta.sizes, b.meta.sizes);
  EXPECT_EQ(table.Find(3), nullptr);

  EXPECT_TRUE(table.Erase(1));
  EXPECT_FALSE(table.Erase(1));
  EXPECT_EQ(account->bookkeeping_bytes(), HandleTable::EntryBytes(b.meta));
  HandleTable::Map taken = table.TakeAll();
  EXPECT_EQ(taken.size(), 1u);
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(account->bookkeeping_bytes(), 0);
}

TEST(HandleTable, ChargeOverTheLimitNamesWhatAndHowMany) {
  auto account = MemoryAccount::Create(1000);
  HandleTable table(account);
  absl::Status s = table.Charge(3, 5000, "split");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("split (the table entries of 3 tensor handles)"), absl::string_view::npos) << s;
  EXPECT_EQ(account->bookkeeping_bytes(), 0);
}

TEST(HandleTable, FailedEntriesPastTheLimitAreBoundedAndSaySo) {
  auto account = MemoryAccount::Create(1);  // no room for any charged entry
  HandleTable table(account);
  auto error = std::make_shared<OpError>();
  error->status = RuntimeErr("matmul: size mismatch");
  for (int64_t i = 1; i <= HandleTable::kMaxUnchargedFailed; ++i) {
    ASSERT_TRUE(table.InsertFailed(static_cast<uint64_t>(i), nullptr, error).ok()) << i;
  }
  EXPECT_EQ(table.size(), static_cast<size_t>(HandleTable::kMaxUnchargedFailed));
  ASSERT_NE(table.Find(1), nullptr);
  EXPECT_TRUE(table.Find(1)->failed());
  absl::Status s = table.InsertFailed(999999, nullptr, error);
  EXPECT_NE(s.message().find("handle 999999 (an output of a failed call) is not kept"), absl::string_view::npos) << s;
  EXPECT_EQ(table.Find(999999), nullptr);
  // Freed entries make room again.
  EXPECT_TRUE(table.Erase(1));
  EXPECT_TRUE(table.InsertFailed(999999, nullptr, error).ok());
}

TEST(HandleTable, DaemonHandlesSkipTakenOnes) {
  HandleTable table(MemoryAccount::Create(int64_t{1} << 20));
  const uint64_t first = HandleTable::kDaemonHandleBit | 1;
  table.Insert(first, Computed({1}));  // a client took a daemon-style handle
  const uint64_t h = table.NewDaemonHandle([](uint64_t x) { return x == (HandleTable::kDaemonHandleBit | 2); });
  EXPECT_EQ(h, HandleTable::kDaemonHandleBit | 3);
  EXPECT_NE(table.NewDaemonHandle(nullptr), h);
}

}  // namespace
}  // namespace tensord::runtime
