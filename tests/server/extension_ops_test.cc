// Ops defined at run time (tensord.library.define) in a daemon session: the
// client sends their definitions (DefineOps), the session checks them and
// the digest, and calls to them are checked by their shape rule; they have
// no kernel, and another session knows nothing of them.
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "raw_client.h"
#include "tensord/meta/op_registry.h"

namespace tensord::testing {
namespace {

using ::testing::HasSubstr;

// A DefineOps of `ops` from index `first`, with the digest the client
// would send (its set after these ops is `all`).
v1::Request DefineReq(uint32_t first, const std::vector<std::pair<std::string, std::string>>& ops,
                      const ExtensionOps& all) {
  v1::Request r;
  v1::DefineOps* d = r.mutable_define_ops();
  d->set_first(first);
  for (const auto& [schema, rule] : ops) {
    d->add_schemas(schema);
    d->add_shape_rules(rule);
  }
  d->set_digest(all.digest());
  return r;
}

class ExtensionOpsTest : public DaemonFixture {
 protected:
  // The client's own set, as tensord.library.define keeps it.
  const OpEntry* Define(const std::string& schema, const std::string& rule) {
    absl::StatusOr<const OpEntry*> op = client_ops_.Define(schema, rule);
    EXPECT_TRUE(op.ok()) << op.status();
    return op.ok() ? *op : nullptr;
  }
  ExtensionOps client_ops_;
};

const std::pair<std::string, std::string> kScale = {"mylib::scale(Tensor x, Scalar s) -> Tensor", "like:mul.Scalar"};
const std::pair<std::string, std::string> kBiasAdd = {
    "mylib::bias_add(Tensor x, Tensor bias, Scalar alpha=1) -> Tensor", "like:add.Tensor"};

TEST_F(ExtensionOpsTest, DefinedOpsAreCheckedByTheirShapeRuleAndHaveNoKernel) {
  RawSession s(stub_.get());
  const OpEntry* scale = Define(kScale.first, kScale.second);
  const OpEntry* bias_add = Define(kBiasAdd.first, kBiasAdd.second);
  auto bookkeeping = [&] {
    auto found = daemon_->service().FindSession(s.open_response().session_id(), s.token());
    return found.ok() ? (*found)->memory().bookkeeping_bytes() : int64_t{-1};
  };
  const int64_t before = bookkeeping();
  s.Send(DefineReq(0, {kScale, kBiasAdd}, client_ops_));
  EXPECT_TRUE(s.Sync().empty());
  // What the set keeps is the session's memory.
  EXPECT_GT(bookkeeping(), before + 2048);

  s.Upload<float>(1, {4, 3}, ScalarType::kFloat32, std::vector<float>(12, 1.0f));
  s.Upload<float>(2, {5}, ScalarType::kFloat32, std::vector<float>(5, 1.0f));
  // The borrowed rule checks the call, naming the new op.
  s.Send(Call(7, bias_add->id, {T(1), T(2), I(1)}, {3}));
  std::vector<v1::Error> errors = s.Sync();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].op(), "mylib::bias_add");
  EXPECT_THAT(errors[0].message(), HasSubstr("mylib::bias_add: The size of tensor a (3) must match the size of "
                                             "tensor b (5)"));
  // A call the rule accepts reaches the dispatcher, which has no kernel.
  s.Send(Call(8, scale->id, {T(1), F(2.0)}, {4}));
  errors = s.Sync();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].kind(), "NotImplementedError");
  EXPECT_THAT(errors[0].message(), HasSubstr("mylib::scale: no kernel for device cpu (an op defined with "
                                             "tensord.library.define has a shape rule and no kernel"));
  // Its output handle holds the error, with the meta the rule computed.
  FetchResult r = s.Fetch(4);
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.error.message(), HasSubstr("no kernel"));

  // Later definitions come from the index the session holds.
  const std::pair<std::string, std::string> kGelu = {"mylib::my_gelu(Tensor x, str approximate='none') -> Tensor",
                                                     "like:gelu"};
  Define(kGelu.first, kGelu.second);
  s.Send(DefineReq(2, {kGelu}, client_ops_));
  EXPECT_TRUE(s.Sync().empty());
  v1::Value approximate;
  approximate.set_s("none");
  s.Send(Call(9, kFirstExtensionOpId + 2, {T(1), approximate}, {5}));
  errors = s.Sync();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0].message(), HasSubstr("mylib::my_gelu: no kernel"));
}

TEST_F(ExtensionOpsTest, WrongIndexDigestOrSchemaIsTheSessionsErrorAndDefinesNothingMore) {
  RawSession s(stub_.get());
  Define(kScale.first, kScale.second);
  s.Send(DefineReq(3, {kScale}, client_ops_));
  std::vector<v1::Error> errors = s.Sync();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0].message(), HasSubstr("the client sent ops from index 3, but this session holds 0"));

  ExtensionOps other;  // a client whose set differs
  ASSERT_TRUE(other.Define(kBiasAdd.first, kBiasAdd.second).ok());
  s.Send(DefineReq(0, {kScale}, other));
  errors = s.Sync();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0].message(), HasSubstr("differ from the client's (digest"));

  s.Send(DefineReq(1, {{"mylib::bad(Tensor(a!) x) -> Tensor(a!)", "like:gelu"}}, client_ops_));
  errors = s.Sync();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0].message(), HasSubstr("has an alias annotation"));

  v1::Request mismatched = DefineReq(1, {kBiasAdd}, client_ops_);
  mismatched.mutable_define_ops()->clear_shape_rules();
  s.Send(mismatched);
  errors = s.Sync();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0].message(), HasSubstr("1 schemas but 0 shape rules"));

  // An id past the session's set is out of range, and says what the session has.
  s.Upload<float>(1, {2}, ScalarType::kFloat32, {1, 2});
  s.Send(Call(5, kFirstExtensionOpId + 1, {T(1), F(2.0)}, {2}));
  errors = s.Sync();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0].message(), HasSubstr("op id 1048577 is out of range"));
  EXPECT_THAT(errors[0].message(), HasSubstr("and this session 1 ops defined at run time (ids from 1048576)"));
}

TEST_F(ExtensionOpsTest, AnotherSessionKnowsNothingOfThem) {
  RawSession a(stub_.get());
  RawSession b(stub_.get());
  const OpEntry* scale = Define(kScale.first, kScale.second);
  a.Send(DefineReq(0, {kScale}, client_ops_));
  EXPECT_TRUE(a.Sync().empty());
  b.Upload<float>(1, {2}, ScalarType::kFloat32, {1, 2});
  b.Send(Call(5, scale->id, {T(1), F(2.0)}, {2}));
  std::vector<v1::Error> errors = b.Sync();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0].message(), HasSubstr("is out of range"));
}

}  // namespace
}  // namespace tensord::testing
