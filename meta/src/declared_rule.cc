// Declarative shape rules (declared_rule.h): a tokenizer, a recursive-descent
// parser into a small tree, a check of every name against the schema at
// compile time, and an evaluator over the bound arguments.
#include "tensord/meta/declared_rule.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "meta_common.h"
#include "meta_functions.h"
#include "tensord/meta/device.h"
#include "tensord/meta/dtype.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/op_table.h"
#include "tensord/meta/shape_rules.h"

namespace tensord {

// ---- the tree -----------------------------------------------------------------

namespace {

struct Node {
  enum class K { kInt, kBool, kNone, kName, kAttr, kCall, kIndex, kSlice, kList, kSplat, kNeg, kNot, kBin, kAnd, kOr,
                 kCmp, kIf };
  K k = K::kInt;
  int64_t i = 0;       // kInt; kBool 0/1
  std::string s;       // kName, kAttr (the attribute), kBin/kCmp (the operator)
  std::vector<std::unique_ptr<Node>> c;
  std::vector<std::string> kw;  // kCall: the keyword of each argument (c[1..]), "" when positional
  bool has_lo = false, has_hi = false;  // kSlice: c[0] the sequence, then lo and hi when present
  int line = 1, col = 1;
  int depth = 1;  // of the tree under it: the evaluator recurses this deep
};
using NodeP = std::unique_ptr<Node>;

// A check's message: literal text and expressions, in order.
struct MessagePart {
  std::string text;
  NodeP expr;  // null for text
};

struct Statement {
  enum class K { kCheck, kLet, kReturn };
  K k = K::kCheck;
  std::string name;                  // kLet
  std::vector<NodeP> exprs;          // kCheck: the condition; kLet: the value; kReturn: the outputs
  std::vector<MessagePart> message;  // kCheck
  int line = 1;
};

}  // namespace

struct DeclaredShapeRule::Program {
  std::vector<Statement> statements;
  std::vector<std::string> arg_names;  // the schema's, in order
};

namespace {

// ---- tokens -------------------------------------------------------------------

struct Token {
  enum class K { kName, kInt, kString, kOp, kEnd, kEndOfStatement };
  K k = K::kEnd;
  std::string text;
  int64_t value = 0;
  int line = 1, col = 1;
};

absl::Status SyntaxError(int line, int col, absl::string_view what) {
  return RuntimeErr(absl::StrCat("shape rule line ", line, ", column ", col, ": ", what));
}

absl::StatusOr<std::vector<Token>> Tokenize(absl::string_view src) {
  std::vector<Token> out;
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
  while (i < src.size()) {
    const char ch = src[i];
    if (ch == '#') {
      while (i < src.size() && src[i] != '\n') advance(1);
      continue;
    }
    if (ch == '\n' || ch == ';') {
      if (depth == 0 && (out.empty() || out.back().k != Token::K::kEndOfStatement)) {
        out.push_back(Token{Token::K::kEndOfStatement, std::string(1, ch), 0, line, col});
      }
      advance(1);
      continue;
    }
    if (absl::ascii_isspace(static_cast<unsigned char>(ch))) {
      advance(1);
      continue;
    }
    Token t;
    t.line = line;
    t.col = col;
    if (absl::ascii_isalpha(static_cast<unsigned char>(ch)) || ch == '_') {
      size_t j = i;
      while (j < src.size() && (absl::ascii_isalnum(static_cast<unsigned char>(src[j])) || src[j] == '_')) ++j;
      t.k = Token::K::kName;
      t.text = std::string(src.substr(i, j - i));
      advance(j - i);
    } else if (absl::ascii_isdigit(static_cast<unsigned char>(ch))) {
      size_t j = i;
      int64_t v = 0;
      while (j < src.size() && absl::ascii_isdigit(static_cast<unsigned char>(src[j]))) {
        const int digit = src[j] - '0';
        if (v > (std::numeric_limits<int64_t>::max() - digit) / 10) return SyntaxError(line, col, "an integer too large");
        v = v * 10 + digit;
        ++j;
      }
      if (j < src.size() && (src[j] == '.' || absl::ascii_isalpha(static_cast<unsigned char>(src[j])))) {
        return SyntaxError(line, col, "only integers are numbers in a shape rule");
      }
      t.k = Token::K::kInt;
      t.value = v;
      t.text = std::string(src.substr(i, j - i));
      advance(j - i);
    } else if (ch == '"' || ch == '\'') {
      size_t j = i + 1;
      std::string s;
      while (j < src.size() && src[j] != ch && src[j] != '\n') {
        if (src[j] == '\\' && j + 1 < src.size()) {
          const char e = src[j + 1];
          s += e == 'n' ? '\n' : e;
          j += 2;
          continue;
        }
        s += src[j++];
      }
      if (j >= src.size() || src[j] != ch) return SyntaxError(line, col, "a string that does not end on its line");
      t.k = Token::K::kString;
      t.text = std::move(s);
      advance(j + 1 - i);
    } else {
      static constexpr absl::string_view kTwo[] = {"==", "!=", "<=", ">=", "//"};
      std::string op(1, ch);
      for (absl::string_view two : kTwo) {
        if (src.substr(i, 2) == two) op = std::string(two);
      }
      if (op.size() == 1 && absl::string_view("()[],:.=<>+-*%").find(ch) == absl::string_view::npos) {
        return SyntaxError(line, col, absl::StrCat("unexpected character ", ShowTextChar(ch)));
      }
      if (op == "(" || op == "[") ++depth;
      if ((op == ")" || op == "]") && depth > 0) --depth;
      t.k = Token::K::kOp;
      t.text = op;
      advance(op.size());
    }
    out.push_back(std::move(t));
  }
  if (out.empty() || out.back().k != Token::K::kEndOfStatement) {
    out.push_back(Token{Token::K::kEndOfStatement, "", 0, line, col});
  }
  out.push_back(Token{Token::K::kEnd, "", 0, line, col});
  return out;
}

// ---- parser -------------------------------------------------------------------

// How deep expressions may nest, in the parser's recursion and in the tree
// the evaluator walks (a long chain a + b + ... is as deep as it is long):
// far beyond any real rule, far below what a thread's stack holds.
constexpr int kMaxNesting = 64;
constexpr int kMaxTreeDepth = 256;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  absl::StatusOr<std::vector<Statement>> Statements() {
    std::vector<Statement> out;
    while (Peek().k != Token::K::kEnd) {
      if (Peek().k == Token::K::kEndOfStatement) {
        ++pos_;
        continue;
      }
      TD_ASSIGN_OR_RETURN(Statement s, OneStatement());
      out.push_back(std::move(s));
      if (Peek().k != Token::K::kEndOfStatement) return Expected("the end of the statement");
      ++pos_;
    }
    return out;
  }

 private:
  const Token& Peek(size_t ahead = 0) const { return t_[std::min(pos_ + ahead, t_.size() - 1)]; }
  bool IsOp(absl::string_view op, size_t ahead = 0) const {
    return Peek(ahead).k == Token::K::kOp && Peek(ahead).text == op;
  }
  bool IsName(absl::string_view name) const { return Peek().k == Token::K::kName && Peek().text == name; }
  absl::Status Expected(absl::string_view what) const {
    const Token& t = Peek();
    const std::string got = t.k == Token::K::kEnd || t.k == Token::K::kEndOfStatement ? "the end of the line"
                                                                                       : absl::StrCat("'", t.text, "'");
    return SyntaxError(t.line, t.col, absl::StrCat("expected ", what, ", got ", got));
  }
  absl::Status Eat(absl::string_view op) {
    if (!IsOp(op)) return Expected(absl::StrCat("'", op, "'"));
    ++pos_;
    return absl::OkStatus();
  }
  // Makes `child` the last child of `parent`, within kMaxTreeDepth.
  static absl::Status Adopt(Node* parent, NodeP child) {
    parent->depth = std::max(parent->depth, child->depth + 1);
    if (parent->depth > kMaxTreeDepth) {
      return SyntaxError(parent->line, parent->col, absl::StrCat("an expression more than ", kMaxTreeDepth,
                                                                 " operations deep"));
    }
    parent->c.push_back(std::move(child));
    return absl::OkStatus();
  }
  // Counts the parser's nesting while it recurses into a sub-expression.
  class Nest {
   public:
    explicit Nest(Parser* p) : p_(p) { ++p_->nesting_; }
    ~Nest() { --p_->nesting_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;
    absl::Status Check() const {
      if (p_->nesting_ <= kMaxNesting) return absl::OkStatus();
      const Token& t = p_->Peek();
      return SyntaxError(t.line, t.col, absl::StrCat("expressions nested more than ", kMaxNesting, " deep"));
    }

   private:
    Parser* p_;
  };
  NodeP Make(Node::K k, const Token& at) {
    auto n = std::make_unique<Node>();
    n->k = k;
    n->line = at.line;
    n->col = at.col;
    return n;
  }

  absl::StatusOr<Statement> OneStatement() {
    Statement s;
    s.line = Peek().line;
    if (IsName("check")) {
      ++pos_;
      s.k = Statement::K::kCheck;
      TD_ASSIGN_OR_RETURN(NodeP cond, Expr());
      s.exprs.push_back(std::move(cond));
      TD_RETURN_IF_ERROR(Eat(","));
      if (Peek().k != Token::K::kString) return Expected("the check's message (a string)");
      TD_ASSIGN_OR_RETURN(s.message, Message(Peek()));
      ++pos_;
      return s;
    }
    if (IsName("return")) {
      ++pos_;
      s.k = Statement::K::kReturn;
      do {
        TD_ASSIGN_OR_RETURN(NodeP e, Expr());
        s.exprs.push_back(std::move(e));
      } while (IsOp(",") && (++pos_, true));
      return s;
    }
    if (Peek().k == Token::K::kName && IsOp("=", 1)) {
      s.k = Statement::K::kLet;
      s.name = Peek().text;
      if (IsKeyword(s.name)) return SyntaxError(Peek().line, Peek().col, absl::StrCat("'", s.name, "' is a keyword"));
      pos_ += 2;
      TD_ASSIGN_OR_RETURN(NodeP e, Expr());
      s.exprs.push_back(std::move(e));
      return s;
    }
    return Expected("'check', 'return' or 'NAME = ...'");
  }

  static bool IsKeyword(absl::string_view s) {
    for (absl::string_view k : {"check", "return", "and", "or", "not", "if", "else", "is", "None", "True", "False"}) {
      if (s == k) return true;
    }
    return false;
  }

  // "text {expr} text": the expressions parsed now, so that a bad one fails
  // at compile time.
  absl::StatusOr<std::vector<MessagePart>> Message(const Token& tok) {
    std::vector<MessagePart> parts;
    const std::string& m = tok.text;
    std::string text;
    for (size_t i = 0; i < m.size(); ++i) {
      if ((m[i] == '{' || m[i] == '}') && i + 1 < m.size() && m[i + 1] == m[i]) {
        text += m[i++];
        continue;
      }
      if (m[i] == '}') return SyntaxError(tok.line, tok.col, "a '}' without '{' in the message (write '}}')");
      if (m[i] != '{') {
        text += m[i];
        continue;
      }
      const size_t close = m.find('}', i);
      if (close == std::string::npos) return SyntaxError(tok.line, tok.col, "a '{' without '}' in the message");
      if (!text.empty()) parts.push_back(MessagePart{std::move(text), nullptr});
      text.clear();
      TD_ASSIGN_OR_RETURN(std::vector<Token> inner, Tokenize(absl::string_view(m).substr(i + 1, close - i - 1)));
      for (Token& t : inner) {
        t.line = tok.line;
        t.col = tok.col;
      }
      Parser sub(std::move(inner));
      TD_ASSIGN_OR_RETURN(NodeP e, sub.Expr());
      if (sub.Peek().k != Token::K::kEndOfStatement) return sub.Expected("the end of '{...}' in the message");
      parts.push_back(MessagePart{"", std::move(e)});
      i = close;
    }
    if (!text.empty()) parts.push_back(MessagePart{std::move(text), nullptr});
    return parts;
  }

 public:
  absl::StatusOr<NodeP> Expr() {
    const Nest nest(this);
    TD_RETURN_IF_ERROR(nest.Check());
    TD_ASSIGN_OR_RETURN(NodeP a, Or());
    if (!IsName("if")) return a;
    const Token at = Peek();
    ++pos_;
    TD_ASSIGN_OR_RETURN(NodeP cond, Or());
    if (!IsName("else")) return Expected("'else'");
    ++pos_;
    TD_ASSIGN_OR_RETURN(NodeP b, Expr());
    NodeP n = Make(Node::K::kIf, at);
    TD_RETURN_IF_ERROR(Adopt(n.get(), std::move(cond)));
    TD_RETURN_IF_ERROR(Adopt(n.get(), std::move(a)));
    TD_RETURN_IF_ERROR(Adopt(n.get(), std::move(b)));
    return n;
  }

 private:
  absl::StatusOr<NodeP> Or() {
    TD_ASSIGN_OR_RETURN(NodeP a, And());
    while (IsName("or")) {
      NodeP n = Make(Node::K::kOr, Peek());
      ++pos_;
      TD_ASSIGN_OR_RETURN(NodeP b, And());
      TD_RETURN_IF_ERROR(Adopt(n.get(), std::move(a)));
      TD_RETURN_IF_ERROR(Adopt(n.get(), std::move(b)));
      a = std::move(n);
    }
    return a;
  }
  absl::StatusOr<NodeP> And() {
    TD_ASSIGN_OR_RETURN(NodeP a, Not());
    while (IsName("and")) {
      NodeP n = Make(Node::K::kAnd, Peek());
      ++pos_;
      TD_ASSIGN_OR_RETURN(NodeP b, Not());
      TD_RETURN_IF_ERROR(Adopt(n.get(), std::move(a)));
      TD_RETURN_IF_ERROR(Adopt(n.get(), std::move(b)));
      a = std::move(n);
    }
    return a;
  }
  absl::StatusOr<NodeP> Not() {
    if (!IsName("not")) return Compare();
    const Nest nest(this);
    TD_RETURN_IF_ERROR(nest.Check());
    NodeP n = Make(Node::K::kNot, Peek());
    ++pos_;
    TD_ASSIGN_OR_RETURN(NodeP a, Not());
    TD_RETURN_IF_ERROR(Adopt(n.get(), std::move(a)));
    return n;
  }
  absl::StatusOr<NodeP> Compare() {
    TD_ASSIGN_OR_RETURN(NodeP a, Sum());
    std::string op;
    const Token at = Peek();
    for (absl::string_view c : {"==", "!=", "<", "<=", ">", ">="}) {
      if (IsOp(c)) op = std::string(c);
    }
    if (op.empty() && IsName("is")) op = (Peek(1).k == Token::K::kName && Peek(1).text == "not") ? "is not" : "is";
    if (op.empty()) return a;
    pos_ += op == "is not" ? 2 : 1;
    TD_ASSIGN_OR_RETURN(NodeP b, Sum());
    NodeP n = Make(Node::K::kCmp, at);
    n->s = op;
    TD_RETURN_IF_ERROR(Adopt(n.get(), std::move(a)));
    TD_RETURN_IF_ERROR(Adopt(n.get(), std::move(b)));
    return n;
  }
  absl::StatusOr<NodeP> Sum() {
    TD_ASSIGN_OR_RETURN(NodeP a, Term());
    while (IsOp("+") || IsOp("-")) {
      NodeP n = Make(Node::K::kBin, Peek());
      n->s = Peek().text;
      ++pos_;
      TD_ASSIGN_OR_RETURN(NodeP b, Term());
      TD_RETURN_IF_ERROR(Adopt(n.get(), std::move(a)));
      TD_RETURN_IF_ERROR(Adopt(n.get(), std::move(b)));
      a = std::move(n);
    }
    return a;
  }
  absl::StatusOr<NodeP> Term() {
    TD_ASSIGN_OR_RETURN(NodeP a, Unary());
    while (IsOp("*") || IsOp("//") || IsOp("%")) {
      NodeP n = Make(Node::K::kBin, Peek());
      n->s = Peek().text;
      ++pos_;
      TD_ASSIGN_OR_RETURN(NodeP b, Unary());
      TD_RETURN_IF_ERROR(Adopt(n.get(), std::move(a)));
      TD_RETURN_IF_ERROR(Adopt(n.get(), std::move(b)));
      a = std::move(n);
    }
    return a;
  }
  absl::StatusOr<NodeP> Unary() {
    if (!IsOp("-")) return Postfix();
    const Nest nest(this);
    TD_RETURN_IF_ERROR(nest.Check());
    NodeP n = Make(Node::K::kNeg, Peek());
    ++pos_;
    TD_ASSIGN_OR_RETURN(NodeP a, Unary());
    TD_RETURN_IF_ERROR(Adopt(n.get(), std::move(a)));
    return n;
  }
  absl::StatusOr<NodeP> Postfix() {
    TD_ASSIGN_OR_RETURN(NodeP a, Primary());
    while (true) {
      if (IsOp(".")) {
        ++pos_;
        if (Peek().k != Token::K::kName) return Expected("an attribute name after '.'");
        NodeP n = Make(Node::K::kAttr, Peek());
        n->s = Peek().text;
        ++pos_;
        TD_RETURN_IF_ERROR(Adopt(n.get(), std::move(a)));
        a = std::move(n);
      } else if (IsOp("(")) {
        NodeP n = Make(Node::K::kCall, Peek());
        ++pos_;
        TD_RETURN_IF_ERROR(Adopt(n.get(), std::move(a)));
        while (!IsOp(")")) {
          std::string kw;
          if (Peek().k == Token::K::kName && IsOp("=", 1)) {
            kw = Peek().text;
            pos_ += 2;
          }
          TD_ASSIGN_OR_RETURN(NodeP arg, Expr());
          TD_RETURN_IF_ERROR(Adopt(n.get(), std::move(arg)));
          n->kw.push_back(kw);
          if (!IsOp(",")) break;
          ++pos_;
        }
        TD_RETURN_IF_ERROR(Eat(")"));
        a = std::move(n);
      } else if (IsOp("[")) {
        const Token at = Peek();
        ++pos_;
        NodeP lo, hi;
        if (!IsOp(":")) {
          TD_ASSIGN_OR_RETURN(lo, Expr());
        }
        if (IsOp(":")) {
          ++pos_;
          if (!IsOp("]")) {
            TD_ASSIGN_OR_RETURN(hi, Expr());
          }
          NodeP n = Make(Node::K::kSlice, at);
          TD_RETURN_IF_ERROR(Adopt(n.get(), std::move(a)));
          n->has_lo = lo != nullptr;
          n->has_hi = hi != nullptr;
          if (lo) TD_RETURN_IF_ERROR(Adopt(n.get(), std::move(lo)));
          if (hi) TD_RETURN_IF_ERROR(Adopt(n.get(), std::move(hi)));
          a = std::move(n);
        } else {
          if (lo == nullptr) return Expected("an index");
          NodeP n = Make(Node::K::kIndex, at);
          TD_RETURN_IF_ERROR(Adopt(n.get(), std::move(a)));
          TD_RETURN_IF_ERROR(Adopt(n.get(), std::move(lo)));
          a = std::move(n);
        }
        TD_RETURN_IF_ERROR(Eat("]"));
      } else {
        return a;
      }
    }
  }
  absl::StatusOr<NodeP> Primary() {
    const Token& t = Peek();
    if (t.k == Token::K::kInt) {
      NodeP n = Make(Node::K::kInt, t);
      n->i = t.value;
      ++pos_;
      return n;
    }
    if (t.k == Token::K::kName) {
      if (t.text == "None" || t.text == "True" || t.text == "False") {
        NodeP n = Make(t.text == "None" ? Node::K::kNone : Node::K::kBool, t);
        n->i = t.text == "True";
        ++pos_;
        return n;
      }
      if (IsKeyword(t.text)) return Expected("a value");
      NodeP n = Make(Node::K::kName, t);
      n->s = t.text;
      ++pos_;
      return n;
    }
    if (IsOp("(")) {
      ++pos_;
      TD_ASSIGN_OR_RETURN(NodeP e, Expr());
      TD_RETURN_IF_ERROR(Eat(")"));
      return e;
    }
    if (IsOp("[")) {
      NodeP n = Make(Node::K::kList, t);
      ++pos_;
      while (!IsOp("]")) {
        if (IsOp("*")) {
          NodeP splat = Make(Node::K::kSplat, Peek());
          ++pos_;
          TD_ASSIGN_OR_RETURN(NodeP e, Expr());
          TD_RETURN_IF_ERROR(Adopt(splat.get(), std::move(e)));
          TD_RETURN_IF_ERROR(Adopt(n.get(), std::move(splat)));
        } else {
          TD_ASSIGN_OR_RETURN(NodeP e, Expr());
          TD_RETURN_IF_ERROR(Adopt(n.get(), std::move(e)));
        }
        if (!IsOp(",")) break;
        ++pos_;
      }
      TD_RETURN_IF_ERROR(Eat("]"));
      return n;
    }
    return Expected("a value");
  }

  std::vector<Token> t_;
  size_t pos_ = 0;
  int nesting_ = 0;
};

// ---- names --------------------------------------------------------------------

constexpr absl::string_view kFunctions[] = {"len", "prod", "min", "max", "broadcast", "matmul", "reduce", "promote",
                                            "is_floating_point", "empty", "like"};
constexpr absl::string_view kConstants[] = {"contiguous", "elementwise"};

bool IsFunction(absl::string_view s) {
  return std::find(std::begin(kFunctions), std::end(kFunctions), s) != std::end(kFunctions);
}
bool IsConstant(absl::string_view s) {
  return std::find(std::begin(kConstants), std::end(kConstants), s) != std::end(kConstants);
}

// Every name in `n` is an argument, a local defined above, a dtype, a
// function (as a callee) or a constant.
absl::Status CheckNames(const Node& n, const std::vector<std::string>& known, bool callee = false) {
  if (n.k == Node::K::kName) {
    if (std::find(known.begin(), known.end(), n.s) != known.end()) return absl::OkStatus();
    if (callee && IsFunction(n.s)) return absl::OkStatus();
    if (!callee && (IsConstant(n.s) || ParseDtype(n.s).ok())) return absl::OkStatus();
    if (!callee && IsFunction(n.s)) {
      return SyntaxError(n.line, n.col, absl::StrCat("'", n.s, "' is a function: call it"));
    }
    return SyntaxError(n.line, n.col, absl::StrCat("'", n.s, "' is not an argument of the op, a name defined "
                                                   "above, a dtype or a function of the rule language"));
  }
  for (size_t i = 0; i < n.c.size(); ++i) {
    TD_RETURN_IF_ERROR(CheckNames(*n.c[i], known, n.k == Node::K::kCall && i == 0));
  }
  return absl::OkStatus();
}

// ---- values -------------------------------------------------------------------

struct Val {
  enum class T { kNone, kInt, kFloat, kBool, kList, kTensor, kTensors, kDtype, kStr, kOut, kLayout };
  T t = T::kNone;
  int64_t i = 0;
  double d = 0;
  Shape l;
  const TensorMeta* tensor = nullptr;
  std::vector<const TensorMeta*> tensors;  // kTensors; nullptr for a None element of a Tensor?[]
  ScalarType dtype = ScalarType::kFloat32;
  bool has_dtype = false;  // kOut
  std::string s;
  int layout = 0;          // kOut, kLayout: 0 contiguous, 1 like, 2 elementwise
  const TensorMeta* like = nullptr;

  static Val Int(int64_t v) { Val x; x.t = T::kInt; x.i = v; return x; }
  static Val Bool(bool v) { Val x; x.t = T::kBool; x.i = v; return x; }
  static Val List(Shape v) { Val x; x.t = T::kList; x.l = std::move(v); return x; }
  static Val Dtype(ScalarType v) { Val x; x.t = T::kDtype; x.dtype = v; return x; }
};

absl::string_view TypeName(const Val& v) {
  switch (v.t) {
    case Val::T::kNone: return "None";
    case Val::T::kInt: return "an int";
    case Val::T::kFloat: return "a float";
    case Val::T::kBool: return "a bool";
    case Val::T::kList: return "a shape";
    case Val::T::kTensor: return "a Tensor";
    case Val::T::kTensors: return "a list of Tensors";
    case Val::T::kDtype: return "a dtype";
    case Val::T::kStr: return "a str";
    case Val::T::kOut: return "an output";
    case Val::T::kLayout: return "a layout";
  }
  return "a value";
}

std::string Show(const Val& v) {
  switch (v.t) {
    case Val::T::kNone: return "None";
    case Val::T::kInt: return absl::StrCat(v.i);
    case Val::T::kFloat: return absl::StrCat(v.d);
    case Val::T::kBool: return v.i ? "True" : "False";
    case Val::T::kList: return ShapeToString(v.l);
    case Val::T::kTensor: return absl::StrCat("Tensor", ShapeToString(v.tensor->sizes));
    case Val::T::kTensors: {
      std::vector<std::string> parts;
      for (const TensorMeta* t : v.tensors) parts.push_back(t == nullptr ? "None" : absl::StrCat("Tensor", ShapeToString(t->sizes)));
      return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
    }
    case Val::T::kDtype: return std::string(DtypeName(v.dtype));
    case Val::T::kStr: return v.s;
    case Val::T::kOut: return absl::StrCat("empty(", ShapeToString(v.l), ")");
    case Val::T::kLayout: return v.layout == 0 ? "contiguous" : v.layout == 1 ? "like(...)" : "elementwise";
  }
  return "?";
}

class Eval {
 public:
  Eval(absl::string_view op, absl::Span<const Value> args, const DeclaredShapeRule::Program& p) : op_(op), p_(p) {
    for (size_t i = 0; i < p.arg_names.size() && i < args.size(); ++i) vars_[p.arg_names[i]] = FromArg(args[i]);
    for (const Value& a : args) {
      if (a.is_tensor()) tensors_.push_back(a.tensor_ptr());
      if (a.kind() == Value::Kind::kTensorList) {
        for (const TensorMeta* t : a.tensor_list()) {
          if (t != nullptr) tensors_.push_back(t);
        }
      }
    }
  }

  absl::StatusOr<MetaResult> Run() {
    for (const Statement& s : p_.statements) {
      switch (s.k) {
        case Statement::K::kLet: {
          TD_ASSIGN_OR_RETURN(Val v, E(*s.exprs[0]));
          vars_[s.name] = std::move(v);
          break;
        }
        case Statement::K::kCheck: {
          TD_ASSIGN_OR_RETURN(bool ok, Truth(*s.exprs[0]));
          if (ok) break;
          std::string msg;
          for (const MessagePart& part : s.message) {
            if (part.expr == nullptr) {
              msg += part.text;
            } else {
              TD_ASSIGN_OR_RETURN(Val v, E(*part.expr));
              msg += Show(v);
            }
          }
          return RuntimeErr(absl::StrCat(op_, ": ", msg));
        }
        case Statement::K::kReturn:
          return Outputs(s);
      }
    }
    return InternalErr(absl::StrCat(op_, ": shape rule without return"));
  }

 private:
  static Val FromArg(const Value& a) {
    Val v;
    switch (a.kind()) {
      case Value::Kind::kTensor: v.t = Val::T::kTensor; v.tensor = a.tensor_ptr(); break;
      case Value::Kind::kTensorList:
        v.t = Val::T::kTensors;
        v.tensors.assign(a.tensor_list().begin(), a.tensor_list().end());
        break;
      case Value::Kind::kInt: v = Val::Int(a.to_int()); break;
      case Value::Kind::kBool: v = Val::Bool(a.to_bool()); break;
      case Value::Kind::kFloat: v.t = Val::T::kFloat; v.d = a.to_double(); break;
      case Value::Kind::kScalar: {
        const Scalar s = a.scalar();
        if (s.is_float()) {
          v.t = Val::T::kFloat;
          v.d = s.to_double();
        } else {
          v = s.is_bool() ? Val::Bool(s.to_bool()) : Val::Int(s.to_int());
        }
        break;
      }
      case Value::Kind::kIntList: v = Val::List(a.int_list()); break;
      case Value::Kind::kDtype: v = Val::Dtype(a.dtype()); break;
      case Value::Kind::kString: v.t = Val::T::kStr; v.s = a.str(); break;
      default: break;  // None (and the kinds Compile refuses)
    }
    return v;
  }

  absl::Status Err(const Node& n, absl::string_view what) const {
    return RuntimeErr(absl::StrCat(op_, ": shape rule line ", n.line, ": ", what));
  }
  absl::StatusOr<int64_t> AsInt(const Node& n, const Val& v, absl::string_view what) const {
    if (v.t == Val::T::kInt) return v.i;
    return Err(n, absl::StrCat(what, " is ", TypeName(v), ", not an int"));
  }
  absl::StatusOr<Shape> AsShape(const Node& n, const Val& v, absl::string_view what) const {
    if (v.t == Val::T::kList) return v.l;
    if (v.t == Val::T::kTensor) return v.tensor->sizes;
    return Err(n, absl::StrCat(what, " is ", TypeName(v), ", not a shape or a Tensor"));
  }
  absl::StatusOr<bool> Truth(const Node& n) {
    TD_ASSIGN_OR_RETURN(Val v, E(n));
    if (v.t == Val::T::kBool || v.t == Val::T::kInt) return v.i != 0;
    if (v.t == Val::T::kNone) return false;
    return Err(n, absl::StrCat("a condition is ", TypeName(v), ", not a bool"));
  }

  absl::StatusOr<Val> E(const Node& n) {
    switch (n.k) {
      case Node::K::kInt: return Val::Int(n.i);
      case Node::K::kBool: return Val::Bool(n.i != 0);
      case Node::K::kNone: return Val();
      case Node::K::kName: {
        if (auto it = vars_.find(n.s); it != vars_.end()) return it->second;
        if (n.s == "contiguous" || n.s == "elementwise") {
          Val v;
          v.t = Val::T::kLayout;
          v.layout = n.s == "contiguous" ? 0 : 2;
          return v;
        }
        absl::StatusOr<ScalarType> dt = ParseDtype(n.s);
        if (dt.ok()) return Val::Dtype(*dt);
        return Err(n, absl::StrCat("unknown name '", n.s, "'"));
      }
      case Node::K::kNeg: {
        TD_ASSIGN_OR_RETURN(Val a, E(*n.c[0]));
        TD_ASSIGN_OR_RETURN(int64_t v, AsInt(n, a, "the operand of '-'"));
        if (v == std::numeric_limits<int64_t>::min()) return Err(n, absl::StrCat("integer overflow in -(", v, ")"));
        return Val::Int(-v);
      }
      case Node::K::kNot: {
        TD_ASSIGN_OR_RETURN(bool v, Truth(*n.c[0]));
        return Val::Bool(!v);
      }
      case Node::K::kAnd: {
        TD_ASSIGN_OR_RETURN(bool a, Truth(*n.c[0]));
        if (!a) return Val::Bool(false);
        TD_ASSIGN_OR_RETURN(bool b, Truth(*n.c[1]));
        return Val::Bool(b);
      }
      case Node::K::kOr: {
        TD_ASSIGN_OR_RETURN(bool a, Truth(*n.c[0]));
        if (a) return Val::Bool(true);
        TD_ASSIGN_OR_RETURN(bool b, Truth(*n.c[1]));
        return Val::Bool(b);
      }
      case Node::K::kIf: {
        TD_ASSIGN_OR_RETURN(bool c, Truth(*n.c[0]));
        return E(*n.c[c ? 1 : 2]);
      }
      case Node::K::kBin: return Binary(n);
      case Node::K::kCmp: return Compare(n);
      case Node::K::kList: {
        Shape out;
        for (const NodeP& c : n.c) {
          if (c->k == Node::K::kSplat) {
            TD_ASSIGN_OR_RETURN(Val v, E(*c->c[0]));
            TD_ASSIGN_OR_RETURN(Shape s, AsShape(*c, v, "the operand of '*'"));
            out.insert(out.end(), s.begin(), s.end());
          } else {
            TD_ASSIGN_OR_RETURN(Val v, E(*c));
            TD_ASSIGN_OR_RETURN(int64_t x, AsInt(*c, v, "a list item"));
            out.push_back(x);
          }
        }
        return Val::List(std::move(out));
      }
      case Node::K::kSplat: return Err(n, "'*' splices a shape into a list: [*s, n]");
      case Node::K::kIndex: {
        TD_ASSIGN_OR_RETURN(Val sv, E(*n.c[0]));
        if (sv.t == Val::T::kTensors) {  // ts[i]: a Tensor (None for an absent element of a Tensor?[])
          TD_ASSIGN_OR_RETURN(Val iv, E(*n.c[1]));
          TD_ASSIGN_OR_RETURN(int64_t i, AsInt(n, iv, "an index"));
          const int64_t size = static_cast<int64_t>(sv.tensors.size());
          if (i < -size || i >= size) {
            return IndexErr(absl::StrCat(op_, ": shape rule line ", n.line, ": index ", i,
                                         " is out of range for a list of ", size, " Tensors"));
          }
          Val t;
          t.tensor = sv.tensors[static_cast<size_t>(i < 0 ? i + size : i)];
          t.t = t.tensor != nullptr ? Val::T::kTensor : Val::T::kNone;
          return t;
        }
        TD_ASSIGN_OR_RETURN(Shape s, AsShape(n, sv, "the indexed value"));
        TD_ASSIGN_OR_RETURN(Val iv, E(*n.c[1]));
        TD_ASSIGN_OR_RETURN(int64_t i, AsInt(n, iv, "an index"));
        const int64_t size = static_cast<int64_t>(s.size());
        if (i < -size || i >= size) {
          return IndexErr(absl::StrCat(op_, ": shape rule line ", n.line, ": index ", i, " is out of range for ",
                                       ShapeToString(s)));
        }
        return Val::Int(s[static_cast<size_t>(i < 0 ? i + size : i)]);
      }
      case Node::K::kSlice: {
        TD_ASSIGN_OR_RETURN(Val sv, E(*n.c[0]));
        TD_ASSIGN_OR_RETURN(Shape s, AsShape(n, sv, "the sliced value"));
        const int64_t size = static_cast<int64_t>(s.size());
        int64_t lo = 0, hi = size;
        size_t k = 1;
        if (n.has_lo) {
          TD_ASSIGN_OR_RETURN(Val v, E(*n.c[k++]));
          TD_ASSIGN_OR_RETURN(lo, AsInt(n, v, "a slice bound"));
        }
        if (n.has_hi) {
          TD_ASSIGN_OR_RETURN(Val v, E(*n.c[k++]));
          TD_ASSIGN_OR_RETURN(hi, AsInt(n, v, "a slice bound"));
        }
        auto clamp = [size](int64_t x) { return std::clamp<int64_t>(x < 0 ? x + size : x, 0, size); };
        lo = clamp(lo);
        hi = clamp(hi);
        return Val::List(hi > lo ? Shape(s.begin() + lo, s.begin() + hi) : Shape());
      }
      case Node::K::kAttr: {
        TD_ASSIGN_OR_RETURN(Val v, E(*n.c[0]));
        if (v.t != Val::T::kTensor) {
          if (v.t == Val::T::kDtype && n.s == "is_floating_point") {
            return Val::Bool(IsFloating(v.dtype));
          }
          return Err(n, absl::StrCat("'.", n.s, "' of ", TypeName(v), ": attributes are a Tensor's"));
        }
        const TensorMeta& t = *v.tensor;
        if (n.s == "shape") return Val::List(t.sizes);
        if (n.s == "dtype") return Val::Dtype(t.dtype);
        if (n.s == "ndim") return Val::Int(t.dim());
        return Err(n, absl::StrCat("a Tensor has no attribute '", n.s, "' here (shape, dtype, ndim; "
                                   "dim(), size(), size(d), numel())"));
      }
      case Node::K::kCall: return Call(n);
    }
    return Err(n, "unknown expression");
  }

  absl::StatusOr<Val> Binary(const Node& n) {
    TD_ASSIGN_OR_RETURN(Val a, E(*n.c[0]));
    TD_ASSIGN_OR_RETURN(Val b, E(*n.c[1]));
    if (n.s == "+" && (a.t == Val::T::kList || b.t == Val::T::kList)) {
      TD_ASSIGN_OR_RETURN(Shape x, AsShape(n, a, "the left of '+'"));
      TD_ASSIGN_OR_RETURN(Shape y, AsShape(n, b, "the right of '+'"));
      x.insert(x.end(), y.begin(), y.end());
      return Val::List(std::move(x));
    }
    TD_ASSIGN_OR_RETURN(int64_t x, AsInt(n, a, absl::StrCat("the left of '", n.s, "'")));
    TD_ASSIGN_OR_RETURN(int64_t y, AsInt(n, b, absl::StrCat("the right of '", n.s, "'")));
    int64_t r = 0;
    bool overflow = false;
    if (n.s == "+") {
      overflow = __builtin_add_overflow(x, y, &r);
    } else if (n.s == "-") {
      overflow = __builtin_sub_overflow(x, y, &r);
    } else if (n.s == "*") {
      overflow = __builtin_mul_overflow(x, y, &r);
    } else {
      if (y == 0) return Err(n, absl::StrCat("integer division or modulo by zero (", x, " ", n.s, " 0)"));
      if (x == std::numeric_limits<int64_t>::min() && y == -1) return Err(n, "integer overflow");
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {  // Python's floor division and modulo
        --q;
        m += y;
      }
      r = n.s == "//" ? q : m;
    }
    if (overflow) return Err(n, absl::StrCat("integer overflow in ", x, " ", n.s, " ", y));
    return Val::Int(r);
  }

  absl::StatusOr<Val> Compare(const Node& n) {
    TD_ASSIGN_OR_RETURN(Val a, E(*n.c[0]));
    TD_ASSIGN_OR_RETURN(Val b, E(*n.c[1]));
    if (n.s == "is" || n.s == "is not") {
      if (b.t != Val::T::kNone) return Err(n, "'is' compares with None only");
      return Val::Bool((a.t == Val::T::kNone) == (n.s == "is"));
    }
    const bool eq_op = n.s == "==" || n.s == "!=";
    if (eq_op) {
      bool same;
      if (a.t == Val::T::kList || b.t == Val::T::kList || a.t == Val::T::kTensor || b.t == Val::T::kTensor) {
        TD_ASSIGN_OR_RETURN(Shape x, AsShape(n, a, "the left of the comparison"));
        TD_ASSIGN_OR_RETURN(Shape y, AsShape(n, b, "the right of the comparison"));
        same = x == y;
      } else if (a.t == Val::T::kDtype || b.t == Val::T::kDtype) {
        same = a.t == b.t && a.dtype == b.dtype;
      } else if (a.t == Val::T::kNone || b.t == Val::T::kNone) {
        same = a.t == b.t;
      } else if (a.t == Val::T::kFloat || b.t == Val::T::kFloat) {
        const double x = a.t == Val::T::kFloat ? a.d : static_cast<double>(a.i);
        const double y = b.t == Val::T::kFloat ? b.d : static_cast<double>(b.i);
        same = x == y;
      } else if (a.t == Val::T::kStr || b.t == Val::T::kStr) {
        same = a.t == b.t && a.s == b.s;
      } else {
        same = a.i == b.i;
      }
      return Val::Bool(same == (n.s == "=="));
    }
    auto num = [&](const Val& v, absl::string_view side) -> absl::StatusOr<double> {
      if (v.t == Val::T::kInt || v.t == Val::T::kBool) return static_cast<double>(v.i);
      if (v.t == Val::T::kFloat) return v.d;
      return Err(n, absl::StrCat(side, " of '", n.s, "' is ", TypeName(v), ", not a number"));
    };
    if (a.t == Val::T::kInt && b.t == Val::T::kInt) {
      const int64_t x = a.i, y = b.i;
      return Val::Bool(n.s == "<" ? x < y : n.s == "<=" ? x <= y : n.s == ">" ? x > y : x >= y);
    }
    TD_ASSIGN_OR_RETURN(double x, num(a, "the left"));
    TD_ASSIGN_OR_RETURN(double y, num(b, "the right"));
    return Val::Bool(n.s == "<" ? x < y : n.s == "<=" ? x <= y : n.s == ">" ? x > y : x >= y);
  }

  absl::StatusOr<Val> Call(const Node& n) {
    const Node& callee = *n.c[0];
    std::vector<Val> args;
    std::map<std::string, Val> kwargs;
    for (size_t i = 1; i < n.c.size(); ++i) {
      TD_ASSIGN_OR_RETURN(Val v, E(*n.c[i]));
      if (n.kw[i - 1].empty()) {
        if (!kwargs.empty()) return Err(n, "a positional argument after a keyword argument");
        args.push_back(std::move(v));
      } else {
        kwargs[n.kw[i - 1]] = std::move(v);
      }
    }
    if (callee.k == Node::K::kAttr) return Method(n, callee, args, kwargs);
    if (callee.k != Node::K::kName) return Err(n, "only functions of the rule language can be called");
    const std::string& f = callee.s;
    auto want = [&](size_t lo, size_t hi, std::initializer_list<absl::string_view> keywords = {}) -> absl::Status {
      for (const auto& [k, v] : kwargs) {
        if (std::find(keywords.begin(), keywords.end(), k) == keywords.end()) {
          return Err(n, absl::StrCat(f, "() takes no argument '", k, "'"));
        }
      }
      if (args.size() < lo || args.size() > hi) {
        return Err(n, absl::StrCat(f, "() takes ", lo == hi ? absl::StrCat(lo) : absl::StrCat(lo, " to ", hi),
                                   " positional arguments, got ", args.size()));
      }
      return absl::OkStatus();
    };
    constexpr size_t kMany = 64;
    if (f == "len") {
      TD_RETURN_IF_ERROR(want(1, 1));
      if (args[0].t == Val::T::kTensors) return Val::Int(static_cast<int64_t>(args[0].tensors.size()));
      TD_ASSIGN_OR_RETURN(Shape s, AsShape(n, args[0], "len()'s argument"));
      return Val::Int(static_cast<int64_t>(s.size()));
    }
    if (f == "prod") {
      TD_RETURN_IF_ERROR(want(1, 1));
      TD_ASSIGN_OR_RETURN(Shape s, AsShape(n, args[0], "prod()'s argument"));
      int64_t r = 1;
      for (int64_t x : s) {
        if (__builtin_mul_overflow(r, x, &r)) return Err(n, absl::StrCat("integer overflow in prod(", ShapeToString(s), ")"));
      }
      return Val::Int(r);
    }
    if (f == "min" || f == "max") {
      TD_RETURN_IF_ERROR(want(1, kMany));
      Shape xs;
      if (args.size() == 1) {
        TD_ASSIGN_OR_RETURN(xs, AsShape(n, args[0], absl::StrCat(f, "()'s argument")));
        if (xs.empty()) return Err(n, absl::StrCat(f, "() of an empty shape"));
      } else {
        for (const Val& a : args) {
          TD_ASSIGN_OR_RETURN(int64_t x, AsInt(n, a, absl::StrCat(f, "()'s argument")));
          xs.push_back(x);
        }
      }
      return Val::Int(f == "min" ? *std::min_element(xs.begin(), xs.end()) : *std::max_element(xs.begin(), xs.end()));
    }
    if (f == "broadcast") {
      TD_RETURN_IF_ERROR(want(1, kMany));
      std::vector<Shape> shapes;
      for (const Val& a : args) {
        if (a.t == Val::T::kTensors) {  // every tensor of a list
          for (const TensorMeta* t : a.tensors) {
            if (t != nullptr) shapes.push_back(t->sizes);
          }
          continue;
        }
        TD_ASSIGN_OR_RETURN(Shape s, AsShape(n, a, "broadcast()'s argument"));
        shapes.push_back(std::move(s));
      }
      if (shapes.empty()) return Err(n, "broadcast() of no tensor");
      TD_ASSIGN_OR_RETURN(Shape out, BroadcastShapes(op_, shapes));
      return Val::List(std::move(out));
    }
    if (f == "matmul") {
      TD_RETURN_IF_ERROR(want(2, 2));
      TensorMeta ms[2];
      for (int k = 0; k < 2; ++k) {
        TD_ASSIGN_OR_RETURN(Shape s, AsShape(n, args[k], "matmul()'s argument"));
        const ScalarType dt = args[k].t == Val::T::kTensor ? args[k].tensor->dtype : ScalarType::kFloat32;
        TD_RETURN_IF_ERROR(meta::CheckNewSizes(op_, s, dt));  // a list may hold anything
        ms[k] = TensorMeta::Contiguous(std::move(s), dt, kMetaDevice);
      }
      if (ms[0].dtype != ms[1].dtype) ms[1].dtype = ms[0].dtype;  // the rule's dtype is its own business
      const Value mv[2] = {Value(&ms[0]), Value(&ms[1])};
      absl::StatusOr<MetaResult> r = meta::Matmul(op_, mv);
      if (!r.ok()) return r.status();
      return Val::List(r->outputs[0].sizes);
    }
    if (f == "reduce") {
      TD_RETURN_IF_ERROR(want(2, 3, {"keepdim"}));
      TD_ASSIGN_OR_RETURN(Shape s, AsShape(n, args[0], "reduce()'s argument"));
      Value dims;
      const Val& d = args[1];
      if (d.t == Val::T::kInt) {
        dims = Value(Shape{d.i});
      } else if (d.t == Val::T::kList) {
        dims = Value(d.l);
      } else if (d.t != Val::T::kNone) {
        return Err(n, absl::StrCat("reduce()'s dims are ", TypeName(d), ", not an int, a list or None"));
      }
      bool keepdim = false;
      const Val* k = args.size() > 2 ? &args[2] : kwargs.count("keepdim") ? &kwargs["keepdim"] : nullptr;
      if (k != nullptr) {
        if (k->t != Val::T::kBool) return Err(n, absl::StrCat("reduce()'s keepdim is ", TypeName(*k), ", not a bool"));
        keepdim = k->i != 0;
      }
      TD_ASSIGN_OR_RETURN(std::vector<bool> mask, ReductionMask(op_, dims, static_cast<int64_t>(s.size())));
      return Val::List(ReducedShape(s, mask, keepdim));
    }
    if (f == "promote") {
      TD_RETURN_IF_ERROR(want(1, kMany));
      std::vector<Scalar> scalars;
      scalars.reserve(args.size());
      std::vector<PromotionOperand> ops;
      for (const Val& a : args) {
        PromotionOperand o;
        if (a.t == Val::T::kTensors) {  // every tensor of a list
          for (const TensorMeta* t : a.tensors) {
            if (t != nullptr) ops.push_back(PromotionOperand{t, nullptr});
          }
          continue;
        }
        if (a.t == Val::T::kTensor) {
          o.tensor = a.tensor;
        } else if (a.t == Val::T::kInt || a.t == Val::T::kFloat || a.t == Val::T::kBool) {
          scalars.push_back(a.t == Val::T::kFloat ? Scalar::Float(a.d)
                                                  : a.t == Val::T::kBool ? Scalar::Bool(a.i != 0) : Scalar::Int(a.i));
          o.scalar = &scalars.back();
        } else if (a.t == Val::T::kNone) {
          continue;  // an absent optional tensor
        } else {
          return Err(n, absl::StrCat("promote()'s argument is ", TypeName(a), ", not a Tensor or a number"));
        }
        ops.push_back(o);
      }
      if (ops.empty()) return Err(n, "promote() of nothing but None");
      TD_ASSIGN_OR_RETURN(ScalarType t, ResultType(op_, ops));
      return Val::Dtype(t);
    }
    if (f == "is_floating_point") {
      TD_RETURN_IF_ERROR(want(1, 1));
      const Val& a = args[0];
      if (a.t == Val::T::kTensor) return Val::Bool(IsFloating(a.tensor->dtype));
      if (a.t == Val::T::kDtype) return Val::Bool(IsFloating(a.dtype));
      return Err(n, absl::StrCat("is_floating_point()'s argument is ", TypeName(a), ", not a Tensor or a dtype"));
    }
    if (f == "like") {
      TD_RETURN_IF_ERROR(want(1, 1));
      if (args[0].t != Val::T::kTensor) {
        return Err(n, absl::StrCat("like()'s argument is ", TypeName(args[0]), ", not a Tensor"));
      }
      Val v;
      v.t = Val::T::kLayout;
      v.layout = 1;
      v.like = args[0].tensor;
      return v;
    }
    if (f == "empty") {
      TD_RETURN_IF_ERROR(want(1, 1, {"dtype", "layout"}));
      Val out;
      out.t = Val::T::kOut;
      TD_ASSIGN_OR_RETURN(out.l, AsShape(n, args[0], "empty()'s shape"));
      for (int64_t s : out.l) {
        if (s < 0) return Err(n, absl::StrCat("empty(): a negative size in ", ShapeToString(out.l)));
      }
      if (auto it = kwargs.find("dtype"); it != kwargs.end() && it->second.t != Val::T::kNone) {
        if (it->second.t != Val::T::kDtype) {
          return Err(n, absl::StrCat("empty()'s dtype is ", TypeName(it->second), ", not a dtype"));
        }
        out.dtype = it->second.dtype;
        out.has_dtype = true;
      }
      if (auto it = kwargs.find("layout"); it != kwargs.end()) {
        if (it->second.t != Val::T::kLayout) {
          return Err(n, absl::StrCat("empty()'s layout is ", TypeName(it->second),
                                     ", not contiguous, like(t) or elementwise"));
        }
        out.layout = it->second.layout;
        out.like = it->second.like;
      }
      return out;
    }
    return Err(n, absl::StrCat("'", f, "' is not a function of the rule language"));
  }

  absl::StatusOr<Val> Method(const Node& n, const Node& callee, const std::vector<Val>& args,
                             const std::map<std::string, Val>& kwargs) {
    TD_ASSIGN_OR_RETURN(Val self, E(*callee.c[0]));
    const std::string& m = callee.s;
    if (!kwargs.empty()) return Err(n, absl::StrCat(m, "() takes no keyword arguments here"));
    if (self.t != Val::T::kTensor) return Err(n, absl::StrCat("'.", m, "()' of ", TypeName(self), ": methods are a Tensor's"));
    const TensorMeta& t = *self.tensor;
    if (m == "dim" && args.empty()) return Val::Int(t.dim());
    if (m == "numel" && args.empty()) return Val::Int(t.numel());
    if (m == "size" && args.empty()) return Val::List(t.sizes);
    if (m == "size" && args.size() == 1) {
      TD_ASSIGN_OR_RETURN(int64_t d, AsInt(n, args[0], "size()'s dim"));
      TD_ASSIGN_OR_RETURN(int64_t w, WrapDim(op_, d, t.dim()));
      if (t.dim() == 0) return Val::Int(1);
      return Val::Int(t.sizes[static_cast<size_t>(w)]);
    }
    return Err(n, absl::StrCat("a Tensor has no method '", m, "' with ", args.size(),
                               " arguments here (dim(), numel(), size(), size(d))"));
  }

  absl::StatusOr<MetaResult> Outputs(const Statement& s) {
    // The tensors' device, where a 0-dim cpu tensor may join another.
    TD_ASSIGN_OR_RETURN(const Device device, meta::CommonDevice(op_, tensors_, /*allow_cpu_scalars=*/true));
    std::vector<PromotionOperand> all;
    for (const TensorMeta* t : tensors_) all.push_back(PromotionOperand{t, nullptr});
    MetaResult r;
    for (const NodeP& e : s.exprs) {
      TD_ASSIGN_OR_RETURN(Val v, E(*e));
      if (v.t != Val::T::kOut) {
        return Err(*e, absl::StrCat("return gives ", TypeName(v), "; each output is empty(shape, dtype=..., "
                                    "layout=...)"));
      }
      ScalarType dt = v.dtype;
      if (!v.has_dtype) {
        if (all.empty()) return Err(*e, "empty() needs dtype= in an op without Tensor arguments");
        TD_ASSIGN_OR_RETURN(dt, ResultType(op_, all));
      }
      TD_RETURN_IF_ERROR(meta::CheckNewSizes(op_, v.l, dt));  // the rank limit, and strides that fit
      TensorMeta out = TensorMeta::Contiguous(v.l, dt, device);
      if (v.layout == 1 && v.like->sizes == v.l) {
        out.strides = PreserveFormatStrides(*v.like);
      } else if (v.layout == 2) {
        std::vector<const TensorMeta*> same;
        for (const TensorMeta* t : tensors_) {
          if (t->sizes == v.l) same.push_back(t);
        }
        out.strides = ElementwiseOutputStrides(v.l, same);
      }
      r.outputs.push_back(std::move(out));
    }
    r.alias_of.assign(r.outputs.size(), -1);
    return r;
  }

  absl::string_view op_;
  const DeclaredShapeRule::Program& p_;
  std::map<std::string, Val> vars_;
  std::vector<const TensorMeta*> tensors_;
};

}  // namespace

std::string ShowTextChar(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return absl::StrCat("'", std::string(1, c), "'");
  return absl::StrFormat("byte 0x%02X", u);
}

DeclaredShapeRule::~DeclaredShapeRule() = default;

absl::StatusOr<std::shared_ptr<const DeclaredShapeRule>> DeclaredShapeRule::Compile(const FunctionSchema& schema,
                                                                                    absl::string_view text) {
  if (text.size() > kMaxDeclaredRuleBytes) {
    return RuntimeErr(absl::StrCat("a shape rule of ", text.size(), " bytes (at most ", kMaxDeclaredRuleBytes, ")"));
  }
  TD_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(text));
  Parser parser(std::move(tokens));
  TD_ASSIGN_OR_RETURN(std::vector<Statement> statements, parser.Statements());
  auto program = std::make_unique<Program>();
  std::vector<std::string> known;
  for (const Argument& a : schema.arguments) {
    program->arg_names.push_back(a.name);
    known.push_back(a.name);
  }
  for (const Argument& a : schema.arguments) {
    if (a.type == ArgType::kFloatList || a.type == ArgType::kDevice) {
      // Readable only when the rule does not name it: checked below.
      known.erase(std::remove(known.begin(), known.end(), a.name), known.end());
    }
  }
  if (statements.empty() || statements.back().k != Statement::K::kReturn) {
    return RuntimeErr("a shape rule ends with 'return empty(...)', one output per return of the op");
  }
  for (size_t i = 0; i < statements.size(); ++i) {
    Statement& s = statements[i];
    if (s.k == Statement::K::kReturn && i + 1 != statements.size()) {
      return SyntaxError(s.line, 1, "'return' is the rule's last statement");
    }
    for (const NodeP& e : s.exprs) {
      absl::Status names = CheckNames(*e, known);
      if (!names.ok()) {
        // A float[] / Device argument named: say why it is refused.
        for (const Argument& a : schema.arguments) {
          if (absl::StrContains(names.message(), absl::StrCat("'", a.name, "' is not an argument"))) {
            const absl::string_view type = a.type == ArgType::kFloatList ? "float[]" : "Device";
            return SyntaxError(s.line, 1, absl::StrCat("argument '", a.name, "' is a ", type,
                                                       ", which a shape rule cannot read"));
          }
        }
        return names;
      }
    }
    for (const MessagePart& p : s.message) {
      if (p.expr != nullptr) TD_RETURN_IF_ERROR(CheckNames(*p.expr, known));
    }
    if (s.k == Statement::K::kReturn && s.exprs.size() != schema.returns.size()) {
      return SyntaxError(s.line, 1, absl::StrCat("the rule returns ", s.exprs.size(), " output(s); the op returns ",
                                                 schema.returns.size()));
    }
    if (s.k == Statement::K::kLet) known.push_back(s.name);
  }
  program->statements = std::move(statements);
  std::shared_ptr<DeclaredShapeRule> rule(new DeclaredShapeRule());
  rule->text_ = std::string(text);
  rule->program_ = std::move(program);
  return std::shared_ptr<const DeclaredShapeRule>(std::move(rule));
}

absl::StatusOr<MetaResult> DeclaredShapeRule::Run(absl::string_view op, absl::Span<const Value> args) const {
  return Eval(op, args, *program_).Run();
}

}  // namespace tensord
