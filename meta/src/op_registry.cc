// Extension sets: ops defined at run time, checked before they are added.
#include "tensord/meta/op_registry.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "tensord/meta/declared_derivative.h"
#include "tensord/meta/declared_rule.h"
#include "tensord/meta/errors.h"

namespace tensord {
namespace {

bool IsIdentifier(absl::string_view s) {
  if (s.empty() || !(absl::ascii_isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

// The types of an argument as a meta function sees them (names and
// defaults aside: it gets every argument bound, in order).
bool SameType(const Argument& a, const Argument& b) {
  return a.type == b.type && a.optional == b.optional && a.fixed_len == b.fixed_len;
}

}  // namespace

absl::StatusOr<const OpEntry*> ExtensionOps::Define(absl::string_view schema_text, absl::string_view shape_rule,
                                                    absl::string_view artifact, absl::string_view derivative) {
  if (schema_text.size() > kMaxExtensionSchemaBytes) {
    return RuntimeErr(absl::StrCat("library.define: a schema of ", schema_text.size(), " bytes (at most ",
                                   kMaxExtensionSchemaBytes, ")"));
  }
  absl::StatusOr<FunctionSchema> parsed = ParseSchema(schema_text);
  if (!parsed.ok()) return RuntimeErr(absl::StrCat("library.define: ", parsed.status().message()));
  FunctionSchema schema = *std::move(parsed);
  const std::string full = schema.full_name();
  auto fail = [&full](absl::string_view why) { return RuntimeErr(absl::StrCat("library.define(", full, "): ", why)); };
  // The canonical text is what a daemon is sent and parses: it must give
  // this very schema back.
  const std::string canonical = schema.ToString();
  if (absl::StatusOr<FunctionSchema> again = ParseSchema(canonical); !again.ok() || again->ToString() != canonical) {
    return fail("its canonical form does not parse back to it (a string default may not hold both ' and \")");
  }
  {
    const absl::string_view head = schema_text.substr(0, schema_text.find('('));
    if (absl::EndsWith(absl::StripTrailingAsciiWhitespace(head), ".")) return fail("an empty overload name");
  }
  if (!artifact.empty() &&
      (artifact.size() != 64 || artifact.find_first_not_of("0123456789abcdef") != absl::string_view::npos)) {
    return fail("an artifact's content hash is 64 lower-case hex digits");
  }
  const size_t sep = schema.name.find("::");
  if (sep == std::string::npos) {
    return fail("an op defined at run time needs a namespace of its own, as in 'mylib::" + schema.name + "'");
  }
  const absl::string_view ns = absl::string_view(schema.name).substr(0, sep);
  const absl::string_view base = absl::string_view(schema.name).substr(sep + 2);
  if (!IsIdentifier(ns) || !IsIdentifier(base) || (!schema.overload.empty() && !IsIdentifier(schema.overload))) {
    return fail("the namespace, name and overload must be identifiers ('mylib::name' or 'mylib::name.overload')");
  }
  if (absl::StartsWith(ns, "__") || absl::StartsWith(base, "__") || absl::StartsWith(schema.overload, "__")) {
    return fail("names starting with '__' are Python's");
  }
  if (schema.overload == "default") return fail("the overload 'default' names the op without an overload");
  for (size_t i = 0; i < schema.arguments.size(); ++i) {
    const std::string& name = schema.arguments[i].name;
    if (!IsIdentifier(name)) return fail(absl::StrCat("argument name '", name, "' is not an identifier"));
    for (size_t j = 0; j < i; ++j) {
      if (schema.arguments[j].name == name) return fail(absl::StrCat("two arguments are named '", name, "'"));
    }
  }
  if (ns == "aten" || ns == "tensord" || ns == "prim") {
    return fail(absl::StrCat("the namespace '", ns, "' is tensord's own; choose another"));
  }
  for (const Argument& a : schema.arguments) {
    if (!a.alias.empty() || a.is_write) {
      return fail(absl::StrCat("argument '", a.name, "' has an alias annotation: an op defined at run time "
                               "returns new tensors (no views, no in-place writes)"));
    }
  }
  if (schema.returns.empty()) return fail("an op must return at least one Tensor");
  for (const Return& r : schema.returns) {
    if (r.type != ArgType::kTensor || !r.alias.empty()) {
      return fail("every return must be a new Tensor (no lists, no aliases, no other types)");
    }
  }

  // The shape rule: a built-in op's, or a declared one.
  constexpr absl::string_view kLike = "like:";
  constexpr absl::string_view kRule = "rule:";
  const OpEntry* like = nullptr;
  std::shared_ptr<const DeclaredShapeRule> declared;
  if (absl::StartsWith(shape_rule, kRule)) {
    bool any_tensor = false;
    for (const Argument& a : schema.arguments) {
      any_tensor |= a.type == ArgType::kTensor || a.type == ArgType::kTensorList ||
                    a.type == ArgType::kOptionalTensorList;
    }
    if (!any_tensor) {
      return fail("a declared shape rule needs a Tensor argument (a factory takes the rule of one, like='zeros')");
    }
    absl::StatusOr<std::shared_ptr<const DeclaredShapeRule>> compiled =
        DeclaredShapeRule::Compile(schema, shape_rule.substr(kRule.size()));
    if (!compiled.ok()) return fail(compiled.status().message());
    declared = *std::move(compiled);
  } else if (absl::StartsWith(shape_rule, kLike)) {
    const absl::string_view like_name = shape_rule.substr(kLike.size());
    like = OpTable::Get().Find(like_name);
    if (like == nullptr) {
      const std::vector<const OpEntry*>& overloads = OpTable::Get().Overloads(like_name);
      if (overloads.size() == 1) like = overloads[0];
      if (overloads.size() > 1) {
        return fail(absl::StrCat("'", like_name, "' has ", overloads.size(), " overloads; name one, as in '",
                                 overloads[0]->full_name(), "'"));
      }
    }
    if (like == nullptr) return fail(absl::StrCat("the shape rule names '", like_name, "', which is no built-in op"));
    if (like->is_view() || like->is_inplace() || like->has(kDataDependent) || like->meta == nullptr) {
      return fail(absl::StrCat("'", like->full_name(), "' cannot lend its shape rule: it ",
                               like->has(kDataDependent) ? "has none (its output shape depends on values)"
                                                         : "returns a view or writes in place"));
    }
    const FunctionSchema& ls = like->schema;
    bool same = ls.arguments.size() == schema.arguments.size() && ls.returns.size() == schema.returns.size();
    for (size_t i = 0; same && i < ls.arguments.size(); ++i) same = SameType(ls.arguments[i], schema.arguments[i]);
    for (size_t i = 0; same && i < ls.returns.size(); ++i) same = ls.returns[i].type == schema.returns[i].type;
    if (!same) {
      return fail(absl::StrCat("its arguments and returns must have the types of the rule's op, in order: ",
                               like->schema_text));
    }
  } else {
    return fail(absl::StrCat("unknown shape rule '", shape_rule.substr(0, 64), "' (the rules this daemon knows are "
                             "'like:<built-in op>', e.g. 'like:gelu', and 'rule:<a declared shape rule>')"));
  }

  std::shared_ptr<const DeclaredDerivative> declared_derivative;
  if (!derivative.empty()) {
    absl::StatusOr<std::shared_ptr<const DeclaredDerivative>> compiled =
        DeclaredDerivative::Compile(schema, derivative);
    if (!compiled.ok()) return fail(compiled.status().message());
    declared_derivative = *std::move(compiled);
  }

  absl::MutexLock lock(&mu_);
  if (by_name_.contains(full)) return fail("already defined");
  if (entries_.size() >= kMaxExtensionOps) {
    return fail(absl::StrCat("an extension set holds at most ", kMaxExtensionOps, " ops"));
  }
  const std::string rule_text =
      like != nullptr ? absl::StrCat(kLike, like->full_name()) : absl::StrCat(kRule, declared->text());
  const size_t text = canonical.size() + rule_text.size() + derivative.size();
  if (text_bytes_ + text > kMaxExtensionSetBytes) {
    return fail(absl::StrCat("the ops defined so far hold ", text_bytes_, " bytes of schemas, and at most ",
                             kMaxExtensionSetBytes, " fit"));
  }
  OpEntry e;
  e.id = kFirstExtensionOpId + static_cast<uint32_t>(entries_.size());
  e.schema = std::move(schema);
  e.schema_text = canonical;
  e.meta = nullptr;  // RunMeta runs the rule's op's (shape_rule_of) or the declared rule
  e.shape_rule_of = like;
  e.declared_rule = declared;
  e.declared_derivative = std::move(declared_derivative);
  e.flags = kFunction | (like != nullptr ? like->flags & (kFactory | kRandom) : 0);
  e.return_aliases = e.schema.ReturnAliases();
  ExtensionOpDef def{e.schema_text, rule_text, std::string(artifact), std::string(derivative)};
  digest_ = DigestAfter(digest_, def);
  text_bytes_ += text;
  entries_.push_back(std::move(e));
  const OpEntry* added = &entries_.back();
  by_name_.emplace(full, added);
  overloads_[added->schema.name].push_back(added);
  defs_.push_back(std::move(def));
  return added;
}

uint64_t ExtensionOps::DigestAfter(uint64_t digest, const ExtensionOpDef& def) {
  for (absl::string_view part : {absl::string_view(def.schema), absl::string_view("\t"),
                                 absl::string_view(def.shape_rule),
                                 absl::string_view(def.artifact.empty() && def.derivative.empty() ? "" : "\t"),
                                 absl::string_view(def.artifact), absl::string_view(def.derivative.empty() ? "" : "\t"),
                                 absl::string_view(def.derivative), absl::string_view("\n")}) {
    for (char c : part) {
      digest ^= static_cast<unsigned char>(c);
      digest *= 1099511628211ull;
    }
  }
  return digest;
}

size_t ExtensionOps::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

const OpEntry* ExtensionOps::at_id(uint32_t id) const {
  absl::MutexLock lock(&mu_);
  if (id < kFirstExtensionOpId || id - kFirstExtensionOpId >= entries_.size()) return nullptr;
  return &entries_[id - kFirstExtensionOpId];
}

const OpEntry* ExtensionOps::Find(absl::string_view full_name) const {
  absl::MutexLock lock(&mu_);
  auto it = by_name_.find(full_name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<const OpEntry*> ExtensionOps::Overloads(absl::string_view name) const {
  absl::MutexLock lock(&mu_);
  auto it = overloads_.find(name);
  return it == overloads_.end() ? std::vector<const OpEntry*>() : it->second;
}

std::vector<ExtensionOpDef> ExtensionOps::Defs(size_t first, uint64_t* digest) const {
  absl::MutexLock lock(&mu_);
  if (digest != nullptr) *digest = digest_;
  if (first >= defs_.size()) return {};
  return std::vector<ExtensionOpDef>(defs_.begin() + static_cast<std::ptrdiff_t>(first), defs_.end());
}

uint64_t ExtensionOps::digest() const {
  absl::MutexLock lock(&mu_);
  return digest_;
}

}  // namespace tensord
