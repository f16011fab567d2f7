// Samples of the nn ops (NnSamplesFor, harness.h): softmax.int and
// log_softmax.int (every floating dtype, dtype= conversions, every dim,
// permuted and spread layouts, 0-dim, empty, rows longer than a block,
// NaN / inf rows, large values), _fused_adam_ (float32 / float64, Adam,
// AdamW, maximize, dense permuted layouts, 0-dim, empty), the 2-D poolings
// and their backwards (3-D and 4-D, channels-last and strided inputs,
// stride, padding, dilation, ceil_mode, count_include_pad,
// divisor_override, empty batch, NaN, bad saved indices), conv2d and
// convolution_backward (stride, padding, dilation, groups, depthwise, 1x1,
// bias or none, unbatched, empty batch, channels-last and strided inputs
// and weights), and every error the CPU (or the meta function) raises.
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

std::string Name(ScalarType t) { return std::string(DtypeName(t)); }

Sample NewNnSample(const std::string& op, std::string label) {
  Sample s;
  s.op = op;
  s.label = std::move(label);
  return s;
}

constexpr ScalarType kFloats[] = {ScalarType::kFloat16, ScalarType::kBFloat16, ScalarType::kFloat32,
                                  ScalarType::kFloat64};
constexpr ScalarType kStdFloats[] = {ScalarType::kFloat32, ScalarType::kFloat64};

// 0 contiguous, 1 permuted (dim 0 innermost, offset 1), 2 spread,
// 3 channels-last (4-D only).
Tensor Lay(const Tensor& t, int layout) {
  if (layout == 1) return ReversedLayout(t, 1);
  if (layout == 2) return Spread(t, 3);
  if (layout == 3 && t.meta.dim() == 4) {
    const Shape& s = t.meta.sizes;
    return Restride(t, {s[1] * s[2] * s[3], 1, s[3] * s[1], s[1]}, 0);
  }
  return t;
}

// ---- softmax ----------------------------------------------------------------------

void SoftmaxSamples(const std::string& op, std::vector<Sample>& out, std::mt19937& rng) {
  for (ScalarType dt : kFloats) {
    for (int layout = 0; layout < 3; ++layout) {
      for (int64_t dim : {0, 1, 2, -1}) {
        Sample s = NewNnSample(op, absl::StrCat(Name(dt), " layout ", layout, " dim ", dim));
        s.positional = {SampleArg::T(s.Add(Lay(Random(dt, {3, 5, 4}, rng), layout))), SampleArg::V(Value(dim))};
        out.push_back(std::move(s));
      }
    }
    // Rows longer than a block, values whose exp overflows without the max
    // subtracted, a 0-dim self, empty tensors.
    Sample l = NewNnSample(op, Name(dt) + " long rows");
    l.positional = {SampleArg::T(l.Add(Random(dt, {3, 1000}, rng, -60, 60))), SampleArg::V(Value(int64_t{1}))};
    out.push_back(std::move(l));
    Sample c = NewNnSample(op, Name(dt) + " long column");
    c.positional = {SampleArg::T(c.Add(Random(dt, {600, 3}, rng, -8, 8))), SampleArg::V(Value(int64_t{0}))};
    out.push_back(std::move(c));
    Sample z = NewNnSample(op, Name(dt) + " 0-dim");
    z.positional = {SampleArg::T(z.Add(Random(dt, {}, rng))), SampleArg::V(Value(int64_t{-1}))};
    out.push_back(std::move(z));
    for (int64_t dim : {0, 1}) {
      Sample e = NewNnSample(op, absl::StrCat(Name(dt), " empty dim ", dim));
      e.positional = {SampleArg::T(e.Add(Random(dt, {0, 3}, rng))), SampleArg::V(Value(dim))};
      out.push_back(std::move(e));
    }
    // NaN, all -inf and +inf rows (each gives a NaN row), a finite row.
    const double inf = std::numeric_limits<double>::infinity();
    Sample sp = NewNnSample(op, Name(dt) + " special rows");
    sp.positional = {SampleArg::T(sp.Add(FromValues(dt, {4, 3}, {1, std::nan(""), 2, -inf, -inf, -inf, 0, inf, 1,
                                                                  -inf, 3, -1}))),
                     SampleArg::V(Value(int64_t{1}))};
    out.push_back(std::move(sp));
  }
  // dtype=: self converted first (integers too).
  const std::pair<ScalarType, ScalarType> conversions[] = {
      {ScalarType::kInt64, ScalarType::kFloat32},   {ScalarType::kFloat16, ScalarType::kFloat32},
      {ScalarType::kFloat32, ScalarType::kFloat16}, {ScalarType::kInt32, ScalarType::kFloat64},
      {ScalarType::kFloat64, ScalarType::kBFloat16}, {ScalarType::kFloat32, ScalarType::kFloat32},
  };
  for (const auto& [from, to] : conversions) {
    Sample s = NewNnSample(op, absl::StrCat(Name(from), " as ", Name(to)));
    s.positional = {SampleArg::T(s.Add(Lay(Random(from, {4, 6}, rng), 1))), SampleArg::V(Value(int64_t{1})),
                    SampleArg::V(Value(to))};
    out.push_back(std::move(s));
  }
  // Errors: non-floating and float8 compute dtypes, dims out of range.
  for (ScalarType dt : {ScalarType::kInt32, ScalarType::kBool, ScalarType::kFloat8_e4m3fn}) {
    Sample s = NewNnSample(op, Name(dt) + " refused");
    s.positional = {SampleArg::T(s.Add(Random(dt, {2, 3}, rng))), SampleArg::V(Value(int64_t{1}))};
    out.push_back(std::move(s));
  }
  Sample to8 = NewNnSample(op, "dtype float8 refused");
  to8.positional = {SampleArg::T(to8.Add(Random(ScalarType::kFloat32, {2, 3}, rng))), SampleArg::V(Value(int64_t{1})),
                    SampleArg::V(Value(ScalarType::kFloat8_e5m2))};
  out.push_back(std::move(to8));
  for (int64_t dim : {2, -3}) {
    Sample s = NewNnSample(op, absl::StrCat("dim ", dim, " out of range"));
    s.positional = {SampleArg::T(s.Add(Random(ScalarType::kFloat32, {2, 3}, rng))), SampleArg::V(Value(dim))};
    out.push_back(std::move(s));
  }
  Sample z = NewNnSample(op, "0-dim dim 1 out of range");
  z.positional = {SampleArg::T(z.Add(Random(ScalarType::kFloat32, {}, rng))), SampleArg::V(Value(int64_t{1}))};
  out.push_back(std::move(z));
}

// ---- fused Adam -------------------------------------------------------------------

struct AdamVariant {
  const char* name;
  double lr, beta1, beta2, weight_decay, eps;
  int64_t step;
  bool maximize, decoupled;
};
constexpr AdamVariant kAdamVariants[] = {
    {"adam", 1e-3, 0.9, 0.999, 0, 1e-8, 1, false, false},
    {"adam wd", 3e-2, 0.8, 0.99, 0.1, 1e-6, 7, false, false},
    {"adamw wd", 1e-2, 0.9, 0.999, 0.05, 1e-8, 3, false, true},
    {"adamw no wd", 1e-2, 0.9, 0.999, 0, 1e-8, 2, false, true},
    {"maximize adam wd", 1e-3, 0.5, 0.9, 0.2, 1e-3, 100, true, false},
    {"maximize adamw", 0.1, 0.9, 0.999, 0.01, 1e-8, 12, true, true},
};

Sample AdamSample(ScalarType dt, const Shape& sizes, int layout, const AdamVariant& v, std::mt19937& rng,
                  const std::string& extra = "") {
  Sample s = NewNnSample("_fused_adam_", absl::StrCat(Name(dt), " ", ShapeToString(sizes), " layout ", layout, " ",
                                                      v.name, extra));
  s.positional = {SampleArg::T(s.Add(Lay(Random(dt, sizes, rng), layout))),
                  SampleArg::T(s.Add(Lay(Random(dt, sizes, rng, -2, 2), layout))),
                  SampleArg::T(s.Add(Lay(Random(dt, sizes, rng, -1, 1), layout))),
                  SampleArg::T(s.Add(Lay(Random(dt, sizes, rng, 0, 3), layout)))};
  s.kwargs = {{"lr", SampleArg::V(Value(v.lr))},
              {"beta1", SampleArg::V(Value(v.beta1))},
              {"beta2", SampleArg::V(Value(v.beta2))},
              {"weight_decay", SampleArg::V(Value(v.weight_decay))},
              {"eps", SampleArg::V(Value(v.eps))},
              {"step", SampleArg::V(Value(v.step))},
              {"maximize", SampleArg::V(Value(v.maximize))},
              {"decoupled_weight_decay", SampleArg::V(Value(v.decoupled))}};
  return s;
}

void AdamSamples(std::vector<Sample>& out, std::mt19937& rng) {
  for (ScalarType dt : kStdFloats) {
    for (const AdamVariant& v : kAdamVariants) {
      for (int layout = 0; layout < 2; ++layout) out.push_back(AdamSample(dt, {4, 5, 3}, layout, v, rng));
      out.push_back(AdamSample(dt, {1027}, 0, v, rng));
    }
    out.push_back(AdamSample(dt, {}, 0, kAdamVariants[1], rng));
    out.push_back(AdamSample(dt, {0, 3}, 0, kAdamVariants[2], rng));
  }
  // The CPU's error (step < 1) and the meta function's (dtype, layouts).
  AdamVariant bad = kAdamVariants[0];
  bad.step = 0;
  out.push_back(AdamSample(ScalarType::kFloat32, {3}, 0, bad, rng, " step 0"));
  out.push_back(AdamSample(ScalarType::kFloat16, {3}, 0, kAdamVariants[0], rng, " refused"));
  out.push_back(AdamSample(ScalarType::kFloat32, {3, 4}, 2, kAdamVariants[0], rng, " not dense"));
  Sample mixed = AdamSample(ScalarType::kFloat32, {3, 4}, 0, kAdamVariants[0], rng, " mixed layouts");
  mixed.tensors[1] = ReversedLayout(mixed.tensors[1], 0);
  out.push_back(std::move(mixed));
}

// ---- pooling -----------------------------------------------------------------------

struct PoolParams {
  const char* name;
  Shape k, s, p, d;
  bool ceil_mode;
};
const PoolParams kMaxPools[] = {
    {"k3 s2 p1", {3}, {2}, {1}, {1}, false},
    {"k3 s1 p1 (overlapping)", {3, 3}, {1, 1}, {1, 1}, {1, 1}, false},
    {"k(3,2) s(1,2) p(1,0) d(2,1) ceil", {3, 2}, {1, 2}, {1, 0}, {2, 1}, true},
    {"k2 default stride ceil", {2}, {}, {0}, {1}, true},
    {"k(2,4) s(3,1) p(1,2) d(1,2)", {2, 4}, {3, 1}, {1, 2}, {1, 2}, false},
    {"k3 s2 p1 ceil", {3}, {2}, {1}, {1}, true},
};

std::vector<SampleArg> MaxPoolArgs(const PoolParams& q) {
  return {SampleArg::V(Value(q.k)), SampleArg::V(Value(q.s)), SampleArg::V(Value(q.p)), SampleArg::V(Value(q.d)),
          SampleArg::V(Value(q.ceil_mode))};
}

// The forward's outputs on the CPU (for a backward's grad_output sizes and
// saved indices); empty when it fails.
std::vector<Tensor> CpuForward(const Sample& fwd) {
  HostMemory cpu(kCPU);
  SampleResult r = RunSample(fwd, CpuRegistry(), DeviceType::kCPU, cpu);
  if (!r.status.ok()) return {};
  return r.outputs;
}

void MaxPoolSamples(const std::string& op, std::vector<Sample>& out, std::mt19937& rng) {
  const bool backward = op == "max_pool2d_with_indices_backward";
  const Shape shapes[] = {{2, 3, 7, 6}, {3, 7, 6}, {0, 2, 5, 5}};
  for (ScalarType dt : kStdFloats) {
    for (const Shape& shape : shapes) {
      for (int layout = 0; layout < 4; ++layout) {
        if (layout == 3 && shape.size() != 4) continue;
        for (const PoolParams& q : kMaxPools) {
          const std::string label = absl::StrCat(Name(dt), " ", ShapeToString(shape), " layout ", layout, " ", q.name);
          Sample f = NewNnSample("max_pool2d_with_indices", label);
          Tensor x = Random(dt, shape, rng);
          if (layout == 0 && shape[0] > 0) {
            // Ties (the first wins) and NaN (wins, its index kept).
            std::vector<double> v = Values(x);
            v[3] = v[4] = 5;
            v[20] = std::nan("");
            x = FromValues(dt, shape, v);
          }
          f.positional = {SampleArg::T(f.Add(Lay(x, layout)))};
          for (const SampleArg& a : MaxPoolArgs(q)) f.positional.push_back(a);
          if (!backward) {
            out.push_back(std::move(f));
            continue;
          }
          const std::vector<Tensor> fo = CpuForward(f);
          if (fo.size() != 2) continue;  // the forward's errors are checked by its own samples
          Sample b = NewNnSample(op, label);
          const int g = b.Add(Lay(Random(dt, fo[0].meta.sizes, rng), (layout + 1) % 4));
          const int self = b.Add(Lay(x, layout));
          const int idx = b.Add(Lay(FromValues(ScalarType::kInt64, fo[1].meta.sizes, Values(fo[1])), 2 - layout % 3));
          b.positional = {SampleArg::T(g), SampleArg::T(self)};
          for (const SampleArg& a : MaxPoolArgs(q)) b.positional.push_back(a);
          b.positional.push_back(SampleArg::T(idx));
          out.push_back(std::move(b));
        }
      }
    }
  }
  if (backward) {
    // Saved indices outside their plane (7 x 6 = 42 elements; k3 s2 p1
    // gives 4 x 3 outputs).
    for (int64_t bad : {42, -1}) {
      Sample b = NewNnSample(op, absl::StrCat("bad index ", bad));
      const Tensor gy = Random(ScalarType::kFloat32, {2, 3, 4, 3}, rng);
      std::vector<double> iv(72, 0);
      iv[31] = static_cast<double>(bad);
      b.positional = {SampleArg::T(b.Add(gy)), SampleArg::T(b.Add(Random(ScalarType::kFloat32, {2, 3, 7, 6}, rng)))};
      for (const SampleArg& a : MaxPoolArgs(kMaxPools[0])) b.positional.push_back(a);
      b.positional.push_back(SampleArg::T(b.Add(FromValues(ScalarType::kInt64, {2, 3, 4, 3}, iv))));
      out.push_back(std::move(b));
    }
    return;
  }
  // The meta function's errors: padding over half the kernel, a float16
  // input, an output too small, a 2-D input.
  const std::pair<const char*, PoolParams> errors[] = {
      {"pad over half the kernel", {"", {2}, {1}, {2}, {1}, false}},
      {"too small", {"", {9}, {1}, {0}, {1}, false}},
      {"zero stride", {"", {2}, {0}, {0}, {1}, false}},
  };
  for (const auto& [name, q] : errors) {
    Sample s = NewNnSample(op, name);
    s.positional = {SampleArg::T(s.Add(Random(ScalarType::kFloat32, {1, 2, 5, 5}, rng)))};
    for (const SampleArg& a : MaxPoolArgs(q)) s.positional.push_back(a);
    out.push_back(std::move(s));
  }
  for (const Shape& shape : {Shape{2, 5, 5}, Shape{5, 5}}) {
    Sample s = NewNnSample(op, absl::StrCat(ShapeToString(shape), shape.size() == 3 ? " float16 refused" : " 2-D"));
    s.positional = {SampleArg::T(s.Add(Random(shape.size() == 3 ? ScalarType::kFloat16 : ScalarType::kFloat32, shape, rng)))};
    for (const SampleArg& a : MaxPoolArgs(kMaxPools[0])) s.positional.push_back(a);
    out.push_back(std::move(s));
  }
}

struct AvgParams {
  const char* name;
  Shape k, s, p;
  bool ceil_mode, count_include_pad;
  Value divisor;
};

std::vector<AvgParams> AvgPools() {
  std::vector<AvgParams> v;
  for (bool ceil : {false, true}) {
    for (bool cip : {true, false}) {
      v.push_back({"k3 s2 p1", {3}, {2}, {1}, ceil, cip, Value()});
      v.push_back({"k(2,3) s(1,2) p(1,1)", {2, 3}, {1, 2}, {1, 1}, ceil, cip, Value()});
    }
  }
  v.push_back({"k3 s2 p1 divisor 5", {3}, {2}, {1}, true, true, Value(int64_t{5})});
  v.push_back({"k2 default stride divisor -3", {2}, {}, {0}, false, false, Value(int64_t{-3})});
  v.push_back({"k4 s3 p2 ceil", {4}, {3}, {2}, true, false, Value()});
  return v;
}

std::vector<SampleArg> AvgArgs(const AvgParams& q) {
  return {SampleArg::V(Value(q.k)),         SampleArg::V(Value(q.s)),
          SampleArg::V(Value(q.p)),         SampleArg::V(Value(q.ceil_mode)),
          SampleArg::V(Value(q.count_include_pad)), SampleArg::V(q.divisor)};
}

void AvgPoolSamples(const std::string& op, std::vector<Sample>& out, std::mt19937& rng) {
  const bool backward = op == "avg_pool2d_backward";
  const Shape shapes[] = {{2, 3, 7, 6}, {3, 7, 6}, {0, 2, 5, 5}};
  for (ScalarType dt : kStdFloats) {
    for (const Shape& shape : shapes) {
      for (int layout = 0; layout < 4; ++layout) {
        if (layout == 3 && shape.size() != 4) continue;
        for (const AvgParams& q : AvgPools()) {
          const std::string label = absl::StrCat(Name(dt), " ", ShapeToString(shape), " layout ", layout, " ", q.name,
                                                 q.ceil_mode ? " ceil" : "", q.count_include_pad ? "" : " no pad count");
          Sample f = NewNnSample("avg_pool2d", label);
          const Tensor x = Lay(Random(dt, shape, rng), layout);
          f.positional = {SampleArg::T(f.Add(x))};
          for (const SampleArg& a : AvgArgs(q)) f.positional.push_back(a);
          if (!backward) {
            out.push_back(std::move(f));
            continue;
          }
          const std::vector<Tensor> fo = CpuForward(f);
          if (fo.size() != 1) continue;
          Sample b = NewNnSample(op, label);
          b.positional = {SampleArg::T(b.Add(Lay(Random(dt, fo[0].meta.sizes, rng), (layout + 1) % 4))),
                          SampleArg::T(b.Add(x))};
          for (const SampleArg& a : AvgArgs(q)) b.positional.push_back(a);
          out.push_back(std::move(b));
        }
      }
    }
  }
  // The meta function's errors.
  const std::pair<const char*, AvgParams> errors[] = {
      {"pad over half the kernel", {"", {2}, {1}, {2}, false, true, Value()}},
      {"divisor 0", {"", {2}, {1}, {0}, false, true, Value(int64_t{0})}},
      {"too small", {"", {7}, {1}, {0}, false, true, Value()}},
  };
  for (const auto& [name, q] : errors) {
    Sample s = NewNnSample(op, name);
    const Tensor x = Random(ScalarType::kFloat32, {1, 2, 5, 5}, rng);
    if (backward) s.positional.push_back(SampleArg::T(s.Add(Random(ScalarType::kFloat32, {1, 2, 4, 4}, rng))));
    s.positional.push_back(SampleArg::T(s.Add(x)));
    for (const SampleArg& a : AvgArgs(q)) s.positional.push_back(a);
    out.push_back(std::move(s));
  }
  Sample h = NewNnSample(op, "float16 refused");
  if (backward) h.positional.push_back(SampleArg::T(h.Add(Random(ScalarType::kFloat16, {2, 2, 2}, rng))));
  h.positional.push_back(SampleArg::T(h.Add(Random(ScalarType::kFloat16, {2, 5, 5}, rng))));
  for (const SampleArg& a : AvgArgs(AvgPools()[0])) h.positional.push_back(a);
  out.push_back(std::move(h));
  if (backward) {
    Sample g = NewNnSample(op, "grad_output of the wrong size");
    g.positional = {SampleArg::T(g.Add(Random(ScalarType::kFloat32, {2, 3, 3}, rng))),
                    SampleArg::T(g.Add(Random(ScalarType::kFloat32, {2, 5, 5}, rng)))};
    for (const SampleArg& a : AvgArgs(AvgPools()[0])) g.positional.push_back(a);
    out.push_back(std::move(g));
  }
}

// ---- convolution -------------------------------------------------------------------

// Values in [-1, 1]: the CPU's float32 GEMMs (OpenBLAS) and the host
// GEMM (double) then agree within float32's tolerance over these sums.
struct ConvParams {
  const char* name;
  Shape input, weight;
  bool bias;
  Shape s, p, d;
  int64_t groups;
};
const ConvParams kConvs[] = {
    {"3x2 bias", {2, 4, 7, 6}, {6, 4, 3, 2}, true, {1}, {0}, {1}, 1},
    {"s2 p1 groups 2", {2, 4, 7, 6}, {6, 2, 3, 3}, false, {2}, {1}, {1}, 2},
    {"s(2,1) p(2,1) d(2,1) bias", {3, 3, 8, 7}, {5, 3, 3, 2}, true, {2, 1}, {2, 1}, {2, 1}, 1},
    {"1x1 bias", {2, 4, 5, 3}, {3, 4, 1, 1}, true, {1}, {0}, {1}, 1},
    {"1x1 groups 2", {2, 4, 5, 3}, {4, 2, 1, 1}, false, {1}, {0}, {1}, 2},
    {"1x1 s2", {2, 4, 5, 3}, {3, 4, 1, 1}, true, {2}, {0}, {1}, 1},
    {"depthwise 3x3 p1 bias", {2, 4, 6, 6}, {8, 1, 3, 3}, true, {1}, {1}, {1}, 4},
    {"unbatched", {4, 6, 5}, {2, 4, 2, 3}, true, {1, 2}, {1, 0}, {1}, 1},
    {"empty batch", {0, 4, 5, 5}, {2, 4, 3, 3}, true, {1}, {0}, {1}, 1},
    {"kernel as large as the padded input", {1, 2, 3, 3}, {2, 2, 5, 5}, true, {1}, {1}, {1}, 1},
};

// conv2d's arguments after input and weight.
void AddConvArgs(Sample& s, const ConvParams& q, ScalarType dt, std::mt19937& rng, int bias_layout) {
  s.positional.push_back(q.bias ? SampleArg::T(s.Add(Lay(Random(dt, {q.weight[0]}, rng), bias_layout)))
                                : SampleArg::V(Value()));
  for (const Shape& v : {q.s, q.p, q.d}) s.positional.push_back(SampleArg::V(Value(v)));
  s.positional.push_back(SampleArg::V(Value(q.groups)));
}

void ConvSamples(const std::string& op, std::vector<Sample>& out, std::mt19937& rng) {
  const bool backward = op == "convolution_backward";
  for (ScalarType dt : kStdFloats) {
    for (const ConvParams& q : kConvs) {
      for (int layout = 0; layout < 4; ++layout) {
        if (layout == 3 && q.input.size() != 4) continue;
        if (backward && q.input.size() != 4) continue;  // the backward takes 4-D inputs
        const std::string label = absl::StrCat(Name(dt), " ", q.name, " layout ", layout);
        Sample f = NewNnSample("conv2d", label);
        const Tensor x = Lay(Random(dt, q.input, rng, -1, 1), layout);
        const Tensor w = Lay(Random(dt, q.weight, rng, -1, 1), layout == 0 ? 0 : 4 - layout);
        f.positional = {SampleArg::T(f.Add(x)), SampleArg::T(f.Add(w))};
        AddConvArgs(f, q, dt, rng, layout == 2 ? 2 : 0);
        if (!backward) {
          out.push_back(std::move(f));
          continue;
        }
        const std::vector<Tensor> fo = CpuForward(f);
        if (fo.size() != 1) continue;
        Sample b = NewNnSample(op, label);
        b.positional = {SampleArg::T(b.Add(Lay(Random(dt, fo[0].meta.sizes, rng, -1, 1), (layout + 1) % 4))),
                        SampleArg::T(b.Add(x)), SampleArg::T(b.Add(w)),
                        SampleArg::V(q.bias ? Value(Shape{q.weight[0]}) : Value())};
        for (const Shape& v : {q.s, q.p, q.d}) b.positional.push_back(SampleArg::V(Value(v)));
        b.positional.push_back(SampleArg::V(Value(false)));
        b.positional.push_back(SampleArg::V(Value(Shape{0, 0})));
        b.positional.push_back(SampleArg::V(Value(q.groups)));
        out.push_back(std::move(b));
      }
    }
  }
  // Errors (the meta function's): a float16 input, groups that do not
  // divide the channels, a kernel larger than the padded input, a 2-D
  // input, mixed dtypes; the backward's transposed and output_padding.
  struct Bad {
    const char* name;
    ScalarType dt, wdt;
    Shape input, weight;
    Shape p;
    int64_t groups;
  };
  const Bad bad[] = {
      {"float16 refused", ScalarType::kFloat16, ScalarType::kFloat16, {1, 2, 5, 5}, {2, 2, 3, 3}, {0}, 1},
      {"groups 3", ScalarType::kFloat32, ScalarType::kFloat32, {1, 4, 5, 5}, {4, 2, 3, 3}, {0}, 3},
      {"kernel larger than the padded input", ScalarType::kFloat32, ScalarType::kFloat32, {1, 2, 3, 3},
       {2, 2, 6, 6}, {1}, 1},
      {"mixed dtypes", ScalarType::kFloat32, ScalarType::kFloat64, {1, 2, 5, 5}, {2, 2, 3, 3}, {0}, 1},
      {"2-D input", ScalarType::kFloat32, ScalarType::kFloat32, {5, 5}, {2, 2, 3, 3}, {0}, 1},
  };
  for (const Bad& e : bad) {
    Sample s = NewNnSample(op, e.name);
    const int x = s.Add(Random(e.dt, e.input, rng)), w = s.Add(Random(e.wdt, e.weight, rng));
    if (backward) {
      s.positional = {SampleArg::T(s.Add(Random(e.dt, {1, 2, 3, 3}, rng))), SampleArg::T(x), SampleArg::T(w),
                      SampleArg::V(Value()), SampleArg::V(Value(Shape{1})), SampleArg::V(Value(e.p)),
                      SampleArg::V(Value(Shape{1})), SampleArg::V(Value(false)), SampleArg::V(Value(Shape{0, 0})),
                      SampleArg::V(Value(e.groups))};
    } else {
      s.positional = {SampleArg::T(x), SampleArg::T(w), SampleArg::V(Value()), SampleArg::V(Value(Shape{1})),
                      SampleArg::V(Value(e.p)), SampleArg::V(Value(Shape{1})), SampleArg::V(Value(e.groups))};
    }
    out.push_back(std::move(s));
  }
  if (backward) {
    for (int variant = 0; variant < 3; ++variant) {
      Sample s = NewNnSample(op, variant == 0 ? "transposed" : variant == 1 ? "output_padding" : "grad of the wrong size");
      s.positional = {SampleArg::T(s.Add(Random(ScalarType::kFloat32, {1, 2, variant == 2 ? 4 : 3, 3}, rng))),
                      SampleArg::T(s.Add(Random(ScalarType::kFloat32, {1, 2, 5, 5}, rng))),
                      SampleArg::T(s.Add(Random(ScalarType::kFloat32, {2, 2, 3, 3}, rng))),
                      SampleArg::V(Value(Shape{2})), SampleArg::V(Value(Shape{1})), SampleArg::V(Value(Shape{0})),
                      SampleArg::V(Value(Shape{1})), SampleArg::V(Value(variant == 0)),
                      SampleArg::V(Value(variant == 1 ? Shape{1, 0} : Shape{0, 0})), SampleArg::V(Value(int64_t{1}))};
      out.push_back(std::move(s));
    }
  }
}

}  // namespace

std::vector<Sample> NnSamplesFor(const std::string& op, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Sample> out;
  if (op == "softmax.int" || op == "log_softmax.int") SoftmaxSamples(op, out, rng);
  if (op == "_fused_adam_") AdamSamples(out, rng);
  if (op == "max_pool2d_with_indices" || op == "max_pool2d_with_indices_backward") MaxPoolSamples(op, out, rng);
  if (op == "avg_pool2d" || op == "avg_pool2d_backward") AvgPoolSamples(op, out, rng);
  if (op == "conv2d" || op == "convolution_backward") ConvSamples(op, out, rng);
  return out;
}

}  // namespace tensord::testing::cudatest
