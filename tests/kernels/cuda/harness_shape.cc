// Samples of the shape ops (ShapeSamplesFor, harness.h): select_backward,
// slice_backward, diagonal_backward, flip, roll, repeat, constant_pad_nd,
// tril, triu, arange, arange.start, linspace and eye, over every dtype the
// CPU takes (and those it refuses), contiguous, permuted, spread, expanded
// (stride 0) and offset layouts, 0-dim and empty tensors, negative dims,
// shifts, pads and diagonals, and every error the CPU raises.
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "harness.h"

namespace tensord::testing::cudatest {
namespace {

Sample NewShapeSample(const std::string& op, std::string label) {
  Sample s = NewSample(op, std::move(label));
  s.exact = true;  // elements are moved, or computed as the CPU computes them
  return s;
}

// Layouts: 0 contiguous, 1 permuted (dim 0 innermost, offset 1), 2 spread
// (offset 3), 3 the last dim expanded (stride 0).
constexpr int kLayouts = 4;
Tensor Lay(const Tensor& t, int layout) {
  if (layout == 3 && t.meta.dim() > 0) {
    Shape strides = ContiguousStrides(t.meta.sizes);
    strides.back() = 0;
    return Restride(t, strides, 2);
  }
  return layout < 3 ? LaidOut(t, layout) : t;
}

Tensor RandomLaid(ScalarType dt, const Shape& sizes, std::mt19937& rng, int layout) {
  return Lay(Random(dt, sizes, rng), layout);
}

SampleArg Ints(Shape v) { return SampleArg::V(Value(std::move(v))); }
SampleArg Int(int64_t v) { return SampleArg::V(Value(v)); }

// ---- the *_backward view ops ---------------------------------------------------------

void SelectBackwardSamples(std::vector<Sample>& out, std::mt19937& rng) {
  const Shape in = {3, 4, 5};
  int layout = 0;
  for (ScalarType dt : kAllDtypes) {
    for (int64_t dim : {0, 1, -1}) {
      for (int64_t index : {int64_t{1}, int64_t{-1}, int64_t{0}}) {
        Shape g = in;
        g.erase(g.begin() + (dim < 0 ? dim + 3 : dim));
        layout = (layout + 1) % kLayouts;
        Sample s = NewShapeSample("select_backward", absl::StrCat(Name(dt), " dim ", dim, " index ", index, " layout ", layout));
        s.positional = {SampleArg::T(s.Add(RandomLaid(dt, g, rng, layout))), Ints(in), Int(dim), Int(index)};
        out.push_back(std::move(s));
      }
    }
    Sample z = NewShapeSample("select_backward", Name(dt) + " into [4] (a 0-dim gradient)");
    z.positional = {SampleArg::T(z.Add(Random(dt, {}, rng))), Ints({4}), Int(0), Int(-4)};
    out.push_back(std::move(z));
    Sample e = NewShapeSample("select_backward", Name(dt) + " empty");
    e.positional = {SampleArg::T(e.Add(Random(dt, {0}, rng))), Ints({0, 3}), Int(1), Int(2)};
    out.push_back(std::move(e));
  }
  // Errors: an index out of range either way, a dim out of range, a 0-dim
  // input, a gradient of the wrong shape.
  const std::pair<Shape, std::vector<int64_t>> bad[] = {
      {{3, 4}, {1, 4}}, {{3, 4}, {1, -5}}, {{3, 4}, {2, 0}}, {{}, {0, 0}}, {{3, 4}, {-3, 0}},
  };
  for (const auto& [sizes, di] : bad) {
    Sample s = NewShapeSample("select_backward", absl::StrCat("bad ", ShapeToString(sizes), " dim ", di[0], " index ", di[1]));
    s.positional = {SampleArg::T(s.Add(Random(ScalarType::kFloat32, {3}, rng))), Ints(sizes), Int(di[0]), Int(di[1])};
    out.push_back(std::move(s));
  }
  Sample w = NewShapeSample("select_backward", "gradient of the wrong shape");
  w.positional = {SampleArg::T(w.Add(Random(ScalarType::kFloat32, {5}, rng))), Ints({3, 4}), Int(0), Int(1)};
  out.push_back(std::move(w));
}

void SliceBackwardSamples(std::vector<Sample>& out, std::mt19937& rng) {
  const Shape in = {4, 7};
  // start, end, step: plain, clamped, negative bounds, empty, past the end.
  const int64_t ranges[][3] = {{0, 7, 1}, {1, 100, 2}, {-5, -1, 1}, {3, 3, 1}, {5, 2, 1},
                               {-100, 100, 3}, {0, std::numeric_limits<int64_t>::max(), 4}};
  int layout = 0;
  for (ScalarType dt : kAllDtypes) {
    for (int64_t dim : {0, -1}) {
      const size_t d = static_cast<size_t>(dim < 0 ? dim + 2 : dim);
      for (const auto& r : ranges) {
        int64_t start = r[0], end = r[1];
        const int64_t size = in[d];
        if (start < 0) start += size;
        if (end < 0) end += size;
        start = std::min(std::max<int64_t>(start, 0), size);
        end = std::min(std::max(end, start), size);
        Shape g = in;
        g[d] = end == start ? 0 : 1 + (end - start - 1) / r[2];
        layout = (layout + 1) % kLayouts;
        Sample s = NewShapeSample("slice_backward", absl::StrCat(Name(dt), " dim ", dim, " ", r[0], ":", r[1], ":",
                                                                 r[2], " layout ", layout));
        s.positional = {SampleArg::T(s.Add(RandomLaid(dt, g, rng, layout))), Ints(in), Int(dim),
                        Int(r[0]),  Int(r[1]), Int(r[2])};
        out.push_back(std::move(s));
      }
    }
  }
  // Errors: step 0 and negative, a 0-dim input, a dim out of range, a
  // gradient of the wrong shape.
  const std::pair<Shape, std::vector<int64_t>> bad[] = {
      {{4, 7}, {1, 0, 7, 0}}, {{4, 7}, {1, 0, 7, -1}}, {{}, {0, 0, 1, 1}}, {{4, 7}, {2, 0, 1, 1}}, {{4, 7}, {1, 0, 7, 1}},
  };
  for (const auto& [sizes, a] : bad) {
    Sample s = NewShapeSample("slice_backward", absl::StrCat("bad ", ShapeToString(sizes), " dim ", a[0], " step ", a[3]));
    s.positional = {SampleArg::T(s.Add(Random(ScalarType::kFloat32, {4, 3}, rng))), Ints(sizes), Int(a[0]),
                    Int(a[1]), Int(a[2]), Int(a[3])};
    out.push_back(std::move(s));
  }
}

void DiagonalBackwardSamples(std::vector<Sample>& out, std::mt19937& rng) {
  const Shape in = {3, 4, 5};
  // offset, dim1, dim2, and the diagonal's length.
  const int64_t cases[][4] = {{0, 0, 1, 3}, {1, 1, 2, 4}, {-2, -1, 0, 3}, {2, 2, 0, 1}, {-1, 0, -1, 2}, {9, 0, 1, 0}};
  int layout = 0;
  for (ScalarType dt : kAllDtypes) {
    for (const auto& c : cases) {
      const int64_t d1 = c[1] < 0 ? c[1] + 3 : c[1], d2 = c[2] < 0 ? c[2] + 3 : c[2];
      Shape g;
      for (int64_t d = 0; d < 3; ++d) {
        if (d != d1 && d != d2) g.push_back(in[static_cast<size_t>(d)]);
      }
      g.push_back(c[3]);
      layout = (layout + 1) % kLayouts;
      Sample s = NewShapeSample("diagonal_backward", absl::StrCat(Name(dt), " offset ", c[0], " dims ", c[1], ",",
                                                                  c[2], " layout ", layout));
      s.positional = {SampleArg::T(s.Add(RandomLaid(dt, g, rng, layout))), Ints(in), Int(c[0]), Int(c[1]), Int(c[2])};
      out.push_back(std::move(s));
    }
  }
  // Errors: equal dims, a dim out of range, a gradient of the wrong shape.
  for (const auto& c : std::vector<std::vector<int64_t>>{{0, 1, 1}, {0, 0, 3}, {0, 0, 2}}) {
    Sample s = NewShapeSample("diagonal_backward", absl::StrCat("bad dims ", c[1], ",", c[2]));
    s.positional = {SampleArg::T(s.Add(Random(ScalarType::kFloat32, {5, 3}, rng))), Ints(in), Int(c[0]), Int(c[1]),
                    Int(c[2])};
    out.push_back(std::move(s));
  }
}

// ---- remaps -----------------------------------------------------------------------------

void FlipSamples(std::vector<Sample>& out, std::mt19937& rng) {
  const Shape dims_list[] = {{}, {0}, {-1}, {0, 2}, {2, -2, 0}};
  for (ScalarType dt : kAllDtypes) {
    int k = 0;
    for (const Shape& dims : dims_list) {
      for (int layout = 0; layout < kLayouts; ++layout) {
        if ((++k + layout) % 2 != 0) continue;  // half of the pairs, all of each
        Sample s = NewShapeSample("flip", absl::StrCat(Name(dt), " dims ", ShapeToString(dims), " layout ", layout));
        s.positional = {SampleArg::T(s.Add(RandomLaid(dt, {3, 4, 5}, rng, layout))), Ints(dims)};
        out.push_back(std::move(s));
      }
    }
    Sample z = NewShapeSample("flip", Name(dt) + " 0-dim");
    z.positional = {SampleArg::T(z.Add(Random(dt, {}, rng))), Ints({0})};
    out.push_back(std::move(z));
    Sample e = NewShapeSample("flip", Name(dt) + " empty");
    e.positional = {SampleArg::T(e.Add(Random(dt, {0, 3}, rng))), Ints({0, 1})};
    out.push_back(std::move(e));
  }
  for (const Shape& dims : {Shape{3}, Shape{0, 0}, Shape{-4}}) {
    Sample s = NewShapeSample("flip", "bad dims " + ShapeToString(dims));
    s.positional = {SampleArg::T(s.Add(Random(ScalarType::kFloat32, {3, 4, 5}, rng))), Ints(dims)};
    out.push_back(std::move(s));
  }
}

void RollSamples(std::vector<Sample>& out, std::mt19937& rng) {
  const std::pair<Shape, Shape> cases[] = {
      {{2}, {}}, {{-7}, {}}, {{1}, {0}}, {{-3, 7}, {1, -1}}, {{2, 3}, {0, 0}}, {{13}, {2}}, {{0}, {1}},
  };
  for (ScalarType dt : kAllDtypes) {
    int layout = 0;
    for (const auto& [shifts, dims] : cases) {
      layout = (layout + 1) % kLayouts;
      Sample s = NewShapeSample("roll", absl::StrCat(Name(dt), " shifts ", ShapeToString(shifts), " dims ",
                                                     ShapeToString(dims), " layout ", layout));
      s.positional = {SampleArg::T(s.Add(RandomLaid(dt, {3, 4, 5}, rng, layout))), Ints(shifts), Ints(dims)};
      out.push_back(std::move(s));
    }
    Sample z = NewShapeSample("roll", Name(dt) + " 0-dim");
    z.positional = {SampleArg::T(z.Add(Random(dt, {}, rng))), Ints({3}), Ints({})};
    out.push_back(std::move(z));
    Sample e = NewShapeSample("roll", Name(dt) + " empty");
    e.positional = {SampleArg::T(e.Add(Random(dt, {0, 3}, rng))), Ints({1}), Ints({1})};
    out.push_back(std::move(e));
  }
  // A flattened roll of a non-contiguous self (copied first), and a shift
  // near the int64 limits.
  Sample s = NewShapeSample("roll", "flattened, spread self, huge shift");
  s.positional = {SampleArg::T(s.Add(RandomLaid(ScalarType::kFloat64, {5, 3}, rng, 2))),
                  Ints({std::numeric_limits<int64_t>::min()}), Ints({})};
  out.push_back(std::move(s));
  const std::pair<Shape, Shape> bad[] = {{{1, 2}, {0}}, {{1}, {3}}, {{}, {}}, {{1}, {-4}}};
  for (const auto& [shifts, dims] : bad) {
    Sample b = NewShapeSample("roll", absl::StrCat("bad shifts ", ShapeToString(shifts), " dims ", ShapeToString(dims)));
    b.positional = {SampleArg::T(b.Add(Random(ScalarType::kFloat32, {3, 4, 5}, rng))), Ints(shifts), Ints(dims)};
    out.push_back(std::move(b));
  }
}

void RepeatSamples(std::vector<Sample>& out, std::mt19937& rng) {
  const std::pair<Shape, Shape> cases[] = {
      {{3, 4}, {2, 1}}, {{3, 4}, {1, 2, 3}}, {{2, 3}, {2, 2, 1, 2}}, {{3, 4}, {1, 1}}, {{3, 4}, {2, 0}}, {{0, 2}, {3, 2}},
  };
  for (ScalarType dt : kAllDtypes) {
    int layout = 0;
    for (const auto& [sizes, repeats] : cases) {
      layout = (layout + 1) % kLayouts;
      Sample s = NewShapeSample("repeat", absl::StrCat(Name(dt), " ", ShapeToString(sizes), " repeats ",
                                                       ShapeToString(repeats), " layout ", layout));
      s.positional = {SampleArg::T(s.Add(RandomLaid(dt, sizes, rng, layout))), Ints(repeats)};
      out.push_back(std::move(s));
    }
    Sample z = NewShapeSample("repeat", Name(dt) + " 0-dim");
    z.positional = {SampleArg::T(z.Add(Random(dt, {}, rng))), Ints({2, 3})};
    out.push_back(std::move(z));
  }
  for (const Shape& repeats : {Shape{2}, Shape{2, -1}}) {
    Sample b = NewShapeSample("repeat", "bad repeats " + ShapeToString(repeats));
    b.positional = {SampleArg::T(b.Add(Random(ScalarType::kFloat32, {3, 4}, rng))), Ints(repeats)};
    out.push_back(std::move(b));
  }
}

void ConstantPadSamples(std::vector<Sample>& out, std::mt19937& rng) {
  const Shape pads[] = {{1, 2}, {0, 0, 2, 1}, {-1, 1, 1, -2}, {1, 1, 0, 2, 2, 0}, {}, {-2, -1}};
  const Scalar values[] = {Scalar::Int(0), Scalar::Float(-2.5), Scalar::Int(3), Scalar::Bool(true)};
  for (ScalarType dt : kAllDtypes) {
    int k = 0;
    for (const Shape& pad : pads) {
      const int layout = k % kLayouts;
      const Scalar value = values[static_cast<size_t>(k++) % 4];
      Sample s = NewShapeSample("constant_pad_nd", absl::StrCat(Name(dt), " pad ", ShapeToString(pad), " value ",
                                                                value.ToString(), " layout ", layout));
      s.positional = {SampleArg::T(s.Add(RandomLaid(dt, {3, 4, 5}, rng, layout))), Ints(pad), SampleArg::V(Value(value))};
      out.push_back(std::move(s));
    }
    Sample d = NewShapeSample("constant_pad_nd", Name(dt) + " default value");
    d.positional = {SampleArg::T(d.Add(Random(dt, {2, 3}, rng))), Ints({1, 1})};
    out.push_back(std::move(d));
    Sample e = NewShapeSample("constant_pad_nd", Name(dt) + " empty self");
    e.positional = {SampleArg::T(e.Add(Random(dt, {0, 3}, rng))), Ints({1, 0, 2, 1}), SampleArg::V(Value(Scalar::Int(1)))};
    out.push_back(std::move(e));
  }
  // Errors: an odd length, too many pairs, a crop past the size; a value
  // that does not fit the dtype.
  const Shape bad[] = {{1}, {1, 1, 1, 1, 1, 1, 1, 1}, {-3, -2}};
  for (const Shape& pad : bad) {
    Sample b = NewShapeSample("constant_pad_nd", "bad pad " + ShapeToString(pad));
    b.positional = {SampleArg::T(b.Add(Random(ScalarType::kFloat32, {3, 4, 5}, rng))), Ints(pad)};
    out.push_back(std::move(b));
  }
  Sample v = NewShapeSample("constant_pad_nd", "value out of range for int8");
  v.positional = {SampleArg::T(v.Add(Random(ScalarType::kInt8, {3}, rng))), Ints({1, 1}), SampleArg::V(Value(Scalar::Int(1000)))};
  out.push_back(std::move(v));
}

void TrilTriuSamples(const std::string& op, std::vector<Sample>& out, std::mt19937& rng) {
  const int64_t diagonals[] = {0, 1, -1, 3, -2, 10, -10, std::numeric_limits<int64_t>::max(),
                               std::numeric_limits<int64_t>::min()};
  for (ScalarType dt : kAllDtypes) {
    int k = 0;
    for (int64_t diag : diagonals) {
      const int layout = k++ % kLayouts;
      const Shape sizes = k % 2 == 0 ? Shape{4, 6} : Shape{2, 5, 3};
      Sample s = NewShapeSample(op, absl::StrCat(Name(dt), " ", ShapeToString(sizes), " diagonal ", diag, " layout ", layout));
      s.positional = {SampleArg::T(s.Add(RandomLaid(dt, sizes, rng, layout))), Int(diag)};
      out.push_back(std::move(s));
    }
    Sample d = NewShapeSample(op, Name(dt) + " default diagonal");
    d.positional = {SampleArg::T(d.Add(Random(dt, {5, 5}, rng)))};
    out.push_back(std::move(d));
    Sample e = NewShapeSample(op, Name(dt) + " empty");
    e.positional = {SampleArg::T(e.Add(Random(dt, {0, 3, 2}, rng))), Int(1)};
    out.push_back(std::move(e));
  }
  for (const Shape& sizes : {Shape{5}, Shape{}}) {
    Sample b = NewShapeSample(op, "bad rank " + ShapeToString(sizes));
    b.positional = {SampleArg::T(b.Add(Random(ScalarType::kFloat32, sizes, rng)))};
    out.push_back(std::move(b));
  }
}

// ---- factories --------------------------------------------------------------------------

// A factory call with `args`, dtype (none: the op's default) and the device.
Sample Factory(const std::string& op, const std::string& label, std::vector<SampleArg> args, const Value& dtype) {
  Sample s = NewShapeSample(op, label);
  s.positional = std::move(args);
  s.kwargs = {{"dtype", SampleArg::V(dtype)}, {"device", SampleArg::Dev()}};
  return s;
}

std::vector<Value> FactoryDtypes() {
  std::vector<Value> v = {Value()};
  for (ScalarType dt : kAllDtypes) v.push_back(Value(dt));
  return v;
}

SampleArg Num(const Scalar& s) { return SampleArg::V(Value(s)); }

void ArangeSamples(const std::string& op, std::vector<Sample>& out) {
  const bool start = op == "arange.start";
  std::vector<std::vector<Scalar>> cases;
  if (start) {
    cases = {{Scalar::Int(1), Scalar::Int(10), Scalar::Int(3)},
             {Scalar::Float(-2.5), Scalar::Float(3.1), Scalar::Float(0.7)},
             {Scalar::Int(10), Scalar::Int(0), Scalar::Int(-3)},
             {Scalar::Int(0), Scalar::Int(1), Scalar::Float(0.1)},
             {Scalar::Float(0.1), Scalar::Float(1000.3), Scalar::Float(0.37)},
             {Scalar::Int(-100), Scalar::Int(130), Scalar::Int(1)},
             {Scalar::Int(5), Scalar::Int(5), Scalar::Int(1)},
             {Scalar::Float(1e18), Scalar::Float(1.0000000000001e18), Scalar::Float(3e3)},
             // Errors: a zero step, bounds against the step's sign, a non-finite bound.
             {Scalar::Int(0), Scalar::Int(5), Scalar::Int(0)},
             {Scalar::Int(5), Scalar::Int(0), Scalar::Int(1)},
             {Scalar::Float(0), Scalar::Float(std::numeric_limits<double>::infinity()), Scalar::Int(1)}};
  } else {
    cases = {{Scalar::Int(5)}, {Scalar::Float(2.5)}, {Scalar::Int(0)}, {Scalar::Int(1027)}, {Scalar::Int(-3)}};
  }
  for (const std::vector<Scalar>& c : cases) {
    for (const Value& dt : FactoryDtypes()) {
      std::vector<SampleArg> args;
      std::string label;
      for (const Scalar& v : c) {
        args.push_back(Num(v));
        absl::StrAppend(&label, v.ToString(), " ");
      }
      out.push_back(Factory(op, absl::StrCat(label, "dtype ", dt.ToString()), std::move(args), dt));
    }
  }
}

void LinspaceSamples(std::vector<Sample>& out) {
  const std::vector<std::tuple<Scalar, Scalar, int64_t>> cases = {
      {Scalar::Int(0), Scalar::Int(1), 5},          {Scalar::Float(-3.5), Scalar::Float(7.25), 11},
      {Scalar::Int(10), Scalar::Int(-10), 7},       {Scalar::Int(0), Scalar::Int(100), 0},
      {Scalar::Float(-0.0), Scalar::Int(9), 1},     {Scalar::Int(3), Scalar::Int(9), 2},
      {Scalar::Float(0.1), Scalar::Float(1000.3), 1027}, {Scalar::Int(-100), Scalar::Int(100), 13},
      {Scalar::Float(1.0 / 3), Scalar::Float(2.0 / 3), 10},
      // Errors: negative steps; a bound that does not fit the dtype.
      {Scalar::Int(0), Scalar::Int(1), -1},         {Scalar::Int(0), Scalar::Int(1000), 4},
  };
  for (const auto& [a, b, steps] : cases) {
    for (const Value& dt : FactoryDtypes()) {
      out.push_back(Factory("linspace", absl::StrCat(a.ToString(), " ", b.ToString(), " ", steps, " dtype ", dt.ToString()),
                            {Num(a), Num(b), Int(steps)}, dt));
    }
  }
}

void EyeSamples(std::vector<Sample>& out) {
  const std::pair<int64_t, Value> cases[] = {
      {3, Value()}, {3, Value(int64_t{5})}, {5, Value(int64_t{2})}, {0, Value(int64_t{3})}, {4, Value(int64_t{0})},
      {1, Value()}, {-1, Value()},  {3, Value(int64_t{-2})},
  };
  for (const auto& [n, m] : cases) {
    for (const Value& dt : FactoryDtypes()) {
      out.push_back(Factory("eye", absl::StrCat(n, " ", m.ToString(), " dtype ", dt.ToString()), {Int(n), SampleArg::V(m)}, dt));
    }
  }
}

}  // namespace

std::vector<Sample> ShapeSamplesFor(const std::string& op, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Sample> out;
  if (op == "select_backward") SelectBackwardSamples(out, rng);
  if (op == "slice_backward") SliceBackwardSamples(out, rng);
  if (op == "diagonal_backward") DiagonalBackwardSamples(out, rng);
  if (op == "flip") FlipSamples(out, rng);
  if (op == "roll") RollSamples(out, rng);
  if (op == "repeat") RepeatSamples(out, rng);
  if (op == "constant_pad_nd") ConstantPadSamples(out, rng);
  if (op == "tril" || op == "triu") TrilTriuSamples(op, out, rng);
  if (op == "arange" || op == "arange.start") ArangeSamples(op, out);
  if (op == "linspace") LinspaceSamples(out);
  if (op == "eye") EyeSamples(out);
  return out;
}

}  // namespace tensord::testing::cudatest
