// The dispatcher: validate -> meta (or the session's meta cache) -> allocate
// or alias -> kernel on the outputs' device -> record for autograd. Knows no
// protobuf and no device API: devices are reached through their Backend.
#include "tensord/runtime/dispatcher.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <new>
#include <random>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "tensord/meta/errors.h"
#include "tensord/meta/op_registry.h"
#include "tensord/runtime/artifacts.h"
#include "tensord/meta/schema.h"

namespace tensord::runtime {

absl::Status DeviceUnavailable(absl::string_view op, const Device& d, const Backends& served) {
  if (d.is_meta()) {
    return NotImplementedErr(absl::StrCat(op, ": tensors on device 'meta' exist only in the client (meta mode); "
                                              "the daemon does not run ops on them"));
  }
  return NotImplementedErr(
      absl::StrCat(op, ": device '", d.ToString(), "' is not available: this daemon serves ", served.Names()));
}

namespace {

// A kernel's scratch memory charged to the session's account, so temporaries
// (im2col buffers, contiguous copies of expanded inputs) obey the limit.
// Scratch lives on the kernel's device.
class SessionScratch final : public ScratchAllocator {
 public:
  SessionScratch(MemoryAccount* memory, const Backend* device, absl::string_view op)
      : memory_(memory), device_(device), op_(op) {}
  absl::StatusOr<std::shared_ptr<char>> Allocate(int64_t bytes) override {
    absl::StatusOr<std::shared_ptr<Storage>> st =
        memory_->Allocate(device_->allocator(), bytes, op_, /*zero_fill=*/false);
    if (!st.ok()) return st.status();
    char* p = (*st)->data();
    return std::shared_ptr<char>(*std::move(st), p);  // shares the Storage's ownership
  }

 private:
  MemoryAccount* memory_;
  const Backend* device_;
  absl::string_view op_;
};

absl::Status RunKernel(KernelFn fn, KernelContext& ctx, absl::string_view op, MemoryAccount* memory,
                       const Backend* device, Stream* stream) {
  SessionScratch scratch(memory, device, op);
  ScopedScratchAllocator scoped(&scratch);
  try {
    return stream->Launch(fn, ctx);
  } catch (const std::bad_alloc&) {
    return OutOfMemoryErr(absl::StrCat(op, ": out of memory inside the kernel"));
  } catch (const std::exception& e) {
    return InternalErr(absl::StrCat(op, ": the ", ctx.device.ToString(), " kernel failed: ", e.what()));
  } catch (...) {
    return InternalErr(absl::StrCat(op, ": the ", ctx.device.ToString(), " kernel failed with an unknown exception"));
  }
}

// An artifact's kernel reaches RunKernel (and the stream's Launch, which
// fills in ctx.stream) as this one KernelFn: KernelFn is a plain function
// pointer, so the kernel it stands for travels beside it, in a slot of the
// calling thread set for the one call (Launch calls its KernelFn on the
// calling thread).
thread_local const ArtifactKernel* current_artifact_kernel = nullptr;

class CurrentArtifactKernel {
 public:
  explicit CurrentArtifactKernel(const ArtifactKernel* k) : prev_(current_artifact_kernel) {
    current_artifact_kernel = k;
  }
  ~CurrentArtifactKernel() { current_artifact_kernel = prev_; }
  CurrentArtifactKernel(const CurrentArtifactKernel&) = delete;
  CurrentArtifactKernel& operator=(const CurrentArtifactKernel&) = delete;

 private:
  const ArtifactKernel* prev_;
};

absl::Status ArtifactKernelTrampoline(KernelContext& ctx) {
  if (current_artifact_kernel == nullptr) return InternalErr("an artifact kernel ran without its binding");
  return RunArtifactKernel(*current_artifact_kernel, ctx);
}

// A kernel's private copy of the bytes [begin, end) of an input's storage
// (see DispatchInto): of a client-writable one (`shared`, written back
// after an in-place op), or of one on another device than the kernel's
// (`shared` null). `base` is what the kernel is given as the storage's start.
struct PrivateInput {
  const TensorMeta* meta = nullptr;
  Storage* shared = nullptr;
  std::shared_ptr<Storage> copy;
  char* base = nullptr;
  int64_t begin = 0;
  int64_t end = 0;
};

}  // namespace

const std::string& FullName(const OpEntry& op, std::string& scratch) {
  static const std::vector<std::string>* names = [] {
    auto* v = new std::vector<std::string>;
    for (const OpEntry& e : OpTable::Get().entries()) v->push_back(e.full_name());
    return v;
  }();
  if (op.id < names->size() && &OpTable::Get().at(op.id) == &op) return (*names)[op.id];
  scratch = op.full_name();
  return scratch;
}

bool WrittenReturn(const OpEntry& op, size_t i) {
  if (i >= op.return_aliases.size()) return false;
  const int a = op.return_aliases[i];
  return a >= 0 && static_cast<size_t>(a) < op.schema.arguments.size() && op.schema.arguments[a].is_write;
}

Dispatcher::Dispatcher(const Backends* devices, std::shared_ptr<MemoryAccount> memory)
    : devices_(devices), memory_(std::move(memory)), streams_(devices, memory_->id()) {}

absl::StatusOr<std::shared_ptr<Storage>> Dispatcher::Allocate(const Backend& on, int64_t nbytes, absl::string_view op,
                                                              bool zero_fill) {
  TD_RETURN_IF_ERROR(streams_.For(on).status());
  return memory_->Allocate(on.allocator(), nbytes, op, zero_fill);
}

Generator& Dispatcher::generator(const Device& device) {
  for (auto& [d, g] : generators_) {
    if (d == device) return *g;
  }
  auto g = std::make_unique<Generator>();
  if (manual_seed_.has_value()) {
    g->engine.seed(*manual_seed_);
    return *generators_.emplace_back(device, std::move(g)).second;
  }
  // Seeded from the OS's random source, not from anything a client or a log
  // reader can see (the session id is logged): its numbers must not be
  // predictable by anyone but the session. tensord.manual_seed replaces the
  // seed as in PyTorch.
  uint32_t words[8];
  size_t got = 0;
  while (got < sizeof(words)) {
    const ssize_t n = ::getrandom(reinterpret_cast<char*>(words) + got, sizeof(words) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  if (got < sizeof(words)) {
    std::random_device os;  // kernels without getrandom(2): /dev/urandom
    for (uint32_t& w : words) w = os();
  }
  std::seed_seq seq(std::begin(words), std::end(words));
  g->engine.seed(seq);
  return *generators_.emplace_back(device, std::move(g)).second;
}

void Dispatcher::ManualSeed(uint64_t seed) {
  manual_seed_ = seed;
  for (auto& [d, g] : generators_) g->engine.seed(seed);
}

absl::StatusOr<std::vector<Tensor>> Dispatcher::RunOp(absl::string_view full_name, std::vector<Arg> args, bool record) {
  const bool defined_at_run_time = IsExtensionOpName(full_name);
  const OpEntry* op = !defined_at_run_time       ? OpTable::Get().Find(full_name)
                      : extension_ops_ != nullptr ? extension_ops_->Find(full_name)
                                                  : nullptr;
  if (op == nullptr && defined_at_run_time) {
    return RuntimeErr(absl::StrCat("autograd needs op '", full_name, "', which this session has not defined"));
  }
  if (op == nullptr) {
    return InternalErr(absl::StrCat("autograd needs op '", full_name, "', which is not in this daemon's op table"));
  }
  const FunctionSchema& schema = op->schema;
  if (args.size() > schema.arguments.size()) {
    return InternalErr(absl::StrCat("autograd called ", full_name, " with ", args.size(), " arguments; it takes ",
                                    schema.arguments.size()));
  }
  // The argument tensors, moved out of `args` into stable addresses for the
  // metas the values point at: reserved for all of them up front, so no
  // push_back moves them (a formula's call runs this per op of a backward).
  size_t n_tensors = 0;
  for (const Arg& g : args) n_tensors += g.kind == Arg::Kind::kTensor ? 1 : g.list.size();
  absl::InlinedVector<Tensor, 4> holders;
  holders.reserve(n_tensors);
  std::vector<Tensor*> inputs;
  inputs.reserve(n_tensors);
  std::vector<Value> vals;
  vals.reserve(schema.arguments.size());
  for (size_t i = 0; i < schema.arguments.size(); ++i) {
    const Argument& a = schema.arguments[i];
    if (i >= args.size()) {
      if (a.default_value.has_value()) {
        vals.push_back(*a.default_value);
      } else if (a.optional) {
        vals.emplace_back();
      } else {
        return InternalErr(absl::StrCat("autograd called ", full_name, " without its argument '", a.name, "'"));
      }
      continue;
    }
    Arg& g = args[i];
    switch (g.kind) {
      case Arg::Kind::kTensor:
        if (!g.tensor.defined()) {
          vals.emplace_back();
          break;
        }
        if (g.tensor.failed()) return FailedInput(g.tensor.error);
        holders.push_back(std::move(g.tensor));
        inputs.push_back(&holders.back());
        vals.emplace_back(&holders.back().meta);
        break;
      case Arg::Kind::kTensorList: {
        TensorList l;
        for (Tensor& t : g.list) {
          if (!t.defined()) {
            l.push_back(nullptr);
            continue;
          }
          if (t.failed()) return FailedInput(t.error);
          holders.push_back(std::move(t));
          inputs.push_back(&holders.back());
          l.push_back(&holders.back().meta);
        }
        vals.emplace_back(std::move(l));
        break;
      }
      case Arg::Kind::kValue: {
        Value v = std::move(g.value);
        const Value::Kind k = v.kind();
        if (a.type == ArgType::kIntList && k == Value::Kind::kInt) {
          v = Value(Shape{v.to_int()});
        } else if (a.type == ArgType::kScalar && (k == Value::Kind::kInt || k == Value::Kind::kFloat ||
                                                  k == Value::Kind::kBool)) {
          v = Value(v.scalar());
        } else if (a.type == ArgType::kFloat && k == Value::Kind::kInt) {
          v = Value(static_cast<double>(v.to_int()));
        }
        vals.push_back(std::move(v));
        break;
      }
    }
  }
  return Dispatch(*op, std::move(vals), inputs, record, nullptr);
}

absl::StatusOr<std::vector<Tensor>> Dispatcher::Dispatch(const OpEntry& op, const std::vector<Value>& args,
                                                     const std::vector<Tensor*>& inputs, bool record,
                                                     std::vector<TensorMeta>* metas_on_failure) {
  std::string name_scratch;
  std::vector<Tensor> outs;
  TD_RETURN_IF_ERROR(DispatchInto(op, FullName(op, name_scratch), args, inputs, record, metas_on_failure, outs));
  return outs;
}

absl::Status Dispatcher::DispatchInto(const OpEntry& opr, const std::string& op_name, const std::vector<Value>& args,
                                   const std::vector<Tensor*>& inputs, bool record,
                                   std::vector<TensorMeta>* metas_on_failure, std::vector<Tensor>& outs) {
  const OpEntry* op = &opr;
  const OpTable& table = OpTable::Get();
  const FunctionSchema& schema = op->schema;
  const bool inplace = op->is_inplace();
  outs.clear();
  auto fail = [&](absl::Status s) -> absl::Status {
    if (metas_on_failure != nullptr) {
      metas_on_failure->clear();
      for (const Tensor& t : outs) metas_on_failure->push_back(t.meta);
    }
    return s;
  };
  auto find_input = [&](const TensorMeta* m) -> Tensor* {
    for (Tensor* t : inputs) {
      if (&t->meta == m) return t;
    }
    return nullptr;
  };

  TD_RETURN_IF_ERROR(ValidateArgs(schema, args));
  for (const Value& v : args) {
    if (v.kind() == Value::Kind::kDevice && devices_->Find(v.device()) == nullptr) {
      return DeviceUnavailable(op_name, v.device(), *devices_);
    }
  }
  for (const Tensor* t : inputs) {
    if (t->failed()) return t->error->status;
    if (t->storage == nullptr) return InternalErr(absl::StrCat(op_name, ": an input tensor has no storage"));
  }

  // In-place ops: the autograd checks come before anything runs.
  Tensor* self = nullptr;
  Tensor self_before;
  bool will_record = false;
  if (inplace) {
    self = find_input(args[0].tensor_ptr());
    if (self == nullptr) return InternalErr(absl::StrCat(op_name, ": self is not among the inputs"));
    will_record = record && !op->has(kNotDifferentiable) && AnyDifferentiableInputRequiresGrad(*op, args, inputs);
    if (will_record) {
      if (self->ag != nullptr && self->ag->is_leaf() && self->ag->requires_grad) {
        return RuntimeErr("a leaf Variable that requires grad is being used in an in-place operation.");
      }
      if (self->ag != nullptr && self->ag->is_view) {
        return NotImplementedErr(absl::StrCat(op_name, ": an in-place operation on a view of a tensor that "
                                              "requires grad is not supported by tensord's autograd; clone() the "
                                              "view first"));
      }
      if (InplaceNeedsOriginalSelf(*op)) {
        const OpEntry* clone = table.Find("clone");
        if (clone == nullptr) return InternalErr("autograd needs op 'clone', which is not in the op table");
        std::vector<Tensor*> in = {self};
        TD_ASSIGN_OR_RETURN(std::vector<Tensor> c, Dispatch(*clone, {Value(&self->meta)}, in, false, nullptr));
        self_before = std::move(c[0]);
        self_before.ag = self->ag;  // the clone stands for self as it was (same history)
      }
    }
  }

  const bool data_dependent = op->has(kDataDependent);
  bool need_kernel = data_dependent || inplace;
  // Per output: the argument it writes and returns (an in-place op's self),
  // else nullptr.
  absl::InlinedVector<Tensor*, 3> written;
  int64_t n_out = static_cast<int64_t>(schema.returns.size());
  if (data_dependent) {
    outs.reserve(n_out);
  } else {
    // A repeated call (same op, same argument metadata) is answered from
    // the session's meta cache; a new one runs the meta function.
    MetaCache::Entry* cached = meta_cache_.Find(*op, args);
    if (cached == nullptr) {
      absl::StatusOr<MetaResult> computed = table.RunMeta(*op, args);
      if (!computed.ok()) return fail(computed.status());
      cached = meta_cache_.Insert(*std::move(computed));
    }
    const MetaResult* r = &cached->result;
    // The output metas' own checks passed for this very result before: a
    // repeated call skips them (they depend on the metas alone).
    const bool checked = cached->outputs_checked;
    if (r->alias_of.size() != r->outputs.size() ||
        (!schema.returns.empty() && schema.returns[0].type != ArgType::kTensorList &&
         r->outputs.size() != schema.returns.size())) {
      return fail(InternalErr(absl::StrCat(op_name, ": the meta function returned ", r->outputs.size(),
                                           " outputs for ", schema.returns.size(), " returns")));
    }
    n_out = static_cast<int64_t>(r->outputs.size());
    outs.resize(r->outputs.size());
    written.assign(r->outputs.size(), nullptr);
    for (size_t i = 0; i < r->outputs.size(); ++i) outs[i].meta = r->outputs[i];
    // `r` stays valid through the loop below (nothing in it runs another op).
    for (size_t i = 0; i < outs.size(); ++i) {
      const TensorMeta& m = outs[i].meta;
      if (!checked) {
        if (!m.Validate("").ok()) return fail(m.Validate(absl::StrCat(op_name, ": output ", i)));
        if (devices_->Find(m.device) == nullptr) return fail(DeviceUnavailable(op_name, m.device, *devices_));
      }
      absl::StatusOr<int64_t> need = m.StorageBytesNeeded();
      if (!need.ok()) return fail(need.status());
      const int a = r->alias_of[i];
      if (a >= 0) {
        // A view (or self, for an in-place op): share the aliased argument's
        // storage, if the view fits in it.
        if (static_cast<size_t>(a) >= args.size() || !args[a].is_tensor()) {
          return fail(InternalErr(absl::StrCat(op_name, ": output ", i, " aliases argument ", a,
                                               ", which is not a tensor")));
        }
        Tensor* src = find_input(args[a].tensor_ptr());
        if (src == nullptr || src->storage == nullptr) {
          return fail(InternalErr(absl::StrCat(op_name, ": output ", i, " aliases an unknown input")));
        }
        // An empty view addresses nothing: any offset is valid (PyTorch's
        // computeStorageNbytes is 0 for it), e.g. split's last piece of size 0.
        if (m.numel() > 0 && *need > src->storage->nbytes()) {
          return fail(RuntimeErr(absl::StrCat(op_name, ": output ", i, " (sizes ", ShapeToString(m.sizes),
                                              ", strides ", ShapeToString(m.strides), ", storage_offset ",
                                              m.storage_offset, ") needs ", *need, " bytes of storage, but the storage "
                                              "of argument '", schema.arguments[a].name, "' holds ",
                                              src->storage->nbytes(), " bytes")));
        }
        if (WrittenReturn(*op, i) && op->return_aliases[i] == a) {
          if (m != src->meta) {
            return fail(InternalErr(absl::StrCat(op_name, ": the in-place result's meta ", m.ToString(),
                                                 " differs from argument '", schema.arguments[a].name, "''s ",
                                                 src->meta.ToString())));
          }
          outs[i] = *src;  // same storage, same identity
          if (outs[i].ag == nullptr) {
            src->ag = std::make_shared<AutogradMeta>();
            outs[i].ag = src->ag;
          }
          written[i] = src;
        } else {
          outs[i].storage = src->storage;
          outs[i].ag = std::make_shared<AutogradMeta>();
          // A differentiable view (detach's result is not one: it may be
          // written in place freely, as in PyTorch).
          outs[i].ag->is_view = !op->has(kNotDifferentiable);
        }
      } else {
        // A structured kernel writes every element of its outputs (the
        // contract in kernels/registry.h): a dense output that starts at the
        // storage's first byte is then overwritten entirely, so its storage
        // needs no zeroing. Anything with gaps (empty_strided) is zeroed.
        const bool covers_storage = m.storage_offset == 0 && m.is_non_overlapping_and_dense() &&
                                    *need == SaturatingBytes(m.numel(), m.itemsize());
        const Backend* on = devices_->Find(m.device);
        if (on == nullptr) return fail(DeviceUnavailable(op_name, m.device, *devices_));
        absl::StatusOr<std::shared_ptr<Storage>> st = Allocate(*on, *need, op_name, !covers_storage);
        if (!st.ok()) return fail(st.status());
        outs[i].storage = *std::move(st);
        outs[i].ag = std::make_shared<AutogradMeta>();
        need_kernel = true;
      }
    }
    cached->outputs_checked = true;
  }

  if (need_kernel) {
    // The op runs where its outputs are (meta puts every output on the
    // device of the op's tensors, or of its device argument); an op with no
    // output known yet (a data-dependent one) where its first input is.
    Device where = kCPU;
    if (!outs.empty()) {
      where = outs[0].meta.device;
    } else if (!inputs.empty()) {
      where = inputs[0]->storage->device();
      // No meta function ran (a data-dependent op): its inputs' devices are
      // checked here, in PyTorch's words.
      for (const Tensor* t : inputs) {
        if (t->storage->device() != where) {
          return fail(TwoDevicesError(op_name, where, t->storage->device()));
        }
      }
    }
    const Backend* backend = devices_->Find(where);
    if (backend == nullptr) return fail(DeviceUnavailable(op_name, where, *devices_));
    KernelFn fn = backend->FindKernel(op->id);
    const ArtifactKernel* artifact_kernel = nullptr;
    if (fn == nullptr && op->id >= kFirstExtensionOpId && artifact_kernels_) {
      // The test device runs the CPU's kernels, an artifact's too.
      artifact_kernel = artifact_kernels_(op->id, where.is_cuda() ? DeviceType::kCUDA : DeviceType::kCPU);
      if (artifact_kernel != nullptr) fn = &ArtifactKernelTrampoline;
    }
    if (fn == nullptr && op->id >= kFirstExtensionOpId && artifact_kernels_ &&
        (artifact_kernels_(op->id, DeviceType::kCPU) != nullptr ||
         artifact_kernels_(op->id, DeviceType::kCUDA) != nullptr)) {
      return fail(NotImplementedErr(absl::StrCat(op_name, ": its kernel artifact has no kernel for device ",
                                                 where.ToString())));
    }
    if (fn == nullptr) {
      return fail(NotImplementedErr(absl::StrCat(
          op_name, ": no kernel for device ", where.ToString(),
          IsExtensionOpName(op_name) ? " (an op defined with tensord.library.define has a shape rule and no "
                                       "kernel: it runs on meta tensors only)"
                                     : "")));
    }
    absl::StatusOr<Stream*> stream = streams_.For(*backend);  // the session's, on the kernel's device
    if (!stream.ok()) return fail(stream.status());
    // An input whose storage is an adopted shared-memory segment stays
    // writable by the client while the kernel runs. Kernels validate index
    // values, masks and counts in one pass and use them in another
    // (index_add, index_put, masked_scatter; nonzero counts then writes), so
    // a client flipping such a value between the passes would make the
    // daemon read or write out of bounds. The kernel gets a private copy of
    // every such input whose values can steer addresses: integral and bool
    // dtypes (whatever view made them so), and every input of a
    // data-dependent op (its output's size comes from the values). Float
    // inputs of other ops stay zero-copy: no kernel derives an address from
    // a float value (topk sorts a private copy of its slice), so a changing
    // float changes only that session's results. Refusing to adopt integral
    // uploads instead would leave the daemon depending on each kernel's
    // care and on the client's choice of path; the copy here covers every
    // kernel, every path to a tensor, and in-place ops (written back after).
    absl::InlinedVector<PrivateInput, 2> privates;
    for (const Tensor* t : inputs) {
      if (!t->storage->client_writable() || t->meta.numel() == 0) continue;
      if (!data_dependent && !IsIntegral(t->meta.dtype, /*include_bool=*/true)) continue;
      if (std::any_of(privates.begin(), privates.end(), [&](const PrivateInput& p) { return p.meta == &t->meta; })) {
        continue;  // the same tensor passed twice
      }
      absl::StatusOr<int64_t> end = t->meta.StorageBytesNeeded();
      if (!end.ok()) return fail(end.status());
      PrivateInput p;
      p.meta = &t->meta;
      p.shared = t->storage.get();
      p.begin = t->meta.storage_offset * t->meta.itemsize();  // strides are >= 0: the lowest byte addressed
      p.end = *end;
      // Adopted memory is the CPU's (a client's shared-memory segment).
      absl::StatusOr<std::shared_ptr<Storage>> copy =
          memory_->Allocate(devices_->cpu()->allocator(), p.end - p.begin, op_name, false);
      if (!copy.ok()) return fail(copy.status());
      p.copy = *std::move(copy);
      std::memcpy(p.copy->data(), p.shared->data() + p.begin, static_cast<size_t>(p.end - p.begin));
      // The kernel adds storage_offset * itemsize to the base it is given:
      // that lands on the copy's first byte.
      p.base = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(p.copy->data()) - static_cast<uintptr_t>(p.begin));
      privates.push_back(std::move(p));
    }
    // An input on another device (past meta only for ops that move data
    // between devices: to, copy_'s src) reaches the kernel as a copy, on the
    // kernel's device, of the bytes it addresses, made by the devices'
    // copies; the kernel then copies within its device.
    for (const Tensor* t : inputs) {
      if (t->storage->device() == where || t->meta.numel() == 0) continue;
      if (std::any_of(privates.begin(), privates.end(), [&](const PrivateInput& p) { return p.meta == &t->meta; })) {
        continue;
      }
      const Backend* from = devices_->Find(t->storage->device());
      if (from == nullptr) return fail(DeviceUnavailable(op_name, t->storage->device(), *devices_));
      absl::StatusOr<int64_t> end = t->meta.StorageBytesNeeded();
      if (!end.ok()) return fail(end.status());
      PrivateInput p;
      p.meta = &t->meta;
      p.begin = t->meta.storage_offset * t->meta.itemsize();
      p.end = std::max(*end, p.begin);
      absl::StatusOr<std::shared_ptr<Storage>> copy =
          memory_->Allocate(backend->allocator(), p.end - p.begin, op_name, false);
      if (!copy.ok()) return fail(copy.status());
      p.copy = *std::move(copy);
      if (absl::Status s = CopyBetween(streams_, *from, t->storage->data() + p.begin, *backend, p.copy->data(),
                                      static_cast<size_t>(p.end - p.begin), *memory_, op_name);
          !s.ok()) {
        return fail(s);
      }
      p.base = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(p.copy->data()) - static_cast<uintptr_t>(p.begin));
      privates.push_back(std::move(p));
    }
    auto private_base = [&privates](const TensorMeta* m) -> char* {
      for (const PrivateInput& p : privates) {
        if (p.meta == m) return p.base;
      }
      return nullptr;
    };
    KernelContext ctx;
    ctx.op = op;
    ctx.device = where;
    // ctx.stream: set by the stream's Launch.
    ctx.args = args;
    ctx.input_base = [&inputs, &private_base](const TensorMeta* m) -> char* {
      if (char* p = private_base(m)) return p;
      for (const Tensor* t : inputs) {
        if (&t->meta == m) return t->storage->data();
      }
      return nullptr;
    };
    for (size_t i = 0; i < outs.size(); ++i) {
      // An in-place op's output 0 is self: its storage and its very meta
      // (or self's private copy, written back when the kernel succeeds).
      const TensorMeta* m = written[i] != nullptr ? &written[i]->meta : &outs[i].meta;
      char* base = written[i] != nullptr ? private_base(m) : nullptr;
      ctx.outputs.push_back(TensorRef{base != nullptr ? base : outs[i].storage->data(), m});
    }
    auto allocate = [&](const TensorMeta& asked) -> absl::StatusOr<TensorRef> {
      if (outs.size() >= static_cast<size_t>(n_out)) {
        return InternalErr(absl::StrCat(op_name, ": the kernel allocated more than the ", n_out, " outputs"));
      }
      // The kernel says the output's sizes, strides and dtype; it lives on
      // the kernel's device, whichever device the kernel's meta names (the
      // CPU's kernels also run for the test device).
      TensorMeta m = asked;
      m.device = where;
      TD_RETURN_IF_ERROR(m.Validate(absl::StrCat(op_name, ": output ", outs.size())));
      if (m.numel() > 0 && !m.is_non_overlapping_and_dense()) {
        return InternalErr(absl::StrCat(op_name, ": a kernel allocated ", m.ToString(), " (not dense)"));
      }
      TD_ASSIGN_OR_RETURN(int64_t need, m.StorageBytesNeeded());
      TD_ASSIGN_OR_RETURN(std::shared_ptr<Storage> st, memory_->Allocate(backend->allocator(), need, op_name));
      Tensor t;
      t.meta = m;
      t.storage = std::move(st);
      t.ag = std::make_shared<AutogradMeta>();
      outs.push_back(std::move(t));  // capacity reserved: earlier metas stay put
      TensorRef ref{outs.back().storage->data(), &outs.back().meta};
      ctx.outputs.push_back(ref);
      return ref;
    };
    // One pointer captured either way: fits std::function's inline storage.
    if (data_dependent) {
      ctx.allocate_output = [a = &allocate](const TensorMeta& m) { return (*a)(m); };
    } else {
      ctx.allocate_output = [name = &op_name](const TensorMeta&) -> absl::StatusOr<TensorRef> {
        return InternalErr(absl::StrCat(*name, ": allocate_output called by a structured kernel"));
      };
    }
    // Only random ops draw (their kernels refuse a null generator): others
    // make no generator, nor look one up.
    ctx.generator = op->has(kRandom) ? &generator(where) : nullptr;
    ctx.math = math_mode_;
    CurrentArtifactKernel current(artifact_kernel);
    if (absl::Status s = RunKernel(fn, ctx, op_name, memory_.get(), backend, *stream); !s.ok()) {
      for (Tensor* w : written) {
        if (w != nullptr && w->storage != nullptr) w->storage->bump_version();
      }
      return fail(s);
    }
    if (outs.size() != static_cast<size_t>(n_out)) {
      return fail(InternalErr(absl::StrCat(op_name, ": the kernel produced ", outs.size(), " outputs, expected ",
                                           n_out)));
    }
    for (size_t i = 0; i < written.size() && !privates.empty(); ++i) {
      if (written[i] == nullptr) continue;
      for (const PrivateInput& p : privates) {
        if (p.shared != nullptr && p.meta == &written[i]->meta) {
          std::memcpy(p.shared->data() + p.begin, p.copy->data(), static_cast<size_t>(p.end - p.begin));
        }
      }
    }
  }
  for (size_t i = 0; i < written.size() && i < outs.size(); ++i) {
    if (written[i] == nullptr) continue;
    written[i]->storage->bump_version();
    outs[i].meta = written[i]->meta;
  }
  ops_executed_.store(ops_executed_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // one writer

  if (record && !op->has(kNotDifferentiable)) {
    TD_RETURN_IF_ERROR(RecordNode(*op, args, inputs, outs, self_before.defined() ? &self_before : nullptr));
  }
  return absl::OkStatus();
}

}  // namespace tensord::runtime
