// tensord/meta/op_registry.h — ops beyond the built-in table: an extension
// set, defined at run time, each op by its schema in a namespace of its own
// ("mylib::scaled_gelu(Tensor x) -> Tensor") and a shape rule. The client
// keeps one per process (tensord.library.define); each daemon session keeps
// the set its client sent it, and the two agree by digest. Extension ops
// have ids from kFirstExtensionOpId on, so that no per-op table of the
// built-in set (kernels, formulas, saved-reads rules, all bounds-checked)
// mistakes one for a built-in op.
//
// Shape rules: "like:<built-in op>" runs that op's meta function (its
// errors then name the extension op), for an op whose arguments and returns
// have the built-in op's types in the same order; "rule:<text>" evaluates a
// declarative shape rule (tensord/meta/declared_rule.h).
//
//   ExtensionOps ext;
//   absl::StatusOr<const OpEntry*> op =
//       ext.Define("mylib::scaled_gelu(Tensor x, Scalar scale=1) -> Tensor", "like:mul.Scalar");
//   ext.Find("mylib::scaled_gelu");    // the entry; ext.at_id((*op)->id) too
#ifndef TENSORD_META_OP_REGISTRY_H_
#define TENSORD_META_OP_REGISTRY_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "tensord/meta/op_table.h"

namespace tensord {

// The id of an extension set's first op (the next ones follow in order).
inline constexpr uint32_t kFirstExtensionOpId = 1u << 20;
// Ops one extension set may hold, the longest schema text of one, and the
// most schema text of all of them together (what one DefineOps carries at
// most, well within a stream message).
inline constexpr size_t kMaxExtensionOps = 4096;
inline constexpr size_t kMaxExtensionSchemaBytes = 16 << 10;
inline constexpr size_t kMaxExtensionSetBytes = 4 << 20;

// One op of an extension set, as defined and as sent over the wire.
struct ExtensionOpDef {
  std::string schema;      // canonical schema text
  std::string shape_rule;  // "like:<full name of a built-in op>" or "rule:<declared rule>"
  std::string artifact;    // content hash of the kernel artifact it comes from; "" for none
  std::string derivative;  // a declared derivative (declared_derivative.h); "" for none
};

// Thread-safe: one thread may define while others look up. Entries never
// move or go away while the set lives (OpEntry pointers stay valid).
class ExtensionOps {
 public:
  ExtensionOps() = default;
  ExtensionOps(const ExtensionOps&) = delete;
  ExtensionOps& operator=(const ExtensionOps&) = delete;

  // Adds op `schema_text` with `shape_rule`; returns its entry. Errors
  // (RuntimeError naming the schema): a schema that does not parse, or
  // whose canonical text would not parse back the same (a string default
  // with both quote characters); a name outside a namespace ("ns::name",
  // identifiers, none starting with "__") or in "aten", "tensord" or
  // "prim"; the overload "default" (it names the op without one); argument
  // names that are not identifiers or repeat; a full name already defined;
  // an alias annotation (`Tensor(a)`, `Tensor(a!)`: an extension op returns
  // new tensors); a return that is not a Tensor; an unknown rule; a `like`
  // op that is a view, writes in place, has no meta function
  // (data-dependent), or whose argument or return types differ from the new
  // op's; a schema over kMaxExtensionSchemaBytes; more than kMaxExtensionOps
  // ops or kMaxExtensionSetBytes of schemas. The op takes the rule op's
  // factory and random flags (a factory-like op follows tensord.device).
  // `artifact`: the content hash (64 lower-case hex digits) of the kernel
  // artifact whose kernels the op runs, or "" for an op without one; it
  // takes part in the digest, so a client and a daemon agree on it too.
  // `derivative`: the op's derivative written in table ops
  // (declared_derivative.h), or "" for an op without one (a backward
  // through it raises NotImplementedError); one that does not compile is a
  // RuntimeError naming its line. It takes part in the digest too.
  absl::StatusOr<const OpEntry*> Define(absl::string_view schema_text, absl::string_view shape_rule,
                                        absl::string_view artifact = {},
                                        absl::string_view derivative = {}) ABSL_LOCKS_EXCLUDED(mu_);

  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);
  // The op with id `id`; nullptr when it is not one of this set's.
  const OpEntry* at_id(uint32_t id) const ABSL_LOCKS_EXCLUDED(mu_);
  // By full name ("mylib::scaled_gelu" or "mylib::f.out"); nullptr when absent.
  const OpEntry* Find(absl::string_view full_name) const ABSL_LOCKS_EXCLUDED(mu_);
  // Every overload of `name` ("mylib::f"), in definition order.
  std::vector<const OpEntry*> Overloads(absl::string_view name) const ABSL_LOCKS_EXCLUDED(mu_);
  // The definitions from index `first` on (what a session has not got yet),
  // and in `*digest` (when given) the digest of the set they complete, both
  // read at once (another thread may be defining).
  std::vector<ExtensionOpDef> Defs(size_t first, uint64_t* digest = nullptr) const ABSL_LOCKS_EXCLUDED(mu_);
  // 64-bit FNV-1a over every definition ("schema\trule\n", or
  // "schema\trule\tartifact\n" for an op from an artifact, and
  // "schema\trule\tartifact\tderivative\n" for an op with a derivative) in
  // order: equal digests mean the same ops with the same ids.
  uint64_t digest() const ABSL_LOCKS_EXCLUDED(mu_);
  // The digest of a set whose digest was `digest` after `def` is added (the
  // empty set's is kEmptyDigest): what a client that sends another set
  // than its own (an artifact's ops without their kernels) computes.
  static constexpr uint64_t kEmptyDigest = 1469598103934665603ull;  // FNV-1a offset basis
  static uint64_t DigestAfter(uint64_t digest, const ExtensionOpDef& def);

 private:
  mutable absl::Mutex mu_;
  std::deque<OpEntry> entries_ ABSL_GUARDED_BY(mu_);  // deque: entries never move
  std::vector<ExtensionOpDef> defs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, const OpEntry*> by_name_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::vector<const OpEntry*>> overloads_ ABSL_GUARDED_BY(mu_);
  uint64_t digest_ ABSL_GUARDED_BY(mu_) = kEmptyDigest;
  size_t text_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // of every definition
};

// Whether `full_name` names an op of an extension set ("ns::name"): the
// built-in table has no "::" in any name.
inline bool IsExtensionOpName(absl::string_view full_name) {
  return full_name.find("::") != absl::string_view::npos;
}

}  // namespace tensord

#endif  // TENSORD_META_OP_REGISTRY_H_
