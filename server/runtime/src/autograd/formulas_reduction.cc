// Derivative formulas of reductions and scans, written as calls of
// other table ops (see formula_util.h and formulas.cc for the conventions),
// so that double backward differentiates them again. The math follows
// PyTorch's derivatives.yaml:
//   nansum     g where x is not NaN, else 0
//   prod       g * prod of the other elements: out / x without zeros; with
//              exactly one zero in a slice, the product of the non-zeros at
//              the zero and 0 elsewhere; with two or more zeros, 0
//   var        g * 2 (x - mean) / (N - correction)
//   std        g * (x - mean) / (std * (N - correction)), 0 where std is 0
//   norm       p = 2: g x / norm (0 where the norm is 0); p = 1: g sign(x);
//              p = +-inf: g sign(x) shared among the elements with |x| = norm;
//              p = 0: 0; other p: g x |x|^(p-2) / norm^(p-1)
//   logsumexp  g exp(x - out)
//   cumsum     the reverse cumulative sum of g along dim:
//              sum(g, dim, keepdim) - cumsum(g, dim) + g
//   cumprod    reverse cumsum of (g * out) divided by x where x is not 0; at
//              the first zero of a slice, the reverse cumsum of g times the
//              cumprod with that zero replaced by 1; 0 at later zeros
#include "formula_util.h"

namespace tensord::runtime::formulas {

using namespace formula_util;  // NOLINT: the formula shorthands

// The reduced dims and keepdim of a reduction overload, from its arguments:
// no `dim` argument means every dim.
struct Reduction {
  Shape dims;
  bool keepdim = false;
  int64_t count = 1;  // elements per output
};

Reduction ReadReduction(const C& c, const TensorMeta& m) {
  Reduction r;
  const auto& args = c.op().schema.arguments;
  bool has_dim = false, has_keepdim = false;
  for (const auto& a : args) {
    has_dim |= a.name == "dim";
    has_keepdim |= a.name == "keepdim";
  }
  r.dims = ReducedDims(c, has_dim ? c.value("dim") : Value(), m.dim());
  r.keepdim = has_keepdim && c.value("keepdim").to_bool();
  for (int64_t d : r.dims) {
    if (d < m.dim()) r.count *= m.sizes[d];
  }
  return r;
}

Tensor EqS(const C& c, const Tensor& a, double v) { return c.call("eq.Scalar", {a, Scalar::Float(v)}); }
Tensor NeS(const C& c, const Tensor& a, double v) { return c.call("ne.Scalar", {a, Scalar::Float(v)}); }
Tensor SumKeep(const C& c, const Tensor& a, const Shape& dims, int64_t rank) {
  return rank == 0 ? a : SumDims(c, a, dims, true);
}

Grads NansumF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const TensorMeta& m = c.meta("self");
  const Reduction r = ReadReduction(c, m);
  const Tensor x = c.in("self");
  const Tensor g = Expand(c, Unreduce(c, c.grad(), r.dims, r.keepdim, m.dim()), m.sizes);
  Set(c, o, "self", WhereOr0(c, c.call("logical_not", {c.call("isnan", {x})}), g));
  return o;
}

Grads ProdF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const TensorMeta& m = c.meta("self");
  const Reduction r = ReadReduction(c, m);
  const Tensor x = c.in("self");
  const Tensor g = Unreduce(c, c.grad(), r.dims, r.keepdim, m.dim());
  const Tensor out = Unreduce(c, c.out(), r.dims, r.keepdim, m.dim());
  const Tensor zero = EqS(c, x, 0.0);
  const Tensor zeros_per_slice = SumKeep(c, zero, r.dims, m.dim());
  const Tensor x_nz = c.call("where.ScalarSelf", {zero, Scalar::Float(1.0), x});
  // The product of the non-zero elements of each slice.
  Tensor prod_nz;
  if (c.op().schema.overload == "dim_int") {
    prod_nz = c.call("prod.dim_int", {x_nz, r.dims.empty() ? int64_t{0} : r.dims[0], true});
  } else {
    prod_nz = c.call("prod", {x_nz});
  }
  const Tensor no_zero = Div(c, out, x_nz);
  const Tensor one_zero = WhereOr0(c, c.call("logical_and", {EqS(c, zeros_per_slice, 1.0), zero}), prod_nz);
  const Tensor others = Where(c, EqS(c, zeros_per_slice, 0.0), no_zero, one_zero);
  Set(c, o, "self", Mul(c, g, others));
  return o;
}

// var / std, every overload: the correction comes from `correction` (None: 1)
// or from `unbiased`.
double Correction(const C& c) {
  const std::string& overload = c.op().schema.overload;
  if (overload == "correction") {
    const Value& v = c.value("correction");
    return v.is_none() ? 1.0 : static_cast<double>(v.to_int());
  }
  return c.value("unbiased").to_bool() ? 1.0 : 0.0;
}

template <bool kStd>
Grads VarStdF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const TensorMeta& m = c.meta("self");
  const Reduction r = ReadReduction(c, m);
  const double divisor = static_cast<double>(r.count) - Correction(c);
  const Tensor x = c.in("self");
  const Tensor g = Unreduce(c, c.grad(), r.dims, r.keepdim, m.dim());
  const Tensor mean = m.dim() == 0 ? x : c.call("mean", {x, r.dims, true});
  const Tensor centered = Sub(c, x, mean);
  if constexpr (kStd) {
    const Tensor out = Unreduce(c, c.out(), r.dims, r.keepdim, m.dim());
    const Tensor d = Div(c, Mul(c, g, centered), MulS(c, out, divisor));
    Set(c, o, "self", WhereOr0(c, NeS(c, out, 0.0), d));
  } else {
    Set(c, o, "self", MulS(c, Mul(c, g, centered), 2.0 / divisor));
  }
  return o;
}

Grads NormF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const TensorMeta& m = c.meta("self");
  const Reduction r = ReadReduction(c, m);
  const bool linalg = c.op().name() == "linalg_vector_norm";
  const Value& pv = c.value(linalg ? "ord" : "p");
  const double p = pv.is_none() ? 2.0 : pv.scalar().to_double();
  const Tensor x = c.in("self");
  // The result is read for every p, as PyTorch's node saves it.
  const Tensor out = Unreduce(c, c.out(), r.dims, r.keepdim, m.dim());
  const Tensor g = Unreduce(c, c.grad(), r.dims, r.keepdim, m.dim());
  if (p == 0.0) {
    Set(c, o, "self", ZerosLike(c, x));
    return o;
  }
  const Tensor sign = c.call("sign", {x});
  if (p == 1.0) {
    Set(c, o, "self", Mul(c, g, sign));
    return o;
  }
  if (std::isinf(p)) {
    const Tensor mask = c.call("to.dtype", {c.call("eq.Tensor", {c.call("abs", {x}), out}), g.meta.dtype});
    const Tensor count = SumKeep(c, mask, r.dims, m.dim());
    Set(c, o, "self", Mul(c, Mul(c, sign, Div(c, g, count)), mask));
    return o;
  }
  Tensor d;
  if (p == 2.0) {
    d = Div(c, Mul(c, g, x), out);
  } else {
    const Tensor num = Mul(c, Mul(c, g, x), c.call("pow.Tensor_Scalar", {c.call("abs", {x}), Scalar::Float(p - 2.0)}));
    d = Div(c, num, c.call("pow.Tensor_Scalar", {out, Scalar::Float(p - 1.0)}));
  }
  Set(c, o, "self", WhereOr0(c, NeS(c, out, 0.0), d));
  return o;
}

Grads LogsumexpF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const TensorMeta& m = c.meta("self");
  const Reduction r = ReadReduction(c, m);
  const Tensor x = c.in("self");
  const Tensor g = Unreduce(c, c.grad(), r.dims, r.keepdim, m.dim());
  const Tensor out = Unreduce(c, c.out(), r.dims, r.keepdim, m.dim());
  Set(c, o, "self", Mul(c, g, c.call("exp", {Sub(c, x, out)})));
  return o;
}

// sum(h, dim, keepdim) - cumsum(h, dim) + h: h summed from each position to the end.
Tensor ReverseCumsum(const C& c, const Tensor& h, int64_t dim, int64_t rank) {
  if (rank == 0) return h;
  const Tensor total = SumDims(c, h, {dim}, true);
  return Add(c, Sub(c, total, c.call("cumsum", {h, dim})), h);
}

Grads CumsumF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const TensorMeta& m = c.meta("self");
  const int64_t dim = Wrap(c, c.value("dim").to_int(), m.dim());
  Set(c, o, "self", ReverseCumsum(c, c.grad(), dim, m.dim()));
  return o;
}

// cumprod: grad_i = sum_{k >= i} g_k * prod_{j <= k, j != i} x_j. Where x_i is
// not 0 that is reverse_cumsum(g * out)_i / x_i. At the first zero z of a
// slice it is reverse_cumsum(g * cumprod(x with x_z := 1))_z; at later zeros
// it is 0 (the first zero stays in every product).
Grads CumprodF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const TensorMeta& m = c.meta("self");
  const int64_t dim = Wrap(c, c.value("dim").to_int(), m.dim());
  const Tensor x = c.in("self");
  const Tensor g = c.grad();
  const Tensor zero = EqS(c, x, 0.0);
  const Tensor x_nz = c.call("where.ScalarSelf", {zero, Scalar::Float(1.0), x});
  const Tensor no_zero = Div(c, ReverseCumsum(c, Mul(c, g, c.out()), dim, m.dim()), x_nz);
  const Tensor first_zero =
      m.dim() == 0 ? zero : c.call("logical_and", {zero, EqS(c, c.call("cumsum", {zero, dim}), 1.0)});
  const Tensor x_first = c.call("where.ScalarSelf", {first_zero, Scalar::Float(1.0), x});
  const Tensor at_first = ReverseCumsum(c, Mul(c, g, c.call("cumprod", {x_first, dim})), dim, m.dim());
  Set(c, o, "self", Where(c, zero, WhereOr0(c, first_zero, at_first), no_zero));
  return o;
}

Grads VarF(C& c) { return VarStdF<false>(c); }
Grads StdF(C& c) { return VarStdF<true>(c); }

}  // namespace tensord::runtime::formulas
