// Derivative formulas of elementwise ops (unary, binary, ternary), written as calls of
// other table ops (see formula_util.h and formulas.cc for the conventions).
// The math follows PyTorch's derivatives.yaml.
#include <cmath>
#include <string>

#include "formula_util.h"

namespace tensord::runtime::formulas {

using namespace formula_util;  // NOLINT: the formula shorthands

constexpr double kLn2 = 0.69314718055994530942;

// ------------------------------------------------------------ unary
Grads Exp2F(C& c) {  // d/dx 2^x = 2^x ln 2
  return Unary(c, [](const C& c, const Tensor& g) { return Mul(c, g, MulS(c, c.out(), kLn2)); });
}
Grads Expm1F(C& c) {  // d/dx (e^x - 1) = (e^x - 1) + 1
  return Unary(c, [](const C& c, const Tensor& g) { return Mul(c, g, AddS(c, c.out(), 1.0)); });
}
Grads Log2F(C& c) {  // d/dx log2(x) = 1 / (x ln 2)
  return Unary(c, [](const C& c, const Tensor& g) { return Div(c, g, MulS(c, c.in("self"), kLn2)); });
}
Grads Log1pF(C& c) {  // d/dx log(1 + x) = 1 / (x + 1)
  return Unary(c, [](const C& c, const Tensor& g) { return Div(c, g, AddS(c, c.in("self"), 1.0)); });
}
Grads SiluF(C& c) {  // s = sigmoid(x): d/dx x s = s (1 + x (1 - s))
  return Unary(c, [](const C& c, const Tensor& g) {
    const Tensor x = c.in("self");
    const Tensor s = c.call("sigmoid", {x});
    return Mul(c, g, Mul(c, s, AddS(c, Mul(c, x, RsubS(c, s, 1.0)), 1.0)));
  });
}
Grads SquareF(C& c) {  // 2 x g
  return Unary(c, [](const C& c, const Tensor& g) { return Mul(c, g, MulS(c, c.in("self"), 2.0)); });
}
Grads ReluInPlaceF(C& c) {  // relu_: the gradient passes where the result is positive
  return Unary(c, [](const C& c, const Tensor& g) {
    return WhereOr0(c, c.call("gt.Scalar", {c.out(), Scalar::Int(0)}), g);
  });
}

// ------------------------------------------------------------ binary
// Zero gradients for every differentiable tensor input (rounding divisions).
Grads ZeroGrads(C& c) {
  Grads o = Out(c);
  const Tensor g = c.grad();
  if (c.needs("self")) Set(c, o, "self", ZerosLike(c, g));
  const FunctionSchema& s = c.op().schema;
  if (s.arguments.size() > 1 && s.arguments[1].type == ArgType::kTensor && c.needs("other")) {
    Set(c, o, "other", ZerosLike(c, g));
  }
  return o;
}
bool HasRoundingMode(const C& c) {
  const FunctionSchema& s = c.op().schema;
  return s.arguments.size() > 2 && !c.value("rounding_mode").is_none();
}
// div.Tensor_mode: None is true division (g / b, -g a / b^2); trunc and floor
// are piecewise constant (zero gradients).
// Reads the same saved tensors in every mode (PyTorch's node saves them).
Grads DivModeF(C& c) {
  const Tensor other = c.in("other");
  const Tensor self = c.needs("other") ? c.in("self") : Tensor();
  if (HasRoundingMode(c)) return ZeroGrads(c);
  Grads o = Out(c);
  const Tensor g = c.grad();
  if (c.needs("self")) Set(c, o, "self", Div(c, g, other));
  if (c.needs("other")) Set(c, o, "other", Neg(c, Div(c, Mul(c, g, self), Sq(c, other))));
  return o;
}
// x / s with a Scalar s: PyTorch divides by a saved wrapped number, so a
// second backward fails in every mode.
Grads DivModeScalarF(C& c) {
  c.RequireSaved();
  if (HasRoundingMode(c)) return ZeroGrads(c);
  return DivByScalarF(c);
}
// fmod(a, b) = a - trunc(a / b) b: self g, other -g trunc(a / b).
Grads FmodF(C& c) { return RoundedModuloF(c, "trunc"); }
// atan2(y, x): dy = x / (x^2 + y^2), dx = -y / (x^2 + y^2).
Grads Atan2F(C& c) {
  Grads o = Out(c);
  const Tensor g = c.grad();
  const Tensor y = c.in("self"), x = c.in("other");
  const Tensor r2 = Add(c, Sq(c, x), Sq(c, y));
  if (c.needs("self")) Set(c, o, "self", Div(c, Mul(c, g, x), r2));
  if (c.needs("other")) Set(c, o, "other", Neg(c, Div(c, Mul(c, g, y), r2)));
  return o;
}

// ------------------------------------------------------------ lerp
// self + w (end - self): self (1 - w) g, end w g, weight (end - self) g.
Grads LerpScalarF(C& c) {
  Grads o = Out(c);
  const Tensor g = c.grad();
  const double w = c.value("weight").scalar().to_double();
  if (c.needs("self")) Set(c, o, "self", MulS(c, g, 1.0 - w));
  if (c.needs("end")) Set(c, o, "end", MulS(c, g, w));
  return o;
}
Grads LerpTensorF(C& c) {
  Grads o = Out(c);
  const Tensor g = c.grad();
  const Tensor w = c.in("weight");
  if (c.needs("self")) Set(c, o, "self", Mul(c, g, RsubS(c, w, 1.0)));
  if (c.needs("end")) Set(c, o, "end", Mul(c, g, w));
  if (c.needs("weight")) {
    const Tensor end = c.in("end");
    const Tensor self = c.in("self");
    Set(c, o, "weight", Mul(c, g, Sub(c, end, self)));
  }
  return o;
}

}  // namespace tensord::runtime::formulas
