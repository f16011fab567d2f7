// The op table: parses every schema once, assigns ids, and computes the digest
// the handshake compares.
#include "tensord/meta/op_table.h"

#include "tensord/meta/declared_rule.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tensord/meta/errors.h"

namespace tensord {

bool OpEntry::is_view() const {
  for (int a : return_aliases) {
    if (a >= 0) return true;
  }
  return false;
}

bool OpEntry::is_inplace() const {
  const std::vector<Argument>& a = schema.arguments;
  return !a.empty() && a[0].is_write && a[0].type == ArgType::kTensor;
}

OpTable::OpTable(absl::Span<const OpDef> defs) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64-bit offset basis
  entries_.reserve(defs.size());
  for (const OpDef& d : defs) {
    absl::StatusOr<FunctionSchema> s = ParseSchema(d.schema_text);
    if (!s.ok()) {
      // A malformed built-in schema is a build bug, caught by every test.
      std::fprintf(stderr, "tensord: bad op schema: %s\n", std::string(s.status().message()).c_str());
      std::abort();
    }
    OpEntry e;
    e.id = static_cast<uint32_t>(entries_.size());
    e.schema = std::move(*s);
    e.schema_text = e.schema.ToString();
    e.meta = d.meta;
    e.flags = d.flags;
    e.saved_reads = d.saved_reads;
    e.return_aliases = e.schema.ReturnAliases();
    const std::string full = e.full_name();
    if (!by_name_.emplace(full, e.id).second) {
      std::fprintf(stderr, "tensord: op %s declared twice\n", full.c_str());
      std::abort();
    }
    for (char c : e.schema_text) {
      h ^= static_cast<unsigned char>(c);
      h *= 1099511628211ull;
    }
    h ^= '\n';
    h *= 1099511628211ull;
    entries_.push_back(std::move(e));
  }
  for (const OpEntry& e : entries_) overloads_[e.schema.name].push_back(&e);
  digest_ = h;
}

const OpTable& OpTable::Get() {
  static const OpTable* table = new OpTable(BuiltinOpDefs());
  return *table;
}

const OpEntry* OpTable::Find(absl::string_view full_name) const {
  auto it = by_name_.find(full_name);
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

const std::vector<const OpEntry*>& OpTable::Overloads(absl::string_view name) const {
  static const std::vector<const OpEntry*> kEmpty;
  auto it = overloads_.find(name);
  return it == overloads_.end() ? kEmpty : it->second;
}

std::vector<std::string> OpTable::Describe() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const OpEntry& e : entries_) out.push_back(absl::StrCat(e.id, " ", e.schema_text));
  return out;
}

absl::StatusOr<MetaResult> OpTable::RunMeta(const OpEntry& op, absl::Span<const Value> args) const {
  TD_RETURN_IF_ERROR(ValidateArgs(op.schema, args));
  if (op.declared_rule != nullptr) return op.declared_rule->Run(op.schema.name, args);
  const OpEntry& rule = op.shape_rule_of != nullptr ? *op.shape_rule_of : op;
  absl::StatusOr<MetaResult> computed = rule.meta(rule.schema.name, args);
  if (!computed.ok() && &rule != &op) {
    // The rule's own errors, named as the op the user called: "mylib::f: ..."
    // for "add: ..." (a message that names the rule's op elsewhere keeps it).
    absl::string_view msg = computed.status().message();
    const std::string prefix = absl::StrCat(rule.schema.name, ": ");
    if (absl::StartsWith(msg, prefix)) msg.remove_prefix(prefix.size());
    absl::Status renamed(computed.status().code(), absl::StrCat(op.schema.name, ": ", msg));
    computed.status().ForEachPayload(  // the kind (TypeError) travels as a payload
        [&renamed](absl::string_view url, const absl::Cord& payload) { renamed.SetPayload(url, payload); });
    return renamed;
  }
  TD_ASSIGN_OR_RETURN(MetaResult r, std::move(computed));
  if (r.alias_of.empty()) r.alias_of.assign(r.outputs.size(), -1);
  TD_INTERNAL_CHECK(r.outputs.size() == op.schema.returns.size() || op.schema.returns[0].type == ArgType::kTensorList,
                    op.full_name());
  TD_INTERNAL_CHECK(r.alias_of.size() == r.outputs.size(), op.full_name());
  return r;
}

std::string DiffOpTables(absl::Span<const std::string> ours, absl::Span<const std::string> theirs,
                         absl::string_view our_name, absl::string_view their_name) {
  // Lines are "<id> <schema>"; compare by position and name the first few differences.
  std::vector<std::string> diffs;
  const size_t n = std::max(ours.size(), theirs.size());
  for (size_t i = 0; i < n && diffs.size() < 5; ++i) {
    if (i >= ours.size()) {
      diffs.push_back(absl::StrCat(our_name, " lacks '", theirs[i], "'"));
    } else if (i >= theirs.size()) {
      diffs.push_back(absl::StrCat(their_name, " lacks '", ours[i], "'"));
    } else if (ours[i] != theirs[i]) {
      diffs.push_back(absl::StrCat("op ", i, ": ", our_name, " has '", ours[i], "', ", their_name, " has '", theirs[i], "'"));
    }
  }
  if (diffs.empty()) return "";
  std::string out = absl::StrCat("op tables differ (", our_name, " has ", ours.size(), " ops, ", their_name, " has ",
                                 theirs.size(), "): ", absl::StrJoin(diffs, "; "));
  if (ours.size() != theirs.size() || diffs.size() == 5) absl::StrAppend(&out, "; ...");
  return out;
}

}  // namespace tensord
