#include "tensord/meta/autograd_rules.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/tensor_meta.h"

namespace tensord {

bool IsDifferentiableDtype(ScalarType dtype) { return IsFloating(dtype); }

namespace {

// Per schema argument of `e`: whether it is differentiable (see the header).
std::vector<bool> ComputeDifferentiableArgs(const OpEntry& e) {
  static const absl::flat_hash_set<std::string>* kNonDiffNames =
      new absl::flat_hash_set<std::string>{"index", "indices", "mask", "condition", "target"};
  std::vector<bool> d(e.schema.arguments.size(), false);
  if (e.has(kNotDifferentiable)) return d;
  for (size_t i = 0; i < e.schema.arguments.size(); ++i) {
    const Argument& a = e.schema.arguments[i];
    const bool tensorish = a.type == ArgType::kTensor || a.type == ArgType::kTensorList;
    d[i] = tensorish && !kNonDiffNames->contains(a.name);
  }
  return d;
}

}  // namespace

const std::vector<bool>& DifferentiableArgs(const OpEntry& op) {
  // Computed once per entry of the process's table (immutable after
  // startup). An entry of another table (tests build their own) is computed
  // on each call: an id is only a position in its own table.
  static const auto* table = [] {
    const OpTable& t = OpTable::Get();
    auto* v = new std::vector<std::vector<bool>>();
    v->reserve(t.size());
    for (const OpEntry& e : t.entries()) v->push_back(ComputeDifferentiableArgs(e));
    return v;
  }();
  if (op.id < table->size() && &OpTable::Get().at(op.id) == &op) return (*table)[op.id];
  thread_local std::vector<bool> other;
  other = ComputeDifferentiableArgs(op);
  return other;
}

std::string GradFnName(const OpEntry& op) {
  std::string name = op.name();
  // An extension op's namespace is left out ("mylib::scaled_gelu" ->
  // ScaledGeluBackward0), as a built-in op's "aten::" is.
  if (const size_t ns = name.rfind("::"); ns != std::string::npos) name.erase(0, ns + 2);
  if (!name.empty() && name.back() == '_') name.pop_back();
  std::string out;
  bool upper = true;
  for (char c : name) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out.push_back(upper ? absl::ascii_toupper(static_cast<unsigned char>(c)) : c);
    upper = false;
  }
  return out + "Backward0";
}

// ---------------------------------------------------------------- saved reads

namespace {

// What each derivative formula reads of the saved tensors, in the style of
// PyTorch's derivatives.yaml: clauses "WHEN: WHAT ...", separated by ";", in
// the order the formula runs them. WHEN is an argument name (the clause
// applies when that argument gets a gradient) or "*" (always). WHAT is an
// argument name (every tensor of a list), "result" / "resultN" (forward
// output 0 / N), or "saved" (the saved tensors must still be there: PyTorch
// saves something the formula does not need). An empty rule reads nothing.
// A clause "nograd: ARG ..." names differentiable arguments the formula never
// gives a gradient (so no gradient flows on to them).
//
// To add an op's formula: add its row here, saying what the formula reads
// (the daemon checks it under TENSORD_CHECK_SAVED_READS=1, the tests set
// that, and tests/server/autograd_test.cc fails for a formula without a row).
struct RuleRow {
  const char* op;
  const char* rule;
};

constexpr RuleRow kSavedReads[] = {
    // ---- unary
    {"neg", ""},
    {"abs", "self: self"},
    {"sign", ""},
    {"floor", ""},
    {"ceil", ""},
    {"round", ""},
    {"trunc", ""},
    {"relu", "self: result"},
    {"relu_", "self: result"},
    {"exp", "self: result"},
    {"exp2", "self: result"},
    {"expm1", "self: result"},
    {"log", "self: self"},
    {"log2", "self: self"},
    {"log1p", "self: self"},
    {"sqrt", "self: result"},
    {"rsqrt", "self: result"},
    {"sin", "self: self"},
    {"cos", "self: self"},
    {"tanh", "self: result"},
    {"sigmoid", "self: result"},
    {"reciprocal", "self: result"},
    {"erf", "self: self"},
    {"gelu", "self: self"},
    {"silu", "self: self"},
    {"square", "self: self"},
    // ---- binary and ternary
    {"add.Tensor", ""},
    {"add.Scalar", ""},
    {"sub.Tensor", ""},
    {"sub.Scalar", ""},
    {"rsub.Scalar", ""},
    {"add_.Tensor", ""},
    {"add_.Scalar", ""},
    {"sub_.Tensor", ""},
    {"sub_.Scalar", ""},
    {"mul.Tensor", "self: other; other: self"},
    {"mul_.Tensor", "self: other; other: self"},
    {"mul.Scalar", "*: saved"},
    {"mul_.Scalar", "*: saved"},
    {"div.Tensor", "*: other; other: self"},
    {"div_.Tensor", "*: other; other: self"},
    {"div.Tensor_mode", "*: other; other: self"},
    {"div.Scalar", "*: saved"},
    {"div_.Scalar", "*: saved"},
    {"div.Scalar_mode", "*: saved"},
    {"floor_divide", ""},
    {"floor_divide.Scalar", ""},
    {"remainder.Tensor", "other: self other"},
    {"remainder.Scalar", ""},
    {"fmod.Tensor", "other: self other"},
    {"fmod.Scalar", ""},
    {"pow.Tensor_Tensor", "*: self exponent; exponent: result"},
    {"pow.Tensor_Scalar", "self: self"},
    {"pow.Scalar", "exponent: result exponent"},
    {"maximum", "*: self other"},
    {"minimum", "*: self other"},
    {"atan2", "*: self other"},
    {"where.self", "*: condition"},
    {"where.ScalarOther", "*: condition"},
    {"where.ScalarSelf", "*: condition"},
    {"where.Scalar", ""},
    {"clamp", "self: self"},
    {"clamp_", "self: self"},
    {"clamp.Tensor", "*: self min max"},
    {"clamp_.Tensor", "*: self min max"},
    {"clamp_min", "*: self"},
    {"clamp_max", "*: self"},
    {"clamp_min.Tensor", "*: self; self: min; min: min"},
    {"clamp_max.Tensor", "*: self; self: max; max: max"},
    {"masked_fill.Scalar", "self: mask"},
    {"masked_fill_.Scalar", "self: mask"},
    {"masked_fill.Tensor", "self: mask; value: mask"},
    {"masked_fill_.Tensor", "self: mask; value: mask"},
    {"addcmul", "tensor1: tensor2; tensor2: tensor1"},
    {"addcmul_", "tensor1: tensor2; tensor2: tensor1"},
    {"addcdiv", "tensor1: tensor2; tensor2: tensor2 tensor1"},
    {"addcdiv_", "tensor1: tensor2; tensor2: tensor2 tensor1"},
    {"lerp.Scalar", ""},
    {"lerp.Tensor", "*: weight; weight: end self"},
    {"copy_", ""},
    {"zero_", ""},
    {"fill_.Scalar", ""},
    {"uniform_", ""},
    {"normal_", ""},
    // ---- reductions and scans
    {"sum", ""},
    {"mean", ""},
    {"nansum", "self: self"},
    {"prod", "self: self result"},
    {"prod.dim_int", "self: self result"},
    {"amax", "self: self result"},
    {"amin", "self: self result"},
    {"max", "self: self result"},
    {"min", "self: self result"},
    {"max.dim", "self: result1"},
    {"min.dim", "self: result1"},
    {"topk", "self: result1"},
    {"var.correction", "self: self"},
    {"var.dim", "self: self"},
    {"var", "self: self"},
    {"std.correction", "self: self result"},
    {"std.dim", "self: self result"},
    {"std", "self: self result"},
    {"norm.Scalar", "self: self result"},
    {"norm.ScalarOpt_dim", "self: self result"},
    {"norm.ScalarOpt_dim_dtype", "self: self result"},
    {"linalg_vector_norm", "self: self result"},
    {"logsumexp", "self: self result"},
    {"cumsum", ""},
    {"cumprod", "self: self result"},
    {"softmax.int", "self: result"},
    {"log_softmax.int", "self: result"},
    // ---- matmul family
    {"matmul", "self: other; other: self"},
    {"mm", "self: mat2; mat2: self"},
    {"bmm", "self: mat2; mat2: self"},
    {"addmm", "mat1: mat2; mat2: mat1"},
    {"baddbmm", "batch1: batch2; batch2: batch1"},
    {"dot", "self: tensor; tensor: self"},
    {"outer", "self: vec2; vec2: self"},
    {"linear", "input: weight; weight: input"},
    // ---- views, copies, shape ops
    {"view", ""},
    {"reshape", ""},
    {"transpose.int", ""},
    {"permute", ""},
    {"t", ""},
    {"slice.Tensor", ""},
    {"select.int", ""},
    {"narrow", ""},
    {"diagonal", ""},
    {"expand", ""},
    {"squeeze", ""},
    {"squeeze.dim", ""},
    {"unsqueeze", ""},
    {"flatten.using_ints", ""},
    {"contiguous", ""},
    {"clone", ""},
    {"to.dtype", ""},
    {"to.device", ""},
    {"select_backward", ""},
    {"slice_backward", ""},
    {"diagonal_backward", ""},
    {"cat", ""},
    {"stack", ""},
    {"split.Tensor", ""},
    {"split.sizes", ""},
    {"split_with_sizes", ""},
    {"chunk", ""},
    {"unbind.int", ""},
    {"flip", ""},
    {"roll", ""},
    {"repeat", ""},
    {"tril", ""},
    {"triu", ""},
    {"constant_pad_nd", ""},
    // ---- indexing
    {"gather", "self: index"},
    {"index_select", "self: index"},
    {"index.Tensor", "self: indices"},
    {"index_put", "*: indices"},
    {"index_add", "source: index"},
    {"scatter_add", "src: index"},
    {"scatter.src", "self: index; src: index"},
    {"scatter.value", "self: index"},
    {"masked_select", "self: mask"},
    {"masked_scatter", "*: mask"},
    // ---- nn
    {"conv2d", "*: input weight"},
    {"convolution_backward", "*: grad_output input weight"},
    {"max_pool2d_with_indices", "self: self result1"},
    {"max_pool2d_with_indices_backward", "grad_output: indices; nograd: self"},
    {"avg_pool2d", "self: self"},
    {"avg_pool2d_backward", "nograd: self"},
};

// One parsed item: read `what` when argument `when` (-1: always) gets a gradient.
struct ReadItem {
  bool nograd = false;  // a "nograd:" item: argument `index` gets no gradient
  int when = -1;
  SavedRead::Kind kind = SavedRead::Kind::kInput;
  int index = 0;  // kInput: the schema argument; kOutput: the output number
};

[[noreturn]] void BadRule(absl::string_view op, absl::string_view why) {
  // A malformed built-in row is a build bug, caught by every test.
  std::fprintf(stderr, "tensord: saved-reads rule of %s: %s\n", std::string(op).c_str(), std::string(why).c_str());
  std::abort();
}

std::vector<ReadItem> ParseRule(const OpEntry& op, absl::string_view rule) {
  std::vector<ReadItem> out;
  auto arg_index = [&](absl::string_view name) {
    const int i = op.schema.ArgIndex(name);
    if (i < 0) BadRule(op.full_name(), absl::StrCat("no argument '", name, "'"));
    const ArgType t = op.schema.arguments[i].type;
    if (t != ArgType::kTensor && t != ArgType::kTensorList && t != ArgType::kOptionalTensorList) {
      BadRule(op.full_name(), absl::StrCat("argument '", name, "' is not a tensor"));
    }
    return i;
  };
  for (absl::string_view clause : absl::StrSplit(rule, ';', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(clause, absl::MaxSplits(':', 1));
    const absl::string_view when = absl::StripAsciiWhitespace(kv.first);
    const bool nograd = when == "nograd";
    const int w = when == "*" || nograd ? -1 : arg_index(when);
    for (absl::string_view what : absl::StrSplit(kv.second, ' ', absl::SkipWhitespace())) {
      ReadItem it;
      it.when = w;
      it.nograd = nograd;
      if (nograd) {
        it.index = arg_index(what);
      } else if (what == "saved") {
        it.kind = SavedRead::Kind::kAnySaved;
      } else if (absl::ConsumePrefix(&what, "result")) {
        it.kind = SavedRead::Kind::kOutput;
        if (!what.empty() && !absl::SimpleAtoi(what, &it.index)) BadRule(op.full_name(), "bad output number");
        if (op.schema.returns.empty() ||
            (op.schema.returns[0].type != ArgType::kTensorList &&
             it.index >= static_cast<int>(op.schema.returns.size()))) {
          BadRule(op.full_name(), absl::StrCat("no output ", it.index));
        }
      } else {
        it.index = arg_index(what);
      }
      out.push_back(it);
    }
  }
  return out;
}

// Per op id: the parsed rule, or nullopt when the table has no row.
const std::vector<std::optional<std::vector<ReadItem>>>& Rules() {
  static const auto* rules = [] {
    const OpTable& t = OpTable::Get();
    auto* v = new std::vector<std::optional<std::vector<ReadItem>>>(t.size());
    for (const RuleRow& r : kSavedReads) {
      const OpEntry* op = t.Find(r.op);
      if (op == nullptr) BadRule(r.op, "not an op of the table");
      if ((*v)[op->id].has_value()) BadRule(r.op, "listed twice");
      (*v)[op->id] = ParseRule(*op, r.rule);
    }
    return v;
  }();
  return *rules;
}

// The parsed rule of `op`, or nullptr when it has none or is no entry of
// the process's table (ids are positions in their own table only).
const std::vector<ReadItem>* RuleOf(const OpEntry& op) {
  const auto& rules = Rules();
  if (op.id >= rules.size() || &OpTable::Get().at(op.id) != &op || !rules[op.id].has_value()) return nullptr;
  return &*rules[op.id];
}

}  // namespace

std::string SavedRead::ToString() const {
  switch (kind) {
    case Kind::kInput: return absl::StrCat("input ", index);
    case Kind::kOutput: return absl::StrCat("output ", index);
    case Kind::kAnySaved: return "saved";
  }
  return "?";
}

std::vector<SavedRead> PredictSavedReads(const OpEntry& op, absl::Span<const std::vector<int>> arg_slots,
                                         absl::FunctionRef<bool(int slot)> needs_slot) {
  std::vector<SavedRead> out;
  const std::vector<ReadItem>* rule = RuleOf(op);
  if (rule == nullptr) return out;
  auto add = [&](SavedRead r) {
    for (const SavedRead& o : out) {
      if (o == r) return;
    }
    out.push_back(r);
  };
  for (const ReadItem& it : *rule) {
    if (it.nograd) continue;
    if (it.when >= 0) {
      bool needed = false;
      if (static_cast<size_t>(it.when) < arg_slots.size()) {
        for (int s : arg_slots[it.when]) needed = needed || (s >= 0 && needs_slot(s));
      }
      if (!needed) continue;
    }
    switch (it.kind) {
      case SavedRead::Kind::kAnySaved:
      case SavedRead::Kind::kOutput:
        add(SavedRead{it.kind, it.kind == SavedRead::Kind::kOutput ? it.index : 0});
        break;
      case SavedRead::Kind::kInput:
        if (static_cast<size_t>(it.index) < arg_slots.size()) {
          for (int s : arg_slots[it.index]) {
            if (s >= 0) add(SavedRead{SavedRead::Kind::kInput, s});
          }
        }
        break;
    }
  }
  return out;
}

bool FormulaGivesGradient(const OpEntry& op, int arg) {
  const std::vector<ReadItem>* rule = RuleOf(op);
  if (rule == nullptr) return true;
  for (const ReadItem& it : *rule) {
    if (it.nograd && it.index == arg) return false;
  }
  return true;
}

bool FormulaMayReadInput(const OpEntry& op, int arg) {
  const std::vector<ReadItem>* rule = RuleOf(op);
  if (rule == nullptr) return true;
  for (const ReadItem& it : *rule) {
    if (it.nograd) continue;
    if (it.kind == SavedRead::Kind::kAnySaved) return true;
    if (it.kind == SavedRead::Kind::kInput && it.index == arg) return true;
  }
  return false;
}

bool SavedReadsRuleIsEmpty(const OpEntry& op) {
  const std::vector<ReadItem>* rule = RuleOf(op);
  return rule == nullptr || rule->empty();
}

bool HasSavedReadsRule(const OpEntry& op) {
  return RuleOf(op) != nullptr;
}

std::vector<std::string> SavedReadsRuleNames() {
  std::vector<std::string> out;
  for (const RuleRow& r : kSavedReads) out.emplace_back(r.op);
  return out;
}

absl::Status SavedTensorsFreedError() {
  return RuntimeErr(
      "Trying to backward through the graph a second time (or directly access saved tensors after they have "
      "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
      "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or if "
      "you need to access saved tensors after calling backward.");
}

absl::Status SavedTensorModifiedError(ScalarType dtype, absl::Span<const int64_t> sizes,
                                      absl::string_view grad_fn_name, uint32_t output_nr, uint64_t now,
                                      uint64_t expected) {
  std::string owner;
  if (!grad_fn_name.empty()) owner = absl::StrCat(", which is output ", output_nr, " of ", grad_fn_name, ",");
  return RuntimeErr(absl::StrCat(
      "one of the variables needed for gradient computation has been modified by an inplace operation: [torch.",
      DtypeC10Name(dtype), "Tensor ", ShapeToString(sizes), "]", owner, " is at version ", now, "; expected version ",
      expected,
      " instead. Hint: the backtrace further above shows the operation that failed to compute its gradient. The "
      "variable in question was changed in there or anywhere later. Good luck!"));
}

absl::Status CheckBackwardRoots(absl::Span<const BackwardRoot> roots, size_t n_grads) {
  if (n_grads != 0 && n_grads != roots.size()) {
    return RuntimeErr(absl::StrCat("got ", roots.size(), " tensors and ", n_grads, " gradients"));
  }
  const auto torch_size = [](const Shape& s) { return absl::StrCat("torch.Size(", ShapeToString(s), ")"); };
  for (size_t i = 0; i < roots.size(); ++i) {
    const BackwardRoot& r = roots[i];
    if (!r.requires_grad) {
      return RuntimeErr(absl::StrCat("element ", i, " of tensors does not require grad and does not have a grad_fn"));
    }
    if (r.grad == nullptr) {
      if (r.meta->numel() != 1) return RuntimeErr("grad can be implicitly created only for scalar outputs");
      continue;
    }
    if (r.grad->sizes != r.meta->sizes) {
      return RuntimeErr(absl::StrCat("Mismatch in shape: grad_output[", i, "] has a shape of ",
                                     torch_size(r.grad->sizes), " and output[", i, "] has a shape of ",
                                     torch_size(r.meta->sizes), "."));
    }
  }
  return absl::OkStatus();
}

}  // namespace tensord
