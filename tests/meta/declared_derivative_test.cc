// Declared derivatives: what Compile refuses (with the line and column),
// which ops an expression becomes (overloads by argument type, the
// arithmetic of tensors and numbers), what the client predicts a backward
// reads, and how Run calls its host (locals once, lines only when needed,
// ops defined at run time bound by name).
#include "tensord/meta/declared_derivative.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "meta_test_util.h"
#include "tensord/meta/autograd_rules.h"
#include "tensord/meta/op_registry.h"

namespace tensord {
namespace {

// RuntimeError containing `text`.
void ExpectErrorContains(const absl::Status& s, absl::string_view text) {
  meta_test::ExpectErrorContains(s, ErrorKind::kRuntime, text);
}

absl::StatusOr<std::shared_ptr<const DeclaredDerivative>> Compile(absl::string_view schema, absl::string_view text) {
  absl::StatusOr<FunctionSchema> s = ParseSchema(absl::StrCat("mylib::f", schema));
  if (!s.ok()) return s.status();
  return DeclaredDerivative::Compile(*s, text);
}

void ExpectRefused(absl::string_view schema, absl::string_view text, absl::string_view what) {
  SCOPED_TRACE(text);
  ExpectErrorContains(Compile(schema, text).status(), what);
}

constexpr absl::string_view kXY = "(Tensor x, Tensor y, Scalar alpha=1, int dim=0) -> Tensor";

TEST(DeclaredDerivative, CompileRefusesWithLineAndColumn) {
  ExpectRefused(kXY, "x: grad *", "derivative line 1, column 10: expected a value, got the end of the line");
  ExpectRefused(kXY, "x: grad\ny: gard", "derivative line 2, column 4: 'gard' is not an argument");
  ExpectRefused(kXY, "x: nosuchop(grad)", "'nosuchop' is no op of tensord's table");
  ExpectRefused(kXY, "x: mul(grad, \"s\")", "no overload of 'mul' takes (Tensor, str): mul.Tensor(");
  ExpectRefused(kXY, "alpha: grad", "argument 'alpha' takes no gradient");
  ExpectRefused("(Tensor x, Tensor index) -> Tensor", "index: grad", "argument 'index' takes no gradient");
  ExpectRefused(kXY, "x: grad\nx: grad", "a second line for argument 'x'");
  ExpectRefused(kXY, "x: 2 * alpha", "a gradient must be a Tensor, got Scalar");
  ExpectRefused(kXY, "x, y: grad", "2 gradients need an op of as many outputs, got Tensor");
  ExpectRefused(kXY, "x: grads[1]", "grads[1]: mylib::f has 1 output(s)");
  ExpectRefused(kXY, "x: add_(grad, y)", "it writes in place");
  ExpectRefused(kXY, "x = grad\nx: x", "'x' is taken");
  ExpectRefused(kXY, "h = grad", "no line gives a gradient");
  ExpectRefused(kXY, "", "no line gives a gradient");
  ExpectRefused(kXY, "x: grad @ y", "unexpected character '@'");
  ExpectRefused(kXY, "x: grad * \xc3\xa9", "column 11: unexpected character byte 0xC3");  // é: the message stays UTF-8
  ExpectRefused(kXY, std::string("x: grad\0", 8), "unexpected character byte 0x00");
  ExpectRefused("(Tensor grad) -> Tensor", "grad: grad", "argument 'grad' has a name the derivative language keeps");
  ExpectRefused(kXY, std::string(kMaxDeclaredDerivativeBytes + 1, ' '), "at most");
  ExpectRefused(kXY, "x: " + std::string(200, '(') + "grad" + std::string(200, ')'), "nested too deep");
  ExpectRefused(kXY, "x: " + std::string(200, '-') + "grad", "nested too deep");
  // Trees deep enough to exhaust a stack when run: a long chain, or locals
  // each reading the one before.
  std::string chain = "x: grad";
  for (int i = 0; i < 300; ++i) chain += " * 2";
  ExpectRefused(kXY, chain, "an expression more than 256 operations deep");
  std::string locals = "a0 = grad\n";
  for (int i = 1; i < 300; ++i) locals += absl::StrCat("a", i, " = a", i - 1, " * 2\n");
  ExpectRefused(kXY, locals + "x: a299", "more than 256 operations deep (counting the locals it reads)");
}

// Locals that each read the one before twice: what the client predicts is
// computed once per local, not once per path (2^40 here).
TEST(DeclaredDerivative, LocalChainsStayLinear) {
  std::string text = "a0 = x * y\n";
  for (int i = 1; i <= 40; ++i) text += absl::StrCat("a", i, " = a", i - 1, " * a", i - 1, "\n");
  auto d = Compile(kXY, text + "x: grad * a40\ny: grad * a40 * result");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_LT((*d)->reads_rule().size(), 10u);
}

TEST(DeclaredDerivative, ReadsRuleFollowsTheLines) {
  ExtensionOps ext;
  absl::StatusOr<const OpEntry*> op = ext.Define("mylib::f(Tensor x, Tensor y, Tensor z) -> Tensor",
                  "rule:return empty(broadcast(x, y, z))", {}, "h = result * 2\nx: grad * y * h\ny: grad * x\n");
  ASSERT_TRUE(op.ok()) << op.status();
  const std::vector<std::vector<int>> slots = {{0}, {1}, {2}};
  auto predict = [&](bool nx, bool ny) {
    std::vector<std::string> out;
    for (const SavedRead& r : PredictSavedReads(**op, slots, [&](int s) { return s == 0 ? nx : s == 1 ? ny : true; })) {
      out.push_back(r.ToString());
    }
    return absl::StrJoin(out, ", ");
  };
  EXPECT_EQ(predict(true, true), "input 1, output 0, input 0");
  EXPECT_EQ(predict(false, true), "input 0");
  EXPECT_EQ(predict(true, false), "input 1, output 0");
  EXPECT_TRUE(FormulaGivesGradient(**op, 0));
  EXPECT_FALSE(FormulaGivesGradient(**op, 2));  // z has no line
  EXPECT_FALSE(FormulaMayReadInput(**op, 2));
  EXPECT_TRUE(HasSavedReadsRule(**op));
}

// A host whose tensors are the text of how they were made.
class TextHost : public DerivativeHost {
 public:
  std::vector<std::string> t;
  std::vector<std::string> calls;
  std::vector<bool> needs = {true, true};
  ExtensionOps* ext = nullptr;
  int Grad(size_t i) override { return Keep(absl::StrCat("g", i)); }
  int Input(int a) override { return Keep(absl::StrCat("in", a)); }
  int Output(size_t i) override { return Keep(absl::StrCat("out", i)); }
  Value Arg(int a) override { return a == 2 ? Value(Scalar::Float(0.5)) : Value(int64_t{1}); }
  bool Needs(int a) override { return a < static_cast<int>(needs.size()) ? needs[a] : false; }
  const OpEntry* FindOp(absl::string_view name) override { return ext != nullptr ? ext->Find(name) : nullptr; }
  std::vector<int> Call(const OpEntry& op, std::vector<DerivativeValue> args) override {
    std::vector<std::string> shown;
    for (const DerivativeValue& v : args) {
      if (v.is_tensor) {
        shown.push_back(t[v.tensor]);
      } else if (v.value.kind() == Value::Kind::kNone) {
        shown.push_back("None");
      } else if (v.value.kind() == Value::Kind::kIntList) {
        shown.push_back(absl::StrCat("[", absl::StrJoin(v.value.int_list(), ","), "]"));
      } else if (v.value.kind() == Value::Kind::kString) {
        shown.push_back(v.value.str());
      } else if (v.value.kind() == Value::Kind::kDtype) {
        shown.emplace_back(DtypeC10Name(v.value.dtype()));
      } else {
        shown.push_back(absl::StrCat(v.value.scalar().to_double()));
      }
    }
    const std::string text = absl::StrCat(op.full_name(), "(", absl::StrJoin(shown, ","), ")");
    calls.push_back(text);
    std::vector<int> out;
    for (size_t i = 0; i < op.schema.returns.size(); ++i) {
      out.push_back(Keep(op.schema.returns.size() == 1 ? text : absl::StrCat(text, "[", i, "]")));
    }
    return out;
  }
  bool failed() const override { return false; }
  int Keep(std::string s) {
    t.push_back(std::move(s));
    return static_cast<int>(t.size() - 1);
  }
};

std::vector<std::string> Grads(const DeclaredDerivative& d, TextHost& h) {
  absl::StatusOr<std::vector<int>> r = d.Run("mylib::f", h);
  EXPECT_TRUE(r.ok()) << r.status();
  std::vector<std::string> out;
  if (!r.ok()) return out;
  for (int g : *r) out.push_back(g < 0 ? "-" : h.t[g]);
  return out;
}

TEST(DeclaredDerivative, ArithmeticBecomesTableOps) {
  auto d = Compile(kXY, "x: 2 * grad - 1 - (1 - y) / y + 2 / y + -grad * alpha\ny: grad / 4 + grad + y * 0.5");
  ASSERT_TRUE(d.ok()) << d.status();
  TextHost h;
  const std::vector<std::string> g = Grads(**d, h);
  EXPECT_EQ(g[0],
            "add.Tensor(add.Tensor(sub.Tensor(sub.Scalar(mul.Scalar(g0,2),1,1),div.Tensor(rsub.Scalar(in1,1,1),in1),1),"
            "mul.Scalar(reciprocal(in1),2),1),mul.Scalar(neg(g0),0.5),1)")
      << absl::StrJoin(h.calls, "\n");
  // add.Tensor's default alpha and the numbers folded: y * 0.5 is mul.Scalar.
  EXPECT_EQ(g[1], "add.Tensor(add.Tensor(div.Scalar(g0,4),g0,1),mul.Scalar(in1,0.5),1)");
  EXPECT_EQ(g[2], "-");
}

TEST(DeclaredDerivative, ABaseNameTriesEveryOverload) {
  auto d = Compile(kXY, "x: max(grad, 0)[0]\ny: max(grad)");
  ASSERT_TRUE(d.ok()) << d.status();
  TextHost h;
  const std::vector<std::string> g = Grads(**d, h);
  EXPECT_EQ(g[0], "max.dim(g0,0,0)[0]");
  EXPECT_EQ(g[1], "max(g0)");
}

TEST(DeclaredDerivative, OverloadsKeywordsAndDefaults) {
  auto d = Compile(kXY, "x: sum(grad, [dim], True)\ny: sum(grad, dim=[0, 1], keepdim=False, dtype=float64)");
  ASSERT_TRUE(d.ok()) << d.status();
  TextHost h;
  const std::vector<std::string> g = Grads(**d, h);
  EXPECT_EQ(g[0], "sum(g0,[1],1,None)");
  EXPECT_EQ(g[1], "sum(g0,[0,1],0,Double)");
}

TEST(DeclaredDerivative, LocalsRunOnceAndLinesOnlyWhenNeeded) {
  auto d = Compile(kXY, "e = exp(x)\nx: grad * e\ny: grad * e * e");
  ASSERT_TRUE(d.ok()) << d.status();
  TextHost h;
  Grads(**d, h);
  EXPECT_EQ(absl::StrJoin(h.calls, " "), "exp(in0) mul.Tensor(g0,exp(in0)) mul.Tensor(g0,exp(in0)) "
                                         "mul.Tensor(mul.Tensor(g0,exp(in0)),exp(in0))");
  TextHost only_y;
  only_y.needs = {false, true};
  const std::vector<std::string> g = Grads(**d, only_y);
  EXPECT_EQ(g[0], "-");
  EXPECT_EQ(only_y.calls.size(), 3u);
}

TEST(DeclaredDerivative, OpsDefinedAtRunTimeBindByName) {
  ExtensionOps ext;
  ASSERT_TRUE(ext.Define("mylib::two(Tensor a, Tensor b, *, float s=1.0) -> (Tensor, Tensor)",
                         "rule:return empty(a.shape), empty(b.shape)")
                  .ok());
  auto d = Compile(kXY, "x, y: mylib::two(grad, b=y, s=2)");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ((*d)->extension_calls(), std::vector<std::string>{"mylib::two"});
  TextHost h;
  h.ext = &ext;
  const std::vector<std::string> g = Grads(**d, h);
  EXPECT_EQ(g[0], "mylib::two(g0,in1,2)[0]");
  EXPECT_EQ(g[1], "mylib::two(g0,in1,2)[1]");

  auto picked = Compile(kXY, "x: mylib::two(grad, y)[1]\ny: mylib::two(grad, y)");
  ASSERT_TRUE(picked.ok()) << picked.status();
  TextHost h2;
  h2.ext = &ext;
  absl::StatusOr<std::vector<int>> r = (*picked)->Run("mylib::f", h2);
  ExpectErrorContains(r.status(), "mylib::f: derivative line 2, column 4: an op of 2 outputs where one Tensor is needed");

  auto missing = Compile(kXY, "x: mylib::nope(grad)");
  ASSERT_TRUE(missing.ok());
  TextHost h3;
  h3.ext = &ext;
  ExpectErrorContains((*missing)->Run("mylib::f", h3).status(), "calls 'mylib::nope', which is not defined");
  auto wrong = Compile(kXY, "x: mylib::two(grad, s=2)");
  ASSERT_TRUE(wrong.ok());
  ExpectErrorContains((*wrong)->Run("mylib::f", h3).status(), "argument 'b' is missing");
}

TEST(DeclaredDerivative, DefineDigestsTheDerivative) {
  ExtensionOps a, b, c;
  const char* schema = "mylib::f(Tensor x) -> Tensor";
  ASSERT_TRUE(a.Define(schema, "like:exp").ok());
  ASSERT_TRUE(b.Define(schema, "like:exp", {}, "x: grad * result").ok());
  ASSERT_TRUE(c.Define(schema, "like:exp", {}, "x: grad * result").ok());
  EXPECT_NE(a.digest(), b.digest());
  EXPECT_EQ(b.digest(), c.digest());
  EXPECT_EQ(b.Defs(0)[0].derivative, "x: grad * result");
  ExpectErrorContains(a.Define("mylib::g(Tensor x) -> Tensor", "like:exp", {}, "x: grad *").status(),
                      "library.define(mylib::g): derivative line 1");
}

}  // namespace
}  // namespace tensord
