// Derivative formulas of nn ops (convolution, pooling), written as calls of
// other table ops (see formula_util.h and formulas.cc for the conventions).
// The backward ops (convolution_backward, max_pool2d_with_indices_backward,
// avg_pool2d_backward) are table ops with meta and kernels, as in PyTorch's
// derivatives.yaml, and have formulas of their own (double backward).
#include "formula_util.h"

namespace tensord::runtime::formulas {

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
                                     {g, x, w, Shape{wm.sizes[0]}, c.value("stride"), c.value("padding"),
                                      c.value("dilation"), false, Shape{0, 0}, c.value("groups")});
  if (r.size() != 3) return o;
  if (c.needs("input")) Set(c, o, "input", unbatched ? Squeeze(c, r[0], 0) : r[0]);
  if (c.needs("weight")) Set(c, o, "weight", r[1]);
  if (c.needs("bias")) Set(c, o, "bias", r[2]);
  return o;
}

// convolution_backward (double backward through conv2d). Its outputs are
// linear maps of grad_output g: grad_input = A(w)^T g, grad_weight = B(x)^T g,
// grad_bias = sum(g), where conv2d(x, w) = A(w) x = B(x) w. For incoming
// gradients (ggI, ggW, ggb) of those outputs:
//   d/dg = conv2d(ggI, w) + conv2d(x, ggW) + ggb (per channel)
//   d/dw = the weight gradient of conv2d(ggI, w) for g
//   d/dx = the input gradient of conv2d(x, ggW) for g
// (the math of PyTorch's _convolution_double_backward).
Grads ConvolutionBackwardF(C& c) {
  Grads o = Out(c);
  const Tensor& ggi = c.grad(0);
  const Tensor& ggw = c.grad(1);
  const Tensor& ggb = c.grad(2);
  const Tensor g = c.in("grad_output");
  const Tensor x = c.in("input");
  const Tensor w = c.in("weight");
  const Value& stride = c.value("stride");
  const Value& padding = c.value("padding");
  const Value& dilation = c.value("dilation");
  const Value& groups = c.value("groups");
  auto backward = [&](const Tensor& in, const Tensor& wt) {
    return c.call_all("convolution_backward", {g, in, wt, Shape{c.meta("weight").sizes.at(0)}, stride,
                                               padding, dilation, false, Shape{0, 0}, groups});
  };
  if (c.meta("weight").dim() != 4) {
    c.Fail(InternalErr("autograd: convolution_backward weight is not 4-D"));
    return o;
  }
  if (c.needs("grad_output")) {
    Tensor gg;
    auto add = [&](Tensor t) { gg = gg.defined() ? Add(c, gg, t) : t; };
    if (ggi.defined()) add(c.call("conv2d", {ggi, w, Value(), stride, padding, dilation, groups}));
    if (ggw.defined()) add(c.call("conv2d", {x, ggw, Value(), stride, padding, dilation, groups}));
    if (ggb.defined()) {
      add(Expand(c, Reshape(c, ggb, Shape{1, c.meta("weight").sizes[0], 1, 1}), c.meta("grad_output").sizes));
    }
    if (gg.defined()) Set(c, o, "grad_output", gg);
  }
  if (c.needs("weight") && ggi.defined()) {
    std::vector<Tensor> r = backward(ggi, w);
    if (r.size() == 3) Set(c, o, "weight", r[1]);
  }
  if (c.needs("input") && ggw.defined()) {
    std::vector<Tensor> r = backward(x, ggw);
    if (r.size() == 3) Set(c, o, "input", r[0]);
  }
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

}  // namespace tensord::runtime::formulas
