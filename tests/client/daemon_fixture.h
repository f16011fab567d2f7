// What the client's tests that talk to a daemon share: ASSERT_OK_AND_ASSIGN,
// and DaemonTest, a fixture with a daemon spawned from $TENSORD_BIN once per
// test suite and a session of it per test, current on the test's thread.
// Without $TENSORD_BIN (ctest sets it) the suite's tests skip, saying why.
//
//   class WithDaemon : public DaemonTest {};              // the cpu only
//   class WithTestDevice : public DaemonTest {            // also privateuseone:0
//    protected:
//     static void SetUpTestSuite() { SpawnDaemon(/*test_device=*/true); }
//   };
#ifndef TENSORD_TESTS_CLIENT_DAEMON_FIXTURE_H_
#define TENSORD_TESTS_CLIENT_DAEMON_FIXTURE_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "tensord/client/client.h"
#include "tensord/meta/errors.h"

// Assigns the value of the StatusOr `expr` to `lhs`, or fails the test with its status.
#define ASSERT_OK_AND_ASSIGN(lhs, expr)                                                   \
  auto TD_CONCAT_(res_, __LINE__) = (expr);                                               \
  ASSERT_TRUE(TD_CONCAT_(res_, __LINE__).ok()) << TD_CONCAT_(res_, __LINE__).status(); \
  lhs = std::move(TD_CONCAT_(res_, __LINE__)).value()

namespace tensord::client::testing {

class DaemonTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { SpawnDaemon(/*test_device=*/false); }
  static void TearDownTestSuite() {
    if (daemon_ != nullptr) {
      (*daemon_)->Close().IgnoreError();
      delete daemon_;
      daemon_ = nullptr;
    }
    delete spawn_error_;
    spawn_error_ = nullptr;
  }
  // Spawns the suite's daemon; with `test_device` it serves privateuseone:0 too.
  static void SpawnDaemon(bool test_device) {
    const char* bin = std::getenv("TENSORD_BIN");
    if (bin == nullptr || ::access(bin, X_OK) != 0) return;
    SessionOptions o;
    o.daemon_binary = bin;
    if (test_device) ::setenv("TENSORD_TEST_DEVICE", "1", 1);
    absl::StatusOr<std::shared_ptr<Session>> s = Session::SpawnEmbedded(o);
    if (test_device) ::unsetenv("TENSORD_TEST_DEVICE");
    if (!s.ok()) {
      spawn_error_ = new std::string(s.status().ToString());
      return;
    }
    daemon_ = new std::shared_ptr<Session>(*s);
  }

  void SetUp() override {
    if (daemon_ == nullptr) {
      if (spawn_error_ != nullptr) FAIL() << "cannot spawn the daemon: " << *spawn_error_;
      GTEST_SKIP() << "TENSORD_BIN is not set to the tensord binary (ctest sets it)";
    }
    session_ = Open();
    ASSERT_NE(session_, nullptr);
    guard_ = std::make_unique<SessionGuard>(session_);
  }
  void TearDown() override {
    guard_.reset();
    if (session_) session_->Close().IgnoreError();
  }
  // Another session of the suite's daemon (nullptr, with a test failure, when it cannot open).
  static std::shared_ptr<Session> Open(const SessionOptions& options = {}) {
    absl::StatusOr<std::shared_ptr<Session>> s = Session::Connect((*daemon_)->address(), options);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : nullptr;
  }

  static inline std::shared_ptr<Session>* daemon_ = nullptr;
  static inline std::string* spawn_error_ = nullptr;
  std::shared_ptr<Session> session_;
  std::unique_ptr<SessionGuard> guard_;
};

}  // namespace tensord::client::testing

#endif  // TENSORD_TESTS_CLIENT_DAEMON_FIXTURE_H_
