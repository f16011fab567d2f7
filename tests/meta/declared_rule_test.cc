// Declarative shape rules: what they compute (sizes, dtypes, layouts,
// devices), the errors of their checks and of evaluation (naming the op and
// the line), and what Compile refuses.
#include "tensord/meta/declared_rule.h"

#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "meta_test_util.h"
#include "tensord/meta/op_registry.h"
#include "tensord/meta/op_table.h"

namespace tensord {
namespace {

using meta_test::Dense;
using meta_test::ExpectErrorContains;
using meta_test::Strided;

// Compiles `rule` for `schema` ("(Tensor x, ...) -> Tensor") and runs it.
absl::StatusOr<MetaResult> RunRule(absl::string_view schema, absl::string_view rule, std::vector<Value> args) {
  absl::StatusOr<FunctionSchema> s = ParseSchema(absl::StrCat("mylib::f", schema));
  if (!s.ok()) return s.status();
  absl::StatusOr<std::shared_ptr<const DeclaredShapeRule>> r = DeclaredShapeRule::Compile(*s, rule);
  if (!r.ok()) return r.status();
  return (*r)->Run("mylib::f", args);
}

absl::Status CompileError(absl::string_view schema, absl::string_view rule) {
  absl::StatusOr<FunctionSchema> s = ParseSchema(absl::StrCat("mylib::f", schema));
  if (!s.ok()) return s.status();
  return DeclaredShapeRule::Compile(*s, rule).status();
}

constexpr absl::string_view kBiasGelu =
    "check bias.dim() == 1 and bias.size(0) == x.size(-1), \"bias must be [{x.size(-1)}], got {bias.shape}\"\n"
    "return empty(broadcast(x, bias), dtype=promote(x, bias), layout=like(x))\n";

TEST(DeclaredShapeRule, BroadcastPromoteAndTheInputsLayout) {
  const TensorMeta x = Strided({4, 3}, {1, 4}), bias = Dense({3}, ScalarType::kFloat64);
  absl::StatusOr<MetaResult> r = RunRule("(Tensor x, Tensor bias) -> Tensor", kBiasGelu, {Value(&x), Value(&bias)});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(r->outputs[0].sizes, (Shape{4, 3}));
  EXPECT_EQ(r->outputs[0].strides, (Shape{1, 4}));  // like(x): x's memory format
  EXPECT_EQ(r->outputs[0].dtype, ScalarType::kFloat64);
  EXPECT_EQ(r->alias_of, std::vector<int>{-1});

  const TensorMeta bad = Dense({5});
  r = RunRule("(Tensor x, Tensor bias) -> Tensor", kBiasGelu, {Value(&x), Value(&bad)});
  ExpectErrorContains(r, ErrorKind::kRuntime, "mylib::f: bias must be [3], got [5]");
}

TEST(DeclaredShapeRule, ArithmeticShapesReductionsAndMatmul) {
  const TensorMeta x = Dense({2, 3, 8}), w = Dense({8, 5});
  // A linear layer's output through [*s, n], slicing and locals.
  absl::StatusOr<MetaResult> r = RunRule("(Tensor x, Tensor w, int groups=2) -> Tensor",
                                         "n = w.size(1) * groups  # a local\n"
                                         "check x.size(-1) % groups == 0, \"{x.size(-1)} is not a multiple of {groups}\"\n"
                                         "return empty([*x.shape[:-1], n // 2 + 1, len(x.shape)])",
                                         {Value(&x), Value(&w), Value(int64_t{2})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].sizes, (Shape{2, 3, 6, 3}));
  EXPECT_EQ(r->outputs[0].strides, (Shape{54, 18, 3, 1}));

  r = RunRule("(Tensor a, Tensor b) -> Tensor", "return empty(matmul(a, b), dtype=float16)", {Value(&x), Value(&w)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].sizes, (Shape{2, 3, 5}));
  EXPECT_EQ(r->outputs[0].dtype, ScalarType::kFloat16);
  const TensorMeta bad_w = Dense({7, 5});
  r = RunRule("(Tensor a, Tensor b) -> Tensor", "return empty(matmul(a, b))", {Value(&x), Value(&bad_w)});
  ExpectErrorContains(r, ErrorKind::kRuntime, "mylib::f");
  ExpectErrorContains(r, ErrorKind::kRuntime, "size mismatch, self is [2, 3, 8], other is [7, 5] (8 != 7)");

  // Two outputs: a reduction over dims, keepdim and a dtype argument.
  r = RunRule("(Tensor x, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> (Tensor, Tensor)",
              "d = dtype if dtype is not None else x.dtype\n"
              "return empty(reduce(x, dim, keepdim), dtype=d), empty(reduce(x.shape, dim, keepdim=True), dtype=int64)",
              {Value(&x), Value(Shape{-1, 0}), Value(false), Value(ScalarType::kBFloat16)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].sizes, (Shape{3}));
  EXPECT_EQ(r->outputs[0].dtype, ScalarType::kBFloat16);
  EXPECT_EQ(r->outputs[1].sizes, (Shape{1, 3, 1}));
  EXPECT_EQ(r->outputs[1].dtype, ScalarType::kInt64);
  r = RunRule("(Tensor x, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> (Tensor, Tensor)",
              "d = dtype if dtype is not None else x.dtype\n"
              "return empty(reduce(x, dim, keepdim), dtype=d), empty([])",
              {Value(&x), Value(), Value(false), Value()});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].sizes, (Shape{}));
  EXPECT_EQ(r->outputs[0].dtype, ScalarType::kFloat32);
  r = RunRule("(Tensor x, int[1]? dim=None) -> Tensor", "return empty(reduce(x, dim))",
              {Value(&x), Value(Shape{1, 1})});
  ExpectErrorContains(r, ErrorKind::kRuntime, "dim 1 appears multiple times");

  // Python's floor division and modulo, min/max/prod, comparisons of shapes.
  const TensorMeta v = Dense({7});
  r = RunRule("(Tensor x) -> Tensor",
              "check -7 // 2 == -4 and -7 % 2 == 1 and 7 % -2 == -1, \"floor\"\n"
              "check x.shape == [7] and x.shape != [6] and not (x.ndim > 1), \"shapes\"\n"
              "check x.dtype == float32 and is_floating_point(x) and x.numel() == 7, \"dtype\"\n"
              "return empty([min(3, x.size(0)), max(x.shape), prod([2, 3])])",
              {Value(&v)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].sizes, (Shape{3, 7, 6}));
}

TEST(DeclaredShapeRule, LayoutsDtypesAndDevices) {
  const TensorMeta a = Strided({2, 3}, {1, 2}), b = Strided({2, 3}, {1, 2}), row = Dense({3});
  absl::StatusOr<MetaResult> r =
      RunRule("(Tensor a, Tensor b) -> Tensor", "return empty(a.shape, layout=elementwise)", {Value(&a), Value(&b)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].strides, (Shape{1, 2}));
  r = RunRule("(Tensor a, Tensor b) -> Tensor", "return empty(a.shape, layout=contiguous)", {Value(&a), Value(&b)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].strides, (Shape{3, 1}));
  // like(t) of another shape: contiguous.
  r = RunRule("(Tensor a, Tensor b) -> Tensor", "return empty([3, 2], layout=like(a))", {Value(&a), Value(&b)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].strides, (Shape{2, 1}));

  // int8 tensor + a float Scalar: float32 (a Python scalar raises the category only).
  const TensorMeta i8 = Dense({3}, ScalarType::kInt8);
  r = RunRule("(Tensor x, Scalar s) -> Tensor", "return empty(x.shape, dtype=promote(x, s))",
              {Value(&i8), Value(Scalar::Float(2.5))});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].dtype, ScalarType::kFloat32);

  // Outputs follow the tensors' device; two devices are PyTorch's error; a 0-dim cpu tensor joins.
  const Device cuda{DeviceType::kCUDA, 0};
  const TensorMeta on_cuda = Dense({3}, ScalarType::kFloat32, cuda), scalar = Dense({});
  r = RunRule("(Tensor a, Tensor b) -> Tensor", "return empty(broadcast(a, b))", {Value(&on_cuda), Value(&scalar)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].device, cuda);
  r = RunRule("(Tensor a, Tensor b) -> Tensor", "return empty(broadcast(a, b))", {Value(&on_cuda), Value(&row)});
  ExpectErrorContains(r, ErrorKind::kRuntime, "mylib::f: Expected all tensors to be on the same device");
  // Absent optional tensors take no part.
  r = RunRule("(Tensor x, Tensor? bias=None) -> Tensor", "return empty(x.shape, dtype=promote(x, bias))",
              {Value(&i8), Value()});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].dtype, ScalarType::kInt8);
}

TEST(DeclaredShapeRule, EvaluationErrorsNameTheOpAndTheLine) {
  const TensorMeta x = Dense({2, 3});
  auto run = [&](absl::string_view rule, std::vector<Value> extra = {}) {
    std::vector<Value> args = {Value(&x)};
    for (Value& v : extra) args.push_back(std::move(v));
    return RunRule(extra.empty() ? "(Tensor x) -> Tensor" : "(Tensor x, int n) -> Tensor", rule, args);
  };
  ExpectErrorContains(run("return empty([x.size(5)])"), ErrorKind::kIndex,
                      "Dimension out of range (expected to be in range of [-2, 1], but got 5)");
  ExpectErrorContains(run("return empty([x.shape[2]])"), ErrorKind::kIndex,
                      "mylib::f: shape rule line 1: index 2 is out of range for [2, 3]");
  ExpectErrorContains(run("\nreturn empty([x.size(0) // (n - 3)])", {Value(int64_t{3})}), ErrorKind::kRuntime,
                      "mylib::f: shape rule line 2: integer division or modulo by zero (2 // 0)");
  ExpectErrorContains(run("return empty([n - 5])", {Value(int64_t{3})}), ErrorKind::kRuntime,
                      "empty(): a negative size in [-2]");
  ExpectErrorContains(run("return empty([x.size(True)])"), ErrorKind::kRuntime, "size()'s dim is a bool, not an int");
  ExpectErrorContains(run("return empty(x.dtype)"), ErrorKind::kRuntime, "empty()'s shape is a dtype");
  ExpectErrorContains(run("return x"), ErrorKind::kRuntime, "return gives a Tensor; each output is empty(");
  ExpectErrorContains(run("return empty([n * 4611686018427387904])", {Value(int64_t{3})}), ErrorKind::kRuntime,
                      "integer overflow");
  // Sizes whose strides or bytes would overflow (found by the fuzz target).
  ExpectErrorContains(run("return empty([n, 3])", {Value(std::numeric_limits<int64_t>::max())}), ErrorKind::kRuntime,
                      "mylib::f: Storage size calculation overflowed with sizes=[9223372036854775807, 3]");
  ExpectErrorContains(run("return empty(matmul([n, 2], [2, n]))", {Value(std::numeric_limits<int64_t>::max())}),
                      ErrorKind::kRuntime, "Storage size calculation overflowed");
  ExpectErrorContains(run("return empty(matmul([-1, 2], [2, 3]))"), ErrorKind::kRuntime, "-1");
  ExpectErrorContains(run("return empty([-(n - 1)])", {Value(std::numeric_limits<int64_t>::min() + 1)}),
                      ErrorKind::kRuntime, "integer overflow in -(-9223372036854775808)");
  ExpectErrorContains(run("return empty(broadcast(x, [4]))"), ErrorKind::kRuntime,
                      "mylib::f: The size of tensor a (3) must match the size of tensor b (4)");
}

TEST(DeclaredShapeRule, CompileRefusesWhatCannotRun) {
  const absl::string_view x = "(Tensor x) -> Tensor";
  ExpectErrorContains(CompileError(x, "return empty(y.shape)"), ErrorKind::kRuntime,
                      "shape rule line 1, column 14: 'y' is not an argument of the op");
  ExpectErrorContains(CompileError(x, "check x.dim() == 2, \"{z}\"\nreturn empty(x.shape)"), ErrorKind::kRuntime,
                      "'z' is not an argument");
  ExpectErrorContains(CompileError(x, "return empty(x.shape) +"), ErrorKind::kRuntime,
                      "column 24: expected a value, got the end of the line");
  ExpectErrorContains(CompileError(x, "check x.dim() == 2\nreturn empty(x.shape)"), ErrorKind::kRuntime,
                      "line 1, column 19: expected ','");
  ExpectErrorContains(CompileError(x, "n = x.size(0)"), ErrorKind::kRuntime, "a shape rule ends with 'return");
  ExpectErrorContains(CompileError(x, "return empty(x.shape)\nn = 1"), ErrorKind::kRuntime, "ends with 'return");
  ExpectErrorContains(CompileError(x, "return empty(x.shape), empty(x.shape)"), ErrorKind::kRuntime,
                      "the rule returns 2 output(s); the op returns 1");
  ExpectErrorContains(CompileError(x, "return empty([1.5])"), ErrorKind::kRuntime, "only integers are numbers");
  ExpectErrorContains(CompileError(x, "return empty([x.size(0)]) $"), ErrorKind::kRuntime, "unexpected character '$'");
  ExpectErrorContains(CompileError(x, "return empty(\xc3\xa9)"), ErrorKind::kRuntime, "unexpected character byte 0xC3");
  EXPECT_TRUE(CompileError(x, "check x.dim() < 9223372036854775807, \"x\"\nreturn empty(x.shape)").ok());
  ExpectErrorContains(CompileError(x, "check x.dim() < 9223372036854775808, \"x\"\nreturn empty(x.shape)"),
                      ErrorKind::kRuntime, "an integer too large");
  ExpectErrorContains(CompileError(x, "return empty(shape=\"x)"), ErrorKind::kRuntime, "a string that does not end");
  ExpectErrorContains(CompileError(x, "return broadcast"), ErrorKind::kRuntime, "'broadcast' is a function: call it");
  ExpectErrorContains(CompileError(x, "return frobnicate(x)"), ErrorKind::kRuntime, "'frobnicate' is not an argument");
  ExpectErrorContains(CompileError("(Tensor x, float[] fs) -> Tensor", "return empty([len(fs)])"),
                      ErrorKind::kRuntime, "argument 'fs' is a float[], which a shape rule cannot read");
  ExpectErrorContains(CompileError(x, "check x.dim() == 1, \"unbalanced {\"\nreturn empty(x.shape)"),
                      ErrorKind::kRuntime, "a '{' without '}'");
  ExpectErrorContains(CompileError(x, std::string(kMaxDeclaredRuleBytes + 1, ' ')), ErrorKind::kRuntime,
                      "at most 16384");
  // Nesting and chains deep enough to exhaust a stack are refused (found by the fuzz target).
  ExpectErrorContains(CompileError(x, "return empty([" + std::string(5000, '-') + "1])"), ErrorKind::kRuntime,
                      "expressions nested more than 64 deep");
  ExpectErrorContains(CompileError(x, "return empty([" + std::string(5000, '(') + "1" + std::string(5000, ')') + "])"),
                      ErrorKind::kRuntime, "expressions nested more than 64 deep");
  std::string chain = "return empty([1";
  for (int i = 0; i < 3000; ++i) chain += " + 1";
  ExpectErrorContains(CompileError(x, chain + "])"), ErrorKind::kRuntime, "an expression more than 256 operations deep");
  // Text that is not even close: the tokenizer and the parser never crash.
  for (absl::string_view junk : {"", "\n\n", "((((", "return", "return empty(", "]]]", "check", "= 3", "return [*]",
                                 "return empty(x.shape)[", "x = = 1", "return empty(x.shape if)"}) {
    EXPECT_FALSE(CompileError(x, junk).ok()) << junk;
  }
}

TEST(DeclaredShapeRule, ExtensionOpsTakeARuleAndTravelIt) {
  ExtensionOps ext;
  absl::StatusOr<const OpEntry*> op =
      ext.Define("mylib::fused_bias_gelu(Tensor x, Tensor bias) -> Tensor", absl::StrCat("rule:", kBiasGelu));
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_NE((*op)->declared_rule, nullptr);
  EXPECT_EQ((*op)->meta, nullptr);
  const TensorMeta x = Dense({4, 3}), bias = Dense({3}), bad = Dense({4});
  absl::StatusOr<MetaResult> r = OpTable::Get().RunMeta(**op, {Value(&x), Value(&bias)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].sizes, (Shape{4, 3}));
  r = OpTable::Get().RunMeta(**op, {Value(&x), Value(&bad)});
  ExpectErrorContains(r, ErrorKind::kRuntime, "mylib::fused_bias_gelu: bias must be [3], got [4]");
  // The definition a daemon is sent carries the rule's text.
  const std::vector<ExtensionOpDef> defs = ext.Defs(0);
  ASSERT_EQ(defs.size(), 1u);
  EXPECT_EQ(defs[0].shape_rule, absl::StrCat("rule:", kBiasGelu));
  // A daemon's set built from that definition has the same digest.
  ExtensionOps daemon;
  ASSERT_TRUE(daemon.Define(defs[0].schema, defs[0].shape_rule).ok());
  EXPECT_EQ(daemon.digest(), ext.digest());

  absl::StatusOr<const OpEntry*> bad_rule = ext.Define("mylib::g(Tensor x) -> Tensor", "rule:return empty(y.shape)");
  ExpectErrorContains(bad_rule.status(), ErrorKind::kRuntime, "library.define(mylib::g): shape rule line 1");
  bad_rule = ext.Define("mylib::h(int n) -> Tensor", "rule:return empty([n], dtype=float32)");
  ExpectErrorContains(bad_rule.status(), ErrorKind::kRuntime, "a declared shape rule needs a Tensor argument");
  bad_rule = ext.Define("mylib::k(Tensor x) -> Tensor", "shape:whatever");
  ExpectErrorContains(bad_rule.status(), ErrorKind::kRuntime, "'rule:<a declared shape rule>'");
}

// A Tensor[] argument: its length, its elements, and the list in
// broadcast() and promote() (and in the outputs' device and default dtype).
TEST(DeclaredShapeRule, ReadsTensorLists) {
  const TensorMeta a = Dense({2, 1}), b = Dense({1, 3}, ScalarType::kFloat64), c = Dense({2, 3}, ScalarType::kInt64);
  const TensorList l = {&a, &b, &c};
  absl::StatusOr<MetaResult> r =
      RunRule("(Tensor[] ts, int k) -> Tensor",
              "check len(ts) >= 2, \"need two, got {len(ts)}\"\n"
              "return empty([len(ts), *broadcast(ts), ts[-1].size(1) * k])",
              {Value(l), Value(int64_t{2})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].sizes, (Shape{3, 2, 3, 6}));
  EXPECT_EQ(r->outputs[0].dtype, ScalarType::kFloat64);  // the promotion of every tensor, the list's too
  r = RunRule("(Tensor[] ts) -> Tensor", "return empty(ts[0].shape, dtype=promote(ts))", {Value(TensorList{&c, &a})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].dtype, ScalarType::kFloat32);
  ExpectErrorContains(RunRule("(Tensor[] ts) -> Tensor", "check len(ts) >= 2, \"need two, got {len(ts)}\"\n"
                              "return empty(ts[0].shape)", {Value(TensorList{&a})}),
                      ErrorKind::kRuntime, "mylib::f: need two, got 1");
  ExpectErrorContains(RunRule("(Tensor[] ts) -> Tensor", "return empty(ts[2].shape)", {Value(TensorList{&a})}),
                      ErrorKind::kIndex, "index 2 is out of range for a list of 1 Tensors");
  // Tensor?[]: an absent element is None.
  r = RunRule("(Tensor?[] ts) -> Tensor", "return empty([1 if ts[1] is None else 2])", {Value(TensorList{&a, nullptr})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outputs[0].sizes, (Shape{1}));
  // Tensors on two devices, one of them in the list: PyTorch's error.
  const TensorMeta m = Dense({2, 3}, ScalarType::kFloat32, kMetaDevice);
  ExpectErrorContains(RunRule("(Tensor x, Tensor[] ts) -> Tensor", "return empty(x.shape)",
                              {Value(&m), Value(TensorList{&c})}),
                      ErrorKind::kRuntime, "Expected all tensors to be on the same device");
}

}  // namespace
}  // namespace tensord
