#include "tensord/meta/declared_derivative.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tensord/meta/declared_rule.h"
#include "tensord/meta/dtype.h"
#include "tensord/meta/errors.h"

namespace tensord {

// ---- the checked tree -----------------------------------------------------------

namespace {

// The type of an expression, known when the derivative compiles.
enum class Ty { kTensor, kTuple, kExtCall, kInt, kFloat, kBool, kNone, kIntList, kScalar, kDtype, kStr };

absl::string_view TyName(Ty t) {
  switch (t) {
    case Ty::kTensor: return "Tensor";
    case Ty::kTuple: return "several Tensors";
    case Ty::kExtCall: return "the outputs of an op defined at run time";
    case Ty::kInt: return "int";
    case Ty::kFloat: return "float";
    case Ty::kBool: return "bool";
    case Ty::kNone: return "None";
    case Ty::kIntList: return "int[]";
    case Ty::kScalar: return "Scalar";
    case Ty::kDtype: return "ScalarType";
    case Ty::kStr: return "str";
  }
  return "?";
}

bool IsNumber(Ty t) { return t == Ty::kInt || t == Ty::kFloat || t == Ty::kBool || t == Ty::kScalar; }
// An expression that stands for one tensor (an op defined at run time is
// checked to give one when it runs).
bool IsTensorish(Ty t) { return t == Ty::kTensor || t == Ty::kExtCall; }

struct Expr {
  enum class K { kConst, kGrad, kInput, kOutput, kArg, kLocal, kCall, kExtCall, kIndex, kNumBin, kNumNeg, kList };
  K k = K::kConst;
  Ty ty = Ty::kNone;
  Value value;             // kConst
  int index = 0;           // kGrad/kOutput: the output; kInput/kArg: the schema argument; kLocal; kIndex: the output
  const OpEntry* op = nullptr;  // kCall
  std::string name;        // kExtCall: the op's full name
  std::vector<std::string> kw;  // kExtCall: each argument's keyword, "" when positional
  char bin = 0;            // kNumBin: + - * /
  int tuple_size = 0;      // kTuple: how many outputs
  std::vector<std::unique_ptr<Expr>> c;  // kCall: one per schema argument (null: the default); operands
  int line = 1, col = 1;
  int depth = 1;  // how deep Run recurses to evaluate it, through the locals it reads too
};
using ExprP = std::unique_ptr<Expr>;

struct Line {
  enum class K { kLet, kGrad };
  K k = K::kLet;
  int local = 0;             // kLet
  std::vector<int> targets;  // kGrad: schema argument indices
  ExprP e;
  int line = 1;
};

}  // namespace

struct DeclaredDerivative::Program {
  std::vector<Line> lines;
  size_t n_locals = 0;
  size_t n_args = 0;
};

namespace {

// ---- tokens -----------------------------------------------------------------------

struct Tok {
  enum class K { kName, kInt, kFloat, kString, kOp, kEol, kEnd };
  K k = K::kEnd;
  std::string text;
  int64_t i = 0;
  double d = 0;
  int line = 1, col = 1;
};

absl::Status Error(int line, int col, absl::string_view what) {
  return RuntimeErr(absl::StrCat("derivative line ", line, ", column ", col, ": ", what));
}

bool IsNameChar(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_'; }

absl::StatusOr<std::vector<Tok>> Lex(absl::string_view src) {
  std::vector<Tok> out;
  int line = 1, col = 1, depth = 0;
  size_t i = 0;
  auto advance = [&](size_t n) {
    for (size_t k = 0; k < n && i < src.size(); ++k, ++i) {
      if (src[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
  };
  auto end_line = [&](const char* text) {
    if (!out.empty() && out.back().k != Tok::K::kEol) out.push_back(Tok{Tok::K::kEol, text, 0, 0, line, col});
  };
  while (i < src.size()) {
    const char ch = src[i];
    if (ch == '#') {
      while (i < src.size() && src[i] != '\n') advance(1);
      continue;
    }
    if ((ch == '\n' || ch == ';') && depth == 0) {
      end_line(ch == ';' ? ";" : "\n");
      advance(1);
      continue;
    }
    if (absl::ascii_isspace(static_cast<unsigned char>(ch))) {
      advance(1);
      continue;
    }
    Tok t;
    t.line = line;
    t.col = col;
    if (absl::ascii_isalpha(static_cast<unsigned char>(ch)) || ch == '_') {
      // A name, with its namespace when it has one ("mylib::f").
      size_t j = i;
      while (j < src.size() && IsNameChar(src[j])) ++j;
      if (src.substr(j, 2) == "::" && j + 2 < src.size() && (absl::ascii_isalpha(static_cast<unsigned char>(src[j + 2])) ||
                                                            src[j + 2] == '_')) {
        j += 2;
        while (j < src.size() && IsNameChar(src[j])) ++j;
      }
      t.k = Tok::K::kName;
      t.text = std::string(src.substr(i, j - i));
      advance(j - i);
    } else if (absl::ascii_isdigit(static_cast<unsigned char>(ch)) ||
               (ch == '.' && i + 1 < src.size() && absl::ascii_isdigit(static_cast<unsigned char>(src[i + 1])))) {
      size_t j = i;
      bool is_float = false;
      while (j < src.size() && absl::ascii_isdigit(static_cast<unsigned char>(src[j]))) ++j;
      if (j < src.size() && src[j] == '.') {
        is_float = true;
        ++j;
        while (j < src.size() && absl::ascii_isdigit(static_cast<unsigned char>(src[j]))) ++j;
      }
      if (j < src.size() && (src[j] == 'e' || src[j] == 'E')) {
        size_t k = j + 1;
        if (k < src.size() && (src[k] == '+' || src[k] == '-')) ++k;
        if (k < src.size() && absl::ascii_isdigit(static_cast<unsigned char>(src[k]))) {
          is_float = true;
          j = k;
          while (j < src.size() && absl::ascii_isdigit(static_cast<unsigned char>(src[j]))) ++j;
        }
      }
      if (j < src.size() && IsNameChar(src[j])) return Error(line, col, "a number followed by a letter");
      const std::string text(src.substr(i, j - i));
      errno = 0;
      if (is_float) {
        t.k = Tok::K::kFloat;
        t.d = std::strtod(text.c_str(), nullptr);
        if (!std::isfinite(t.d)) return Error(line, col, absl::StrCat("the number ", text, " is out of range"));
      } else {
        t.k = Tok::K::kInt;
        t.i = std::strtoll(text.c_str(), nullptr, 10);
        if (errno == ERANGE) return Error(line, col, absl::StrCat("the integer ", text, " is out of range"));
      }
      t.text = text;
      advance(j - i);
    } else if (ch == '"' || ch == '\'') {
      size_t j = i + 1;
      while (j < src.size() && src[j] != ch && src[j] != '\n' && src[j] != '\\') ++j;
      if (j >= src.size() || src[j] != ch) return Error(line, col, "a string that does not end on its line (no escapes)");
      t.k = Tok::K::kString;
      t.text = std::string(src.substr(i + 1, j - i - 1));
      advance(j + 1 - i);
    } else {
      if (absl::string_view("()[],:=+-*/.").find(ch) == absl::string_view::npos) {
        return Error(line, col, absl::StrCat("unexpected character ", ShowTextChar(ch)));
      }
      if (ch == '(' || ch == '[') ++depth;
      if ((ch == ')' || ch == ']') && depth > 0) --depth;
      t.k = Tok::K::kOp;
      t.text = std::string(1, ch);
      advance(1);
    }
    out.push_back(std::move(t));
  }
  end_line("");
  out.push_back(Tok{Tok::K::kEnd, "", 0, 0, line, col});
  return out;
}

// ---- parsing and checking, in one pass ---------------------------------------------

// Far beyond any real derivative, far below what a thread's stack holds:
// the parser's nesting, and the depth of a tree Run walks (a chain
// a * a * ... is as deep as it is long; a local adds its own depth).
constexpr int kMaxNesting = 64;
constexpr int kMaxTreeDepth = 256;

class Compiler {
 public:
  Compiler(const FunctionSchema& schema, std::vector<Tok> toks) : schema_(schema), t_(std::move(toks)) {}

  absl::Status Lines(DeclaredDerivative::Program& p, std::vector<std::string>& ext_calls) {
    std::vector<bool> done(schema_.arguments.size(), false);
    while (Peek().k != Tok::K::kEnd) {
      if (Peek().k == Tok::K::kEol) {
        ++pos_;
        continue;
      }
      Line l;
      l.line = Peek().line;
      if (Peek().k != Tok::K::kName) return Expected("'NAME = ...' or 'ARGUMENT: ...'");
      if (IsOp("=", 1)) {
        const Tok& name = Peek();
        if (Reserved(name.text) || schema_.ArgIndex(name.text) >= 0 || locals_.contains(name.text)) {
          return Error(name.line, name.col, absl::StrCat("'", name.text, "' is taken (an argument, a name of the "
                                                         "language or a local above); choose another name"));
        }
        pos_ += 2;
        TD_ASSIGN_OR_RETURN(l.e, Expression());
        if (l.e->ty == Ty::kNone) return Error(l.line, l.e->col, "a local may not be None");
        l.k = Line::K::kLet;
        l.local = static_cast<int>(local_types_.size());
        locals_[name.text] = l.local;
        local_types_.push_back(l.e->ty);
        local_tuple_sizes_.push_back(l.e->tuple_size);
        local_depths_.push_back(l.e->depth);
      } else {
        l.k = Line::K::kGrad;
        while (true) {
          const Tok& name = Peek();
          if (name.k != Tok::K::kName) return Expected("an argument's name");
          const int a = schema_.ArgIndex(name.text);
          if (a < 0) {
            return Error(name.line, name.col, absl::StrCat("'", name.text, "' is not an argument of ",
                                                           schema_.full_name()));
          }
          const Argument& arg = schema_.arguments[a];
          if (arg.type != ArgType::kTensor || !IsDifferentiableArgument(arg)) {
            return Error(name.line, name.col, absl::StrCat("argument '", name.text, "' takes no gradient (only a "
                                                           "Tensor not named index, indices, mask, condition or "
                                                           "target does)"));
          }
          if (done[a]) return Error(name.line, name.col, absl::StrCat("a second line for argument '", name.text, "'"));
          done[a] = true;
          l.targets.push_back(a);
          ++pos_;
          if (IsOp(":")) break;
          TD_RETURN_IF_ERROR(Eat(","));
        }
        TD_RETURN_IF_ERROR(Eat(":"));
        const int at_col = Peek().col;
        TD_ASSIGN_OR_RETURN(l.e, Expression());
        const Ty ty = l.e->ty;
        if (l.targets.size() == 1 ? !IsTensorish(ty)
                                  : !(ty == Ty::kExtCall ||
                                      (ty == Ty::kTuple && l.e->tuple_size == static_cast<int>(l.targets.size())))) {
          return Error(l.line, at_col, l.targets.size() == 1
                                           ? absl::StrCat("a gradient must be a Tensor, got ", TyName(ty))
                                           : absl::StrCat(l.targets.size(), " gradients need an op of as many "
                                                          "outputs, got ", TyName(ty),
                                                          ty == Ty::kTuple ? absl::StrCat(" (", l.e->tuple_size, ")")
                                                                           : ""));
        }
      }
      if (Peek().k != Tok::K::kEol) return Expected("the end of the line");
      ++pos_;
      p.lines.push_back(std::move(l));
    }
    bool any = false;
    for (const Line& l : p.lines) any = any || l.k == Line::K::kGrad;
    if (!any) return Error(1, 1, "no line gives a gradient ('ARGUMENT: EXPRESSION')");
    p.n_locals = local_types_.size();
    p.n_args = schema_.arguments.size();
    ext_calls = std::move(ext_calls_);
    return absl::OkStatus();
  }

 private:
  const Tok& Peek(size_t ahead = 0) const { return t_[std::min(pos_ + ahead, t_.size() - 1)]; }
  bool IsOp(absl::string_view op, size_t ahead = 0) const {
    return Peek(ahead).k == Tok::K::kOp && Peek(ahead).text == op;
  }
  absl::Status Expected(absl::string_view what) const {
    const Tok& t = Peek();
    const std::string got =
        t.k == Tok::K::kEnd || t.k == Tok::K::kEol ? "the end of the line" : absl::StrCat("'", t.text, "'");
    return Error(t.line, t.col, absl::StrCat("expected ", what, ", got ", got));
  }
  absl::Status Eat(absl::string_view op) {
    if (!IsOp(op)) return Expected(absl::StrCat("'", op, "'"));
    ++pos_;
    return absl::OkStatus();
  }
  static bool Reserved(absl::string_view s) {
    for (absl::string_view k : {"grad", "grads", "result", "results", "None", "True", "False"}) {
      if (s == k) return true;
    }
    return ParseDtype(s).ok();
  }
  static ExprP Make(Expr::K k, Ty ty, const Tok& at) {
    auto e = std::make_unique<Expr>();
    e->k = k;
    e->ty = ty;
    e->line = at.line;
    e->col = at.col;
    return e;
  }
  // Sets e's depth from its operands'; refuses one past kMaxTreeDepth.
  static absl::StatusOr<ExprP> Deepen(ExprP e) {
    for (const ExprP& c : e->c) {
      if (c != nullptr) e->depth = std::max(e->depth, c->depth + 1);
    }
    if (e->depth > kMaxTreeDepth) {
      return Error(e->line, e->col, absl::StrCat("an expression more than ", kMaxTreeDepth,
                                                 " operations deep (counting the locals it reads)"));
    }
    return e;
  }
  static ExprP Const(Value v, Ty ty, const Tok& at) {
    ExprP e = Make(Expr::K::kConst, ty, at);
    e->value = std::move(v);
    return e;
  }

  absl::StatusOr<ExprP> Expression() {
    if (++nesting_ > kMaxNesting) return Error(Peek().line, Peek().col, "expressions nested too deep");
    absl::StatusOr<ExprP> e = Sum();
    --nesting_;
    return e;
  }
  absl::StatusOr<ExprP> Sum() {
    TD_ASSIGN_OR_RETURN(ExprP a, Term());
    while (IsOp("+") || IsOp("-")) {
      const Tok at = Peek();
      ++pos_;
      TD_ASSIGN_OR_RETURN(ExprP b, Term());
      TD_ASSIGN_OR_RETURN(a, Binary(at, std::move(a), std::move(b)));
    }
    return a;
  }
  absl::StatusOr<ExprP> Term() {
    TD_ASSIGN_OR_RETURN(ExprP a, Unary());
    while (IsOp("*") || IsOp("/")) {
      const Tok at = Peek();
      ++pos_;
      TD_ASSIGN_OR_RETURN(ExprP b, Unary());
      TD_ASSIGN_OR_RETURN(a, Binary(at, std::move(a), std::move(b)));
    }
    return a;
  }
  absl::StatusOr<ExprP> Unary() {
    if (!IsOp("-")) return Postfix();
    const Tok at = Peek();
    ++pos_;
    if (++nesting_ > kMaxNesting) return Error(at.line, at.col, "expressions nested too deep");
    absl::StatusOr<ExprP> a = Unary();
    --nesting_;
    if (!a.ok()) return a.status();
    if (IsTensorish((*a)->ty)) return BuiltinCall(at, "neg", Args1(std::move(*a)));
    if (!IsNumber((*a)->ty)) return Error(at.line, at.col, absl::StrCat("unary '-' of ", TyName((*a)->ty)));
    ExprP n = Make(Expr::K::kNumNeg, (*a)->ty == Ty::kBool ? Ty::kInt : (*a)->ty, at);
    n->c.push_back(*std::move(a));
    return Deepen(std::move(n));
  }
  static std::vector<std::pair<std::string, ExprP>> Args1(ExprP a) {
    std::vector<std::pair<std::string, ExprP>> v;
    v.emplace_back("", std::move(a));
    return v;
  }
  static std::vector<std::pair<std::string, ExprP>> Args2(ExprP a, ExprP b) {
    std::vector<std::pair<std::string, ExprP>> v;
    v.emplace_back("", std::move(a));
    v.emplace_back("", std::move(b));
    return v;
  }

  // a OP b: tensor ops for a tensor operand (PyTorch's Tensor.__add__ and
  // friends), Python's arithmetic for two numbers.
  absl::StatusOr<ExprP> Binary(const Tok& at, ExprP a, ExprP b) {
    const char op = at.text[0];
    const bool ta = IsTensorish(a->ty), tb = IsTensorish(b->ty);
    static constexpr struct {
      char op;
      const char* tensor;
      const char* scalar;
    } kOps[] = {{'+', "add.Tensor", "add.Scalar"}, {'-', "sub.Tensor", "sub.Scalar"},
                {'*', "mul.Tensor", "mul.Scalar"}, {'/', "div.Tensor", "div.Scalar"}};
    const auto* row = &kOps[0];
    for (const auto& r : kOps) {
      if (r.op == op) row = &r;
    }
    if (ta && tb) return BuiltinCall(at, row->tensor, Args2(std::move(a), std::move(b)));
    if (ta && IsNumber(b->ty)) return BuiltinCall(at, row->scalar, Args2(std::move(a), std::move(b)));
    if (tb && IsNumber(a->ty)) {
      switch (op) {
        case '+':
        case '*':
          return BuiltinCall(at, row->scalar, Args2(std::move(b), std::move(a)));
        case '-':
          return BuiltinCall(at, "rsub.Scalar", Args2(std::move(b), std::move(a)));
        default: {  // n / t = reciprocal(t) * n
          TD_ASSIGN_OR_RETURN(ExprP r, BuiltinCall(at, "reciprocal", Args1(std::move(b))));
          return BuiltinCall(at, "mul.Scalar", Args2(std::move(r), std::move(a)));
        }
      }
    }
    if (IsNumber(a->ty) && IsNumber(b->ty)) {
      const bool ints = (a->ty == Ty::kInt || a->ty == Ty::kBool) && (b->ty == Ty::kInt || b->ty == Ty::kBool);
      ExprP n = Make(Expr::K::kNumBin, op != '/' && ints ? Ty::kInt : (a->ty == Ty::kScalar || b->ty == Ty::kScalar)
                                                                         ? Ty::kScalar
                                                                         : Ty::kFloat,
                     at);
      n->bin = op;
      n->c.push_back(std::move(a));
      n->c.push_back(std::move(b));
      return Deepen(std::move(n));
    }
    return Error(at.line, at.col,
                 absl::StrCat("'", at.text, "' between ", TyName(a->ty), " and ", TyName(b->ty)));
  }

  absl::StatusOr<ExprP> Postfix() {
    const Tok at = Peek();
    if (at.k == Tok::K::kName && (IsOp("(", 1) || (IsOp(".", 1) && Peek(2).k == Tok::K::kName && IsOp("(", 3)))) {
      // An op call: name(...), or name.overload(...).
      std::string callee = at.text;
      pos_ += 1;
      if (IsOp(".")) {
        absl::StrAppend(&callee, ".", Peek(1).text);
        pos_ += 2;
      }
      TD_ASSIGN_OR_RETURN(ExprP call, Call(at, callee));
      return Indexed(std::move(call));
    }
    TD_ASSIGN_OR_RETURN(ExprP a, Primary());
    return Indexed(std::move(a));
  }
  // e[i] on the outputs of an op of several.
  absl::StatusOr<ExprP> Indexed(ExprP a) {
    while (IsOp("[")) {
      const Tok at = Peek();
      ++pos_;
      if (Peek().k != Tok::K::kInt) return Expected("an output number");
      const int64_t i = Peek().i;
      ++pos_;
      TD_RETURN_IF_ERROR(Eat("]"));
      if (a->ty == Ty::kTuple && i >= a->tuple_size) {
        return Error(at.line, at.col, absl::StrCat("output ", i, " of an op of ", a->tuple_size, " outputs"));
      }
      if (a->ty != Ty::kTuple && a->ty != Ty::kExtCall) {
        return Error(at.line, at.col, absl::StrCat("[", i, "] on ", TyName(a->ty),
                                                   " (only the outputs of an op of several are indexed)"));
      }
      ExprP n = Make(Expr::K::kIndex, Ty::kTensor, at);
      n->index = static_cast<int>(i);
      n->c.push_back(std::move(a));
      TD_ASSIGN_OR_RETURN(a, Deepen(std::move(n)));
    }
    return a;
  }

  absl::StatusOr<ExprP> Primary() {
    const Tok t = Peek();
    switch (t.k) {
      case Tok::K::kInt:
        ++pos_;
        return Const(Value(t.i), Ty::kInt, t);
      case Tok::K::kFloat:
        ++pos_;
        return Const(Value(t.d), Ty::kFloat, t);
      case Tok::K::kString:
        ++pos_;
        return Const(Value(t.text), Ty::kStr, t);
      case Tok::K::kName:
        ++pos_;
        return Name(t);
      default:
        break;
    }
    if (IsOp("(")) {
      ++pos_;
      TD_ASSIGN_OR_RETURN(ExprP e, Expression());
      TD_RETURN_IF_ERROR(Eat(")"));
      return e;
    }
    if (IsOp("[")) {
      ++pos_;
      ExprP n = Make(Expr::K::kList, Ty::kIntList, t);
      while (!IsOp("]")) {
        TD_ASSIGN_OR_RETURN(ExprP e, Expression());
        if (e->ty != Ty::kInt) {
          return Error(e->line, e->col, absl::StrCat("a list holds ints, got ", TyName(e->ty)));
        }
        n->c.push_back(std::move(e));
        if (!IsOp(",")) break;
        ++pos_;
      }
      TD_RETURN_IF_ERROR(Eat("]"));
      return Deepen(std::move(n));
    }
    return Expected("a value");
  }

  absl::StatusOr<ExprP> Name(const Tok& t) {
    const std::string& s = t.text;
    if (s == "None") return Const(Value(), Ty::kNone, t);
    if (s == "True" || s == "False") return Const(Value(s == "True"), Ty::kBool, t);
    const bool many = s == "grads" || s == "results";
    if (s == "grad" || s == "result" || many) {
      int64_t i = 0;
      if (many) {
        if (!IsOp("[") || Peek(1).k != Tok::K::kInt || !IsOp("]", 2)) {
          return Error(t.line, t.col, absl::StrCat("'", s, "' is indexed by an output number, as ", s, "[0]"));
        }
        i = Peek(1).i;
        pos_ += 3;
      }
      if (i >= static_cast<int64_t>(schema_.returns.size())) {
        return Error(t.line, t.col, absl::StrCat(s, "[", i, "]: ", schema_.full_name(), " has ",
                                                 schema_.returns.size(), " output(s)"));
      }
      ExprP e = Make(s[0] == 'g' ? Expr::K::kGrad : Expr::K::kOutput, Ty::kTensor, t);
      e->index = static_cast<int>(i);
      return e;
    }
    if (auto it = locals_.find(s); it != locals_.end()) {
      ExprP e = Make(Expr::K::kLocal, local_types_[it->second], t);
      e->index = it->second;
      e->tuple_size = local_tuple_sizes_[it->second];
      e->depth = local_depths_[it->second];  // Run evaluates the local where it is first read
      return e;
    }
    if (const int a = schema_.ArgIndex(s); a >= 0) {
      const Argument& arg = schema_.arguments[a];
      Ty ty;
      switch (arg.type) {
        case ArgType::kTensor: ty = Ty::kTensor; break;
        case ArgType::kInt: ty = Ty::kInt; break;
        case ArgType::kFloat: ty = Ty::kFloat; break;
        case ArgType::kBool: ty = Ty::kBool; break;
        case ArgType::kScalar: ty = Ty::kScalar; break;
        case ArgType::kIntList: ty = Ty::kIntList; break;
        case ArgType::kString: ty = Ty::kStr; break;
        case ArgType::kDtype: ty = Ty::kDtype; break;
        default:
          return Error(t.line, t.col, absl::StrCat("a derivative cannot read argument '", s, "' (",
                                                   arg.type == ArgType::kDevice ? "Device" : "a list of Tensors or "
                                                   "floats", ")"));
      }
      ExprP e = Make(ty == Ty::kTensor ? Expr::K::kInput : Expr::K::kArg, ty, t);
      e->index = a;
      return e;
    }
    if (absl::StatusOr<ScalarType> dt = ParseDtype(s); dt.ok()) return Const(Value(*dt), Ty::kDtype, t);
    return Error(t.line, t.col, absl::StrCat("'", s, "' is not an argument, a local above, grad, grads[i], result, "
                                             "results[i] or a dtype"));
  }

  // callee(args): a built-in op (resolved now) or one defined at run time
  // (by full name, resolved when the derivative runs).
  absl::StatusOr<ExprP> Call(const Tok& at, const std::string& callee) {
    TD_RETURN_IF_ERROR(Eat("("));
    std::vector<std::pair<std::string, ExprP>> args;
    while (!IsOp(")")) {
      std::string kw;
      if (Peek().k == Tok::K::kName && IsOp("=", 1)) {
        kw = Peek().text;
        pos_ += 2;
      } else if (!args.empty() && !args.back().first.empty()) {
        return Expected("a keyword argument (a positional one may not follow one)");
      }
      TD_ASSIGN_OR_RETURN(ExprP e, Expression());
      if (e->ty == Ty::kTuple) {
        return Error(e->line, e->col, "an argument holds the outputs of an op of several; pick one with [i]");
      }
      args.emplace_back(std::move(kw), std::move(e));
      if (!IsOp(",")) break;
      ++pos_;
    }
    TD_RETURN_IF_ERROR(Eat(")"));
    if (callee.find("::") != std::string::npos) {
      ExprP n = Make(Expr::K::kExtCall, Ty::kExtCall, at);
      n->name = callee;
      for (auto& [kw, e] : args) {
        n->kw.push_back(kw);
        n->c.push_back(std::move(e));
      }
      bool seen = false;
      for (const std::string& c : ext_calls_) seen = seen || c == callee;
      if (!seen) ext_calls_.push_back(callee);
      return Deepen(std::move(n));
    }
    return BuiltinCall(at, callee, std::move(args));
  }

  absl::StatusOr<ExprP> BuiltinCall(const Tok& at, absl::string_view callee,
                                    std::vector<std::pair<std::string, ExprP>> args) {
    const OpTable& table = OpTable::Get();
    // A full name ("max.dim") is that overload; a base name ("max") every
    // overload of it, the one without an overload name among them.
    std::vector<const OpEntry*> candidates;
    if (callee.find('.') != absl::string_view::npos) {
      if (const OpEntry* e = table.Find(callee); e != nullptr) candidates.push_back(e);
    } else {
      candidates = table.Overloads(callee);
    }
    if (candidates.empty()) return Error(at.line, at.col, absl::StrCat("'", callee, "' is no op of tensord's table"));
    std::vector<Ty> types;
    std::vector<std::string> kws;
    for (const auto& [kw, e] : args) {
      types.push_back(e->ty);
      kws.push_back(kw);
    }
    std::vector<std::string> tried;
    for (const OpEntry* op : candidates) {
      std::string why;
      std::optional<std::vector<int>> slots = Bind(*op, types, kws, &why);
      if (!slots.has_value()) {
        tried.push_back(absl::StrCat(op->schema_text, " (", why, ")"));
        continue;
      }
      ExprP n = Make(Expr::K::kCall, op->schema.returns.size() == 1 ? Ty::kTensor : Ty::kTuple, at);
      n->op = op;
      n->tuple_size = static_cast<int>(op->schema.returns.size());
      n->c.resize(op->schema.arguments.size());
      for (size_t i = 0; i < args.size(); ++i) n->c[(*slots)[i]] = std::move(args[i].second);
      return Deepen(std::move(n));
    }
    std::vector<std::string> shown;
    for (Ty t : types) shown.emplace_back(TyName(t));
    return Error(at.line, at.col, absl::StrCat("no overload of '", callee, "' takes (", absl::StrJoin(shown, ", "),
                                               "): ", absl::StrJoin(tried, "; ")));
  }

 public:
  // The schema argument each of `types` (with keywords `kws`, "" for
  // positional) binds to, or nullopt with the reason in *why: too many
  // arguments, an unknown or repeated keyword, a type the argument does not
  // take, a required argument left out, or an op a derivative may not call.
  static std::optional<std::vector<int>> Bind(const OpEntry& op, const std::vector<Ty>& types,
                                              const std::vector<std::string>& kws, std::string* why) {
    const FunctionSchema& s = op.schema;
    if (op.is_inplace()) {
      *why = "it writes in place";
      return std::nullopt;
    }
    for (const Argument& a : s.arguments) {
      if (a.is_write) {
        *why = "it writes in place";
        return std::nullopt;
      }
    }
    for (const Return& r : s.returns) {
      if (r.type != ArgType::kTensor) {
        *why = "it does not return Tensors";
        return std::nullopt;
      }
    }
    std::vector<int> slots(types.size(), -1);
    std::vector<bool> filled(s.arguments.size(), false);
    for (size_t i = 0; i < types.size(); ++i) {
      int a = -1;
      if (kws[i].empty()) {
        a = static_cast<int>(i);
        if (a >= static_cast<int>(s.arguments.size()) || s.arguments[a].kwarg_only) {
          *why = "too many positional arguments";
          return std::nullopt;
        }
      } else {
        a = s.ArgIndex(kws[i]);
        if (a < 0) {
          *why = absl::StrCat("no argument '", kws[i], "'");
          return std::nullopt;
        }
      }
      if (filled[a]) {
        *why = absl::StrCat("argument '", s.arguments[a].name, "' given twice");
        return std::nullopt;
      }
      if (!Takes(s.arguments[a], types[i])) {
        *why = absl::StrCat("argument '", s.arguments[a].name, "' takes no ", TyName(types[i]));
        return std::nullopt;
      }
      filled[a] = true;
      slots[i] = a;
    }
    for (size_t a = 0; a < s.arguments.size(); ++a) {
      if (!filled[a] && !s.arguments[a].default_value.has_value() && !s.arguments[a].optional) {
        *why = absl::StrCat("argument '", s.arguments[a].name, "' is missing");
        return std::nullopt;
      }
    }
    return slots;
  }

  static bool Takes(const Argument& a, Ty t) {
    if (t == Ty::kNone) return a.optional;
    switch (a.type) {
      case ArgType::kTensor: return IsTensorish(t);
      case ArgType::kScalar: return IsNumber(t);
      case ArgType::kInt: return t == Ty::kInt;
      case ArgType::kFloat: return t == Ty::kFloat || t == Ty::kInt;
      case ArgType::kBool: return t == Ty::kBool;
      case ArgType::kIntList: return t == Ty::kIntList || t == Ty::kInt;
      case ArgType::kDtype: return t == Ty::kDtype;
      case ArgType::kString: return t == Ty::kStr;
      default: return false;
    }
  }

 private:
  const FunctionSchema& schema_;
  std::vector<Tok> t_;
  size_t pos_ = 0;
  int nesting_ = 0;
  absl::flat_hash_map<std::string, int> locals_;
  std::vector<Ty> local_types_;
  std::vector<int> local_tuple_sizes_;
  std::vector<int> local_depths_;
  std::vector<std::string> ext_calls_;
};

// The saved tensors `e` reads, in the order Run reads them: a local's reads
// where a line first reads it (later reads of it read nothing new, and a
// line that runs after another read it reads nothing new either:
// PredictSavedReads drops repeats). `expanded`: the locals this line has
// expanded already (each once, so a chain of locals stays linear).
void CollectReads(const Expr& e, const DeclaredDerivative::Program& p, int when, std::vector<bool>& expanded,
                  std::vector<SavedReadsItem>& out) {
  switch (e.k) {
    case Expr::K::kInput:
      out.push_back(SavedReadsItem{false, when, SavedRead::Kind::kInput, e.index});
      return;
    case Expr::K::kOutput:
      out.push_back(SavedReadsItem{false, when, SavedRead::Kind::kOutput, e.index});
      return;
    case Expr::K::kLocal:
      if (expanded[e.index]) return;
      expanded[e.index] = true;
      for (const Line& l : p.lines) {
        if (l.k == Line::K::kLet && l.local == e.index) CollectReads(*l.e, p, when, expanded, out);
      }
      return;
    default:
      for (const ExprP& c : e.c) {
        if (c != nullptr) CollectReads(*c, p, when, expanded, out);
      }
  }
}

// ---- running ------------------------------------------------------------------------

struct Val {
  enum class K { kTensor, kTuple, kValue };
  K k = K::kValue;
  int tensor = -1;
  std::vector<int> tuple;
  Value value;
};

class Runner {
 public:
  Runner(absl::string_view op, const DeclaredDerivative::Program& p, DerivativeHost& host)
      : op_(op), p_(p), host_(host), locals_(p.n_locals) {}

  absl::StatusOr<std::vector<int>> Run() {
    std::vector<int> out(p_.n_args, -1);
    for (const Line& l : p_.lines) {
      if (l.k != Line::K::kGrad) continue;
      bool needed = false;
      for (int a : l.targets) needed = needed || host_.Needs(a);
      if (!needed) continue;
      TD_ASSIGN_OR_RETURN(Val v, Eval(*l.e));
      if (l.targets.size() == 1) {
        TD_ASSIGN_OR_RETURN(out[l.targets[0]], OneTensor(v, *l.e));
        continue;
      }
      if (v.k != Val::K::kTuple || v.tuple.size() != l.targets.size()) {
        return Err(*l.e, absl::StrCat("gives ", v.k == Val::K::kTuple ? v.tuple.size() : 1, " outputs for ",
                                      l.targets.size(), " gradients"));
      }
      for (size_t i = 0; i < l.targets.size(); ++i) out[l.targets[i]] = v.tuple[i];
    }
    return out;
  }

 private:
  absl::Status Err(const Expr& e, absl::string_view what) const {
    return RuntimeErr(absl::StrCat(op_, ": derivative line ", e.line, ", column ", e.col, ": ", what));
  }
  // A marker: the host recorded the error.
  static absl::Status HostFailed() { return InternalErr("the derivative's host failed"); }

  absl::StatusOr<int> OneTensor(const Val& v, const Expr& e) const {
    if (v.k == Val::K::kTensor) return v.tensor;
    if (v.k == Val::K::kTuple && v.tuple.size() == 1) return v.tuple[0];
    return Err(e, absl::StrCat("an op of ", v.tuple.size(), " outputs where one Tensor is needed; pick one with [i]"));
  }

  absl::StatusOr<Val> Eval(const Expr& e) {
    Val v;
    switch (e.k) {
      case Expr::K::kConst:
        v.value = e.value;
        return v;
      case Expr::K::kGrad:
      case Expr::K::kInput:
      case Expr::K::kOutput:
        v.k = Val::K::kTensor;
        v.tensor = e.k == Expr::K::kGrad    ? host_.Grad(e.index)
                   : e.k == Expr::K::kInput ? host_.Input(e.index)
                                            : host_.Output(e.index);
        if (host_.failed()) return HostFailed();
        return v;
      case Expr::K::kArg:
        v.value = host_.Arg(e.index);
        return v;
      case Expr::K::kLocal: {
        std::optional<Val>& slot = locals_[e.index];
        if (!slot.has_value()) {
          for (const Line& l : p_.lines) {
            if (l.k == Line::K::kLet && l.local == e.index) {
              TD_ASSIGN_OR_RETURN(Val got, Eval(*l.e));
              slot = std::move(got);
            }
          }
        }
        return *slot;
      }
      case Expr::K::kList: {
        Shape s;
        for (const ExprP& c : e.c) {
          TD_ASSIGN_OR_RETURN(Val x, Eval(*c));
          TD_ASSIGN_OR_RETURN(const Scalar n, Number(x, *c));
          s.push_back(n.to_int());
        }
        v.value = Value(s);
        return v;
      }
      case Expr::K::kNumNeg: {
        TD_ASSIGN_OR_RETURN(Val x, Eval(*e.c[0]));
        TD_ASSIGN_OR_RETURN(const Scalar s, Number(x, *e.c[0]));
        int64_t neg = 0;
        if (!s.is_float() && __builtin_sub_overflow(int64_t{0}, s.to_int(), &neg)) return Err(e, "integer overflow");
        v.value = s.is_float() ? Value(-s.to_double()) : Value(neg);
        return v;
      }
      case Expr::K::kNumBin: {
        TD_ASSIGN_OR_RETURN(Val x, Eval(*e.c[0]));
        TD_ASSIGN_OR_RETURN(Val y, Eval(*e.c[1]));
        TD_ASSIGN_OR_RETURN(const Scalar a, Number(x, *e.c[0]));
        TD_ASSIGN_OR_RETURN(const Scalar b, Number(y, *e.c[1]));
        if (e.bin != '/' && !a.is_float() && !b.is_float()) {
          const int64_t p = a.to_int(), q = b.to_int();
          int64_t r = 0;
          const bool over = e.bin == '+'   ? __builtin_add_overflow(p, q, &r)
                            : e.bin == '-' ? __builtin_sub_overflow(p, q, &r)
                                           : __builtin_mul_overflow(p, q, &r);
          if (over) return Err(e, "integer overflow");
          v.value = Value(r);
        } else {
          const double p = a.to_double(), q = b.to_double();
          if (e.bin == '/' && q == 0) return Err(e, "division by zero");
          v.value = Value(e.bin == '+' ? p + q : e.bin == '-' ? p - q : e.bin == '*' ? p * q : p / q);
        }
        return v;
      }
      case Expr::K::kIndex: {
        TD_ASSIGN_OR_RETURN(Val x, Eval(*e.c[0]));
        if (x.k == Val::K::kTensor && e.index == 0) return x;
        if (x.k != Val::K::kTuple || static_cast<size_t>(e.index) >= x.tuple.size()) {
          return Err(e, absl::StrCat("output ", e.index, " of an op of ", x.k == Val::K::kTuple ? x.tuple.size() : 1,
                                     " outputs"));
        }
        v.k = Val::K::kTensor;
        v.tensor = x.tuple[e.index];
        return v;
      }
      case Expr::K::kCall: {
        std::vector<DerivativeValue> args(e.c.size());
        for (size_t i = 0; i < e.c.size(); ++i) {
          if (e.c[i] == nullptr) {
            const Argument& a = e.op->schema.arguments[i];
            args[i].value = a.default_value.has_value() ? *a.default_value : Value();
            continue;
          }
          TD_ASSIGN_OR_RETURN(Val x, Eval(*e.c[i]));
          TD_ASSIGN_OR_RETURN(args[i], Arg(x, *e.c[i]));
        }
        return Outputs(*e.op, std::move(args));
      }
      case Expr::K::kExtCall: {
        const OpEntry* op = host_.FindOp(e.name);
        if (op == nullptr) return Err(e, absl::StrCat("calls '", e.name, "', which is not defined"));
        std::vector<Val> xs;
        std::vector<Ty> types;
        for (const ExprP& c : e.c) {
          TD_ASSIGN_OR_RETURN(Val x, Eval(*c));
          types.push_back(x.k != Val::K::kValue ? Ty::kTensor : TypeOf(x.value));
          xs.push_back(std::move(x));
        }
        std::string why;
        std::optional<std::vector<int>> slots = Compiler::Bind(*op, types, e.kw, &why);
        if (!slots.has_value()) return Err(e, absl::StrCat("cannot call ", op->schema_text, ": ", why));
        std::vector<DerivativeValue> args(op->schema.arguments.size());
        std::vector<bool> given(args.size(), false);
        for (size_t i = 0; i < xs.size(); ++i) {
          TD_ASSIGN_OR_RETURN(args[(*slots)[i]], Arg(xs[i], *e.c[i]));
          given[(*slots)[i]] = true;
        }
        for (size_t i = 0; i < args.size(); ++i) {
          const Argument& a = op->schema.arguments[i];
          if (!given[i]) args[i].value = a.default_value.has_value() ? *a.default_value : Value();
        }
        return Outputs(*op, std::move(args));
      }
    }
    return Err(e, "an expression of no known kind");
  }

  // The number `x` holds; an error naming the expression for anything else
  // (an optional argument that is None).
  absl::StatusOr<Scalar> Number(const Val& x, const Expr& e) const {
    if (x.k == Val::K::kValue) {
      switch (x.value.kind()) {
        case Value::Kind::kInt:
        case Value::Kind::kFloat:
        case Value::Kind::kBool:
        case Value::Kind::kScalar:
          return x.value.scalar();
        default:
          break;
      }
    }
    return Err(e, absl::StrCat("a number is needed, got ", x.k != Val::K::kValue ? "a Tensor" : TyName(TypeOf(x.value))));
  }

  static Ty TypeOf(const Value& v) {
    switch (v.kind()) {
      case Value::Kind::kInt: return Ty::kInt;
      case Value::Kind::kFloat: return Ty::kFloat;
      case Value::Kind::kBool: return Ty::kBool;
      case Value::Kind::kScalar: return Ty::kScalar;
      case Value::Kind::kIntList: return Ty::kIntList;
      case Value::Kind::kString: return Ty::kStr;
      case Value::Kind::kDtype: return Ty::kDtype;
      default: return Ty::kNone;
    }
  }

  absl::StatusOr<DerivativeValue> Arg(const Val& x, const Expr& e) const {
    DerivativeValue d;
    if (x.k == Val::K::kValue) {
      d.value = x.value;
      return d;
    }
    d.is_tensor = true;
    TD_ASSIGN_OR_RETURN(d.tensor, OneTensor(x, e));
    return d;
  }

  absl::StatusOr<Val> Outputs(const OpEntry& op, std::vector<DerivativeValue> args) {
    std::vector<int> outs = host_.Call(op, std::move(args));
    if (host_.failed()) return HostFailed();
    Val v;
    if (outs.size() == 1) {
      v.k = Val::K::kTensor;
      v.tensor = outs[0];
    } else {
      v.k = Val::K::kTuple;
      v.tuple = std::move(outs);
    }
    return v;
  }

  absl::string_view op_;
  const DeclaredDerivative::Program& p_;
  DerivativeHost& host_;
  std::vector<std::optional<Val>> locals_;
};

}  // namespace

DeclaredDerivative::~DeclaredDerivative() = default;

absl::StatusOr<std::shared_ptr<const DeclaredDerivative>> DeclaredDerivative::Compile(const FunctionSchema& schema,
                                                                                      absl::string_view text) {
  if (text.size() > kMaxDeclaredDerivativeBytes) {
    return RuntimeErr(absl::StrCat("a derivative of ", text.size(), " bytes (at most ", kMaxDeclaredDerivativeBytes,
                                   ")"));
  }
  for (const Argument& a : schema.arguments) {
    for (absl::string_view name : {"grad", "grads", "result", "results"}) {
      if (a.name == name) {
        return RuntimeErr(absl::StrCat("argument '", a.name, "' has a name the derivative language keeps for the ",
                                       name[0] == 'g' ? "gradient" : "output", "s; rename it to give a derivative"));
      }
    }
  }
  TD_ASSIGN_OR_RETURN(std::vector<Tok> toks, Lex(text));
  std::shared_ptr<DeclaredDerivative> d(new DeclaredDerivative());
  d->text_ = std::string(text);
  d->program_ = std::make_unique<Program>();
  Compiler c(schema, std::move(toks));
  TD_RETURN_IF_ERROR(c.Lines(*d->program_, d->extension_calls_));
  std::vector<bool> given(schema.arguments.size(), false);
  for (const Line& l : d->program_->lines) {
    if (l.k != Line::K::kGrad) continue;
    for (int a : l.targets) {
      given[a] = true;
      std::vector<bool> expanded(d->program_->n_locals, false);
      CollectReads(*l.e, *d->program_, a, expanded, d->reads_);
    }
  }
  for (size_t a = 0; a < schema.arguments.size(); ++a) {
    if (!given[a] && IsDifferentiableArgument(schema.arguments[a])) {
      d->reads_.push_back(SavedReadsItem{true, -1, SavedRead::Kind::kInput, static_cast<int>(a)});
    }
  }
  return std::shared_ptr<const DeclaredDerivative>(std::move(d));
}

absl::StatusOr<std::vector<int>> DeclaredDerivative::Run(absl::string_view op, DerivativeHost& host) const {
  Runner r(op, *program_, host);
  return r.Run();
}

}  // namespace tensord
