// The CUDA random kernels (random_kernels.h, random.cuh) replayed on the
// host: Philox4x32-10 against Random123's known answers, each element's
// value from its own counter (so the launch shape and the output's strides
// do not change it), the generator's part (same seed, same values; each
// call draws a new key, so two calls differ), the ranges
// and dtypes, the CPU kernels' errors, and the distributions (mean,
// variance and a Kolmogorov-Smirnov bound over 10^5 draws). Every seed is
// fixed, so these tests are deterministic. The GPU runs the same
// per-element code (cuda_kernels_tests checks its ranges).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "../../../kernels/cuda/philox.h"
#include "../../../kernels/cuda/random.cuh"
#include "../../../kernels/cuda/random_kernels.h"
#include "../kernel_test_util.h"
#include "gtest/gtest.h"
#include "host_launch.h"
#include "tensord/meta/schema.h"

namespace tensord::testing::cudatest {
namespace {

using cuda::HostRandomEngine;

// A contiguous tensor of `sizes` (or `strides`) on fresh zeroed host storage.
Tensor Fresh(ScalarType dt, Shape sizes, Shape strides = {}, int64_t offset = 0) {
  Tensor t;
  t.meta.sizes = std::move(sizes);
  t.meta.strides = strides.empty() ? ContiguousStrides(t.meta.sizes) : std::move(strides);
  t.meta.dtype = dt;
  t.meta.storage_offset = offset;
  t.meta.device = Device{DeviceType::kCUDA, 0};
  t.storage = std::make_shared<std::vector<uint64_t>>(
      static_cast<size_t>((t.meta.StorageBytesNeeded().value() + 7) / 8 + 1));
  return t;
}

// Runs `fn` (a random op's emulated CUDA kernel) for `op` with `positional`
// and `kwargs`, writing `out`, drawing from `gen` (null: no generator).
absl::Status RunKernel(KernelFn fn, const std::string& op, std::vector<Value> positional,
                       std::vector<std::pair<std::string, Value>> kwargs, Tensor& out, Generator* gen) {
  const OpEntry* e = OpTable::Get().Find(op);
  if (e == nullptr) return absl::NotFoundError(op);
  absl::StatusOr<std::vector<Value>> args = BindArgs(e->schema, std::move(positional), std::move(kwargs));
  if (!args.ok()) return args.status();
  KernelContext ctx;
  ctx.op = e;
  ctx.args = *args;
  ctx.device = out.meta.device;
  ctx.input_base = [](const TensorMeta*) -> char* { return nullptr; };
  ctx.generator = gen;
  ctx.outputs = {TensorRef{out.base(), &out.meta}};
  return fn(ctx);
}

// rand(sizes, dtype) into `out` (its sizes) on the emulated device.
absl::Status Rand(Tensor& out, Generator& g) {
  return RunKernel(cuda::ew::Rand<HostLaunch>, "rand", {Value(out.meta.sizes)}, {{"dtype", Value(out.meta.dtype)}},
                   out, &g);
}
absl::Status Randn(Tensor& out, Generator& g) {
  return RunKernel(cuda::ew::Randn<HostLaunch>, "randn", {Value(out.meta.sizes)}, {{"dtype", Value(out.meta.dtype)}},
                   out, &g);
}
absl::Status Uniform(Tensor& out, Generator& g, double from, double to) {
  return RunKernel(cuda::ew::RandomInPlace<HostLaunch, false>, "uniform_", {Value(&out.meta), Value(from), Value(to)},
                   {}, out, &g);
}
absl::Status Normal(Tensor& out, Generator& g, double mean, double std) {
  return RunKernel(cuda::ew::RandomInPlace<HostLaunch, true>, "normal_", {Value(&out.meta), Value(mean), Value(std)},
                   {}, out, &g);
}
absl::Status Randint(Tensor& out, Generator& g, int64_t low, int64_t high) {
  return RunKernel(cuda::ew::RandintLow<HostLaunch>, "randint.low", {Value(low), Value(high), Value(out.meta.sizes)},
                   {{"dtype", Value(out.meta.dtype)}}, out, &g);
}

std::vector<uint8_t> Bytes(const Tensor& t) {
  const int64_t n = t.meta.StorageBytesNeeded().value();
  return std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(t.storage->data()),
                              reinterpret_cast<const uint8_t*>(t.storage->data()) + n);
}

// ---- Philox ----------------------------------------------------------------------

// Random123's kat_vectors for philox4x32 with 10 rounds: counter, key, result.
TEST(PhiloxTest, MatchesRandom123KnownAnswers) {
  struct Kat {
    uint32_t ctr[4], key[2], want[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    const cuda::Philox4x32 got = cuda::Philox4x32_10(cuda::Philox4x32{{k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3]}},
                                                     cuda::PhiloxKey2x32{{k.key[0], k.key[1]}});
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i], k.want[i]) << "word " << i << " of counter " << std::hex << k.ctr[0];
  }
}

TEST(PhiloxTest, CounterAndKeyLayout) {
  const cuda::Philox4x32 c = cuda::PhiloxCounter(0x0123456789abcdefull, 0xfedcba9876543210ull);
  EXPECT_EQ(c[0], 0x89abcdefu);
  EXPECT_EQ(c[1], 0x01234567u);
  EXPECT_EQ(c[2], 0x76543210u);
  EXPECT_EQ(c[3], 0xfedcba98u);
  const cuda::PhiloxKey2x32 k = cuda::PhiloxKey(0x0123456789abcdefull);
  EXPECT_EQ(k.v[0], 0x89abcdefu);
  EXPECT_EQ(k.v[1], 0x01234567u);
}

TEST(PhiloxTest, UniformsUseTheTopBitsAndStayInTheirIntervals) {
  EXPECT_EQ(cuda::UniformFloat(0), 0.0f);
  EXPECT_EQ(cuda::UniformFloat(0xffffffffu), 1.0f - 0x1p-24f);
  EXPECT_EQ(cuda::UniformFloat(0x000000ffu), 0.0f);  // the low 8 bits are not used
  EXPECT_EQ(cuda::UniformFloatOpenZero(0), 0x1p-24f);
  EXPECT_EQ(cuda::UniformFloatOpenZero(0xffffffffu), 1.0f);
  EXPECT_EQ(cuda::UniformDouble(0, 0), 0.0);
  EXPECT_EQ(cuda::UniformDouble(0xffffffffu, 0xffffffffu), 1.0 - 0x1p-53);
  EXPECT_EQ(cuda::UniformDoubleOpenZero(0, 0), 0x1p-53);
  EXPECT_EQ(cuda::UniformDoubleOpenZero(0xffffffffu, 0xffffffffu), 1.0);
  EXPECT_EQ(cuda::RandintValue(cuda::Philox4x32{{17, 0, 0, 0}}, -3, 5), -3 + 2);
  // 2^32 and more: the 64-bit word w0:w1.
  EXPECT_EQ(cuda::RandintValue(cuda::Philox4x32{{1, 5, 0, 0}}, 0, uint64_t{1} << 40), (int64_t{1} << 32) + 5);
}

// ---- the generator's state -----------------------------------------------------

// Element i of rand is the replay of its own Philox block: the key is the
// next 64-bit draw of the generator's engine, the counter (0, i).
TEST(CudaRandomTest, EachElementIsItsCountersDraw) {
  Generator g;
  g.engine.seed(1234);
  std::mt19937_64 engine(1234);
  const uint64_t key = engine();
  Tensor t = Fresh(ScalarType::kFloat32, {3, 50});
  ASSERT_TRUE(Rand(t, g).ok());
  EXPECT_EQ(g.engine, engine) << "the call drew one key";
  const std::vector<double> v = Values(t);
  for (uint64_t i = 0; i < v.size(); ++i) {
    const cuda::Philox4x32 w = cuda::Philox4x32_10(cuda::PhiloxCounter(0, i), cuda::PhiloxKey(key));
    ASSERT_EQ(v[i], static_cast<double>(cuda::UniformFloat(w[0]))) << i;
  }
}

TEST(CudaRandomTest, SameSeedGivesTheSameValuesAndCallsDiffer) {
  Generator a, b, c;
  a.engine.seed(42);
  b.engine.seed(42);
  c.engine.seed(43);
  Tensor ta = Fresh(ScalarType::kFloat32, {1000}), tb = Fresh(ScalarType::kFloat32, {1000}),
         tc = Fresh(ScalarType::kFloat32, {1000});
  ASSERT_TRUE(Rand(ta, a).ok());
  ASSERT_TRUE(Rand(tb, b).ok());
  ASSERT_TRUE(Rand(tc, c).ok());
  EXPECT_EQ(Bytes(ta), Bytes(tb));
  const std::vector<double> va = Values(ta), vc = Values(tc);
  int same = 0;
  for (size_t i = 0; i < va.size(); ++i) same += va[i] == vc[i];
  EXPECT_LT(same, 5) << "seeds 42 and 43 drew alike";
  // A second call from the same generator draws new numbers.
  Tensor ta2 = Fresh(ScalarType::kFloat32, {1000});
  ASSERT_TRUE(Rand(ta2, a).ok());
  const std::vector<double> va2 = Values(ta2);
  same = 0;
  for (size_t i = 0; i < va.size(); ++i) same += va[i] == va2[i];
  EXPECT_LT(same, 5) << "two calls drew alike";
  // An empty output draws nothing: the generator is left as it was.
  const std::mt19937_64 before = a.engine;
  Tensor empty = Fresh(ScalarType::kFloat32, {0, 4});
  ASSERT_TRUE(Rand(empty, a).ok());
  EXPECT_EQ(a.engine, before);
  // Reseeding starts over.
  a.engine.seed(42);
  Tensor again = Fresh(ScalarType::kFloat32, {1000});
  ASSERT_TRUE(Rand(again, a).ok());
  EXPECT_EQ(Bytes(again), Bytes(ta));
}

// The launch shape (blocks, threads, 32- or 64-bit offsets) and the
// output's layout change nothing: each element's value depends on its
// row-major index alone.
TEST(CudaRandomTest, ValuesDoNotDependOnTheLaunchShapeOrTheLayout) {
  struct Case {
    const char* name;
    ScalarType dt;
    std::function<absl::Status(Tensor&, Generator&)> draw;
  };
  const Case cases[] = {
      {"rand float32", ScalarType::kFloat32, [](Tensor& t, Generator& g) { return Rand(t, g); }},
      {"randn float64", ScalarType::kFloat64, [](Tensor& t, Generator& g) { return Randn(t, g); }},
      {"uniform_ float16", ScalarType::kFloat16, [](Tensor& t, Generator& g) { return Uniform(t, g, -2, 3); }},
      {"normal_ bfloat16", ScalarType::kBFloat16, [](Tensor& t, Generator& g) { return Normal(t, g, 1, 2); }},
      {"randint int64 past 2^32", ScalarType::kInt64,
       [](Tensor& t, Generator& g) { return Randint(t, g, -(int64_t{1} << 50), int64_t{1} << 50); }},
      {"randint int8", ScalarType::kInt8, [](Tensor& t, Generator& g) { return Randint(t, g, -100, 100); }},
  };
  const std::pair<int64_t, int64_t> shapes[] = {{1, 1}, {3, 7}, {1000, 32}, {2, 256}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Generator g0;
    g0.engine.seed(99);
    Tensor want = Fresh(c.dt, {37, 29});
    ASSERT_TRUE(c.draw(want, g0).ok());
    const std::vector<double> wv = Values(want);
    for (const auto& [blocks, threads] : shapes) {
      for (bool wide : {false, true}) {
        HostRandomEngine::blocks = blocks;
        HostRandomEngine::threads = threads;
        HostRandomEngine::force_64bit = wide;
        Generator g;
        g.engine.seed(99);
        Tensor got = Fresh(c.dt, {37, 29});
        const absl::Status s = c.draw(got, g);
        HostRandomEngine::blocks = HostRandomEngine::threads = 0;
        HostRandomEngine::force_64bit = false;
        ASSERT_TRUE(s.ok()) << s;
        EXPECT_EQ(Bytes(got), Bytes(want)) << blocks << " blocks of " << threads << (wide ? ", 64-bit" : "");
      }
    }
    // A transposed, offset output and a spread one: the same logical values.
    for (const Tensor& layout : {Fresh(c.dt, {37, 29}, {1, 37}, 5), Fresh(c.dt, {37, 29}, {29 * 3, 3}, 2)}) {
      Tensor got = layout;
      Generator g;
      g.engine.seed(99);
      ASSERT_TRUE(c.draw(got, g).ok());
      EXPECT_EQ(Values(got), wv) << got.meta.ToString();
    }
  }
}

// ---- ranges, dtypes and errors ---------------------------------------------------

TEST(CudaRandomTest, RandintCoversItsRangeInEveryDtype) {
  const ScalarType dtypes[] = {ScalarType::kBool,    ScalarType::kUInt8,   ScalarType::kInt8,
                               ScalarType::kInt16,   ScalarType::kInt32,   ScalarType::kInt64,
                               ScalarType::kFloat16, ScalarType::kBFloat16, ScalarType::kFloat32,
                               ScalarType::kFloat64};
  for (ScalarType dt : dtypes) {
    const int64_t low = dt == ScalarType::kBool || dt == ScalarType::kUInt8 ? 0 : -3;
    const int64_t high = dt == ScalarType::kBool ? 2 : 5;
    Generator g;
    g.engine.seed(5);
    Tensor t = Fresh(dt, {2000});
    ASSERT_TRUE(Randint(t, g, low, high).ok()) << DtypeName(dt);
    std::vector<int> seen(static_cast<size_t>(high - low), 0);
    for (double v : Values(t)) {
      ASSERT_TRUE(v >= low && v < high && v == std::floor(v)) << DtypeName(dt) << ": " << v;
      ++seen[static_cast<size_t>(v - low)];
    }
    for (int n : seen) EXPECT_GT(n, 0) << DtypeName(dt) << ": a value never drawn";
  }
  // A one-value range, and a range past 2^32 whose draws use both words.
  Generator g;
  Tensor one = Fresh(ScalarType::kInt64, {100});
  ASSERT_TRUE(Randint(one, g, 7, 8).ok());
  for (double v : Values(one)) EXPECT_EQ(v, 7);
  Tensor wide = Fresh(ScalarType::kInt64, {1000});
  const int64_t big = int64_t{1} << 40;
  ASSERT_TRUE(Randint(wide, g, -big, big).ok());
  int past32 = 0;
  for (double v : Values(wide)) {
    ASSERT_TRUE(v >= -big && v < big) << v;
    past32 += std::fabs(v) > 4294967296.0;
  }
  EXPECT_GT(past32, 900);
}

// The errors the kernels themselves raise are the CPU kernels' (the meta
// functions raise the users' errors before either runs: harness_random.cc).
TEST(CudaRandomTest, KernelErrorsAreTheCpuKernels) {
  struct Call {
    const char* op;
    KernelFn cuda;
    ScalarType dt;
    std::vector<Value> positional;
    bool with_dtype;
    bool generator;
  };
  Tensor i32 = Fresh(ScalarType::kInt32, {3});
  Tensor f8 = Fresh(ScalarType::kFloat8_e4m3fn, {3});
  const Call calls[] = {
      {"rand", cuda::ew::Rand<HostLaunch>, ScalarType::kInt32, {Value(Shape{3})}, true, true},
      {"randn", cuda::ew::Randn<HostLaunch>, ScalarType::kInt64, {Value(Shape{3})}, true, true},
      {"rand", cuda::ew::Rand<HostLaunch>, ScalarType::kFloat32, {Value(Shape{3})}, true, false},
      {"uniform_", cuda::ew::RandomInPlace<HostLaunch, false>, ScalarType::kInt32,
       {Value(&i32.meta), Value(0.0), Value(1.0)}, false, true},
      {"normal_", cuda::ew::RandomInPlace<HostLaunch, true>, ScalarType::kInt32,
       {Value(&i32.meta), Value(0.0), Value(1.0)}, false, true},
      {"randint.low", cuda::ew::RandintLow<HostLaunch>, ScalarType::kFloat8_e4m3fn,
       {Value(int64_t{0}), Value(int64_t{3}), Value(Shape{3})}, true, true},
      {"randint.low", cuda::ew::RandintLow<HostLaunch>, ScalarType::kInt32,
       {Value(int64_t{3}), Value(int64_t{3}), Value(Shape{3})}, true, true},
      {"randint", cuda::ew::Randint<HostLaunch>, ScalarType::kInt32, {Value(int64_t{3}), Value(Shape{3})}, true,
       false},
  };
  KernelRegistry cpu;
  ASSERT_TRUE(RegisterCpuKernels(cpu).ok());
  for (const Call& c : calls) {
    SCOPED_TRACE(c.op);
    std::vector<std::pair<std::string, Value>> kwargs;
    if (c.with_dtype) kwargs.emplace_back("dtype", Value(c.dt));
    Tensor out_cpu = Fresh(c.dt, {3}), out_cuda = Fresh(c.dt, {3});
    if (!c.with_dtype) out_cpu = out_cuda = c.dt == ScalarType::kInt32 ? i32 : f8;
    Generator g1, g2;
    const absl::Status want = RunKernel(cpu.Find(DeviceType::kCPU, OpTable::Get().Find(c.op)->id), c.op,
                                        c.positional, kwargs, out_cpu, c.generator ? &g1 : nullptr);
    const absl::Status got = RunKernel(c.cuda, c.op, c.positional, kwargs, out_cuda, c.generator ? &g2 : nullptr);
    ASSERT_FALSE(want.ok());
    EXPECT_EQ(got.code(), want.code());
    EXPECT_EQ(got.message(), want.message());
    EXPECT_EQ(g2.engine, Generator().engine) << "a refused call drew from the generator";
  }
}

// ---- distributions -------------------------------------------------------------

// Kolmogorov-Smirnov distance between the sample `v` and the CDF `cdf`.
double KsDistance(std::vector<double> v, const std::function<double(double)>& cdf) {
  std::sort(v.begin(), v.end());
  const double n = static_cast<double>(v.size());
  double d = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const double f = cdf(v[i]);
    d = std::max({d, f - static_cast<double>(i) / n, static_cast<double>(i + 1) / n - f});
  }
  return d;
}

struct Moments {
  double mean = 0, var = 0;
};
Moments MomentsOf(const std::vector<double>& v) {
  Moments m;
  for (double x : v) m.mean += x;
  m.mean /= static_cast<double>(v.size());
  for (double x : v) m.var += (x - m.mean) * (x - m.mean);
  m.var /= static_cast<double>(v.size() - 1);
  return m;
}

constexpr int64_t kDraws = 100000;
// Four standard errors of a mean and of a variance over kDraws draws; the
// KS bound at a significance of 0.001 (1.95 / sqrt(n)).
const double kSqrtN = std::sqrt(static_cast<double>(kDraws));
const double kKsBound = 1.95 / kSqrtN;

TEST(CudaRandomTest, UniformDrawsAreUniform) {
  for (ScalarType dt : {ScalarType::kFloat32, ScalarType::kFloat64, ScalarType::kFloat16, ScalarType::kBFloat16}) {
    for (const auto& [from, to] : {std::pair<double, double>{0, 1}, {-2, 3.5}}) {
      SCOPED_TRACE(absl::StrCat(DtypeName(dt), " [", from, ", ", to, ")"));
      Generator g;
      g.engine.seed(2024);
      Tensor t = Fresh(dt, {kDraws});
      ASSERT_TRUE(Uniform(t, g, from, to).ok());
      const std::vector<double> v = Values(t);
      for (double x : v) ASSERT_TRUE(x >= from && x < to) << x;
      const double w = to - from;
      const Moments m = MomentsOf(v);
      EXPECT_NEAR(m.mean, from + w / 2, 4 * w * std::sqrt(1.0 / 12) / kSqrtN);
      // Var of a uniform's sample variance: w^4 / 180 / n (plus rounding for
      // the narrow floats, whose spacing near `to` is w / 2^8 at most).
      const double spacing = dt == ScalarType::kBFloat16 ? std::ldexp(std::fabs(to), -7) : 0;
      EXPECT_NEAR(m.var, w * w / 12, 4 * w * w * std::sqrt(1.0 / 180) / kSqrtN + spacing * w);
      if (dt == ScalarType::kFloat32 || dt == ScalarType::kFloat64) {
        EXPECT_LT(KsDistance(v, [&](double x) { return (x - from) / w; }), kKsBound);
      }
    }
  }
}

TEST(CudaRandomTest, NormalDrawsAreNormal) {
  for (ScalarType dt : {ScalarType::kFloat32, ScalarType::kFloat64, ScalarType::kFloat16}) {
    for (const auto& [mean, std] : {std::pair<double, double>{0, 1}, {3, 0.5}}) {
      SCOPED_TRACE(absl::StrCat(DtypeName(dt), " mean ", mean, " std ", std));
      Generator g;
      g.engine.seed(77);
      Tensor t = Fresh(dt, {kDraws});
      ASSERT_TRUE(Normal(t, g, mean, std).ok());
      const std::vector<double> v = Values(t);
      for (double x : v) ASSERT_TRUE(std::isfinite(x)) << x;
      const Moments m = MomentsOf(v);
      EXPECT_NEAR(m.mean, mean, 4 * std / kSqrtN);
      EXPECT_NEAR(m.var, std * std, 4 * std * std * std::sqrt(2.0) / kSqrtN + (dt == ScalarType::kFloat16 ? 1e-3 : 0));
      if (dt != ScalarType::kFloat16) {
        EXPECT_LT(KsDistance(v, [&](double x) { return 0.5 * std::erfc(-(x - mean) / std / std::sqrt(2.0)); }),
                  kKsBound);
      }
    }
  }
  // std 0: the mean itself.
  Generator g;
  Tensor t = Fresh(ScalarType::kFloat32, {100});
  ASSERT_TRUE(Normal(t, g, -1.5, 0).ok());
  for (double x : Values(t)) EXPECT_EQ(x, -1.5);
}

TEST(CudaRandomTest, RandintDrawsAreUniform) {
  // Chi-square over 10 values, 9 degrees of freedom: 27.9 at a significance of 0.001.
  for (const auto& [low, high] : {std::pair<int64_t, int64_t>{0, 10}, {-(int64_t{10} << 33), int64_t{10} << 33}}) {
    SCOPED_TRACE(absl::StrCat("[", low, ", ", high, ")"));
    Generator g;
    g.engine.seed(31337);
    Tensor t = Fresh(ScalarType::kInt64, {kDraws});
    ASSERT_TRUE(Randint(t, g, low, high).ok());
    std::vector<double> count(10, 0);
    const double bin = static_cast<double>(high - low) / 10;
    for (double v : Values(t)) ++count[static_cast<size_t>((v - static_cast<double>(low)) / bin)];
    double chi2 = 0;
    for (double c : count) chi2 += (c - kDraws / 10.0) * (c - kDraws / 10.0) / (kDraws / 10.0);
    EXPECT_LT(chi2, 27.9);
  }
}

}  // namespace
}  // namespace tensord::testing::cudatest
