// Samples of the random ops (RandomSamplesFor, harness.h): rand, randn,
// rand_like, randn_like, randint, randint.low, uniform_ and normal_ over
// every dtype (the refused ones must fail as on the CPU), contiguous,
// permuted, spread, misaligned, 0-dim and empty outputs, and the argument
// errors. The devices draw different numbers (each has its own generator),
// so each sample checks what both devices' values must satisfy (their range,
// integrality, finiteness) instead of comparing them; cuda_random_host_test.cc
// checks the draws themselves.
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

// Every value of the first output lies in [lo, hi) (hi == lo: equals lo),
// and, with `integral`, is a whole number. Integers drawn into a floating
// dtype are rounded to it, and may round up to hi (on both devices, as in
// PyTorch): [lo, hi] then.
std::function<std::string(const std::vector<Tensor>&)> InRange(double lo, double hi, bool integral = false) {
  return [lo, hi, integral](const std::vector<Tensor>& outs) -> std::string {
    if (outs.empty()) return "no output";
    const std::vector<double> v = Values(outs[0]);
    const bool closed = integral && IsFloating(outs[0].meta.dtype);
    for (size_t i = 0; i < v.size(); ++i) {
      const bool ok = hi == lo ? v[i] == lo : (v[i] >= lo && (v[i] < hi || (closed && v[i] == hi)));
      if (!ok || (integral && v[i] != std::floor(v[i]))) {
        return absl::StrCat("element ", i, " is ", v[i], ", outside [", lo, ", ", hi, ")",
                            integral ? " or not whole" : "");
      }
    }
    return "";
  };
}

// Every value of the first output is finite (std 0: equals mean).
std::function<std::string(const std::vector<Tensor>&)> NormalValues(double mean, double std) {
  return [mean, std](const std::vector<Tensor>& outs) -> std::string {
    if (outs.empty()) return "no output";
    const std::vector<double> v = Values(outs[0]);
    for (size_t i = 0; i < v.size(); ++i) {
      if (!std::isfinite(v[i]) || (std == 0 && v[i] != mean)) {
        return absl::StrCat("element ", i, " is ", v[i], " (mean ", mean, ", std ", std, ")");
      }
    }
    return "";
  };
}

// Output layouts of the in-place ops: contiguous, permuted, spread,
// misaligned (offset 1), 0-dim, empty, long.
std::vector<std::pair<std::string, Tensor>> Selves(ScalarType dt, std::mt19937& rng) {
  std::vector<std::pair<std::string, Tensor>> selves;
  const Tensor t = Random(dt, {3, 5, 4}, rng);
  selves.emplace_back("contiguous", t);
  selves.emplace_back("permuted", ReversedLayout(t, 1));
  selves.emplace_back("spread", Spread(t, 3));
  selves.emplace_back("misaligned", Restride(Random(dt, {33}, rng), {1}, 1));
  selves.emplace_back("0-dim", Random(dt, {}, rng));
  selves.emplace_back("empty", Random(dt, {0, 3}, rng));
  selves.emplace_back("long", Random(dt, {1027}, rng));
  return selves;
}

const Shape kSizes[] = {{3, 4}, {}, {0, 2}, {1027}, {2, 3, 5, 7}};

// rand / randn (size, dtype, device): every dtype (the CPU refuses the
// non-floating ones), the default dtype.
void FactorySamples(const std::string& op, std::vector<Sample>& out) {
  const bool normal = op == "randn";
  for (ScalarType dt : kAllDtypes) {
    for (const Shape& size : kSizes) {
      Sample s = NewSample(op, absl::StrCat(Name(dt), " ", ShapeToString(size)));
      s.positional = {SampleArg::V(Value(size))};
      s.kwargs = {{"dtype", SampleArg::V(Value(dt))}, {"device", SampleArg::Dev()}};
      s.check_values = normal ? NormalValues(0, 1) : InRange(0, 1);
      out.push_back(std::move(s));
    }
  }
  Sample s = NewSample(op, "default dtype");
  s.positional = {SampleArg::V(Value(Shape{4, 5}))};
  s.kwargs = {{"device", SampleArg::Dev()}};
  s.check_values = normal ? NormalValues(0, 1) : InRange(0, 1);
  out.push_back(std::move(s));
}

// rand_like / randn_like: every dtype and layout of self, with and without
// a dtype keyword.
void LikeSamples(const std::string& op, std::vector<Sample>& out, std::mt19937& rng) {
  const bool normal = op == "randn_like";
  for (ScalarType dt : kAllDtypes) {
    for (const auto& [name, self] : Selves(dt, rng)) {
      for (bool with_dtype : {false, true}) {
        Sample s = NewSample(op, absl::StrCat(Name(dt), " ", name, with_dtype ? " dtype=float16" : ""));
        s.positional = {SampleArg::T(s.Add(self))};
        if (with_dtype) s.kwargs = {{"dtype", SampleArg::V(Value(ScalarType::kFloat16))}};
        s.check_values = normal ? NormalValues(0, 1) : InRange(0, 1);
        out.push_back(std::move(s));
      }
    }
  }
}

// uniform_(self, from, to) / normal_(self, mean, std): every dtype and
// layout, several parameter pairs (exact in bfloat16), the errors
// (from > to, std < 0, non-finite parameters), an overlapping self.
void InPlaceSamples(const std::string& op, std::vector<Sample>& out, std::mt19937& rng) {
  const bool normal = op == "normal_";
  const double inf = std::numeric_limits<double>::infinity();
  const std::pair<double, double> params[] = {{0, 1}, {-2, 3.5}, {-0.75, 0.5}, {5, 5}, {3, 0.5}};
  for (ScalarType dt : kAllDtypes) {
    for (const auto& [name, self] : Selves(dt, rng)) {
      for (const auto& [a, b] : params) {
        if (!normal && a > b) continue;
        Sample s = NewSample(op, absl::StrCat(Name(dt), " ", name, " (", a, ", ", b, ")"));
        s.positional = {SampleArg::T(s.Add(self)), SampleArg::V(Value(a)), SampleArg::V(Value(b))};
        s.check_values = normal ? NormalValues(a, b) : InRange(a, b);
        out.push_back(std::move(s));
      }
    }
  }
  for (ScalarType dt : {ScalarType::kFloat32, ScalarType::kFloat64, ScalarType::kFloat16}) {
    const std::pair<double, double> bad[] = {{1, -1}, {inf, 1}, {0, std::nan("")}, {3, 2}};
    for (const auto& [a, b] : bad) {
      Sample s = NewSample(op, absl::StrCat(Name(dt), " bad (", a, ", ", b, ")"));
      s.positional = {SampleArg::T(s.Add(Random(dt, {4}, rng))), SampleArg::V(Value(a)), SampleArg::V(Value(b))};
      s.check_values = normal ? NormalValues(a, b) : InRange(a, b);  // (3, 2) is fine for normal_
      out.push_back(std::move(s));
    }
    // Defaults (0, 1).
    Sample d = NewSample(op, absl::StrCat(Name(dt), " defaults"));
    d.positional = {SampleArg::T(d.Add(Random(dt, {6}, rng)))};
    d.check_values = normal ? NormalValues(0, 1) : InRange(0, 1);
    out.push_back(std::move(d));
  }
  // self overlapping itself (expanded): refused.
  Sample o = NewSample(op, "internal overlap");
  o.positional = {SampleArg::T(o.Add(Restride(Random(ScalarType::kFloat32, {1}, rng), {0}))), SampleArg::V(Value(0.0)),
                  SampleArg::V(Value(1.0))};
  o.tensors[0].meta.sizes = {3};
  out.push_back(std::move(o));
}

// randint(high, size) / randint.low(low, high, size): every dtype, ranges
// below and past 2^32 (the 64-bit draw), a one-value range, and the
// errors (low >= high, bounds outside the dtype).
void RandintSamples(const std::string& op, std::vector<Sample>& out) {
  const bool low_form = op == "randint.low";
  struct Range {
    int64_t low, high;
  };
  const int64_t big = int64_t{1} << 40;
  std::vector<Range> ranges = {{0, 10}, {0, 1}, {0, 2}};
  if (low_form) ranges.insert(ranges.end(), {{-5, 5}, {-100, 120}, {-big, big}, {3, 3}, {7, 2}, {-1, 300}});
  if (!low_form) ranges.push_back({0, 0});
  for (ScalarType dt : kAllDtypes) {
    for (const Range& r : ranges) {
      for (const Shape& size : {Shape{3, 4}, Shape{}, Shape{0, 2}, Shape{1027}}) {
        Sample s = NewSample(op, absl::StrCat(Name(dt), " [", r.low, ", ", r.high, ") ", ShapeToString(size)));
        if (low_form) s.positional.push_back(SampleArg::V(Value(r.low)));
        s.positional.push_back(SampleArg::V(Value(r.high)));
        s.positional.push_back(SampleArg::V(Value(size)));
        s.kwargs = {{"dtype", SampleArg::V(Value(dt))}, {"device", SampleArg::Dev()}};
        s.check_values = InRange(static_cast<double>(r.low), static_cast<double>(r.high), /*integral=*/true);
        out.push_back(std::move(s));
      }
    }
  }
  Sample s = NewSample(op, "default dtype");
  if (low_form) s.positional.push_back(SampleArg::V(Value(int64_t{-3})));
  s.positional.push_back(SampleArg::V(Value(int64_t{4})));
  s.positional.push_back(SampleArg::V(Value(Shape{5, 6})));
  s.kwargs = {{"device", SampleArg::Dev()}};
  s.check_values = InRange(low_form ? -3 : 0, 4, true);
  out.push_back(std::move(s));
}

}  // namespace

std::vector<Sample> RandomSamplesFor(const std::string& op, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Sample> out;
  if (op == "rand" || op == "randn") {
    FactorySamples(op, out);
  } else if (op == "rand_like" || op == "randn_like") {
    LikeSamples(op, out, rng);
  } else if (op == "uniform_" || op == "normal_") {
    InPlaceSamples(op, out, rng);
  } else if (op == "randint" || op == "randint.low") {
    RandintSamples(op, out);
  }
  return out;
}

}  // namespace tensord::testing::cudatest
