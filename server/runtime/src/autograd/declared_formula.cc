// The formula of an op defined at run time with a declared derivative: the
// derivative (tensord/meta/declared_derivative.h) runs with this host, whose
// tensors are the formula context's, so that its reads of saved tensors,
// its errors and its op calls (recorded under create_graph) are a built-in
// formula's.
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "formula_util.h"
#include "tensord/meta/declared_derivative.h"

namespace tensord::runtime {
namespace {

class ContextHost : public DerivativeHost {
 public:
  explicit ContextHost(FormulaContext& c) : c_(c) {}

  int Grad(size_t output) override {
    const Tensor& g = c_.grad(output);
    if (g.defined()) return Keep(g);
    // No gradient flowed to this output (an op of several): zeros of its
    // meta, made without reading the saved output.
    const TensorMeta& m = c_.out_meta(output);
    return Keep(formula_util::Zeros(c_, m.sizes, m.dtype, m.device));
  }
  int Input(int arg) override {
    if (c_.value(Name(arg)).kind() == Value::Kind::kNone) {  // an optional tensor not given
      c_.Fail(RuntimeErr(absl::StrCat(c_.op().full_name(), ": the derivative reads argument '", Name(arg),
                                      "', which is None in this call")));
      return -1;
    }
    return Keep(c_.in(Name(arg)));
  }
  int Output(size_t output) override { return Keep(c_.out(output)); }
  Value Arg(int arg) override { return c_.value(Name(arg)); }
  bool Needs(int arg) override { return c_.needs(Name(arg)); }
  const OpEntry* FindOp(absl::string_view full_name) override {
    return c_.extension_ops() != nullptr ? c_.extension_ops()->Find(full_name) : nullptr;
  }
  std::vector<int> Call(const OpEntry& op, std::vector<DerivativeValue> args) override {
    std::vector<runtime::Arg> a;
    a.reserve(args.size());
    for (DerivativeValue& v : args) {
      if (v.is_tensor) {
        a.emplace_back(tensors_[v.tensor]);
      } else {
        a.emplace_back(std::move(v.value));
      }
    }
    std::vector<Tensor> outs = c_.call_all(op.full_name(), std::move(a));
    std::vector<int> h;
    h.reserve(outs.size());
    for (Tensor& t : outs) h.push_back(Keep(std::move(t)));
    return h;
  }
  bool failed() const override { return !c_.ok(); }

  const Tensor& Get(int handle) const { return tensors_[handle]; }

 private:
  const std::string& Name(int arg) const { return c_.op().schema.arguments[arg].name; }
  int Keep(Tensor t) {
    tensors_.push_back(std::move(t));
    return static_cast<int>(tensors_.size() - 1);
  }

  FormulaContext& c_;
  std::vector<Tensor> tensors_;
};

}  // namespace

std::vector<Tensor> DeclaredFormula(FormulaContext& c) {
  std::vector<Tensor> out = formula_util::Out(c);
  ContextHost host(c);
  absl::StatusOr<std::vector<int>> grads = c.op().declared_derivative->Run(c.op().full_name(), host);
  if (!grads.ok()) {
    if (!host.failed()) c.Fail(grads.status());  // else the context holds the error
    return out;
  }
  for (size_t a = 0; a < grads->size(); ++a) {
    if ((*grads)[a] >= 0) formula_util::Set(c, out, c.op().schema.arguments[a].name, host.Get((*grads)[a]));
  }
  return out;
}

}  // namespace tensord::runtime
