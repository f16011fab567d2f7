// The schema parser and argument binding/validation shared by client and daemon.
#include "tensord/meta/schema.h"

#include <algorithm>
#include <cctype>

#include "absl/container/inlined_vector.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tensord/meta/errors.h"

namespace tensord {
namespace {

absl::Status SyntaxError(absl::string_view text, absl::string_view what) {
  return InternalErr(absl::StrCat("schema '", text, "': ", what));
}

// Splits on commas that are not nested in (), [] or quotes.
std::vector<absl::string_view> SplitTopLevel(absl::string_view s) {
  std::vector<absl::string_view> out;
  int depth = 0;
  char quote = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (quote) {
      if (c == quote) quote = 0;
      continue;
    }
    if (c == '"' || c == '\'') quote = c;
    else if (c == '(' || c == '[') ++depth;
    else if (c == ')' || c == ']') --depth;
    else if (c == ',' && depth == 0) {
      out.push_back(absl::StripAsciiWhitespace(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  absl::string_view last = absl::StripAsciiWhitespace(s.substr(start));
  if (!last.empty() || !out.empty()) out.push_back(last);
  return out;
}

struct ParsedType {
  ArgType type;
  bool optional = false;
  int fixed_len = 0;
  std::string alias;
  bool is_write = false;
};

absl::StatusOr<ParsedType> ParseType(absl::string_view text, absl::string_view t) {
  ParsedType p;
  absl::string_view base = t;
  // Strip a trailing '?' (optional of the whole type).
  if (absl::ConsumeSuffix(&base, "?")) p.optional = true;
  bool is_list = false;
  bool list_of_optional = false;
  if (absl::EndsWith(base, "]")) {
    const size_t lb = base.rfind('[');
    if (lb == absl::string_view::npos) return SyntaxError(text, absl::StrCat("bad type ", t));
    absl::string_view n = base.substr(lb + 1, base.size() - lb - 2);
    // A fixed length sizes the list a single int default is broadcast to
    // (int[2] k=3): 1 to kMaxFixedListLength.
    constexpr int kMaxFixedListLength = 64;
    if (!n.empty() && (!absl::SimpleAtoi(n, &p.fixed_len) || p.fixed_len < 1 || p.fixed_len > kMaxFixedListLength)) {
      return SyntaxError(text, absl::StrCat("bad list length in ", t, " (1 to ", kMaxFixedListLength, ")"));
    }
    base = base.substr(0, lb);
    is_list = true;
    if (absl::ConsumeSuffix(&base, "?")) list_of_optional = true;
  }
  // Alias annotation: Tensor(a) / Tensor(a!)
  const size_t lp = base.find('(');
  if (lp != absl::string_view::npos) {
    if (!absl::EndsWith(base, ")")) return SyntaxError(text, absl::StrCat("bad alias annotation in ", t));
    absl::string_view ann = base.substr(lp + 1, base.size() - lp - 2);
    if (absl::ConsumeSuffix(&ann, "!")) p.is_write = true;
    p.alias = std::string(ann);
    base = base.substr(0, lp);
  }
  if (lp != absl::string_view::npos && base != "Tensor") {
    // Only tensors alias; ToString also places the annotation after "Tensor".
    return SyntaxError(text, absl::StrCat("alias annotation on a non-Tensor type: ", t));
  }
  if (base == "Tensor") {
    p.type = is_list ? (list_of_optional ? ArgType::kOptionalTensorList : ArgType::kTensorList) : ArgType::kTensor;
  } else if (list_of_optional) {
    return SyntaxError(text, absl::StrCat("only Tensor?[] lists may hold None: ", t));
  } else if (base == "int" || base == "SymInt") {
    p.type = is_list ? ArgType::kIntList : ArgType::kInt;
  } else if (base == "float") {
    p.type = is_list ? ArgType::kFloatList : ArgType::kFloat;
  } else if (is_list) {
    return SyntaxError(text, absl::StrCat("unsupported list type ", t));
  } else if (base == "Scalar") {
    p.type = ArgType::kScalar;
  } else if (base == "bool") {
    p.type = ArgType::kBool;
  } else if (base == "str") {
    p.type = ArgType::kString;
  } else if (base == "ScalarType") {
    p.type = ArgType::kDtype;
  } else if (base == "Device") {
    p.type = ArgType::kDevice;
  } else {
    return SyntaxError(text, absl::StrCat("unknown type ", t));
  }
  return p;
}

std::string TypeName(ArgType type, bool optional, int fixed_len, absl::string_view alias, bool is_write) {
  std::string s;
  switch (type) {
    case ArgType::kTensor: s = "Tensor"; break;
    case ArgType::kTensorList: s = "Tensor[]"; break;
    case ArgType::kOptionalTensorList: s = "Tensor?[]"; break;
    case ArgType::kScalar: s = "Scalar"; break;
    case ArgType::kInt: s = "int"; break;
    case ArgType::kIntList: s = fixed_len ? absl::StrCat("int[", fixed_len, "]") : "int[]"; break;
    case ArgType::kFloat: s = "float"; break;
    case ArgType::kFloatList: s = "float[]"; break;
    case ArgType::kBool: s = "bool"; break;
    case ArgType::kString: s = "str"; break;
    case ArgType::kDtype: s = "ScalarType"; break;
    case ArgType::kDevice: s = "Device"; break;
  }
  if (!alias.empty()) {
    // Annotation goes right after "Tensor".
    s.insert(6, absl::StrCat("(", alias, is_write ? "!" : "", ")"));
  }
  if (optional) s += "?";
  return s;
}

// Parses a default value for an argument of `type`.
absl::StatusOr<Value> ParseDefault(absl::string_view text, const ParsedType& p, absl::string_view d) {
  if (d == "None") return Value();
  if (d == "True" || d == "False") {
    if (p.type == ArgType::kScalar) return Value(Scalar::Bool(d == "True"));
    return Value(d == "True");
  }
  if (!d.empty() && (d.front() == '"' || d.front() == '\'')) {
    if (d.size() < 2 || d.back() != d.front()) return SyntaxError(text, absl::StrCat("bad string default ", d));
    return Value(std::string(d.substr(1, d.size() - 2)));
  }
  if (!d.empty() && d.front() == '[') {
    absl::string_view inner = d.substr(1, d.size() - 2);
    if (p.type == ArgType::kFloatList) {
      std::vector<double> v;
      for (absl::string_view e : SplitTopLevel(inner)) {
        double x;
        if (!absl::SimpleAtod(e, &x)) return SyntaxError(text, absl::StrCat("bad default ", d));
        v.push_back(x);
      }
      return Value(std::move(v));
    }
    Shape v;
    for (absl::string_view e : SplitTopLevel(inner)) {
      int64_t x;
      if (!absl::SimpleAtoi(e, &x)) return SyntaxError(text, absl::StrCat("bad default ", d));
      v.push_back(x);
    }
    return Value(std::move(v));
  }
  int64_t i;
  if (absl::SimpleAtoi(d, &i)) {
    switch (p.type) {
      case ArgType::kScalar: return Value(Scalar::Int(i));
      case ArgType::kFloat: return Value(static_cast<double>(i));
      case ArgType::kIntList: return Value(Shape(p.fixed_len ? p.fixed_len : 1, i));
      default: return Value(i);
    }
  }
  double f;
  if (absl::SimpleAtod(d, &f)) {
    if (p.type == ArgType::kScalar) return Value(Scalar::Float(f));
    return Value(f);
  }
  if (p.type == ArgType::kDtype) {
    absl::StatusOr<ScalarType> t = ParseDtype(d);
    if (t.ok()) return Value(*t);
  }
  return SyntaxError(text, absl::StrCat("bad default ", d));
}

std::string DefaultText(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kString: {
      // Quoted with a character the text lacks, so that it parses back (a
      // text with both quote characters cannot be written: ExtensionOps
      // refuses it, and no built-in default has one).
      const char q = v.str().find('"') == std::string::npos ? '"' : '\'';
      return absl::StrCat(std::string(1, q), v.str(), std::string(1, q));
    }
    case Value::Kind::kIntList: return absl::StrCat("[", absl::StrJoin(v.int_list(), ", "), "]");
    default: return v.ToString();
  }
}

absl::string_view ArgTypeName(ArgType t) {
  switch (t) {
    case ArgType::kTensor: return "Tensor";
    case ArgType::kTensorList: return "list of Tensors";
    case ArgType::kOptionalTensorList: return "list of optional Tensors";
    case ArgType::kScalar: return "Number";
    case ArgType::kInt: return "int";
    case ArgType::kIntList: return "tuple of ints";
    case ArgType::kFloat: return "float";
    case ArgType::kFloatList: return "tuple of floats";
    case ArgType::kBool: return "bool";
    case ArgType::kString: return "str";
    case ArgType::kDtype: return "dtype";
    case ArgType::kDevice: return "device";
  }
  return "?";
}

bool Accepts(const Argument& a, const Value& v) {
  using K = Value::Kind;
  if (v.is_none()) return a.optional;
  switch (a.type) {
    case ArgType::kTensor: return v.kind() == K::kTensor && v.tensor_ptr() != nullptr;
    case ArgType::kTensorList:
      if (v.kind() != K::kTensorList) return false;
      for (const TensorMeta* t : v.tensor_list()) if (!t) return false;
      return true;
    case ArgType::kOptionalTensorList: return v.kind() == K::kTensorList;
    case ArgType::kScalar: return v.kind() == K::kScalar || v.kind() == K::kInt || v.kind() == K::kFloat || v.kind() == K::kBool;
    case ArgType::kInt: return v.kind() == K::kInt;
    case ArgType::kIntList: return v.kind() == K::kIntList;
    case ArgType::kFloat: return v.kind() == K::kFloat || v.kind() == K::kInt;
    case ArgType::kFloatList: return v.kind() == K::kFloatList;
    case ArgType::kBool: return v.kind() == K::kBool;
    case ArgType::kString: return v.kind() == K::kString;
    case ArgType::kDtype: return v.kind() == K::kDtype;
    case ArgType::kDevice: return v.kind() == K::kDevice;
  }
  return false;
}

// Converts `v` to what `a` expects where PyTorch's argument parser would.
// Returns false when no conversion applies.
bool Convert(const Argument& a, Value& v) {
  using K = Value::Kind;
  if (Accepts(a, v)) {
    if (a.type == ArgType::kScalar && v.kind() != K::kScalar && !v.is_none()) v = Value(v.scalar());
    if (a.type == ArgType::kFloat && v.kind() == K::kInt) v = Value(v.to_double());
    return true;
  }
  switch (a.type) {
    case ArgType::kInt:
      if (v.kind() == K::kScalar && v.scalar().is_int()) { v = Value(v.scalar().to_int()); return true; }
      return false;
    case ArgType::kIntList:
      if (v.kind() == K::kInt) {
        v = Value(Shape(a.fixed_len > 1 ? a.fixed_len : 1, v.to_int()));
        return true;
      }
      // PyTorch's parser takes None for a dim list that defaults to []
      // (amax(x, dim=None), roll(x, 1, None)): the default.
      if (v.is_none() && a.default_value.has_value() && a.default_value->kind() == K::kIntList &&
          a.default_value->int_list().empty()) {
        v = *a.default_value;
        return true;
      }
      return false;
    case ArgType::kFloat:
      if (v.kind() == K::kScalar && !v.scalar().is_bool()) { v = Value(v.scalar().to_double()); return true; }
      return false;
    case ArgType::kTensorList:
    case ArgType::kOptionalTensorList:
      // An empty Python list carries no element type: [] is an empty list
      // of Tensors here (PyTorch's parser takes it too: torch.cat([]) gets
      // as far as cat's own "expected a non-empty list" check).
      if ((v.kind() == K::kIntList && v.int_list().empty()) || (v.kind() == K::kFloatList && v.float_list().empty())) {
        v = Value(TensorList{});
        return true;
      }
      return false;
    case ArgType::kFloatList:
      if (v.kind() == K::kIntList) {
        std::vector<double> d(v.int_list().begin(), v.int_list().end());
        v = Value(std::move(d));
        return true;
      }
      if (v.kind() == K::kFloat || v.kind() == K::kInt) { v = Value(std::vector<double>{v.to_double()}); return true; }
      return false;
    case ArgType::kDevice:
      if (v.kind() == K::kString) {
        absl::StatusOr<Device> d = ParseDevice(v.str());
        if (!d.ok()) return false;
        v = Value(*d);
        return true;
      }
      return false;
    case ArgType::kDtype:
      if (v.kind() == K::kString) {
        absl::StatusOr<ScalarType> t = ParseDtype(v.str());
        if (!t.ok()) return false;
        v = Value(*t);
        return true;
      }
      return false;
    default:
      return false;
  }
}

}  // namespace

int FunctionSchema::ArgIndex(absl::string_view n) const {
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i].name == n) return static_cast<int>(i);
  }
  return -1;
}

std::vector<int> FunctionSchema::ReturnAliases() const {
  std::vector<int> out;
  for (const Return& r : returns) {
    int idx = -1;
    if (!r.alias.empty()) {
      for (size_t i = 0; i < arguments.size(); ++i) {
        // `Tensor(a -> *) self` (the views of a list return) is in set "a".
        absl::string_view set = arguments[i].alias;
        if (const size_t arrow = set.find("->"); arrow != absl::string_view::npos) {
          set = absl::StripAsciiWhitespace(set.substr(0, arrow));
        }
        if (set == r.alias) idx = static_cast<int>(i);
      }
    }
    out.push_back(idx);
  }
  return out;
}

std::string FunctionSchema::ToString() const {
  std::vector<std::string> args;
  bool kw = false;
  for (const Argument& a : arguments) {
    if (a.kwarg_only && !kw) {
      args.push_back("*");
      kw = true;
    }
    std::string s = absl::StrCat(TypeName(a.type, a.optional, a.fixed_len, a.alias, a.is_write), " ", a.name);
    if (a.default_value) absl::StrAppend(&s, "=", DefaultText(*a.default_value));
    args.push_back(std::move(s));
  }
  std::vector<std::string> rets;
  for (const Return& r : returns) {
    std::string s = TypeName(r.type, false, 0, r.alias, false);
    if (!r.name.empty()) absl::StrAppend(&s, " ", r.name);
    rets.push_back(std::move(s));
  }
  std::string ret = returns.size() == 1 && returns[0].name.empty() ? rets[0]
                                                                    : absl::StrCat("(", absl::StrJoin(rets, ", "), ")");
  return absl::StrCat(full_name(), "(", absl::StrJoin(args, ", "), ") -> ", ret);
}

absl::StatusOr<FunctionSchema> ParseSchema(absl::string_view text) {
  FunctionSchema s;
  const size_t lp = text.find('(');
  const size_t arrow = text.rfind("->");
  if (lp == absl::string_view::npos || arrow == absl::string_view::npos || arrow < lp) {
    return SyntaxError(text, "expected 'name(args) -> returns'");
  }
  absl::string_view head = absl::StripAsciiWhitespace(text.substr(0, lp));
  const size_t dot = head.find('.');
  s.name = std::string(head.substr(0, dot));
  if (dot != absl::string_view::npos) s.overload = std::string(head.substr(dot + 1));
  if (s.name.empty()) return SyntaxError(text, "empty name");
  // Trailing only: `lp` indexes `text`, so the start must stay where it is.
  absl::string_view before_arrow = absl::StripTrailingAsciiWhitespace(text.substr(0, arrow));
  if (!absl::EndsWith(before_arrow, ")")) return SyntaxError(text, "expected ')' before '->'");
  absl::string_view args = before_arrow.substr(lp + 1, before_arrow.size() - lp - 2);
  bool kwarg_only = false;
  for (absl::string_view a : SplitTopLevel(args)) {
    if (a == "*") {
      kwarg_only = true;
      continue;
    }
    absl::string_view decl = a, def;
    const size_t eq = a.find('=');
    bool has_default = false;
    if (eq != absl::string_view::npos) {
      decl = absl::StripAsciiWhitespace(a.substr(0, eq));
      def = absl::StripAsciiWhitespace(a.substr(eq + 1));
      has_default = true;
    }
    const size_t sp = decl.rfind(' ');
    if (sp == absl::string_view::npos) return SyntaxError(text, absl::StrCat("argument without a name: ", a));
    TD_ASSIGN_OR_RETURN(ParsedType pt, ParseType(text, absl::StripAsciiWhitespace(decl.substr(0, sp))));
    Argument arg;
    arg.name = std::string(decl.substr(sp + 1));
    arg.type = pt.type;
    arg.optional = pt.optional;
    arg.fixed_len = pt.fixed_len;
    arg.alias = pt.alias;
    arg.is_write = pt.is_write;
    arg.kwarg_only = kwarg_only;
    if (has_default) {
      TD_ASSIGN_OR_RETURN(Value v, ParseDefault(text, pt, def));
      if (v.is_none() && !pt.optional) return SyntaxError(text, absl::StrCat("None default for non-optional ", arg.name));
      arg.default_value = std::move(v);
    }
    s.arguments.push_back(std::move(arg));
  }
  absl::string_view rets = absl::StripAsciiWhitespace(text.substr(arrow + 2));
  std::vector<absl::string_view> ret_parts;
  if (absl::StartsWith(rets, "(") && absl::EndsWith(rets, ")")) {
    ret_parts = SplitTopLevel(rets.substr(1, rets.size() - 2));
  } else {
    ret_parts.push_back(rets);
  }
  for (absl::string_view r : ret_parts) {
    Return ret;
    absl::string_view type = r;
    const size_t sp = r.rfind(' ');
    if (sp != absl::string_view::npos) {
      type = r.substr(0, sp);
      ret.name = std::string(r.substr(sp + 1));
    }
    TD_ASSIGN_OR_RETURN(ParsedType pt, ParseType(text, type));
    if (pt.type != ArgType::kTensor && pt.type != ArgType::kTensorList) {
      return SyntaxError(text, "returns must be Tensor or Tensor[]");
    }
    ret.type = pt.type;
    ret.alias = pt.alias;
    s.returns.push_back(std::move(ret));
  }
  if (s.returns.empty()) return SyntaxError(text, "no returns");
  return s;
}

absl::Status ValidateArgs(const FunctionSchema& schema, absl::Span<const Value> values) {
  if (values.size() != schema.arguments.size()) {
    return TypeErr(absl::StrCat(schema.full_name(), ": expected ", schema.arguments.size(), " arguments, got ",
                                values.size()));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const Argument& a = schema.arguments[i];
    if (!Accepts(a, values[i])) {
      return TypeErr(absl::StrCat(schema.full_name(), ": argument '", a.name, "' expected ",
                                  a.optional ? "None or " : "", ArgTypeName(a.type), ", got ",
                                  ValueKindName(values[i].kind())));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Value>> BindArgs(const FunctionSchema& schema, std::vector<Value> positional,
                                            std::vector<std::pair<std::string, Value>> kwargs) {
  const size_t n = schema.arguments.size();
  std::vector<Value> out(n);
  absl::InlinedVector<bool, 32> set(n, false);
  size_t max_positional = 0;
  while (max_positional < n && !schema.arguments[max_positional].kwarg_only) ++max_positional;
  if (positional.size() > max_positional) {
    return TypeErr(absl::StrCat(schema.name, "() takes ", max_positional, " positional argument",
                                max_positional == 1 ? "" : "s", " but ", positional.size(),
                                positional.size() == 1 ? " was" : " were", " given"));
  }
  for (size_t i = 0; i < positional.size(); ++i) {
    out[i] = std::move(positional[i]);
    set[i] = true;
  }
  for (auto& [name, v] : kwargs) {
    const int idx = schema.ArgIndex(name);
    if (idx < 0) return TypeErr(absl::StrCat(schema.name, "() got an unexpected keyword argument '", name, "'"));
    if (set[idx]) return TypeErr(absl::StrCat(schema.name, "() got multiple values for argument '", name, "'"));
    out[idx] = std::move(v);
    set[idx] = true;
  }
  for (size_t i = 0; i < n; ++i) {
    const Argument& a = schema.arguments[i];
    if (!set[i]) {
      if (!a.default_value) {
        return TypeErr(absl::StrCat(schema.name, "() missing required argument '", a.name, "'"));
      }
      out[i] = *a.default_value;
      continue;
    }
    if (!Convert(a, out[i])) {
      if (a.type == ArgType::kTensorList && out[i].kind() == Value::Kind::kTensorList) {
        const TensorList& l = out[i].tensor_list();
        const size_t k = static_cast<size_t>(std::find(l.begin(), l.end(), nullptr) - l.begin());
        if (k < l.size()) {  // PyTorch's words
          return TypeErr(absl::StrCat(schema.name, "(): expected Tensor as element ", k, " in argument '", a.name,
                                      "', but got None"));
        }
      }
      return TypeErr(absl::StrCat(schema.name, "(): argument '", a.name, "' must be ", a.optional ? "None or " : "",
                                  ArgTypeName(a.type), ", not ", ValueKindName(out[i].kind())));
    }
  }
  return out;
}

}  // namespace tensord
