// Derivative formulas of matmul-family, shape and indexing ops, written as calls of
// other table ops (see formula_util.h and formulas.cc for the conventions).
#include <string>
#include <vector>

#include "formula_util.h"

namespace tensord::runtime::formulas {

using namespace formula_util;  // NOLINT: the formula shorthands

// ---- shape ops (split, chunk, unbind, flip, roll, repeat, tril, triu, pad, scatter)

// -x mod n for a shift x along a dim of n elements (n > 0), without the
// overflow of negating INT64_MIN.
int64_t NegShift(int64_t x, int64_t n) { return n <= 0 ? 0 : -(x % n); }

// The dim and the lengths along it of each view a split-like op returned
// (its meta's rule again, on self's saved metadata).
struct Pieces {
  int64_t dim = 0;
  Shape lengths;
};
Pieces SplitPieces(const C& c) {
  const TensorMeta& self = c.meta("self");
  Pieces p;
  p.dim = Wrap(c, c.value("dim").to_int(), self.dim());
  const int64_t size = SizeAt(c, self, p.dim);
  const std::string name = c.op().full_name();
  if (name == "split.sizes" || name == "split_with_sizes") {
    p.lengths = c.value(name == "split.sizes" ? "split_size" : "split_sizes").int_list();
    return p;
  }
  int64_t split = 0;
  if (name == "chunk") {
    const int64_t chunks = c.value("chunks").to_int();
    if (size == 0) {
      p.lengths.assign(chunks, 0);
      return p;
    }
    split = 1 + (size - 1) / chunks;
  } else {
    split = c.value("split_size").to_int();
  }
  if (split <= 0 || size == 0) {
    p.lengths = {size};
    return p;
  }
  const int64_t n = 1 + (size - 1) / split;
  p.lengths.assign(n, split);
  p.lengths.back() = size - split * (n - 1);
  return p;
}

// The gradients of the views, zeros where none flowed (sizes of view i).
std::vector<Tensor> PieceGrads(const C& c, const TensorMeta& self, int64_t dim, absl::Span<const int64_t> lengths,
                               bool squeezed) {
  ScalarType dtype = self.dtype;
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (c.grad(i).defined()) dtype = c.grad(i).meta.dtype;
  }
  std::vector<Tensor> gs;
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (c.grad(i).defined()) {
      gs.push_back(c.grad(i));
      continue;
    }
    Shape sizes = self.sizes;
    if (squeezed) {
      sizes.erase(sizes.begin() + dim);
    } else {
      sizes[dim] = lengths[i];
    }
    gs.push_back(Zeros(c, sizes, dtype, self.device));
  }
  return gs;
}

// split / split_with_sizes / chunk: the views' gradients joined with cat.
Grads SplitF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const Pieces p = SplitPieces(c);
  if (!c.ok()) return o;
  const TensorMeta& self = c.meta("self");
  std::vector<Tensor> gs = PieceGrads(c, self, p.dim, p.lengths, false);
  Set(c, o, "self", gs.size() == 1 ? gs[0] : c.call("cat", {std::move(gs), p.dim}));
  return o;
}

// unbind: the views' gradients stacked along dim.
Grads UnbindF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const TensorMeta& self = c.meta("self");
  const int64_t dim = Wrap(c, c.value("dim").to_int(), self.dim());
  const int64_t n = SizeAt(c, self, dim);
  if (!c.ok() || n == 0) return o;
  Shape lengths(n, 1);
  Set(c, o, "self", c.call("stack", {PieceGrads(c, self, dim, lengths, true), dim}));
  return o;
}

Grads FlipF(C& c) {
  Grads o = Out(c);
  if (c.needs("self")) Set(c, o, "self", c.call("flip", {c.grad(), c.value("dims")}));
  return o;
}

// roll back by the negated shifts (the flattened roll: over numel).
Grads RollF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const TensorMeta& self = c.meta("self");
  Shape shifts = c.value("shifts").int_list();
  const Shape& dims = c.value("dims").int_list();
  for (size_t i = 0; i < shifts.size(); ++i) {
    const int64_t n = dims.empty() ? self.numel() : SizeAt(c, self, Wrap(c, dims[i < dims.size() ? i : 0], self.dim()));
    shifts[i] = NegShift(shifts[i], n);
  }
  if (!c.ok()) return o;
  Set(c, o, "self", c.call("roll", {c.grad(), std::move(shifts), dims}));
  return o;
}

// repeat: the gradient viewed as (repeats[0], size[0], repeats[1], size[1],
// ...) and summed over the repeat dims.
Grads RepeatF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  const TensorMeta& self = c.meta("self");
  const Shape& repeats = c.value("repeats").int_list();
  const size_t lead = repeats.size() - self.sizes.size();
  Shape blocks;
  Shape sum_dims;
  for (size_t i = 0; i < repeats.size(); ++i) {
    sum_dims.push_back(static_cast<int64_t>(blocks.size()));
    blocks.push_back(repeats[i]);
    blocks.push_back(i < lead ? 1 : self.sizes[i - lead]);
  }
  Tensor g = c.grad();
  if (!sum_dims.empty()) g = SumDims(c, Reshape(c, g, blocks), sum_dims, false);
  Set(c, o, "self", Reshape(c, g, self.sizes));
  return o;
}

Grads TrilTriuF(C& c) {
  Grads o = Out(c);
  if (c.needs("self")) Set(c, o, "self", c.call(c.op().full_name(), {c.grad(), c.value("diagonal")}));
  return o;
}

// constant_pad_nd: the gradient padded by the negated pads (crops what was
// padded, zero-pads what was cropped).
Grads ConstantPadNdF(C& c) {
  Grads o = Out(c);
  if (!c.needs("self")) return o;
  Shape pad = c.value("pad").int_list();
  for (int64_t& p : pad) p = p == INT64_MIN ? INT64_MAX : -p;  // INT64_MIN never passes the forward
  Set(c, o, "self", c.call("constant_pad_nd", {c.grad(), std::move(pad), Scalar::Float(0.0)}));
  return o;
}

// scatter: self's gradient is g with the overwritten positions zeroed;
// src's is g gathered at index.
Grads ScatterF(C& c) {
  Grads o = Out(c);
  const Tensor g = c.grad();
  const Value& dim = c.value("dim");
  const bool src = c.op().full_name() == "scatter.src";
  if (c.needs("self")) {
    Set(c, o, "self", c.call("scatter.value", {g, dim, c.in("index"), Scalar::Float(0.0)}));
  }
  if (src && c.needs("src")) {
    // Only src's leading part (index's sizes) was read: PyTorch returns
    // gather's result there and fails when src is larger than index;
    // tensord zero-pads it to src's sizes, the actual gradient.
    Tensor gs = c.call("gather", {g, dim, c.in("index")});
    const TensorMeta& sm = c.meta("src");
    Shape pad;
    bool grow = false;
    for (int64_t d = sm.dim() - 1; d >= 0 && gs.meta.dim() == sm.dim(); --d) {
      pad.push_back(0);
      pad.push_back(sm.sizes[d] - gs.meta.sizes[d]);
      grow |= pad.back() != 0;
    }
    if (sm.numel() == 0) {
      gs = Zeros(c, sm.sizes, g.meta.dtype, g.meta.device);
    } else if (grow) {
      gs = c.call("constant_pad_nd", {gs, std::move(pad), Scalar::Float(0.0)});
    }
    Set(c, o, "src", gs);
  }
  return o;
}

}  // namespace tensord::runtime::formulas
