// Op calls: overload resolution and binding against the op table, the meta
// function run locally, then meta tensors or a call streamed to the session.
#include "tensord/client/ops.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <numeric>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "autograd_internal.h"
#include "tensord/client/autograd.h"
#include "tensord/client/session.h"
#include "tensord/meta/autograd_rules.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/meta_key.h"
#include "tensord/meta/op_table.h"
#include "tensord/meta/schema.h"

namespace tensord::client {

void CountMetaOp();  // session.cc

namespace {

thread_local std::vector<Device> t_device_stack;
std::atomic<bool> g_force_meta{false};  // ForceMetaDevice (tensord check)

// The Values of a call plus the Tensors they point into (kept alive for the
// duration of the call; Value tensor pointers are &impl->meta).
struct Converted {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> kwargs;
  std::vector<Tensor> tensors;
  // The call's arguments as given (alive for the whole call): their kinds
  // ("Tensor", "int", ...) are named only in error messages.
  const std::vector<Arg>* args = nullptr;
  const Kwargs* given_kwargs = nullptr;
};

std::string KindText(const Arg& a) {
  switch (a.kind()) {
    case Arg::kTensor: return "Tensor";
    case Arg::kTensorList:
    case Arg::kOptionalTensorList: return "list of Tensors";
    case Arg::kValue: break;
  }
  switch (a.value().kind()) {
    case Value::Kind::kNone: return "None";
    case Value::Kind::kScalar: return "Number";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kIntList: return "tuple of ints";
    case Value::Kind::kFloatList: return "tuple of floats";
    case Value::Kind::kString: return "str";
    case Value::Kind::kDtype: return "dtype";
    case Value::Kind::kDevice: return "device";
    default: return std::string(ValueKindName(a.value().kind()));
  }
}

absl::StatusOr<Value> ToValue(absl::string_view op, const Arg& a, std::vector<Tensor>* keep) {
  switch (a.kind()) {
    case Arg::kValue:
      if (a.value().kind() == Value::Kind::kTensor || a.value().kind() == Value::Kind::kTensorList) {
        return InternalErr(absl::StrCat(op, ": a tensor passed as a raw Value (pass the Tensor itself)"));
      }
      return a.value();
    case Arg::kTensor: {
      const std::optional<Tensor>& t = a.tensors()[0];
      if (!t || !t->defined()) return TypeErr(absl::StrCat(op, "(): an undefined Tensor was passed"));
      keep->push_back(*t);
      return Value(&t->impl()->meta);
    }
    case Arg::kTensorList:
    case Arg::kOptionalTensorList: {
      TensorList list;
      for (const std::optional<Tensor>& t : a.tensors()) {
        if (!t.has_value()) {
          if (a.kind() == Arg::kTensorList) return TypeErr(absl::StrCat(op, "(): None in a list of Tensors"));
          list.push_back(nullptr);
          continue;
        }
        if (!t->defined()) return TypeErr(absl::StrCat(op, "(): an undefined Tensor was passed"));
        keep->push_back(*t);
        list.push_back(&t->impl()->meta);
      }
      return Value(std::move(list));
    }
  }
  return InternalErr("unknown Arg kind");
}

bool IsIntValue(const Value& v) { return v.kind() == Value::Kind::kInt; }

// The argument list of an internal call, each Arg built in place: a braced
// list would construct every Arg and then copy it (and with it every
// Tensor's reference) into the vector.
template <typename... A>
std::vector<Arg> Args(A&&... a) {
  std::vector<Arg> v;
  v.reserve(sizeof...(A));
  (v.emplace_back(std::forward<A>(a)), ...);
  return v;
}

// Arranges the call's positional values for one overload: a method's self
// goes to the argument named "self"; varargs ints become the int list when
// that list is the overload's only positional argument (PyTorch's parser).
// Returns false when the overload cannot take a method call.
bool Arrange(const OpEntry& op, CallMode mode, std::vector<Value>& positional,
             std::vector<std::pair<std::string, Value>>& kwargs) {
  const FunctionSchema& s = op.schema;
  int self_idx = -1;
  std::optional<Value> self;
  if (mode == CallMode::kMethod) {
    self_idx = s.ArgIndex("self");
    if (self_idx < 0 || s.arguments[self_idx].type != ArgType::kTensor || positional.empty()) return false;
    self = std::move(positional[0]);
    positional.erase(positional.begin());
  }
  // Varargs int lists.
  int n_positional = 0, first_positional = -1;
  for (int i = 0; i < static_cast<int>(s.arguments.size()); ++i) {
    if (!s.arguments[i].kwarg_only && i != self_idx) {
      if (n_positional++ == 0) first_positional = i;
    }
  }
  if (n_positional == 1 && s.arguments[first_positional].type == ArgType::kIntList &&
      positional.size() >= 2 && std::all_of(positional.begin(), positional.end(), IsIntValue)) {
    Shape ints;
    for (const Value& v : positional) ints.push_back(v.to_int());
    positional.clear();
    positional.emplace_back(std::move(ints));
  }
  if (self.has_value()) {
    if (static_cast<size_t>(self_idx) <= positional.size()) {
      positional.insert(positional.begin() + self_idx, std::move(*self));
    } else {
      kwargs.emplace_back("self", std::move(*self));
    }
  }
  return true;
}

// Whether BindArgs fails for sure, judged cheaply: more positional values
// than positional arguments, a non-None non-Tensor for a Tensor argument, or
// a Tensor for an argument of another type (BindArgs converts neither way).
bool CannotBind(const FunctionSchema& s, const std::vector<Value>& positional) {
  size_t max_positional = 0;
  while (max_positional < s.arguments.size() && !s.arguments[max_positional].kwarg_only) ++max_positional;
  if (positional.size() > max_positional) return true;
  const size_t n = positional.size();
  for (size_t i = 0; i < n; ++i) {
    const Value& v = positional[i];
    if (v.is_none()) continue;
    const bool is_tensor_arg = s.arguments[i].type == ArgType::kTensor;
    const bool is_tensor_value = v.kind() == Value::Kind::kTensor;
    if (is_tensor_arg != is_tensor_value) return true;
  }
  return false;
}

struct Bound {
  const OpEntry* op = nullptr;
  std::vector<Value> values;
};

// Consumes c.positional and c.kwargs.
absl::StatusOr<Bound> Resolve(absl::string_view name, Converted& c, CallMode mode) {
  const OpTable& table = OpTable::Get();
  absl::InlinedVector<const OpEntry*, 8> candidates;
  if (const OpEntry* exact = table.Find(name); exact != nullptr && name.find('.') != absl::string_view::npos) {
    candidates.push_back(exact);
  } else {
    for (const OpEntry* e : table.Overloads(name)) {
      if (mode == CallMode::kMethod && !e->has(kMethod)) continue;
      if (mode == CallMode::kFunction && !e->has(kFunction)) continue;
      candidates.push_back(e);
    }
  }
  if (candidates.empty()) {
    if (table.Overloads(name).empty() && table.Find(name) == nullptr) {
      return TypeErr(absl::StrCat("unknown op '", name, "': it is not in the op table"));
    }
    return TypeErr(absl::StrCat("'", name, "' is not available as a ",
                                mode == CallMode::kMethod ? "Tensor method" : "function"));
  }
  // Candidates CannotBind rules out are skipped without building BindArgs'
  // error (a number for `Tensor other` in add.Tensor, before add.Scalar
  // binds); their errors are made only when no candidate binds, from the
  // values kept intact for that.
  std::vector<absl::Status> errors(candidates.size());
  bool any_skipped = false;
  for (size_t ci = 0; ci < candidates.size(); ++ci) {
    const OpEntry* e = candidates[ci];
    // The last candidate takes the converted values when no earlier one was
    // skipped; others copy them.
    const bool take = ci + 1 == candidates.size() && !any_skipped;
    std::vector<Value> positional = take ? std::move(c.positional) : c.positional;
    std::vector<std::pair<std::string, Value>> kwargs = take ? std::move(c.kwargs) : c.kwargs;
    if (!Arrange(*e, mode, positional, kwargs)) {
      errors[ci] = TypeErr(absl::StrCat(e->full_name(), " cannot be called as a method"));
      continue;
    }
    if (!take && CannotBind(e->schema, positional)) {
      any_skipped = true;
      continue;  // errors[ci] stays OK: filled below if needed
    }
    absl::StatusOr<std::vector<Value>> b = BindArgs(e->schema, std::move(positional), std::move(kwargs));
    if (b.ok()) return Bound{e, *std::move(b)};
    errors[ci] = b.status();
  }
  for (size_t ci = 0; ci < candidates.size() && any_skipped; ++ci) {
    if (!errors[ci].ok()) continue;
    std::vector<Value> positional = c.positional;
    std::vector<std::pair<std::string, Value>> kwargs = c.kwargs;
    Arrange(*candidates[ci], mode, positional, kwargs);
    errors[ci] = BindArgs(candidates[ci]->schema, std::move(positional), std::move(kwargs)).status();
    if (errors[ci].ok()) return InternalErr(absl::StrCat(name, ": an overload skipped as a mismatch binds"));
  }
  if (errors.size() == 1) return errors[0];
  std::string got;
  if (c.args != nullptr) {
    for (const Arg& a : *c.args) absl::StrAppend(&got, got.empty() ? "" : ", ", KindText(a));
  }
  if (c.given_kwargs != nullptr) {
    for (const auto& [k, a] : *c.given_kwargs) absl::StrAppend(&got, got.empty() ? "" : ", ", k, "=", KindText(a));
  }
  std::string expected;
  for (size_t i = 0; i < candidates.size(); ++i) {
    absl::StrAppend(&expected, "\n * ", candidates[i]->schema_text, "\n     (", errors[i].message(), ")");
  }
  return TypeErr(absl::StrCat(name, "() received an invalid combination of arguments - got (", got,
                              "), but expected one of:", expected));
}

absl::StatusOr<Converted> Convert(absl::string_view name, std::vector<Arg>& args, Kwargs& kwargs) {
  Converted c;
  c.args = &args;
  c.given_kwargs = &kwargs;
  c.positional.reserve(args.size());
  c.tensors.reserve(args.size() + kwargs.size());
  for (const Arg& a : args) {
    TD_ASSIGN_OR_RETURN(Value v, ToValue(name, a, &c.tensors));
    c.positional.push_back(std::move(v));
  }
  c.kwargs.reserve(kwargs.size());
  for (auto& [k, a] : kwargs) {
    TD_ASSIGN_OR_RETURN(Value v, ToValue(name, a, &c.tensors));
    c.kwargs.emplace_back(k, std::move(v));
  }
  return c;
}

absl::StatusOr<std::shared_ptr<Session>> SessionFor(const OpEntry& op, absl::Span<const Tensor> tensors) {
  std::shared_ptr<Session> s;
  for (const Tensor& t : tensors) {
    if (t.is_meta()) continue;
    if (s == nullptr) {
      s = t.session();
    } else if (t.session() != s) {
      return RuntimeErr(absl::StrCat(op.full_name(), ": tensors belong to different sessions (",
                                     s->label(), " and ", t.session()->label(),
                                     "); a tensor can only be used in the session that created it"));
    }
  }
  if (s != nullptr) {
    if (s->closed()) {
      return RuntimeErr(absl::StrCat(op.full_name(), ": ", s->label(),
                                     " is closed; its tensors can no longer be used"));
    }
    return s;
  }
  return CurrentSession();
}

// Meta tensors for `metas` (moved from).
std::vector<Tensor> MakeMetaTensors(absl::Span<TensorMeta> metas,
                                    const std::vector<std::optional<Tensor>>& write_results = {}) {
  std::vector<Tensor> out;
  out.reserve(metas.size());
  for (size_t i = 0; i < metas.size(); ++i) {
    if (i < write_results.size() && write_results[i].has_value()) {
      out.push_back(*write_results[i]);  // an in-place op returns self
    } else {
      out.emplace_back(std::make_shared<TensorImpl>(nullptr, 0, std::move(metas[i])));
    }
  }
  CountMetaOp();
  return out;
}

// ---- autograd ---------------------------------------------------------------

// What autograd does with one call: whether it is recorded (grad mode on, the
// op differentiable, some differentiable input requires grad — the daemon
// applies the same rule), the new node's edges, and for in-place ops the
// Tensor each aliased-write return gives back.
struct AutogradPlan {
  bool record = false;
  std::vector<std::pair<std::shared_ptr<GradNode>, int>> edges;
  std::vector<std::optional<Tensor>> write_results;  // per output; empty when none
  // Meta calls: what the node's backward will read (GradNode::saved_reads),
  // and per edge whether its formula gives that input a gradient.
  std::vector<SavedMeta> saved_reads;
  bool reads_saved = false;
  std::vector<bool> edge_gives;
};

// The input tensors of a bound call that autograd and aliasing look at, as
// pointers to the call's Tensors: computed from the bound values (Roles), or
// from a cached call's positions in the flat list of the call's tensors.
struct CallRoles {
  // Differentiable tensor inputs in schema order (tensor lists flattened);
  // nullptr for a None item of a Tensor?[] list.
  absl::InlinedVector<const Tensor*, 4> diff_inputs;
  // Per schema return (op.return_aliases): the written argument an in-place
  // return gives back, else nullptr.
  absl::InlinedVector<const Tensor*, 2> written;
  // Per output: the argument tensor the output views (MetaResult::alias_of),
  // else nullptr.
  absl::InlinedVector<const Tensor*, 2> alias_base;
  // Every tensor argument in schema order, as the daemon's node numbers its
  // input slots: (argument index, tensor), tensor lists flattened, nullptr for
  // a None item of a list (a None Tensor? argument has no entry).
  absl::InlinedVector<std::pair<int, const Tensor*>, 4> slots;
};

const Tensor* TensorFor(const TensorMeta* m, const std::vector<Tensor>& tensors) {
  if (m == nullptr) return nullptr;
  for (const Tensor& t : tensors) {
    if (&t.impl()->meta == m) return &t;
  }
  return nullptr;
}

absl::StatusOr<CallRoles> Roles(const OpEntry& op, const std::vector<Value>& values, const std::vector<Tensor>& tensors,
                                const std::vector<int>& alias_of) {
  CallRoles r;
  const std::vector<bool>& diff = DifferentiableArgs(op);
  for (size_t i = 0; i < values.size() && i < diff.size(); ++i) {
    if (!diff[i]) continue;
    const Value& v = values[i];
    if (v.kind() == Value::Kind::kTensor) {
      r.diff_inputs.push_back(TensorFor(&v.tensor(), tensors));
    } else if (v.kind() == Value::Kind::kTensorList) {
      for (const TensorMeta* m : v.tensor_list()) r.diff_inputs.push_back(TensorFor(m, tensors));
    }
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const Value& v = values[i];
    if (v.kind() == Value::Kind::kTensor) {
      if (const Tensor* t = TensorFor(&v.tensor(), tensors)) r.slots.emplace_back(static_cast<int>(i), t);
    } else if (v.kind() == Value::Kind::kTensorList) {
      for (const TensorMeta* m : v.tensor_list()) r.slots.emplace_back(static_cast<int>(i), TensorFor(m, tensors));
    }
  }
  r.written.assign(op.return_aliases.size(), nullptr);
  for (size_t i = 0; i < op.return_aliases.size(); ++i) {
    const int a = op.return_aliases[i];
    if (a < 0 || !op.schema.arguments[a].is_write) continue;
    const Tensor* self = values[a].kind() == Value::Kind::kTensor ? TensorFor(&values[a].tensor(), tensors) : nullptr;
    if (self == nullptr) return InternalErr(absl::StrCat(op.full_name(), ": the written argument is not a tensor"));
    r.written[i] = self;
  }
  r.alias_base.assign(alias_of.size(), nullptr);
  for (size_t i = 0; i < alias_of.size(); ++i) {
    const int a = alias_of[i];
    if (a < 0 || static_cast<size_t>(a) >= values.size() || values[a].kind() != Value::Kind::kTensor) continue;
    r.alias_base[i] = TensorFor(&values[a].tensor(), tensors);
  }
  return r;
}

absl::StatusOr<AutogradPlan> PlanAutograd(const OpEntry& op, const CallRoles& roles) {
  AutogradPlan p;
  bool any_requires_grad = false;
  for (const Tensor* t : roles.diff_inputs) any_requires_grad |= t != nullptr && t->requires_grad();
  p.record = IsGradEnabled() && !op.has(kNotDifferentiable) && any_requires_grad;
  for (size_t i = 0; i < roles.written.size(); ++i) {
    const Tensor* self = roles.written[i];
    if (self == nullptr) continue;
    if (IsGradEnabled() && self->requires_grad() && self->is_leaf()) {
      return RuntimeErr("a leaf Variable that requires grad is being used in an in-place operation.");
    }
    if (p.record && self->impl()->is_view) {
      return NotImplementedErr(absl::StrCat(
          op.full_name(), ": an in-place operation on a view is not supported while recording gradients (tensord's "
                          "autograd does not rebase views); clone() the view first, or run it under no_grad()"));
    }
    if (p.write_results.empty()) p.write_results.resize(op.schema.returns.size());
    p.write_results[i] = *self;
  }
  if (p.record) {
    for (const Tensor* t : roles.diff_inputs) {
      p.edges.push_back(t != nullptr ? internal::GradEdge(t->impl()) : std::make_pair(nullptr, 0));
    }
  }
  return p;
}


// An output that aliases an argument (a view) views that argument's storage:
// it takes the argument tensor's storage_id (and on meta its version counter).
void ShareStorageIds(const CallRoles& roles, std::vector<Tensor>& outs) {
  for (size_t i = 0; i < outs.size() && i < roles.alias_base.size(); ++i) {
    const Tensor* base = roles.alias_base[i];
    if (base != nullptr && base->impl() != outs[i].impl()) {
      outs[i].impl()->storage_id = base->impl()->storage_id;
      outs[i].impl()->storage_bytes = base->impl()->storage_bytes;
      outs[i].impl()->version_counter = internal::VersionCounter(*base->impl());
    }
  }
}

// A meta call recorded for autograd: what its node's backward will read
// (tensord/meta/autograd_rules.h), with the version of each tensor now, after
// an in-place op's write, as the daemon's node saves it. An in-place op's
// `self` as it was before the op is a snapshot (the daemon saves a copy).
void PlanMetaSavedReads(const OpEntry& op, const CallRoles& roles, const std::vector<Tensor>& outs,
                        AutogradPlan& p) {
  if (SavedReadsRuleIsEmpty(op)) return;  // reads nothing; every edge gets a gradient
  const std::vector<bool>& diff = DifferentiableArgs(op);
  std::vector<std::vector<int>> arg_slots(op.schema.arguments.size());
  absl::InlinedVector<const Tensor*, 4> slot_tensor;
  absl::InlinedVector<bool, 4> slot_needs;
  for (const auto& [a, t] : roles.slots) {
    if (t == nullptr) {
      arg_slots[a].push_back(-1);
      continue;
    }
    arg_slots[a].push_back(static_cast<int>(slot_tensor.size()));
    slot_tensor.push_back(t);
    slot_needs.push_back(static_cast<size_t>(a) < diff.size() && diff[a] && t->requires_grad());
  }
  // The node's edges are the differentiable arguments' tensors, in order.
  for (const auto& [a, t] : roles.slots) {
    if (static_cast<size_t>(a) < diff.size() && diff[a]) p.edge_gives.push_back(FormulaGivesGradient(op, a));
  }
  const std::vector<SavedRead> reads = PredictSavedReads(op, arg_slots, [&](int s) { return slot_needs[s]; });
  p.reads_saved = !reads.empty();
  for (const SavedRead& r : reads) {
    SavedMeta m;
    if (r.kind == SavedRead::Kind::kInput) {
      // An in-place op's self is saved as it was before: no version to track.
      m = internal::DescribeSaved(slot_tensor[r.index]->impl(), !(op.is_inplace() && r.index == 0));
      // Another argument sharing self's storage (x.mul_(x)) is saved as it
      // was before the write: the version before this op's bump, as the
      // daemon's node records it, so that reading it fails at backward().
      if (op.is_inplace() && r.index != 0 && !slot_tensor.empty() && m.version_counter != nullptr &&
          m.version_counter == slot_tensor[0]->impl()->version_counter && m.version > 0) {
        --m.version;
      }
    } else if (r.kind == SavedRead::Kind::kOutput) {
      if (static_cast<size_t>(r.index) >= outs.size()) continue;
      m = internal::DescribeSaved(outs[r.index].impl(), /*track_version=*/true);
      m.grad_fn_name = GradFnName(op);  // the output's grad_fn is set later
      m.tensor.reset();                 // named by this node, as in the daemon
      m.output_nr = static_cast<uint32_t>(r.index);
    } else {
      continue;  // kAnySaved: only reads_saved
    }
    p.saved_reads.push_back(std::move(m));
  }
}

// Sets the outputs' requires_grad / grad_fn / is_view after the call; an
// in-place op's self is rebased onto the new node when the call is recorded.
void ApplyAutograd(const OpEntry& op, AutogradPlan& p, const std::vector<int>& alias_of, std::vector<Tensor>& outs) {
  std::shared_ptr<GradNode> node;
  if (p.record) {
    node = std::make_shared<GradNode>();
    node->name = GradFnName(op);
    node->next_functions = std::move(p.edges);
    node->seq = internal::NextNodeSeq();
    node->saved_reads = std::move(p.saved_reads);
    node->reads_saved = p.reads_saved;
    node->edge_gives = std::move(p.edge_gives);
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    TensorImpl& im = *outs[i].impl();
    const bool rg = p.record && IsDifferentiableDtype(im.meta.dtype);
    const bool written = i < p.write_results.size() && p.write_results[i].has_value();
    if (written) {
      if (rg) {
        im.requires_grad = true;
        im.grad_fn = node;
        im.output_nr = static_cast<int>(i);
        if (im.retains_grad) node->retained.emplace_back(static_cast<int>(i), outs[i].impl());
      }
      continue;
    }
    im.requires_grad = rg;
    im.grad_fn = rg ? node : nullptr;
    im.output_nr = rg ? static_cast<int>(i) : 0;
    im.is_view = i < alias_of.size() && alias_of[i] >= 0 && !op.has(kNotDifferentiable);
  }
}

// A real tensor on `device` with `t`'s sizes, dtype and (when t is dense)
// strides: empty() of the sizes in memory order, permuted back.
absl::StatusOr<Tensor> Placeholder(const Tensor& t, Device device, const CallSite& site) {
  Shape perm(t.dim());
  std::iota(perm.begin(), perm.end(), 0);
  if (t.meta().is_non_overlapping_and_dense()) {
    std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return t.strides()[a] > t.strides()[b]; });
  }
  Shape sizes;
  for (int64_t p : perm) sizes.push_back(t.sizes()[p]);
  TD_ASSIGN_OR_RETURN(Tensor e, Call1("empty", {sizes}, {{"dtype", t.dtype()}, {"device", device}},
                                      CallMode::kFunction, site));
  Shape pos(t.dim());
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) {
    pos[perm[i]] = static_cast<int64_t>(i);
    identity &= perm[i] == static_cast<int64_t>(i);
  }
  if (identity) return e;
  return Call1("permute", {e, pos}, {}, CallMode::kAny, site);
}

absl::StatusOr<Arg> MaterializeMeta(const Arg& a, Device device, const CallSite& site) {
  if (a.kind() == Arg::kTensor && a.tensors()[0].has_value() && a.tensors()[0]->defined() &&
      a.tensors()[0]->is_meta()) {
    TD_ASSIGN_OR_RETURN(Tensor p, Placeholder(*a.tensors()[0], device, site));
    return Arg(p);
  }
  return a;
}

// Runs the meta function of a resolved call (no streaming). Used by Call
// and by compositions that need a prediction.
absl::StatusOr<MetaResult> PredictMeta(const Bound& b) { return OpTable::Get().RunMeta(*b.op, b.values); }

// ---- the meta cache ---------------------------------------------------------
//
// Per thread, a repeated call skips overload resolution, binding, validation
// and the meta function: a meta-only call entirely, a call on daemon tensors
// up to streaming its bound arguments (kept in the entry). The key encodes
// everything those depend on: the op name and call mode; every argument, in
// order, with its kind and value (for a tensor: dtype, device, sizes,
// strides, storage_offset, and which earlier argument is the same tensor);
// keyword names; the innermost DeviceGuard and ForceMetaDevice. The entry
// holds what they produced: the overload, the output metadata, the aliasing
// and which input tensors autograd looks at (by position in the call's flat
// tensor list). Autograd state (requires_grad, grad mode, views, leaves) is
// not in the key: it is applied on every call, hit or miss, by the same code.
// Only successful calls are stored (an error is recomputed every time), and
// the cache is emptied when it holds kMetaCacheCapacity entries.

constexpr size_t kMetaCacheCapacity = 2048;
// Calls with more tensors than this are not cached (the same-tensor scan is
// quadratic; such calls are rare and their meta cost is dominated by data).
constexpr size_t kMetaCacheMaxTensors = 64;

struct MetaCacheEntry {
  const OpEntry* op = nullptr;
  std::vector<TensorMeta> outputs;
  std::vector<int> alias_of;  // MetaResult::alias_of (argument indices)
  // CallRoles as positions in the call's flat tensor list (-1: nullptr).
  absl::InlinedVector<int, 4> diff_inputs;
  absl::InlinedVector<int, 2> written;
  absl::InlinedVector<int, 2> alias_base;
  absl::InlinedVector<std::pair<int, int>, 4> slots;  // (argument, position)
  // A call whose outputs live in a daemon also keeps its bound arguments, to
  // stream them again: `values` with every tensor pointer cleared, and per
  // value the positions of its tensors in the call's flat tensor list (one
  // for a Tensor, one per item for a list; -1 for a None item).
  bool real = false;
  std::vector<Value> values;
  std::vector<absl::InlinedVector<int, 2>> value_tensors;
};

// The key being built: a growable array of words that keeps its storage
// from call to call (no allocation and no zero-filling per call).
class KeyBuffer {
 public:
  void clear() { size_ = 0; }
  void push_back(uint64_t w) { *Extend(1) = w; }
  // Room for n more words, to be written at the returned pointer.
  uint64_t* Extend(size_t n) {
    if (size_ + n > capacity_) Grow(size_ + n);
    uint64_t* at = words_.get() + size_;
    size_ += n;
    return at;
  }
  absl::Span<const uint64_t> span() const { return {words_.get(), size_}; }

 private:
  void Grow(size_t need) {
    const size_t cap = std::max<size_t>(need, 2 * capacity_ + 64);
    std::unique_ptr<uint64_t[]> w(new uint64_t[cap]);
    if (size_ > 0) std::memcpy(w.get(), words_.get(), size_ * sizeof(uint64_t));
    words_ = std::move(w);
    capacity_ = cap;
  }
  std::unique_ptr<uint64_t[]> words_;
  size_t size_ = 0, capacity_ = 0;
};

// Stored keys are vectors, looked up by the span being built.
struct KeyHash {
  using is_transparent = void;
  size_t operator()(absl::Span<const uint64_t> k) const { return absl::Hash<absl::Span<const uint64_t>>{}(k); }
};
struct KeyEq {
  using is_transparent = void;
  bool operator()(absl::Span<const uint64_t> a, absl::Span<const uint64_t> b) const { return a == b; }
};

struct MetaCache {
  bool enabled = true;
  int64_t hits = 0, misses = 0;
  KeyBuffer key;                                  // the current call's key (scratch)
  absl::InlinedVector<const Tensor*, 8> tensors;  // the current call's tensors, flat (scratch)
  absl::flat_hash_map<std::vector<uint64_t>, MetaCacheEntry, KeyHash, KeyEq> entries;

  const MetaCacheEntry* Find() const {
    auto it = entries.find(key.span());
    return it == entries.end() ? nullptr : &it->second;
  }
};

MetaCache& ThreadMetaCache() {
  // Held through a pointer: with the thread_local object itself, GCC
  // const-propagates its address into clones of the key builders, which in
  // a shared object (the Python module) then look the address up again
  // (__tls_get_addr) at every use: about 30 calls per op.
  thread_local const std::unique_ptr<MetaCache> cache = std::make_unique<MetaCache>();
  return *cache;
}

// Key words: values and tensor metadata as tensord/meta/meta_key.h writes
// them (as the daemon's cache does), each tensor behind a tag; every
// variable-length part is preceded by its length, so two different calls
// never encode alike. Tags lie above every Value::Kind (meta_key's first
// word of a value).
enum KeyTag : uint64_t {
  kTagTensor = 100,
  kTagNoneItem,
  kTagTensorList,
  kTagOptionalTensorList,
};

void PutString(KeyBuffer& k, absl::string_view s) {
  k.push_back(s.size());
  for (size_t i = 0; i < s.size(); i += 8) {
    uint64_t w = 0;
    std::memcpy(&w, s.data() + i, std::min<size_t>(8, s.size() - i));
    k.push_back(w);
  }
}

bool PutValue(KeyBuffer& k, const Value& v) {
  const size_t n = meta_key::ValueWords(v);
  if (n == 0) return false;  // raw tensor Values: Convert's error
  meta_key::PutValue(k.Extend(n), v);
  return true;
}

bool PutTensor(MetaCache& mc, const std::optional<Tensor>& t) {
  KeyBuffer& k = mc.key;
  if (!t.has_value()) {
    k.push_back(kTagNoneItem);
    return true;
  }
  if (!t->defined() || mc.tensors.size() >= kMetaCacheMaxTensors) return false;
  const TensorImpl* impl = t->impl().get();
  uint64_t same = 0;  // 1 + the position of the first earlier tensor that is this one
  for (size_t i = 0; i < mc.tensors.size(); ++i) {
    if (mc.tensors[i]->impl().get() == impl) {
      same = i + 1;
      break;
    }
  }
  mc.tensors.push_back(&*t);
  const TensorMeta& m = impl->meta;
  uint64_t* w = k.Extend(2 + meta_key::TensorMetaWords(m));
  *w++ = kTagTensor;
  *w++ = same;
  meta_key::PutTensorMeta(w, m);
  return true;
}

bool PutArg(MetaCache& mc, const Arg& a) {
  switch (a.kind()) {
    case Arg::kValue: return PutValue(mc.key, a.value());
    case Arg::kTensor: return PutTensor(mc, a.tensors()[0]);
    case Arg::kTensorList:
    case Arg::kOptionalTensorList:
      mc.key.push_back(a.kind() == Arg::kTensorList ? kTagTensorList : kTagOptionalTensorList);
      mc.key.push_back(a.tensors().size());
      for (const std::optional<Tensor>& t : a.tensors()) {
        if (!PutTensor(mc, t)) return false;
      }
      return true;
  }
  return false;
}

// Builds the call's key into mc.key and its flat tensor list into
// mc.tensors (the order Convert keeps them in). False when the call cannot
// be cached.
bool EncodeCall(absl::string_view name, const std::vector<Arg>& args, const Kwargs& kwargs, CallMode mode,
                MetaCache& mc) {
  KeyBuffer& k = mc.key;
  k.clear();
  mc.tensors.clear();
  PutString(k, name);
  k.push_back(static_cast<uint64_t>(mode));
  k.push_back(g_force_meta.load(std::memory_order_relaxed));
  const std::vector<Device>& device_stack = t_device_stack;
  if (device_stack.empty()) {
    k.push_back(0);
  } else {
    k.push_back(1);
    k.push_back(meta_key::DeviceWord(device_stack.back()));
  }
  k.push_back(args.size());
  for (const Arg& a : args) {
    if (!PutArg(mc, a)) return false;
  }
  k.push_back(kwargs.size());
  for (const auto& [kw, a] : kwargs) {
    PutString(k, kw);
    if (!PutArg(mc, a)) return false;
  }
  return true;
}

// The end of every call whose outputs' metadata is known, a miss or a meta
// cache hit: autograd's plan, the output tensors (made here on meta, else
// streamed to the daemon with the bound `values`), views' storage ids, then
// autograd's records. `outputs` is moved from.
absl::StatusOr<std::vector<Tensor>> Produce(const OpEntry& op, const CallRoles& roles,
                                            const std::vector<int>& alias_of, absl::Span<TensorMeta> outputs,
                                            bool on_meta, absl::Span<const Value> values,
                                            absl::Span<const Tensor> tensors, CallSite& site) {
  // A conversion that changes nothing (`to` to the same dtype and device
  // without copy=True, `contiguous` of a contiguous tensor) gives back `self`
  // itself, as PyTorch's: no call, no node, a leaf stays that leaf.
  // The name is compared last: most calls are no view of their self.
  if (alias_of.size() == 1 && alias_of[0] == 0 && outputs.size() == 1 && roles.alias_base.size() == 1 &&
      roles.alias_base[0] != nullptr && (op.name() == "to" || op.name() == "contiguous") &&
      outputs[0] == roles.alias_base[0]->impl()->meta) {
    return std::vector<Tensor>{*roles.alias_base[0]};
  }
  TD_ASSIGN_OR_RETURN(AutogradPlan plan, PlanAutograd(op, roles));
  std::vector<Tensor> outs;
  if (on_meta) {
    outs = MakeMetaTensors(outputs, plan.write_results);
  } else {
    // The call leaves for the daemon (may block): a deferred site (Python)
    // is named now. A C++ file:line site is left as it is: the session
    // interns it by file and line without building its text.
    if (site.source != nullptr) site.Resolve();
    TD_ASSIGN_OR_RETURN(std::shared_ptr<Session> s, SessionFor(op, tensors));
    TD_ASSIGN_OR_RETURN(outs, s->EnqueueCall(op, values, tensors, outputs, site, plan.record,
                                             plan.write_results));
  }
  // Meta and daemon graphs alike: the client's walk of backward (meta, and
  // a daemon's predicted backward) checks what each node reads.
  for (const Tensor* w : roles.written) {
    if (w != nullptr) ++*internal::VersionCounter(*w->impl());  // an in-place write, as the daemon's storage version
  }
  if (plan.record) PlanMetaSavedReads(op, roles, outs, plan);
  ShareStorageIds(roles, outs);
  ApplyAutograd(op, plan, alias_of, outs);
  return outs;
}

// Stores a successful meta-only call under `key`. `tensors` is the call's
// flat tensor list (Converted::tensors), which the roles point into.
// `values` (the bound arguments) is given for a call that goes to a daemon.
void RememberMetaCall(std::vector<uint64_t> key, size_t ntensors, const OpEntry& op, const MetaResult& r,
                      const CallRoles& roles, const std::vector<Tensor>& tensors,
                      const std::vector<Value>* values = nullptr) {
  if (tensors.size() != ntensors) return;  // the key's tensors are not Convert's: never expected
  auto pos = [&](const Tensor* t) { return t == nullptr ? -1 : static_cast<int>(t - tensors.data()); };
  MetaCacheEntry e;
  e.op = &op;
  e.outputs = r.outputs;
  e.alias_of = r.alias_of;
  for (const Tensor* t : roles.diff_inputs) e.diff_inputs.push_back(pos(t));
  for (const Tensor* t : roles.written) e.written.push_back(pos(t));
  for (const Tensor* t : roles.alias_base) e.alias_base.push_back(pos(t));
  for (const auto& [a, t] : roles.slots) e.slots.emplace_back(a, pos(t));
  if (values != nullptr) {
    auto meta_pos = [&](const TensorMeta* m) {
      if (m == nullptr) return -1;
      for (size_t i = 0; i < tensors.size(); ++i) {
        if (&tensors[i].meta() == m) return static_cast<int>(i);
      }
      return -2;  // not one of the call's tensors: never expected
    };
    e.real = true;
    e.values = *values;
    e.value_tensors.resize(values->size());
    for (size_t i = 0; i < values->size(); ++i) {
      Value& v = e.values[i];
      if (v.kind() == Value::Kind::kTensor) {
        e.value_tensors[i].push_back(meta_pos(v.tensor_ptr()));
        v = Value(static_cast<const TensorMeta*>(nullptr));
      } else if (v.kind() == Value::Kind::kTensorList) {
        for (const TensorMeta* m : v.tensor_list()) e.value_tensors[i].push_back(meta_pos(m));
        v = Value(TensorList(v.tensor_list().size(), nullptr));
      }
      for (int p : e.value_tensors[i]) {
        if (p == -2) return;
      }
    }
  }
  MetaCache& mc = ThreadMetaCache();
  if (mc.entries.size() >= kMetaCacheCapacity) mc.entries.clear();
  mc.entries.insert_or_assign(std::move(key), std::move(e));
}

// A cache hit: the stored outputs, with autograd and storage ids applied to
// this call's tensors as on a miss.
absl::StatusOr<std::vector<Tensor>> CallCached(const MetaCacheEntry& e, absl::Span<const Tensor* const> tensors,
                                               CallSite& site) {
  auto at = [&](int i) -> const Tensor* { return i < 0 ? nullptr : tensors[i]; };
  CallRoles roles;
  for (int i : e.diff_inputs) roles.diff_inputs.push_back(at(i));
  for (int i : e.written) roles.written.push_back(at(i));
  for (int i : e.alias_base) roles.alias_base.push_back(at(i));
  for (const auto& [a, i] : e.slots) roles.slots.emplace_back(a, at(i));
  // The outputs' metadata is copied (the tensors take it); the small
  // vectors below hold a call's few items without a heap allocation.
  absl::InlinedVector<TensorMeta, 2> outputs(e.outputs.begin(), e.outputs.end());
  if (!e.real) return Produce(*e.op, roles, e.alias_of, absl::MakeSpan(outputs), /*on_meta=*/true, {}, {}, site);
  // Streamed to the daemon as on a miss, with this call's tensors bound
  // where the stored arguments had theirs.
  absl::InlinedVector<Tensor, 4> call_tensors;
  call_tensors.reserve(tensors.size());
  for (const Tensor* t : tensors) call_tensors.push_back(*t);
  absl::InlinedVector<Value, 4> values(e.values.begin(), e.values.end());
  for (size_t i = 0; i < values.size(); ++i) {
    const auto& pos = e.value_tensors[i];
    if (pos.empty()) continue;
    auto meta_at = [&](int p) -> const TensorMeta* { return p < 0 ? nullptr : &call_tensors[p].meta(); };
    if (values[i].kind() == Value::Kind::kTensor) {
      values[i] = Value(meta_at(pos[0]));
    } else {
      TensorList list;
      list.reserve(pos.size());
      for (int p : pos) list.push_back(meta_at(p));
      values[i] = Value(std::move(list));
    }
  }
  return Produce(*e.op, roles, e.alias_of, absl::MakeSpan(outputs), /*on_meta=*/false, values, call_tensors, site);
}

}  // namespace

// ---------------------------------------------------------------- meta cache

MetaCacheInfo GetMetaCacheInfo() {
  const MetaCache& mc = ThreadMetaCache();
  return MetaCacheInfo{mc.enabled, mc.hits, mc.misses, static_cast<int64_t>(mc.entries.size()),
                       static_cast<int64_t>(kMetaCacheCapacity)};
}

void SetMetaCacheEnabled(bool enabled) { ThreadMetaCache().enabled = enabled; }

void ClearMetaCache() {
  MetaCache& mc = ThreadMetaCache();
  mc.entries.clear();
  mc.hits = mc.misses = 0;
}

// ---------------------------------------------------------------- devices

void ForceMetaDevice() { g_force_meta.store(true, std::memory_order_relaxed); }
bool MetaDeviceForced() { return g_force_meta.load(std::memory_order_relaxed); }

DeviceGuard::DeviceGuard(Device device) { PushDefaultDevice(device); }
DeviceGuard::~DeviceGuard() { PopDefaultDevice(); }
void PushDefaultDevice(Device device) { t_device_stack.push_back(device); }
void PopDefaultDevice() {
  if (!t_device_stack.empty()) t_device_stack.pop_back();
}
std::optional<Device> DefaultDevice() {
  if (t_device_stack.empty()) return std::nullopt;
  return t_device_stack.back();
}

// ---------------------------------------------------------------- Call

absl::StatusOr<std::vector<Tensor>> Call(absl::string_view name, std::vector<Arg> args, Kwargs kwargs, CallMode mode,
                                         CallSite site) {
  // A repeated call is answered from the meta cache (and, for daemon
  // tensors, streamed); otherwise the key (when the call can be cached) is
  // kept to store the result.
  std::optional<std::vector<uint64_t>> cache_key;
  size_t cache_ntensors = 0;
  {
    MetaCache& mc = ThreadMetaCache();
    if (mc.enabled && EncodeCall(name, args, kwargs, mode, mc)) {
      if (const MetaCacheEntry* e = mc.Find()) {
        ++mc.hits;
        return CallCached(*e, mc.tensors, site);
      }
      ++mc.misses;
      cache_key.emplace(mc.key.span().begin(), mc.key.span().end());
      cache_ntensors = mc.tensors.size();
    }
  }
  TD_ASSIGN_OR_RETURN(Converted c, Convert(name, args, kwargs));
  TD_ASSIGN_OR_RETURN(Bound b, Resolve(name, c, mode));
  const OpEntry& op = *b.op;

  // Factories without device= follow the innermost DeviceGuard; under
  // ForceMetaDevice every device= argument (factories, *_like, to) is meta.
  if (const int d = op.schema.ArgIndex("device"); d >= 0) {
    if (g_force_meta.load(std::memory_order_relaxed)) {
      if (!b.values[d].is_none() || op.has(kFactory)) b.values[d] = Value(kMetaDevice);
    } else if (op.has(kFactory) && b.values[d].is_none()) {
      if (std::optional<Device> dev = DefaultDevice()) b.values[d] = Value(*dev);
    }
  }
  bool any_meta_input = false, any_real_input = false;
  for (const Tensor& t : c.tensors) (t.is_meta() ? any_meta_input : any_real_input) = true;

  if (op.has(kDataDependent) && any_real_input && !any_meta_input) {
    // Output shapes depend on values: validate, then let the daemon say.
    TD_RETURN_IF_ERROR(ValidateArgs(op.schema, b.values));
    TD_ASSIGN_OR_RETURN(CallRoles roles, Roles(op, b.values, c.tensors, {}));
    TD_ASSIGN_OR_RETURN(AutogradPlan plan, PlanAutograd(op, roles));
    site.Resolve();  // the call leaves for the daemon (may block)
    TD_ASSIGN_OR_RETURN(std::shared_ptr<Session> s, SessionFor(op, c.tensors));
    TD_ASSIGN_OR_RETURN(std::vector<Tensor> outs, s->CallDataDependent(op, b.values, c.tensors, site, plan.record));
    if (plan.record) PlanMetaSavedReads(op, roles, outs, plan);
    ApplyAutograd(op, plan, {}, outs);
    return outs;
  }

  TD_ASSIGN_OR_RETURN(MetaResult r, PredictMeta(b));
  const bool all_meta_outputs =
      std::all_of(r.outputs.begin(), r.outputs.end(), [](const TensorMeta& m) { return m.device.is_meta(); });
  if (all_meta_outputs) {
    TD_ASSIGN_OR_RETURN(CallRoles roles, Roles(op, b.values, c.tensors, r.alias_of));
    if (cache_key.has_value()) RememberMetaCall(std::move(*cache_key), cache_ntensors, op, r, roles, c.tensors);
    return Produce(op, roles, r.alias_of, absl::MakeSpan(r.outputs), /*on_meta=*/true, {}, {}, site);
  }
  if (any_meta_input) {
    const TensorMeta& real = *std::find_if(r.outputs.begin(), r.outputs.end(),
                                           [](const TensorMeta& m) { return !m.device.is_meta(); });
    if (!op.has(kFactory) && op.schema.ArgIndex("device") >= 0) {
      // A *_like op reads only its input's metadata (empty_like(t,
      // device="cpu") of a meta t): the daemon gets a real placeholder with
      // the same sizes, strides and dtype, made without data.
      site.Resolve();
      for (Arg& a : args) {
        TD_ASSIGN_OR_RETURN(a, MaterializeMeta(a, real.device, site));
      }
      for (auto& kv : kwargs) {
        TD_ASSIGN_OR_RETURN(kv.second, MaterializeMeta(kv.second, real.device, site));
      }
      return Call(name, std::move(args), std::move(kwargs), mode, std::move(site));
    }
    return RuntimeErr(absl::StrCat(op.full_name(), ": Expected all tensors to be on the same device, but found at least ",
                                   "two devices, meta and ", real.device.ToString(), "!"));
  }
  TD_ASSIGN_OR_RETURN(CallRoles roles, Roles(op, b.values, c.tensors, r.alias_of));
  if (cache_key.has_value()) {
    RememberMetaCall(std::move(*cache_key), cache_ntensors, op, r, roles, c.tensors, &b.values);
  }
  return Produce(op, roles, r.alias_of, absl::MakeSpan(r.outputs), /*on_meta=*/false, b.values, c.tensors, site);
}

absl::StatusOr<Tensor> Call1(absl::string_view name, std::vector<Arg> args, Kwargs kwargs, CallMode mode,
                             CallSite site) {
  TD_ASSIGN_OR_RETURN(std::vector<Tensor> out, Call(name, std::move(args), std::move(kwargs), mode, std::move(site)));
  if (out.size() != 1) {
    return InternalErr(absl::StrCat(name, " returned ", out.size(), " tensors; Call1 expects exactly one"));
  }
  return std::move(out[0]);
}

// ---------------------------------------------------------------- host data

absl::StatusOr<Tensor> FromBlob(const void* data, size_t nbytes, Shape sizes, ScalarType dtype,
                                std::optional<Device> device, CallSite site) {
  TD_ASSIGN_OR_RETURN(int64_t numel, CheckedNumel(sizes));
  const int64_t expect = numel * ItemSize(dtype);
  if (numel > (int64_t{1} << 62) / 8 || static_cast<int64_t>(nbytes) != expect) {
    return RuntimeErr(absl::StrCat("from_blob: ", nbytes, " bytes given for a tensor of sizes ", ShapeToString(sizes),
                                   " and dtype ", DtypeName(dtype), " (", expect, " bytes expected)"));
  }
  const Device dev = device ? *device : DefaultDevice().value_or(kCPU);
  TensorMeta meta = TensorMeta::Contiguous(std::move(sizes), dtype, dev);
  if (dev.is_meta()) {
    std::vector<TensorMeta> m;
    m.push_back(std::move(meta));
    return std::move(MakeMetaTensors(absl::MakeSpan(m))[0]);
  }
  site.Resolve();
  TD_ASSIGN_OR_RETURN(std::shared_ptr<Session> s, CurrentSession());
  return s->Upload(data, nbytes, meta, site);
}

absl::StatusOr<Tensor> FromVector(const std::vector<float>& v, Shape sizes, std::optional<Device> device,
                                  CallSite site) {
  return FromBlob(v.data(), v.size() * sizeof(float), std::move(sizes), ScalarType::kFloat32, device, std::move(site));
}

absl::StatusOr<Tensor> FromVector(const std::vector<int64_t>& v, Shape sizes, std::optional<Device> device,
                                  CallSite site) {
  return FromBlob(v.data(), v.size() * sizeof(int64_t), std::move(sizes), ScalarType::kInt64, device,
                  std::move(site));
}

// ---------------------------------------------------------------- indexing

absl::StatusOr<Tensor> Index(const Tensor& self, absl::Span<const TensorIndex> indices, CallSite site) {
  if (!self.defined()) return TypeErr("index: the tensor is undefined");
  // Dims the index expression consumes (PyTorch's count_specified_dimensions).
  int64_t specified = 0;
  int ellipses = 0;
  for (const TensorIndex& idx : indices) {
    if (std::holds_alternative<int64_t>(idx) || std::holds_alternative<Slice>(idx)) {
      ++specified;
    } else if (const Tensor* t = std::get_if<Tensor>(&idx)) {
      if (!t->defined()) return TypeErr("index: an undefined Tensor was used as an index");
      specified += t->dtype() == ScalarType::kBool ? std::max<int64_t>(t->dim(), 1) : 1;
    } else if (std::holds_alternative<EllipsisIndex>(idx)) {
      if (++ellipses > 1) return IndexErr("an index can only have a single ellipsis ('...')");
    }
  }
  if (specified > self.dim()) {
    return IndexErr(absl::StrCat("too many indices for tensor of dimension ", self.dim()));
  }
  Tensor result = self;
  int64_t dim = 0;
  // Advanced indices by result dim (as PyTorch records them).
  std::vector<std::optional<Tensor>> advanced;
  auto record = [&](int64_t d, const Tensor& t) {
    if (static_cast<int64_t>(advanced.size()) <= d) advanced.resize(d + 1);
    advanced[d] = t;
  };
  bool has_mask = false;
  for (const TensorIndex& idx : indices) {
    if (const int64_t* i = std::get_if<int64_t>(&idx)) {
      TD_ASSIGN_OR_RETURN(result, Call1("select.int", Args(result, dim, *i), {}, CallMode::kAny, site));
    } else if (const Slice* sl = std::get_if<Slice>(&idx)) {
      const bool trivial = !sl->start && !sl->stop && (!sl->step || *sl->step == 1);
      if (!trivial) {
        Arg start = sl->start ? Arg(*sl->start) : Arg();
        Arg stop = sl->stop ? Arg(*sl->stop) : Arg();
        TD_ASSIGN_OR_RETURN(result, Call1("slice.Tensor", {result, dim, start, stop, sl->step.value_or(1)}, {},
                                          CallMode::kAny, site));
      }
      ++dim;
    } else if (std::holds_alternative<NoneIndex>(idx)) {
      TD_ASSIGN_OR_RETURN(result, Call1("unsqueeze", Args(result, dim), {}, CallMode::kAny, site));
      ++dim;
    } else if (std::holds_alternative<EllipsisIndex>(idx)) {
      dim += self.dim() - specified;
    } else if (const bool* b = std::get_if<bool>(&idx)) {
      TD_ASSIGN_OR_RETURN(result, Call1("unsqueeze", Args(result, dim), {}, CallMode::kAny, site));
      if (!*b) {
        TD_ASSIGN_OR_RETURN(result, Call1("narrow", {result, dim, 0, 0}, {}, CallMode::kAny, site));
      }
      ++dim;
    } else if (const Tensor* t = std::get_if<Tensor>(&idx)) {
      if (t->dtype() == ScalarType::kBool) {
        // A mask covers t.dim() dims, which must match the indexed sizes.
        const int64_t nd = std::max<int64_t>(t->dim(), 1);
        for (int64_t j = 0; j < t->dim(); ++j) {
          if (dim + j >= result.dim() || t->sizes()[j] != result.sizes()[dim + j]) {
            return IndexErr(absl::StrCat("The shape of the mask ", ShapeToString(t->sizes()), " at index ", j,
                                         " does not match the shape of the indexed tensor ",
                                         ShapeToString(result.sizes()), " at index ", dim + j));
          }
        }
        record(dim, *t);
        has_mask = true;
        dim += nd;
      } else {
        record(dim, *t);
        ++dim;
      }
    }
  }
  if (advanced.empty()) {
    if (result.impl() == self.impl()) {
      // x[...], x[:] or x[()] — PyTorch returns a view (an alias), not self;
      // a view of the same sizes is always valid, whatever the strides.
      TD_ASSIGN_OR_RETURN(result, Call1("view", {result, result.sizes()}, {}, CallMode::kAny, site));
    }
    return result;
  }
  if (has_mask) {
    int n_adv = 0;
    for (const auto& a : advanced) n_adv += a.has_value();
    // The common case x[mask] with a mask over every dim: masked_select.
    if (n_adv == 1 && advanced.size() == 1 && advanced[0]->dim() == result.dim() && result.dim() > 0) {
      return Call1("masked_select", {result, *advanced[0]}, {}, CallMode::kAny, site);
    }
    // General case: each mask becomes its nonzero() coordinates.
    std::vector<std::optional<Tensor>> expanded;
    for (size_t d = 0; d < advanced.size(); ++d) {
      if (!advanced[d].has_value() || advanced[d]->dtype() != ScalarType::kBool) {
        expanded.push_back(advanced[d]);
        continue;
      }
      const Tensor& mask = *advanced[d];
      TD_ASSIGN_OR_RETURN(Tensor nz, Call1("nonzero", {mask}, {}, CallMode::kAny, site));
      for (int64_t j = 0; j < std::max<int64_t>(mask.dim(), 1); ++j) {
        TD_ASSIGN_OR_RETURN(Tensor col, Call1("select.int", {nz, 1, j}, {}, CallMode::kAny, site));
        expanded.push_back(col);
      }
    }
    advanced = std::move(expanded);
  }
  return Call1("index.Tensor", {result, Arg::OptionalTensors{std::move(advanced)}}, {}, CallMode::kAny, site);
}

// ---------------------------------------------------------------- helpers

absl::StatusOr<Tensor> Zeros(Shape sizes, ScalarType dtype, std::optional<Device> device, CallSite site) {
  return Call1("zeros", {std::move(sizes)}, {{"dtype", dtype}, {"device", device ? Arg(*device) : Arg()}},
               CallMode::kFunction, std::move(site));
}
absl::StatusOr<Tensor> Ones(Shape sizes, ScalarType dtype, std::optional<Device> device, CallSite site) {
  return Call1("ones", {std::move(sizes)}, {{"dtype", dtype}, {"device", device ? Arg(*device) : Arg()}},
               CallMode::kFunction, std::move(site));
}
absl::StatusOr<Tensor> Randn(Shape sizes, ScalarType dtype, std::optional<Device> device, CallSite site) {
  return Call1("randn", {std::move(sizes)}, {{"dtype", dtype}, {"device", device ? Arg(*device) : Arg()}},
               CallMode::kFunction, std::move(site));
}
absl::StatusOr<Tensor> Arange(Scalar end, std::optional<ScalarType> dtype, std::optional<Device> device,
                              CallSite site) {
  return Call1("arange", {end}, {{"dtype", dtype ? Arg(*dtype) : Arg()}, {"device", device ? Arg(*device) : Arg()}},
               CallMode::kFunction, std::move(site));
}
absl::StatusOr<Tensor> Add(const Tensor& a, const Tensor& b, CallSite site) {
  return Call1("add.Tensor", Args(a, b), {}, CallMode::kAny, std::move(site));
}
absl::StatusOr<Tensor> Mul(const Tensor& a, const Tensor& b, CallSite site) {
  return Call1("mul.Tensor", Args(a, b), {}, CallMode::kAny, std::move(site));
}
absl::StatusOr<Tensor> Matmul(const Tensor& a, const Tensor& b, CallSite site) {
  return Call1("matmul", Args(a, b), {}, CallMode::kAny, std::move(site));
}
absl::StatusOr<Tensor> T(const Tensor& a, CallSite site) { return Call1("t", Args(a), {}, CallMode::kAny, std::move(site)); }
absl::StatusOr<Tensor> Sum(const Tensor& a, std::optional<std::vector<int64_t>> dim, bool keepdim, CallSite site) {
  return Call1("sum", {a, dim ? Arg(*dim) : Arg(), keepdim}, {}, CallMode::kAny, std::move(site));
}
absl::StatusOr<Tensor> Reshape(const Tensor& a, Shape shape, CallSite site) {
  return Call1("reshape", {a, std::move(shape)}, {}, CallMode::kAny, std::move(site));
}
absl::StatusOr<Tensor> To(const Tensor& a, ScalarType dtype, CallSite site) {
  return Call1("to.dtype", Args(a, dtype), {}, CallMode::kAny, std::move(site));
}
absl::StatusOr<Tensor> To(const Tensor& a, Device device, CallSite site) {
  return Call1("to.device", Args(a, device), {}, CallMode::kAny, std::move(site));
}

absl::StatusOr<Tensor> FloorDivide(const Tensor& a, const Arg& b, CallSite site) {
  return Call1("floor_divide", Args(a, b), {}, CallMode::kAny, std::move(site));
}

}  // namespace tensord::client
