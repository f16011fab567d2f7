// Overload resolution and binding: a call's arguments as Values, matched
// against each overload of its name in the op table.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "ops_internal.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/op_table.h"
#include "tensord/meta/schema.h"

namespace tensord::client::internal {

namespace {

std::string KindText(const Arg& a) {
  switch (a.kind()) {
    case Arg::kTensor: return "Tensor";
    case Arg::kTensorList:
    case Arg::kOptionalTensorList: return "list of Tensors";
    case Arg::kValue: break;
  }
  switch (a.value().kind()) {
    case Value::Kind::kNone: return "None";
    case Value::Kind::kScalar: return "Number";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kIntList: return "tuple of ints";
    case Value::Kind::kFloatList: return "tuple of floats";
    case Value::Kind::kString: return "str";
    case Value::Kind::kDtype: return "dtype";
    case Value::Kind::kDevice: return "device";
    default: return std::string(ValueKindName(a.value().kind()));
  }
}

absl::StatusOr<Value> ToValue(absl::string_view op, const Arg& a, std::vector<Tensor>* keep) {
  switch (a.kind()) {
    case Arg::kValue:
      if (a.value().kind() == Value::Kind::kTensor || a.value().kind() == Value::Kind::kTensorList) {
        return InternalErr(absl::StrCat(op, ": a tensor passed as a raw Value (pass the Tensor itself)"));
      }
      return a.value();
    case Arg::kTensor: {
      const std::optional<Tensor>& t = a.tensors()[0];
      if (!t || !t->defined()) return TypeErr(absl::StrCat(op, "(): an undefined Tensor was passed"));
      keep->push_back(*t);
      return Value(&t->impl()->meta);
    }
    case Arg::kTensorList:
    case Arg::kOptionalTensorList: {
      TensorList list;
      for (const std::optional<Tensor>& t : a.tensors()) {
        if (!t.has_value()) {
          if (a.kind() == Arg::kTensorList) return TypeErr(absl::StrCat(op, "(): None in a list of Tensors"));
          list.push_back(nullptr);
          continue;
        }
        if (!t->defined()) return TypeErr(absl::StrCat(op, "(): an undefined Tensor was passed"));
        keep->push_back(*t);
        list.push_back(&t->impl()->meta);
      }
      return Value(std::move(list));
    }
  }
  return InternalErr("unknown Arg kind");
}

bool IsIntValue(const Value& v) { return v.kind() == Value::Kind::kInt; }

// Arranges the call's positional values for one overload: a method's self
// goes to the argument named "self"; varargs ints become the int list when
// that list is the overload's only positional argument (PyTorch's parser).
// Returns false when the overload cannot take a method call.
bool Arrange(const OpEntry& op, CallMode mode, std::vector<Value>& positional,
             std::vector<std::pair<std::string, Value>>& kwargs) {
  const FunctionSchema& s = op.schema;
  int self_idx = -1;
  std::optional<Value> self;
  if (mode == CallMode::kMethod) {
    self_idx = s.ArgIndex("self");
    if (self_idx < 0 || s.arguments[self_idx].type != ArgType::kTensor || positional.empty()) return false;
    self = std::move(positional[0]);
    positional.erase(positional.begin());
  }
  // Varargs int lists.
  int n_positional = 0, first_positional = -1;
  for (int i = 0; i < static_cast<int>(s.arguments.size()); ++i) {
    if (!s.arguments[i].kwarg_only && i != self_idx) {
      if (n_positional++ == 0) first_positional = i;
    }
  }
  if (n_positional == 1 && s.arguments[first_positional].type == ArgType::kIntList &&
      positional.size() >= 2 && std::all_of(positional.begin(), positional.end(), IsIntValue)) {
    Shape ints;
    for (const Value& v : positional) ints.push_back(v.to_int());
    positional.clear();
    positional.emplace_back(std::move(ints));
  }
  if (self.has_value()) {
    if (static_cast<size_t>(self_idx) <= positional.size()) {
      positional.insert(positional.begin() + self_idx, std::move(*self));
    } else {
      kwargs.emplace_back("self", std::move(*self));
    }
  }
  return true;
}

// Whether BindArgs fails for sure, judged cheaply: more positional values
// than positional arguments, a non-None non-Tensor for a Tensor argument, or
// a Tensor for an argument of another type (BindArgs converts neither way).
bool CannotBind(const FunctionSchema& s, const std::vector<Value>& positional) {
  size_t max_positional = 0;
  while (max_positional < s.arguments.size() && !s.arguments[max_positional].kwarg_only) ++max_positional;
  if (positional.size() > max_positional) return true;
  const size_t n = positional.size();
  for (size_t i = 0; i < n; ++i) {
    const Value& v = positional[i];
    if (v.is_none()) continue;
    const bool is_tensor_arg = s.arguments[i].type == ArgType::kTensor;
    const bool is_tensor_value = v.kind() == Value::Kind::kTensor;
    if (is_tensor_arg != is_tensor_value) return true;
  }
  return false;
}

}  // namespace

// Consumes c.positional and c.kwargs.
absl::StatusOr<Bound> Resolve(absl::string_view name, Converted& c, CallMode mode) {
  const OpTable& table = OpTable::Get();
  absl::InlinedVector<const OpEntry*, 8> candidates;
  if (IsExtensionOpName(name)) {
    // An op defined at run time: a function only, found among the process's.
    const ExtensionOps& defined = DefinedOps();
    if (const OpEntry* exact = defined.Find(name); exact != nullptr && name.find('.') != absl::string_view::npos) {
      candidates.push_back(exact);
    } else {
      for (const OpEntry* e : defined.Overloads(name)) candidates.push_back(e);
    }
    if (candidates.empty()) {
      return TypeErr(absl::StrCat("unknown op '", name, "': no op of that name was defined (ops with a namespace "
                                  "are defined at run time, with tensord.library.define)"));
    }
    if (mode == CallMode::kMethod) {
      return TypeErr(absl::StrCat("'", name, "' is not available as a Tensor method (an op defined at run time "
                                  "is a function: tensord.ops.", absl::StrReplaceAll(name, {{"::", "."}}), ")"));
    }
  } else if (const OpEntry* exact = table.Find(name);
             exact != nullptr && name.find('.') != absl::string_view::npos) {
    candidates.push_back(exact);
  } else {
    for (const OpEntry* e : table.Overloads(name)) {
      if (mode == CallMode::kMethod && !e->has(kMethod)) continue;
      if (mode == CallMode::kFunction && !e->has(kFunction)) continue;
      candidates.push_back(e);
    }
  }
  if (candidates.empty()) {
    if (table.Overloads(name).empty() && table.Find(name) == nullptr) {
      return TypeErr(absl::StrCat("unknown op '", name, "': it is not in the op table"));
    }
    return TypeErr(absl::StrCat("'", name, "' is not available as a ",
                                mode == CallMode::kMethod ? "Tensor method" : "function"));
  }
  // Candidates CannotBind rules out are skipped without building BindArgs'
  // error (a number for `Tensor other` in add.Tensor, before add.Scalar
  // binds); their errors are made only when no candidate binds, from the
  // values kept intact for that.
  std::vector<absl::Status> errors(candidates.size());
  bool any_skipped = false;
  for (size_t ci = 0; ci < candidates.size(); ++ci) {
    const OpEntry* e = candidates[ci];
    // The last candidate takes the converted values when no earlier one was
    // skipped; others copy them.
    const bool take = ci + 1 == candidates.size() && !any_skipped;
    std::vector<Value> positional = take ? std::move(c.positional) : c.positional;
    std::vector<std::pair<std::string, Value>> kwargs = take ? std::move(c.kwargs) : c.kwargs;
    if (!Arrange(*e, mode, positional, kwargs)) {
      errors[ci] = TypeErr(absl::StrCat(e->full_name(), " cannot be called as a method"));
      continue;
    }
    if (!take && CannotBind(e->schema, positional)) {
      any_skipped = true;
      continue;  // errors[ci] stays OK: filled below if needed
    }
    absl::StatusOr<std::vector<Value>> b = BindArgs(e->schema, std::move(positional), std::move(kwargs));
    if (b.ok()) return Bound{e, *std::move(b)};
    errors[ci] = b.status();
  }
  for (size_t ci = 0; ci < candidates.size() && any_skipped; ++ci) {
    if (!errors[ci].ok()) continue;
    std::vector<Value> positional = c.positional;
    std::vector<std::pair<std::string, Value>> kwargs = c.kwargs;
    Arrange(*candidates[ci], mode, positional, kwargs);
    errors[ci] = BindArgs(candidates[ci]->schema, std::move(positional), std::move(kwargs)).status();
    if (errors[ci].ok()) return InternalErr(absl::StrCat(name, ": an overload skipped as a mismatch binds"));
  }
  if (errors.size() == 1) return errors[0];
  std::string got;
  if (c.args != nullptr) {
    for (const Arg& a : *c.args) absl::StrAppend(&got, got.empty() ? "" : ", ", KindText(a));
  }
  if (c.given_kwargs != nullptr) {
    for (const auto& [k, a] : *c.given_kwargs) absl::StrAppend(&got, got.empty() ? "" : ", ", k, "=", KindText(a));
  }
  std::string expected;
  for (size_t i = 0; i < candidates.size(); ++i) {
    absl::StrAppend(&expected, "\n * ", candidates[i]->schema_text, "\n     (", errors[i].message(), ")");
  }
  return TypeErr(absl::StrCat(name, "() received an invalid combination of arguments - got (", got,
                              "), but expected one of:", expected));
}

absl::StatusOr<Converted> Convert(absl::string_view name, std::vector<Arg>& args, Kwargs& kwargs) {
  Converted c;
  c.args = &args;
  c.given_kwargs = &kwargs;
  c.positional.reserve(args.size());
  c.tensors.reserve(args.size() + kwargs.size());
  for (const Arg& a : args) {
    TD_ASSIGN_OR_RETURN(Value v, ToValue(name, a, &c.tensors));
    c.positional.push_back(std::move(v));
  }
  c.kwargs.reserve(kwargs.size());
  for (auto& [k, a] : kwargs) {
    TD_ASSIGN_OR_RETURN(Value v, ToValue(name, a, &c.tensors));
    c.kwargs.emplace_back(k, std::move(v));
  }
  return c;
}


}  // namespace tensord::client::internal
