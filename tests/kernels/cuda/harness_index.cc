// Samples of the indexing ops (IndexSamplesFor, harness.h): gather,
// index_select, scatter.src, scatter.value, scatter_add and index_add over
// every dtype,
// int64 and int32 indices, dense, permuted and spread layouts, every dim,
// repeated indices (a scatter's last write wins, scatter_add adds them in
// order), 0-dim and empty tensors, and bad indices (past the end,
// negative), whose errors must be the CPU kernel's.
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "harness.h"

namespace tensord::testing::cudatest {
namespace {

constexpr ScalarType kDtypes[] = {
    ScalarType::kBool,    ScalarType::kUInt8,   ScalarType::kInt8,    ScalarType::kInt16,
    ScalarType::kInt32,   ScalarType::kInt64,   ScalarType::kFloat16, ScalarType::kBFloat16,
    ScalarType::kFloat32, ScalarType::kFloat64, ScalarType::kFloat8_e4m3fn,
};

// An index tensor of `sizes` with entries in [0, n) (repeats likely), in
// `dt`, laid out as `layout`; `bad` (when not 0) replaces one entry.
Tensor Indices(ScalarType dt, const Shape& sizes, int64_t n, std::mt19937& rng, int layout, int64_t bad = 0) {
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  std::vector<double> v(static_cast<size_t>(numel));
  for (double& x : v) x = n > 0 ? static_cast<double>(rng() % static_cast<uint32_t>(n)) : 0;
  if (bad != 0 && numel > 0) v[static_cast<size_t>(numel / 2)] = static_cast<double>(bad);
  return LaidOut(FromValues(dt, sizes, v), layout);
}

void GatherSamples(const std::string& op, std::vector<Sample>& out, std::mt19937& rng) {
  const bool select = op == "index_select";
  const Shape self_sizes = {4, 5, 6};
  for (ScalarType dt : kDtypes) {
    for (int layout = 0; layout < 3; ++layout) {
      for (int64_t dim : {0, 1, -1}) {
        for (ScalarType it : {ScalarType::kInt64, ScalarType::kInt32}) {
          const int64_t d = dim < 0 ? dim + 3 : dim;
          Shape isz = select ? Shape{7} : Shape{3, 4, 5};
          if (!select) isz[static_cast<size_t>(d)] = 7;  // longer than self along dim: fine
          Sample s = NewSample(op, absl::StrCat(Name(dt), " layout ", layout, " dim ", dim, " ", Name(it)));
          s.positional = {SampleArg::T(s.Add(LaidOut(Random(dt, self_sizes, rng), layout))), SampleArg::V(Value(dim)),
                          SampleArg::T(s.Add(Indices(it, isz, self_sizes[static_cast<size_t>(d)], rng, 2 - layout)))};
          out.push_back(std::move(s));
        }
      }
    }
    // 0-dim self and index; an empty index.
    Sample z = NewSample(op, Name(dt) + " 0-dim");
    z.positional = {SampleArg::T(z.Add(Random(dt, {}, rng))), SampleArg::V(Value(int64_t{0})),
                    SampleArg::T(z.Add(FromValues(ScalarType::kInt64, {}, {0})))};
    out.push_back(std::move(z));
    Sample e = NewSample(op, Name(dt) + " empty index");
    e.positional = {SampleArg::T(e.Add(Random(dt, {3, 4}, rng))), SampleArg::V(Value(int64_t{1})),
                    SampleArg::T(e.Add(FromValues(ScalarType::kInt64, select ? Shape{0} : Shape{3, 0}, {})))};
    out.push_back(std::move(e));
  }
  // Bad indices: past the end and negative (neither op wraps them).
  for (int64_t bad : {5, 6, -1, -6}) {
    for (ScalarType it : {ScalarType::kInt64, ScalarType::kInt32}) {
      Sample s = NewSample(op, absl::StrCat("bad index ", bad, " ", Name(it)));
      s.positional = {SampleArg::T(s.Add(Random(ScalarType::kFloat32, {4, 5, 6}, rng))), SampleArg::V(Value(int64_t{1})),
                      SampleArg::T(s.Add(Indices(it, select ? Shape{7} : Shape{4, 3, 6}, 5, rng, 0, bad)))};
      out.push_back(std::move(s));
    }
  }
}

void ScatterSamples(const std::string& op, std::vector<Sample>& out, std::mt19937& rng) {
  const bool add = op == "scatter_add", value = op == "scatter.value";
  const Shape self_sizes = {4, 5, 6};
  for (ScalarType dt : kDtypes) {
    if (add && (dt == ScalarType::kFloat8_e4m3fn)) continue;  // the CPU refuses it too: checked below
    for (int layout = 0; layout < 3; ++layout) {
      for (int64_t dim : {0, 1, -1}) {
        const int64_t d = dim < 0 ? dim + 3 : dim;
        Shape isz = {3, 4, 5};
        isz[static_cast<size_t>(d)] = 9;  // more entries than positions: repeats
        const ScalarType it = add && layout == 1 ? ScalarType::kInt32 : ScalarType::kInt64;
        Sample s = NewSample(op, absl::StrCat(Name(dt), " layout ", layout, " dim ", dim, " ", Name(it)));
        s.positional = {SampleArg::T(s.Add(LaidOut(Random(dt, self_sizes, rng), layout))), SampleArg::V(Value(dim)),
                        SampleArg::T(s.Add(Indices(it, isz, self_sizes[static_cast<size_t>(d)], rng, (layout + 1) % 3)))};
        if (value) {
          s.positional.push_back(SampleArg::V(Value(dt == ScalarType::kBool ? Scalar::Bool(true) : Scalar::Int(3))));
        } else {
          s.positional.push_back(SampleArg::T(s.Add(LaidOut(Random(dt, {9, 9, 9}, rng), 2 - layout))));
        }
        out.push_back(std::move(s));
      }
    }
    Sample z = NewSample(op, Name(dt) + " 0-dim");
    z.positional = {SampleArg::T(z.Add(Random(dt, {}, rng))), SampleArg::V(Value(int64_t{0})),
                    SampleArg::T(z.Add(FromValues(ScalarType::kInt64, {}, {0})))};
    z.positional.push_back(value ? SampleArg::V(Value(Scalar::Float(1.5))) : SampleArg::T(z.Add(Random(dt, {}, rng))));
    out.push_back(std::move(z));
  }
  if (add) {
    Sample f8 = NewSample(op, "float8 refused");
    f8.positional = {SampleArg::T(f8.Add(Random(ScalarType::kFloat8_e4m3fn, {3}, rng))), SampleArg::V(Value(int64_t{0})),
                     SampleArg::T(f8.Add(FromValues(ScalarType::kInt64, {2}, {0, 2}))),
                     SampleArg::T(f8.Add(Random(ScalarType::kFloat8_e4m3fn, {3}, rng)))};
    out.push_back(std::move(f8));
  }
  for (int64_t bad : {5, -1}) {
    Sample s = NewSample(op, absl::StrCat("bad index ", bad));
    s.positional = {SampleArg::T(s.Add(Random(ScalarType::kFloat32, {4, 5, 6}, rng))), SampleArg::V(Value(int64_t{1})),
                    SampleArg::T(s.Add(Indices(ScalarType::kInt64, {4, 3, 6}, 5, rng, 0, bad)))};
    s.positional.push_back(value ? SampleArg::V(Value(Scalar::Float(2))) : SampleArg::T(s.Add(Random(ScalarType::kFloat32, {4, 3, 6}, rng))));
    out.push_back(std::move(s));
  }
}

// index_add(self, dim, index, source, alpha): repeated entries, alphas of
// each kind, int32 and int64 indices, a 0-dim index, bad entries.
void IndexAddSamples(std::vector<Sample>& out, std::mt19937& rng) {
  const Shape self_sizes = {4, 5, 6};
  for (ScalarType dt : kDtypes) {
    if (dt == ScalarType::kFloat8_e4m3fn) continue;  // refused: the sample below
    for (int layout = 0; layout < 3; ++layout) {
      for (int64_t dim : {0, 1, -1}) {
        const size_t d = static_cast<size_t>(dim < 0 ? dim + 3 : dim);
        Shape ssz = self_sizes;
        ssz[d] = 8;
        const ScalarType it = layout == 1 ? ScalarType::kInt32 : ScalarType::kInt64;
        const Scalar alpha = dt == ScalarType::kBool ? Scalar::Bool(true)
                             : layout == 2           ? Scalar::Float(-1.5)
                                                     : Scalar::Int(2);
        Sample s = NewSample("index_add", absl::StrCat(Name(dt), " layout ", layout, " dim ", dim, " ",
                                                            Name(it), " alpha ", alpha.ToString()));
        s.positional = {SampleArg::T(s.Add(LaidOut(Random(dt, self_sizes, rng), layout))), SampleArg::V(Value(dim)),
                        SampleArg::T(s.Add(Indices(it, {8}, self_sizes[d], rng, layout == 2 ? 2 : 0))),
                        SampleArg::T(s.Add(LaidOut(Random(dt, ssz, rng), (layout + 1) % 3)))};
        s.kwargs = {{"alpha", SampleArg::V(Value(alpha))}};  // keyword-only, as in PyTorch
        out.push_back(std::move(s));
      }
    }
    Sample z = NewSample("index_add", Name(dt) + " 0-dim index");
    z.positional = {SampleArg::T(z.Add(Random(dt, {3, 2}, rng))), SampleArg::V(Value(int64_t{0})),
                    SampleArg::T(z.Add(FromValues(ScalarType::kInt64, {}, {2}))),
                    SampleArg::T(z.Add(Random(dt, {1, 2}, rng)))};
    out.push_back(std::move(z));
  }
  Sample f8 = NewSample("index_add", "float8 refused");
  f8.positional = {SampleArg::T(f8.Add(Random(ScalarType::kFloat8_e4m3fn, {3}, rng))), SampleArg::V(Value(int64_t{0})),
                   SampleArg::T(f8.Add(FromValues(ScalarType::kInt64, {2}, {0, 2}))),
                   SampleArg::T(f8.Add(Random(ScalarType::kFloat8_e4m3fn, {2}, rng)))};
  out.push_back(std::move(f8));
  for (int64_t bad : {5, -1}) {
    Sample s = NewSample("index_add", absl::StrCat("bad index ", bad));
    s.positional = {SampleArg::T(s.Add(Random(ScalarType::kFloat32, {4, 5, 6}, rng))), SampleArg::V(Value(int64_t{1})),
                    SampleArg::T(s.Add(Indices(ScalarType::kInt64, {7}, 5, rng, 0, bad))),
                    SampleArg::T(s.Add(Random(ScalarType::kFloat32, {4, 7, 6}, rng)))};
    out.push_back(std::move(s));
  }
}

}  // namespace

std::vector<Sample> IndexSamplesFor(const std::string& op, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Sample> out;
  if (op == "gather" || op == "index_select") GatherSamples(op, out, rng);
  if (op == "scatter.src" || op == "scatter.value" || op == "scatter_add") ScatterSamples(op, out, rng);
  if (op == "index_add") IndexAddSamples(out, rng);
  return out;
}

}  // namespace tensord::testing::cudatest
