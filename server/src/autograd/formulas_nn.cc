// Derivative formulas of nn ops (convolution, pooling), written as calls of
// other table ops (see formula_util.h and formulas.cc for the conventions).
// The backward ops (convolution_backward, max_pool2d_with_indices_backward,
// avg_pool2d_backward) are table ops with meta and kernels, as in PyTorch's
// derivatives.yaml. convolution_backward is flagged not differentiable (no
// double backward through conv2d); the pooling backwards are linear in
// grad_output and have formulas of their own.
#include "formula_util.h"

namespace tensord::server {
namespace {

using namespace formula_util;  // NOLINT: the formula shorthands

// conv2d: all three gradients from one convolution_backward call (an unbatched
// CHW input runs as a batch of one).
Grads Conv2dF(C& c) {
  Grads o = Out(c);
  if (!c.needs("input") && !c.needs("weight") && !c.needs("bias")) return o;
  Tensor g = c.grad();
  Tensor x = c.in("input");
  const Tensor w = c.in("weight");
  const bool unbatched = c.meta("input").dim() == 3;
  if (unbatched) {
    g = Unsqueeze(c, g, 0);
    x = Unsqueeze(c, x, 0);
  }
  const TensorMeta& wm = c.meta("weight");
  if (wm.dim() != 4) {
    c.Fail(InternalErr("autograd: conv2d weight is not 4-D"));
    return o;
  }
  std::vector<Tensor> r = c.call_all("convolution_backward",
                                     {g, x, w, std::vector<int64_t>{wm.sizes[0]}, c.value("stride"), c.value("padding"),
                                      c.value("dilation"), false, std::vector<int64_t>{0, 0}, c.value("groups")});
  if (r.size() != 3) return o;
  if (c.needs("input")) Set(c, o, "input", unbatched ? Squeeze(c, r[0], 0) : r[0]);
  if (c.needs("weight")) Set(c, o, "weight", r[1]);
  if (c.needs("bias")) Set(c, o, "bias", r[2]);
  return o;
}

// max_pool2d_with_indices: the values' gradient goes to the saved indices.
Grads MaxPoolF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const Tensor g = c.grad(0);
  if (!g.defined()) return o;
  Set(c, o, "self",
      c.call("max_pool2d_with_indices_backward",
             {g, c.in("self"), c.value("kernel_size"), c.value("stride"), c.value("padding"), c.value("dilation"),
              c.value("ceil_mode"), c.out(1)}));
  return o;
}

// max_pool2d_with_indices_backward is linear in grad_output: its gradient
// gathers the incoming gradient at the indices (each plane flattened).
Grads MaxPoolBackwardF(C& c) {
  Grads o = Out(c);
  if (!c.needs("grad_output")) return o;
  const Tensor gg = c.grad();
  const Tensor idx = c.in("indices");
  const Tensor flat_g = c.call("flatten.using_ints", {gg, int64_t{-2}, int64_t{-1}});
  const Tensor flat_i = c.call("flatten.using_ints", {idx, int64_t{-2}, int64_t{-1}});
  const Tensor picked = c.call("gather", {flat_g, int64_t{-1}, flat_i});
  Set(c, o, "grad_output", Reshape(c, picked, c.meta("grad_output").sizes));
  return o;
}

Grads AvgPoolF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  Set(c, o, "self",
      c.call("avg_pool2d_backward",
             {c.grad(), c.in("self"), c.value("kernel_size"), c.value("stride"), c.value("padding"),
              c.value("ceil_mode"), c.value("count_include_pad"), c.value("divisor_override")}));
  return o;
}

// avg_pool2d_backward is linear in grad_output: its adjoint is avg_pool2d.
Grads AvgPoolBackwardF(C& c) {
  Grads o = Out(c);
  if (!c.needs("grad_output")) return o;
  Set(c, o, "grad_output",
      c.call("avg_pool2d", {c.grad(), c.value("kernel_size"), c.value("stride"), c.value("padding"),
                            c.value("ceil_mode"), c.value("count_include_pad"), c.value("divisor_override")}));
  return o;
}

const FormulaEntry kNnFormulas[] = {
    {"conv2d", Conv2dF},
    {"max_pool2d_with_indices", MaxPoolF},
    {"max_pool2d_with_indices_backward", MaxPoolBackwardF},
    {"avg_pool2d", AvgPoolF},
    {"avg_pool2d_backward", AvgPoolBackwardF},
};

}  // namespace

namespace formula_util {
absl::Span<const FormulaEntry> NnFormulas() { return kNnFormulas; }
}  // namespace formula_util

}  // namespace tensord::server
