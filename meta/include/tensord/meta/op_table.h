// tensord/meta/op_table.h — the one table of ops. Each entry has the op's
// schema, its meta function (the only code that decides output dtype, sizes,
// strides, storage_offset and aliasing), flags and the saved-reads rule of
// its derivative. Kernels, the wire and the Python surface are keyed by the
// entry's full name ("add.Tensor") and checked against this table.
//
// To add an op (docs/adding-an-op.md walks through one, step by step):
//   - its record in tensord/meta/ops.inl (schema, meta function, flags,
//     and unless it is TD_OP_ND, its saved-reads rule and formula), its meta
//     function (meta/src/meta_functions.h, meta/src/meta_*.cc) and, for a
//     differentiable op, its formula (server/runtime/src/autograd/formulas*.cc);
//   - a CPU kernel in kernels/cpu/, registered under the full name (a pure
//     view has none);
//   - samples in tests/python/opinfo*.py.
// The Python function and method come from the table. Completeness tests
// fail while a piece is missing.
#ifndef TENSORD_META_OP_TABLE_H_
#define TENSORD_META_OP_TABLE_H_

#include <cstdint>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tensord/meta/schema.h"
#include "tensord/meta/tensor_meta.h"
#include "tensord/meta/value.h"

namespace tensord {

// What a meta function returns: one TensorMeta per schema return, and for
// each output the index of the *argument* it aliases (a view), or -1 when it
// needs fresh storage. Composite ops (reshape, contiguous, to) decide aliasing
// from metadata alone, so both sides always agree.
struct MetaResult {
  std::vector<TensorMeta> outputs;
  std::vector<int> alias_of;
};

// `op` is the base name ("sum", "add") for error messages and for functions
// shared by several ops; `args` are bound in schema order, defaults filled,
// kinds validated.
using MetaFn = absl::StatusOr<MetaResult> (*)(absl::string_view op, absl::Span<const Value> args);

enum OpFlags : uint32_t {
  kNone = 0,
  kFactory = 1u << 0,        // creates a tensor from no tensor input; device= decides
  kRandom = 1u << 1,         // draws from the session's generator
  kDataDependent = 1u << 2,  // output shape depends on values: no meta, the
                             // kernel allocates its output (nonzero, masked_select)
  kMethod = 1u << 3,         // Python/C++ Tensor method variant exists
  kFunction = 1u << 4,       // tensord.<name> function variant exists
  kNotDifferentiable = 1u << 5,
  kMayCopy = 1u << 6,        // a view when the meta allows one, else a new
                             // tensor (reshape, contiguous, to): it has a kernel
};

// One record of the table (tensord/meta/ops.inl).
struct OpDef {
  const char* schema_text;
  MetaFn meta;
  uint32_t flags;
  // What the derivative formula reads of the saved tensors (the syntax is
  // in ops.inl); nullptr for an op without a formula.
  const char* saved_reads = nullptr;
};

class DeclaredShapeRule;
class DeclaredDerivative;

struct OpEntry {
  uint32_t id;               // position in the table; the wire's op id
  FunctionSchema schema;
  std::string schema_text;   // canonical
  MetaFn meta;
  uint32_t flags;
  std::vector<int> return_aliases;  // from the schema's alias annotations
  const char* saved_reads = nullptr;  // OpDef::saved_reads
  // An op defined at run time whose shape rule is a built-in op's
  // (ExtensionOps, op_registry.h; its own `meta` is null): RunMeta runs
  // that op's meta function under that op's name (meta functions branch on it).
  const OpEntry* shape_rule_of = nullptr;
  // An op defined at run time with a declarative shape rule
  // (declared_rule.h; its own `meta` is null): RunMeta evaluates it.
  std::shared_ptr<const DeclaredShapeRule> declared_rule;
  // An op defined at run time with a derivative written in table ops
  // (declared_derivative.h): the daemon's autograd runs it, and the
  // saved-reads rule of both sides comes from it. Null for every other op.
  std::shared_ptr<const DeclaredDerivative> declared_derivative;

  const std::string& name() const { return schema.name; }
  std::string full_name() const { return schema.full_name(); }
  bool is_view() const;  // some return aliases an input per the schema (in-place ops too)
  // A view op whose output always aliases its input (view, transpose, ...):
  // not in place, not kMayCopy. It never reaches a kernel.
  bool is_pure_view() const { return is_view() && !is_inplace() && !has(kMayCopy); }
  // An in-place op: its first argument is a written tensor (`Tensor(a!) self`),
  // which the op returns. The one definition daemon, client and tests use.
  bool is_inplace() const;
  bool has(OpFlags f) const { return (flags & f) != 0; }
};

class OpTable {
 public:
  // The process-wide table, built (and its schemas parsed) on first use. A
  // schema that fails to parse is a build bug: it aborts at startup with the
  // text, caught by every test.
  static const OpTable& Get();

  size_t size() const { return entries_.size(); }
  const OpEntry& at(uint32_t id) const { return entries_[id]; }
  const std::vector<OpEntry>& entries() const { return entries_; }
  // By full name ("add.Tensor"); nullptr when absent.
  const OpEntry* Find(absl::string_view full_name) const;
  // All overloads of a base name ("add" -> add.Tensor, add.Scalar) in table order.
  const std::vector<const OpEntry*>& Overloads(absl::string_view name) const;

  // 64-bit FNV-1a over every canonical schema text in order: equal digests
  // mean identical tables (ids, names, argument lists).
  uint64_t digest() const { return digest_; }
  // One line per op: "<id> <schema>" (what the handshake exchanges).
  std::vector<std::string> Describe() const;

  // Runs the entry's meta function on bound `args`, after ValidateArgs.
  absl::StatusOr<MetaResult> RunMeta(const OpEntry& op, absl::Span<const Value> args) const;

  explicit OpTable(absl::Span<const OpDef> defs);

 private:
  std::vector<OpEntry> entries_;
  absl::flat_hash_map<std::string, uint32_t> by_name_;
  absl::flat_hash_map<std::string, std::vector<const OpEntry*>> overloads_;
  uint64_t digest_ = 0;
};

// Compares a peer's Describe() lines with ours; returns "" when equal or a
// human-readable list of differences ("op 12: client has 'x(...)', daemon has
// 'y(...)'; daemon lacks 'z'").
std::string DiffOpTables(absl::Span<const std::string> ours, absl::Span<const std::string> theirs,
                         absl::string_view our_name, absl::string_view their_name);

// Defined in ops.cc: the op definitions in table order.
absl::Span<const OpDef> BuiltinOpDefs();

}  // namespace tensord

#endif  // TENSORD_META_OP_TABLE_H_
