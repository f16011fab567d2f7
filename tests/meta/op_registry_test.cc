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
  refused("__lib::g(Tensor x) -> Tensor", "like:neg", "names starting with '__' are Python's");
  refused("mylib::__g(Tensor x) -> Tensor", "like:neg", "names starting with '__' are Python's");
  refused("mylib::g.default(Tensor x) -> Tensor", "like:neg", "the overload 'default' names the op");
  refused("mylib::g.(Tensor x) -> Tensor", "like:neg", "an empty overload name");
  refused("mylib::g(Tensor x, Tensor x) -> Tensor", "like:add.Tensor", "two arguments are named 'x'");
  refused("mylib::g(Tensor x-y) -> Tensor", "like:neg", "argument name 'x-y' is not an identifier");
  refused(absl::StrCat("mylib::g(Tensor x, *, str approximate='", std::string(20000, 'a'), "') -> Tensor"),
          "like:gelu", "a schema of 20");
  ASSERT_TRUE(ext.Define("mylib::g(Tensor x, str approximate='none') -> Tensor", "like:gelu").ok());
  refused("mylib::g(Tensor self, str approximate='tanh') -> Tensor", "like:gelu", "already defined");
  EXPECT_EQ(ext.size(), 1u);
}

TEST(ExtensionOps, TheRuleRunsUnderItsOwnNameAndErrorsNameTheNewOp) {
  ExtensionOps ext;
  // mean's meta function refuses integer inputs under its own name: the
  // rule behaves as mean does, whatever the new op is called.
  absl::StatusOr<const OpEntry*> op = ext.Define(
      "stats::avg(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
      "like:mean");
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ((*op)->shape_rule_of, OpTable::Get().Find("mean"));
  const TensorMeta ints = Dense({3, 4}, ScalarType::kInt64);
  const TensorMeta floats = Dense({3, 4});
  absl::StatusOr<MetaResult> r = OpTable::Get().RunMeta(**op, {Value(&ints), Value(), Value(false), Value()});
  ExpectErrorContains(r.status(), ErrorKind::kRuntime, "stats::avg: ");
  EXPECT_TRUE(absl::StrContains(r.status().message(), "could not infer output dtype")) << r.status();
  r = OpTable::Get().RunMeta(**op, {Value(&floats), Value(Shape{1}), Value(true), Value()});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].sizes, (Shape{3, 1}));
  // full_like's meta function knows its fill_value by its name: the new op
  // works as full_like does.
  absl::StatusOr<const OpEntry*> full = ext.Define(
      "stats::fill(Tensor self, Scalar fill_value, *, ScalarType? dtype=None, Device? device=None) -> Tensor",
      "like:full_like");
  ASSERT_TRUE(full.ok()) << full.status();
  r = OpTable::Get().RunMeta(**full, {Value(&floats), Value(Scalar::Int(1)), Value(), Value()});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].sizes, (Shape{3, 4}));
  // A factory's rule makes a factory (it follows tensord.device).
  absl::StatusOr<const OpEntry*> z =
      ext.Define("stats::z(int[] size, *, ScalarType? dtype=None, Device? device=None) -> Tensor", "like:zeros");
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_TRUE((*z)->has(kFactory));
  EXPECT_FALSE((**op).has(kFactory));
}

TEST(ExtensionOps, StringDefaultsWithAQuoteTravelIntact) {
  ExtensionOps ext;
  absl::StatusOr<const OpEntry*> op = ext.Define("q::op(Tensor self, *, str approximate='x\",y') -> Tensor", "like:gelu");
  ASSERT_TRUE(op.ok()) << op.status();
  ExtensionOps daemon;  // what a session makes of the canonical text it is sent
  for (const ExtensionOpDef& d : ext.Defs(0)) ASSERT_TRUE(daemon.Define(d.schema, d.shape_rule).ok()) << d.schema;
  EXPECT_EQ(daemon.digest(), ext.digest());
  EXPECT_EQ(daemon.Find("q::op")->schema.arguments[1].default_value->str(), "x\",y");
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
