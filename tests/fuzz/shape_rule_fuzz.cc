// Fuzz target: declarative shape rules (meta/src/declared_rule.cc) and
// declared derivatives (meta/src/declared_derivative.cc), text a client
// sends in a definition that the daemon compiles and evaluates. The first
// byte picks one of a few schemas; the rest is the text, compiled as both.
// Any input must compile or give an error status; a compiled rule must run
// over a few argument sets (dense, permuted, 0-dim, empty tensors, extreme
// ints) to outputs or an error status, never a crash, a hang or an output of
// negative size; a compiled derivative must run against a host that makes a
// tensor for every call, with those arguments' non-tensor values, to
// gradients or an error status.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "tensord/meta/declared_derivative.h"
#include "tensord/meta/declared_rule.h"
#include "tensord/meta/op_table.h"

namespace {

using tensord::Shape;
using tensord::TensorMeta;
using tensord::Value;

constexpr const char* kSchemas[] = {
    "fz::f(Tensor x) -> Tensor",
    "fz::f(Tensor x, Tensor bias) -> Tensor",
    "fz::f(Tensor x, int n, bool flag=False) -> (Tensor, Tensor)",
    "fz::f(Tensor x, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
    "fz::f(Tensor x, Tensor? w, Scalar s, str mode='a') -> Tensor",
};

std::vector<std::vector<Value>> ArgSets(size_t schema, const std::vector<TensorMeta>& ts) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  std::vector<std::vector<Value>> sets;
  for (const TensorMeta& t : ts) {
    switch (schema) {
      case 0: sets.push_back({Value(&t)}); break;
      case 1: sets.push_back({Value(&t), Value(&ts[1])}); break;
      case 2:
        for (int64_t n : {int64_t{0}, int64_t{-1}, int64_t{3}, big, std::numeric_limits<int64_t>::min()}) {
          sets.push_back({Value(&t), Value(n), Value(n > 0)});
        }
        break;
      case 3:
        sets.push_back({Value(&t), Value(), Value(false), Value()});
        sets.push_back({Value(&t), Value(Shape{-1}), Value(true), Value(tensord::ScalarType::kInt8)});
        sets.push_back({Value(&t), Value(Shape{big}), Value(true), Value()});
        break;
      default:
        sets.push_back({Value(&t), Value(), Value(tensord::Scalar::Float(2.5)), Value("a")});
        sets.push_back({Value(&t), Value(&ts[0]), Value(tensord::Scalar::Int(-3)), Value("")});
        break;
    }
  }
  return sets;
}

// Tensors are handles only; non-tensor arguments come from one argument set.
class CountingHost : public tensord::DerivativeHost {
 public:
  explicit CountingHost(const std::vector<Value>& args) : args_(args) {}
  int Grad(size_t) override { return ++n_; }
  int Input(int) override { return ++n_; }
  int Output(size_t) override { return ++n_; }
  Value Arg(int a) override { return static_cast<size_t>(a) < args_.size() ? args_[a] : Value(); }
  bool Needs(int) override { return true; }
  const tensord::OpEntry* FindOp(absl::string_view) override { return nullptr; }
  std::vector<int> Call(const tensord::OpEntry& op, std::vector<tensord::DerivativeValue> args) override {
    for (const tensord::DerivativeValue& v : args) {
      if (v.is_tensor && (v.tensor < 0 || v.tensor > n_)) std::abort();  // a handle the host never gave
    }
    std::vector<int> out;
    for (size_t i = 0; i < op.schema.returns.size(); ++i) out.push_back(++n_);
    return out;
  }
  bool failed() const override { return false; }

 private:
  const std::vector<Value>& args_;
  int n_ = 0;
};

void RunDerivative(const tensord::FunctionSchema& schema, absl::string_view text,
                   const std::vector<std::vector<Value>>& arg_sets) {
  absl::StatusOr<std::shared_ptr<const tensord::DeclaredDerivative>> d =
      tensord::DeclaredDerivative::Compile(schema, text);
  if (!d.ok()) return;
  for (const std::vector<Value>& args : arg_sets) {
    CountingHost host(args);
    absl::StatusOr<std::vector<int>> g = (*d)->Run("fz::f", host);
    if (g.ok() && g->size() != schema.arguments.size()) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t which = data[0] % (sizeof(kSchemas) / sizeof(kSchemas[0]));
  const absl::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  absl::StatusOr<tensord::FunctionSchema> schema = tensord::ParseSchema(kSchemas[which]);
  if (!schema.ok()) std::abort();
  const std::vector<TensorMeta> ts = {
      TensorMeta::Contiguous({2, 3}, tensord::ScalarType::kFloat32, tensord::kCPU),
      TensorMeta::Contiguous({3}, tensord::ScalarType::kFloat64, tensord::kCPU),
      TensorMeta::Contiguous({}, tensord::ScalarType::kInt64, tensord::kCPU),
      TensorMeta::Contiguous({0, 4}, tensord::ScalarType::kBool, tensord::kCPU),
      TensorMeta::Contiguous({2, 1, 5}, tensord::ScalarType::kFloat16, tensord::kMetaDevice),
  };
  RunDerivative(*schema, text, ArgSets(which, ts));
  absl::StatusOr<std::shared_ptr<const tensord::DeclaredShapeRule>> rule =
      tensord::DeclaredShapeRule::Compile(*schema, text);
  if (!rule.ok()) return 0;
  for (const std::vector<Value>& args : ArgSets(which, ts)) {
    absl::StatusOr<tensord::MetaResult> r = (*rule)->Run("fz::f", args);
    if (!r.ok()) continue;
    for (const TensorMeta& m : r->outputs) {
      for (int64_t s : m.sizes) {
        if (s < 0) std::abort();
      }
    }
  }
  return 0;
}
