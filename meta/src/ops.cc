// The built-in op table: the schema, meta function, flags and saved-reads
// rule of each record of tensord/meta/ops.inl, in order (a record's
// position is its op id on the wire). To add an op, add its record there:
// docs/adding-an-op.md walks through every place, with a real op.
#include "meta_functions.h"
#include "tensord/meta/op_table.h"

namespace tensord {
namespace {

constexpr uint32_t F = kFunction;
constexpr uint32_t M = kMethod;
constexpr uint32_t FM = kFunction | kMethod;

const OpDef kOps[] = {
#define TD_OP(schema, meta_fn, flags, saved_reads, formula) {schema, meta_fn, flags, saved_reads},
#define TD_OP_ND(schema, meta_fn, flags) {schema, meta_fn, (flags) | kNotDifferentiable, nullptr},
#include "tensord/meta/ops.inl"
#undef TD_OP
#undef TD_OP_ND
};

}  // namespace

absl::Span<const OpDef> BuiltinOpDefs() { return kOps; }

}  // namespace tensord
