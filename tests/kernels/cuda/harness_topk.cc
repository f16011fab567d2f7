// Samples of topk (TopkSamplesFor, harness.h): every dtype (bool and float8
// refused as on the CPU), dense, permuted and spread inputs, every dim, k
// of 0, 1, a few and the whole dim, largest and smallest, sorted or not,
// ties (small integers) and special values (NaN, infinities, signed zeros),
// 0-dim and empty inputs, rows long enough for the scratch-memory sort,
// and the errors (k out of range, a bad dim).
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "harness.h"

namespace tensord::testing::cudatest {
namespace {

Sample TopkSample(std::string label, const Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted = true) {
  Sample s;
  s.op = "topk";
  s.label = absl::StrCat(label, " k ", k, " dim ", dim, largest ? " largest" : " smallest", sorted ? "" : " unsorted");
  s.positional = {SampleArg::T(s.Add(self)), SampleArg::V(Value(k)), SampleArg::V(Value(dim)),
                  SampleArg::V(Value(largest)), SampleArg::V(Value(sorted))};
  return s;
}

// NaN, infinities, signed zeros and repeats for floating dtypes.
Tensor SpecialRow(ScalarType dt) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  return FromValues(dt, {14}, {1, nan, -0.0, 0.0, inf, -inf, 1, nan, -2, 0.0, -0.0, 3, -inf, 1});
}

// Values in {-1, 0, 1} ({0, 1, 2} for uint8): many ties.
Tensor Ties(ScalarType dt, const Shape& sizes, std::mt19937& rng) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = static_cast<double>(rng() % 3) - (dt == ScalarType::kUInt8 ? 0 : 1);
  if (dt == ScalarType::kBool) {
    for (double& x : v) x = x > 0;
  }
  return FromValues(dt, sizes, v);
}

}  // namespace

std::vector<Sample> TopkSamplesFor(const std::string& op, uint32_t seed) {
  std::vector<Sample> out;
  if (op != "topk") return out;
  std::mt19937 rng(seed);
  for (ScalarType dt : kAllDtypes) {
    const Tensor t = Random(dt, {3, 5, 4}, rng);
    const std::pair<std::string, Tensor> inputs[] = {
        {"contiguous", t}, {"permuted", ReversedLayout(t, 1)}, {"spread", Spread(t, 3)}};
    for (const auto& [name, self] : inputs) {
      for (int64_t dim : {0, 1, -1}) {
        const int64_t n = self.meta.sizes[static_cast<size_t>(dim < 0 ? dim + 3 : dim)];
        for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{2}, n}) {
          for (bool largest : {true, false}) out.push_back(TopkSample(Name(dt) + " " + name, self, k, dim, largest));
        }
      }
    }
    out.push_back(TopkSample(Name(dt) + " contiguous", t, 3, 1, true, /*sorted=*/false));
    const Tensor ties = Ties(dt, {6, 9}, rng);
    for (bool largest : {true, false}) {
      out.push_back(TopkSample(Name(dt) + " ties", ties, 4, 1, largest));
      out.push_back(TopkSample(Name(dt) + " ties", ties, 9, -1, largest));
      out.push_back(TopkSample(Name(dt) + " ties", ReversedLayout(ties), 6, 0, largest));
    }
    if (IsFloating(dt)) {
      for (bool largest : {true, false}) {
        for (int64_t k : {3, 8, 14}) out.push_back(TopkSample(Name(dt) + " special values", SpecialRow(dt), k, 0, largest));
      }
    }
    // 0-dim and empty.
    const Tensor scalar = Random(dt, {}, rng);
    for (int64_t k : {0, 1}) {
      for (int64_t dim : {0, -1}) out.push_back(TopkSample(Name(dt) + " 0-dim", scalar, k, dim, true));
    }
    const Tensor empty = Random(dt, {0, 3}, rng);
    out.push_back(TopkSample(Name(dt) + " empty", empty, 2, 1, true));
    out.push_back(TopkSample(Name(dt) + " empty", empty, 0, 0, false));
    // Rows of 2048 slots (the longest in shared memory) and longer (scratch).
    for (int64_t n : {2048, 3001}) {
      const Tensor rows = Random(dt, {2, n}, rng, -100, 100);
      out.push_back(TopkSample(absl::StrCat(Name(dt), " [2, ", n, "]"), rows, 7, 1, true));
      out.push_back(TopkSample(absl::StrCat(Name(dt), " [2, ", n, "]"), rows, n, 1, false));
    }
  }
  // Many rows (several per block on the GPU), a long inner dim taken from the outer.
  out.push_back(TopkSample("float32 [5000, 3]", Random(ScalarType::kFloat32, {5000, 3}, rng), 2, 1, true));
  out.push_back(TopkSample("int32 [700, 3] dim 0", Random(ScalarType::kInt32, {700, 3}, rng), 5, 0, false));
  // Errors.
  const Tensor t = Random(ScalarType::kFloat32, {3, 4}, rng);
  out.push_back(TopkSample("float32 k past the size", t, 5, 1, true));
  out.push_back(TopkSample("float32 negative k", t, -1, 1, true));
  out.push_back(TopkSample("float32 bad dim", t, 1, 2, true));
  out.push_back(TopkSample("float32 0-dim k 2", Random(ScalarType::kFloat32, {}, rng), 2, 0, true));
  return out;
}

}  // namespace tensord::testing::cudatest
