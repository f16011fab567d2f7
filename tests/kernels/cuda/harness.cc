// The device test harness (see harness.h): running samples, comparing
// results, and the samples of every op with a CUDA kernel.
#include "harness.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "../../../kernels/cpu/dtypes.h"
#include "absl/strings/str_cat.h"
#include "tensord/kernels/device_error_status.h"
#include "tensord/meta/op_table.h"
#include "tensord/meta/schema.h"

namespace tensord::testing::cudatest {

// ---- memory -------------------------------------------------------------------------

char* HostMemory::Allocate(int64_t bytes) {
  const size_t n = (static_cast<size_t>(bytes) + 255) / 256 * 256 + 256;
  std::shared_ptr<char> p(static_cast<char*>(std::aligned_alloc(256, n)), [](char* q) { std::free(q); });
  buffers_.push_back(p);
  return p.get();
}
void HostMemory::CopyToDevice(char* dst, const void* src, int64_t bytes) {
  std::memcpy(dst, src, static_cast<size_t>(bytes));
}
void HostMemory::CopyToHost(void* dst, const char* src, int64_t bytes) {
  std::memcpy(dst, src, static_cast<size_t>(bytes));
}
absl::Status HostMemory::Synchronize() {
  const DeviceErrorWord word = word_;
  word_ = DeviceErrorWord{};
  return DeviceErrorToStatus(word);
}

const KernelRegistry& CpuRegistry() {
  static const KernelRegistry* r = [] {
    auto* reg = new KernelRegistry();
    const absl::Status s = RegisterCpuKernels(*reg);
    if (!s.ok()) ADD_FAILURE() << "RegisterCpuKernels: " << s;
    return reg;
  }();
  return *r;
}

std::vector<std::string> OpsWithKernels(const KernelRegistry& registry, DeviceType device) {
  std::vector<std::string> ops;
  for (const OpEntry& e : OpTable::Get().entries()) {
    if (registry.Find(device, e.id) != nullptr) ops.push_back(e.full_name());
  }
  return ops;
}

// ---- running ------------------------------------------------------------------------

namespace {

int64_t StorageBytes(const Tensor& t) { return static_cast<int64_t>(t.storage->size() * 8); }

}  // namespace

SampleResult RunSample(const Sample& s, const KernelRegistry& registry, DeviceType kernel_device,
                       DeviceMemory& memory, const MathMode& math) {
  SampleResult result;
  const OpEntry* op = OpTable::Get().Find(s.op);
  if (op == nullptr) {
    result.status = absl::NotFoundError("no op " + s.op);
    return result;
  }
  const Device device = memory.device();
  // One device buffer per host storage, holding the same bytes.
  std::map<const std::vector<uint64_t>*, std::pair<char*, int64_t>> buffers;
  std::vector<TensorMeta> metas(s.tensors.size());
  std::map<const TensorMeta*, std::pair<char*, int64_t>> base_of;
  for (size_t i = 0; i < s.tensors.size(); ++i) {
    const Tensor& t = s.tensors[i];
    auto it = buffers.find(t.storage.get());
    if (it == buffers.end()) {
      const int64_t bytes = StorageBytes(t);
      char* p = memory.Allocate(bytes);
      memory.CopyToDevice(p, t.storage->data(), bytes);
      it = buffers.emplace(t.storage.get(), std::make_pair(p, bytes)).first;
    }
    metas[i] = t.meta;
    metas[i].device = device;
    base_of[&metas[i]] = it->second;
  }
  auto materialize = [&](const SampleArg& a) -> Value {
    switch (a.kind) {
      case SampleArg::Kind::kTensor: return Value(&metas[static_cast<size_t>(a.tensors[0])]);
      case SampleArg::Kind::kTensorList: {
        TensorList l;
        for (int i : a.tensors) l.push_back(i < 0 ? nullptr : &metas[static_cast<size_t>(i)]);  // -1: None
        return Value(std::move(l));
      }
      case SampleArg::Kind::kDevice: return Value(device);
      case SampleArg::Kind::kValue: return a.value;
    }
    return Value();
  };
  std::vector<Value> positional;
  for (const SampleArg& a : s.positional) positional.push_back(materialize(a));
  std::vector<std::pair<std::string, Value>> kwargs;
  for (const auto& [name, a] : s.kwargs) kwargs.emplace_back(name, materialize(a));
  absl::StatusOr<std::vector<Value>> args = BindArgs(op->schema, std::move(positional), std::move(kwargs));
  if (!args.ok()) {
    result.status = args.status();
    return result;
  }
  // A data-dependent op has no meta: its kernel allocates its outputs.
  const bool data_dependent = op->has(kDataDependent);
  absl::StatusOr<MetaResult> meta = data_dependent ? MetaResult{} : OpTable::Get().RunMeta(*op, *args);
  if (!meta.ok()) {
    result.status = meta.status();
    return result;
  }
  KernelContext ctx;
  ctx.op = op;
  ctx.args = *args;
  ctx.device = device;
  ctx.stream = memory.stream();
  ctx.error_word = memory.error_word();
  ctx.input_base = [&base_of](const TensorMeta* m) -> char* {
    auto it = base_of.find(m);
    return it == base_of.end() ? nullptr : it->second.first;
  };
  Generator generator;
  ctx.generator = &generator;
  ctx.math = math;
  std::vector<std::pair<char*, int64_t>> out_buffers;
  bool any_fresh = false;
  for (size_t i = 0; i < meta->outputs.size(); ++i) {
    const int alias = i < meta->alias_of.size() ? meta->alias_of[i] : -1;
    std::pair<char*, int64_t> buffer;
    if (alias >= 0) {
      buffer = base_of.at((*args)[static_cast<size_t>(alias)].tensor_ptr());
    } else {
      any_fresh = true;
      const int64_t bytes = meta->outputs[i].StorageBytesNeeded().value();
      std::shared_ptr<std::vector<uint64_t>> garbage = NewStorage(bytes);  // kGarbage bytes
      buffer = {memory.Allocate(static_cast<int64_t>(garbage->size() * 8)), static_cast<int64_t>(garbage->size() * 8)};
      memory.CopyToDevice(buffer.first, garbage->data(), buffer.second);
    }
    out_buffers.push_back(buffer);
    ctx.outputs.push_back(TensorRef{buffer.first, &meta->outputs[i]});
  }
  std::deque<TensorMeta> allocated;  // the data-dependent outputs' metas (stable addresses)
  if (data_dependent) {
    ctx.allocate_output = [&](const TensorMeta& asked) -> absl::StatusOr<TensorRef> {
      TensorMeta& m = allocated.emplace_back(asked);
      m.device = device;
      TD_ASSIGN_OR_RETURN(const int64_t bytes, m.StorageBytesNeeded());
      std::shared_ptr<std::vector<uint64_t>> garbage = NewStorage(bytes);  // kGarbage bytes
      const int64_t size = static_cast<int64_t>(garbage->size() * 8);
      char* p = memory.Allocate(size);
      memory.CopyToDevice(p, garbage->data(), size);
      out_buffers.emplace_back(p, size);
      ctx.outputs.push_back(TensorRef{p, &m});
      return ctx.outputs.back();
    };
  }
  if (any_fresh || op->is_inplace() || data_dependent) {
    KernelFn fn = registry.Find(kernel_device, op->id);
    if (fn == nullptr) {
      result.no_kernel = true;
      result.status = absl::UnimplementedError("no kernel for " + s.op);
      return result;
    }
    result.status = fn(ctx);
    const absl::Status sync = memory.Synchronize();
    if (result.status.ok() && !sync.ok()) result.status = sync;
    if (!result.status.ok()) return result;
  }
  for (const TensorMeta& m : allocated) meta->outputs.push_back(m);
  for (size_t i = 0; i < meta->outputs.size(); ++i) {
    Tensor t;
    t.meta = meta->outputs[i];
    t.meta.device = kCPU;
    t.storage = std::make_shared<std::vector<uint64_t>>(static_cast<size_t>((out_buffers[i].second + 7) / 8));
    memory.CopyToHost(t.storage->data(), out_buffers[i].first, out_buffers[i].second);
    result.outputs.push_back(std::move(t));
  }
  return result;
}

// ---- comparing ------------------------------------------------------------------------

namespace {

// Tolerance of results of dtype `t` between devices whose math libraries
// differ by a few ulps (and whose narrow floats may then round apart).
double Tolerance(ScalarType t) {
  switch (t) {
    case ScalarType::kFloat16: return 2e-3;
    case ScalarType::kBFloat16: return 1.6e-2;
    case ScalarType::kFloat32: return 1e-5;
    case ScalarType::kFloat64: return 1e-12;
    default: return 0;  // integers, bool and float8 (float8 only converts) are exact
  }
}

}  // namespace

std::string CompareResults(const Sample& s, const SampleResult& want, const SampleResult& got) {
  const std::string where = absl::StrCat(s.op, " [", s.label, "]: ");
  if (got.no_kernel) return absl::StrCat(where, "no kernel");
  if (want.status.ok() != got.status.ok() ||
      (!want.status.ok() && (want.status.code() != got.status.code() || want.status.message() != got.status.message()))) {
    return absl::StrCat(where, "status differs: CPU ", want.status.ToString(), "; device ", got.status.ToString());
  }
  if (!want.status.ok()) return "";
  if (want.outputs.size() != got.outputs.size()) {
    return absl::StrCat(where, want.outputs.size(), " outputs on the CPU, ", got.outputs.size(), " on the device");
  }
  for (size_t i = 0; i < want.outputs.size(); ++i) {
    const TensorMeta& a = want.outputs[i].meta;
    const TensorMeta& b = got.outputs[i].meta;
    if (a.sizes != b.sizes || a.strides != b.strides || a.dtype != b.dtype || a.storage_offset != b.storage_offset) {
      return absl::StrCat(where, "output ", i, " is ", a.ToString(), " on the CPU, ", b.ToString(), " on the device");
    }
    if (s.check_values) continue;
    if (s.exact) {
      std::string diff;
      int64_t k = 0;
      ForEachIndex(a.sizes, [&](const Shape& idx) {
        const char* p = want.outputs[i].element(idx);
        const char* q = got.outputs[i].element(idx);
        if (diff.empty() && std::memcmp(p, q, static_cast<size_t>(a.itemsize())) != 0) {
          diff = absl::StrCat(where, "output ", i, " (", DtypeName(a.dtype), " ", ShapeToString(a.sizes), ") element ",
                              k, " differs in its bytes: CPU ", ReadAt(p, a.dtype), ", device ", ReadAt(q, b.dtype));
        }
        ++k;
      });
      if (!diff.empty()) return diff;
      continue;
    }
    const double tol = Tolerance(a.dtype);
    const std::vector<double> x = Values(want.outputs[i]);
    const std::vector<double> y = Values(got.outputs[i]);
    for (size_t j = 0; j < x.size(); ++j) {
      const bool same = (std::isnan(x[j]) && std::isnan(y[j])) || x[j] == y[j] ||
                        (tol > 0 && !std::isinf(x[j]) && std::fabs(x[j] - y[j]) <= tol + tol * std::fabs(x[j]));
      if (!same) {
        return absl::StrCat(where, "output ", i, " (", DtypeName(a.dtype), " ", ShapeToString(a.sizes),
                            ") element ", j, ": CPU ", x[j], ", device ", y[j]);
      }
    }
  }
  if (s.check_values) {
    if (std::string e = s.check_values(want.outputs); !e.empty()) return absl::StrCat(where, "CPU: ", e);
    if (std::string e = s.check_values(got.outputs); !e.empty()) return absl::StrCat(where, "device: ", e);
  }
  return "";
}

// ---- samples ---------------------------------------------------------------------------

namespace {


// Mixed-dtype pairs, for type promotion and per-element conversion on load.
constexpr std::pair<ScalarType, ScalarType> kMixedPairs[] = {
    {ScalarType::kInt32, ScalarType::kFloat32},   {ScalarType::kUInt8, ScalarType::kInt8},
    {ScalarType::kFloat16, ScalarType::kBFloat16}, {ScalarType::kBool, ScalarType::kInt64},
    {ScalarType::kInt64, ScalarType::kFloat16},   {ScalarType::kFloat32, ScalarType::kFloat64},
};

// How a sample tensor is laid out.
enum class Lay {
  kContiguous,
  kReversed,    // permuted dense (dim 0 innermost), offset 1
  kSpread,      // every element two slots apart, offset 3
  kMisaligned,  // contiguous at offset 1: not aligned for vector accesses
  kExpanded,    // the last dim has stride 0
};

Tensor Make(ScalarType dt, const Shape& sizes, Lay lay, std::mt19937& rng, double lo, double hi) {
  if (lay == Lay::kExpanded && !sizes.empty()) {
    Shape inner = sizes;
    const int64_t last = inner.back();
    inner.back() = 1;
    const Tensor base = Random(dt, inner, rng, lo, hi);
    std::vector<double> values;
    for (double v : Values(base)) {
      for (int64_t k = 0; k < last; ++k) values.push_back(v);
    }
    Shape strides = ContiguousStrides(inner);
    strides.back() = 0;
    return MakeStrided(dt, sizes, strides, 0, values);
  }
  const Tensor t = Random(dt, sizes, rng, lo, hi);
  switch (lay) {
    case Lay::kContiguous:
    case Lay::kExpanded: return t;
    case Lay::kReversed: return ReversedLayout(t, 1);
    case Lay::kSpread: return Spread(t, 3);
    case Lay::kMisaligned: return Restride(t, ContiguousStrides(sizes), 1);
  }
  return t;
}

// Shapes and layouts of a sample's first two tensor operands (broadcastable).
struct PairLayout {
  const char* name;
  Shape a;
  Lay la;
  Shape b;
  Lay lb;
};
const PairLayout kPairs[] = {
    {"contiguous", {3, 5, 4}, Lay::kContiguous, {3, 5, 4}, Lay::kContiguous},
    {"reversed/contiguous", {3, 5, 4}, Lay::kReversed, {3, 5, 4}, Lay::kContiguous},
    {"spread/broadcast", {3, 5, 4}, Lay::kSpread, {5, 1}, Lay::kContiguous},
    {"tensor/0-dim", {3, 5, 4}, Lay::kContiguous, {}, Lay::kContiguous},
    {"0-dim/0-dim", {}, Lay::kContiguous, {}, Lay::kContiguous},
    {"empty", {0, 3}, Lay::kContiguous, {3}, Lay::kContiguous},
    {"long (vector tail)", {1027}, Lay::kContiguous, {1027}, Lay::kContiguous},
    {"misaligned/reversed", {33}, Lay::kMisaligned, {33}, Lay::kReversed},
    {"expanded/spread", {4, 5}, Lay::kExpanded, {4, 5}, Lay::kSpread},
};

// Value ranges of an op's operands.
struct Ranges {
  double a_lo = -5, a_hi = 5, b_lo = -5, b_hi = 5;
  bool b_nonzero = false;  // integer divisors: the CPU raises on zero, the GPU gives 0
};

Ranges RangesFor(const std::string& op) {
  Ranges r;
  const std::string base = op.substr(0, op.find('.'));
  if (base == "remainder" || base == "fmod" || base == "floor_divide" || base == "div" || base == "div_" ||
      base == "addcdiv" || base == "addcdiv_") {
    r.b_nonzero = true;
  } else if (base == "bitwise_left_shift" || base == "bitwise_right_shift") {
    r.b_lo = -2;
    r.b_hi = 40;
  } else if (base == "pow") {
    r.a_lo = -3;
    r.a_hi = 3;
    r.b_lo = -2;
    r.b_hi = 4;
  }
  return r;
}

// Rewrites elements equal to 0 to 3 (for integer divisors).
void AvoidZero(Tensor& t) {
  if (!IsIntegral(t.meta.dtype, /*include_bool=*/true)) return;
  ForEachIndex(t.meta.sizes, [&](const Shape& i) {
    if (ReadAt(t.element(i), t.meta.dtype) == 0) WriteAt(t.element(i), t.meta.dtype, 3);
  });
}

// Special values of a dtype (a 1-D tensor): NaN, infinities, signed zeros,
// halves (round-half-even), out-of-range values for conversions; extremes
// for integers (wrapping).
Tensor Specials(ScalarType dt) {
  std::vector<double> v;
  const double inf = std::numeric_limits<double>::infinity();
  switch (dt) {
    case ScalarType::kBool: v = {0, 1, 1, 0, 1}; break;
    case ScalarType::kUInt8: v = {0, 1, 2, 127, 128, 254, 255}; break;
    case ScalarType::kInt8: v = {-128, -127, -1, 0, 1, 126, 127}; break;
    case ScalarType::kInt16: v = {-32768, -32767, -1, 0, 1, 32766, 32767}; break;
    case ScalarType::kInt32: v = {-2147483648.0, -2147483647.0, -1, 0, 1, 2147483646.0, 2147483647.0}; break;
    case ScalarType::kInt64: v = {-9223372036854775808.0, -4611686018427387904.0, -1, 0, 1, 4611686018427387904.0}; break;
    default:
      v = {std::nan(""), inf, -inf, -0.0, 0.0, 0.5, 1.5, 2.5, -0.5, -2.5, 1e-3, -1e-3, 300, -1.5,
           70000, -70000, 3e9, -3e9, 1e19, -1e19, 1e30, -1e30};
  }
  Tensor t = FromValues(dt, {static_cast<int64_t>(v.size())}, v);
  return t;
}

using Gen = std::function<void(std::vector<Sample>&, std::mt19937&)>;

// op(self [, extra positional args] [, kwargs]) over every dtype, every
// single-operand layout and the special values.
void UnarySamples(const std::string& op, std::vector<Sample>& out, std::mt19937& rng,
                  const std::vector<SampleArg>& extra = {},
                  const std::vector<std::pair<std::string, SampleArg>>& kwargs = {}) {
  for (ScalarType dt : kAllDtypes) {
    for (const PairLayout& p : kPairs) {
      Sample s = NewSample(op, absl::StrCat(Name(dt), " ", p.name));
      s.positional.push_back(SampleArg::T(s.Add(Make(dt, p.a, p.la, rng, -5, 5))));
      for (const SampleArg& e : extra) s.positional.push_back(e);
      s.kwargs = kwargs;
      out.push_back(std::move(s));
    }
    Sample s = NewSample(op, absl::StrCat(Name(dt), " special values"));
    s.positional.push_back(SampleArg::T(s.Add(Specials(dt))));
    for (const SampleArg& e : extra) s.positional.push_back(e);
    s.kwargs = kwargs;
    out.push_back(std::move(s));
  }
}

// op(a, b [, kwargs]) for tensors a and b: same dtypes over every layout
// pair, mixed dtypes, an in-place self that overlaps other, and special values.
void BinarySamples(const std::string& op, std::vector<Sample>& out, std::mt19937& rng,
                   const std::vector<std::pair<std::string, SampleArg>>& kwargs = {}) {
  const Ranges r = RangesFor(op);
  auto add = [&](ScalarType da, ScalarType db, const PairLayout& p) {
    Sample s = NewSample(op, absl::StrCat(Name(da), "/", Name(db), " ", p.name));
    Tensor b = Make(db, p.b, p.lb, rng, r.b_lo, r.b_hi);
    if (r.b_nonzero) AvoidZero(b);
    s.positional.push_back(SampleArg::T(s.Add(Make(da, p.a, p.la, rng, r.a_lo, r.a_hi))));
    s.positional.push_back(SampleArg::T(s.Add(std::move(b))));
    s.kwargs = kwargs;
    out.push_back(std::move(s));
  };
  for (ScalarType dt : kAllDtypes) {
    for (const PairLayout& p : kPairs) add(dt, dt, p);
    // Specials against themselves and against a reversed copy.
    Sample s = NewSample(op, absl::StrCat(Name(dt), " special values"));
    Tensor a = Specials(dt);
    Tensor b = Specials(dt);
    std::vector<double> bv = Values(b);
    std::reverse(bv.begin(), bv.end());
    b = FromValues(dt, b.meta.sizes, bv);
    if (r.b_nonzero) AvoidZero(b);
    s.positional.push_back(SampleArg::T(s.Add(std::move(a))));
    s.positional.push_back(SampleArg::T(s.Add(std::move(b))));
    s.kwargs = kwargs;
    out.push_back(std::move(s));
    // other is a view of self's storage in another layout (in-place ops
    // then compute into a temporary).
    Sample o = NewSample(op, absl::StrCat(Name(dt), " other overlaps self"));
    Tensor self = Random(dt, {4, 4}, rng, r.a_lo, r.a_hi);
    if (r.b_nonzero) AvoidZero(self);
    Tensor view = self;
    view.meta.strides = {1, 4};
    o.positional.push_back(SampleArg::T(o.Add(self)));
    o.positional.push_back(SampleArg::T(o.Add(view)));
    o.kwargs = kwargs;
    out.push_back(std::move(o));
  }
  for (const auto& [da, db] : kMixedPairs) {
    add(da, db, kPairs[0]);
    add(db, da, kPairs[2]);
  }
}

// op(self, scalar [, kwargs]) over every dtype and a few layouts.
void ScalarSamples(const std::string& op, std::vector<Sample>& out, std::mt19937& rng, const std::vector<Scalar>& scalars,
                   const std::vector<std::pair<std::string, SampleArg>>& kwargs = {}) {
  const Ranges r = RangesFor(op);
  for (ScalarType dt : kAllDtypes) {
    for (const Scalar& sc : scalars) {
      for (int li : {0, 1, 3, 6}) {  // contiguous, reversed, 0-dim, long
        const PairLayout& p = kPairs[li];
        Sample s = NewSample(op, absl::StrCat(Name(dt), " ", p.name, " scalar ", sc.to_double()));
        s.positional.push_back(SampleArg::T(s.Add(Make(dt, li == 3 ? p.b : p.a, p.la, rng, r.a_lo, r.a_hi))));
        s.positional.push_back(SampleArg::V(Value(sc)));
        s.kwargs = kwargs;
        out.push_back(std::move(s));
      }
    }
    Sample s = NewSample(op, absl::StrCat(Name(dt), " special values"));
    s.positional.push_back(SampleArg::T(s.Add(Specials(dt))));
    s.positional.push_back(SampleArg::V(Value(scalars.front())));
    s.kwargs = kwargs;
    out.push_back(std::move(s));
  }
}

const std::vector<Scalar> kScalars = {Scalar::Int(3), Scalar::Float(2.5), Scalar::Int(-2), Scalar::Bool(true)};

// op(a, b, c) for three tensors of every dtype (a is bool with
// `first_is_bool`: where's condition) over every layout pair (c has b's
// shape, contiguous).
void TernaryTensorSamples(const std::string& op, std::vector<Sample>& out, std::mt19937& rng, bool first_is_bool,
                          const std::vector<std::pair<std::string, SampleArg>>& kwargs = {}, bool c_nonzero = false) {
  for (ScalarType dt : kAllDtypes) {
    for (const PairLayout& p : kPairs) {
      const ScalarType da = first_is_bool ? ScalarType::kBool : dt;
      Sample s = NewSample(op, absl::StrCat(Name(dt), " ", p.name));
      s.positional.push_back(SampleArg::T(s.Add(Make(da, p.a, p.la, rng, -5, 5))));
      s.positional.push_back(SampleArg::T(s.Add(Make(dt, p.b, p.lb, rng, -5, 5))));
      Tensor c = Make(dt, p.b, Lay::kContiguous, rng, -5, 5);
      if (c_nonzero) AvoidZero(c);
      s.positional.push_back(SampleArg::T(s.Add(std::move(c))));
      s.kwargs = kwargs;
      out.push_back(std::move(s));
    }
  }
}

// Factories: size (and extra positional args), dtype and device keywords.
void FactorySamples(const std::string& op, std::vector<Sample>& out, const std::vector<SampleArg>& extra) {
  for (ScalarType dt : kAllDtypes) {
    for (const Shape& size : {Shape{3, 4}, Shape{}, Shape{0, 2}, Shape{1027}}) {
      Sample s = NewSample(op, absl::StrCat(Name(dt), " ", ShapeToString(size)));
      s.positional.push_back(SampleArg::V(Value(size)));
      for (const SampleArg& e : extra) s.positional.push_back(e);
      s.kwargs = {{"dtype", SampleArg::V(Value(dt))}, {"device", SampleArg::Dev()}};
      out.push_back(std::move(s));
    }
  }
}

// Inputs of reductions: the single-operand layouts, special values, ties
// (small integers), and reductions long enough that every thread of a
// block folds several elements, over inner and outer dims.
std::vector<std::pair<std::string, Tensor>> ReductionInputs(ScalarType dt, std::mt19937& rng) {
  std::vector<std::pair<std::string, Tensor>> inputs;
  for (const PairLayout& p : kPairs) inputs.emplace_back(p.name, Make(dt, p.a, p.la, rng, -5, 5));
  inputs.emplace_back("special values", Specials(dt));
  inputs.emplace_back("ties", Make(dt, {4, 6}, Lay::kReversed, rng, -1, 1));
  inputs.emplace_back("[3, 700]", Make(dt, {3, 700}, Lay::kContiguous, rng, -5, 5));
  inputs.emplace_back("[600, 3] spread", Make(dt, {600, 3}, Lay::kSpread, rng, -5, 5));
  return inputs;
}

// op(self, dim, keepdim [, kwargs]) for every dim value in `dims`.
void ReductionSamples(const std::string& op, std::vector<Sample>& out, std::mt19937& rng,
                      const std::vector<Value>& dims, bool keepdim_arg,
                      const std::vector<std::pair<std::string, SampleArg>>& kwargs = {}) {
  for (ScalarType dt : kAllDtypes) {
    for (const auto& [name, t] : ReductionInputs(dt, rng)) {
      for (const Value& dim : dims) {
        for (bool keepdim : {false, true}) {
          if (!keepdim_arg && keepdim) continue;
          Sample s = NewSample(op, absl::StrCat(Name(dt), " ", name, " dim ", dim.ToString(), keepdim ? " keepdim" : ""));
          s.positional.push_back(SampleArg::T(s.Add(t)));
          if (keepdim_arg) {
            s.positional.push_back(SampleArg::V(dim));
            s.positional.push_back(SampleArg::V(Value(keepdim)));
          }
          s.kwargs = kwargs;
          out.push_back(std::move(s));
        }
      }
    }
  }
}

bool In(const std::string& op, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (op == n) return true;
  }
  return false;
}

}  // namespace

std::vector<Sample> SamplesFor(const std::string& op, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Sample> out;
  if (In(op, {"neg", "abs", "sign", "floor", "ceil", "round", "trunc", "relu", "bitwise_not", "square", "relu_", "exp",
              "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "reciprocal", "erf", "exp2", "expm1", "log2",
              "log1p", "silu", "logical_not", "isnan", "isinf", "isfinite", "clone", "contiguous", "zero_"})) {
    UnarySamples(op, out, rng);
  } else if (op == "gelu") {
    for (const char* mode : {"none", "tanh", "sigmoid"}) {
      UnarySamples(op, out, rng, {}, {{"approximate", SampleArg::V(Value(mode))}});
    }
  } else if (op == "to.dtype") {
    for (ScalarType to : kAllDtypes) UnarySamples(op, out, rng, {SampleArg::V(Value(to))});
  } else if (op == "to.device") {
    for (ScalarType to : kAllDtypes) UnarySamples(op, out, rng, {SampleArg::Dev(), SampleArg::V(Value(to))});
  } else if (op == "reshape") {
    for (Lay lay : {Lay::kContiguous, Lay::kReversed, Lay::kSpread}) {
      for (ScalarType dt : kAllDtypes) {
        Sample s = NewSample(op, absl::StrCat(Name(dt), " layout ", static_cast<int>(lay)));
        s.positional.push_back(SampleArg::T(s.Add(Make(dt, {3, 5, 4}, lay, rng, -5, 5))));
        s.positional.push_back(SampleArg::V(Value(Shape{12, 5})));
        out.push_back(std::move(s));
      }
    }
  } else if (op == "flatten.using_ints") {
    for (Lay lay : {Lay::kContiguous, Lay::kReversed, Lay::kSpread}) {
      for (ScalarType dt : kAllDtypes) {
        Sample s = NewSample(op, absl::StrCat(Name(dt), " layout ", static_cast<int>(lay)));
        s.positional.push_back(SampleArg::T(s.Add(Make(dt, {3, 5, 4}, lay, rng, -5, 5))));
        s.positional.push_back(SampleArg::V(Value(int64_t{1})));
        out.push_back(std::move(s));
      }
    }
  } else if (op == "fill_.Scalar") {
    ScalarSamples(op, out, rng, kScalars);
  } else if (op == "copy_") {
    BinarySamples(op, out, rng);
    // src identical to self: nothing to do.
    Sample s = NewSample(op, "src is self");
    const int self = s.Add(Random(ScalarType::kFloat32, {3, 4}, rng));
    s.positional = {SampleArg::T(self), SampleArg::T(self)};
    out.push_back(std::move(s));
  } else if (In(op, {"empty", "zeros", "ones"})) {
    FactorySamples(op, out, {});
  } else if (op == "full") {
    for (const Scalar& v : kScalars) FactorySamples(op, out, {SampleArg::V(Value(v))});
  } else if (op == "empty_strided") {
    for (ScalarType dt : kAllDtypes) {
      Sample s = NewSample(op, Name(dt));
      s.positional = {SampleArg::V(Value(Shape{3, 4})), SampleArg::V(Value(Shape{1, 3}))};
      s.kwargs = {{"dtype", SampleArg::V(Value(dt))}, {"device", SampleArg::Dev()}};
      out.push_back(std::move(s));
    }
  } else if (In(op, {"empty_like", "zeros_like", "ones_like"})) {
    UnarySamples(op, out, rng);
    UnarySamples(op, out, rng, {}, {{"dtype", SampleArg::V(Value(ScalarType::kFloat16))}});
  } else if (op == "full_like") {
    UnarySamples(op, out, rng, {SampleArg::V(Value(Scalar::Float(-2.5)))});
    UnarySamples(op, out, rng, {SampleArg::V(Value(Scalar::Int(7)))}, {{"dtype", SampleArg::V(Value(ScalarType::kInt8))}});
  } else if (In(op, {"cat", "stack"})) {
    const bool cat = op == "cat";
    for (ScalarType dt : kAllDtypes) {
      for (int64_t dim : {0, 1, -1}) {
        Sample s = NewSample(op, absl::StrCat(Name(dt), " dim ", dim));
        std::vector<int> list;
        for (int64_t k = 0; k < 3; ++k) {
          Shape sizes = {3, 4};
          if (cat) sizes[static_cast<size_t>(dim == 0 ? 0 : 1)] = k + 1;
          list.push_back(s.Add(Make(dt, sizes, k == 1 ? Lay::kReversed : Lay::kContiguous, rng, -5, 5)));
        }
        s.positional = {SampleArg::List(list), SampleArg::V(Value(dim))};
        out.push_back(std::move(s));
      }
    }
    Sample s = NewSample(op, "mixed dtypes, a skipped empty 1-D tensor");
    std::vector<int> list = {s.Add(Random(ScalarType::kFloat32, {2, 3}, rng)),
                             s.Add(Random(ScalarType::kInt32, {2, 3}, rng))};
    if (cat) list.push_back(s.Add(Random(ScalarType::kFloat16, {0}, rng)));
    s.positional = {SampleArg::List(list), SampleArg::V(Value(int64_t{0}))};
    out.push_back(std::move(s));
  } else if (In(op, {"add.Tensor", "sub.Tensor", "add_.Tensor", "sub_.Tensor"})) {
    BinarySamples(op, out, rng);
    BinarySamples(op, out, rng, {{"alpha", SampleArg::V(Value(Scalar::Int(-3)))}});
    BinarySamples(op, out, rng, {{"alpha", SampleArg::V(Value(Scalar::Float(0.5)))}});
  } else if (op == "div.Tensor_mode") {
    for (const char* mode : {"trunc", "floor", "round"}) {
      BinarySamples(op, out, rng, {{"rounding_mode", SampleArg::V(Value(mode))}});
    }
    BinarySamples(op, out, rng, {{"rounding_mode", SampleArg::V(Value())}});
  } else if (In(op, {"mul.Tensor", "div.Tensor", "remainder.Tensor", "pow.Tensor_Tensor", "maximum", "minimum",
                     "eq.Tensor", "ne.Tensor", "lt.Tensor", "le.Tensor", "gt.Tensor", "ge.Tensor", "logical_and",
                     "logical_or", "logical_xor", "bitwise_and.Tensor", "bitwise_or.Tensor", "bitwise_xor.Tensor",
                     "atan2", "fmod.Tensor", "bitwise_left_shift.Tensor", "bitwise_right_shift.Tensor",
                     "floor_divide", "mul_.Tensor", "div_.Tensor", "clamp_min.Tensor", "clamp_max.Tensor"})) {
    BinarySamples(op, out, rng);
  } else if (In(op, {"add.Scalar", "sub.Scalar", "rsub.Scalar", "add_.Scalar", "sub_.Scalar"})) {
    ScalarSamples(op, out, rng, kScalars);
    ScalarSamples(op, out, rng, kScalars, {{"alpha", SampleArg::V(Value(Scalar::Int(2)))}});
    ScalarSamples(op, out, rng, kScalars, {{"alpha", SampleArg::V(Value(Scalar::Float(-1.5)))}});
  } else if (op == "div.Scalar_mode") {
    for (const char* mode : {"trunc", "floor", "round"}) {
      ScalarSamples(op, out, rng, kScalars, {{"rounding_mode", SampleArg::V(Value(mode))}});
    }
    ScalarSamples(op, out, rng, kScalars, {{"rounding_mode", SampleArg::V(Value())}});
  } else if (In(op, {"bitwise_left_shift.Tensor_Scalar", "bitwise_right_shift.Tensor_Scalar"})) {
    ScalarSamples(op, out, rng, {Scalar::Int(3), Scalar::Int(-1), Scalar::Int(70), Scalar::Int(0)});
  } else if (op == "pow.Tensor_Scalar") {
    ScalarSamples(op, out, rng, {Scalar::Int(2), Scalar::Int(-1), Scalar::Float(0.5), Scalar::Int(0), Scalar::Int(3)});
  } else if (In(op, {"mul.Scalar", "div.Scalar", "remainder.Scalar", "eq.Scalar", "ne.Scalar", "lt.Scalar",
                     "le.Scalar", "gt.Scalar", "ge.Scalar", "bitwise_and.Scalar", "bitwise_or.Scalar",
                     "bitwise_xor.Scalar", "fmod.Scalar", "floor_divide.Scalar", "mul_.Scalar", "div_.Scalar",
                     "clamp_min", "clamp_max"})) {
    ScalarSamples(op, out, rng, kScalars);
  } else if (op == "pow.Scalar") {
    for (const Scalar& base : {Scalar::Int(2), Scalar::Float(1.5), Scalar::Int(-1)}) {
      for (ScalarType dt : kAllDtypes) {
        for (int li : {0, 1, 3}) {
          const PairLayout& p = kPairs[li];
          Sample s = NewSample(op, absl::StrCat(Name(dt), " ", p.name, " base ", base.to_double()));
          s.positional.push_back(SampleArg::V(Value(base)));
          s.positional.push_back(SampleArg::T(s.Add(Make(dt, p.a, p.la, rng, -2, 4))));
          out.push_back(std::move(s));
        }
      }
    }
  } else if (op == "where.self") {
    TernaryTensorSamples(op, out, rng, /*first_is_bool=*/true);
    for (const auto& [da, db] : kMixedPairs) {
      Sample s = NewSample(op, absl::StrCat(Name(da), "/", Name(db)));
      s.positional = {SampleArg::T(s.Add(Random(ScalarType::kBool, {5, 1}, rng))),
                      SampleArg::T(s.Add(Random(da, {3, 5, 4}, rng))), SampleArg::T(s.Add(Random(db, {4}, rng)))};
      out.push_back(std::move(s));
    }
  } else if (In(op, {"where.ScalarOther", "where.ScalarSelf", "where.Scalar"})) {
    for (ScalarType dt : kAllDtypes) {
      for (const Scalar& sc : kScalars) {
        for (int li : {0, 2, 3}) {
          const PairLayout& p = kPairs[li];
          Sample s = NewSample(op, absl::StrCat(Name(dt), " ", p.name, " scalar ", sc.to_double()));
          const SampleArg cond = SampleArg::T(s.Add(Make(ScalarType::kBool, p.a, p.la, rng, 0, 1)));
          const SampleArg t = SampleArg::T(s.Add(Make(dt, p.b, p.lb, rng, -5, 5)));
          const SampleArg v = SampleArg::V(Value(sc));
          if (op == "where.ScalarOther") s.positional = {cond, t, v};
          if (op == "where.ScalarSelf") s.positional = {cond, v, t};
          if (op == "where.Scalar") s.positional = {cond, v, SampleArg::V(Value(Scalar::Float(-0.5)))};
          out.push_back(std::move(s));
        }
      }
    }
  } else if (In(op, {"clamp", "clamp_"})) {
    const Value none;
    const std::pair<Value, Value> bounds[] = {
        {Value(Scalar::Int(-2)), Value(Scalar::Int(3))},   {Value(Scalar::Float(-1.5)), none},
        {none, Value(Scalar::Float(2.5))},                 {Value(Scalar::Int(3)), Value(Scalar::Int(-2))},
        {none, none},
    };
    for (const auto& [lo, hi] : bounds) UnarySamples(op, out, rng, {SampleArg::V(lo), SampleArg::V(hi)});
  } else if (In(op, {"clamp.Tensor", "clamp_.Tensor"})) {
    for (ScalarType dt : kAllDtypes) {
      for (int variant = 0; variant < 4; ++variant) {  // both, min only, max only, neither
        for (int li : {0, 2, 6}) {
          const PairLayout& p = kPairs[li];
          Sample s = NewSample(op, absl::StrCat(Name(dt), " ", p.name, " bounds ", variant));
          s.positional.push_back(SampleArg::T(s.Add(Make(dt, p.a, p.la, rng, -5, 5))));
          s.positional.push_back(variant == 0 || variant == 1 ? SampleArg::T(s.Add(Make(dt, p.b, p.lb, rng, -4, 0)))
                                                              : SampleArg::V(Value()));
          s.positional.push_back(variant == 0 || variant == 2 ? SampleArg::T(s.Add(Make(dt, p.b, p.lb, rng, -1, 4)))
                                                              : SampleArg::V(Value()));
          out.push_back(std::move(s));
        }
      }
      // NaN in the bounds, min > max.
      Sample s = NewSample(op, absl::StrCat(Name(dt), " special bounds"));
      s.positional = {SampleArg::T(s.Add(Specials(dt))), SampleArg::T(s.Add(Make(dt, {}, Lay::kContiguous, rng, 1, 2))),
                      SampleArg::T(s.Add(Specials(dt)))};
      out.push_back(std::move(s));
    }
  } else if (In(op, {"masked_fill.Scalar", "masked_fill_.Scalar", "masked_fill.Tensor", "masked_fill_.Tensor"})) {
    const bool tensor_value = op.find(".Tensor") != std::string::npos;
    for (ScalarType dt : kAllDtypes) {
      for (ScalarType mask_dt : {ScalarType::kBool, ScalarType::kUInt8, ScalarType::kInt32}) {
        for (int li : {0, 2, 6}) {
          const PairLayout& p = kPairs[li];
          Sample s = NewSample(op, absl::StrCat(Name(dt), " mask ", Name(mask_dt), " ", p.name));
          s.positional.push_back(SampleArg::T(s.Add(Make(dt, p.a, p.la, rng, -5, 5))));
          s.positional.push_back(SampleArg::T(s.Add(Make(mask_dt, p.b, p.lb, rng, 0, 1))));
          if (tensor_value) {
            s.positional.push_back(SampleArg::T(s.Add(Random(li == 2 ? ScalarType::kFloat64 : dt, {}, rng))));
          } else {
            s.positional.push_back(SampleArg::V(Value(li == 2 ? Scalar::Float(-1.25) : Scalar::Int(4))));
          }
          out.push_back(std::move(s));
        }
      }
    }
  } else if (In(op, {"addcmul", "addcmul_", "addcdiv", "addcdiv_"})) {
    const bool div = op.rfind("addcdiv", 0) == 0;
    for (const Scalar& v : {Scalar::Int(2), Scalar::Float(0.5)}) {
      TernaryTensorSamples(op, out, rng, false, {{"value", SampleArg::V(Value(v))}}, div);
    }
  } else if (op == "lerp.Scalar") {
    for (ScalarType dt : kAllDtypes) {
      for (const Scalar& w : {Scalar::Float(0.25), Scalar::Float(0.75), Scalar::Int(1)}) {
        for (const PairLayout& p : kPairs) {
          Sample s = NewSample(op, absl::StrCat(Name(dt), " ", p.name, " weight ", w.to_double()));
          s.positional.push_back(SampleArg::T(s.Add(Make(dt, p.a, p.la, rng, -5, 5))));
          s.positional.push_back(SampleArg::T(s.Add(Make(dt, p.b, p.lb, rng, -5, 5))));
          s.positional.push_back(SampleArg::V(Value(w)));
          out.push_back(std::move(s));
        }
      }
    }
  } else if (op == "lerp.Tensor") {
    TernaryTensorSamples(op, out, rng, false);
  } else if (In(op, {"sum", "mean"})) {
    const std::vector<Value> dims = {Value(), Value(Shape{1}), Value(Shape{0, 2}), Value(Shape{-1}), Value(Shape{})};
    ReductionSamples(op, out, rng, dims, true);
    for (ScalarType to : {ScalarType::kFloat64, ScalarType::kFloat16, ScalarType::kInt64, ScalarType::kInt32}) {
      ReductionSamples(op, out, rng, {Value(), Value(Shape{-1})}, true, {{"dtype", SampleArg::V(Value(to))}});
    }
  } else if (In(op, {"amax", "amin"})) {
    ReductionSamples(op, out, rng, {Value(Shape{}), Value(Shape{1}), Value(Shape{0, 2}), Value(Shape{-1})}, true);
  } else if (In(op, {"max", "min"})) {
    ReductionSamples(op, out, rng, {Value()}, false);
  } else if (In(op, {"argmax", "argmin"})) {
    ReductionSamples(op, out, rng, {Value(), Value(int64_t{0}), Value(int64_t{-1}), Value(int64_t{1})}, true);
  } else if (In(op, {"max.dim", "min.dim"})) {
    ReductionSamples(op, out, rng, {Value(int64_t{0}), Value(int64_t{-1}), Value(int64_t{1})}, true);
  } else {
    out = IndexSamplesFor(op, seed);
    if (out.empty()) out = RandomSamplesFor(op, seed);
  }
  if (out.empty()) out = MatmulSamples(op, seed);
  if (out.empty()) out = MoreReductionSamplesFor(op, seed);
  if (out.empty()) out = ShapeSamplesFor(op, seed);
  if (out.empty()) out = NnSamplesFor(op, seed);
  if (out.empty()) out = AdvIndexSamplesFor(op, seed);
  if (out.empty()) out = TopkSamplesFor(op, seed);
  return out;
}

std::vector<std::pair<std::string, Tensor>> ReductionSampleInputs(ScalarType dt, std::mt19937& rng) {
  return ReductionInputs(dt, rng);
}

std::vector<ScalarType> SampleDtypes() { return std::vector<ScalarType>(std::begin(kAllDtypes), std::end(kAllDtypes)); }

// ---- large samples ----------------------------------------------------------------

namespace {

// A tensor of `sizes` and `strides` over a fresh storage filled with
// pseudo-random float32, int32 or float16 values, written directly (the
// element-wise helpers of kernel_test_util.h are too slow for 2^25 elements).
Tensor Fast(ScalarType dt, Shape sizes, Shape strides, uint32_t seed) {
  Tensor t;
  t.meta.sizes = std::move(sizes);
  t.meta.strides = std::move(strides);
  t.meta.dtype = dt;
  t.meta.device = kCPU;
  const int64_t bytes = t.meta.StorageBytesNeeded().value();
  t.storage = std::make_shared<std::vector<uint64_t>>(static_cast<size_t>((bytes + 7) / 8));
  char* p = t.base();
  uint32_t x = seed * 2654435761u + 1;
  for (int64_t i = 0; i < bytes / t.meta.itemsize(); ++i) {
    x = x * 1664525u + 1013904223u;
    const float f = static_cast<float>(x >> 8) * 0x1p-21f - 4.0f;  // [-4, 4)
    if (dt == ScalarType::kFloat32) {
      std::memcpy(p + 4 * i, &f, 4);
    } else if (dt == ScalarType::kInt32) {
      const int32_t v = static_cast<int32_t>(x >> 24) - 128;
      std::memcpy(p + 4 * i, &v, 4);
    } else {
      const uint16_t h = cpu::FloatToHalfBits(f);
      std::memcpy(p + 2 * i, &h, 2);
    }
  }
  return t;
}

}  // namespace

std::vector<Sample> LargeSamples() {
  std::vector<Sample> samples;
  const int64_t n = (int64_t{1} << 25) + 4099;
  {
    Sample s;
    s.op = "add.Tensor";
    s.label = "2^25 + 4099 contiguous float32";
    s.positional = {SampleArg::T(s.Add(Fast(ScalarType::kFloat32, {n}, {1}, 1))),
                    SampleArg::T(s.Add(Fast(ScalarType::kFloat32, {n}, {1}, 2)))};
    s.kwargs = {{"alpha", SampleArg::V(Value(Scalar::Float(0.5)))}};
    samples.push_back(std::move(s));
  }
  {
    Sample s;
    s.op = "mul.Tensor";
    s.label = "[2^15, 2^10] float16 * [2^10] int32";
    s.positional = {SampleArg::T(s.Add(Fast(ScalarType::kFloat16, {1 << 15, 1 << 10}, {1 << 10, 1}, 3))),
                    SampleArg::T(s.Add(Fast(ScalarType::kInt32, {1 << 10}, {1}, 4)))};
    samples.push_back(std::move(s));
  }
  {
    Sample s;
    s.op = "to.dtype";
    s.label = "[2^12, 2^13] transposed float32 -> bfloat16";
    s.positional = {SampleArg::T(s.Add(Fast(ScalarType::kFloat32, {1 << 12, 1 << 13}, {1, 1 << 12}, 5))),
                    SampleArg::V(Value(ScalarType::kBFloat16))};
    samples.push_back(std::move(s));
  }
  {
    Sample s;
    s.op = "sum";
    s.label = "2^24 float32 into one";
    s.positional = {SampleArg::T(s.Add(Fast(ScalarType::kFloat32, {1 << 24}, {1}, 6)))};
    samples.push_back(std::move(s));
  }
  {
    Sample s;
    s.op = "amax";
    s.label = "[2^17, 8] float32 over dim 1";
    s.positional = {SampleArg::T(s.Add(Fast(ScalarType::kFloat32, {1 << 17, 8}, {8, 1}, 7))),
                    SampleArg::V(Value(Shape{1}))};
    samples.push_back(std::move(s));
  }
  {
    Sample s;
    s.op = "argmax";
    s.label = "[4096, 64] int32 over dim 0";
    s.positional = {SampleArg::T(s.Add(Fast(ScalarType::kInt32, {4096, 64}, {64, 1}, 8))),
                    SampleArg::V(Value(int64_t{0}))};
    samples.push_back(std::move(s));
  }
  {
    Sample s;
    s.op = "mean";
    s.label = "[64, 2^16] float16 over dim 1, in float32";
    s.positional = {SampleArg::T(s.Add(Fast(ScalarType::kFloat16, {64, 1 << 16}, {1 << 16, 1}, 9))),
                    SampleArg::V(Value(Shape{1}))};
    s.kwargs = {{"dtype", SampleArg::V(Value(ScalarType::kFloat32))}};
    samples.push_back(std::move(s));
  }
  {
    Sample s;
    s.op = "var.dim";
    s.label = "[64, 2^16] float32 over dim 1";
    s.positional = {SampleArg::T(s.Add(Fast(ScalarType::kFloat32, {64, 1 << 16}, {1 << 16, 1}, 10))),
                    SampleArg::V(Value(Shape{1}))};
    samples.push_back(std::move(s));
  }
  {
    Sample s;
    s.op = "logsumexp";
    s.label = "[2^20, 4] float32 over dim 0";
    s.positional = {SampleArg::T(s.Add(Fast(ScalarType::kFloat32, {1 << 20, 4}, {4, 1}, 11))),
                    SampleArg::V(Value(Shape{0}))};
    samples.push_back(std::move(s));
  }
  for (int64_t dim : {0, 1}) {
    Sample s;
    s.op = "cumsum";
    s.label = absl::StrCat("[2^12, 2^10] int32 along dim ", dim);
    s.positional = {SampleArg::T(s.Add(Fast(ScalarType::kInt32, {1 << 12, 1 << 10}, {1 << 10, 1}, 12))),
                    SampleArg::V(Value(dim))};
    samples.push_back(std::move(s));
  }
  return samples;
}

}  // namespace tensord::testing::cudatest
