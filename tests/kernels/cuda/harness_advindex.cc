// Samples of advanced indexing and the mask ops (AdvIndexSamplesFor,
// harness.h): index.Tensor and index_put (with and without accumulate)
// over every dtype, int64 index tensors broadcast together (int32 ones the
// meta refuses), None slots, boolean and uint8 masks (index_put), adjacent
// and separated indexed dims, negative and repeated indices, 0-dim and
// empty indices; masked_scatter, nonzero and masked_select over every
// dtype with broadcast masks, -0.0 and NaN, empty and 0-dim tensors; all
// over dense, permuted, spread and stride-0 layouts. Bad indices (past the
// end, below -size), short sources and shapes that do not fit must give the
// CPU kernel's errors.
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "harness.h"

namespace tensord::testing::cudatest {
namespace {

// An index tensor of `sizes` with entries in [-n, n) (repeats likely; only
// [0, n) without `negative`), laid out as `layout`; `bad` (when not 0)
// replaces one entry.
Tensor Indices(const Shape& sizes, int64_t n, std::mt19937& rng, int layout, bool negative, int64_t bad = 0,
               ScalarType dt = ScalarType::kInt64) {
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  std::vector<double> v(static_cast<size_t>(numel));
  for (double& x : v) {
    if (n == 0) {
      x = 0;
    } else if (negative) {
      x = static_cast<double>(static_cast<int64_t>(rng() % static_cast<uint32_t>(2 * n)) - n);
    } else {
      x = static_cast<double>(rng() % static_cast<uint32_t>(n));
    }
  }
  if (bad != 0 && numel > 0) v[static_cast<size_t>(numel / 2)] = static_cast<double>(bad);
  return LaidOut(FromValues(dt, sizes, v), layout);
}

// An index list: -1 for None, else an index tensor's number in the sample.
SampleArg IndexList(const std::vector<int>& slots) { return SampleArg::List(slots); }

// index.Tensor(self, indices).
void IndexTensorSamples(std::vector<Sample>& out, std::mt19937& rng) {
  const Shape self_sizes = {4, 5, 6};
  struct Case {
    const char* name;
    // Per slot of the list: the index tensor's sizes, or nullopt-like
    // {-1} for None.
    std::vector<Shape> slots;
  };
  const Shape kNone = {-1};
  const std::vector<Case> cases = {
      {"[i]", {{7}}},
      {"[None, i]", {kNone, {2, 3}}},
      {"[i, j] broadcast", {{3, 1}, {4}}},
      {"[i, None, k] apart", {{2, 3}, kNone, {3}}},
      {"[None, j, k]", {kNone, {5}, {1, 5}}},
      {"[i, j, k]", {{2, 1, 3}, {4, 3}, {1}}},
      {"[0-dim i]", {{}}},
      {"[None, 0-dim j, k]", {kNone, {}, {3}}},
      {"[empty i]", {{0}}},
      {"[i, empty j]", {{1}, {0}}},
  };
  for (ScalarType dt : kAllDtypes) {
    for (int layout = 0; layout < 3; ++layout) {
      for (const Case& c : cases) {
        Sample s = NewSample("index.Tensor", absl::StrCat(Name(dt), " layout ", layout, " ", c.name));
        const int self = s.Add(LaidOut(Random(dt, self_sizes, rng), layout));
        std::vector<int> slots;
        for (size_t d = 0; d < c.slots.size(); ++d) {
          if (c.slots[d] == kNone) {
            slots.push_back(-1);
            continue;
          }
          slots.push_back(s.Add(Indices(c.slots[d], self_sizes[d], rng, (layout + 1) % 3, /*negative=*/true)));
        }
        s.positional = {SampleArg::T(self), IndexList(slots)};
        out.push_back(std::move(s));
      }
    }
  }
  // An expanded (stride-0) index, an embedding-style lookup of rows, a
  // non-indexed dim of size 0 (nothing is read: a bad index is not seen),
  // all-None.
  {
    Sample s = NewSample("index.Tensor", "stride-0 index");
    Tensor idx = FromValues(ScalarType::kInt64, {3, 1}, {2, -1, 0});
    idx.meta.sizes = {3, 4};
    idx.meta.strides = {1, 0};
    const int self = s.Add(Random(ScalarType::kFloat32, {4, 5}, rng));
    s.positional = {SampleArg::T(self), IndexList({s.Add(idx)})};
    out.push_back(std::move(s));
  }
  {
    Sample s = NewSample("index.Tensor", "rows of a table");
    const int self = s.Add(Random(ScalarType::kFloat32, {50, 16}, rng));
    s.positional = {SampleArg::T(self), IndexList({s.Add(Indices({8, 9}, 50, rng, 0, false))})};
    out.push_back(std::move(s));
  }
  {
    Sample s = NewSample("index.Tensor", "size-0 dim, bad index unread");
    const int self = s.Add(Random(ScalarType::kFloat32, {4, 0, 3}, rng));
    s.positional = {SampleArg::T(self), IndexList({s.Add(FromValues(ScalarType::kInt64, {2}, {1, 9}))})};
    out.push_back(std::move(s));
  }
  {
    Sample s = NewSample("index.Tensor", "all None");
    const int self = s.Add(LaidOut(Random(ScalarType::kFloat32, {4, 5}, rng), 1));
    s.positional = {SampleArg::T(self), IndexList({-1})};
    out.push_back(std::move(s));
  }
  // Bad indices (past the end, below -size) in each slot; in a later slot
  // of the same element; with the dims apart.
  for (int64_t bad : {4, 100, -5}) {
    Sample s = NewSample("index.Tensor", absl::StrCat("bad index ", bad, " in dim 0"));
    const int self = s.Add(Random(ScalarType::kFloat32, self_sizes, rng));
    s.positional = {SampleArg::T(self), IndexList({s.Add(Indices({7}, 4, rng, 0, true, bad))})};
    out.push_back(std::move(s));
  }
  for (int64_t bad : {6, -7}) {
    Sample s = NewSample("index.Tensor", absl::StrCat("bad index ", bad, " in dim 2, apart"));
    const int self = s.Add(Random(ScalarType::kFloat64, self_sizes, rng));
    s.positional = {SampleArg::T(self), IndexList({s.Add(Indices({3}, 4, rng, 0, true)), -1,
                                                   s.Add(Indices({2, 3}, 6, rng, 2, true, bad))})};
    out.push_back(std::move(s));
  }
  {
    Sample s = NewSample("index.Tensor", "bad index in dim 1 after a good dim 0");
    const int self = s.Add(Random(ScalarType::kInt32, self_sizes, rng));
    s.positional = {SampleArg::T(self),
                    IndexList({s.Add(FromValues(ScalarType::kInt64, {3}, {0, 1, 2})),
                               s.Add(FromValues(ScalarType::kInt64, {3}, {0, 5, 1}))})};
    out.push_back(std::move(s));
  }
  // Refused: shapes that do not broadcast, too many indices, an int32 and
  // a float index, a boolean mask (the meta refuses them all).
  auto refused = [&](const char* name, std::vector<Tensor> idx) {
    Sample s = NewSample("index.Tensor", name);
    const int self = s.Add(Random(ScalarType::kFloat32, self_sizes, rng));
    std::vector<int> slots;
    for (Tensor& t : idx) slots.push_back(s.Add(std::move(t)));
    s.positional = {SampleArg::T(self), IndexList(slots)};
    out.push_back(std::move(s));
  };
  refused("shapes do not broadcast", {Indices({3}, 4, rng, 0, false), Indices({2}, 5, rng, 0, false)});
  refused("too many indices", {Indices({1}, 4, rng, 0, false), Indices({1}, 5, rng, 0, false),
                               Indices({1}, 6, rng, 0, false), Indices({1}, 1, rng, 0, false)});
  refused("int32 index", {Indices({3}, 4, rng, 0, false, 0, ScalarType::kInt32)});
  refused("float index", {Random(ScalarType::kFloat32, {3}, rng)});
  refused("bool mask", {FromValues(ScalarType::kBool, {4}, {1, 0, 1, 1})});
}

// A bool (or uint8) mask of `sizes`, about half set; `fill` (0 or 1) sets
// every element instead when not -1.
Tensor Mask(const Shape& sizes, std::mt19937& rng, int fill = -1, ScalarType dt = ScalarType::kBool) {
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  std::vector<double> v(static_cast<size_t>(numel));
  for (double& x : v) x = fill >= 0 ? fill : static_cast<double>(rng() % 2);
  return FromValues(dt, sizes, v);
}

// Values of `dt` with about a third zeros (nonzero's input).
Tensor SomeZeros(ScalarType dt, const Shape& sizes, std::mt19937& rng) {
  Tensor t = Random(dt, sizes, rng);
  std::vector<double> v = Values(t);
  for (double& x : v) {
    if (rng() % 3 == 0) x = 0;
  }
  return FromValues(dt, sizes, v);
}

// index_put(self, indices, values, accumulate).
void IndexPutSamples(std::vector<Sample>& out, std::mt19937& rng) {
  const Shape self_sizes = {4, 5, 6};
  const Shape kNone = {-1}, kMask = {-2};
  struct Case {
    const char* name;
    std::vector<Shape> slots;  // an index's sizes, kNone, or a mask over the dims it covers: {-2, sizes...}
    Shape values;              // the values' sizes (the result's or a broadcast suffix)
  };
  const std::vector<Case> cases = {
      {"[i] repeats", {{9}}, {9, 5, 6}},
      {"[i] values broadcast", {{9}}, {6}},
      {"[None, j]", {kNone, {2, 3}}, {4, 2, 3, 6}},
      {"[i, j] broadcast", {{3, 1}, {4}}, {3, 4, 6}},
      {"[i, None, k] apart", {{2, 3}, kNone, {3}}, {2, 3, 5}},
      {"[i, j, k] 0-dim values", {{2, 1, 3}, {4, 3}, {1}}, {}},
      {"[0-dim i]", {{}}, {5, 6}},
      {"[empty i]", {{0}}, {1}},
      {"[mask]", {{-2, 4}}, {5, 6}},
      {"[None, mask]", {kNone, {-2, 5, 6}}, {1}},
      {"[mask 2-d, k]", {{-2, 4, 5}, {1}}, {}},
  };
  for (ScalarType dt : kAllDtypes) {
    for (bool accumulate : {false, true}) {
      // float8 does not add (the meta refuses it: the sample at the end).
      if (accumulate && (dt == ScalarType::kFloat8_e4m3fn || dt == ScalarType::kFloat8_e5m2)) continue;
      for (int layout = 0; layout < 3; ++layout) {
        for (const Case& c : cases) {
          Sample s = NewSample("index_put", absl::StrCat(Name(dt), accumulate ? " accumulate" : "", " layout ",
                                                            layout, " ", c.name));
          const int self = s.Add(LaidOut(Random(dt, self_sizes, rng), layout));
          std::vector<int> slots;
          int64_t d = 0;
          for (const Shape& slot : c.slots) {
            if (slot == kNone) {
              slots.push_back(-1);
              ++d;
            } else if (!slot.empty() && slot[0] == -2) {
              const Shape ms(slot.begin() + 1, slot.end());
              slots.push_back(s.Add(Mask(ms, rng, -1, layout == 2 ? ScalarType::kUInt8 : ScalarType::kBool)));
              d += static_cast<int64_t>(ms.size());
            } else {
              slots.push_back(s.Add(Indices(slot, self_sizes[static_cast<size_t>(d)], rng, (layout + 1) % 3, true)));
              ++d;
            }
          }
          const int values = s.Add(LaidOut(Random(dt, c.values, rng), (layout + 2) % 3));
          s.positional = {SampleArg::T(self), IndexList(slots), SampleArg::T(values), SampleArg::V(Value(accumulate))};
          out.push_back(std::move(s));
        }
      }
    }
  }
  // Many repeats: the last write wins; the sum follows row-major order.
  for (bool accumulate : {false, true}) {
    for (ScalarType dt : {ScalarType::kFloat16, ScalarType::kFloat32, ScalarType::kInt8}) {
      Sample s = NewSample("index_put", absl::StrCat(Name(dt), accumulate ? " accumulate" : "", " many repeats"));
      const int self = s.Add(Random(dt, {3, 2}, rng));
      s.positional = {SampleArg::T(self), IndexList({s.Add(Indices({300}, 3, rng, 0, true))}),
                      SampleArg::T(s.Add(Random(dt, {300, 2}, rng))), SampleArg::V(Value(accumulate))};
      out.push_back(std::move(s));
    }
  }
  auto put = [&](std::string name, const Shape& self_shape, std::vector<std::optional<Tensor>> idx,
                 const Shape& values, bool accumulate) {
    Sample s = NewSample("index_put", std::move(name));
    const int self = s.Add(Random(ScalarType::kFloat32, self_shape, rng));
    std::vector<int> slots;
    for (std::optional<Tensor>& t : idx) slots.push_back(t.has_value() ? s.Add(std::move(*t)) : -1);
    s.positional = {SampleArg::T(self), IndexList(slots), SampleArg::T(s.Add(Random(ScalarType::kFloat32, values, rng))),
                    SampleArg::V(Value(accumulate))};
    out.push_back(std::move(s));
  };
  const std::optional<Tensor> none;
  // A mask with nothing set; every index None.
  put("mask with nothing set", self_sizes, {Mask({4}, rng, 0)}, {6}, false);
  put("mask with all set", self_sizes, {none, Mask({5}, rng, 1)}, {4, 5, 6}, true);
  put("all None", {4, 5}, {none}, {5}, false);
  // Bad indices (each accumulate), also where the result is empty.
  for (bool accumulate : {false, true}) {
    for (int64_t bad : {4, -5}) {
      put(absl::StrCat("bad index ", bad, accumulate ? " accumulate" : ""), self_sizes,
          {Indices({7}, 4, rng, 0, true, bad)}, {7, 5, 6}, accumulate);
    }
    put(absl::StrCat("bad index in dim 2", accumulate ? " accumulate" : ""), self_sizes,
        {Indices({3}, 4, rng, 0, true), none, Indices({3}, 6, rng, 0, true, 6)}, {3, 5}, accumulate);
  }
  put("bad index, empty result", {4, 0, 6}, {FromValues(ScalarType::kInt64, {2}, {0, 4})}, {1}, false);
  // Refused: values that do not broadcast (the meta's check, and the
  // kernel's after a mask), masks of the wrong shape or 0-dim, shapes that
  // do not broadcast, float and int32 indices, float8 accumulation.
  put("values do not broadcast", self_sizes, {Indices({3}, 4, rng, 0, false)}, {2, 5, 6}, false);
  put("values do not broadcast after a mask", self_sizes, {Mask({4}, rng, 1)}, {3, 5, 6}, false);
  put("mask of the wrong shape", self_sizes, {Mask({3}, rng)}, {1}, false);
  put("0-dim mask", self_sizes, {Mask({}, rng, 1)}, {1}, false);
  put("shapes do not broadcast", self_sizes, {Indices({3}, 4, rng, 0, false), Indices({2}, 5, rng, 0, false)}, {1},
      false);
  put("too many indices", {4}, {Indices({1}, 4, rng, 0, false), Indices({1}, 4, rng, 0, false)}, {1}, false);
  put("float index", self_sizes, {Random(ScalarType::kFloat32, {3}, rng)}, {1}, false);
  put("int32 index", self_sizes, {Indices({3}, 4, rng, 0, false, 0, ScalarType::kInt32)}, {1}, false);
  {
    Sample s = NewSample("index_put", "float8 accumulate");
    const int self = s.Add(Random(ScalarType::kFloat8_e4m3fn, {4}, rng));
    s.positional = {SampleArg::T(self), IndexList({s.Add(FromValues(ScalarType::kInt64, {2}, {1, 1}))}),
                    SampleArg::T(s.Add(Random(ScalarType::kFloat8_e4m3fn, {2}, rng))), SampleArg::V(Value(true))};
    out.push_back(std::move(s));
  }
}

// masked_scatter(self, mask, source).
void MaskedScatterSamples(std::vector<Sample>& out, std::mt19937& rng) {
  for (ScalarType dt : kAllDtypes) {
    for (int layout = 0; layout < 3; ++layout) {
      Sample s = NewSample("masked_scatter", absl::StrCat(Name(dt), " layout ", layout));
      s.positional = {SampleArg::T(s.Add(LaidOut(Random(dt, {4, 5, 6}, rng), layout))),
                      SampleArg::T(s.Add(LaidOut(Mask({4, 5, 6}, rng, -1, layout == 1 ? ScalarType::kUInt8
                                                                                    : ScalarType::kBool),
                                             (layout + 1) % 3))),
                      SampleArg::T(s.Add(LaidOut(Random(dt, {5, 5, 6}, rng), (layout + 2) % 3)))};
      out.push_back(std::move(s));
    }
    // The mask broadcast over self, self over the mask.
    Sample a = NewSample("masked_scatter", Name(dt) + " mask broadcast");
    a.positional = {SampleArg::T(a.Add(Random(dt, {4, 5, 6}, rng))), SampleArg::T(a.Add(Mask({5, 1}, rng))),
                    SampleArg::T(a.Add(Random(dt, {120}, rng)))};
    out.push_back(std::move(a));
    Sample b = NewSample("masked_scatter", Name(dt) + " self broadcast");
    b.positional = {SampleArg::T(b.Add(Random(dt, {6}, rng))), SampleArg::T(b.Add(Mask({3, 6}, rng))),
                    SampleArg::T(b.Add(Random(dt, {18}, rng)))};
    out.push_back(std::move(b));
  }
  auto scatter = [&](std::string name, const Shape& self, Tensor mask, const Shape& source) {
    Sample s = NewSample("masked_scatter", std::move(name));
    s.positional = {SampleArg::T(s.Add(Random(ScalarType::kFloat32, self, rng))), SampleArg::T(s.Add(std::move(mask))),
                    SampleArg::T(s.Add(Random(ScalarType::kFloat32, source, rng)))};
    out.push_back(std::move(s));
  };
  scatter("source exactly long enough", {2, 3}, Mask({2, 3}, rng, 1), {6});
  scatter("source short", {2, 3}, Mask({2, 3}, rng, 1), {5});
  scatter("source short by a broadcast mask", {4, 6}, FromValues(ScalarType::kBool, {6}, {1, 0, 1, 0, 0, 1}), {11});
  scatter("nothing set, empty source", {2, 3}, Mask({2, 3}, rng, 0), {0});
  scatter("empty self", {0, 3}, Mask({3}, rng, 1), {4});
  scatter("0-dim", {}, Mask({}, rng, 1), {});
  scatter("shapes do not broadcast", {2, 3}, Mask({2}, rng), {6});
  scatter("float mask", {2, 3}, Random(ScalarType::kFloat32, {2, 3}, rng), {6});
}

// nonzero(self).
void NonzeroSamples(std::vector<Sample>& out, std::mt19937& rng) {
  for (ScalarType dt : kAllDtypes) {
    for (int layout = 0; layout < 3; ++layout) {
      Sample s = NewSample("nonzero", absl::StrCat(Name(dt), " layout ", layout));
      s.positional = {SampleArg::T(s.Add(LaidOut(SomeZeros(dt, {4, 5, 6}, rng), layout)))};
      out.push_back(std::move(s));
    }
    for (const Shape& sizes : {Shape{}, Shape{0, 3}, Shape{37}}) {
      Sample s = NewSample("nonzero", absl::StrCat(Name(dt), " ", ShapeToString(sizes)));
      s.positional = {SampleArg::T(s.Add(SomeZeros(dt, sizes, rng)))};
      out.push_back(std::move(s));
    }
  }
  auto one = [&](std::string name, Tensor t) {
    Sample s = NewSample("nonzero", std::move(name));
    s.positional = {SampleArg::T(s.Add(std::move(t)))};
    out.push_back(std::move(s));
  };
  one("0-dim zero", FromValues(ScalarType::kInt32, {}, {0}));
  one("0-dim nonzero", FromValues(ScalarType::kInt32, {}, {3}));
  one("all zero", FromValues(ScalarType::kFloat32, {2, 3}, {0, -0.0, 0, 0, 0, 0}));
  one("-0.0 and NaN", FromValues(ScalarType::kFloat16, {5}, {-0.0, std::nan(""), 0, 1, -1}));
  Tensor expanded = FromValues(ScalarType::kInt64, {3, 1}, {0, 2, 0});
  expanded.meta.sizes = {3, 4};
  expanded.meta.strides = {1, 0};
  one("stride-0", expanded);
}

// masked_select(self, mask).
void MaskedSelectSamples(std::vector<Sample>& out, std::mt19937& rng) {
  for (ScalarType dt : kAllDtypes) {
    for (int layout = 0; layout < 3; ++layout) {
      Sample s = NewSample("masked_select", absl::StrCat(Name(dt), " layout ", layout));
      s.positional = {SampleArg::T(s.Add(LaidOut(Random(dt, {4, 5, 6}, rng), layout))),
                      SampleArg::T(s.Add(LaidOut(Mask({4, 5, 6}, rng, -1, layout == 1 ? ScalarType::kUInt8
                                                                                    : ScalarType::kBool),
                                             (layout + 1) % 3)))};
      out.push_back(std::move(s));
    }
    Sample a = NewSample("masked_select", Name(dt) + " mask broadcast");
    a.positional = {SampleArg::T(a.Add(Random(dt, {4, 5, 6}, rng))), SampleArg::T(a.Add(Mask({5, 1}, rng)))};
    out.push_back(std::move(a));
    Sample b = NewSample("masked_select", Name(dt) + " self broadcast");
    b.positional = {SampleArg::T(b.Add(Random(dt, {6}, rng))), SampleArg::T(b.Add(Mask({3, 6}, rng)))};
    out.push_back(std::move(b));
  }
  auto select = [&](std::string name, const Shape& self, Tensor mask) {
    Sample s = NewSample("masked_select", std::move(name));
    s.positional = {SampleArg::T(s.Add(Random(ScalarType::kFloat32, self, rng))), SampleArg::T(s.Add(std::move(mask)))};
    out.push_back(std::move(s));
  };
  select("nothing set", {2, 3}, Mask({2, 3}, rng, 0));
  select("empty", {0, 3}, Mask({3}, rng, 1));
  select("0-dim", {}, Mask({}, rng, 1));
  select("0-dim mask over self", {2, 3}, Mask({}, rng, 1));
  select("shapes do not broadcast", {2, 3}, Mask({2}, rng));
  select("float mask", {2, 3}, Random(ScalarType::kFloat32, {2, 3}, rng));
}

}  // namespace

std::vector<Sample> AdvIndexSamplesFor(const std::string& op, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Sample> out;
  if (op == "index.Tensor") IndexTensorSamples(out, rng);
  if (op == "index_put") IndexPutSamples(out, rng);
  if (op == "masked_scatter") MaskedScatterSamples(out, rng);
  if (op == "nonzero") NonzeroSamples(out, rng);
  if (op == "masked_select") MaskedSelectSamples(out, rng);
  return out;
}

}  // namespace tensord::testing::cudatest
