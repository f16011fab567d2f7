// Internal to the daemon's autograd: the shorthands every derivative formula
// file uses (op calls by full name, dim wrapping, reduction helpers), and the
// declarations of the formulas that the ops' records name.
//
// To add a formula: name it in the op's record (tensord/meta/ops.inl), and
// define it in namespace tensord::runtime::formulas in the formulas*.cc file
// of its family, with the helpers below; the link fails while it is missing.
#ifndef TENSORD_RUNTIME_SRC_AUTOGRAD_FORMULA_UTIL_H_
#define TENSORD_RUNTIME_SRC_AUTOGRAD_FORMULA_UTIL_H_

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/shape_rules.h"
#include "tensord/runtime/autograd.h"

namespace tensord::runtime::formula_util {

using C = FormulaContext;
using Grads = std::vector<Tensor>;

// ------------------------------------------------------------ op shorthands
inline Tensor Mul(const C& c, const Tensor& a, const Tensor& b) { return c.call("mul.Tensor", {a, b}); }
inline Tensor MulS(const C& c, const Tensor& a, Scalar s) { return c.call("mul.Scalar", {a, s}); }
inline Tensor MulS(const C& c, const Tensor& a, double s) { return MulS(c, a, Scalar::Float(s)); }
inline Tensor Div(const C& c, const Tensor& a, const Tensor& b) { return c.call("div.Tensor", {a, b}); }
inline Tensor Add(const C& c, const Tensor& a, const Tensor& b) { return c.call("add.Tensor", {a, b}); }
inline Tensor Sub(const C& c, const Tensor& a, const Tensor& b) { return c.call("sub.Tensor", {a, b}); }
inline Tensor Neg(const C& c, const Tensor& a) { return c.call("neg", {a}); }
inline Tensor AddS(const C& c, const Tensor& a, double s) { return c.call("add.Scalar", {a, Scalar::Float(s)}); }
inline Tensor RsubS(const C& c, const Tensor& a, double s) { return c.call("rsub.Scalar", {a, Scalar::Float(s)}); }
inline Tensor ZerosLike(const C& c, const Tensor& a) { return c.call("zeros_like", {a}); }
// Zeros of `sizes` and `dt` on `device` (the gradient's: a formula's factory
// must not default to the cpu when its op ran on another device).
inline Tensor Zeros(const C& c, const Shape& sizes, ScalarType dt, const Device& device) {
  return c.call("zeros", {sizes, dt, device});
}
inline Tensor Where(const C& c, const Tensor& cond, const Tensor& a, const Tensor& b) {
  return c.call("where.self", {cond, a, b});
}
// cond ? a : 0
inline Tensor WhereOr0(const C& c, const Tensor& cond, const Tensor& a) {
  return c.call("where.ScalarOther", {cond, a, Scalar::Float(0.0)});
}
inline Tensor SumDims(const C& c, const Tensor& a, Shape dims, bool keepdim) {
  return c.call("sum", {a, std::move(dims), keepdim});
}
inline Tensor Unsqueeze(const C& c, const Tensor& a, int64_t d) { return c.call("unsqueeze", {a, d}); }
inline Tensor Squeeze(const C& c, const Tensor& a, int64_t d) { return c.call("squeeze.dim", {a, d}); }
inline Tensor Reshape(const C& c, const Tensor& a, const Shape& s) { return c.call("reshape", {a, s}); }
inline Tensor Expand(const C& c, const Tensor& a, const Shape& s) { return c.call("expand", {a, s}); }
inline Tensor TransposeLast(const C& c, const Tensor& a) {
  return c.call("transpose.int", {a, int64_t{-1}, int64_t{-2}});
}
inline Tensor Matmul(const C& c, const Tensor& a, const Tensor& b) { return c.call("matmul", {a, b}); }
inline Tensor Sq(const C& c, const Tensor& a) { return Mul(c, a, a); }

inline bool ScalarIsOne(const Scalar& s) { return s.to_double() == 1.0; }
inline Tensor MaybeScale(const C& c, const Tensor& g, const Scalar& s) { return ScalarIsOne(s) ? g : MulS(c, g, s); }

// The result vector, and setting the gradient of a one-tensor argument when needed.
inline Grads Out(const C& c) { return Grads(c.num_slots()); }
inline void Set(const C& c, Grads& out, absl::string_view name, Tensor t) {
  const std::vector<int>& s = c.slots(name);
  if (s.size() == 1 && s[0] >= 0) out[s[0]] = std::move(t);
}

// `d` wrapped into [0, max(rank, 1)); out of range records an InternalErr
// (the forward's meta checked it) and gives 0.
inline int64_t Wrap(const C& c, int64_t d, int64_t rank) {
  const int64_t r = std::max<int64_t>(rank, 1);
  if (d < -r || d >= r) {
    c.Fail(InternalErr(absl::StrCat("autograd: dim ", d, " out of range for rank ", rank)));
    return 0;
  }
  return d < 0 ? d + r : d;
}

// m.sizes[d]; a `d` outside [0, m.dim()) records an InternalErr and gives 0.
inline int64_t SizeAt(const C& c, const TensorMeta& m, int64_t d) {
  if (d < 0 || d >= m.dim()) {
    c.Fail(InternalErr(absl::StrCat("autograd: dim ", d, " out of range for sizes ", ShapeToString(m.sizes))));
    return 0;
  }
  return m.sizes[d];
}

// Reduced dims of a reduction (`dim` None or [] = all), sorted.
inline Shape ReducedDims(const C& c, const Value& dim, int64_t rank) {
  Shape out;
  if (dim.is_none() || (dim.kind() == Value::Kind::kIntList && dim.int_list().empty())) {
    for (int64_t d = 0; d < rank; ++d) out.push_back(d);
    return out;
  }
  if (dim.kind() == Value::Kind::kInt) {
    out.push_back(Wrap(c, dim.to_int(), rank));
  } else {
    for (int64_t d : dim.int_list()) out.push_back(Wrap(c, d, rank));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// A reduction's gradient (or result) brought back to the input's rank: the
// reduced dims re-inserted as size 1 when keepdim was false.
inline Tensor Unreduce(const C& c, Tensor g, const Shape& dims, bool keepdim, int64_t rank) {
  if (keepdim || rank == 0) return g;
  for (int64_t d : dims) g = Unsqueeze(c, g, d);  // ascending: each lands at its final place
  return g;
}

// ------------------------------------------------------------ unary
inline Grads Unary(C& c, Tensor (*f)(const C&, const Tensor& g)) {
  Grads o = Out(c);
  if (c.needs("self")) Set(c, o, "self", f(c, c.grad()));
  return o;
}


// Formulas shared by several ops of different families:
// x / s for a Scalar s (div.Scalar, div.Scalar_mode without rounding): g / s.
inline Grads DivByScalarF(C& c) {
  Grads o = Out(c);
  if (c.needs("self")) Set(c, o, "self", c.call("div.Scalar", {c.grad(), c.value("other").scalar()}));
  return o;
}
// a - round(a / b) * b, with `rounding` "floor" (remainder) or "trunc"
// (fmod): self gets g, other gets -g * round(a / b).
inline Grads RoundedModuloF(C& c, const char* rounding) {
  Grads o = Out(c);
  const Tensor g = c.grad();
  if (c.needs("self")) Set(c, o, "self", g);
  if (c.needs("other")) {
    const Tensor a = c.in("self");
    const Tensor b = c.in("other");
    const Tensor q = c.call(rounding, {Div(c, a, b)});
    Set(c, o, "other", Neg(c, Mul(c, g, q)));
  }
  return o;
}

}  // namespace tensord::runtime::formula_util

// Every built-in op's formula, declared from its record (tensord/meta/ops.inl)
// and defined in a formulas*.cc file; FindFormula (formulas.cc) finds them by
// op id.
namespace tensord::runtime::formulas {
#define TD_OP(schema, meta_fn, flags, saved_reads, formula) \
  std::vector<Tensor> formula(FormulaContext& c);
#define TD_OP_ND(schema, meta_fn, flags)
#include "tensord/meta/ops.inl"
#undef TD_OP
#undef TD_OP_ND
}  // namespace tensord::runtime::formulas

namespace tensord::runtime {
// The formula of an op defined at run time with a declared derivative
// (tensord/meta/declared_derivative.h): runs it, one op per call
// (declared_formula.cc).
std::vector<Tensor> DeclaredFormula(FormulaContext& c);
}  // namespace tensord::runtime

#endif  // TENSORD_RUNTIME_SRC_AUTOGRAD_FORMULA_UTIL_H_
