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
#include "tensord/meta/declared_derivative.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/tensor_meta.h"

namespace tensord {

bool IsDifferentiableDtype(ScalarType dtype) { return IsFloating(dtype); }

namespace {

// Per schema argument of `e`: whether it is differentiable (see the header).
std::vector<bool> ComputeDifferentiableArgs(const OpEntry& e) {
  std::vector<bool> d(e.schema.arguments.size(), false);
  if (e.has(kNotDifferentiable)) return d;
  for (size_t i = 0; i < e.schema.arguments.size(); ++i) d[i] = IsDifferentiableArgument(e.schema.arguments[i]);
  return d;
}

}  // namespace

bool IsDifferentiableArgument(const Argument& a) {
  static const absl::flat_hash_set<std::string>* kNonDiffNames =
      new absl::flat_hash_set<std::string>{"index", "indices", "mask", "condition", "target"};
  const bool tensorish = a.type == ArgType::kTensor || a.type == ArgType::kTensorList;
  return tensorish && !kNonDiffNames->contains(a.name);
}

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

using ReadItem = SavedReadsItem;

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

// Per op id: the parsed rule of its record (tensord/meta/ops.inl), or
// nullopt for an op without a derivative.
const std::vector<std::optional<std::vector<ReadItem>>>& Rules() {
  static const auto* rules = [] {
    const OpTable& t = OpTable::Get();
    auto* v = new std::vector<std::optional<std::vector<ReadItem>>>(t.size());
    for (const OpEntry& e : t.entries()) {
      if (e.saved_reads != nullptr) (*v)[e.id] = ParseRule(e, e.saved_reads);
    }
    return v;
  }();
  return *rules;
}

// The rule of `op`: its declared derivative's, else the parsed rule of its
// record; nullptr when it has none or is no entry of
// the process's table (ids are positions in their own table only).
const std::vector<ReadItem>* RuleOf(const OpEntry& op) {
  if (op.declared_derivative != nullptr) return &op.declared_derivative->reads_rule();
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
    // A 0-dim gradient on another device is moved to the root's (the caller
    // does it, as PyTorch's validate_outputs does); any other is refused.
    if (r.grad->device != r.meta->device && r.grad->dim() != 0) {
      return RuntimeErr(absl::StrCat("invalid gradient at index ", i, " - expected device ", r.meta->device.ToString(),
                                     " but got ", r.grad->device.ToString()));
    }
  }
  return absl::OkStatus();
}

}  // namespace tensord
