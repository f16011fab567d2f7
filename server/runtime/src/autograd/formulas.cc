// Derivative formulas for the differentiable ops of the table (meta/src/ops.cc),
// written as calls of other table ops through the daemon's dispatcher, so a
// backward with create_graph records them and double backward works. The
// math follows PyTorch's tools/autograd/derivatives.yaml (facts, not code).
//
// Each formula returns one gradient per input slot (undefined where none or
// not needed). Gradients may be broadcast versions of the input's shape or of
// another floating dtype: the engine sums over broadcast dims and casts.
//
// Errors are recorded in the context (FormulaContext::Fail, or by a failing
// ctx.call / ctx.in), never thrown; after one, every further ctx.call is a
// no-op returning an undefined Tensor, so formulas need no error checks of
// their own except before indexing sizes (SizeAt, Wrap).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/shape_rules.h"
#include "tensord/runtime/autograd.h"

#include "formula_util.h"

namespace tensord::runtime::formulas {

using namespace formula_util;  // NOLINT: the formula shorthands

Grads NegF(C& c) {
  return Unary(c, [](const C& c, const Tensor& g) { return Neg(c, g); });
}
Grads AbsF(C& c) {
  return Unary(c, [](const C& c, const Tensor& g) { return Mul(c, g, c.call("sign", {c.in("self")})); });
}
Grads ReluF(C& c) {
  return Unary(c, [](const C& c, const Tensor& g) {
    return WhereOr0(c, c.call("gt.Scalar", {c.out(), Scalar::Int(0)}), g);
  });
}
Grads ExpF(C& c) {
  return Unary(c, [](const C& c, const Tensor& g) { return Mul(c, g, c.out()); });
}
Grads LogF(C& c) {
  return Unary(c, [](const C& c, const Tensor& g) { return Div(c, g, c.in("self")); });
}
Grads SqrtF(C& c) {
  return Unary(c, [](const C& c, const Tensor& g) { return Div(c, g, MulS(c, c.out(), 2.0)); });
}
Grads RsqrtF(C& c) {
  return Unary(c, [](const C& c, const Tensor& g) {
    const Tensor r = c.out();
    return Mul(c, g, MulS(c, Mul(c, r, Sq(c, r)), -0.5));
  });
}
Grads SinF(C& c) {
  return Unary(c, [](const C& c, const Tensor& g) { return Mul(c, g, c.call("cos", {c.in("self")})); });
}
Grads CosF(C& c) {
  return Unary(c, [](const C& c, const Tensor& g) { return Neg(c, Mul(c, g, c.call("sin", {c.in("self")}))); });
}
Grads TanhF(C& c) {
  return Unary(c, [](const C& c, const Tensor& g) { return Mul(c, g, RsubS(c, Sq(c, c.out()), 1.0)); });
}
Grads SigmoidF(C& c) {
  return Unary(c, [](const C& c, const Tensor& g) {
    const Tensor y = c.out();
    return Mul(c, g, Mul(c, y, RsubS(c, y, 1.0)));
  });
}
Grads ReciprocalF(C& c) {
  return Unary(c, [](const C& c, const Tensor& g) { return Neg(c, Mul(c, g, Sq(c, c.out()))); });
}
Grads ErfF(C& c) {
  return Unary(c, [](const C& c, const Tensor& g) {
    const Tensor x = c.in("self");
    const Tensor e = c.call("exp", {Neg(c, Sq(c, x))});
    return Mul(c, g, MulS(c, e, 2.0 / std::sqrt(M_PI)));
  });
}
Grads GeluF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const Tensor g = c.grad();
  const Tensor x = c.in("self");
  const std::string approx = c.value("approximate").str();
  Tensor d;
  if (approx == "tanh") {
    const double k = std::sqrt(2.0 / M_PI), a = 0.044715;
    const Tensor x2 = Sq(c, x);
    const Tensor inner = MulS(c, Add(c, x, MulS(c, Mul(c, x2, x), a)), k);
    const Tensor t = c.call("tanh", {inner});
    const Tensor left = MulS(c, AddS(c, t, 1.0), 0.5);
    const Tensor dinner = MulS(c, AddS(c, MulS(c, x2, 3.0 * a), 1.0), k);
    const Tensor right = Mul(c, MulS(c, Mul(c, x, RsubS(c, Sq(c, t), 1.0)), 0.5), dinner);
    d = Add(c, left, right);
  } else {
    const Tensor cdf = MulS(c, AddS(c, c.call("erf", {MulS(c, x, M_SQRT1_2)}), 1.0), 0.5);
    const Tensor pdf = MulS(c, c.call("exp", {MulS(c, Sq(c, x), -0.5)}), 1.0 / std::sqrt(2.0 * M_PI));
    d = Add(c, cdf, Mul(c, x, pdf));
  }
  Set(c, o, "self", Mul(c, g, d));
  return o;
}

// ------------------------------------------------------------ binary
Grads AddF(C& c) {  // add.Tensor / sub.Tensor / add_ / sub_ (sign by name)
  Grads o = Out(c);
  const Tensor g = c.grad();
  const bool sub = c.op().name() == "sub" || c.op().name() == "sub_";
  const Scalar alpha = c.value("alpha").scalar();
  if (c.needs("self")) Set(c, o, "self", g);
  if (c.needs("other")) {
    Tensor go = MaybeScale(c, g, alpha);
    if (sub) go = Neg(c, go);
    Set(c, o, "other", go);
  }
  return o;
}
Grads RsubScalarF(C& c) {
  Grads o = Out(c);
  if (c.needs("self")) Set(c, o, "self", Neg(c, MaybeScale(c, c.grad(), c.value("alpha").scalar())));
  return o;
}
// mul.Tensor / mul_.Tensor; `self` is the value before an in-place op.
Grads MulF(C& c) {
  Grads o = Out(c);
  const Tensor g = c.grad();
  if (c.needs("self")) Set(c, o, "self", Mul(c, g, c.in("other")));
  if (c.needs("other")) Set(c, o, "other", Mul(c, g, c.in("self")));
  return o;
}
Grads MulScalarF(C& c) {
  Grads o = Out(c);
  c.RequireSaved();
  if (c.needs("self")) Set(c, o, "self", MulS(c, c.grad(), c.value("other").scalar()));
  return o;
}
Grads DivF(C& c) {
  Grads o = Out(c);
  const Tensor g = c.grad();
  const Tensor other = c.in("other");
  if (c.needs("self")) Set(c, o, "self", Div(c, g, other));
  if (c.needs("other")) Set(c, o, "other", Neg(c, Div(c, Mul(c, g, c.in("self")), Sq(c, other))));
  return o;
}
Grads DivScalarF(C& c) {
  c.RequireSaved();
  return DivByScalarF(c);
}
Grads RemainderF(C& c) { return RoundedModuloF(c, "floor"); }
Grads PowTTF(C& c) {
  Grads o = Out(c);
  const Tensor g = c.grad();
  const Tensor self = c.in("self");
  const Tensor e = c.in("exponent");
  if (c.needs("self")) {
    const Tensor pm1 = c.call("pow.Tensor_Tensor", {self, c.call("sub.Scalar", {e, Scalar::Int(1)})});
    Set(c, o, "self", Mul(c, g, Mul(c, e, pm1)));
  }
  if (c.needs("exponent")) {
    Tensor d = Mul(c, g, Mul(c, c.out(), c.call("log", {self})));
    // 0 ** e: the derivative is taken as 0 (as PyTorch, where e >= 0).
    const Tensor zero = c.call("logical_and", {c.call("eq.Scalar", {self, Scalar::Int(0)}),
                                               c.call("ge.Scalar", {e, Scalar::Int(0)})});
    d = c.call("masked_fill.Scalar", {d, zero, Scalar::Float(0.0)});
    Set(c, o, "exponent", d);
  }
  return o;
}
Grads PowTSF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const Scalar e = c.value("exponent").scalar();
  const Tensor g = c.grad();
  const Tensor self = c.in("self");  // read for every exponent, as PyTorch's node saves it
  if (e.to_double() == 0.0) {
    Set(c, o, "self", ZerosLike(c, g));
    return o;
  }
  Scalar em1 = e.is_float() ? Scalar::Float(e.to_double() - 1) : Scalar::Int(e.to_int() - 1);
  const Tensor p = c.call("pow.Tensor_Scalar", {self, em1});
  Set(c, o, "self", Mul(c, g, MulS(c, p, e)));
  return o;
}
Grads PowScalarF(C& c) {  // pow.Scalar(Scalar self, Tensor exponent)
  Grads o = Out(c);
  if (!c.needs("exponent")) return o;
  const double base = c.value("self").scalar().to_double();
  const Tensor g = c.grad();
  // Both saved tensors are read for every base, as PyTorch's node saves both.
  const Tensor y = c.out();
  const Tensor e = c.in("exponent");
  if (base == 0.0) {
    Tensor d = Mul(c, g, MulS(c, y, -INFINITY));
    const Tensor nonneg = c.call("ge.Scalar", {e, Scalar::Int(0)});
    Set(c, o, "exponent", c.call("masked_fill.Scalar", {d, nonneg, Scalar::Float(0.0)}));
    return o;
  }
  Set(c, o, "exponent", Mul(c, g, MulS(c, y, std::log(base))));
  return o;
}
// maximum / minimum: the gradient goes to the larger (smaller) input; ties split it.
Grads MaxMinimumF(C& c) {
  Grads o = Out(c);
  const bool is_max = c.op().name() == "maximum";
  const Tensor g = c.grad();
  const Tensor a = c.in("self"), b = c.in("other");
  const Tensor eq = c.call("eq.Tensor", {a, b});
  const Tensor half = MulS(c, g, 0.5);
  if (c.needs("self")) {
    const Tensor win = c.call(is_max ? "gt.Tensor" : "lt.Tensor", {a, b});
    Set(c, o, "self", Where(c, eq, half, WhereOr0(c, win, g)));
  }
  if (c.needs("other")) {
    const Tensor win = c.call(is_max ? "lt.Tensor" : "gt.Tensor", {a, b});
    Set(c, o, "other", Where(c, eq, half, WhereOr0(c, win, g)));
  }
  return o;
}
Grads WhereF(C& c) {
  Grads o = Out(c);
  const Tensor g = c.grad();
  const Tensor cond = c.in("condition");
  const FunctionSchema& s = c.op().schema;
  if (s.arguments[1].type == ArgType::kTensor && c.needs("self")) Set(c, o, "self", WhereOr0(c, cond, g));
  if (s.arguments[2].type == ArgType::kTensor && c.needs("other")) {
    Set(c, o, "other", c.call("where.ScalarSelf", {cond, Scalar::Float(0.0), g}));
  }
  return o;
}
Grads ClampF(C& c) {  // clamp / clamp_ (self: the value before)
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const Tensor g = c.grad();
  const Tensor x = c.in("self");
  const Value& mn = c.value("min");
  const Value& mx = c.value("max");
  Tensor mask;
  if (!mn.is_none()) mask = c.call("ge.Scalar", {x, mn.scalar()});
  if (!mx.is_none()) {
    const Tensor m2 = c.call("le.Scalar", {x, mx.scalar()});
    mask = mask.defined() ? c.call("logical_and", {mask, m2}) : m2;
  }
  Set(c, o, "self", mask.defined() ? WhereOr0(c, mask, g) : g);
  return o;
}
// clamp.Tensor / clamp_.Tensor: self keeps the gradient where it is inside
// [min, max]; min where self < min (and min < max); max where self > max or
// max < min (derivatives.yaml's clamp_backward_min_max).
Grads ClampTensorF(C& c) {
  Grads o = Out(c);
  const Tensor g = c.grad();
  const Tensor x = c.in("self");
  const bool has_min = !c.value("min").is_none(), has_max = !c.value("max").is_none();
  const Tensor mn = has_min ? c.in("min") : Tensor();
  const Tensor mx = has_max ? c.in("max") : Tensor();
  if (c.needs("self")) {
    Tensor mask;
    if (has_min) mask = c.call("ge.Tensor", {x, mn});
    if (has_max) {
      const Tensor m2 = c.call("le.Tensor", {x, mx});
      mask = mask.defined() ? c.call("logical_and", {mask, m2}) : m2;
    }
    Set(c, o, "self", WhereOr0(c, mask, g));
  }
  if (has_min && c.needs("min")) {
    Tensor p = c.call("lt.Tensor", {x, mn});
    if (has_max) p = c.call("logical_and", {p, c.call("lt.Tensor", {mn, mx})});
    Set(c, o, "min", WhereOr0(c, p, g));
  }
  if (has_max && c.needs("max")) {
    Tensor p = c.call("gt.Tensor", {x, mx});
    if (has_min) p = c.call("logical_or", {p, c.call("lt.Tensor", {mx, mn})});
    Set(c, o, "max", WhereOr0(c, p, g));
  }
  return o;
}
// clamp_min / clamp_max, Scalar or Tensor bound: self keeps the gradient on
// its side of the bound (ties included); a tensor bound gets the rest.
Grads ClampBoundF(C& c) {
  Grads o = Out(c);
  const bool is_min = absl::StartsWith(c.op().name(), "clamp_min");
  const char* bound_name = is_min ? "min" : "max";
  const Tensor g = c.grad();
  const Tensor x = c.in("self");
  const Value& b = c.value(bound_name);
  if (c.needs("self")) {
    const Tensor mask = b.is_tensor() ? c.call(is_min ? "ge.Tensor" : "le.Tensor", {x, c.in(bound_name)})
                                      : c.call(is_min ? "ge.Scalar" : "le.Scalar", {x, b.scalar()});
    Set(c, o, "self", WhereOr0(c, mask, g));
  }
  if (b.is_tensor() && c.needs(bound_name)) {
    Set(c, o, bound_name, WhereOr0(c, c.call(is_min ? "lt.Tensor" : "gt.Tensor", {x, c.in(bound_name)}), g));
  }
  return o;
}
Grads MaskedFillF(C& c) {
  Grads o = Out(c);
  if (c.needs("self")) {
    Set(c, o, "self", c.call("masked_fill.Scalar", {c.grad(), c.in("mask"), Scalar::Float(0.0)}));
  }
  // masked_fill.Tensor: the 0-dim value received every masked element's gradient.
  if (c.needs("value")) Set(c, o, "value", SumDims(c, WhereOr0(c, c.in("mask"), c.grad()), {}, false));
  return o;
}
Grads AddcmulF(C& c) {
  Grads o = Out(c);
  const Tensor g = c.grad();
  const Scalar v = c.value("value").scalar();
  if (c.needs("self")) Set(c, o, "self", g);
  if (c.needs("tensor1")) Set(c, o, "tensor1", MaybeScale(c, Mul(c, g, c.in("tensor2")), v));
  if (c.needs("tensor2")) Set(c, o, "tensor2", MaybeScale(c, Mul(c, g, c.in("tensor1")), v));
  return o;
}
Grads AddcdivF(C& c) {
  Grads o = Out(c);
  const Tensor g = c.grad();
  const Scalar v = c.value("value").scalar();
  if (c.needs("self")) Set(c, o, "self", g);
  if (c.needs("tensor1")) Set(c, o, "tensor1", MaybeScale(c, Div(c, g, c.in("tensor2")), v));
  if (c.needs("tensor2")) {
    const Tensor t2 = c.in("tensor2");
    const Tensor d = Neg(c, Div(c, Mul(c, g, c.in("tensor1")), Sq(c, t2)));
    Set(c, o, "tensor2", MaybeScale(c, d, v));
  }
  return o;
}
// copy_: self's old value is overwritten (zero gradient); src gets the gradient.
Grads CopyF(C& c) {
  Grads o = Out(c);
  const Tensor g = c.grad();
  if (c.needs("self")) Set(c, o, "self", ZerosLike(c, g));
  if (c.needs("src")) Set(c, o, "src", g);
  return o;
}

// ------------------------------------------------------------ reductions
Grads SumF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const TensorMeta& m = c.meta("self");
  const Shape dims = ReducedDims(c, c.value("dim"), m.dim());
  Tensor g = Unreduce(c, c.grad(), dims, c.value("keepdim").to_bool(), m.dim());
  Set(c, o, "self", Expand(c, g, m.sizes));
  return o;
}
Grads MeanF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const TensorMeta& m = c.meta("self");
  const Shape dims = ReducedDims(c, c.value("dim"), m.dim());
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < m.dim()) n *= m.sizes[d];  // a 0-dim self reduced over dim 0 or -1: one element
  }
  Tensor g = Unreduce(c, c.grad(), dims, c.value("keepdim").to_bool(), m.dim());
  g = c.call("div.Scalar", {g, Scalar::Int(n)});
  Set(c, o, "self", Expand(c, g, m.sizes));
  return o;
}
// amax/amin/max()/min(): the gradient is shared evenly among the extreme elements.
Grads AmaxF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const TensorMeta& m = c.meta("self");
  const bool all = c.op().schema.arguments.size() == 1;
  const Shape dims = ReducedDims(c, all ? Value() : c.value("dim"), m.dim());
  const bool keepdim = all ? false : c.value("keepdim").to_bool();
  const Tensor x = c.in("self");
  const Tensor y = Unreduce(c, c.out(), dims, keepdim, m.dim());
  const Tensor g = Unreduce(c, c.grad(), dims, keepdim, m.dim());
  const Tensor mask = c.call("to.dtype", {c.call("eq.Tensor", {x, y}), g.meta.dtype});
  const Tensor count = m.dim() == 0 ? mask : SumDims(c, mask, dims, true);
  Set(c, o, "self", Mul(c, Div(c, g, count), mask));
  return o;
}
// max.dim / min.dim / topk: the gradient goes to the selected indices.
Grads IndexedReductionF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const TensorMeta& m = c.meta("self");
  const bool topk = c.op().name() == "topk";
  const int64_t dim = Wrap(c, c.value("dim").to_int(), m.dim());
  const bool keepdim = topk ? true : c.value("keepdim").to_bool();
  Tensor g = c.grad(0);
  Tensor idx = c.out(1);
  if (m.dim() == 0) {
    Set(c, o, "self", g);
    return o;
  }
  if (!keepdim) {
    g = Unsqueeze(c, g, dim);
    idx = Unsqueeze(c, idx, dim);
  }
  const Tensor z = Zeros(c, m.sizes, g.meta.dtype, g.meta.device);
  Set(c, o, "self", c.call("scatter_add", {z, dim, idx, g}));
  return o;
}

// ------------------------------------------------------------ matmul
Grads MatmulF(C& c) {
  Grads o = Out(c);
  const Tensor g = c.grad();
  const bool is_mm = c.op().name() != "matmul";
  const char* b_name = is_mm ? "mat2" : "other";
  const int64_t da = c.meta("self").dim(), db = c.meta(b_name).dim();
  if (c.needs("self")) {
    const Tensor b = c.in(b_name);
    Tensor ga;
    if (da == 1 && db == 1) {
      ga = Mul(c, g, b);
    } else if (db == 1) {
      ga = Mul(c, Unsqueeze(c, g, -1), b);
    } else if (da == 1) {
      ga = Squeeze(c, Matmul(c, Unsqueeze(c, g, -2), TransposeLast(c, b)), -2);
    } else {
      ga = Matmul(c, g, TransposeLast(c, b));
    }
    Set(c, o, "self", ga);
  }
  if (c.needs(b_name)) {
    const Tensor a = c.in("self");
    Tensor gb;
    if (da == 1 && db == 1) {
      gb = Mul(c, g, a);
    } else if (db == 1) {
      gb = Squeeze(c, Matmul(c, TransposeLast(c, a), Unsqueeze(c, g, -1)), -1);
    } else if (da == 1) {
      gb = Mul(c, Unsqueeze(c, a, -1), Unsqueeze(c, g, -2));
    } else {
      gb = Matmul(c, TransposeLast(c, a), g);
    }
    Set(c, o, b_name, gb);
  }
  return o;
}

// ------------------------------------------------------------ views, copies
Grads ReshapeBackF(C& c) {  // view, reshape, squeeze*, unsqueeze, flatten
  Grads o = Out(c);
  if (c.needs("self")) Set(c, o, "self", Reshape(c, c.grad(), c.meta("self").sizes));
  return o;
}
Grads TransposeF(C& c) {
  Grads o = Out(c);
  if (c.needs("self")) Set(c, o, "self", c.call("transpose.int", {c.grad(), c.value("dim0"), c.value("dim1")}));
  return o;
}
Grads TF(C& c) {
  Grads o = Out(c);
  if (c.needs("self")) Set(c, o, "self", c.call("t", {c.grad()}));
  return o;
}
Grads PermuteF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const Shape& dims = c.value("dims").int_list();
  const int64_t rank = c.meta("self").dim();
  Shape inv(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = Wrap(c, dims[i], rank);
    if (d >= static_cast<int64_t>(inv.size())) {
      c.Fail(InternalErr(absl::StrCat("autograd: permute dims ", ShapeToString(dims), " for rank ", rank)));
      return o;
    }
    inv[d] = static_cast<int64_t>(i);
  }
  Set(c, o, "self", c.call("permute", {c.grad(), inv}));
  return o;
}
Grads SliceF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const TensorMeta& m = c.meta("self");
  const int64_t dim = Wrap(c, c.value("dim").to_int(), m.dim());
  const int64_t n = SizeAt(c, m, dim);
  auto norm = [n](const Value& v, int64_t dflt) {
    if (v.is_none()) return dflt;
    int64_t x = v.to_int();
    if (x < 0) x += n;
    return std::clamp<int64_t>(x, 0, n);
  };
  const int64_t start = norm(c.value("start"), 0);
  const int64_t end = std::max(start, norm(c.value("end"), n));
  Set(c, o, "self", c.call("slice_backward", {c.grad(), m.sizes, dim, start, end, c.value("step").to_int()}));
  return o;
}
Grads NarrowF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const TensorMeta& m = c.meta("self");
  const int64_t dim = Wrap(c, c.value("dim").to_int(), m.dim());
  int64_t start = c.value("start").to_int();
  if (start < 0) start += SizeAt(c, m, dim);
  const int64_t end = start + c.value("length").to_int();
  Set(c, o, "self", c.call("slice_backward", {c.grad(), m.sizes, dim, start, end, int64_t{1}}));
  return o;
}
Grads DiagonalF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  Set(c, o, "self", c.call("diagonal_backward", {c.grad(), c.meta("self").sizes, c.value("offset"), c.value("dim1"),
                                                  c.value("dim2")}));
  return o;
}
Grads SelectF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const TensorMeta& m = c.meta("self");
  const int64_t dim = Wrap(c, c.value("dim").to_int(), m.dim());
  int64_t index = c.value("index").to_int();
  if (index < 0) index += SizeAt(c, m, dim);
  Set(c, o, "self", c.call("select_backward", {c.grad(), m.sizes, dim, index}));
  return o;
}

// ------------------------------------------------------------ indexing, joining
Grads GatherF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const TensorMeta& m = c.meta("self");
  const Tensor g = c.grad();
  Set(c, o, "self",
      c.call("scatter_add", {Zeros(c, m.sizes, g.meta.dtype, g.meta.device), c.value("dim"), c.in("index"), g}));
  return o;
}
Grads IndexSelectF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const TensorMeta& m = c.meta("self");
  const Tensor g = c.grad();
  Set(c, o, "self", c.call("index_add", {Zeros(c, m.sizes, g.meta.dtype, g.meta.device), c.value("dim"), c.in("index"), g}));
  return o;
}
std::vector<Tensor> IndexList(const C& c) {
  std::vector<Tensor> idx;
  for (int s : c.slots("indices")) idx.push_back(s >= 0 ? c.slot(static_cast<size_t>(s)) : Tensor());
  return idx;
}
Grads IndexF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const TensorMeta& m = c.meta("self");
  const Tensor g = c.grad();
  Set(c, o, "self", c.call("index_put", {Zeros(c, m.sizes, g.meta.dtype, g.meta.device), IndexList(c), g, true}));
  return o;
}
Grads CatF(C& c) {
  Grads o = Out(c);
  const Tensor g = c.grad();
  const std::vector<int>& slots = c.slots("tensors");
  const int64_t dim = Wrap(c, c.value("dim").to_int(), g.meta.dim());
  int64_t offset = 0;
  for (int s : slots) {
    if (s < 0) continue;
    const TensorMeta& m = c.slot_meta(s);
    if (m.dim() == 1 && m.sizes[0] == 0 && g.meta.dim() != 1) continue;  // legacy empty inputs take no part
    const int64_t len = SizeAt(c, m, dim);
    if (c.needs_slot(s)) o[s] = c.call("narrow", {g, dim, offset, len});
    offset += len;
  }
  return o;
}
Grads StackF(C& c) {
  Grads o = Out(c);
  const Tensor g = c.grad();
  const std::vector<int>& slots = c.slots("tensors");
  const int64_t dim = Wrap(c, c.value("dim").to_int(), g.meta.dim());
  for (size_t k = 0; k < slots.size(); ++k) {
    const int s = slots[k];
    if (s >= 0 && c.needs_slot(s)) o[s] = c.call("select.int", {g, dim, static_cast<int64_t>(k)});
  }
  return o;
}
Grads MaskedSelectF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const TensorMeta& m = c.meta("self");
  const Tensor mask = c.in("mask");
  const Tensor g = c.grad();
  absl::StatusOr<Shape> shape = BroadcastShapes("masked_select", {m.sizes, mask.meta.sizes});
  if (!shape.ok()) {
    c.Fail(shape.status());
    return o;
  }
  Set(c, o, "self", c.call("masked_scatter", {Zeros(c, *shape, g.meta.dtype, g.meta.device), mask, g}));
  return o;
}
Grads ScatterAddF(C& c) {
  Grads o = Out(c);
  const Tensor g = c.grad();
  if (c.needs("self")) Set(c, o, "self", g);
  if (c.needs("src")) Set(c, o, "src", c.call("gather", {g, c.value("dim"), c.in("index")}));
  return o;
}
Grads IndexAddF(C& c) {
  Grads o = Out(c);
  const Tensor g = c.grad();
  if (c.needs("self")) Set(c, o, "self", g);
  if (c.needs("source")) {
    Tensor s = c.call("index_select", {g, c.value("dim"), c.in("index")});
    if (c.meta("source").dim() == 0) s = Reshape(c, s, {});
    Set(c, o, "source", MaybeScale(c, s, c.value("alpha").scalar()));
  }
  return o;
}
Grads IndexPutF(C& c) {
  Grads o = Out(c);
  const Tensor g = c.grad();
  const std::vector<Tensor> idx = IndexList(c);
  if (c.needs("self")) {
    if (c.value("accumulate").to_bool()) {
      Set(c, o, "self", g);
    } else {
      const Tensor zero = c.call("zeros", {Shape{}, g.meta.dtype, g.meta.device});
      Set(c, o, "self", c.call("index_put", {g, idx, zero, false}));
    }
  }
  if (c.needs("values")) {
    // A boolean mask gives a data-dependent shape, which index.Tensor cannot
    // take: select with masked_select instead (the mask covers g's leading dims).
    const bool one_mask = idx.size() == 1 && idx[0].defined() &&
                          (idx[0].meta.dtype == ScalarType::kBool || idx[0].meta.dtype == ScalarType::kUInt8);
    if (one_mask) {
      Tensor m = idx[0];
      if (m.meta.dtype != ScalarType::kBool) m = c.call("to.dtype", {m, ScalarType::kBool});
      Shape rest(g.meta.sizes.begin() + std::min<int64_t>(m.meta.dim(), g.meta.dim()), g.meta.sizes.end());
      for (size_t k = 0; k < rest.size(); ++k) m = Unsqueeze(c, m, -1);
      Shape out = {-1};
      out.insert(out.end(), rest.begin(), rest.end());
      Set(c, o, "values", Reshape(c, c.call("masked_select", {g, m}), out));
    } else {
      Set(c, o, "values", c.call("index.Tensor", {g, idx}));
    }
  }
  return o;
}
Grads MaskedScatterF(C& c) {
  Grads o = Out(c);
  const Tensor g = c.grad();
  const Tensor mask = c.in("mask");
  if (c.needs("self")) Set(c, o, "self", c.call("masked_fill.Scalar", {g, mask, Scalar::Float(0.0)}));
  if (c.needs("source")) {
    const TensorMeta& sm = c.meta("source");
    Tensor sel = c.call("masked_select", {g, mask});
    const int64_t missing = sm.numel() - sel.meta.numel();
    if (missing > 0) sel = c.call("cat", {std::vector<Tensor>{sel, Zeros(c, {missing}, g.meta.dtype, g.meta.device)}, int64_t{0}});
    Set(c, o, "source", Reshape(c, sel, sm.sizes));
  }
  return o;
}
Grads SelectBackwardF(C& c) {
  Grads o = Out(c);
  if (c.needs("grad_output")) {
    Set(c, o, "grad_output", c.call("select.int", {c.grad(), c.value("dim"), c.value("index")}));
  }
  return o;
}
Grads DiagonalBackwardF(C& c) {
  Grads o = Out(c);
  if (c.needs("grad_output")) {
    Set(c, o, "grad_output",
        c.call("diagonal", {c.grad(), c.value("offset"), c.value("dim1"), c.value("dim2")}));
  }
  return o;
}
Grads SliceBackwardF(C& c) {
  Grads o = Out(c);
  if (c.needs("grad_output")) {
    Set(c, o, "grad_output",
        c.call("slice.Tensor", {c.grad(), c.value("dim"), c.value("start"), c.value("end"), c.value("step")}));
  }
  return o;
}

// ------------------------------------------------------------ softmax
Grads SoftmaxF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const Tensor y = c.out();
  const Tensor g = c.grad();
  const int64_t dim = Wrap(c, c.value("dim").to_int(), y.meta.dim());
  const Tensor gy = Mul(c, g, y);
  const Tensor s = y.meta.dim() == 0 ? gy : SumDims(c, gy, {dim}, true);
  Set(c, o, "self", Mul(c, y, Sub(c, g, s)));
  return o;
}
Grads LogSoftmaxF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const Tensor y = c.out();
  const Tensor g = c.grad();
  const int64_t dim = Wrap(c, c.value("dim").to_int(), y.meta.dim());
  const Tensor s = y.meta.dim() == 0 ? g : SumDims(c, g, {dim}, true);
  Set(c, o, "self", Sub(c, g, Mul(c, c.call("exp", {y}), s)));
  return o;
}

// Ops with no tensor input that could take a gradient (where.Scalar) or whose
// input's value does not reach the output (fill_, zero_, uniform_, normal_).
Grads NoInputsF(C& c) { return Out(c); }

// The two formulas of formula_util.h's unary family that records name
// directly: a gradient of zeros (sign, floor, ...), and the gradient itself
// (views and copies: the engine sums it to the input's shape and casts it).
Grads ZeroGrad(C& c) {
  Grads o = Out(c);
  if (c.needs("self")) Set(c, o, "self", ZerosLike(c, c.grad()));
  return o;
}
Grads Identity(C& c) {
  Grads o = Out(c);
  Set(c, o, "self", c.grad());
  return o;
}

}  // namespace tensord::runtime::formulas

namespace tensord::runtime {

namespace {

// Each built-in op's formula, by op id: the records of tensord/meta/ops.inl,
// in the op table's order.
const FormulaFn kFormulaOf[] = {
#define TD_OP(schema, meta_fn, flags, saved_reads, formula) formulas::formula,
#define TD_OP_ND(schema, meta_fn, flags) nullptr,
#include "tensord/meta/ops.inl"
#undef TD_OP
#undef TD_OP_ND
};

}  // namespace

FormulaFn FindFormula(const OpEntry& op) {
  if (op.declared_derivative != nullptr) return &DeclaredFormula;
  const OpTable& table = OpTable::Get();
  // Both come from the same records; a mismatch is a build bug.
  static const bool same_size = [&] {
    if (std::size(kFormulaOf) != table.size()) {
      std::fprintf(stderr, "tensord: the formula table has %zu records and the op table %zu\n",
                   std::size(kFormulaOf), table.size());
      std::abort();
    }
    return true;
  }();
  (void)same_size;
  // Ids are positions in their own table: an entry of another one has none.
  return op.id < std::size(kFormulaOf) && &table.at(op.id) == &op ? kFormulaOf[op.id] : nullptr;
}

}  // namespace tensord::runtime
