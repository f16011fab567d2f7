// Derivative formulas of the matmul family beyond matmul, mm and bmm (addmm,
// baddbmm, dot, outer, linear), written as calls of other table ops so that
// double backward differentiates them again (see formula_util.h and
// formulas.cc for the conventions; matmul/mm/bmm are in formulas.cc). The
// math follows PyTorch's derivatives.yaml: for addmm, self gets beta * g (the
// engine sums it over broadcast dims), mat1 alpha * g @ mat2^T, mat2
// alpha * mat1^T @ g; baddbmm the same per batch; linear is differentiated
// through its decomposition (matmul with weight^T, plus bias).
#include <vector>

#include "formula_util.h"

namespace tensord::runtime::formulas {

using namespace formula_util;  // NOLINT: the formula shorthands

// addmm and baddbmm (argument names differ, the math does not).
Grads AddmmF(C& c) {
  Grads o = Out(c);
  const bool batched = c.op().name() == "baddbmm";
  const char* a_name = batched ? "batch1" : "mat1";
  const char* b_name = batched ? "batch2" : "mat2";
  const Tensor g = c.grad();
  const Scalar beta = c.value("beta").scalar();
  const Scalar alpha = c.value("alpha").scalar();
  if (c.needs("self")) Set(c, o, "self", MaybeScale(c, g, beta));
  if (c.needs(a_name)) Set(c, o, a_name, MaybeScale(c, Matmul(c, g, TransposeLast(c, c.in(b_name))), alpha));
  if (c.needs(b_name)) Set(c, o, b_name, MaybeScale(c, Matmul(c, TransposeLast(c, c.in(a_name)), g), alpha));
  return o;
}

Grads DotF(C& c) {
  Grads o = Out(c);
  const Tensor g = c.grad();
  if (c.needs("self")) Set(c, o, "self", Mul(c, g, c.in("tensor")));
  if (c.needs("tensor")) Set(c, o, "tensor", Mul(c, g, c.in("self")));
  return o;
}

// outer(self, vec2) = self[:, None] * vec2: sums of products (mul promotes
// when self and vec2 differ in dtype).
Grads OuterF(C& c) {
  Grads o = Out(c);
  const Tensor g = c.grad();
  if (c.needs("self")) Set(c, o, "self", SumDims(c, Mul(c, g, c.in("vec2")), {1}, false));
  if (c.needs("vec2")) Set(c, o, "vec2", SumDims(c, Mul(c, g, Unsqueeze(c, c.in("self"), 1)), {0}, false));
  return o;
}

// linear(input, weight, bias) = input @ weight^T + bias.
Grads LinearF(C& c) {
  Grads o = Out(c);
  const Tensor g = c.grad();
  const TensorMeta& xm = c.meta("input");
  const TensorMeta& wm = c.meta("weight");
  if (wm.dim() == 2) {
    // out [..., n] (or [n] for a 1-D input); weight [n, k].
    if (c.needs("input")) Set(c, o, "input", Matmul(c, g, c.in("weight")));
    if (c.needs("weight")) {
      const Tensor x = c.in("input");
      if (xm.dim() == 1) {
        Set(c, o, "weight", Mul(c, Unsqueeze(c, g, 1), Unsqueeze(c, x, 0)));
      } else {
        // Fold the leading dims: g2 [rows, n], x2 [rows, k]; dW = g2^T @ x2.
        int64_t rows = 1;
        for (int64_t d = 0; d + 1 < xm.dim(); ++d) rows *= xm.sizes[d];
        const Tensor g2 = Reshape(c, g, {rows, SizeAt(c, wm, 0)});
        const Tensor x2 = Reshape(c, x, {rows, SizeAt(c, wm, 1)});
        Set(c, o, "weight", Matmul(c, TransposeLast(c, g2), x2));
      }
    }
  } else {
    // weight [k]: out = input @ weight has input's leading dims; g[..., None]
    // times the other operand, summed by the engine over the leading dims.
    const Tensor gk = Unsqueeze(c, g, -1);
    if (c.needs("input")) Set(c, o, "input", Mul(c, gk, c.in("weight")));
    if (c.needs("weight")) Set(c, o, "weight", Mul(c, gk, c.in("input")));
  }
  if (c.needs("bias")) Set(c, o, "bias", g);
  return o;
}

}  // namespace tensord::runtime::formulas
