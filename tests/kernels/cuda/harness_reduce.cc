// Samples of the reductions beyond sum/mean/extremes and of the scans
// (MoreReductionSamplesFor, harness.h): nansum, prod, all/any, var/std,
// norm / linalg_vector_norm and logsumexp over every dtype, the
// reductions' inputs (every layout, special values, ties, long
// reductions), dims as None, lists, negative and out of range, keepdim,
// dtype= and the ops' other arguments; cumsum and cumprod over every dim of
// strided and broadcast inputs. Errors (dtypes the CPU refuses, bad dims)
// must be the CPU kernel's.
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "harness.h"

namespace tensord::testing::cudatest {
namespace {

// The arguments after self of one sample, and its keywords.
struct ArgSet {
  std::string label;
  std::vector<SampleArg> positional;
  std::vector<std::pair<std::string, SampleArg>> kwargs;
};

ArgSet Args(std::string label, std::vector<SampleArg> positional,
            std::vector<std::pair<std::string, SampleArg>> kwargs = {}) {
  return ArgSet{std::move(label), std::move(positional), std::move(kwargs)};
}

SampleArg V(Value v) { return SampleArg::V(std::move(v)); }

// op(self, args...) for every dtype, every reduction input and every ArgSet.
void Over(const std::string& op, const std::vector<ArgSet>& sets, std::vector<Sample>& out, std::mt19937& rng) {
  for (ScalarType dt : SampleDtypes()) {
    for (const auto& [name, t] : ReductionSampleInputs(dt, rng)) {
      for (const ArgSet& a : sets) {
        Sample s;
        s.op = op;
        s.label = absl::StrCat(DtypeName(dt), " ", name, " ", a.label);
        s.positional.push_back(SampleArg::T(s.Add(t)));
        for (const SampleArg& p : a.positional) s.positional.push_back(p);
        s.kwargs = a.kwargs;
        out.push_back(std::move(s));
      }
    }
  }
}

// (dim, keepdim) for dim-list reductions: None, one dim, two, negative,
// the empty list, out of range; each with and without keepdim.
std::vector<ArgSet> DimListArgs(const std::vector<std::pair<std::string, SampleArg>>& kwargs = {}) {
  std::vector<ArgSet> sets;
  for (const Value& dim : {Value(), Value(Shape{1}), Value(Shape{0, 2}), Value(Shape{-1}), Value(Shape{}),
                           Value(Shape{3})}) {
    for (bool keepdim : {false, true}) {
      sets.push_back(Args(absl::StrCat("dim ", dim.ToString(), keepdim ? " keepdim" : ""), {V(dim), V(Value(keepdim))},
                          kwargs));
    }
  }
  return sets;
}

// (dim, keepdim) for one-dim reductions: first, last, negative, out of range.
std::vector<ArgSet> OneDimArgs(const std::vector<std::pair<std::string, SampleArg>>& kwargs = {}) {
  std::vector<ArgSet> sets;
  for (int64_t dim : {0, 1, -1, 2, -3}) {
    for (bool keepdim : {false, true}) {
      sets.push_back(Args(absl::StrCat("dim ", dim, keepdim ? " keepdim" : ""), {V(Value(dim)), V(Value(keepdim))},
                          kwargs));
    }
  }
  return sets;
}

std::vector<std::pair<std::string, SampleArg>> DtypeKw(ScalarType t) { return {{"dtype", V(Value(t))}}; }

void NansumProdAllAny(const std::string& op, std::vector<Sample>& out, std::mt19937& rng) {
  if (op == "nansum") {
    std::vector<ArgSet> sets = DimListArgs();
    for (ScalarType to : {ScalarType::kFloat64, ScalarType::kFloat16, ScalarType::kInt64}) {
      for (const Value& dim : {Value(), Value(Shape{-1})}) {
        sets.push_back(Args(absl::StrCat("dim ", dim.ToString(), " to ", DtypeName(to)), {V(dim), V(Value(false))},
                            DtypeKw(to)));
      }
    }
    Over(op, sets, out, rng);
  } else if (op == "prod") {
    std::vector<ArgSet> sets = {Args("", {})};
    for (ScalarType to : {ScalarType::kFloat64, ScalarType::kFloat32, ScalarType::kInt32, ScalarType::kInt64,
                          ScalarType::kBool, ScalarType::kFloat16}) {
      sets.push_back(Args(absl::StrCat("to ", DtypeName(to)), {}, DtypeKw(to)));
    }
    Over(op, sets, out, rng);
  } else if (op == "prod.dim_int") {
    std::vector<ArgSet> sets = OneDimArgs();
    for (ScalarType to : {ScalarType::kFloat64, ScalarType::kInt16, ScalarType::kBFloat16}) {
      sets.push_back(Args(absl::StrCat("dim 0 to ", DtypeName(to)), {V(Value(int64_t{0})), V(Value(false))},
                          DtypeKw(to)));
    }
    Over(op, sets, out, rng);
  } else if (op == "all" || op == "any") {
    Over(op, {Args("", {})}, out, rng);
  } else if (op == "all.dim" || op == "any.dim") {
    Over(op, OneDimArgs(), out, rng);
  }
}

// var / std: unbiased both ways; corrections None, 0, 1, 2, larger than
// some reductions (a divisor of 0 or less), negative.
void VarStdSamples(const std::string& op, std::vector<Sample>& out, std::mt19937& rng) {
  const std::string base = op.substr(0, op.find('.'));
  if (op == base) {
    Over(op, {Args("unbiased", {V(Value(true))}), Args("biased", {V(Value(false))})}, out, rng);
  } else if (op == base + ".dim") {
    std::vector<ArgSet> sets;
    for (const ArgSet& d : DimListArgs()) {
      for (bool unbiased : {true, false}) {
        sets.push_back(Args(absl::StrCat(d.label, unbiased ? " unbiased" : ""),
                            {d.positional[0], V(Value(unbiased)), d.positional[1]}));
      }
    }
    Over(op, sets, out, rng);
  } else if (op == base + ".correction") {
    std::vector<ArgSet> sets;
    for (const ArgSet& d : DimListArgs()) {
      for (const Value& c : {Value(), Value(int64_t{0}), Value(int64_t{1}), Value(int64_t{2}), Value(int64_t{6}),
                             Value(int64_t{-1})}) {
        sets.push_back(Args(absl::StrCat(d.label, " correction ", c.ToString()), {d.positional[0]},
                            {{"correction", V(c)}, {"keepdim", d.positional[1]}}));
      }
    }
    Over(op, sets, out, rng);
  }
}

// The norms' p: the special cases (0, 1, 2, inf, -inf) and others,
// negative and fractional.
const std::vector<Scalar>& NormPs() {
  static const std::vector<Scalar> ps = {
      Scalar::Int(0),   Scalar::Int(1),     Scalar::Int(2),      Scalar::Float(INFINITY), Scalar::Float(-INFINITY),
      Scalar::Int(3),   Scalar::Float(0.5), Scalar::Float(-1.0), Scalar::Float(2.5)};
  return ps;
}

void NormSamples(const std::string& op, std::vector<Sample>& out, std::mt19937& rng) {
  std::vector<ArgSet> sets;
  const std::vector<Value> dim_lists = {Value(Shape{1}), Value(Shape{0, 2}), Value(Shape{-1}), Value(Shape{}),
                                        Value(Shape{3})};
  for (const Scalar& p : NormPs()) {
    const std::string pl = absl::StrCat("p ", p.ToString());
    if (op == "norm.Scalar") {
      sets.push_back(Args(pl, {V(Value(p))}));
    } else if (op == "norm.ScalarOpt_dim") {
      for (const Value& dim : dim_lists) {
        for (bool keepdim : {false, true}) {
          sets.push_back(Args(absl::StrCat(pl, " dim ", dim.ToString(), keepdim ? " keepdim" : ""),
                              {V(Value(p)), V(dim), V(Value(keepdim))}));
        }
      }
    } else if (op == "norm.ScalarOpt_dim_dtype") {
      for (ScalarType to : {ScalarType::kFloat64, ScalarType::kFloat16, ScalarType::kFloat32, ScalarType::kInt32}) {
        sets.push_back(Args(absl::StrCat(pl, " dim [1] to ", DtypeName(to)), {V(Value(p)), V(Value(Shape{1})), V(Value(true))},
                            DtypeKw(to)));
      }
    } else if (op == "linalg_vector_norm") {
      for (const Value& dim : {Value(), Value(Shape{1}), Value(Shape{0, 2}), Value(Shape{-1}), Value(Shape{3})}) {
        sets.push_back(Args(absl::StrCat(pl, " dim ", dim.ToString()), {V(Value(p)), V(dim), V(Value(false))}));
      }
      for (ScalarType to : {ScalarType::kFloat64, ScalarType::kFloat16, ScalarType::kBFloat16}) {
        sets.push_back(Args(absl::StrCat(pl, " to ", DtypeName(to)), {V(Value(p)), V(Value()), V(Value(true))},
                            DtypeKw(to)));
      }
    }
  }
  if (op == "norm.ScalarOpt_dim") {
    sets.push_back(Args("p None", {V(Value()), V(Value(Shape{-1})), V(Value(false))}));
  }
  Over(op, sets, out, rng);
}

void LogsumexpSamples(std::vector<Sample>& out, std::mt19937& rng) {
  std::vector<ArgSet> sets;
  for (const Value& dim : {Value(Shape{1}), Value(Shape{0, 2}), Value(Shape{-1}), Value(Shape{}), Value(Shape{3})}) {
    for (bool keepdim : {false, true}) {
      sets.push_back(Args(absl::StrCat("dim ", dim.ToString(), keepdim ? " keepdim" : ""), {V(dim), V(Value(keepdim))}));
    }
  }
  Over("logsumexp", sets, out, rng);
  // Rows of -inf, of +inf mixed with finite values, and with NaN.
  const double inf = INFINITY;
  Sample s;
  s.op = "logsumexp";
  s.label = "infinite rows";
  s.positional = {SampleArg::T(s.Add(FromValues(ScalarType::kFloat64, {4, 3},
                                                {-inf, -inf, -inf, inf, 1, -inf, NAN, 2, inf, 1e300, -1e300, 3}))),
                  V(Value(Shape{1})), V(Value(false))};
  out.push_back(std::move(s));
}

void ScanSamples(const std::string& op, std::vector<Sample>& out, std::mt19937& rng) {
  std::vector<ArgSet> sets;
  for (int64_t dim : {0, 1, -1, 2, 3, -4}) sets.push_back(Args(absl::StrCat("dim ", dim), {V(Value(dim))}));
  for (ScalarType to : {ScalarType::kFloat64, ScalarType::kInt32, ScalarType::kInt64, ScalarType::kBFloat16,
                        ScalarType::kFloat16, ScalarType::kBool}) {
    sets.push_back(Args(absl::StrCat("dim -1 to ", DtypeName(to)), {V(Value(int64_t{-1}))}, DtypeKw(to)));
  }
  Over(op, sets, out, rng);
}

}  // namespace

std::vector<Sample> MoreReductionSamplesFor(const std::string& op, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Sample> out;
  NansumProdAllAny(op, out, rng);
  const std::string base = op.substr(0, op.find('.'));
  if (base == "var" || base == "std") VarStdSamples(op, out, rng);
  if (base == "norm" || op == "linalg_vector_norm") NormSamples(op, out, rng);
  if (op == "logsumexp") LogsumexpSamples(out, rng);
  if (op == "cumsum" || op == "cumprod") ScanSamples(op, out, rng);
  return out;
}

}  // namespace tensord::testing::cudatest
