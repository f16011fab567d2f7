// Extension sets: what Define accepts and refuses, ids past the built-in
// table, the borrowed shape rule (its errors naming the new op), the digest.
#include "tensord/meta/op_registry.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "meta_test_util.h"
#include "tensord/meta/autograd_rules.h"

namespace tensord {
namespace {

using meta_test::Dense;
using meta_test::ExpectErrorContains;

TEST(ExtensionOps, DefinedOpsGetIdsPastTheBuiltinsAndABorrowedShapeRule) {
  ExtensionOps ext;
  absl::StatusOr<const OpEntry*> op =
      ext.Define("mylib::scaled_gelu(Tensor x, Scalar scale=1) -> Tensor", "like:mul.Scalar");
  ASSERT_TRUE(op.ok()) << op.status();
  const OpEntry& e = **op;
  EXPECT_EQ(e.id, kFirstExtensionOpId);
  EXPECT_GT(kFirstExtensionOpId, OpTable::Get().size());
  EXPECT_EQ(e.full_name(), "mylib::scaled_gelu");
  EXPECT_EQ(ext.Find("mylib::scaled_gelu"), &e);
  EXPECT_EQ(ext.at_id(e.id), &e);
  EXPECT_EQ(ext.at_id(e.id + 1), nullptr);
  EXPECT_EQ(ext.at_id(0), nullptr);
  EXPECT_EQ(OpTable::Get().Find("mylib::scaled_gelu"), nullptr);

  absl::StatusOr<const OpEntry*> second = ext.Define("mylib::bias_act(Tensor x, Tensor bias) -> Tensor", "like:add");
  ASSERT_FALSE(second.ok());  // add has overloads: the rule must name one
  ExpectErrorContains(second.status(), ErrorKind::kRuntime, "'add' has");
  second = ext.Define("mylib::bias_act(Tensor x, Tensor bias, Scalar alpha=1) -> Tensor", "like:add.Tensor");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*second)->id, kFirstExtensionOpId + 1);
  EXPECT_EQ(ext.size(), 2u);

  // The borrowed meta function computes the output and names the new op.
  const TensorMeta x = Dense({4, 3});
  const TensorMeta bad_bias = Dense({5});
  absl::StatusOr<MetaResult> r =
      OpTable::Get().RunMeta(**second, {Value(&x), Value(&x), Value(Scalar::Int(1))});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].sizes, (Shape{4, 3}));
  EXPECT_EQ(r->alias_of, std::vector<int>{-1});
  r = OpTable::Get().RunMeta(**second, {Value(&x), Value(&bad_bias), Value(Scalar::Int(1))});
  ExpectErrorContains(r.status(), ErrorKind::kRuntime, "mylib::bias_act: The size of tensor a (3) must match");

  // Per-op tables of the built-in set know nothing of it, and say so safely.
  EXPECT_EQ(DifferentiableArgs(e).size(), e.schema.arguments.size());
  EXPECT_EQ(GradFnName(e), "ScaledGeluBackward0");
}

TEST(ExtensionOps, RefusesWhatCannotBeAnExtensionOp) {
  ExtensionOps ext;
  auto refused = [&](absl::string_view schema, absl::string_view rule, absl::string_view why) {
    absl::StatusOr<const OpEntry*> op = ext.Define(schema, rule);
    ASSERT_FALSE(op.ok()) << schema;
    ExpectErrorContains(op.status(), ErrorKind::kRuntime, why);
  };
  refused("gelu2(Tensor x) -> Tensor", "like:gelu", "needs a namespace of its own, as in 'mylib::gelu2'");
  refused("aten::gelu(Tensor x) -> Tensor", "like:gelu", "the namespace 'aten' is tensord's own");
  refused("my-lib::g(Tensor x) -> Tensor", "like:gelu", "must be identifiers");
  refused("mylib::g(Tensor(a) x) -> Tensor(a)", "like:gelu", "has an alias annotation");
  refused("mylib::g(Tensor(a!) x) -> Tensor(a!)", "like:gelu", "has an alias annotation");
  refused("mylib::g(Tensor x) -> Tensor[]", "like:gelu", "every return must be a new Tensor");
  refused("mylib::g(Tensor x) -> int", "like:gelu", "returns must be Tensor");
  refused("mylib::g(Tensor x) -> Tensor", "elementwise", "unknown shape rule 'elementwise'");
  refused("mylib::g(Tensor x) -> Tensor", "like:no_such_op", "which is no built-in op");
  refused("mylib::g(Tensor x) -> Tensor", "like:nonzero", "has none (its output shape depends on values)");
  refused("mylib::g(Tensor x, int dim) -> Tensor", "like:squeeze.dim", "returns a view or writes in place");
  refused("mylib::g(Tensor x, Tensor y) -> Tensor", "like:gelu", "must have the types of the rule's op");
  refused("mylib::g(Tensor x, int y) -> Tensor", "like:mul.Scalar", "must have the types of the rule's op");
  refused("mylib::g(Tensor x -> Tensor", "like:gelu", "library.define");
  ASSERT_TRUE(ext.Define("mylib::g(Tensor x, str approximate='none') -> Tensor", "like:gelu").ok());
  refused("mylib::g(Tensor self, str approximate='tanh') -> Tensor", "like:gelu", "already defined");
  EXPECT_EQ(ext.size(), 1u);
}

TEST(ExtensionOps, EqualDefinitionsInOrderGiveEqualDigests) {
  ExtensionOps a, b, c;
  for (ExtensionOps* s : {&a, &b}) {
    ASSERT_TRUE(s->Define("mylib::f(Tensor x, str approximate='none') -> Tensor", "like:gelu").ok());
    ASSERT_TRUE(s->Define("mylib::h(Tensor x, Scalar other) -> Tensor", "like:mul.Scalar").ok());
  }
  ASSERT_TRUE(c.Define("mylib::h(Tensor x, Scalar other) -> Tensor", "like:mul.Scalar").ok());
  ASSERT_TRUE(c.Define("mylib::f(Tensor x, str approximate='none') -> Tensor", "like:gelu").ok());
  EXPECT_EQ(a.digest(), b.digest());
  EXPECT_NE(a.digest(), c.digest());
  // What a session is sent: the definitions it lacks, in order, canonical.
  std::vector<ExtensionOpDef> defs = a.Defs(1);
  ASSERT_EQ(defs.size(), 1u);
  EXPECT_EQ(defs[0].schema, "mylib::h(Tensor x, Scalar other) -> Tensor");
  EXPECT_EQ(defs[0].shape_rule, "like:mul.Scalar");
  EXPECT_TRUE(a.Defs(2).empty());
  ExtensionOps replayed;
  for (const ExtensionOpDef& d : a.Defs(0)) ASSERT_TRUE(replayed.Define(d.schema, d.shape_rule).ok());
  EXPECT_EQ(replayed.digest(), a.digest());
}

TEST(ExtensionOps, LookupsWhileAnotherThreadDefines) {
  ExtensionOps ext;
  ASSERT_TRUE(ext.Define("mylib::first(Tensor x, str approximate='none') -> Tensor", "like:gelu").ok());
  const OpEntry* first = ext.Find("mylib::first");
  std::thread definer([&] {
    for (int i = 0; i < 200; ++i) {
      ASSERT_TRUE(ext.Define(absl::StrCat("mylib::op", i, "(Tensor x, str approximate='none') -> Tensor"),
                             "like:gelu").ok());
    }
  });
  for (int i = 0; i < 2000; ++i) {
    ASSERT_EQ(ext.Find("mylib::first"), first);  // entries never move
    ASSERT_EQ(ext.at_id(kFirstExtensionOpId), first);
  }
  definer.join();
  EXPECT_EQ(ext.size(), 201u);
  EXPECT_EQ(ext.Overloads("mylib::op7").size(), 1u);
}

}  // namespace
}  // namespace tensord
