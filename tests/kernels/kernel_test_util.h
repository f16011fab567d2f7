// tests/kernels/kernel_test_util.h — a small harness for CPU kernel tests:
// host tensors with any strides, an op runner that does what the daemon's
// dispatcher does (bind args, run meta, allocate or alias, call the kernel),
// and element access through the kernels' own dtype conversions.
//
//   Tensor a = Random(ScalarType::kFloat32, {3, 4}, rng);
//   Tensor at = Restride(a, {1, 3});            // same values, column-major
//   OpRun r = RunOp("add.Tensor", {In(at), In(b)});
//   ASSERT_TRUE(r.status.ok()) << r.status;
//   ExpectValues(r.outputs[0], expected_row_major);
#ifndef TENSORD_TESTS_KERNELS_KERNEL_TEST_UTIL_H_
#define TENSORD_TESTS_KERNELS_KERNEL_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../../kernels/cpu/dtypes.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "tensord/kernels/registry.h"
#include "tensord/meta/op_table.h"
#include "tensord/meta/schema.h"
#include "tensord/meta/tensor_meta.h"

namespace tensord::testing {

// Filler byte for fresh output storage: a kernel that forgets an element
// leaves a recognisable value.
inline constexpr uint8_t kGarbage = 0xAB;

struct Tensor {
  std::shared_ptr<std::vector<uint64_t>> storage;  // 8-byte aligned bytes
  TensorMeta meta;

  char* base() const { return reinterpret_cast<char*>(storage->data()); }
  char* element(absl::Span<const int64_t> idx) const {
    int64_t off = meta.storage_offset;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * meta.strides[d];
    return base() + off * meta.itemsize();
  }
  int64_t numel() const { return meta.numel(); }
};

inline std::shared_ptr<std::vector<uint64_t>> NewStorage(int64_t bytes) {
  auto s = std::make_shared<std::vector<uint64_t>>(static_cast<size_t>((bytes + 7) / 8 + 1));
  std::memset(s->data(), kGarbage, s->size() * 8);
  return s;
}

// Reads/writes one element as double through the kernels' Load/Store.
inline double ReadAt(const char* p, ScalarType t) {
  double v = 0;
  (void)cpu::Dispatch<cpu::kSetAll>(t, "read", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    v = static_cast<double>(cpu::Load<T>(p));
    return absl::OkStatus();
  });
  return v;
}
inline void WriteAt(char* p, ScalarType t, double v) {
  (void)cpu::Dispatch<cpu::kSetAll>(t, "write", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = cpu::ComputeT<T>;
    if constexpr (std::is_same_v<C, bool>) {
      cpu::Store<T>(p, v != 0);
    } else if constexpr (std::is_integral_v<C>) {
      cpu::Store<T>(p, static_cast<C>(static_cast<int64_t>(v)));
    } else {
      cpu::Store<T>(p, static_cast<C>(v));
    }
    return absl::OkStatus();
  });
}

// Calls f(index) for every index of `sizes` in row-major order.
inline void ForEachIndex(const Shape& sizes, const std::function<void(const Shape&)>& f) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  if (n == 0) return;
  Shape idx(sizes.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    f(idx);
    for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
      if (++idx[d] < sizes[d]) break;
      idx[d] = 0;
    }
  }
}

// Row-major values of a tensor as doubles.
inline std::vector<double> Values(const Tensor& t) {
  std::vector<double> out;
  ForEachIndex(t.meta.sizes, [&](const Shape& i) { out.push_back(ReadAt(t.element(i), t.meta.dtype)); });
  return out;
}

// A tensor with the given strides/offset holding `values` (row-major).
inline Tensor MakeStrided(ScalarType dt, Shape sizes, Shape strides, int64_t offset,
                          const std::vector<double>& values) {
  Tensor t;
  t.meta.sizes = std::move(sizes);
  t.meta.strides = std::move(strides);
  t.meta.storage_offset = offset;
  t.meta.dtype = dt;
  t.meta.device = kCPU;
  int64_t bytes = t.meta.StorageBytesNeeded().value();
  t.storage = NewStorage(bytes);
  size_t k = 0;
  ForEachIndex(t.meta.sizes, [&](const Shape& i) { WriteAt(t.element(i), dt, values.at(k++)); });
  return t;
}

inline Tensor FromValues(ScalarType dt, Shape sizes, const std::vector<double>& values) {
  Shape strides = ContiguousStrides(sizes);
  return MakeStrided(dt, std::move(sizes), std::move(strides), 0, values);
}

inline Tensor Scalar0d(ScalarType dt, double v) { return FromValues(dt, {}, {v}); }

// Random values representable in `dt`: floats in [lo, hi) (rounded to the
// dtype), integers in [lo, hi], bools 0/1.
inline std::vector<double> RandomValues(ScalarType dt, int64_t n, std::mt19937& rng,
                                        double lo = -5, double hi = 5) {
  std::vector<double> v(static_cast<size_t>(n));
  std::uniform_real_distribution<double> uf(lo, hi);
  for (double& x : v) {
    if (dt == ScalarType::kBool) {
      x = rng() % 2;
    } else if (IsIntegral(dt, false)) {
      double l = lo, h = hi;
      if (dt == ScalarType::kUInt8 && l < 0) l = 0;
      x = std::floor(l + static_cast<double>(rng() % static_cast<uint32_t>(h - l + 1)));
    } else {
      x = uf(rng);
      char buf[8];
      WriteAt(buf, dt, x);
      x = ReadAt(buf, dt);  // representable
    }
  }
  return v;
}

inline Tensor Random(ScalarType dt, Shape sizes, std::mt19937& rng, double lo = -5, double hi = 5) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return FromValues(dt, sizes, RandomValues(dt, n, rng, lo, hi));
}

// Same logical values as `t`, laid out with `strides` and `offset`.
inline Tensor Restride(const Tensor& t, Shape strides, int64_t offset = 0) {
  return MakeStrided(t.meta.dtype, t.meta.sizes, std::move(strides), offset, Values(t));
}

// Same values, memory order reversed (dim 0 innermost): a permuted-dense layout.
inline Tensor ReversedLayout(const Tensor& t, int64_t offset = 0) {
  const int64_t nd = t.meta.dim();
  Shape strides(nd);
  int64_t s = 1;
  for (int64_t d = 0; d < nd; ++d) {
    strides[d] = s;
    s *= std::max<int64_t>(t.meta.sizes[d], 1);
  }
  return Restride(t, strides, offset);
}

// Same values, every element two slots apart with an offset (not dense).
inline Tensor Spread(const Tensor& t, int64_t offset = 3) {
  Shape strides = ContiguousStrides(t.meta.sizes);
  for (int64_t& s : strides) s *= 2;
  return Restride(t, strides, offset);
}

// The layouts a test should cover for an input.
enum class Layout { kContiguous, kReversed, kSpread };
inline Tensor WithLayout(const Tensor& t, Layout l) {
  switch (l) {
    case Layout::kContiguous: return t;
    case Layout::kReversed: return ReversedLayout(t, 1);
    case Layout::kSpread: return Spread(t);
  }
  return t;
}
inline const Layout kAllLayouts[] = {Layout::kContiguous, Layout::kReversed, Layout::kSpread};

// ---- running ops ------------------------------------------------------------------

// Storage lookup for tensors passed to ops, keyed by their meta's address.
inline std::map<const TensorMeta*, std::shared_ptr<std::vector<uint64_t>>>& InputBases() {
  static std::map<const TensorMeta*, std::shared_ptr<std::vector<uint64_t>>> m;
  return m;
}

inline Value In(const Tensor& t) {
  InputBases()[&t.meta] = t.storage;
  return Value(&t.meta);
}
inline Value InList(std::initializer_list<const Tensor*> ts) {
  TensorList l;
  for (const Tensor* t : ts) {
    if (t == nullptr) {
      l.push_back(nullptr);
      continue;
    }
    InputBases()[&t->meta] = t->storage;
    l.push_back(&t->meta);
  }
  return Value(std::move(l));
}

inline const KernelRegistry& Registry() {
  static const KernelRegistry* r = [] {
    auto* reg = new KernelRegistry();
    absl::Status s = RegisterCpuKernels(*reg);
    if (!s.ok()) {
      ADD_FAILURE() << "RegisterCpuKernels: " << s;
    }
    return reg;
  }();
  return *r;
}

struct OpRun {
  absl::Status status;
  std::vector<Tensor> outputs;
  bool aliased = false;  // the meta made the output alias an input (a view: no
                         // kernel ran; an in-place op: the kernel wrote self)
};

// Binds `positional`/`kwargs` to the op's schema, runs its meta function,
// allocates (or aliases) outputs and runs the CPU kernel.
inline OpRun RunOp(const std::string& full_name, std::vector<Value> positional,
                   std::vector<std::pair<std::string, Value>> kwargs = {},
                   Generator* gen = nullptr) {
  OpRun run;
  const OpEntry* op = OpTable::Get().Find(full_name);
  if (op == nullptr) {
    run.status = absl::NotFoundError("no op " + full_name);
    return run;
  }
  absl::StatusOr<std::vector<Value>> args = BindArgs(op->schema, std::move(positional), std::move(kwargs));
  if (!args.ok()) {
    run.status = args.status();
    return run;
  }
  KernelContext ctx;
  ctx.op = op;
  ctx.args = *args;
  ctx.input_base = [](const TensorMeta* m) -> char* {
    auto it = InputBases().find(m);
    return it == InputBases().end() ? nullptr : reinterpret_cast<char*>(it->second->data());
  };
  static Generator default_gen;
  ctx.generator = gen ? gen : &default_gen;
  std::vector<Tensor>* outs = &run.outputs;
  if (op->has(kDataDependent)) {
    ctx.allocate_output = [outs](const TensorMeta& m) -> absl::StatusOr<TensorRef> {
      Tensor t;
      t.meta = m;
      t.storage = NewStorage(m.StorageBytesNeeded().value());
      outs->push_back(t);
      return TensorRef{outs->back().base(), &outs->back().meta};
    };
    outs->reserve(4);
  } else {
    absl::StatusOr<MetaResult> meta = OpTable::Get().RunMeta(*op, *args);
    if (!meta.ok()) {
      run.status = meta.status();
      return run;
    }
    bool any_fresh = false;
    for (size_t i = 0; i < meta->outputs.size(); ++i) {
      Tensor t;
      t.meta = meta->outputs[i];
      const int alias = i < meta->alias_of.size() ? meta->alias_of[i] : -1;
      if (alias >= 0) {
        // A view: share the aliased input's storage.
        t.storage = InputBases().at((*args)[alias].tensor_ptr());
        run.aliased = true;
      } else {
        any_fresh = true;
        t.storage = NewStorage(t.meta.StorageBytesNeeded().value());
      }
      run.outputs.push_back(t);
    }
    for (Tensor& t : run.outputs) ctx.outputs.push_back(TensorRef{t.base(), &t.meta});
    // In-place ops (an argument written, `Tensor(a!)`) alias self and still
    // run their kernel, which writes into self's storage.
    if (!any_fresh && !op->is_inplace()) return run;
  }
  KernelFn fn = Registry().Find(DeviceType::kCPU, op->id);
  if (fn == nullptr) {
    run.status = absl::UnimplementedError("no CPU kernel for " + full_name);
    return run;
  }
  run.status = fn(ctx);
  return run;
}

// ---- comparisons ------------------------------------------------------------------

inline bool Close(double a, double e, double rtol, double atol) {
  if (std::isnan(e)) return std::isnan(a);
  if (std::isinf(e)) return a == e;
  return std::fabs(a - e) <= atol + rtol * std::fabs(e);
}

// Default tolerance for a dtype's results.
inline double Rtol(ScalarType t) {
  switch (t) {
    case ScalarType::kFloat16: return 2e-3;
    case ScalarType::kBFloat16: return 1.6e-2;
    case ScalarType::kFloat32: return 2e-6;
    case ScalarType::kFloat64: return 1e-12;
    default: return 0;
  }
}

inline void ExpectValues(const Tensor& t, const std::vector<double>& expected, double rtol = -1,
                         double atol = -1, const std::string& what = "") {
  if (rtol < 0) rtol = Rtol(t.meta.dtype);
  if (atol < 0) atol = rtol;
  const std::vector<double> got = Values(t);
  ASSERT_EQ(got.size(), expected.size()) << what << " sizes " << ShapeToString(t.meta.sizes);
  int failures = 0;
  for (size_t i = 0; i < got.size() && failures < 5; ++i) {
    if (!Close(got[i], expected[i], rtol, atol)) {
      ADD_FAILURE() << what << " element " << i << ": got " << got[i] << ", expected " << expected[i]
                    << " (dtype " << DtypeName(t.meta.dtype) << ", sizes "
                    << ShapeToString(t.meta.sizes) << ")";
      ++failures;
    }
  }
}

// Row-major index -> element index under broadcasting of `sizes` to `out`.
inline Shape BroadcastIndex(const Shape& idx, const Shape& sizes) {
  Shape r(sizes.size());
  const size_t off = idx.size() - sizes.size();
  for (size_t d = 0; d < sizes.size(); ++d) r[d] = sizes[d] == 1 ? 0 : idx[off + d];
  return r;
}

// An arithmetic sequence of `n` values: start, start + step, ...
inline std::vector<double> Seq(int64_t n, double start = 0, double step = 1) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(start + step * static_cast<double>(i));
  return v;
}

// The op failed with a message containing `text`.
inline void ExpectErrorContains(const OpRun& r, absl::string_view text) {
  ASSERT_FALSE(r.status.ok()) << "expected an error containing: " << text;
  EXPECT_TRUE(absl::StrContains(r.status.message(), text)) << r.status.message();
}

}  // namespace tensord::testing

#endif  // TENSORD_TESTS_KERNELS_KERNEL_TEST_UTIL_H_
