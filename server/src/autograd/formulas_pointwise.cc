// Derivative formulas of elementwise ops (unary, binary, ternary), written as calls of
// other table ops (see formula_util.h and formulas.cc for the conventions).
#include "formula_util.h"

namespace tensord::server {
namespace {

using namespace formula_util;  // NOLINT: the formula shorthands

}  // namespace

namespace formula_util {
absl::Span<const FormulaEntry> PointwiseFormulas() { return {}; }
}  // namespace formula_util

}  // namespace tensord::server
