// Samples of the matmul family (harness.h's SamplesFor): every dtype the
// CPU computes (and one it refuses), operands in place, transposed
// (column-major), with padded rows, spread (neither stride 1: copied) and
// with broadcast (stride 0) batch dims; ranks and broadcasting of matmul;
// zero-size dims and k == 0; alpha and beta of addmm / baddbmm (beta == 0
// with NaN in self); linear with and without bias. Values are small
// integers (in every dtype), so that float16 and bfloat16 results are
// exact on both devices whatever the order of the sums; float32/float64
// get non-integer samples too.
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "harness.h"

namespace tensord::testing::cudatest {
namespace {

enum class MLay { kContiguous, kTransposed, kPadded, kSpread, kBatchInner, kBatchExpanded };

const char* LayName(MLay l) {
  switch (l) {
    case MLay::kContiguous: return "contiguous";
    case MLay::kTransposed: return "transposed";
    case MLay::kPadded: return "padded";
    case MLay::kSpread: return "spread";
    case MLay::kBatchInner: return "batch-inner";
    case MLay::kBatchExpanded: return "batch-expanded";
  }
  return "?";
}

// `sizes` of `dt` holding small integers (or reals in [-2, 2)), laid out as `lay`.
Tensor MakeM(ScalarType dt, const Shape& sizes, MLay lay, std::mt19937& rng, bool real = false) {
  const Tensor t = real ? Random(dt, sizes, rng, -2, 2) : FromValues(dt, sizes, RandomValues(ScalarType::kInt32,
                                                                                               [&] {
                                                                                                 int64_t n = 1;
                                                                                                 for (int64_t s : sizes) n *= s;
                                                                                                 return n;
                                                                                               }(),
                                                                                               rng, -3, 3));
  const int64_t nd = static_cast<int64_t>(sizes.size());
  Shape st = ContiguousStrides(sizes);
  switch (lay) {
    case MLay::kContiguous: return t;
    case MLay::kSpread: return Spread(t, 3);
    case MLay::kTransposed: {
      if (nd < 2) return Spread(t, 1);
      // The last two dims column-major, batch dims outside them.
      const int64_t r = sizes[nd - 2], c = sizes[nd - 1];
      st[nd - 2] = 1;
      st[nd - 1] = std::max<int64_t>(r, 1);
      int64_t s = std::max<int64_t>(r, 1) * std::max<int64_t>(c, 1);
      for (int64_t d = nd - 3; d >= 0; --d) {
        st[d] = s;
        s *= std::max<int64_t>(sizes[d], 1);
      }
      return Restride(t, st, 1);
    }
    case MLay::kPadded: {
      // Rows two elements longer than needed.
      if (nd < 2) return Restride(t, st, 2);
      int64_t s = 1;
      for (int64_t d = nd - 1; d >= 0; --d) {
        st[d] = s;
        s *= std::max<int64_t>(sizes[d], 1) + (d == nd - 1 ? 2 : 0);
      }
      return Restride(t, st, 2);
    }
    case MLay::kBatchInner: return ReversedLayout(t, 1);
    case MLay::kBatchExpanded: {
      if (nd < 3) return t;
      st[0] = 0;  // every batch reads the same matrix (the last one written)
      return Restride(t, st, 0);
    }
  }
  return t;
}

constexpr ScalarType kGemmDtypes[] = {ScalarType::kFloat32, ScalarType::kFloat64, ScalarType::kFloat16,
                                      ScalarType::kBFloat16, ScalarType::kInt64,   ScalarType::kInt32,
                                      ScalarType::kInt16,   ScalarType::kInt8,    ScalarType::kUInt8};

constexpr MLay kMatLays[] = {MLay::kContiguous, MLay::kTransposed, MLay::kPadded, MLay::kSpread};

Sample New(const std::string& op, std::string label) {
  Sample s;
  s.op = op;
  s.label = std::move(label);
  return s;
}

SampleArg ScalarArg(const Scalar& v) { return SampleArg::V(Value(v)); }

// a @ b samples of `op` (matmul, mm, bmm, dot) over shapes and layouts.
void ProductSamples(const std::string& op, const std::vector<std::pair<Shape, Shape>>& shapes,
                    std::vector<Sample>& out, std::mt19937& rng, const std::vector<MLay>& lays) {
  for (ScalarType dt : kGemmDtypes) {
    const bool all_pairs = dt == ScalarType::kFloat32;
    for (const auto& [sa, sb] : shapes) {
      for (MLay la : lays) {
        for (MLay lb : lays) {
          if (!all_pairs && la != lb) continue;
          Sample s = New(op, absl::StrCat(DtypeName(dt), " ", ShapeToString(sa), " ", LayName(la), " @ ",
                                          ShapeToString(sb), " ", LayName(lb)));
          s.positional = {SampleArg::T(s.Add(MakeM(dt, sa, la, rng))), SampleArg::T(s.Add(MakeM(dt, sb, lb, rng)))};
          out.push_back(std::move(s));
        }
      }
    }
  }
  for (ScalarType dt : {ScalarType::kFloat32, ScalarType::kFloat64}) {
    for (const auto& [sa, sb] : shapes) {
      Sample s = New(op, absl::StrCat(DtypeName(dt), " reals ", ShapeToString(sa), " @ ", ShapeToString(sb)));
      s.positional = {SampleArg::T(s.Add(MakeM(dt, sa, MLay::kTransposed, rng, true))),
                      SampleArg::T(s.Add(MakeM(dt, sb, MLay::kContiguous, rng, true)))};
      out.push_back(std::move(s));
    }
  }
  // A dtype the CPU refuses.
  Sample s = New(op, "bool");
  s.positional = {SampleArg::T(s.Add(MakeM(ScalarType::kBool, shapes[0].first, MLay::kContiguous, rng))),
                  SampleArg::T(s.Add(MakeM(ScalarType::kBool, shapes[0].second, MLay::kContiguous, rng)))};
  out.push_back(std::move(s));
}

// addmm / baddbmm: self of several shapes, alpha and beta.
void AddmmSamples(const std::string& op, std::vector<Sample>& out, std::mt19937& rng) {
  const bool batched = op == "baddbmm";
  const std::vector<Shape> dims = batched ? std::vector<Shape>{{2, 3, 4, 5}, {3, 2, 0, 4}, {2, 0, 3, 4}, {1, 4, 6, 1}}
                                          : std::vector<Shape>{{3, 4, 5}, {3, 0, 4}, {0, 3, 4}, {1, 6, 1}, {7, 13, 9}};
  const std::vector<std::pair<Scalar, Scalar>> scalars = {{Scalar::Int(1), Scalar::Int(1)},
                                                          {Scalar::Float(0.5), Scalar::Int(2)},
                                                          {Scalar::Int(0), Scalar::Int(1)},
                                                          {Scalar::Int(3), Scalar::Float(-1.5)}};
  for (ScalarType dt : kGemmDtypes) {
    for (const Shape& d : dims) {
      const int64_t nb = batched ? 1 : 0;
      const int64_t bsz = batched ? d[0] : 1, m = d[nb], k = d[nb + 1], n = d[nb + 2];
      Shape sa = {m, k}, sb = {k, n};
      if (batched) {
        sa.insert(sa.begin(), bsz);
        sb.insert(sb.begin(), bsz);
      }
      std::vector<Shape> self_shapes = {batched ? Shape{bsz, m, n} : Shape{m, n}, Shape{n}, Shape{1, n}, Shape{}};
      if (!batched) self_shapes.push_back({m, 1});
      for (size_t si = 0; si < self_shapes.size(); ++si) {
        for (size_t ci = 0; ci < scalars.size(); ++ci) {
          for (MLay la : {MLay::kContiguous, MLay::kTransposed}) {
            if (dt != ScalarType::kFloat32 && la != MLay::kContiguous) continue;
            const auto& [beta, alpha] = scalars[ci];
            Sample s = New(op, absl::StrCat(DtypeName(dt), " ", ShapeToString(sa), " @ ", ShapeToString(sb), " self ",
                                            ShapeToString(self_shapes[si]), " beta ", beta.to_double(), " alpha ",
                                            alpha.to_double(), " ", LayName(la)));
            Tensor self = MakeM(dt, self_shapes[si], MLay::kContiguous, rng);
            // beta == 0 ignores self: NaN there must not propagate.
            if (beta.to_double() == 0 && IsFloating(dt) && self.meta.numel() > 0) {
              WriteAt(self.element(Shape(self.meta.dim(), 0)), dt, std::numeric_limits<double>::quiet_NaN());
            }
            s.positional = {SampleArg::T(s.Add(self)), SampleArg::T(s.Add(MakeM(dt, sa, la, rng))),
                            SampleArg::T(s.Add(MakeM(dt, sb, MLay::kSpread, rng)))};
            s.kwargs = {{"beta", ScalarArg(beta)}, {"alpha", ScalarArg(alpha)}};
            out.push_back(std::move(s));
          }
        }
      }
    }
  }
  Sample s = New(op, "bool");
  const Shape sa = batched ? Shape{2, 3, 4} : Shape{3, 4}, sb = batched ? Shape{2, 4, 5} : Shape{4, 5};
  s.positional = {SampleArg::T(s.Add(MakeM(ScalarType::kBool, {5}, MLay::kContiguous, rng))),
                  SampleArg::T(s.Add(MakeM(ScalarType::kBool, sa, MLay::kContiguous, rng))),
                  SampleArg::T(s.Add(MakeM(ScalarType::kBool, sb, MLay::kContiguous, rng)))};
  out.push_back(std::move(s));
}

void LinearSamples(std::vector<Sample>& out, std::mt19937& rng) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{4, 3}, {5, 3}}, {{2, 4, 3}, {5, 3}}, {{3}, {5, 3}}, {{4, 3}, {3}}, {{0, 3}, {5, 3}}, {{4, 0}, {5, 0}}};
  for (ScalarType dt : kGemmDtypes) {
    for (const auto& [sx, sw] : shapes) {
      for (int bias = 0; bias < 3; ++bias) {
        for (MLay lw : {MLay::kContiguous, MLay::kTransposed}) {
          const int64_t n = sw.size() == 2 ? sw[0] : 1;
          Sample s = New("linear", absl::StrCat(DtypeName(dt), " ", ShapeToString(sx), " x ", ShapeToString(sw), " ",
                                                LayName(lw), " bias ", bias));
          s.positional = {SampleArg::T(s.Add(MakeM(dt, sx, MLay::kContiguous, rng))),
                          SampleArg::T(s.Add(MakeM(dt, sw, lw, rng)))};
          if (bias == 1 && sw.size() == 2) s.positional.push_back(SampleArg::T(s.Add(MakeM(dt, {n}, MLay::kSpread, rng))));
          if (bias == 2) s.positional.push_back(SampleArg::T(s.Add(MakeM(dt, {}, MLay::kContiguous, rng))));
          out.push_back(std::move(s));
        }
      }
    }
  }
}

void OuterSamples(std::vector<Sample>& out, std::mt19937& rng) {
  for (ScalarType dt : {ScalarType::kFloat32, ScalarType::kFloat64, ScalarType::kFloat16, ScalarType::kBFloat16,
                        ScalarType::kInt64, ScalarType::kInt32, ScalarType::kInt8, ScalarType::kUInt8, ScalarType::kBool}) {
    for (const auto& [n, m] : std::vector<std::pair<int64_t, int64_t>>{{3, 4}, {0, 4}, {1, 1}, {37, 5}}) {
      for (MLay l : {MLay::kContiguous, MLay::kSpread}) {
        Sample s = New("outer", absl::StrCat(DtypeName(dt), " ", n, " x ", m, " ", LayName(l)));
        s.positional = {SampleArg::T(s.Add(MakeM(dt, {n}, l, rng))), SampleArg::T(s.Add(MakeM(dt, {m}, MLay::kContiguous, rng)))};
        out.push_back(std::move(s));
      }
    }
  }
  Sample s = New("outer", "int32 x float32");
  s.positional = {SampleArg::T(s.Add(MakeM(ScalarType::kInt32, {3}, MLay::kContiguous, rng))),
                  SampleArg::T(s.Add(MakeM(ScalarType::kFloat32, {4}, MLay::kContiguous, rng, true)))};
  out.push_back(std::move(s));
}

}  // namespace

std::vector<Sample> MatmulSamples(const std::string& op, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Sample> out;
  const std::vector<MLay> lays(std::begin(kMatLays), std::end(kMatLays));
  if (op == "mm") {
    ProductSamples(op, {{{3, 4}, {4, 5}}, {{1, 4}, {4, 1}}, {{5, 1}, {1, 3}}, {{0, 3}, {3, 4}}, {{3, 0}, {0, 4}},
                        {{3, 4}, {4, 0}}, {{7, 13}, {13, 9}}},
                   out, rng, lays);
  } else if (op == "bmm") {
    ProductSamples(op, {{{2, 3, 4}, {2, 4, 5}}, {{1, 3, 4}, {1, 4, 5}}, {{3, 1, 4}, {3, 4, 1}}, {{0, 2, 3}, {0, 3, 4}},
                        {{2, 3, 0}, {2, 0, 4}}, {{4, 5, 1}, {4, 1, 2}}},
                   out, rng, {MLay::kContiguous, MLay::kTransposed, MLay::kSpread, MLay::kBatchInner, MLay::kBatchExpanded});
  } else if (op == "matmul") {
    ProductSamples(op, {{{4}, {4}}, {{4}, {4, 3}}, {{3, 4}, {4}}, {{2, 3, 4}, {4}}, {{4}, {2, 4, 3}},
                        {{3, 4}, {2, 4, 5}}, {{2, 3, 4}, {4, 5}}, {{2, 1, 3, 4}, {3, 4, 5}}, {{2, 3, 4, 5}, {5, 2}},
                        {{0, 3, 4}, {4, 2}}, {{2, 3, 0}, {0, 2}}},
                   out, rng, {MLay::kContiguous, MLay::kTransposed, MLay::kSpread, MLay::kBatchInner});
  } else if (op == "dot") {
    ProductSamples(op, {{{7}, {7}}, {{0}, {0}}, {{1}, {1}}, {{100}, {100}}}, out, rng,
                   {MLay::kContiguous, MLay::kSpread, MLay::kBatchInner});
  } else if (op == "addmm" || op == "baddbmm") {
    AddmmSamples(op, out, rng);
  } else if (op == "linear") {
    LinearSamples(out, rng);
  } else if (op == "outer") {
    OuterSamples(out, rng);
  }
  return out;
}

}  // namespace tensord::testing::cudatest
